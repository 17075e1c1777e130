"""Data files that store only some struct children, in another order (appends of partial structs).

Official Lance (Lance 1.0 and pylance 14 alike) writes such files when an append's
``list<struct>`` or ``struct`` lacks or reorders children: ``DataFile.fields`` follows the data,
e.g. ``[0, 1, 2, 5, 4]`` for ``list<struct<c, b>>`` against a schema ``list<struct<a, b, c>>``.
The missing children read as nulls.
"""

from __future__ import annotations

import lance
import pyarrow as pa
import pytest

import lance_format
from tests.compat import assert_same_history, assert_tables_equal

ABC = pa.struct([pa.field("a", pa.utf8()), pa.field("b", pa.utf8()), pa.field("c", pa.int64())])
CB = pa.struct([pa.field("c", pa.int64()), pa.field("b", pa.utf8())])


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_list_struct_with_reordered_and_missing_children(tmp_path, version):
    uri = str(tmp_path / "t")
    schema = pa.schema([pa.field("id", pa.int32()), pa.field("data", pa.list_(pa.field("item", ABC))),
                        pa.field("extra", pa.utf8())])
    first = pa.table({
        "id": pa.array([1, 2], pa.int32()),
        "data": pa.array([[{"a": "a1", "b": "b1", "c": 1}], [{"a": "a2", "b": "b2", "c": 2}] * 2], pa.list_(ABC)),
        "extra": ["e1", "e2"],
    }, schema=schema)
    lance.write_dataset(first, uri, data_storage_version=version)
    second = pa.table({
        "id": pa.array([3, 4, 5], pa.int32()),
        "data": pa.array([[{"c": 3, "b": "b3"}], None, [{"c": 5, "b": None}, {"c": 6, "b": "b6"}]], pa.list_(CB)),
    })
    lance.write_dataset(second, uri, mode="append")
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    stored = list(ours.get_fragments()[1].data_files()[0].fields)
    assert stored.index(5) < stored.index(4)  # c before b: the file follows the appended data
    assert_same_history(uri)
    idx = [4, 0, 2, 3]
    assert_tables_equal(ours.take(idx), theirs.take(idx))
    got = ours.to_table(columns=["data"], filter="id >= 3").column("data").to_pylist()
    assert got == [[{"a": None, "b": "b3", "c": 3}], None,
                   [{"a": None, "b": None, "c": 5}, {"a": None, "b": "b6", "c": 6}]]


@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_structs_with_missing_children_at_any_depth(tmp_path, version):
    uri = str(tmp_path / "t")
    outer = pa.struct([pa.field("x", pa.int64()), pa.field("s", ABC), pa.field("l", pa.list_(ABC))])
    first = pa.table({"o": pa.array(
        [{"x": i, "s": {"a": "a", "b": "b", "c": i}, "l": [{"a": "la", "b": "lb", "c": -i}]} for i in range(4)],
        outer)})
    lance.write_dataset(first, uri, data_storage_version=version)
    partial = pa.struct([pa.field("l", pa.list_(CB)), pa.field("s", CB)])  # no "x", children reordered
    second = pa.table({"o": pa.array([{"l": [{"c": 9, "b": "q"}], "s": {"c": 7, "b": "z"}}] * 3, partial)})
    lance.write_dataset(second, uri, mode="append")
    assert_same_history(uri)
    ours = lance_format.dataset(uri).to_table().column("o").to_pylist()
    assert ours[-1] == {"x": None, "s": {"a": None, "b": "z", "c": 7}, "l": [{"a": None, "b": "q", "c": 9}]}
