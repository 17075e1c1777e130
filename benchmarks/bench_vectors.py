"""Vector search benchmark (flat search part): lance_format's exact ``nearest`` vs pylance's flat
search (``use_index=False``) on the same table.

Writes (with pylance) ``--rows`` x ``--dim`` float32 embeddings drawn around 256 cluster centres,
then times, for each engine, opening the table afresh once:

* single-query latency: ``--queries`` different queries one by one (``k=10``), p50 and p90;
* batch throughput: one scan with ``--batch`` query vectors at once (``q`` a 2-D array), as
  queries per second (best of ``--repeat``);

and checks that both return the same row ids. Ratios printed: our p50 / pylance's (goal at most
1.0) and our batch throughput / pylance's (goal at least 1.0).

With ``--build IVF_FLAT,IVF_PQ,IVF_SQ`` it then times building each vector index type with each
engine on a copy of the table (``--partitions``, ``--sub-vectors`` for PQ) and measures recall@10
of both indices, searched by pylance with ``--nprobes``, against the exact results.

    python benchmarks/bench_vectors.py [--rows 100000] [--dim 128] [--queries 30] [--batch 100]
                                       [--metric l2] [--repeat 3] [--keep DIR]
                                       [--build IVF_FLAT,IVF_PQ,IVF_SQ] [--partitions 64]
                                       [--sub-vectors 16] [--nprobes 8] [--skip-search]
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


def _recall(uri: str, queries: np.ndarray, exact: list[list[int]], metric: str, nprobes: int) -> float:
    ds = lance.dataset(uri)
    hits = 0
    for q, truth in zip(queries, exact, strict=True):
        table = ds.to_table(columns=["id"], nearest={"column": "vec", "q": q, "k": 10, "metric": metric,
                                                      "nprobes": nprobes})
        hits += len(set(table.column("id").to_pylist()) & set(truth))
    return hits / (10 * len(queries))


def _builds(root: Path, uri: str, queries: np.ndarray, args: argparse.Namespace) -> None:
    """Build time per type, ours vs pylance, and recall@10 of both indices (searched by pylance)."""
    exact = [lance.dataset(uri).to_table(columns=["id"], nearest={
        "column": "vec", "q": q, "k": 10, "metric": args.metric, "use_index": False}).column("id").to_pylist()
        for q in queries]
    print(f"index builds: {args.partitions} partitions, metric={args.metric}, recall@10 at nprobes={args.nprobes}")
    for index_type in args.build.split(","):
        params: dict = {"num_partitions": args.partitions, "metric": args.metric}
        if "PQ" in index_type:
            params["num_sub_vectors"] = args.sub_vectors
        row = {}
        for name, module in (("ours", lance_format), ("pylance", lance)):
            copy = str(root / f"{index_type}_{name}.lance")
            shutil.copytree(uri, copy)
            started = time.perf_counter()
            module.dataset(copy).create_index("vec", index_type, **params)
            row[name] = (time.perf_counter() - started, _recall(copy, queries, exact, args.metric, args.nprobes))
            shutil.rmtree(copy, ignore_errors=True)
        (ours_s, ours_r), (theirs_s, theirs_r) = row["ours"], row["pylance"]
        print(f"  {index_type:9s} build ours={ours_s:7.2f} s pylance={theirs_s:7.2f} s ratio={ours_s / theirs_s:6.2f}  "
              f"recall@10 ours={ours_r:.3f} pylance={theirs_r:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--metric", default="l2")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", help="write the table here and keep it")
    parser.add_argument("--build", default="", help="vector index types to build, comma-separated")
    parser.add_argument("--partitions", type=int, default=64)
    parser.add_argument("--sub-vectors", type=int, default=16)
    parser.add_argument("--nprobes", type=int, default=8)
    parser.add_argument("--skip-search", action="store_true", help="only the index builds")
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
        if args.build:
            _builds(root, uri, queries, args)
        if args.skip_search:
            return
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


# --- indexed search (issue #31, read side): kept apart from the flat/build parts above --------------

def bench_indexed_queries(rows: int = 100_000, dim: int = 128, queries: int = 50, batch: int = 100,
                          partitions: int = 64, sub_vectors: int = 16, nprobes: int = 8, refine_factor: int | None = None,
                          metric: str = "l2", repeat: int = 3, keep: str | None = None) -> dict[str, float]:
    """Indexed ``nearest`` latency on a pylance-built IVF_PQ: lance_format vs pylance on the same
    index (``nprobes``, ``k=10``): p50/p90 of single queries (after a warm-up that loads the index
    in both engines) and the throughput of one ``batch``-query scan (best of ``repeat``); prints
    the ratios and each engine's recall@10 against the exact answer. Returns the figures.

        python benchmarks/bench_vectors.py --indexed [--rows 100000] [--dim 128] [--nprobes 8]
    """
    root = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="bench_vectors_ivf_"))
    uri = str(root / "vectors_ivf_pq.lance")
    try:
        vectors = _embeddings(rows, dim)
        if not Path(uri).exists():
            _write(uri, vectors)
            lance.dataset(uri).create_index("vec", "IVF_PQ", num_partitions=partitions,
                                            num_sub_vectors=sub_vectors, metric=metric)
        rng = np.random.default_rng(2)
        singles = vectors[rng.integers(0, rows, queries)] + rng.normal(scale=0.5, size=(queries, dim)).astype(np.float32)
        many = vectors[rng.integers(0, rows, batch)] + rng.normal(scale=0.5, size=(batch, dim)).astype(np.float32)
        nearest = {"column": "vec", "k": 10, "nprobes": nprobes, "metric": metric} | (
            {"refine_factor": refine_factor} if refine_factor else {})
        figures: dict[str, float] = {}
        answers: dict[str, list[list[int]]] = {}
        for name, module in (("ours", lance_format), ("pylance", lance)):
            ds = module.dataset(uri)
            for q in singles[:3]:  # warm: the index is read once and kept, in both engines
                ds.to_table(columns=["id"], nearest=nearest | {"q": q})
            times, ids = [], []
            for q in singles:
                started = time.perf_counter()
                ids.append(ds.to_table(columns=["id"], nearest=nearest | {"q": q}).column("id").to_pylist())
                times.append(time.perf_counter() - started)
            best = float("inf")
            for _ in range(repeat):
                started = time.perf_counter()
                ds.to_table(columns=["id"], nearest=nearest | {"q": many})
                best = min(best, time.perf_counter() - started)
            figures[f"{name}_p50_ms"] = float(np.percentile(times, 50) * 1e3)
            figures[f"{name}_p90_ms"] = float(np.percentile(times, 90) * 1e3)
            figures[f"{name}_batch_qps"] = batch / best
            answers[name] = ids
        exact = lance_format.dataset(uri)
        truth = [set(exact.to_table(columns=["id"], nearest={"column": "vec", "q": q, "k": 10, "metric": metric,
                                                               "use_index": False}).column("id").to_pylist())
                 for q in singles]
        for name in answers:
            figures[f"{name}_recall"] = float(np.mean([len(set(a) & t) / 10 for a, t in zip(answers[name], truth)]))
        same = sum(a == b for a, b in zip(answers["ours"], answers["pylance"]))
        print(f"IVF_PQ {rows} x {dim} float32, {partitions} partitions, {sub_vectors} sub-vectors, metric={metric}, "
              f"nprobes={nprobes}, refine_factor={refine_factor}, k=10; same row ids on {same}/{queries} queries")
        for name in ("ours", "pylance"):
            print(f"  {name:8s} single p50={figures[f'{name}_p50_ms']:7.2f} ms p90={figures[f'{name}_p90_ms']:7.2f} ms"
                  f"  batch of {batch}: {figures[f'{name}_batch_qps']:9.1f} q/s  recall@10={figures[f'{name}_recall']:.3f}")
        figures["ratio_p50"] = figures["ours_p50_ms"] / figures["pylance_p50_ms"]
        figures["ratio_batch"] = figures["ours_batch_qps"] / figures["pylance_batch_qps"]
        print(f"  ratio p50 ours/pylance = {figures['ratio_p50']:.2f} (goal <= 1.0); "
              f"batch throughput ours/pylance = {figures['ratio_batch']:.2f} (goal >= 1.0)")
        return figures
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def _indexed_main() -> None:
    parser = argparse.ArgumentParser(description=bench_indexed_queries.__doc__)
    parser.add_argument("--indexed", action="store_true")
    for name, default in (("rows", 100_000), ("dim", 128), ("queries", 50), ("batch", 100), ("partitions", 64),
                          ("sub-vectors", 16), ("nprobes", 8), ("refine-factor", 0), ("repeat", 3)):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--metric", default="l2")
    parser.add_argument("--keep")
    args = parser.parse_args()
    bench_indexed_queries(args.rows, args.dim, args.queries, args.batch, args.partitions, args.sub_vectors,
                          args.nprobes, args.refine_factor or None, args.metric, args.repeat, args.keep)


if __name__ == "__main__":
    import sys

    _indexed_main() if "--indexed" in sys.argv else main()
