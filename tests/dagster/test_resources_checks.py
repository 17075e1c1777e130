"""LanceTableResource operations and the Lance asset-check factories."""

from __future__ import annotations

import datetime as dt

import dagster as dg
import lance
import pyarrow as pa
import pytest

from lance_assets import (
    LanceIOManager,
    LanceTableResource,
    lance_row_count_check,
    lance_schema_change_check,
    lance_version_freshness_check,
    table_uri,
)
from lance_format.errors import DatasetNotFoundError


def test_table_uris(tmp_path):
    assert table_uri("/lake", "sales/orders") == "/lake/sales/orders.lance"
    assert table_uri("/lake/", dg.AssetKey(["a", "b"])) == "/lake/a/b.lance"
    assert table_uri("/lake", "/abs/t.lance") == "/abs/t.lance"
    assert table_uri("/lake", "x.lance") == "/lake/x.lance"


def test_resource_operations_inside_an_asset(root, instance):
    @dg.asset
    def maintain(lance_tables: LanceTableResource) -> None:
        assert not lance_tables.exists("t")
        ds = lance_tables.write("t", pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}), mode="create",
                                transaction_properties={"who": "asset"})
        assert ds.has_stable_row_ids and lance_tables.latest_version("t") == 1
        lance_tables.write("t", pa.table({"id": [4], "v": ["d"]}).to_pandas())
        ds, stats = lance_tables.merge("t", pa.table({"id": [1, 5], "v": ["A", "e"]}), on="id")
        assert stats == {"inserted": 1, "updated": 1, "deleted": 0}
        ds = lance_tables.delete("t", "id = 2")
        assert ds.count_rows() == 4
        ds = lance_tables.replace_where("t", "id >= 4", pa.table({"id": [4], "v": ["D"]}))
        assert sorted(lance_tables.read("t").column("v").to_pylist()) == ["A", "D", "c"]
        ds = lance_tables.add_columns("t", [pa.field("score", pa.float64())])
        assert ds.schema.names == ["id", "v", "score"]
        changes = lance_tables.changes("t", 1).read_all()
        assert set(changes.column("_change_type").to_pylist()) >= {"insert", "update_preimage", "delete"}
        metrics = lance_tables.compact("t")
        assert metrics.fragments_removed >= 1
        assert lance_tables.read("t", version=1).num_rows == 3
        assert len(lance_tables.versions("t")) == lance_tables.latest_version("t")
        with pytest.raises(DatasetNotFoundError):
            lance_tables.open("missing")

    assert dg.materialize([maintain], instance=instance,
                          resources={"lance_tables": LanceTableResource(base_uri=root)}).success
    props = lance.dataset(f"{root}/t.lance").read_transaction(1).transaction_properties
    assert props["who"] == "asset"


def test_checks_read_the_table(root, instance):
    @dg.asset(metadata={"lance/schema_mode": "overwrite"})
    def checked(context) -> pa.Table:
        return pa.table({"a": list(range(int(context.run.tags.get("rows", "3"))))})

    checks = [
        lance_schema_change_check(checked),
        lance_row_count_check(checked, min_rows=2, max_rows=5),
        lance_version_freshness_check(checked, max_age=dt.timedelta(hours=1)),
    ]
    resources = {"io_manager": LanceIOManager(base_uri=root), "lance": LanceTableResource(base_uri=root)}
    result = dg.materialize([checked, *checks], instance=instance, resources=resources)
    assert {e.check_name: e.passed for e in result.get_asset_check_evaluations()} == {
        "lance_schema_unchanged": True, "lance_row_count_in_bounds": True, "lance_version_fresh": True}
    result = dg.materialize([checked, *checks], instance=instance, resources=resources, tags={"rows": "9"})
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert evaluations["lance_row_count_in_bounds"].passed is False
    assert evaluations["lance_row_count_in_bounds"].metadata["dagster/row_count"].value == 9
    assert evaluations["lance_schema_unchanged"].passed is True

    @dg.asset(name="checked", metadata={"lance/schema_mode": "overwrite"})
    def renamed() -> pa.Table:
        return pa.table({"b": [1, 2, 3]})

    result = dg.materialize([renamed, *checks], instance=instance, resources=resources)
    schema = {e.check_name: e for e in result.get_asset_check_evaluations()}["lance_schema_unchanged"]
    assert schema.passed is False
    assert schema.metadata["added"].value == ["b"] and schema.metadata["removed"].value == ["a"]


def test_checks_with_explicit_uri_and_missing_table(tmp_path, instance):
    uri = str(tmp_path / "ext.lance")
    spec = dg.AssetSpec("ext")
    stale = lance_version_freshness_check(spec, max_age=dt.timedelta(seconds=0), uri=uri)
    count = lance_row_count_check(spec, min_rows=1, uri=uri)
    defs = dg.Definitions(assets=[spec], asset_checks=[stale, count])
    job = defs.resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(instance=instance)
    assert all(e.passed is False for e in result.get_asset_check_evaluations())
    import lance_format

    lance_format.write_dataset(pa.table({"a": [1]}), uri)
    result = job.execute_in_process(instance=instance)
    outcome = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert outcome == {"lance_version_fresh": False, "lance_row_count_in_bounds": True}
    with pytest.raises(ValueError):
        lance_row_count_check(spec)
