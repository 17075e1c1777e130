"""Write and full-scan benchmark: lance_format vs official Lance (pylance), per file version.

For each requested file version (2.0, 2.1, 2.2) and each table (5M rows of int64/float64/string,
1M rows of 128-d float32 vectors) both engines write the same generated data, then each scans
its own table. Every measurement runs in a fresh subprocess (so its peak RSS is its own) and is
repeated ``--repeat`` times; the fastest run counts, which filters out noise from other load on
the machine. Prints seconds, ratios (ours / pylance), peak memory and the on-disk size ratio.

    python benchmarks/bench_versions.py [--version 2.2 --version 2.0] [--rows 5000000]
        [--vector-rows 1000000] [--batch 65536] [--repeat 3] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def scalar_batches(rows: int, batch: int):
    rng = np.random.default_rng(1)
    schema = pa.schema([("id", pa.int64()), ("value", pa.float64()), ("name", pa.string())])
    for start in range(0, rows, batch):
        n = min(batch, rows - start)
        ids = np.arange(start, start + n, dtype=np.int64)
        names = pc.binary_join_element_wise("user_", pa.array(ids % 100_000).cast(pa.string()), "")
        yield pa.record_batch([pa.array(ids), pa.array(rng.standard_normal(n)), names], schema=schema)


def vector_batches(rows: int, batch: int):
    rng = np.random.default_rng(2)
    schema = pa.schema([("id", pa.int64()), ("vector", pa.list_(pa.float32(), 128))])
    for start in range(0, rows, batch):
        n = min(batch, rows - start)
        flat = pa.array(rng.random(n * 128, dtype=np.float32))
        yield pa.record_batch(
            [pa.array(np.arange(start, start + n, dtype=np.int64)), pa.FixedSizeListArray.from_arrays(flat, 128)],
            schema=schema,
        )


def _reader(kind: str, rows: int, batch: int) -> pa.RecordBatchReader:
    gen = scalar_batches(rows, batch) if kind == "scalar" else vector_batches(rows, batch)
    first = next(gen)

    def chain():
        yield first
        yield from gen

    return pa.RecordBatchReader.from_batches(first.schema, chain())


def _touch(batch: pa.RecordBatch) -> int:
    """Read one byte per 4 KiB page of every buffer, so lazily mapped data is really loaded."""
    total = 0
    for column in batch.columns:
        for buf in column.buffers():
            if buf is not None and buf.size:
                total += int(np.frombuffer(buf, dtype=np.uint8)[::4096].sum())
    return total


def run_one(engine: str, op: str, kind: str, uri: str, rows: int, batch: int, version: str) -> dict:
    """Runs inside the child process."""
    if engine == "pylance":
        import lance as lib
    else:
        import lance_format as lib
    start = time.perf_counter()
    if op == "write":
        lib.write_dataset(_reader(kind, rows, batch), uri, mode="overwrite", data_storage_version=version)
        count = rows
    else:
        count = 0
        for b in lib.dataset(uri).to_batches(batch_size=batch):
            count += b.num_rows
            _touch(b)
    seconds = time.perf_counter() - start
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": seconds, "rows": count, "peak_mib": peak_mib}


def measure(engine: str, op: str, kind: str, uri: str, rows: int, batch: int, version: str, repeat: int) -> dict:
    best = None
    for _ in range(max(1, repeat)):
        cmd = [sys.executable, os.path.abspath(__file__), "--child", engine, op, kind, uri, str(rows), str(batch), version]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        result = json.loads(out.strip().splitlines()[-1])
        if best is None or result["seconds"] < best["seconds"]:
            best = result
    return best


def dir_size(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def run(versions: list[str], rows: int, vector_rows: int, batch: int, repeat: int) -> list[dict]:
    root = tempfile.mkdtemp(prefix="lance-bench-")
    results = []
    try:
        print(f"{'version':7} {'table':7} {'op':6} {'rows':>9} {'ours s':>8} {'lance s':>8} {'ratio':>6} "
              f"{'ours MiB':>9} {'lance MiB':>9} {'size ratio':>10}")
        for version in versions:
            for kind, n in (("scalar", rows), ("vector", vector_rows)):
                uris = {e: os.path.join(root, f"{version}-{kind}-{e}.lance") for e in ("ours", "pylance")}
                for op in ("write", "scan"):
                    res = {e: measure(e, op, kind, uris[e], n, batch, version, repeat) for e in ("ours", "pylance")}
                    assert res["ours"]["rows"] == res["pylance"]["rows"] == n
                    sizes = {e: dir_size(uris[e]) for e in uris}
                    row = {
                        "version": version, "table": kind, "op": op, "rows": n,
                        "ours_s": res["ours"]["seconds"], "pylance_s": res["pylance"]["seconds"],
                        "ratio": res["ours"]["seconds"] / res["pylance"]["seconds"],
                        "ours_mib": res["ours"]["peak_mib"], "pylance_mib": res["pylance"]["peak_mib"],
                        "size_ratio": sizes["ours"] / sizes["pylance"],
                    }
                    results.append(row)
                    print(f"{version:7} {kind:7} {op:6} {n:9d} {row['ours_s']:8.2f} {row['pylance_s']:8.2f} "
                          f"{row['ratio']:6.2f} {row['ours_mib']:9.0f} {row['pylance_mib']:9.0f} "
                          f"{row['size_ratio']:10.2f}", flush=True)
                for uri in uris.values():
                    shutil.rmtree(uri, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return results


def main(argv: list[str] | None = None, default_versions: tuple[str, ...] = ("2.2", "2.0")) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="append", choices=["2.0", "2.1", "2.2"],
                        help="file version to compare (repeatable; default: 2.2 and 2.0)")
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--vector-rows", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=65536)
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; the fastest counts")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--child", nargs=7, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        engine, op, kind, uri, rows, batch, version = args.child
        print(json.dumps(run_one(engine, op, kind, uri, int(rows), int(batch), version)))
        return
    results = run(args.version or list(default_versions), args.rows, args.vector_rows, args.batch, args.repeat)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
