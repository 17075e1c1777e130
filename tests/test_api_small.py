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
