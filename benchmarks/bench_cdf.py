"""Change-data-feed benchmark: one small version of a large table, lance_format vs pylance.

Builds (with pylance, file version 2.0 by default, stable row ids) a table of ``--rows`` rows in
``--fragments`` fragments, then commits ONE version with a merge_insert that updates one row,
inserts one row and deletes one row (by source). It then times, in the same run:

* ``pylance delta()``: ``get_inserted_rows`` + ``get_updated_rows`` + ``get_deleted_row_ids``
  of that version with official Lance;
* ``ours delta()``: the same three methods with lance_format;
* ``ours get_changes()``: lance_format's change feed of that version (with pre-images);
* full scans of the table with both engines (what a snapshot diff would have to read).

Each timing opens the dataset afresh and is the best of ``--repeat`` runs. Targets: ours
delta() within 3x of pylance's, at least 50x faster than a full scan; get_changes() within 5x
of delta().

    python benchmarks/bench_cdf.py [--rows 10000000] [--fragments 100] [--repeat 9]
                                   [--storage-version 2.0] [--keep DIR]
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

SCHEMA = pa.schema([("id", pa.int64()), ("value", pa.float64()), ("name", pa.string())])


def _batches(rows: int, batch: int = 262_144):
    rng = np.random.default_rng(7)
    for start in range(0, rows, batch):
        n = min(batch, rows - start)
        ids = np.arange(start, start + n, dtype=np.int64)
        names = pa.compute.binary_join_element_wise("user_", pa.array(ids % 1_000_003).cast(pa.string()), "")
        yield pa.record_batch([pa.array(ids), pa.array(rng.standard_normal(n)), names], schema=SCHEMA)


def build(uri: str, rows: int, fragments: int, storage_version: str) -> int:
    """Write the table and the one small version; returns that version's number."""
    reader = pa.RecordBatchReader.from_batches(SCHEMA, _batches(rows))
    per_file = -(-rows // fragments)
    lance.write_dataset(
        reader,
        uri,
        data_storage_version=storage_version,
        enable_stable_row_ids=True,
        max_rows_per_file=per_file,
        max_rows_per_group=min(per_file, 65_536),
    )
    updated, deleted = rows // 2 + 7, rows // 3 + 11
    source = pa.table(
        {
            "id": pa.array([updated, rows + 1], pa.int64()),
            "value": pa.array([-1.0, 0.5]),
            "name": pa.array(["updated", "inserted"]),
        }
    )
    (
        lance.dataset(uri)
        .merge_insert("id")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .when_not_matched_by_source_delete(f"id = {deleted}")
        .execute(source)
    )
    return lance.dataset(uri).version


def _touch(batch: pa.RecordBatch) -> int:
    """Read one byte per 4 KiB page of every buffer; returns the row count."""
    for column in batch.columns:
        for buf in column.buffers():
            if buf is not None and buf.size:
                np.frombuffer(buf, dtype=np.uint8)[::4096].sum()
    return batch.num_rows


def _best(fn, repeat: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def _delta_rows(delta) -> tuple[int, int, int]:
    return (
        delta.get_inserted_rows().read_all().num_rows,
        delta.get_updated_rows().read_all().num_rows,
        delta.get_deleted_row_ids().read_all().num_rows,
    )


def run(uri: str, version: int, repeat: int) -> dict[str, float]:
    begin = version - 1

    def theirs_delta():
        return _delta_rows(lance.dataset(uri).delta(begin_version=begin, end_version=version))

    def ours_delta():
        return _delta_rows(lance_format.dataset(uri).delta(begin_version=begin, end_version=version))

    def ours_changes():
        table = lance_format.dataset(uri).delta(begin_version=begin, end_version=version).get_changes().read_all()
        return sorted(table["_change_type"].to_pylist())

    # A full scan must really read the data: our reader memory-maps files, so touch every
    # page of every buffer (pylance's scan copies into memory anyway; touch it the same way).
    def ours_scan():
        return sum(_touch(b) for b in lance_format.dataset(uri).to_batches())

    def theirs_scan():
        return sum(_touch(b) for b in lance.dataset(uri).to_batches())

    results: dict[str, float] = {}
    for name, fn, reps in (
        ("pylance delta()", theirs_delta, repeat),
        ("ours delta()", ours_delta, repeat),
        ("ours get_changes()", ours_changes, repeat),
        ("pylance full scan", theirs_scan, max(1, repeat // 2)),
        ("ours full scan", ours_scan, max(1, repeat // 2)),
    ):
        seconds, result = _best(fn, reps)
        results[name] = seconds
        print(f"{name:<22} {seconds * 1000:10.1f} ms   -> {result}")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--fragments", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--storage-version", default="2.0", help="data_storage_version of the table (2.0, 2.2)")
    parser.add_argument("--keep", help="build (or reuse) the table in this directory instead of a temp dir")
    args = parser.parse_args()

    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench_cdf_"))
    uri = str(workdir / f"cdf_{args.rows}_{args.fragments}_{args.storage_version}.lance")
    try:
        if Path(uri).exists():
            version = lance.dataset(uri).version
        else:
            start = time.perf_counter()
            version = build(uri, args.rows, args.fragments, args.storage_version)
            print(f"built {args.rows:,} rows in {args.fragments} fragments in {time.perf_counter() - start:.1f} s")
        print(f"change feed of version {version} (1 update, 1 insert, 1 delete)\n")
        r = run(uri, version, args.repeat)
        delta, changes = r["ours delta()"], r["ours get_changes()"]
        print()
        print(f"ours delta() / pylance delta()      = {delta / r['pylance delta()']:.2f}x   (target <= 3x)")
        print(f"ours full scan / ours delta()       = {r['ours full scan'] / delta:.0f}x   (target >= 50x)")
        print(f"pylance full scan / ours delta()    = {r['pylance full scan'] / delta:.0f}x")
        print(f"ours get_changes() / ours delta()   = {changes / delta:.2f}x   (target <= 5x)")
        print(f"ours full scan / ours get_changes() = {r['ours full scan'] / changes:.0f}x")
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
