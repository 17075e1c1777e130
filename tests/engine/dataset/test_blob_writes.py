"""Blob v1 columns (``lance-encoding:blob``, file versions 2.0 and 2.1) written by this engine are
byte-identical to pylance 14's, and each engine reads the other's blob tables the same way."""

from __future__ import annotations

import glob
import os

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import UnsupportedFeatureError
from tests.compat import assert_same_version

BLOB_META = {"lance-encoding:blob": "true"}
VERSIONS = ["2.0", "2.1"]


def blob_schema(*, nullable: bool = True) -> pa.Schema:
    return pa.schema([
        pa.field("id", pa.int64()),
        pa.field("b", pa.large_binary(), nullable=nullable, metadata=BLOB_META),
        pa.field("name", pa.string()),
        pa.field("c", pa.large_binary(), metadata=BLOB_META),
    ])


def blob_table(values: list, first_id: int = 0) -> pa.Table:
    n = len(values)
    rng = np.random.default_rng(first_id)
    others = [None if i % 3 == 0 else rng.bytes(int(rng.integers(1, 300))) for i in range(n)]
    return pa.table({
        "id": pa.array(range(first_id, first_id + n), pa.int64()),
        "b": pa.array(values, pa.large_binary()),
        "name": [f"r{i}" for i in range(first_id, first_id + n)],
        "c": pa.array(others, pa.large_binary()),
    }, schema=blob_schema())


# nulls, empty blobs, sizes around the 64-byte padding, a large one
VALUES = [b"abc", None, b"", b"x" * 63, b"y" * 64, b"z" * 65, None, b"", bytes(range(256)) * 400, b"tail"]


def data_files(uri: str) -> list[bytes]:
    return [open(p, "rb").read() for p in sorted(glob.glob(os.path.join(uri, "data", "*.lance")))]


def write_both(tmp_path, data, version: str, **kwargs) -> tuple[str, str]:
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lance_format.write_dataset(data() if callable(data) else data, ours, data_storage_version=version, **kwargs)
    lance.write_dataset(data() if callable(data) else data, theirs, data_storage_version=version, **kwargs)
    return ours, theirs


def blob_bytes(ds, column: str, indices: list[int]) -> list[bytes | None]:
    return [None if f is None else f.readall() for f in ds.take_blobs(column, indices=indices)]


@pytest.mark.parametrize("version", VERSIONS)
def test_data_file_is_byte_identical_to_pylance(tmp_path, version):
    ours, theirs = write_both(tmp_path, blob_table(VALUES), version)
    assert data_files(ours) == data_files(theirs)


@pytest.mark.parametrize("version", VERSIONS)
def test_several_batches_are_byte_identical_to_pylance(tmp_path, version):
    """Each batch's blob bytes precede the pages it completes, at the file's end at that time."""
    table = pa.concat_tables([blob_table(VALUES), blob_table(VALUES[::-1], 100), blob_table([None, None], 200)])

    def reader():
        return pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=4))

    ours, theirs = write_both(tmp_path, reader, version)
    assert data_files(ours) == data_files(theirs)


@pytest.mark.parametrize("version", VERSIONS)
def test_all_valid_and_non_nullable_blobs_are_byte_identical(tmp_path, version):
    values = [b"a" * i for i in range(1, 40)]
    table = blob_table(values).cast(blob_schema(nullable=False))
    ours, theirs = write_both(tmp_path, table, version)
    assert data_files(ours) == data_files(theirs)


@pytest.mark.parametrize("version", VERSIONS)
def test_pylance_reads_our_blob_table(tmp_path, version):
    ours, theirs = write_both(tmp_path, blob_table(VALUES), version)
    a, b = lance.dataset(ours), lance.dataset(theirs)
    assert a.schema.equals(b.schema, check_metadata=True)
    assert a.to_table().equals(b.to_table())
    everything = list(range(len(VALUES)))
    assert blob_bytes(a, "b", everything) == VALUES
    assert blob_bytes(a, "c", everything) == blob_table(VALUES).column("c").to_pylist()
    assert a.read_blobs("b", indices=everything) == b.read_blobs("b", indices=everything)


@pytest.mark.parametrize("version", VERSIONS)
def test_appends_and_deletes_across_engines(tmp_path, version):
    """Blob appends on the other engine's table, a deletion, then both read every version alike."""
    uri = str(tmp_path / "t")
    lance.write_dataset(blob_table(VALUES), uri, data_storage_version=version)
    lance_format.write_dataset(blob_table(VALUES[::-1], 100), uri, mode="append")
    lance.write_dataset(blob_table([b"p", None], 200), uri, mode="append")
    lance_format.dataset(uri).delete("id = 3 OR id = 101")
    lance_format.write_dataset(blob_table([b"", b"q" * 70], 300), uri, mode="append")
    theirs = lance.dataset(uri)
    for v in theirs.versions():
        assert_same_version(uri, v["version"])
    assert lance_format.dataset(uri).count_rows() == len(VALUES) * 2 + 4 - 2
    # a take across all fragments, by pylance, of the bytes both engines wrote
    everything = list(range(theirs.count_rows()))
    payloads = blob_bytes(theirs, "b", everything)
    ids = theirs.to_table(columns=["id"]).column("id").to_pylist()
    source = {**dict(enumerate(VALUES)), **{100 + i: v for i, v in enumerate(VALUES[::-1])},
              200: b"p", 201: None, 300: b"", 301: b"q" * 70}
    assert payloads == [source[i] for i in ids]


def test_nested_blob_column_is_refused(tmp_path):
    schema = pa.schema([pa.field("s", pa.struct([pa.field("b", pa.large_binary(), metadata=BLOB_META)]))])
    table = pa.table({"s": pa.array([{"b": b"x"}], schema.field("s").type)}, schema=schema)
    with pytest.raises(UnsupportedFeatureError, match="nested") as info:
        lance_format.write_dataset(table, str(tmp_path / "n"), data_storage_version="2.1")
    assert info.value.column == "b"


def test_binary_blob_column_is_refused(tmp_path):
    schema = pa.schema([pa.field("b", pa.binary(), metadata=BLOB_META)])
    table = pa.table({"b": pa.array([b"x"], pa.binary())}, schema=schema)
    with pytest.raises(UnsupportedFeatureError, match="large_binary") as info:
        lance_format.write_dataset(table, str(tmp_path / "n"), data_storage_version="2.1")
    assert info.value.column == "b"
    assert not os.path.exists(str(tmp_path / "n" / "_versions"))
