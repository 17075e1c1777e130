"""DuckDB over a Lance table: lance_format's dataset against pylance's, same files, same queries.

DuckDB scans a ``pyarrow.dataset.Dataset`` with the query's projection and filter pushed into
``scanner(columns=..., filter=<pyarrow expression>)``; both engines' datasets are such
datasets. The table (written once by pylance, 10M rows by default: a sequential id, a skewed
category, an amount, a timestamp, an e-mail address) is queried with aggregates behind
selective filters; each query runs alternately on both sides, and the best of ``--repeat`` runs
counts for each side.

    nice python benchmarks/bench_duckdb.py [--rows 10000000] [--repeat 3] [--table /tmp/t.lance]

Prints each query's best wall seconds on both sides and ours / pylance (goal: at most 1.0x),
the same for CPU seconds (all threads; steadier when other work shares the machine), and
checks that both sides give the same answer. Nothing is asserted on timings.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

QUERIES = {
    # 1% of the rows by a range of the id (DuckDB pushes `id >= .. AND id < ..`)
    "id range, group by category": (
        "SELECT category, count(*) AS n, round(sum(amount), 2) AS total FROM ds "
        "WHERE id >= 4000000 AND id < 4100000 GROUP BY category ORDER BY category"),
    # a rare category (0.1% of the rows) by string equality
    "rare category": (
        "SELECT count(*) AS n, round(sum(amount), 2) AS total, max(ts) AS latest FROM ds WHERE category = 'rare'"),
}
_CATEGORIES = pa.array(["web", "store", "phone", "partner", "rare"])
_WEIGHTS = np.array([0.6, 0.25, 0.1, 0.049, 0.001])
_CHUNK = 1_000_000


def _batches(rows: int) -> Iterator[pa.RecordBatch]:
    rng = np.random.default_rng(7)
    start = np.datetime64("2024-01-01T00:00:00", "us")
    for first in range(0, rows, _CHUNK):
        n = min(_CHUNK, rows - first)
        ids = np.arange(first, first + n, dtype=np.int64)
        users = rng.integers(0, 200_000, n)
        yield pa.record_batch({
            "id": ids,
            "category": _CATEGORIES.take(pa.array(rng.choice(len(_WEIGHTS), n, p=_WEIGHTS))),
            "amount": np.round(rng.gamma(2.0, 30.0, n), 2),
            "ts": pa.array(start + ids * 1_000_000, pa.timestamp("us", tz="UTC")),
            "email": pc.binary_join_element_wise("user", pa.array(users).cast(pa.string()), "@example.com", ""),
        })


def _write(path: str, rows: int) -> None:
    import lance

    schema = next(_batches(1)).schema
    lance.write_dataset(pa.RecordBatchReader.from_batches(schema, _batches(rows)), path)


def _run(duckdb: Any, ds: Any, sql: str) -> tuple[float, float, list[tuple[Any, ...]]]:
    """(wall seconds, CPU seconds of all threads, the answer) of one query."""
    started, cpu = time.perf_counter(), time.process_time()
    con = duckdb.connect()
    con.register("ds", ds)  # the same replacement-scan path as `FROM ds` on a local variable
    rows = con.sql(sql).fetchall()
    con.close()
    return time.perf_counter() - started, time.process_time() - cpu, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--table", help="the table's path (written there first if missing)")
    args = parser.parse_args()

    import duckdb
    import lance

    import lance_format

    table = args.table or os.path.join(tempfile.mkdtemp(prefix="bench-duckdb-"), "t.lance")
    if not os.path.exists(table):
        started = time.perf_counter()
        _write(table, args.rows)
        print(f"wrote {args.rows} rows with pylance in {time.perf_counter() - started:.1f}s: {table}")
    ours, theirs = lance_format.dataset(table), lance.dataset(table)
    print(f"{ours.count_rows()} rows, {len(ours.get_fragments())} fragment(s); lance_format from "
          f"{os.path.dirname(lance_format.__file__)}")
    for name, sql in QUERIES.items():
        best = {"ours": float("inf"), "pylance": float("inf")}
        cpu = {"ours": float("inf"), "pylance": float("inf")}
        answers = {}
        for _ in range(args.repeat):
            for side, ds in (("ours", ours), ("pylance", theirs)):
                seconds, cpu_seconds, answers[side] = _run(duckdb, ds, sql)
                best[side] = min(best[side], seconds)
                cpu[side] = min(cpu[side], cpu_seconds)
        same = answers["ours"] == answers["pylance"]
        print(f"{name}: ours {best['ours']:.3f}s, pylance {best['pylance']:.3f}s, "
              f"ours/pylance {best['ours'] / best['pylance']:.2f}x (CPU {cpu['ours']:.3f}s / {cpu['pylance']:.3f}s = "
              f"{cpu['ours'] / cpu['pylance']:.2f}x), answers {'agree' if same else 'DIFFER'}")
        if not same:
            print(f"  ours:    {answers['ours']}\n  pylance: {answers['pylance']}")


if __name__ == "__main__":
    main()
