"""Write and full-scan benchmark: lance_format vs official Lance (pylance), file version 2.0.

Each measurement runs in a fresh subprocess so its peak RSS is its own. Data is generated in
batches by a seeded generator, so both engines see identical input and neither has to hold
the whole table. Prints seconds, ratios (ours / pylance) and peak memory.

    python benchmarks/bench_v2_0.py [--rows 5000000] [--vector-rows 1000000] [--batch 65536]
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


def scalar_batches(rows: int, batch: int):
    rng = np.random.default_rng(1)
    schema = pa.schema([("id", pa.int64()), ("value", pa.float64()), ("name", pa.string())])
    for start in range(0, rows, batch):
        n = min(batch, rows - start)
        ids = np.arange(start, start + n, dtype=np.int64)
        names = pa.compute.binary_join_element_wise("user_", pa.array(ids % 100_000).cast(pa.string()), "")
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


def run_one(engine: str, op: str, kind: str, uri: str, rows: int, batch: int) -> dict:
    """Runs inside the child process."""
    if engine == "pylance":
        import lance as lib

        write_kwargs = {"data_storage_version": "2.0"}
    else:
        import lance_format as lib

        write_kwargs = {}
    start = time.perf_counter()
    if op == "write":
        lib.write_dataset(_reader(kind, rows, batch), uri, mode="overwrite", **write_kwargs)
        count = rows
    else:
        count = 0
        for b in lib.dataset(uri).to_batches(batch_size=batch):
            count += b.num_rows
            _touch(b)
    seconds = time.perf_counter() - start
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": seconds, "rows": count, "peak_mib": peak_mib}


def measure(engine: str, op: str, kind: str, uri: str, rows: int, batch: int) -> dict:
    cmd = [sys.executable, __file__, "--child", engine, op, kind, uri, str(rows), str(batch)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--vector-rows", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=65536)
    parser.add_argument("--child", nargs=6)
    args = parser.parse_args()
    if args.child:
        engine, op, kind, uri, rows, batch = args.child
        print(json.dumps(run_one(engine, op, kind, uri, int(rows), int(batch))))
        return

    root = tempfile.mkdtemp(prefix="lance-bench-")
    try:
        print(f"{'table':8} {'op':6} {'rows':>9} {'ours s':>8} {'lance s':>8} {'ratio':>6} "
              f"{'ours MiB':>9} {'lance MiB':>9} {'size ratio':>10}")
        for kind, rows in (("scalar", args.rows), ("vector", args.vector_rows)):
            uris = {e: os.path.join(root, f"{kind}-{e}.lance") for e in ("ours", "pylance")}
            for op in ("write", "scan"):
                res = {e: measure(e, op, kind, uris[e], rows, args.batch) for e in ("ours", "pylance")}
                assert res["ours"]["rows"] == res["pylance"]["rows"] == rows
                sizes = {e: sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(uris[e]) for f in fs)
                         for e in uris}
                print(f"{kind:8} {op:6} {rows:9d} {res['ours']['seconds']:8.2f} {res['pylance']['seconds']:8.2f} "
                      f"{res['ours']['seconds'] / res['pylance']['seconds']:6.2f} "
                      f"{res['ours']['peak_mib']:9.0f} {res['pylance']['peak_mib']:9.0f} "
                      f"{sizes['ours'] / sizes['pylance']:10.2f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
