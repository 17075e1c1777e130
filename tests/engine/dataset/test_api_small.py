"""Small pieces of pylance's LanceDataset API, compared call for call with pylance."""

from __future__ import annotations

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError


@pytest.fixture
def uri(tmp_path) -> str:
    path = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"id": list(range(10)), "s": [str(i) for i in range(10)],
                                  "st": [{"a": i, "b": str(i)} for i in range(10)]}), path)
    lance.write_dataset(pa.table({"id": [10], "s": ["x"], "st": [{"a": 10, "b": "x"}]}), path, mode="append")
    return path


def test_head_like_pylance(uri):
    ours, theirs = lance_format.dataset(uri, version=1), lance.dataset(uri, version=1)
    assert ours.head(3).equals(theirs.head(3))
    assert ours.head(4, columns=["id"], filter="id > 2").equals(theirs.head(4, columns=["id"], filter="id > 2"))
    assert ours.head(0).num_rows == theirs.head(0).num_rows == 0
    with pytest.raises(InvalidInputError):
        ours.head(-1)


def test_checkout_latest_moves_this_object(uri):
    ours, theirs = lance_format.dataset(uri, version=1), lance.dataset(uri, version=1)
    assert ours.checkout_latest() is None and theirs.checkout_latest() is None
    assert ours.version == theirs.version == 2
    assert ours.count_rows() == theirs.count_rows() == 11


def test_max_field_id_like_pylance(uri):
    assert lance_format.dataset(uri).max_field_id == lance.dataset(uri).max_field_id
    lance.dataset(uri).drop_columns(["st"])
    assert lance_format.dataset(uri).max_field_id == lance.dataset(uri).max_field_id
    lance.dataset(uri).add_columns({"z": "id * 2"})
    assert lance_format.dataset(uri).max_field_id == lance.dataset(uri).max_field_id


def test_fragment_reading_api_like_pylance(tmp_path):
    path = str(tmp_path / "f.lance")
    lance.write_dataset(pa.table({"id": list(range(20)), "s": [f"v{i}" for i in range(20)]}), path,
                        max_rows_per_file=10)
    lance.dataset(path).delete("id % 3 = 0")
    ours_ds, theirs_ds = lance_format.dataset(path), lance.dataset(path)
    for ours, theirs in zip(ours_ds.get_fragments(), theirs_ds.get_fragments()):
        assert ours.fragment_id == theirs.fragment_id
        assert ours.to_table().equals(theirs.to_table())
        assert ours.to_table(columns=["s"], filter="id > 4").equals(theirs.to_table(columns=["s"], filter="id > 4"))
        assert ours.head(2).equals(theirs.head(2))
        assert ours.take([0, 1, 3]).equals(theirs.take([0, 1, 3]))  # (pylance needs ascending indices)
        assert ours.take([3, 0]).column("id").to_pylist() == ours.to_table().column("id").take([3, 0]).to_pylist()
        assert ours.take([1], columns=["id"]).equals(theirs.take([1], columns=["id"]))
        assert ours.scanner(columns=["id"], limit=2).to_table().equals(
            theirs.scanner(columns=["id"], limit=2).to_table())
        assert pa.Table.from_batches(list(ours.to_batches(batch_size=3))).equals(
            pa.Table.from_batches(list(theirs.to_batches(batch_size=3))))
        assert ours.count_rows("id > 4") == theirs.count_rows("id > 4")
        assert ours.deletion_file() == theirs.deletion_file()
        assert ours.schema == theirs.schema
        with pytest.raises(InvalidInputError, match="out of range"):
            ours.take([100])


def test_scanner_head_schema_and_pandas_like_pylance(uri):
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    for n in (0, 3, 11, 50):
        assert ours.scanner(columns=["id", "s"]).head(n).equals(theirs.scanner(columns=["id", "s"]).head(n))
    assert ours.scanner(filter="id > 5").head(2).equals(theirs.scanner(filter="id > 5").head(2))
    assert ours.scanner(columns=["id"]).dataset_schema == theirs.scanner(columns=["id"]).dataset_schema
    assert ours.scanner(columns=["s"]).to_pandas().equals(theirs.scanner(columns=["s"]).to_pandas())
    assert ours.to_pandas(columns=["id", "s"], filter="id < 4").equals(
        theirs.to_pandas(columns=["id", "s"], filter="id < 4"))
    with pytest.raises(InvalidInputError):
        ours.scanner().head(-1)


def test_fragment_scan_options_and_physical_schema_like_pylance(tmp_path):
    path = str(tmp_path / "f.lance")
    lance.write_dataset(pa.table({"id": list(range(20)), "s": [f"v{i}" for i in range(20)]}), path,
                        max_rows_per_file=10)
    lance.dataset(path).delete("id % 3 = 0")
    lance.dataset(path).add_columns(pa.field("empty", pa.int64()))  # a column without data files
    for ours, theirs in zip(lance_format.dataset(path).get_fragments(), lance.dataset(path).get_fragments()):
        assert ours.physical_schema.names == ["id", "s"]  # (pylance raises NotImplementedError here)
        kwargs = dict(columns=["id", "s"], with_row_id=True, include_deleted_rows=True)
        assert ours.to_table(**kwargs).equals(theirs.to_table(**kwargs))
        assert [b.num_rows for b in ours.to_batches(batch_size=3, strict_batch_size=True)] == [
            b.num_rows for b in theirs.to_batches(batch_size=3, strict_batch_size=True)]
        assert ours.to_pandas(columns=["s"], filter="id > 4").equals(theirs.to_pandas(columns=["s"], filter="id > 4"))
    with pytest.raises(ValueError):
        lance.dataset(path).get_fragments(filter="id > 1")
    with pytest.raises(InvalidInputError):
        lance_format.dataset(path).get_fragments(filter="id > 1")
