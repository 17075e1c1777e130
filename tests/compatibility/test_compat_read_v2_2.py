"""Tables official Lance writes by default (file version 2.2) or with 2.1 read identically here."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from tests.compat import SYSTEM, assert_same_history, assert_same_version, assert_tables_equal
from tests.engine.file.test_file_v2_1_read import extras
from tests.type_matrix import type_matrix

VERSIONS = [None, "2.1"]  # None = pylance's default (2.2)


def _write(table, uri, version, **kwargs):
    if version is not None:
        kwargs["data_storage_version"] = version
    return lance.write_dataset(table, uri, **kwargs)


@pytest.mark.parametrize("version", VERSIONS, ids=["default", "2.1"])
@pytest.mark.parametrize("nulls", [False, True], ids=["no-nulls", "nulls"])
def test_pylance_type_matrix(tmp_path, version, nulls):
    uri = str(tmp_path / "t")
    table = type_matrix(300, nulls=nulls)
    _write(table, uri, version, max_rows_per_file=120)
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    assert ours.data_storage_version == (version or "2.2")
    assert ours.schema == table.schema
    assert_tables_equal(ours.to_table(), table, "ours reading pylance")
    assert_same_version(uri, 1)
    columns = ["list_struct", "int8", "struct", "vector"]
    assert_tables_equal(ours.to_table(columns=columns, limit=50, offset=100),
                        theirs.to_table(columns=columns, limit=50, offset=100))
    idx = [299, 0, 5, 121, 240, 7, 7, 119, 120]
    assert_tables_equal(ours.take(idx), theirs.take(idx))


@pytest.mark.parametrize("version", VERSIONS, ids=["default", "2.1"])
def test_extras_multi_page_and_take(tmp_path, version):
    uri = str(tmp_path / "t")
    table = extras(2500)
    # small page and cache sizes make every column span several pages
    _write(table, uri, version, max_rows_per_file=1000, max_page_bytes=16384, data_cache_bytes=4096,
           max_rows_per_group=300)
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    assert_tables_equal(ours.to_table(), table, "ours reading pylance")
    assert_same_version(uri, 1)
    rng = np.random.default_rng(7)
    idx = rng.choice(2500, 200, replace=False).tolist() + [3, 3, 2499]
    assert_tables_equal(ours.take(idx), theirs.take(idx))
    assert_tables_equal(ours.to_table(batch_size=333, columns=["list_struct_list_str", "vec768"]),
                        theirs.to_table(columns=["list_struct_list_str", "vec768"]))


@pytest.mark.parametrize("stable", [False, True], ids=["rowaddr-ids", "stable-ids"])
def test_mutation_history(tmp_path, stable):
    uri = str(tmp_path / "t")
    n = 3000
    table = type_matrix(n, nulls=True).append_column("key", pa.array(np.arange(n), pa.int64()))
    ds = lance.write_dataset(table, uri, max_rows_per_file=1200, enable_stable_row_ids=stable)
    ds.delete("key % 9 = 4")
    ds.delete("key >= 100 AND key < 1100 AND key % 5 != 0")
    ds.update({"int32_nulls": "int32_nulls + 1", "string": "'edited'"}, where="key > 2500")
    ds.merge_insert("key").when_matched_update_all().when_not_matched_insert_all().execute(table.slice(10, 20))
    ds.optimize.compact_files(target_rows_per_fragment=2000)
    assert_same_history(uri)
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    idx = [0, 17, 1333, 5, 1299, 17]
    cols = ["key", "list_struct", "dict_nulls", "struct_nulls"]
    assert_tables_equal(ours.take(idx, columns=cols), theirs.take(idx, columns=cols))
    assert ours.has_stable_row_ids == stable


def test_filters_and_counts_match(tmp_path):
    uri = str(tmp_path / "t")
    lance.write_dataset(type_matrix(200, nulls=True), uri, max_rows_per_file=64)
    lance.dataset(uri).delete("int16 > 500")
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    for flt in ["int32 > 0", "string LIKE 's1%'", "float64_nulls IS NULL", "_rowid % 2 = 0"]:
        assert ours.count_rows(flt) == theirs.count_rows(flt), flt
        assert_tables_equal(ours.to_table(columns=["int32", "list_str"], filter=flt, with_row_id=True),
                            theirs.to_table(columns=["int32", "list_str"], filter=flt, with_row_id=True), flt)


def test_empty_and_appended_tables(tmp_path):
    uri = str(tmp_path / "t")
    table = type_matrix(20)
    lance.write_dataset(table.slice(0, 0), uri)
    assert lance_format.dataset(uri).to_table().num_rows == 0
    lance.write_dataset(table, uri, mode="append")
    lance.write_dataset(table.slice(5, 5), uri, mode="append")
    assert_same_history(uri)
    ours = lance_format.dataset(uri).to_table(columns=["int64"] + SYSTEM)
    assert ours.num_rows == 25


def test_blob_v2_columns_read_as_pylance_descriptions(tmp_path):
    uri = str(tmp_path / "t")
    schema = pa.schema([pa.field("id", pa.int64()),
                        pa.field("blob", pa.large_binary(), metadata={"lance-encoding:blob": "true"})])
    lance.write_dataset(pa.table({"id": [1, 2], "blob": [b"a", None]}, schema=schema), uri)
    ours = lance_format.dataset(uri)
    assert ours.to_table(columns=["id"]).column("id").to_pylist() == [1, 2]
    # pylance returns blob v2 descriptions, not bytes (more in tests/engine/dataset/test_blob_columns.py)
    assert_same_version(uri, 1)
    theirs = lance.dataset(uri).to_table()
    assert ours.to_table().schema.equals(theirs.schema, check_metadata=True)
    assert ours.to_table().equals(theirs)


def test_corrupt_data_file_names_table_version_file_and_column(tmp_path):
    from lance_format.errors import CorruptFileError
    from tests.engine.file.test_file_v2_1_read_errors import _page_buffer, _patch

    uri = tmp_path / "t"
    lance.write_dataset(pa.table({"a": np.arange(5000), "s": [f"v{i}" for i in range(5000)]}), str(uri))
    data_file = next((uri / "data").iterdir())
    offset, size = _page_buffer(data_file, 1, 0)
    _patch(data_file, offset, b"\xf0\xff" * (size // 2))
    ours = lance_format.dataset(str(uri))
    assert ours.to_table(columns=["a"]).num_rows == 5000
    with pytest.raises(CorruptFileError) as info:
        ours.to_table()
    error = info.value
    assert (error.table, error.version, error.column) == (ours.uri, 1, "s")
    assert error.path.endswith(data_file.name)
