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
    # without null dictionary rows: pylance writes them as the first value, and once our append
    # gives the dictionary a null value, pylance appends only data with that exact dictionary
    # (test_appended_null_rows_extend_a_legacy_dictionary)
    table = type_matrix(3000, nulls=True).drop(["dict_nulls"])
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
    table = type_matrix(2100, nulls=True)
    lance_format.write_dataset(table, uri, data_storage_version="legacy", max_rows_per_file=1000)
    assert lance.dataset(uri).data_storage_version == "0.1"
    assert_same_history(uri)
    for name in ("dict", "dict_nulls"):  # the dictionary columns hold what was written, in both engines
        assert lance.dataset(uri).to_table().column(name).to_pylist() == table.column(name).to_pylist()
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


def _dictionary(values: list, dictionary: list) -> pa.DictionaryArray:
    keys = [None if v is None else dictionary.index(v) for v in values]
    return pa.DictionaryArray.from_arrays(pa.array(keys, pa.int32()), pa.array(dictionary))


def test_new_legacy_tables_with_dictionary_columns_like_pylance(tmp_path):
    """One batch, no nulls: both engines write the batch's dictionary (unused values included)
    into the manifest, and each reads the other's table identically."""
    table = pa.table({"d": _dictionary(["b", "a", "b", "c"] * 300, ["a", "b", "c", "unused"]),
                      "s": pa.array(range(1200)).cast(pa.string())})
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lance_format.write_dataset(table, ours, data_storage_version="legacy", max_rows_per_file=500)
    lance.write_dataset(table, theirs, data_storage_version="legacy", max_rows_per_file=500)
    assert _file_versions(ours) == {(0, 2, 0)}
    assert (lance_format.dataset(ours).legacy_dictionaries[0].to_pylist()
            == lance_format.dataset(theirs).legacy_dictionaries[0].to_pylist() == ["a", "b", "c", "unused"])
    for uri in (ours, theirs):
        assert_same_history(uri)
        assert lance.dataset(uri).to_table().equals(lance_format.dataset(uri).to_table())
        assert lance.dataset(uri).to_table().column("d").to_pylist() == table.column("d").to_pylist()
    # both engines append to our table, against its dictionary
    lance.write_dataset(table.slice(0, 3), ours, mode="append")
    lance_format.write_dataset(table.slice(3, 3), ours, mode="append")
    assert_same_history(ours)
    assert lance.dataset(ours).to_table().column("d").to_pylist()[-6:] == ["b", "a", "b", "c", "b", "a"]


def test_legacy_dictionaries_that_change_between_batches_or_hold_nulls(tmp_path):
    """Batches with other dictionaries, and null rows: the dictionary grows (a null value too) so
    every row reads back as written. pylance 14 writes later batches' keys against the first
    batch's dictionary and null rows as key 0, so its own table reads back other values: not
    emulated; recorded here."""
    batches = [pa.record_batch({"d": _dictionary(["a", "b", None], ["a", "b", "z"])}),
               pa.record_batch({"d": _dictionary(["q", "a", None], ["q", "a"])})]
    table = pa.Table.from_batches(batches)
    truth = ["a", "b", None, "q", "a", None]
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lance_format.write_dataset(table, ours, data_storage_version="legacy", max_rows_per_file=2)
    assert lance.dataset(ours).to_table().column("d").to_pylist() == truth
    assert lance_format.dataset(ours).to_table().column("d").to_pylist() == truth
    assert_same_history(ours)
    assert lance_format.dataset(ours).legacy_dictionaries[0].to_pylist() == ["a", "b", "z", "q", None]
    lance.write_dataset(table, theirs, data_storage_version="legacy")
    assert lance.dataset(theirs).to_table().column("d").to_pylist() == ["a", "b", "a", "a", "b", "a"]  # pylance's bug
    # appends map onto the table's dictionary, its null value included; an overwrite starts anew
    lance_format.write_dataset(pa.table({"d": _dictionary([None, "q"], ["q"])}), ours, mode="append")
    assert lance.dataset(ours).to_table().column("d").to_pylist() == truth + [None, "q"]
    lance_format.write_dataset(pa.table({"d": _dictionary(["new", None], ["new"])}), ours, mode="overwrite")
    assert lance.dataset(ours).to_table().column("d").to_pylist() == ["new", None]
    assert_same_history(ours)


def test_appended_null_rows_extend_a_legacy_dictionary(tmp_path):
    """pylance's table has no null value in its dictionary (pylance writes null rows as key 0:
    the first value); our append adds one, in the file and in the new manifest."""
    uri = str(tmp_path / "t")
    lance.write_dataset(pa.table({"d": _dictionary(["a", "b"], ["a", "b"])}), uri, data_storage_version="legacy")
    lance.write_dataset(pa.table({"d": _dictionary([None], ["a", "b"])}), uri, mode="append")
    assert lance.dataset(uri).to_table().column("d").to_pylist() == ["a", "b", "a"]  # pylance's bug
    lance_format.write_dataset(pa.table({"d": _dictionary(["b", None], ["a", "b"])}), uri, mode="append")
    assert lance_format.dataset(uri).legacy_dictionaries[0].to_pylist() == ["a", "b", None]
    assert lance.dataset(uri).to_table().column("d").to_pylist() == ["a", "b", "a", "b", None]
    assert lance_format.dataset(uri, version=2).legacy_dictionaries[0].to_pylist() == ["a", "b"]
    # pylance appends only data whose dictionary equals the table's: now the one with the null
    with pytest.raises(OSError, match="dictionary"):
        lance.write_dataset(pa.table({"d": _dictionary(["a"], ["a", "b"])}), uri, mode="append")
    lance.write_dataset(pa.table({"d": _dictionary(["a"], ["a", "b", None])}), uri, mode="append")
    assert_same_history(uri)
    assert lance_format.dataset(uri).to_table().column("d").to_pylist() == ["a", "b", "a", "b", None, "a"]


def test_legacy_dictionary_nulls_that_cannot_be_written_are_refused(tmp_path):
    integers = pa.table({"d": pa.DictionaryArray.from_arrays(pa.array([0, None], pa.int32()), pa.array([10, 20]))})
    with pytest.raises(UnsupportedFeatureError, match="null"):  # integer values cannot be null in legacy files
        lance_format.write_dataset(integers, str(tmp_path / "ints"), data_storage_version="legacy")
    assert not list((tmp_path / "ints").rglob("*.*"))


def test_max_rows_per_group_sets_legacy_batches_like_pylance(tmp_path):
    data = pa.table({"id": list(range(250)), "s": [f"v{i}" for i in range(250)]})
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lance_format.write_dataset(data, ours, data_storage_version="legacy", max_rows_per_group=100)
    lance.write_dataset(data, theirs, data_storage_version="legacy", max_rows_per_group=100)
    def lengths(uri: str) -> list[int]:
        (fragment,) = lance.dataset(uri).get_fragments()
        return _batch_rows(uri, fragment.metadata.files[0])

    assert lengths(ours) == lengths(theirs) == [100, 100, 50]
    assert lance.dataset(ours).to_table().equals(data) and lance_format.dataset(ours).to_table().equals(data)
    lance_format.write_dataset(data, ours, mode="append", max_rows_per_group=60)  # a new fragment, 60 per batch
    assert lance.dataset(ours).count_rows() == 500
