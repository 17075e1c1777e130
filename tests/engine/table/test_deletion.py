"""Deletion files: read what pylance writes, write what pylance reads, reject corrupt files."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from pyroaring import BitMap

from lance_format.errors import CorruptFileError, InvalidInputError, UnsupportedFeatureError
from lance_format.io.object_store import ObjectStore
from lance_format.proto import table_pb2
from lance_format.table.deletion import (
    BITMAP_THRESHOLD,
    decode_arrow_deletions,
    deletion_file_path,
    encode_arrow_deletions,
    encode_bitmap_deletions,
    read_deletion_file,
    write_deletion_file,
)

SCHEMA = pa.schema([pa.field("row_id", pa.uint32(), nullable=False)])


def _manifest(root: Path, version: int) -> table_pb2.Manifest:
    data = (root / "_versions" / f"{2**64 - 1 - version:020d}.manifest").read_bytes()
    (pos,) = struct.unpack("<q", data[-16:-8])
    (length,) = struct.unpack("<I", data[pos : pos + 4])
    manifest = table_pb2.Manifest()
    manifest.ParseFromString(data[pos + 4 : pos + 4 + length])
    return manifest


@pytest.fixture(scope="module")
def deleted_tables(tmp_path_factory) -> dict[str, Path]:
    """Single-fragment pylance tables: 3 rows deleted (.arrow), 7000 scattered / contiguous (.bin)."""
    lance = pytest.importorskip("lance")
    base = tmp_path_factory.mktemp("deletions")
    out = {}
    cases = {"arrow": "id IN (4, 7, 3)", "bin": "id % 3 = 1 AND id < 21000", "runs": "id >= 100 AND id < 7100"}
    for name, predicate in cases.items():
        root = base / name
        ds = lance.write_dataset(pa.table({"id": np.arange(30_000)}), root, data_storage_version="2.0")
        ds.delete(predicate)
        out[name] = root
    return out


def _expected_deleted(root: Path) -> np.ndarray:
    import lance

    scan = lance.dataset(root).to_table(columns=["id"], with_row_address=True)
    kept = (scan["_rowaddr"].to_numpy() & 0xFFFFFFFF).astype(np.int64)
    return np.setdiff1d(np.arange(30_000), kept).astype(np.uint32)


@pytest.mark.parametrize("kind, count", [("arrow", 3), ("bin", 7000)])
def test_read_pylance_deletion_files(deleted_tables, kind, count):
    root = deleted_tables[kind]
    frag = _manifest(root, 2).fragments[0]
    path = deletion_file_path(frag.id, frag.deletion_file)
    assert path.endswith("." + kind) and (root / path).is_file()
    assert path == f"_deletions/0-1-{frag.deletion_file.id}.{kind}"
    deleted = read_deletion_file(ObjectStore(root), frag.id, frag.deletion_file)
    assert deleted.dtype == np.uint32 and deleted.size == count == frag.deletion_file.num_deleted_rows
    np.testing.assert_array_equal(deleted, _expected_deleted(root))


@pytest.mark.parametrize("kind", ["bin", "runs"])
def test_bitmap_bytes_equal_pylance(deleted_tables, kind):
    # "runs" is one contiguous range: pylance writes no run containers, and neither may we.
    root = deleted_tables[kind]
    frag = _manifest(root, 2).fragments[0]
    theirs = (root / deletion_file_path(frag.id, frag.deletion_file)).read_bytes()
    assert encode_bitmap_deletions(_expected_deleted(root)) == theirs


@pytest.mark.parametrize("kind", ["arrow", "bin"])
def test_pylance_reads_our_files(deleted_tables, tmp_path, kind):
    """Swap pylance's deletion file for ours (same set, same path): pylance scans the same rows."""
    import lance

    root = tmp_path / kind
    shutil.copytree(deleted_tables[kind], root)
    frag = _manifest(root, 2).fragments[0]
    expected = _expected_deleted(root)
    encode = encode_bitmap_deletions if kind == "bin" else encode_arrow_deletions
    (root / deletion_file_path(frag.id, frag.deletion_file)).write_bytes(encode(expected))
    np.testing.assert_array_equal(_expected_deleted(root), expected)
    assert lance.dataset(root).count_rows() == 30_000 - expected.size


def test_write_arrow_and_bitmap(tmp_path):
    store = ObjectStore(tmp_path)
    small = np.array([9, 3, 3, 0, 4999], dtype=np.int64)
    pb = write_deletion_file(store, 12, 4, small)
    assert pb.file_type == table_pb2.DeletionFile.ARROW_ARRAY and pb.read_version == 4
    assert pb.num_deleted_rows == 4 and 0 <= pb.id < 2**64
    path = f"_deletions/12-4-{pb.id}.arrow"
    assert deletion_file_path(12, pb) == path
    table = ipc.open_file(str(tmp_path / path)).read_all()
    assert table.schema.equals(SCHEMA, check_metadata=True) and table.num_rows == 4
    np.testing.assert_array_equal(read_deletion_file(store, 12, pb), [0, 3, 9, 4999])

    exactly = write_deletion_file(store, 1, 2, np.arange(BITMAP_THRESHOLD))
    assert exactly.file_type == table_pb2.DeletionFile.ARROW_ARRAY
    big = np.arange(0, 2 * (BITMAP_THRESHOLD + 1), 2)
    pb = write_deletion_file(store, 1, 2, big)
    assert pb.file_type == table_pb2.DeletionFile.BITMAP and pb.num_deleted_rows == big.size
    data = (tmp_path / f"_deletions/1-2-{pb.id}.bin").read_bytes()
    assert data == BitMap(big.tolist(), optimize=False).serialize() and data[:4] == bytes.fromhex("3a300000")
    np.testing.assert_array_equal(read_deletion_file(store, 1, pb), big)
    forced = write_deletion_file(store, 1, 2, small, file_type="bitmap")
    assert forced.file_type == table_pb2.DeletionFile.BITMAP
    np.testing.assert_array_equal(read_deletion_file(store, 1, forced), [0, 3, 9, 4999])


