"""Vector search benchmark (flat search part): lance_format's exact ``nearest`` vs pylance's flat
search (``use_index=False``) on the same table.

Writes (with pylance) ``--rows`` x ``--dim`` float32 embeddings drawn around 256 cluster centres,
then times, for each engine, opening the table afresh once:

* single-query latency: ``--queries`` different queries one by one (``k=10``), p50 and p90;
* batch throughput: one scan with ``--batch`` query vectors at once (``q`` a 2-D array), as
  queries per second (best of ``--repeat``);

and checks that both return the same row ids. Ratios printed: our p50 / pylance's (goal at most
1.0) and our batch throughput / pylance's (goal at least 1.0).

    python benchmarks/bench_vectors.py [--rows 100000] [--dim 128] [--queries 30] [--batch 100]
                                       [--metric l2] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa

import lance_format


def _embeddings(rows: int, dim: int, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=3.0, size=(256, dim)).astype(np.float32)
    return centers[rng.integers(0, 256, rows)] + rng.normal(size=(rows, dim)).astype(np.float32)


def _write(uri: str, vectors: np.ndarray) -> None:
    column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), vectors.shape[1])
    lance.write_dataset(pa.table({"id": np.arange(len(vectors)), "vec": column}), uri)


def _single(module, uri: str, queries: np.ndarray, metric: str) -> tuple[list[float], list[list[int]]]:
    ds = module.dataset(uri)
    times, ids = [], []
    for q in queries:
        started = time.perf_counter()
        table = ds.to_table(columns=["id"], nearest={"column": "vec", "q": q, "k": 10, "metric": metric,
                                                      "use_index": False})
        times.append(time.perf_counter() - started)
        ids.append(table.column("id").to_pylist())
    return times, ids


def _batch(module, uri: str, queries: np.ndarray, metric: str, repeat: int) -> tuple[float, list[int]]:
    ds = module.dataset(uri)
    best = float("inf")
    ids: list[int] = []
    for _ in range(repeat):
        started = time.perf_counter()
        table = ds.to_table(columns=["id"], nearest={"column": "vec", "q": queries, "k": 10, "metric": metric,
                                                      "use_index": False})
        best = min(best, time.perf_counter() - started)
        ids = table.column("id").to_pylist()
    return len(queries) / best, ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--metric", default="l2")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", help="write the table here and keep it")
    args = parser.parse_args()
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench_vectors_"))
    uri = str(root / "vectors.lance")
    try:
        vectors = _embeddings(args.rows, args.dim)
        if not Path(uri).exists():
            _write(uri, vectors)
        rng = np.random.default_rng(1)
        queries = vectors[rng.integers(0, args.rows, args.queries)] + rng.normal(
            scale=0.5, size=(args.queries, args.dim)).astype(np.float32)
        batch = vectors[rng.integers(0, args.rows, args.batch)] + rng.normal(
            scale=0.5, size=(args.batch, args.dim)).astype(np.float32)
        _single(lance_format, uri, queries[:2], args.metric)  # warm both (page cache, imports)
        _single(lance, uri, queries[:2], args.metric)
        ours_t, ours_ids = _single(lance_format, uri, queries, args.metric)
        theirs_t, theirs_ids = _single(lance, uri, queries, args.metric)
        ours_qps, ours_batch = _batch(lance_format, uri, batch, args.metric, args.repeat)
        theirs_qps, theirs_batch = _batch(lance, uri, batch, args.metric, args.repeat)
        same = ours_ids == theirs_ids and ours_batch == theirs_batch
        print(f"{args.rows} x {args.dim} float32, metric={args.metric}, k=10, same results: {same}")
        for name, times in (("ours", ours_t), ("pylance", theirs_t)):
            print(f"  single query {name:8s} p50={np.percentile(times, 50) * 1e3:8.2f} ms  "
                  f"p90={np.percentile(times, 90) * 1e3:8.2f} ms")
        print(f"  batch of {args.batch}  ours={ours_qps:9.1f} q/s  pylance={theirs_qps:9.1f} q/s")
        print(f"  ratio p50 ours/pylance = {np.percentile(ours_t, 50) / np.percentile(theirs_t, 50):.2f} "
              "(goal <= 1.0)")
        print(f"  ratio batch throughput ours/pylance = {ours_qps / theirs_qps:.2f} (goal >= 1.0)")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
