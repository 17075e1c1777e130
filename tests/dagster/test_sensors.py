"""Version sensors, version probing and observable tables."""

from __future__ import annotations

import json
import os

import dagster as dg
import pyarrow as pa
import pytest

import lance_format
from lance_assets import LanceIOManager, LanceTableWatch, lance_version_sensor, observable_lance_table
from lance_format.table import version_discovery as versions_module
from lance_format.table.version_discovery import latest_version, new_versions


def _commit(uri: str, n: int, *, start: int = 0, v1_names: bool = False) -> None:
    for i in range(start, start + n):
        lance_format.write_dataset(pa.table({"id": [i]}), uri, mode="append" if i or start else "create",
                                   enable_stable_row_ids=True, enable_v2_manifest_paths=not v1_names)


def _forbidden(store):
    raise AssertionError("listed _versions/")


@pytest.fixture
def no_listing(monkeypatch):
    """Fail if anything lists _versions/ (the point of probing is to not depend on history)."""
    monkeypatch.setattr(versions_module, "list_versions", _forbidden)


@pytest.mark.parametrize("v1_names", [False, True])
def test_new_versions_probes_without_listing(tmp_path, v1_names, monkeypatch):
    uri = str(tmp_path / "t.lance")
    _commit(uri, 5, v1_names=v1_names)
    calls = []
    original = versions_module.list_versions
    monkeypatch.setattr(versions_module, "list_versions", lambda s: calls.append(1) or original(s))
    assert new_versions(uri, 2).versions == [3, 4, 5]
    assert new_versions(uri, 5).versions == []
    assert new_versions(uri, 0, limit=2).versions == [1, 2] and new_versions(uri, 0, limit=2).more
    assert latest_version(uri) == 5
    assert calls == []


def test_new_versions_survives_stale_garbage_and_missing_hints(tmp_path, no_listing):
    uri = str(tmp_path / "t.lance")
    _commit(uri, 6)
    hint = os.path.join(uri, "_versions", "latest_version_hint.json")
    with open(hint, "w") as f:
        f.write(json.dumps({"version": 2}))  # stale
    assert new_versions(uri, 1).versions == [2, 3, 4, 5, 6]
    assert latest_version(uri) == 6
    with open(hint, "w") as f:
        f.write("garbage")
    assert new_versions(uri, 4).versions == [5, 6]


def test_new_versions_skips_cleaned_up_gap(tmp_path):
    uri = str(tmp_path / "t.lance")
    _commit(uri, 6)
    from lance_format.table.naming import ManifestNaming, manifest_path

    for version in (2, 3):  # "cleanup" removed versions right after the cursor
        os.remove(os.path.join(uri, manifest_path(version, ManifestNaming.V2)))
    assert new_versions(uri, 1).versions == [4, 5, 6]
    os.remove(os.path.join(uri, "_versions", "latest_version_hint.json"))
    assert new_versions(uri, 1).versions == [4, 5, 6]  # falls back to one listing
    assert new_versions(str(tmp_path / "missing.lance"), 0).versions == []
    assert latest_version(str(tmp_path / "missing.lance")) is None


def _cdc_defs(uri):
    versions = dg.DynamicPartitionsDefinition(name="orders_versions")

    @dg.asset(partitions_def=versions)
    def order_changes(context) -> None:
        return None

    sensor = lance_version_sensor(
        LanceTableWatch(name="orders", uri=uri, partitions_def=versions, assets=[order_changes]),
        name="orders_versions_sensor", max_versions_per_tick=3,
    )
    return versions, order_changes, sensor


def test_runs_mode_adds_partitions_and_requests_runs(tmp_path, instance, monkeypatch):
    uri = str(tmp_path / "orders.lance")
    versions, order_changes, sensor = _cdc_defs(uri)
    skip = sensor(dg.build_sensor_context(instance=instance))
    assert isinstance(skip, dg.SkipReason)  # no table yet

    _commit(uri, 4)
    result = sensor(dg.build_sensor_context(instance=instance))
    assert [r.partition_key for r in result.run_requests] == ["1", "2", "3"]  # capped per tick
    assert result.run_requests[0].run_key == "orders:1"
    assert result.run_requests[0].asset_selection == [dg.AssetKey("order_changes")]
    assert result.dynamic_partitions_requests[0].partition_keys == ["1", "2", "3"]
    assert json.loads(result.cursor) == {"orders": 3}

    monkeypatch.setattr(versions_module, "list_versions", _forbidden)  # later ticks only probe
    result = sensor(dg.build_sensor_context(instance=instance, cursor=result.cursor))
    assert [r.partition_key for r in result.run_requests] == ["4"]
    cursor = result.cursor
    assert isinstance(sensor(dg.build_sensor_context(instance=instance, cursor=cursor)), dg.SkipReason)


