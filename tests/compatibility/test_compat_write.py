"""Tables this engine writes open in official Lance identically, and pylance can keep writing them."""

from __future__ import annotations

import os

import lance
import pyarrow as pa
import pytest

import lance_format
from tests.compat import SYSTEM, assert_same_history, assert_same_version, assert_tables_equal
from tests.type_matrix import type_matrix


@pytest.mark.parametrize("nulls", [False, True], ids=["no-nulls", "nulls"])
def test_type_matrix_opens_in_pylance(tmp_path, nulls):
    uri = str(tmp_path / "t")
    table = type_matrix(60, nulls=nulls)
    ds = lance_format.write_dataset(table, uri, data_storage_version="2.0")
    assert ds.version == 1
    theirs = lance.dataset(uri)
    assert theirs.schema == table.schema
    assert theirs.data_storage_version == "2.0"
    assert_tables_equal(theirs.to_table(), table, "pylance reading ours")
    assert_tables_equal(ds.to_table(), table, "ours reading ours")
    assert_same_version(uri, 1)


@pytest.mark.parametrize("stable", [False, True], ids=["rowaddr-ids", "stable-ids"])
@pytest.mark.parametrize("v2_paths", [True, False], ids=["v2-names", "v1-names"])
@pytest.mark.parametrize("storage", ["2.0", "2.2"])
def test_multi_fragment_history_then_pylance_continues(tmp_path, stable, v2_paths, storage):
    uri = str(tmp_path / "t")
    table = type_matrix(40, nulls=True)
    lance_format.write_dataset(table, uri, enable_stable_row_ids=stable, max_rows_per_file=15,
                               enable_v2_manifest_paths=v2_paths, commit_message="first",
                               data_storage_version=storage)
    lance_format.write_dataset(table.slice(0, 25), uri, mode="append", max_rows_per_file=10,
                               transaction_properties={"k": "v"})
    names = sorted(os.listdir(os.path.join(uri, "_versions")))
    assert ("18446744073709551613.manifest" in names) == v2_paths
    assert ("2.manifest" in names) == (not v2_paths)
    theirs = lance.dataset(uri)
    assert len(theirs.get_fragments()) == 3 + 3
    assert theirs.has_stable_row_ids == stable
    assert_same_history(uri)

    # pylance takes over: append, delete (both deletion-file kinds) and update
    theirs = lance.write_dataset(table.slice(5, 10), uri, mode="append")
    theirs.delete("int32 < 0")
    theirs.update({"string": "'updated'"}, where="int64 > 0 AND int64 < 500000000000000")
    assert_same_history(uri)
    # and this engine continues after pylance
    lance_format.write_dataset(table.slice(0, 3), uri, mode="append")
    assert_same_history(uri)
    assert lance.dataset(uri).count_rows() == lance_format.dataset(uri).count_rows()
    if not v2_paths:
        assert all(n.endswith(".manifest") and n[0].isdigit() and len(n) < 15
                   for n in os.listdir(os.path.join(uri, "_versions")) if n.endswith(".manifest"))


def test_empty_table(tmp_path):
    uri = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("s", pa.string())])
    ds = lance_format.write_dataset(schema.empty_table(), uri)
    assert ds.count_rows() == 0 and ds.get_fragments() == []
    theirs = lance.dataset(uri)
    assert theirs.schema == schema and theirs.count_rows() == 0
    theirs = lance.write_dataset(pa.table({"id": [1], "s": ["a"]}), uri, mode="append")
    assert_same_history(uri)


def test_overwrite_and_stable_row_ids_lineage(tmp_path):
    uri = str(tmp_path / "t")
    t = pa.table({"id": pa.array(range(10), pa.int64())})
    lance_format.write_dataset(t, uri, enable_stable_row_ids=True)
    lance_format.write_dataset(t, uri, mode="append")
    lance_format.write_dataset(t.slice(0, 4), uri, mode="overwrite")
    theirs = lance.dataset(uri)
    assert theirs.version == 3
    rows = theirs.to_table(columns=["id"] + SYSTEM)
    # overwrite keeps counting row ids and fragment ids, and stamps the new version
    assert rows.column("_rowid").to_pylist() == [20, 21, 22, 23]
    assert rows.column("_rowaddr").to_pylist() == [(2 << 32) + i for i in range(4)]
    assert set(rows.column("_row_created_at_version").to_pylist()) == {3}
    assert_same_history(uri)


