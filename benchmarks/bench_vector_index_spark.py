"""Vector index build on Spark: ``lance_format.spark.create_index`` vs the engine's single-process
``LanceDataset.create_index`` vs pylance's ``create_index``, on the same table.

Writes (with pylance) ``--rows`` x ``--dim`` float32 embeddings drawn around 256 cluster centres
in fragments of ``--rows-per-file`` rows, copies it once per builder, and for each index type of
``--types`` times the three builds (same ``--partitions``, ``--sub-vectors``, ``--max-iters``),
then measures recall@10 of each index searched by pylance with ``--nprobes`` against its exact
search. For the two lance_format builds it also reports the driver's peak traced Python/numpy
memory (``tracemalloc``: the Spark driver holds only the sample and the model; the executors'
memory is their own). Spark runs ``local[N]`` (``--master``).

    python benchmarks/bench_vector_index_spark.py [--rows 200000] [--dim 64] [--rows-per-file 25000]
        [--types IVF_FLAT,IVF_PQ,IVF_SQ] [--partitions 64] [--sub-vectors 16] [--max-iters 20]
        [--nprobes 8] [--queries 50] [--master local[2]]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa

import lance_format


def _embeddings(rows: int, dim: int, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=3.0, size=(256, dim)).astype(np.float32)
    return centers[rng.integers(0, 256, rows)] + rng.normal(size=(rows, dim)).astype(np.float32)


def _recall(uri: str, queries: np.ndarray, nprobes: int) -> float:
    ds = lance.dataset(uri)
    hits = 0
    for q in queries:
        truth = ds.to_table(columns=["id"], nearest={"column": "vec", "q": q, "k": 10, "use_index": False})
        got = ds.to_table(columns=["id"], nearest={"column": "vec", "q": q, "k": 10, "nprobes": nprobes})
        hits += len(set(truth.column("id").to_pylist()) & set(got.column("id").to_pylist()))
    return hits / (10 * len(queries))


def _timed(build, traced: bool) -> tuple[float, float | None]:
    if traced:
        tracemalloc.start()
    started = time.perf_counter()
    build()
    seconds = time.perf_counter() - started
    peak = None
    if traced:
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    return seconds, peak


def _build(spark, who: str, uri: str, index_type: str, params: dict) -> None:
    from lance_format.spark import create_index

    if who == "spark":
        create_index(spark, uri, "vec", index_type, **params)
    elif who == "engine":
        lance_format.dataset(uri).create_index("vec", index_type, **params)
    else:
        lance.dataset(uri).create_index("vec", index_type, **params)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--rows-per-file", type=int, default=25_000)
    parser.add_argument("--types", default="IVF_FLAT,IVF_PQ,IVF_SQ")
    parser.add_argument("--partitions", type=int, default=64)
    parser.add_argument("--sub-vectors", type=int, default=16)
    parser.add_argument("--max-iters", type=int, default=20)
    parser.add_argument("--nprobes", type=int, default=8)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from lance_format.spark import create_index

    spark = (SparkSession.builder.master(args.master).config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "4").config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    vectors = _embeddings(args.rows, args.dim)
    rng = np.random.default_rng(11)
    queries = vectors[rng.choice(args.rows, args.queries, replace=False)] + rng.normal(
        scale=0.3, size=(args.queries, args.dim)).astype(np.float32)
    root = Path(tempfile.mkdtemp(prefix="bench-vecspark-"))
    try:
        source = str(root / "source.lance")
        column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), args.dim)
        lance.write_dataset(pa.table({"id": np.arange(args.rows), "vec": column}), source,
                            max_rows_per_file=args.rows_per_file)
        fragments = len(lance.dataset(source).get_fragments())
        print(f"{args.rows} x {args.dim} float32 in {fragments} fragments; Spark {args.master}; "
              f"{args.partitions} partitions, max_iters {args.max_iters}, recall@10 by pylance at nprobes "
              f"{args.nprobes}")
        # warm the session's Python workers once (their first lance_format import is not part of a
        # build: a long-running session pays it once), timed on its own
        warm = str(root / "warm.lance")
        lance.write_dataset(pa.table({"id": np.arange(2000), "vec": column[:2000]}), warm, max_rows_per_file=500)
        seconds, _ = _timed(lambda: create_index(spark, warm, "vec", "IVF_FLAT", num_partitions=4), False)
        print(f"first Spark build of the session (2000 rows, cold Python workers): {seconds:.2f} s")
        for index_type in [t.strip().upper() for t in args.types.split(",") if t.strip()]:
            params = {"num_partitions": args.partitions, "max_iters": args.max_iters}
            if "PQ" in index_type:
                params["num_sub_vectors"] = args.sub_vectors
            results = {}
            for who in ("spark", "engine", "pylance"):
                uri = str(root / f"{index_type}-{who}.lance")
                shutil.copytree(source, uri)
                seconds, peak = _timed(lambda u=uri, w=who, t=index_type, p=params: _build(spark, w, u, t, p),
                                       who != "pylance")
                results[who] = (seconds, peak, _recall(uri, queries, args.nprobes))
                shutil.rmtree(uri)
            line = [f"{index_type:9s}"]
            for who, (seconds, peak, recall) in results.items():
                memory = f", driver peak {peak:.0f} MiB" if peak is not None else ""
                line.append(f"{who} {seconds:6.2f} s (recall {recall:.3f}{memory})")
            spark_s, engine_s, py_s = (results[w][0] for w in ("spark", "engine", "pylance"))
            line.append(f"spark/engine {spark_s / engine_s:.2f}x, spark/pylance {spark_s / py_s:.2f}x")
            print(" | ".join(line), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        spark.stop()


if __name__ == "__main__":
    main()
