"""``lance_format.spark.nearest`` (the distributed exact k-NN join) against the engine's own batch
search in one process (``to_table(nearest={"q": all queries})``), on the same table and queries.

A table of ``--rows`` clustered float32 vectors of ``--dim`` dimensions (with a URL-like string
column), ``--queries`` query vectors, ``k=--k``, l2. Prints wall and CPU seconds (this process and
its descendants: the JVM and its Python workers) of each side, after checking that both return
the same row ids per query. The first Spark run warms up (Python workers, imports) and is not
counted.

    python benchmarks/bench_nearest_join.py [--rows 200000] [--dim 64] [--queries 2000] [--k 10]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import lance_format  # noqa: E402


def cpu() -> float:
    """CPU seconds of this process and its live descendants (the JVM, its Python workers; read
    from /proc) plus finished children."""
    ticks = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    used: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        used[int(entry)] = (int(fields[11]) + int(fields[12])) / ticks
    family, frontier = {os.getpid()}, [os.getpid()]
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid and child not in family:
                family.add(child)
                frontier.append(child)
    finished = resource.getrusage(resource.RUSAGE_CHILDREN)
    return sum(used.get(p, 0.0) for p in family) + finished.ru_utime + finished.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    centers = rng.normal(scale=4, size=(64, args.dim))
    vectors = (centers[rng.integers(0, 64, args.rows)] + rng.normal(size=(args.rows, args.dim))).astype(np.float32)
    queries = (centers[rng.integers(0, 64, args.queries)] + rng.normal(size=(args.queries, args.dim))).astype(np.float32)
    folder = tempfile.mkdtemp(prefix="bench-nearest-")
    uri = os.path.join(folder, "items.lance")
    table = pa.table({"id": np.arange(args.rows), "url": [f"https://example.com/{i % 997}/{i}" for i in range(args.rows)],
                      "vec": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), args.dim)})
    lance_format.write_dataset(table, uri, max_rows_per_file=50_000)

    t0, c0 = time.perf_counter(), cpu()
    engine = lance_format.dataset(uri).to_table(nearest={"column": "vec", "q": queries, "k": args.k},
                                                columns=["id"], with_row_id=True)
    engine_wall, engine_cpu = time.perf_counter() - t0, cpu() - c0
    expected = {}
    for qi, rid in zip(engine["query_index"].to_pylist(), engine["_rowid"].to_pylist()):
        expected.setdefault(qi, []).append(rid)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from lance_format.spark import nearest

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    qdf = spark.createDataFrame(pa.table({"qid": np.arange(args.queries),
                                          "vector": pa.array(list(queries), pa.list_(pa.float32()))}))
    qdf = qdf.cache()
    qdf.count()

    def run() -> pa.Table:
        return nearest(spark, uri, qdf, "vec", args.k, columns=["id"], query_id_column="qid", with_row_id=True,
                       queries_per_task=1000, rows_per_split=100_000).toArrow()

    run()  # warm-up
    t0, c0 = time.perf_counter(), cpu()
    got = run()
    spark_wall, spark_cpu = time.perf_counter() - t0, cpu() - c0
    mine: dict[int, list] = {}
    for qid, rid, _distance in sorted(zip(got["qid"].to_pylist(), got["_rowid"].to_pylist(), got["_distance"].to_pylist()),
                                 key=lambda r: (r[0], r[2], r[1])):
        mine.setdefault(qid, []).append(rid)
    same = all(mine.get(q) == rows for q, rows in expected.items())
    print(f"rows={args.rows} dim={args.dim} queries={args.queries} k={args.k} same_rows={same}")
    print(f"engine to_table (1 process): wall {engine_wall:.2f}s cpu {engine_cpu:.2f}s")
    print(f"spark nearest (local[2]):    wall {spark_wall:.2f}s cpu {spark_cpu:.2f}s")
    spark.stop()


if __name__ == "__main__":
    main()