def test_runs_mode_evaluates_against_definitions(tmp_path, instance):
    uri = str(tmp_path / "orders.lance")
    versions, order_changes, sensor = _cdc_defs(uri)
    _commit(uri, 2)
    defs = dg.Definitions(assets=[order_changes], sensors=[sensor])
    instance.add_dynamic_partitions("orders_versions", ["1", "2"])  # what the daemon applies first
    with dg.partition_loading_context(dynamic_partitions_store=instance):
        data = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, definitions=defs))
    assert [r.partition_key for r in data.run_requests] == ["1", "2"]


def test_observe_mode_emits_observations_with_data_versions(tmp_path, instance):
    uri = str(tmp_path / "ext.lance")
    _commit(uri, 2)
    sensor = lance_version_sensor(
        [LanceTableWatch(name="ext", uri=uri, asset_key=dg.AssetKey(["external", "ext"]))],
        name="ext_sensor", mode="observe",
    )
    result = sensor(dg.build_sensor_context(instance=instance, cursor=json.dumps({"ext": 1})))
    assert result.run_requests == []
    (event,) = result.asset_events
    assert event.asset_key == dg.AssetKey(["external", "ext"])
    assert event.tags["dagster/data_version"] == "2"
    assert event.metadata["dagster/row_count"].value == 2
    assert event.metadata["lance/operation"].value == "append"


def test_sensor_factory_validates_arguments(tmp_path):
    watch = LanceTableWatch(name="t", uri=str(tmp_path))
    with pytest.raises(ValueError, match="partitions_def and assets"):
        lance_version_sensor(watch, name="s")
    with pytest.raises(ValueError, match="asset_key"):
        lance_version_sensor(watch, name="s", mode="observe")
    with pytest.raises(ValueError, match="unique"):
        lance_version_sensor([watch, watch], name="s", mode="observe")


def test_observable_lance_table(tmp_path, instance):
    uri = str(tmp_path / "ext.lance")
    _commit(uri, 3)
    source = observable_lance_table(["ext"], uri)
    job = dg.define_asset_job("observe_ext", selection=[source])
    defs = dg.Definitions(assets=[source], jobs=[job])
    assert defs.resolve_job_def("observe_ext").execute_in_process(instance=instance).success
    (record,) = instance.fetch_observations(dg.AssetKey("ext"), limit=1).records
    observation = record.asset_observation
    assert observation.tags["dagster/data_version"] == "3"
    assert observation.metadata["dagster/row_count"].value == 3
    assert observation.metadata["lance/version"].value == 3


def test_sensor_driven_change_feed_run(tmp_path, instance):
    """The sensor's requests, executed in-process, feed each version's changes to the asset."""
    root = str(tmp_path / "lake")
    uri = f"{root}/orders.lance"
    versions = dg.DynamicPartitionsDefinition(name="orders_v")
    seen = {}

    @dg.asset
    def orders() -> pa.Table:
        return pa.table({"id": [1]})

    @dg.asset(partitions_def=versions, ins={"orders": dg.AssetIn(metadata={"lance/read": "changes"})})
    def changes(context, orders: pa.Table) -> None:
        seen[context.partition_key] = orders.column("_change_type").to_pylist()

    sensor = lance_version_sensor(
        LanceTableWatch(name="orders", uri=uri, partitions_def=versions, assets=[changes]), name="s"
    )
    _commit(uri, 2)
    result = sensor(dg.build_sensor_context(instance=instance))
    for request in result.dynamic_partitions_requests:
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    for run in result.run_requests:
        dg.materialize([orders, changes], selection=run.asset_selection, partition_key=run.partition_key,
                       resources={"io_manager": LanceIOManager(base_uri=root)}, instance=instance, tags=run.tags)
    assert seen == {"1": ["insert"], "2": ["insert"]}
