"""LanceTablesComponent from YAML: resources, table-location metadata on the module's assets,
checks (evaluated on real tables), a version sensor adding change-feed partitions, observed
external tables and maintenance; plus the materialization labels and check descriptions."""

from __future__ import annotations

import dagster as dg
import pyarrow as pa
import pytest

import lance_format
from example_project.source import orders_table
from lance_assets import LanceIOManager, LanceTableResource, SparkSessionResource
from lance_assets.components import LanceTablesComponent
from lance_assets.metadata import operation_label

YAML = """
base_uri: {root}
spark: {{master: "local[1]"}}
io_manager:
  settings: {{preview_rows: 0}}
definitions_module: example_project.assets
tables:
  - key: raw_orders
    checks: {{min_rows: 1, max_rows: 100, schema_unchanged: true, max_age_seconds: 3600}}
    change_feed: {{partitions: raw_orders_versions, consumers: [customer_totals], minimum_interval_seconds: 5}}
    maintain: true
  - key: daily_orders
    checks: {{column_schema_change: true}}
  - key: external/events
    uri: {external}
    observe: true
    checks: {{min_rows: 5}}
maintenance: {{min_small_fragments: 1, job_name: compact_lake}}
"""


def _component(tmp_path) -> LanceTablesComponent:
    root, external = tmp_path / "lake", tmp_path / "elsewhere" / "events.lance"
    return LanceTablesComponent.resolve_from_yaml(YAML.format(root=root, external=external))


def test_yaml_builds_resources_checks_sensor_and_maintenance(tmp_path):
    defs = _component(tmp_path).build_defs(None)  # type: ignore[arg-type]  # the context is not used
    root = tmp_path / "lake"
    resources = defs.resources or {}
    assert isinstance(resources["io_manager"], LanceIOManager) and resources["io_manager"].preview_rows == 0
    assert isinstance(resources["lance"], LanceTableResource) and isinstance(resources["spark"], SparkSessionResource)
    assert resources["io_manager"].spark is not None and resources["io_manager"].spark.master == "local[1]"

    # The module's IO-manager assets carry their table's location (the Overview's "Storage")
    meta = defs.resolve_assets_def("raw_orders").specs_by_key[dg.AssetKey("raw_orders")].metadata
    assert meta["dagster/uri"] == dg.MetadataValue.text(str(root / "raw_orders.lance"))
    assert meta["dagster/table_name"] == str(root / "raw_orders.lance")
    assert meta["lance/write_mode"] == "merge"  # the asset's own metadata is kept

    checks = {(k.asset_key.to_user_string(), k.name): d for d in defs.asset_checks or [] for k in d.check_keys
              for d in [d.get_spec_for_check_key(k).description]}
    assert checks == {
        ("raw_orders", "lance_row_count_in_bounds"): "The latest Lance version has between 1 and 100 rows",
        ("raw_orders", "lance_schema_unchanged"): "The latest Lance version has the previous version's columns",
        ("raw_orders", "lance_version_fresh"): "The latest Lance commit is at most 1 hour old",
        ("daily_orders", "column_schema_change"): checks[("daily_orders", "column_schema_change")],
        ("external/events", "lance_row_count_in_bounds"): "The latest Lance version has at least 5 rows",
    }
    keys = {k.to_user_string() for k in defs.resolve_all_asset_keys()}
    assert {"external/events", "lance_maintenance/raw_orders"} <= keys
    assert defs.resolve_job_def("compact_lake") is not None
    assert [s.name for s in defs.sensors or []] == ["raw_orders_versions_sensor"]


def test_component_defs_run(tmp_path, instance):
    """The sensor adds a version partition and requests the consumer's run; the checks and the
    column-schema check are evaluated on a real materialization; the external table is checked by its URI."""
    defs = _component(tmp_path).build_defs(None)  # type: ignore[arg-type]
    root = tmp_path / "lake"
    lance_format.write_dataset(orders_table(), str(root / "raw_orders.lance"), enable_stable_row_ids=True)
    lance_format.write_dataset(pa.table({"id": list(range(3))}), str(tmp_path / "elsewhere" / "events.lance"))

    sensor = defs.resolve_sensor_def("raw_orders_versions_sensor")
    tick = sensor(dg.build_sensor_context(instance=instance))
    assert isinstance(tick, dg.SensorResult)
    assert [list(r.partition_keys) for r in tick.dynamic_partitions_requests or []] == [["1"]]
    assert [(r.partition_key, r.asset_selection) for r in tick.run_requests or []] == [
        ("1", [dg.AssetKey("customer_totals")])]

    everything = [*(defs.assets or []), *(defs.asset_checks or [])]
    result = dg.materialize(everything, selection=["daily_orders"], partition_key="2024-01-01",
                            resources=defs.resources, instance=instance)
    assert {(e.asset_key.to_user_string(), e.check_name, e.passed) for e in result.get_asset_check_evaluations()} \
        == {("daily_orders", "column_schema_change", True)}
    (event,) = result.get_asset_materialization_events()
    meta = event.materialization.metadata
    assert meta["lance/write_mode"].value == "overwrite"
    assert meta["lance/operation"].value == "create (the table's first version, by this overwrite)"

    external = dg.materialize(everything, selection=dg.AssetSelection.checks_for_assets(
        dg.AssetKey(["external", "events"])), resources=defs.resources, instance=instance, raise_on_error=False)
    (evaluation,) = external.get_asset_check_evaluations()
    assert not evaluation.passed and evaluation.metadata["dagster/row_count"].value == 3  # 3 < min_rows 5


def test_wrong_attributes_are_refused(tmp_path):
    with pytest.raises(Exception, match="min_row"):
        LanceTablesComponent.resolve_from_yaml(f"base_uri: {tmp_path}\ntables:\n  - key: t\n    checks: {{min_row: 1}}\n")


@pytest.mark.parametrize("mode, operation, created, label", [
    ("merge", "overwrite", True, "create (the table's first version, by this merge)"),
    ("merge", "update", False, "update (Lance's commit for this merge)"),
    ("overwrite", "append", False, "append (Lance's commit for this overwrite)"),
    ("append", "append", False, "append"),
])
def test_operation_label_agrees_with_write_mode(mode, operation, created, label):
    assert operation_label(mode, operation, created=created) == label


def test_maintenance_yaml_cleans_up_audit_branches(tmp_path, instance):
    root = tmp_path / "lake"
    component = LanceTablesComponent.resolve_from_yaml(f"""
base_uri: {root}
tables:
  - key: t
    maintain: true
maintenance: {{min_small_fragments: 100, cleanup_older_than_days: null, audit_branches_keep: 1}}
""")
    defs = component.build_defs(None)  # type: ignore[arg-type]  # the context is not used
    uri = str(root / "t.lance")
    ds = lance_format.write_dataset(pa.table({"id": [1]}), uri)
    for run in ("a", "b", "c"):
        lance_format.dataset(uri).create_branch(f"audit/{run}")
    ds.create_branch("dev")  # not an audit branch: kept
    assets = [a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition)]
    result = dg.materialize(assets, selection=["lance_maintenance/t"], resources=defs.resources, instance=instance)
    (event,) = result.get_asset_materialization_events()
    assert event.materialization.metadata["lance/maintenance/audit_branches_removed"].value == 2
    left = sorted(lance_format.dataset(uri).branches.list())
    assert len(left) == 2 and left[0].startswith("audit/") and left[1] == "dev"  # the newest (same second: any)
