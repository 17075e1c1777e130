"""Blob columns read exactly as pylance 14 presents them (descriptions, not bytes), in every file version."""

from __future__ import annotations

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import UnsupportedFeatureError
from tests.compat import assert_same_version

BLOB_META = {"lance-encoding:blob": "true"}
VERSIONS = ["2.0", "2.1", "2.2"]


def _blob_table(values: list, ids_from: int = 0) -> pa.Table:
    schema = pa.schema([
        pa.field("id", pa.int64()),
        pa.field("b", pa.large_binary(), metadata=BLOB_META),
        pa.field("all_null", pa.large_binary(), metadata=BLOB_META),
        pa.field("name", pa.string()),
    ])
    n = len(values)
    return pa.table({
        "id": pa.array(range(ids_from, ids_from + n), pa.int64()),
        "b": pa.array(values, pa.large_binary()),
        "all_null": pa.nulls(n, pa.large_binary()),
        "name": pa.array([f"r{i}" for i in range(ids_from, ids_from + n)]),
    }, schema=schema)


VALUES = [b"abc", None, b"", b"x" * 100, b"hello", None, b"", bytes(range(256)) * 40]


@pytest.fixture(params=VERSIONS)
def blob_uri(request, tmp_path) -> str:
    uri = str(tmp_path / f"blobs_{request.param}")
    lance.write_dataset(_blob_table(VALUES), uri, data_storage_version=request.param)
    # a second fragment and a deletion, so takes and scans cross fragments and skip rows
    lance.write_dataset(_blob_table([b"", None, b"tail"], ids_from=100), uri, mode="append")
    lance.dataset(uri).delete("id = 4")
    return uri


def _same(ours: pa.Table, theirs: pa.Table) -> None:
    assert ours.schema.equals(theirs.schema, check_metadata=True), f"{ours.schema}\n!=\n{theirs.schema}"
    assert ours.combine_chunks().equals(theirs.combine_chunks()), f"{ours.to_pylist()}\n!=\n{theirs.to_pylist()}"


def test_schema_matches_pylance(blob_uri):
    ours, theirs = lance_format.dataset(blob_uri), lance.dataset(blob_uri)
    assert ours.schema.equals(theirs.schema, check_metadata=True), f"{ours.schema}\n!=\n{theirs.schema}"
    for v in theirs.versions():
        assert_same_version(blob_uri, v["version"])


def test_scan_returns_descriptions_like_pylance(blob_uri):
    ours, theirs = lance_format.dataset(blob_uri), lance.dataset(blob_uri)
    table = ours.to_table()
    _same(table, theirs.to_table())
    assert pa.types.is_struct(table.schema.field("b").type)
    # 2.0 describes a null blob as (position 1, size 0), not as a null
    assert table.column("b").null_count == (0 if theirs.data_storage_version == "2.0" else 3)
    _same(ours.to_table(columns=["b", "id"]), theirs.to_table(columns=["b", "id"]))
    _same(ours.to_table(filter="id > 2"), theirs.to_table(filter="id > 2"))


def test_take_returns_descriptions_like_pylance(blob_uri):
    ours, theirs = lance_format.dataset(blob_uri), lance.dataset(blob_uri)
    for indices in ([0], [1], [3, 1, 0], [2, 2, 9, 7], list(range(ours.count_rows()))):
        _same(ours.take(indices), theirs.take(indices))
        _same(ours.take(indices, columns=["b"]), theirs.take(indices, columns=["b"]))


def test_blob_v2_schema_is_the_extension_type(tmp_path):
    uri = str(tmp_path / "v2")
    lance.write_dataset(_blob_table(VALUES), uri, data_storage_version="2.2")
    field = lance_format.dataset(uri).schema.field("b")
    assert field.type.extension_name == "lance.blob.v2"
    read = lance_format.dataset(uri).to_table().schema.field("b")
    assert [f.name for f in read.type] == ["kind", "position", "size", "blob_id", "blob_uri"]
    assert read.metadata == {b"lance-encoding:packed": b"true", b"lance-encoding:blob": b"true"}


def test_a_blob_column_in_2_2_is_written_as_blob_v2_like_pylance(tmp_path):
    """pylance 14 stores lance-encoding:blob columns of 2.2 (the default) tables as blob v2."""
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lance_format.write_dataset(_blob_table(VALUES), ours)
    lance.write_dataset(_blob_table(VALUES), theirs)
    lance_format.write_dataset(_blob_table(VALUES[:2], ids_from=50), theirs, mode="append")
    lance.write_dataset(_blob_table(VALUES[:2], ids_from=50), ours, mode="append")
    for uri in (ours, theirs):
        assert lance.dataset(uri).data_storage_version == "2.2"
        assert_same_version(uri, 2)
        assert [None if f is None else f.read() for f in lance.dataset(uri).take_blobs("b", indices=list(range(10)))] \
            == VALUES + VALUES[:2]
    assert lance.dataset(ours).schema.equals(lance.dataset(theirs).schema, check_metadata=True)
    assert lance.dataset(ours).to_table().equals(lance.dataset(theirs).to_table())


def test_appending_to_a_converted_blob_v2_table(tmp_path):
    """pylance turns lance-encoding:blob into blob v2 (struct<data, uri>) in 2.2; rows of that
    stored schema append here, and both engines read them."""
    blob_uri = str(tmp_path / "v2")
    lance.write_dataset(_blob_table(VALUES), blob_uri, data_storage_version="2.2")
    stored = lance_format.dataset(blob_uri).lance_schema.to_arrow()
    rows = pa.Table.from_pylist([{"id": 500, "b": {"data": b"new", "uri": None}, "all_null": None, "name": "n"}],
                                schema=stored)
    lance_format.write_dataset(rows, blob_uri, mode="append")
    for v in lance.dataset(blob_uri).versions():
        assert_same_version(blob_uri, v["version"])
    last = lance.dataset(blob_uri).count_rows() - 1
    assert lance.dataset(blob_uri).take_blobs("b", indices=[last])[0].read() == b"new"


@pytest.mark.parametrize("version", ["2.0", "2.1"])
def test_writing_the_blob_v2_extension_type_before_2_2_is_refused(tmp_path, version):
    table = pa.table({"b": lance.blob_array([b"a", None])})
    with pytest.raises(UnsupportedFeatureError, match="requires file version 2.2") as info:
        lance_format.write_dataset(table, str(tmp_path / "x"), data_storage_version=version)
    assert info.value.column == "b"


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_delta_returns_descriptions_like_pylance(tmp_path, version):
    uri = str(tmp_path / "d")
    lance.write_dataset(_blob_table(VALUES[:3]), uri, data_storage_version=version, enable_stable_row_ids=True)
    lance.write_dataset(_blob_table([None, b"zz", b""], ids_from=10), uri, mode="append")
    ours = lance_format.dataset(uri).delta(begin_version=1, end_version=2).get_inserted_rows().read_all()
    theirs = lance.dataset(uri).delta(begin_version=1, end_version=2).get_inserted_rows().read_all()
    _same(ours, theirs)