def test_pandas_and_batch_iterables(tmp_path):
    import pandas as pd

    frame = pd.DataFrame({"a": [1, 2, 3], "b": ["x", None, "z"]})
    ds = lance_format.write_dataset(frame, str(tmp_path / "p"))
    assert lance.dataset(str(tmp_path / "p")).to_table().equals(ds.to_table())
    batches = pa.table({"a": list(range(100))}).to_batches(max_chunksize=7)
    ds = lance_format.write_dataset(iter(batches), str(tmp_path / "b"), max_rows_per_file=30)
    assert ds.to_table().column("a").to_pylist() == list(range(100))
    assert [f.physical_rows for f in ds.get_fragments()] == [30, 30, 30, 10]
    reader = pa.RecordBatchReader.from_batches(batches[0].schema, batches)
    ds = lance_format.write_dataset(reader, str(tmp_path / "r"))
    assert lance.dataset(str(tmp_path / "r")).count_rows() == 100


def test_transaction_files_and_properties(tmp_path):
    uri = str(tmp_path / "t")
    lance_format.write_dataset(pa.table({"a": [1]}), uri, commit_message="hello",
                               transaction_properties={"run": "42"})
    txns = os.listdir(os.path.join(uri, "_transactions"))
    assert len(txns) == 1 and txns[0].startswith("0-")
    theirs = lance.dataset(uri)
    props = theirs.read_transaction(1).transaction_properties
    assert props["run"] == "42" and props["__lance_commit_message"] == "hello"
    assert dict(lance_format.dataset(uri).read_transaction(1).transaction_properties) == props
    assert lance_format.dataset(uri).versions() == theirs.versions()
    hint = open(os.path.join(uri, "_versions", "latest_version_hint.json")).read()
    assert hint == '{"version":1}'


def test_schema_and_field_metadata_round_trip(tmp_path):
    uri = str(tmp_path / "t")
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False, metadata={"unit": "count"}),
            pa.field("tags", pa.list_(pa.field("item", pa.string(), metadata={"k": "v"}))),
            pa.field("point", pa.struct([pa.field("x", pa.float64(), metadata={"axis": "x"})])),
        ],
        metadata={"owner": "data-eng", "bytes": b"\x00\x01"},
    )
    table = pa.table({"id": [1, 2], "tags": [["a"], []], "point": [{"x": 1.0}, {"x": 2.0}]}, schema=schema)
    ds = lance_format.write_dataset(table, uri)
    theirs = lance.dataset(uri)
    assert theirs.schema.equals(schema, check_metadata=True)
    assert ds.schema.equals(schema, check_metadata=True)
    # field ids are depth-first from 0, like official Lance
    assert [(f.name, f.id) for f in ds.lance_schema.walk()] == [
        ("id", 0), ("tags", 1), ("item", 2), ("point", 3), ("x", 4)
    ]
    assert_same_version(uri, 1)


def test_index_section_is_carried_forward(tmp_path):
    uri = str(tmp_path / "t")
    lance_format.write_dataset(pa.table({"id": pa.array(range(100), pa.int64())}), uri)
    lance.dataset(uri).create_scalar_index("id", "BTREE")
    lance_format.write_dataset(pa.table({"id": pa.array(range(100, 110), pa.int64())}), uri, mode="append")
    theirs = lance.dataset(uri)
    assert [i["name"] for i in theirs.list_indices()] == ["id_idx"]
    assert theirs.to_table(filter="id = 105").num_rows == 1
    assert lance_format.dataset(uri).manifest_file.index_section is not None
    lance_format.write_dataset(pa.table({"id": pa.array([1], pa.int64())}), uri, mode="overwrite")
    assert lance.dataset(uri).list_indices() == []
