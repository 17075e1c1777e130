"""Realistic tables at file version 2.2: lance_format vs official Lance (pylance), both directions.

The table: an int64 id, a float64, a 10-value category, a skewed high-cardinality category, an
e-mail/URL-like string, JSON-ish text, a nullable string, a timestamp, a list of tags and a struct.
Each engine writes its own copy, then both engines read both copies ("cross reads"):

* size on disk;
* full scan, with every byte touched (each column is reduced: lengths, sums, null counts), so a
  lazy memory map cannot return before reading;
* a scan of the URL-like column alone;
* a filtered scan (``cat = 'echo' AND x > 0.5``, other columns materialized);
* a take of 1,000 random rows;
* the write itself.

Each measurement runs ``--repeat`` times in this process; the fastest counts. Prints seconds and
the ratio ours / pylance for each table writer, by wall clock and by CPU time (this process's,
all threads): on a shared machine the CPU ratio is the steadier one.

    python benchmarks/bench_realistic.py [--rows 1000000] [--repeat 3] [--version 2.2] [--json out.json]
                                         [--kernels auto|numpy|compiled]

``--kernels``: our FSST and chunking loops as numba-compiled kernels (the ``fast`` extra), numpy
alone, or the default policy (compiled once a process has seen enough work). Run it with
``numpy`` and ``compiled`` to compare both paths; the kernels are loaded before the clock starts
(their one-time import and cache load, ~0.3 s of CPU, is not in the figures).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import lance_format
from lance_format.encodings.structural import accel

CATEGORIES = np.array(["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"])


def realistic_table(rows: int, seed: int = 3) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(rows, dtype=np.int64)
    id_text = pa.array(ids % 1_000_000).cast(pa.string())
    padded = pc.utf8_lpad(id_text, 6, "0")
    cat = pa.array(CATEGORIES[rng.integers(0, len(CATEGORIES), rows)])
    # skewed: a few very common values and a long tail (Zipf-like)
    skewed = pc.binary_join_element_wise("sku-", pa.array(np.minimum(rng.zipf(1.3, rows), 50_000)).cast(pa.string()), "")
    email = pc.binary_join_element_wise("customer-", padded, "@example.com/", cat, "")
    json_text = pc.binary_join_element_wise(
        '{"id": ', id_text, ', "kind": "', cat, '", "score": ',
        pa.array(np.round(rng.random(rows), 3)).cast(pa.string()), "}", "",
    )
    note_values = pc.binary_join_element_wise("note ", padded, "")
    note = pc.if_else(pa.array(rng.random(rows) < 0.3), pa.nulls(rows, pa.string()), note_values)
    tags = pa.ListArray.from_arrays(
        pa.array(np.arange(0, rows * 2 + 1, 2, dtype=np.int32)),
        # pa.array of a large numpy string array (millions of values) can come back chunked
        pa.chunked_array([pa.array(CATEGORIES[rng.integers(0, 10, rows * 2)])]).combine_chunks(),
    )
    point = pa.StructArray.from_arrays(
        [pa.array(rng.standard_normal(rows)), pa.array(rng.integers(0, 1000, rows).astype(np.int32))], ["lat", "zone"])
    return pa.table({
        "id": ids,
        "x": rng.random(rows),
        "cat": cat,
        "sku": skewed,
        "url": email,
        "payload": json_text,
        "note": note,
        "ts": pa.array(1_700_000_000_000_000 + ids * 1_000_000, pa.timestamp("us")),
        "tags": tags,
        "point": point,
    })


def touch(table: pa.Table) -> int:
    """Reduce every column so that every byte is read."""
    total = 0
    for column in table.columns:
        total += column.null_count
        for chunk in column.chunks:
            arr = chunk
            if pa.types.is_struct(arr.type):
                arr = pa.concat_arrays([arr.field(i).cast(pa.float64()) for i in range(arr.type.num_fields)])
            elif pa.types.is_list(arr.type):
                arr = arr.values
            if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
                value = pc.sum(pc.utf8_length(arr)).as_py()
            elif pa.types.is_timestamp(arr.type):
                value = pc.max(arr.cast(pa.int64())).as_py()
            else:
                value = pc.sum(arr.cast(pa.float64())).as_py()
            total += int(value or 0)
    return total


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """The fastest wall-clock and CPU times of ``repeat`` runs."""
    walls, cpus = [], []
    for _ in range(repeat):
        start, cpu = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus)


def dir_size(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--version", default="2.2")
    parser.add_argument("--json")
    parser.add_argument("--kernels", choices=["auto", "numpy", "compiled"], default="auto")
    args = parser.parse_args()
    accel.use_compiled({"auto": None, "numpy": False, "compiled": True}[args.kernels])

    table = realistic_table(args.rows)
    root = tempfile.mkdtemp(prefix="bench-realistic-")
    paths = {"ours": os.path.join(root, "ours.lance"), "pylance": os.path.join(root, "pylance.lance")}
    engines = {"ours": lance_format, "pylance": lance}
    results: dict[str, Any] = {"rows": args.rows, "version": args.version}
    try:
        for name, engine in engines.items():
            def write(engine=engine, path=paths[name]) -> None:
                shutil.rmtree(path, ignore_errors=True)
                engine.write_dataset(table, path, data_storage_version=args.version)
            results[f"write/{name}"], results[f"write-cpu/{name}"] = best(write, args.repeat)
            results[f"size/{name}"] = dir_size(paths[name])
        take_rows = np.random.default_rng(9).choice(args.rows, 1000, replace=False).tolist()
        workloads: dict[str, Callable[[Any], Any]] = {
            "full scan": lambda ds: touch(ds.to_table()),
            "url column": lambda ds: touch(ds.to_table(columns=["url"])),
            "filter": lambda ds: touch(ds.to_table(filter="cat = 'echo' AND x > 0.5")),
            "take 1000": lambda ds: touch(ds.take(take_rows)),
        }
        for writer in paths:
            for reader_name, engine in engines.items():
                ds = engine.dataset(paths[writer])
                for workload, fn in workloads.items():
                    key = f"{workload}/{writer}-written/{reader_name}"
                    results[key], results[key.replace("/", "-cpu/", 1)] = best(lambda fn=fn, ds=ds: fn(ds), args.repeat)
        # both engines must agree on what they read
        assert lance_format.dataset(paths["pylance"]).to_table().equals(lance.dataset(paths["pylance"]).to_table())
        assert lance_format.dataset(paths["ours"]).to_table().equals(lance.dataset(paths["ours"]).to_table())
    finally:
        shutil.rmtree(root, ignore_errors=True)

    kernels = "numba kernels" if accel.kernels() is not None else "numpy only"
    print(f"{args.rows:,} realistic rows, file version {args.version}, best of {args.repeat}, ours: {kernels}")
    print(f"{'workload':34s} {'ours s':>8s} {'pylance s':>9s} {'ratio':>6s} {'cpu ratio':>9s}")
    print(f"{'size on disk (MB)':34s} {results['size/ours'] / 1e6:8.1f} {results['size/pylance'] / 1e6:9.1f} "
          f"{results['size/ours'] / results['size/pylance']:6.2f}")

    def row(label: str, key: str) -> None:
        ours, theirs = results[f"{key}/ours"], results[f"{key}/pylance"]
        cpu_key = key.replace("/", "-cpu/", 1) if "/" in key else key + "-cpu"
        cpu = results[f"{cpu_key}/ours"] / results[f"{cpu_key}/pylance"]
        print(f"{label:34s} {ours:8.3f} {theirs:9.3f} {ours / theirs:6.2f} {cpu:9.2f}")

    row("write", "write")
    for writer in paths:
        for workload in workloads:
            row(f"{workload}, {writer}-written", f"{workload}/{writer}-written")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
