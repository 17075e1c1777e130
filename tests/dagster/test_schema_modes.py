"""Schema policy: error / add_columns / overwrite, type casts, and refused changes leaving tables intact."""

from __future__ import annotations

import dagster as dg
import lance
import pyarrow as pa
import pytest

from lance_assets import LanceIOManager
from lance_format.errors import SchemaMismatchError


def _asset(table: pa.Table, **meta):
    @dg.asset(name="evolving", metadata=meta)
    def evolving() -> pa.Table:
        return table

    return evolving


def _write(root, instance, table, **meta):
    return dg.materialize([_asset(table, **meta)], instance=instance,
                          resources={"io_manager": LanceIOManager(base_uri=root)})


BASE = pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"]})


def test_error_mode_refuses_new_and_missing_columns(root, instance):
    uri = f"{root}/evolving.lance"
    _write(root, instance, BASE)
    for bad, match in [(BASE.append_column("extra", pa.array([1, 2])), "new columns \\['extra'\\]"),
                       (BASE.select(["id"]), "missing columns \\['name'\\]")]:
        for mode in ("overwrite", "append"):
            with pytest.raises(SchemaMismatchError, match=match):
                _write(root, instance, bad, **{"lance/write_mode": mode})
    ds = lance.dataset(uri)
    assert ds.version == 1 and ds.schema.names == ["id", "name"]


def test_add_columns_appends_with_new_columns_and_fills_missing(root, instance):
    uri = f"{root}/evolving.lance"
    _write(root, instance, BASE)
    wider = pa.table({"id": [3], "name": ["c"], "score": [0.5]})
    meta = {"lance/write_mode": "append", "lance/schema_mode": "add_columns"}
    _write(root, instance, wider, **meta)
    ds = lance.dataset(uri)  # ONE new version: the new column and its rows together
    assert ds.version == 2 and ds.schema.names == ["id", "name", "score"] and ds.count_rows() == 3
    _write(root, instance, pa.table({"id": [4]}), **meta)  # missing columns become nulls
    assert lance.dataset(uri).version == 3
    table = lance.dataset(uri).to_table()
    assert table.schema.names == ["id", "name", "score"]
    assert sorted(table.to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "name": "a", "score": None}, {"id": 2, "name": "b", "score": None},
        {"id": 3, "name": "c", "score": 0.5}, {"id": 4, "name": None, "score": None}]


def test_merge_that_would_add_columns_is_refused_and_changes_nothing(root, instance):
    uri = f"{root}/evolving.lance"
    _write(root, instance, BASE)
    wider = pa.table({"id": [2, 3], "name": ["B", "c"], "score": [0.5, 1.5]})
    with pytest.raises(SchemaMismatchError, match="cannot add columns \\['score'\\]"):
        _write(root, instance, wider, **{"lance/write_mode": "merge", "lance/merge_on": ["id"],
                                          "lance/schema_mode": "add_columns"})
    ds = lance.dataset(uri)
    assert ds.version == 1 and ds.schema.names == ["id", "name"]


def test_add_columns_with_a_partition_replace(root, instance):
    parts = dg.StaticPartitionsDefinition(["x", "y"])
    calls = {"n": 0}

    @dg.asset(partitions_def=parts, metadata={"partition_expr": "k", "lance/schema_mode": "add_columns"})
    def keyed(context) -> pa.Table:
        calls["n"] += 1
        columns = {"k": [context.partition_key], "v": [calls["n"]]}
        if calls["n"] > 2:
            columns["extra"] = ["new"]
        return pa.table(columns)

    resources = {"io_manager": LanceIOManager(base_uri=root)}
    for key in ["x", "y", "x"]:
        dg.materialize([keyed], partition_key=key, instance=instance, resources=resources)
    rows = sorted(lance.dataset(f"{root}/keyed.lance").to_table().to_pylist(), key=lambda r: r["k"])
    assert rows == [{"k": "x", "v": 3, "extra": "new"}, {"k": "y", "v": 2, "extra": None}]
    assert lance.dataset(f"{root}/keyed.lance").version == 3  # the column came with the replace


def test_overwrite_schema_mode_replaces_schema_on_full_overwrite_only(root, instance):
    uri = f"{root}/evolving.lance"
    _write(root, instance, BASE)
    other = pa.table({"key": ["k"], "value": [1.5]})
    _write(root, instance, other, **{"lance/schema_mode": "overwrite"})
    assert lance.dataset(uri).schema.names == ["key", "value"]
    with pytest.raises(SchemaMismatchError, match="full-table overwrite"):
        _write(root, instance, BASE, **{"lance/schema_mode": "overwrite", "lance/write_mode": "append"})
    assert lance.dataset(uri).version == 2


def test_safe_casts_and_refused_type_changes(root, instance):
    uri = f"{root}/evolving.lance"
    _write(root, instance, BASE)
    narrow = pa.table({"id": pa.array([3], pa.int32()), "name": pa.array(["c"], pa.large_string())})
    _write(root, instance, narrow, **{"lance/write_mode": "append"})
    assert lance.dataset(uri).schema.field("id").type == pa.int64()
    with pytest.raises(SchemaMismatchError, match="type changes are not allowed"):
        _write(root, instance, pa.table({"id": ["x"], "name": ["d"]}), **{"lance/write_mode": "append"})
    assert lance.dataset(uri).count_rows() == 3


def test_pandas_output_appends_to_arrow_table(root, instance):
    uri = f"{root}/evolving.lance"
    _write(root, instance, BASE)
    frame = pa.table({"id": [5], "name": ["e"]}).to_pandas()  # pandas 3 strings, int64

    @dg.asset(name="evolving", metadata={"lance/write_mode": "append"})
    def evolving():
        return frame

    dg.materialize([evolving], instance=instance, resources={"io_manager": LanceIOManager(base_uri=root)})
    assert lance.dataset(uri).count_rows() == 3