def test_uncompressed_pyarrow_file_reads(tmp_path):
    store = ObjectStore(tmp_path)
    pb = table_pb2.DeletionFile(read_version=1, id=77)
    batch = pa.record_batch([pa.array([8, 1, 5], pa.uint32())], schema=SCHEMA)
    store.write_bytes("_deletions/0-1-77.arrow", _ipc_file(SCHEMA, batch))
    np.testing.assert_array_equal(read_deletion_file(store, 0, pb), [1, 5, 8])


def _ipc_file(schema: pa.Schema, *batches: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, schema) as w:
        for b in batches:
            w.write_batch(b)
    return sink.getvalue().to_pybytes()


def _bad_arrow_files() -> dict[str, bytes]:
    def one(schema: pa.Schema, *cols) -> bytes:
        return _ipc_file(schema, pa.record_batch(list(cols), schema=schema))

    u32 = pa.array([1, 2], pa.uint32())
    good = pa.record_batch([u32], schema=SCHEMA)
    return {
        "int32": one(pa.schema([pa.field("row_id", pa.int32(), nullable=False)]), pa.array([1, 2], pa.int32())),
        "nullable": one(pa.schema([pa.field("row_id", pa.uint32())]), u32),
        "extra column": one(SCHEMA.append(pa.field("x", pa.uint32(), nullable=False)), u32, u32),
        "renamed": one(pa.schema([pa.field("rowid", pa.uint32(), nullable=False)]), u32),
        "schema metadata": one(SCHEMA.with_metadata({"a": "b"}), u32),
        "two batches": _ipc_file(SCHEMA, good, good),
        "no batches": _ipc_file(SCHEMA),
        "garbage": b"ARROW1\x00\x00garbage-not-ipc",
        "truncated": encode_arrow_deletions(np.array([1, 2, 3]))[:-20],
        "stream not file": _stream(good),
    }


def _stream(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, batch.schema) as w:
        w.write_batch(batch)
    return sink.getvalue().to_pybytes()


@pytest.mark.parametrize("case", list(_bad_arrow_files()))
def test_corrupt_arrow_files(tmp_path, case):
    store = ObjectStore(tmp_path)
    pb = table_pb2.DeletionFile(read_version=3, id=5)
    store.write_bytes("_deletions/2-3-5.arrow", _bad_arrow_files()[case])
    with pytest.raises(CorruptFileError, match=r"_deletions/2-3-5\.arrow"):
        read_deletion_file(store, 2, pb)


def test_nulls_rejected():
    # A nullable column is already a schema error; nulls behind a non-null field are caught too.
    arr = pa.array([1, None], pa.uint32())
    batch = pa.RecordBatch.from_arrays([arr], schema=SCHEMA)
    with pytest.raises(CorruptFileError, match="null"):
        decode_arrow_deletions(_ipc_file(SCHEMA, batch), "x.arrow")


@pytest.mark.parametrize(
    "data",
    [b"", b"garbage!", encode_bitmap_deletions(np.arange(7000))[:40], bytes.fromhex("3a300000") + b"\x05\0\0\0"],
)
def test_corrupt_bitmap_files(tmp_path, data):
    store = ObjectStore(tmp_path)
    pb = table_pb2.DeletionFile(file_type=table_pb2.DeletionFile.BITMAP, read_version=3, id=5)
    store.write_bytes("_deletions/2-3-5.bin", data)
    with pytest.raises(CorruptFileError, match=r"_deletions/2-3-5\.bin"):
        read_deletion_file(store, 2, pb)


def test_missing_file_and_bad_inputs(tmp_path):
    store = ObjectStore(tmp_path)
    for file_type, suffix in [(0, "arrow"), (1, "bin")]:
        pb = table_pb2.DeletionFile(file_type=file_type, read_version=9, id=1)
        with pytest.raises(CorruptFileError, match=rf"_deletions/4-9-1\.{suffix}"):
            read_deletion_file(store, 4, pb)
    with pytest.raises(UnsupportedFeatureError):
        deletion_file_path(0, table_pb2.DeletionFile(file_type=7))
    for bad in (np.array([], np.uint32), np.array([-1, 2]), np.array([2**32]), np.array([1.5]), np.zeros((2, 2), int)):
        with pytest.raises(InvalidInputError):
            write_deletion_file(store, 0, 1, bad)
    with pytest.raises(InvalidInputError):
        write_deletion_file(store, 0, 1, np.array([1]), file_type="csv")  # type: ignore[arg-type]
