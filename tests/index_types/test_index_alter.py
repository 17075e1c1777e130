"""Casting an indexed column is refused as pylance 14.0.2 refuses it (same text); renames,
nullability changes and casts of unindexed columns keep the indices answering."""

from __future__ import annotations

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError

from .conftest import realistic_table


def _pylance_error(uri: str, *alterations) -> str:
    with pytest.raises(OSError) as info:
        lance.dataset(uri).alter_columns(*alterations)
    text = str(info.value).removeprefix("Invalid user input: ")
    return text[: text.rindex(", /")]  # drop pylance's source location


@pytest.fixture
def indexed(tmp_path):
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(realistic_table(6_000), uri, max_rows_per_file=2_000)
    ds = lance_format.dataset(uri)
    ds.create_scalar_index("id", "BTREE")
    ds.create_scalar_index("score", "ZONEMAP", name="score_zm")
    ds.create_scalar_index("score", "BITMAP")
    return uri


@pytest.mark.parametrize("alterations", [
    ({"path": "id", "data_type": pa.int32()},),
    ({"path": "score", "data_type": pa.int64()}, {"path": "id", "data_type": pa.float64()}),
    ({"path": "score", "data_type": pa.int64(), "name": "points"},),
], ids=["one", "two-columns", "cast-and-rename"])
def test_cast_of_indexed_column_refused_like_pylance(indexed, alterations):
    expected = _pylance_error(indexed, *alterations)
    ds = lance_format.dataset(indexed)
    version = ds.version
    with pytest.raises(InvalidInputError) as info:
        ds.alter_columns(*alterations)
    assert str(info.value).startswith(expected)
    assert lance_format.dataset(indexed).version == version
    assert len(lance.dataset(indexed).describe_indices()) == 3


def test_other_alterations_keep_indices(indexed):
    ds = lance_format.dataset(indexed)
    ds.alter_columns({"path": "x", "data_type": pa.float32()}, {"path": "id", "name": "key"},
                     {"path": "score", "nullable": True})
    theirs = lance.dataset(indexed)
    assert sorted(d.name for d in theirs.describe_indices()) == ["id_idx", "score_idx", "score_zm"]
    for f in ["key = 17", "key BETWEEN 1990 AND 2010", "score = 7", "score < 3"]:
        expected = sorted(theirs.to_table(columns=["key"], filter=f, use_scalar_index=False)["key"].to_pylist())
        assert sorted(theirs.to_table(columns=["key"], filter=f)["key"].to_pylist()) == expected, f
        assert sorted(lance_format.dataset(indexed).to_table(columns=["key"], filter=f)["key"].to_pylist()) \
            == expected, f
    # after drop_index the cast goes through, as pylance's message advises
    ds.drop_index("id_idx")
    ds.alter_columns({"path": "key", "data_type": pa.int32()})
    assert lance.dataset(indexed).schema.field("key").type == pa.int32()
