"""Scalar index benchmark (issue #30's "Must show"): lance_format vs pylance, in one run.

Writes (with pylance) a table of ``--rows`` rows: ``id`` (unique int64, shuffled), ``cat``
(skewed 20-value string), ``tags`` (list<string>, 0-3 labels of 50). Then, per engine, on its own
copy: build time per index type (BTREE on id, BITMAP on cat, LABEL_LIST on tags), and query times
with the index for a point lookup, ``id IN`` 1,000 keys, a 0.1% range, a bitmap equality and a
label-list ``array_has_any``; plus our own full scan of each query (``use_scalar_index=False``).
Each engine's one-time start-up is paid before the clock (a small write). Each query time is
the best of ``--repeat`` runs on a freshly opened dataset; the printed ratios
are ours / pylance (lower is better) and full scan / index (higher is better).

``--clock cpu`` times with the process's CPU time (every thread's) instead of the wall clock:
steadier on a shared machine, where the wall clock mostly measures the other processes.

    python benchmarks/bench_indices.py [--rows 10000000] [--repeat 3] [--fragments 10] [--clock cpu]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import lance as pylance
import numpy as np
import pyarrow as pa

import lance_format
from lance_format.encodings.structural import accel

INDICES = [("id", "BTREE"), ("cat", "BITMAP"), ("tags", "LABEL_LIST")]


def make_table(rows: int) -> pa.Table:
    rng = np.random.default_rng(30)
    cats = np.array([f"https://host{i}.example.com/" for i in range(20)], dtype=object)
    weights = 1.0 / np.arange(1, 21)
    labels = np.array([f"label{i}" for i in range(50)], dtype=object)
    counts = rng.integers(0, 4, rows)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    tags = pa.ListArray.from_arrays(pa.array(offsets), pa.array(rng.choice(labels, int(offsets[-1]))))
    return pa.table({"id": rng.permutation(rows).astype(np.int64),
                     "cat": pa.array(rng.choice(cats, rows, p=weights / weights.sum())), "tags": tags})


def queries(rows: int) -> dict[str, str]:
    keys = ", ".join(str(k) for k in np.random.default_rng(1).choice(rows, 1000, replace=False))
    width = max(1, rows // 1000)
    return {"point": f"id = {rows // 3}", "in_1000": f"id IN ({keys})",
            "range_0.1%": f"id >= {rows // 2} AND id < {rows // 2 + width}",
            "bitmap_eq": "cat = 'https://host7.example.com/'",
            "label_list": "array_has_any(tags, ['label3'])"}


CLOCK = time.perf_counter


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = CLOCK()
        fn()
        times.append(CLOCK() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--fragments", type=int, default=10)
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    args = parser.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    work = Path(tempfile.mkdtemp(prefix="bench_indices_"))
    try:
        table = make_table(args.rows)
        per_file = -(-args.rows // args.fragments)
        uris = {name: str(work / f"{name}.lance") for name in ("pylance", "ours")}
        for uri in uris.values():
            pylance.write_dataset(table, uri, max_rows_per_file=per_file)
        del table
        engines = {"pylance": pylance.dataset, "ours": lance_format.dataset}
        # each engine's one-time start-up before the clock: our compiled kernels (numba's import
        # and cache loads, ~0.5-1 s of CPU, as in bench_realistic) are loaded by a small write and
        # read of the same column types; pylance's library has written the tables
        accel.use_compiled(True)
        warm = str(work / "warm.lance")
        lance_format.write_dataset(make_table(20_000).append_column("u", pa.array(np.arange(20_000), pa.uint64())), warm)
        lance_format.dataset(warm).to_table()
        build: dict[tuple[str, str], float] = {}
        for engine, open_ in engines.items():
            for column, kind in INDICES:
                ds = open_(uris[engine])
                start = CLOCK()
                ds.create_scalar_index(column, kind)
                build[engine, kind] = CLOCK() - start
        print(f"rows={args.rows:,} fragments={args.fragments} clock={args.clock}")
        print(f"{'build':<12}{'pylance s':>11}{'ours s':>10}{'ours/py':>9}")
        for _, kind in INDICES:
            py, us = build["pylance", kind], build["ours", kind]
            print(f"{kind:<12}{py:>11.3f}{us:>10.3f}{us / py:>9.2f}")
        print(f"{'query':<12}{'rows':>9}{'pylance s':>11}{'ours s':>10}{'ours/py':>9}{'our scan s':>12}"
              f"{'scan/idx':>10}")
        for label, flt in queries(args.rows).items():
            rows = {e: open_(uris[e]).to_table(filter=flt).num_rows for e, open_ in engines.items()}
            assert rows["pylance"] == rows["ours"], (label, rows)
            py = best(lambda flt=flt: pylance.dataset(uris["pylance"]).to_table(filter=flt), args.repeat)
            us = best(lambda flt=flt: lance_format.dataset(uris["ours"]).to_table(filter=flt), args.repeat)
            scan = best(lambda flt=flt: lance_format.dataset(uris["ours"]).to_table(filter=flt, use_scalar_index=False),
                        args.repeat)
            print(f"{label:<12}{rows['ours']:>9,}{py:>11.4f}{us:>10.4f}{us / py:>9.2f}{scan:>12.4f}"
                  f"{scan / us:>10.1f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
