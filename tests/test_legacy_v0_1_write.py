"""Writes to legacy (0.1) tables produce legacy files, as official Lance's do, readable by pylance."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import UnsupportedFeatureError
from lance_format.file.legacy_v0_1 import LegacyFileReader
from tests.compat import assert_same_history, assert_tables_equal
from tests.type_matrix import type_matrix


def _file_versions(uri: str) -> set[tuple[int, int, int]]:
    return {(f.file_major_version, f.file_minor_version, len(f.column_indices))
            for frag in lance.dataset(uri).get_fragments() for f in frag.metadata.files}


def _batch_rows(uri: str, data_file) -> list[int]:
    ds = lance_format.dataset(uri)
    fields = list(data_file.fields)
    with LegacyFileReader(ds._store, f"data/{data_file.path}", field_ids=(fields[0], max(fields))) as reader:
        return np.diff(reader.batch_offsets).tolist()


def test_appends_to_a_legacy_table_write_legacy_files(tmp_path):
    uri = str(tmp_path / "t")
    table = type_matrix(3000, nulls=True)
    lance.write_dataset(table.slice(0, 1000), uri, data_storage_version="legacy")
    lance_format.write_dataset(table.slice(1000, 2000), uri, mode="append", max_rows_per_file=1500)
    assert _file_versions(uri) == {(0, 2, 0)}
    ours = lance_format.dataset(uri)
    assert [f.fragment_id for f in ours.get_fragments()] == [0, 1, 2]
    newest = ours.get_fragments()[1].data_files()[0]
    assert _batch_rows(uri, newest) == [1024, 476]  # pylance's row groups of 1024
    assert_same_history(uri)
    # pylance goes on appending to the table we wrote to
    lance.write_dataset(table.slice(0, 5), uri, mode="append")
    assert_same_history(uri)


def test_our_mutations_of_a_legacy_table(tmp_path):
    uri = str(tmp_path / "t")
    table = type_matrix(1200, nulls=True).append_column("key", pa.array(range(1200), pa.int64()))
    lance.write_dataset(table.slice(0, 900), uri, data_storage_version="legacy", max_rows_per_group=100,
                        max_rows_per_file=500)
    ds = lance_format.dataset(uri)
    ds.delete("key % 7 = 1")
    ds.update({"int32": "int32 + 1", "string": "'edited'"}, where="key > 800")
    ds.merge_insert("key").when_matched_update_all().when_not_matched_insert_all().execute(table.slice(850, 350))
    ds.add_columns({"k2": "key * 2"})  # new files follow each fragment's batches (here 100 rows)
    ds.alter_columns({"path": "int16", "data_type": pa.int32()})
    ds.optimize.compact_files(target_rows_per_fragment=5000)
    assert _file_versions(uri) == {(0, 2, 0)}
    assert_same_history(uri)
    theirs = lance.dataset(uri)
    theirs.delete("key < 10")  # pylance commits on top: it refuses fragments whose files disagree
    theirs.add_columns({"k3": "key * 3"})
    assert_same_history(uri)


def test_added_columns_follow_the_fragments_batches(tmp_path):
    uri = str(tmp_path / "t")
    lance.write_dataset(pa.table({"x": range(250)}), uri, data_storage_version="legacy", max_rows_per_group=60)
    lance_format.dataset(uri).add_columns({"y": "x + 1"})
    first, added = lance_format.dataset(uri).get_fragments()[0].data_files()
    assert _batch_rows(uri, first) == _batch_rows(uri, added) == [60, 60, 60, 60, 10]
    assert lance.dataset(uri).to_table().column("y").to_pylist() == list(range(1, 251))
    assert_same_history(uri)


def test_new_legacy_tables(tmp_path):
    uri = str(tmp_path / "t")
    table = type_matrix(2100, nulls=True).drop(["dict", "dict_nulls"])
    lance_format.write_dataset(table, uri, data_storage_version="legacy", max_rows_per_file=1000)
    assert lance.dataset(uri).data_storage_version == "0.1"
    assert_same_history(uri)
    idx = [2099, 0, 1024, 1023, 5]
    assert_tables_equal(lance_format.dataset(uri).take(idx), lance.dataset(uri).take(idx))


def test_legacy_dictionaries_on_write(tmp_path):
    uri = str(tmp_path / "t")
    lance.write_dataset(pa.table({"d": pa.array(["red", "green", "blue"] * 4).dictionary_encode()}), uri,
                        data_storage_version="legacy")
    # the same values in another dictionary order are mapped onto the table's dictionary
    lance_format.write_dataset(pa.table({"d": pa.array(["blue", "red", "blue"]).dictionary_encode()}), uri,
                               mode="append")
    assert lance.dataset(uri).to_table().column("d").to_pylist()[-3:] == ["blue", "red", "blue"]
    assert_same_history(uri)
    with pytest.raises(UnsupportedFeatureError, match="dictionary"):
        lance_format.write_dataset(pa.table({"d": pa.array(["purple"]).dictionary_encode()}), uri, mode="append")
    with pytest.raises(UnsupportedFeatureError, match="dictionary"):
        lance_format.write_dataset(pa.table({"d": pa.array(["a"]).dictionary_encode()}), str(tmp_path / "new"),
                                   data_storage_version="legacy")
    assert len(list((Path(uri) / "data").glob("*.lance"))) == 2  # the refused append left no file behind


def test_types_legacy_files_cannot_hold(tmp_path):
    table = pa.table({"m": pa.array([[("a", 1)]], pa.map_(pa.string(), pa.int64()))})
    with pytest.raises(UnsupportedFeatureError, match="map"):
        lance_format.write_dataset(table, str(tmp_path / "t"), data_storage_version="legacy")


def test_appending_nested_and_integer_dictionaries(tmp_path):
    uri = str(tmp_path / "t")
    words = pa.array(["", "a", "bb", "ccc"])

    def rows(n: int, shift: int) -> pa.Table:
        return pa.table({
            "ds": pa.StructArray.from_arrays(
                [pa.DictionaryArray.from_arrays(pa.array((np.arange(n) + shift) % 4, pa.int8()), words),
                 pa.array(range(n))], ["d", "i"]),
            "ld": pa.ListArray.from_arrays(
                pa.array(np.arange(n + 1) * 2, pa.int32()),
                pa.DictionaryArray.from_arrays(pa.array((np.arange(2 * n) + shift) % 4, pa.int32()), words)),
            "di": pa.DictionaryArray.from_arrays(pa.array(np.arange(n) % 3, pa.int32()), pa.array([10, 20, 30])),
        })

    lance.write_dataset(rows(50, 0), uri, data_storage_version="legacy")
    lance_format.write_dataset(rows(50, 1), uri, mode="append")
    assert_same_history(uri)
    assert lance.dataset(uri).to_table().slice(50, 1).to_pylist() == [
        {"ds": {"d": "a", "i": 0}, "ld": ["a", "bb"], "di": 10}]
