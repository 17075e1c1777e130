"""S3 benchmark: lance_format vs official Lance (pylance) on a local S3 API (moto's server).

The S3 server runs in its own process (so neither engine shares a GIL with it). Measured, each
the fastest of ``--repeat`` runs, ours / pylance:

- ``write``: writing ``--rows`` rows (file version 2.2) as a new table;
- ``scan``: a full scan of the table pylance wrote;
- ``take``: 200 random rows of the table pylance wrote (fresh dataset objects, no warm caches);
- ``append``: committing a one-row append (latency of one commit);
- ``open@N``: opening the latest version of a table with ``--versions`` versions. The versions
  are made cheaply: one real commit, then its manifest re-encoded with the following version
  numbers and PUT under their V2 names (the same table content at every version), then one
  more real commit on top.

    python benchmarks/bench_s3.py [--rows 1000000] [--versions 10000] [--repeat 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ACCESS_KEY, SECRET_KEY, REGION = "bench-key", "bench-secret", "us-east-1"
U64_MAX = (1 << 64) - 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_moto() -> tuple[subprocess.Popen, str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, endpoint
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("moto server did not start")


def table(rows: int) -> pa.Table:
    rng = np.random.default_rng(1)
    ids = np.arange(rows, dtype=np.int64)
    names = pc.binary_join_element_wise("user_", pa.array(ids % 100_000).cast(pa.string()), "")
    return pa.table({"id": ids, "value": rng.standard_normal(rows), "name": names,
                     "category": (ids % 17).astype(np.int32)})


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--versions", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--parts", default="write,scan,take,append,open", help="comma-separated subset")
    ap.add_argument("--json")
    args = ap.parse_args()

    import boto3
    import lance

    import lance_format
    import lance_format.io

    proc, endpoint = start_moto()
    try:
        opts = {"aws_endpoint": endpoint, "allow_http": "true", "aws_access_key_id": ACCESS_KEY,
                "aws_secret_access_key": SECRET_KEY, "aws_region": REGION}
        client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ACCESS_KEY,
                              aws_secret_access_key=SECRET_KEY, region_name=REGION)
        bucket = f"bench-{uuid.uuid4().hex[:8]}"
        client.create_bucket(Bucket=bucket)
        data = table(args.rows)
        results: dict[str, dict[str, float]] = {}

        parts = set(args.parts.split(","))

        def run(name, ours, theirs):
            if name.split("@")[0] not in parts:
                return
            results[name] = {"ours": best(ours, args.repeat), "pylance": best(theirs, args.repeat)}
            r = results[name]
            print(f"{name:>12}: ours {r['ours']:.3f}s  pylance {r['pylance']:.3f}s  ratio {r['ours'] / r['pylance']:.2f}x",
                  flush=True)

        def fresh(prefix):
            return f"s3://{bucket}/{prefix}-{uuid.uuid4().hex[:8]}.lance"

        run("write",
            lambda: lance_format.write_dataset(data, fresh("ours"), storage_options=opts,
                                               data_storage_version="2.2"),
            lambda: lance.write_dataset(data, fresh("theirs"), storage_options=opts, data_storage_version="2.2"))

        shared = f"s3://{bucket}/shared.lance"
        lance.write_dataset(data, shared, storage_options=opts, data_storage_version="2.2")
        assert lance_format.dataset(shared, storage_options=opts).count_rows() == args.rows

        run("scan",
            lambda: lance_format.dataset(shared, storage_options=opts).to_table(),
            lambda: lance.dataset(shared, storage_options=opts).to_table())

        rng = np.random.default_rng(7)
        indices = np.sort(rng.choice(args.rows, 200, replace=False))
        ours_rows = lance_format.dataset(shared, storage_options=opts).take(indices)
        theirs_rows = lance.dataset(shared, storage_options=opts).take(indices)
        assert ours_rows.equals(theirs_rows), "take results differ"
        run("take",
            lambda: lance_format.dataset(shared, storage_options=opts).take(indices),
            lambda: lance.dataset(shared, storage_options=opts).take(indices))

        one = data.slice(0, 1)
        ours_append, theirs_append = fresh("ours-append"), fresh("theirs-append")
        lance_format.write_dataset(one, ours_append, storage_options=opts, data_storage_version="2.2")
        lance.write_dataset(one, theirs_append, storage_options=opts, data_storage_version="2.2")
        run("append",
            lambda: lance_format.write_dataset(one, ours_append, mode="append", storage_options=opts),
            lambda: lance.write_dataset(one, theirs_append, mode="append", storage_options=opts))

        if args.versions > 1 and "open" in parts:
            uri = f"s3://{bucket}/versions.lance"
            key_root = "versions.lance/_versions/"
            lance.write_dataset(one, uri, storage_options=opts, data_storage_version="2.2")
            from lance_format.table.manifest import encode_manifest, read_manifest

            base = read_manifest(lance_format.io.ObjectStore(uri, opts), f"_versions/{U64_MAX - 1:020d}.manifest")
            t0 = time.perf_counter()

            def copy(version: int) -> None:
                manifest = type(base.manifest)()
                manifest.CopyFrom(base.manifest)
                manifest.version = version
                client.put_object(Bucket=bucket, Key=f"{key_root}{U64_MAX - version:020d}.manifest",
                                  Body=encode_manifest(manifest, base.transaction, base.index_section))

            with ThreadPoolExecutor(8) as pool:
                list(pool.map(copy, range(2, args.versions)))
            # the newest version is a real commit (its manifest names its own version)
            lance.write_dataset(one, uri, mode="append", storage_options=opts)
            print(f"  made {args.versions} versions in {time.perf_counter() - t0:.1f}s", flush=True)
            assert lance_format.dataset(uri, storage_options=opts).version == args.versions
            assert lance.dataset(uri, storage_options=opts).version == args.versions
            run(f"open@{args.versions}",
                lambda: lance_format.dataset(uri, storage_options=opts).count_rows(),
                lambda: lance.dataset(uri, storage_options=opts).count_rows())
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=2)
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
