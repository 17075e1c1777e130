"""Write and full-scan benchmark of file version 2.0: lance_format vs official Lance (pylance).

A shortcut for ``bench_versions.py --version 2.0`` (the general script compares any of 2.0,
2.1 and 2.2; same options).

    python benchmarks/bench_v2_0.py [--rows 5000000] [--vector-rows 1000000] [--batch 65536] [--repeat 3]
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_versions import main, scalar_batches, vector_batches  # noqa: E402

__all__ = ["main", "scalar_batches", "vector_batches"]

if __name__ == "__main__":
    main(default_versions=("2.0",))
