"""Tables this engine writes in file versions 2.1/2.2 (2.2 = the default, like pylance 14).

pylance reads them identically (scan and take), appends to and deletes from them, and then both
engines agree on every version; this engine appends to tables pylance wrote in 2.1/2.2 and
always keeps a table's own file version.
"""

from __future__ import annotations

import os

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import UnsupportedFeatureError
from tests.compat import assert_same_history, assert_same_version, assert_tables_equal
from tests.engine.file.test_file_v2_0 import extra_columns
from tests.engine.file.test_file_v2_1_write import nested_columns
from tests.type_matrix import type_matrix


def wide_table(n: int) -> pa.Table:
    """Type matrix + the 2.0 extras + nested/wide/low-cardinality/constant columns."""
    matrix = type_matrix(n)
    columns = {name: matrix.column(name) for name in matrix.column_names}
    columns.update(extra_columns(n))
    columns.update({f"n_{k}": v for k, v in nested_columns(n).items()})
    return pa.table(columns)


def data_versions(uri: str) -> set[tuple[int, int]]:
    return {
        (f.file_major_version, f.file_minor_version)
        for frag in lance.dataset(uri).get_fragments()
        for f in frag.data_files()
    }


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("stable", [False, True], ids=["rowaddr-ids", "stable-ids"])
def test_wide_table_then_pylance_appends_and_deletes(tmp_path, version, stable):
    uri = str(tmp_path / "t")
    table = wide_table(150)
    lance_format.write_dataset(table, uri, data_storage_version=version, max_rows_per_file=60,
                               enable_stable_row_ids=stable)
    theirs = lance.dataset(uri)
    assert theirs.data_storage_version == version
    assert data_versions(uri) == {(2, int(version[-1]))}
    assert len(theirs.get_fragments()) == 3
    assert_tables_equal(theirs.to_table(), table, "pylance reading ours")
    rows = [0, 1, 59, 60, 61, 119, 120, 149]
    assert_tables_equal(theirs.take(rows), table.take(rows), "pylance take")
    assert_same_version(uri, 1)

    lance.write_dataset(table.slice(10, 30), uri, mode="append")
    lance.dataset(uri).delete("int32 > 0 OR int16_nulls IS NULL")
    lance_format.write_dataset(table.slice(100, 20), uri, mode="append")
    assert data_versions(uri) == {(2, int(version[-1]))}
    assert_same_history(uri)
    theirs = lance.dataset(uri)
    before = pa.concat_tables([table, table.slice(10, 30)])
    deleted = pa.compute.or_kleene(
        pa.compute.greater(before.column("int32"), 0), pa.compute.is_null(before.column("int16_nulls"))
    )
    expected = pa.concat_tables([before.filter(pa.compute.invert(deleted)), table.slice(100, 20)])
    assert_tables_equal(theirs.to_table(), expected, "after pylance delete")


def test_default_and_aliases(tmp_path):
    table = pa.table({"id": pa.array(range(10), pa.int64()), "s": pa.array([{"x": 1}, None] * 5)})
    ds = lance_format.write_dataset(table, str(tmp_path / "default"))
    assert ds.data_storage_version == "2.2"
    assert lance.dataset(str(tmp_path / "default")).data_storage_version == "2.2"
    assert_tables_equal(lance.dataset(str(tmp_path / "default")).to_table(), table)
    ds = lance_format.write_dataset(table, str(tmp_path / "stable"), data_storage_version="stable")
    assert ds.data_storage_version == "2.2"
    assert data_versions(str(tmp_path / "stable")) == {(2, 2)}


