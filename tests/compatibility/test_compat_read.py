"""Tables official Lance writes with file version 2.0 read identically here, at every version."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from tests.compat import SYSTEM, assert_same_history, assert_same_version, assert_tables_equal
from tests.type_matrix import type_matrix


@pytest.mark.parametrize("nulls", [False, True], ids=["no-nulls", "nulls"])
def test_pylance_type_matrix(tmp_path, nulls):
    uri = str(tmp_path / "t")
    table = type_matrix(300, nulls=nulls)
    lance.write_dataset(table, uri, data_storage_version="2.0", max_rows_per_file=120)
    ours = lance_format.dataset(uri)
    assert ours.schema == table.schema
    assert_tables_equal(ours.to_table(), table, "ours reading pylance")
    assert_same_version(uri, 1)
    # projections, limit/offset, take
    theirs = lance.dataset(uri)
    assert_tables_equal(ours.to_table(columns=["list_struct", "int8"], limit=50, offset=100),
                        theirs.to_table(columns=["list_struct", "int8"], limit=50, offset=100))
    idx = [299, 0, 5, 121, 240, 7, 7]
    assert_tables_equal(ours.take(idx), theirs.take(idx))


def test_pylance_type_matrix_with_mutations(tmp_path):
    uri = str(tmp_path / "t")
    table = type_matrix(400, nulls=True).append_column("key", pa.array(range(400), pa.int64()))
    ds = lance.write_dataset(table, uri, data_storage_version="2.0", max_rows_per_file=150,
                             enable_stable_row_ids=True)
    ds.delete("key % 9 = 4")
    ds.update({"int32_nulls": "int32_nulls + 1", "string": "'edited'"}, where="key > 300")
    upsert = table.slice(10, 20)
    ds.merge_insert("key").when_matched_update_all().when_not_matched_insert_all().execute(upsert)
    ds.optimize.compact_files(target_rows_per_fragment=1000)
    assert_same_history(uri)
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    idx = [0, 17, 333, 5, 299]
    assert_tables_equal(ours.take(idx, columns=["key", "list_struct", "dict_nulls"]),
                        theirs.take(idx, columns=["key", "list_struct", "dict_nulls"]))


@pytest.mark.parametrize("stable", [False, True], ids=["rowaddr-ids", "stable-ids"])
def test_pylance_mutation_history(tmp_path, stable):
    uri = str(tmp_path / "t")
    n = 12_000
    base = pa.table({
        "id": pa.array(np.arange(n), pa.int64()),
        "s": pa.array([f"s{i % 37}" for i in range(n)]),
        "f": pa.array(np.linspace(0, 1, n)),
    })
    ds = lance.write_dataset(base, uri, data_storage_version="2.0", enable_stable_row_ids=stable,
                             max_rows_per_file=10000)
    ds = lance.write_dataset(base.slice(0, 100).set_column(0, "id", pa.array(np.arange(n, n + 100))), uri,
                             mode="append")
    ds.delete("id % 1000 = 3")            # small deletions -> .arrow files
    ds.delete("id >= 1000 AND id < 9000 AND id % 7 != 0")  # > 5000 in one fragment -> .bin bitmap
    ds.update({"s": "'changed'"}, where="id < 20")
    upsert = pa.table({"id": pa.array([1, 2, n + 500], pa.int64()), "s": ["m1", "m2", "new"], "f": [0.5, 0.5, 0.5]})
    ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(upsert)
    ds.tags.create("before-compaction", ds.version)
    ds.optimize.compact_files(target_rows_per_fragment=8000)
    kinds = {p.suffix for p in (tmp_path / "t" / "_deletions").iterdir()}
    assert kinds == {".arrow", ".bin"}
    assert_same_history(uri)
    tagged = lance_format.dataset(uri, version="before-compaction")
    assert tagged.version == lance.dataset(uri).tags.list()["before-compaction"]["version"]
    assert lance_format.dataset(uri).has_stable_row_ids == stable


def test_filters_and_counts_match(tmp_path):
    uri = str(tmp_path / "t")
    lance.write_dataset(type_matrix(200, nulls=True), uri, data_storage_version="2.0", max_rows_per_file=64)
    lance.dataset(uri).delete("int16 > 500")
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    for flt in ["int32 > 0", "string LIKE 's1%'", "float64_nulls IS NULL", "int8 IN (1, 2, 3) OR bool",
                "_rowid % 2 = 0", "NOT (uint16 BETWEEN 100 AND 600)"]:
        assert ours.count_rows(flt) == theirs.count_rows(flt), flt
        assert_tables_equal(ours.to_table(columns=["int32", "string"], filter=flt, with_row_id=True),
                            theirs.to_table(columns=["int32", "string"], filter=flt, with_row_id=True), flt)


def test_default_version_tables_are_read(tmp_path):
    uri = str(tmp_path / "t")
    table = pa.table({"a": [1, 2, 3], "s": ["x", None, "z"], "l": [[1], None, []]})
    lance.write_dataset(table, uri)  # pylance default: 2.2
    ours = lance_format.dataset(uri)
    assert ours.data_storage_version == "2.2"
    assert_tables_equal(ours.to_table(), table, "ours reading a 2.2 table")
    assert_same_version(uri, 1)
    assert_tables_equal(ours.take([2, 0]), lance.dataset(uri).take([2, 0]))


def test_system_columns_without_stable_ids(tmp_path):
    uri = str(tmp_path / "t")
    lance.write_dataset(pa.table({"a": list(range(10))}), uri, data_storage_version="2.0")
    lance.write_dataset(pa.table({"a": list(range(5))}), uri, mode="append")
    lance.dataset(uri).delete("a = 2")
    ours = lance_format.dataset(uri).to_table(columns=["a"] + SYSTEM)
    assert ours.column("_row_created_at_version").to_pylist() == [1] * ours.num_rows
    assert ours.column("_rowid").equals(ours.column("_rowaddr"))
    assert 2 not in ours.column("_rowaddr").to_pylist()
