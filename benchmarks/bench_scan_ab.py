"""Interleaved A/B of lance_format's full scan: two source trees, one pylance-written table.

Compares the scan of two checkouts of this repository (e.g. a baseline commit in a separate
``git worktree`` against the working tree) on the realistic table of ``bench_realistic.py``,
written by pylance. Each side runs in its own long-lived worker process (``PYTHONPATH`` = its
tree); the parent alternates A, B, A, B, ... so both sides see the same machine load, and the
fastest of ``--repeat`` rounds counts for each. The scan touches every byte (``touch``).

    git worktree add /tmp/base 8d76709
    python benchmarks/bench_scan_ab.py --a /tmp/base --b . [--rows 1000000] [--repeat 5]

Prints each side's best and median seconds, wall and CPU (all threads; steadier when other
work shares the machine), and B / A. Nothing here is asserted: timings on a
shared machine are for people to read, not for tests.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

_WORKER = r"""
import sys, time
sys.path.insert(0, sys.argv[1])  # the benchmarks folder, for touch()
from bench_realistic import touch
import lance_format
path, columns = sys.argv[2], None
print("ready " + lance_format.__file__, flush=True)
for line in sys.stdin:
    ds = lance_format.dataset(path)
    start, cpu = time.perf_counter(), time.process_time()
    touch(ds.to_table())
    print(time.perf_counter() - start, time.process_time() - cpu, flush=True)
"""


def _worker(tree: str, table: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    proc = subprocess.Popen([sys.executable, "-c", _WORKER, os.path.dirname(os.path.abspath(__file__)), table],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                            cwd=os.path.abspath(tree))  # python -c puts the working directory first on sys.path
    assert proc.stdout is not None
    ready = proc.stdout.readline().strip()
    print(f"{tree}: {ready}")
    if not ready.startswith("ready " + os.path.abspath(tree)):
        raise SystemExit(f"the worker for {tree} imported another lance_format: {ready}")
    return proc


def _run(proc: subprocess.Popen[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one scan; CPU time (all threads) is steadier on a busy machine."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("scan\n")
    proc.stdin.flush()
    wall, cpu = proc.stdout.readline().split()
    return float(wall), float(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="source tree of side A (the baseline)")
    parser.add_argument("--b", default=".", help="source tree of side B (default: this tree)")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--version", default="2.2")
    parser.add_argument("--table", help="reuse a table already written here")
    args = parser.parse_args()

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    table = args.table
    if table is None or not os.path.exists(table):
        import lance
        from bench_realistic import realistic_table

        table = table or os.path.join(tempfile.mkdtemp(prefix="bench-ab-"), "pylance.lance")
        lance.write_dataset(realistic_table(args.rows), table, data_storage_version=args.version)
    sides = {"A": _worker(args.a, table), "B": _worker(args.b, table)}
    times: dict[str, list[tuple[float, float]]] = {"A": [], "B": []}
    for side in sides:  # one warm-up each (page cache, imports)
        _run(sides[side])
    for _ in range(args.repeat):
        for side, proc in sides.items():
            times[side].append(_run(proc))
    for proc in sides.values():
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait()
    for kind, index in (("wall", 0), ("cpu", 1)):
        series = {side: [t[index] for t in times[side]] for side in sides}
        for side in sides:
            print(f"{kind} {side}: best {min(series[side]):.4f} s, median {statistics.median(series[side]):.4f} s  "
                  f"({', '.join(f'{t:.3f}' for t in series[side])})")
        print(f"{kind} B / A: best {min(series['B']) / min(series['A']):.3f}, "
              f"median {statistics.median(series['B']) / statistics.median(series['A']):.3f}")


if __name__ == "__main__":
    main()