@pytest.mark.parametrize("version", ["2.3", "next"])  # legacy 0.1: see test_legacy_v0_1_write
def test_unsupported_versions_are_refused_cleanly(tmp_path, version):
    uri = str(tmp_path / "t")
    with pytest.raises(UnsupportedFeatureError, match="not supported") as info:
        lance_format.write_dataset(pa.table({"id": [1]}), uri, data_storage_version=version)
    assert info.value.table is not None
    assert not os.path.exists(os.path.join(uri, "_versions"))
    assert not os.path.exists(os.path.join(uri, "data")) or not os.listdir(os.path.join(uri, "data"))


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_our_append_to_pylance_table_keeps_its_version(tmp_path, version):
    uri = str(tmp_path / "t")
    table = wide_table(80)
    lance.write_dataset(table, uri, data_storage_version=version)
    # appends follow the table's version, whatever is asked for
    lance_format.write_dataset(table.slice(5, 40), uri, mode="append")
    lance_format.write_dataset(table.slice(0, 3), uri, mode="append", data_storage_version="2.0")
    assert data_versions(uri) == {(2, int(version[-1]))}
    assert lance.dataset(uri).data_storage_version == version
    theirs = lance.dataset(uri)
    expected = pa.concat_tables([table, table.slice(5, 40), table.slice(0, 3)])
    assert_tables_equal(theirs.to_table(), expected, "pylance reading our appends")
    assert_tables_equal(theirs.take([79, 80, 119, 122]), expected.take([79, 80, 119, 122]), "pylance take")
    assert_same_history(uri)


def test_2_0_tables_stay_2_0(tmp_path):
    uri = str(tmp_path / "t")
    table = pa.table({"id": pa.array(range(20), pa.int64())})
    lance_format.write_dataset(table, uri, data_storage_version="2.0")
    lance_format.write_dataset(table, uri, mode="append")
    assert data_versions(uri) == {(2, 0)}
    lance_format.write_dataset(table, uri, mode="overwrite")
    assert data_versions(uri) == {(2, 0)}
    assert_same_history(uri)


def test_struct_nulls_are_refused_in_2_0_tables_naming_the_column(tmp_path):
    uri = str(tmp_path / "t")
    table = pa.table({"id": [1, 2], "s": pa.array([{"x": 1}, None], pa.struct([("x", pa.int64())]))})
    with pytest.raises(UnsupportedFeatureError, match="2.1") as info:
        lance_format.write_dataset(table, uri, data_storage_version="2.0")
    assert info.value.column == "s"
    assert not os.path.exists(os.path.join(uri, "_versions"))
    lance_format.write_dataset(table, uri)  # the 2.2 default stores them
    assert lance.dataset(uri).to_table().column("s").to_pylist() == [{"x": 1}, None]


def test_vectors_and_strings_at_scale(tmp_path):
    """Several pages per file (8 MiB pages), vectors with nulls, 768-d vectors, long strings."""
    rng = np.random.default_rng(0)
    n = 12_000
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 128, dtype=np.float32)), 128)
    mask = np.zeros(n, np.bool_)
    mask[::13] = True
    vectors = pa.FixedSizeListArray.from_arrays(vectors.values, 128, mask=pa.array(mask))
    table = pa.table({
        "id": pa.array(np.arange(n), pa.int64()),
        "vec": vectors,
        "vec768": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 768, dtype=np.float32)), 768),
        "text": pa.array([f"t{i}" * (i % 400) for i in range(n)]),
    })
    uri = str(tmp_path / "t")
    lance_format.write_dataset(table, uri, max_rows_per_file=7000)
    theirs = lance.dataset(uri)
    assert_tables_equal(theirs.to_table(), table, "pylance reading ours")
    rows = [0, 12, 13, 6999, 7000, 11_999]
    assert_tables_equal(theirs.take(rows), table.take(rows), "pylance take")
    assert_same_version(uri, 1)


def test_zero_rows_and_all_null_columns(tmp_path):
    uri = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("l", pa.list_(pa.struct([("a", pa.string())])))])
    lance_format.write_dataset(schema.empty_table(), uri)
    assert lance.dataset(uri).count_rows() == 0
    nulls = pa.table({"id": pa.nulls(30, pa.int64()), "l": pa.nulls(30, schema.field("l").type)}, schema=schema)
    lance_format.write_dataset(nulls, uri, mode="append")
    assert_tables_equal(lance.dataset(uri).to_table(), nulls)
    assert_same_history(uri)
