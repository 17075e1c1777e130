"""Threaded against serial decoding of the same scans, interleaved in one process.

The realistic table of ``bench_realistic.py`` (written by lance_format at 2.2, one fragment, or
``--fragments`` of them) is scanned round after round, each workload once with the decode pool
(``LANCE_CPU_THREADS`` threads, default the core count) and once inside ``serial_decoding()``;
both see the same machine load. Prints the fastest and median wall and CPU seconds of each mode,
and serial / threaded wall (the speed-up) and threaded / serial CPU (the threads' overhead).
Results are checked equal first.

    python benchmarks/bench_scan_threads.py [--rows 1000000] [--rounds 9] [--fragments 1]

On a machine whose other cores are busy the threads have nothing to overlap on: read the
figures together with the load (printed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from bench_realistic import realistic_table, touch

import lance_format
from lance_format.encodings.structural import accel
from lance_format.io.decode_pool import cpu_threads, serial_decoding


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--fragments", type=int, default=1)
    args = parser.parse_args()
    accel.use_compiled(True)
    root = tempfile.mkdtemp(prefix="bench-threads-")
    uri = os.path.join(root, "t.lance")
    try:
        lance_format.write_dataset(realistic_table(args.rows), uri, data_storage_version="2.2",
                                   max_rows_per_file=-(-args.rows // args.fragments))
        ds = lance_format.dataset(uri)
        take_rows = np.random.default_rng(9).choice(args.rows, 1000, replace=False).tolist()
        workloads: dict[str, Callable[[], Any]] = {
            "full scan": lambda: ds.to_table(),
            "url column": lambda: ds.to_table(columns=["url"]),
            "filter": lambda: ds.to_table(filter="cat = 'echo' AND x > 0.5"),
            "take 1000": lambda: ds.take(take_rows),
        }
        print(f"{args.rows:,} rows, {args.fragments} fragment(s), {cpu_threads()} decode threads, "
              f"load {os.getloadavg()[0]:.1f}, {args.rounds} interleaved rounds")
        print(f"{'workload':12s} {'serial wall':>11s} {'cpu':>6s} {'threaded wall':>13s} {'cpu':>6s} "
              f"{'speed-up':>8s} {'(median)':>8s} {'cpu overhead':>12s}")
        for name, scan in workloads.items():
            threaded_result = scan()
            with serial_decoding():
                assert scan().equals(threaded_result), name
            times: dict[str, tuple[list[float], list[float]]] = {"serial": ([], []), "threaded": ([], [])}
            for _ in range(args.rounds):
                for mode, (walls, cpus) in times.items():
                    start, cpu = time.perf_counter(), time.process_time()
                    if mode == "serial":
                        with serial_decoding():
                            touch(scan())
                    else:
                        touch(scan())
                    walls.append(time.perf_counter() - start)
                    cpus.append(time.process_time() - cpu)
            (sw, sc), (tw, tc) = times["serial"], times["threaded"]
            print(f"{name:12s} {min(sw):11.3f} {min(sc):6.3f} {min(tw):13.3f} {min(tc):6.3f} "
                  f"{min(sw) / min(tw):8.2f} {statistics.median(sw) / statistics.median(tw):8.2f} "
                  f"{min(tc) / min(sc):12.2f}")
        print(f"load after: {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
