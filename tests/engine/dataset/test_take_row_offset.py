"""``take(indices, columns=[..., "_rowoffset", ...])``: a row's offset is its position among the
table's live rows (the index asked for), in the column order asked for, as pylance answers."""

from __future__ import annotations

import lance
import pyarrow as pa
import pytest

import lance_format

TABLE = pa.table({"id": range(100), "email": [f"user{i}@example.com" if i % 7 else None for i in range(100)]})


@pytest.fixture()
def tables(tmp_path):
    found = {}
    for name, engine in (("pylance", lance), ("ours", lance_format)):
        ds = engine.write_dataset(TABLE, str(tmp_path / name), max_rows_per_file=25)
        ds.delete("id = 3 or id = 30 or id = 77")
        found[name] = engine.dataset(str(tmp_path / name))
    return found


@pytest.mark.parametrize("columns", [["_rowoffset", "id", "_rowaddr"], ["email", "_rowoffset"], ["_rowoffset"],
                                     ["_rowid", "_rowoffset", "email", "_rowoffset"]])
def test_take_row_offset_like_pylance(tables, columns):
    indices = [96, 0, 5, 49, 50, 5]
    ours = tables["ours"].take(indices, columns=columns)
    assert ours.equals(tables["pylance"].take(indices, columns=columns))
    first = columns.index("_rowoffset")
    assert ours.column(first).to_pylist() == indices and ours.schema.field(first).type == pa.uint64()


def test_take_row_offset_out_of_range(tables):
    for engine in tables.values():
        with pytest.raises((ValueError, IndexError, OSError)):
            engine.take([97], columns=["_rowoffset"])
