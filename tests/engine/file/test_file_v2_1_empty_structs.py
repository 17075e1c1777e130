"""File versions 2.1/2.2: structs without fields (``pa.struct([])``), compared with pylance.

pylance 14 stores such a field as a column of its own whose pages are all-null constant pages
with the single layer NULLABLE_ITEM (whatever the depth), reads them back as valid rows, and
refuses them under nulls or lists. Our files must be the same bytes and read both ways.
"""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pytest
from lance.file import LanceFileReader as PyReader
from lance.file import LanceFileWriter as PyWriter

import lance_format
from lance_format.errors import UnsupportedFeatureError
from lance_format.file import LanceFileReader, LanceFileWriter
from tests.compat import write_file_both

EMPTY = pa.struct([])
TABLES = {
    "top": pa.table({"empties": pa.array([{}] * 3, EMPTY)}),
    "with_id": pa.table({"id": pa.array([0, 1, 2], pa.int32()), "empties": pa.array([{}] * 3, EMPTY)}),
    "nested": pa.table({"s": pa.array([{"a": 1, "e": {}}, {"a": 2, "e": {}}],
                                      pa.struct([("a", pa.int32()), ("e", EMPTY)]))}),
    "only_empty_children": pa.table({"s": pa.array([{"e": {}}] * 4, pa.struct([("e", EMPTY)]))}),
}


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("case", sorted(TABLES))
def test_empty_structs_match_pylance(tmp_path: Path, version: str, case: str) -> None:
    table = TABLES[case]
    ours, theirs = write_file_both(tmp_path, version, table, declare_schema=False)
    assert ours.read_bytes() == theirs.read_bytes()
    assert PyReader(str(ours)).read_all().to_table() == table
    assert LanceFileReader(str(theirs)).read_all().to_table() == table
    assert LanceFileReader(str(ours)).read_all().to_table() == table


def test_empty_struct_before_a_sibling_reads_its_parent_validity(tmp_path: Path) -> None:
    # the parent's validity comes from the sibling's layers, not the empty struct's all-null page
    # (pylance 14 misreads this file, its own included, so only our reading is checked)
    table = pa.table({"s": pa.array([{"e": {}, "a": 1}, {"e": {}, "a": None}],
                                    pa.struct([("e", EMPTY), ("a", pa.int32())]))})
    path = tmp_path / "theirs.lance"
    with PyWriter(str(path), version="2.1") as writer:
        writer.write_batch(table)
    assert LanceFileReader(str(path)).read_all().to_table() == table


@pytest.mark.parametrize("array", [
    pa.array([{}, None, {}], EMPTY),
    pa.array([[{}], None, []], pa.list_(EMPTY)),
])
def test_empty_structs_under_nulls_or_lists_are_refused_like_pylance(tmp_path: Path, array: pa.Array) -> None:
    table = pa.table({"x": array})
    with pytest.raises(ValueError, match="Empty structs with rep/def"):
        with PyWriter(str(tmp_path / "theirs.lance"), version="2.1") as writer:
            writer.write_batch(table)
    with pytest.raises(UnsupportedFeatureError, match="Empty structs with rep/def"):
        with LanceFileWriter(str(tmp_path / "ours.lance"), version="2.1") as writer:
            writer.write_batch(table)


def test_dataset_with_empty_struct_takes_like_pylance(tmp_path: Path) -> None:
    table = TABLES["with_id"]
    lance_format.write_dataset(table, tmp_path / "ours")
    lance.write_dataset(table, tmp_path / "theirs")
    expected = table.take([2, 0, 1])
    assert lance.dataset(str(tmp_path / "ours")).take([2, 0, 1]) == expected
    assert lance_format.dataset(str(tmp_path / "theirs")).take([2, 0, 1]) == expected
    assert lance_format.dataset(str(tmp_path / "ours")).take([2, 0, 1]) == expected
