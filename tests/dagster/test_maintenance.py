"""Table maintenance: the maintenance assets and job, and the IO manager's policy, on real tables.

Compaction happens only above the small-fragment threshold; cleanup removes old versions but
never tagged ones, ones a branch references, or ones a change-feed consumer still needs; the
metadata reports exactly what changed on disk.
"""

from __future__ import annotations

import os
from datetime import timedelta

import dagster as dg
import pyarrow as pa
import pytest

import lance_format
from lance_assets import (
    LanceChangeFeed,
    LanceChangeFeedConsumers,
    LanceIOManager,
    LanceMaintenancePolicy,
    LanceTableWatch,
    build_lance_maintenance_assets,
    lance_maintenance_job,
    lance_version_sensor,
)
from lance_format.errors import InvalidInputError

NOW = timedelta(0)  # every version but the latest is "older than" this
POLICY = LanceMaintenancePolicy(min_small_fragments=3, target_rows_per_fragment=1000, cleanup_older_than=NOW)


def _appends(uri: str, count: int) -> None:
    """``count`` versions of 2 rows each: one small fragment per version."""
    for i in range(count):
        lance_format.write_dataset(pa.table({"id": [2 * i, 2 * i + 1]}), uri, mode="create" if i == 0 else "append",
                                   enable_stable_row_ids=True)


def _files(uri: str) -> dict[str, int]:
    out = {}
    for folder, _, names in os.walk(uri):
        for name in names:
            path = os.path.join(folder, name)
            out[os.path.relpath(path, uri)] = os.path.getsize(path)
    return out


def _versions(uri: str) -> list[int]:
    return [v["version"] for v in lance_format.dataset(uri).versions()]


def _metadata(instance, key: dg.AssetKey) -> dict:
    event = instance.get_latest_materialization_event(key)
    assert event is not None
    return {k: v.value for k, v in event.asset_materialization.metadata.items()}


@dg.asset
def events() -> pa.Table:  # written directly by the tests
    raise AssertionError("not materialized here")


def test_compacts_cleans_up_and_reports_what_changed_on_disk(root, instance):
    uri = f"{root}/events.lance"
    _appends(uri, 6)
    before = _files(uri)
    assets = build_lance_maintenance_assets([events.key], policy=POLICY)
    job = lance_maintenance_job(assets)
    defs = dg.Definitions(assets=[events, *assets], jobs=[job], resources={"io_manager": LanceIOManager(base_uri=root)})
    result = defs.resolve_job_def("lance_maintenance").execute_in_process(instance=instance)
    assert result.success
    meta = _metadata(instance, dg.AssetKey(["lance_maintenance", "events"]))
    after = _files(uri)
    removed = {path: size for path, size in before.items() if path not in after}
    ds = lance_format.dataset(uri)
    assert sorted(ds.to_table().column("id").to_pylist()) == list(range(12))
    assert len(ds.get_fragments()) == 1
    assert _versions(uri) == [ds.version]  # every older version went
    assert meta["lance/maintenance/fragments_before"] == 6
    assert meta["lance/maintenance/small_fragments_before"] == 6
    assert meta["lance/maintenance/fragments_after"] == 1
    assert meta["lance/maintenance/compacted"] is True
    assert meta["lance/maintenance/fragments_removed"] == 6
    assert meta["lance/maintenance/version"] == meta["lance/version"] == ds.version
    assert meta["lance/maintenance/versions_removed"] == ds.version - 1
    # what was there before and is gone, plus what compaction itself wrote and cleanup removed
    # (the fragment reservation's version and transaction)
    assert meta["lance/maintenance/bytes_removed"] > sum(removed.values()) > 0
    assert meta["lance/maintenance/files_removed"] == len([p for p in removed if not p.startswith("_versions")]) + 1
    assert sum(p.startswith("data") for p in removed) == 6
    assert meta["dagster/table_name"] == os.path.abspath(uri)


def test_below_the_threshold_nothing_is_compacted(root, instance):
    uri = f"{root}/events.lance"
    _appends(uri, 3)
    assets = build_lance_maintenance_assets([uri], policy=LanceMaintenancePolicy(
        min_small_fragments=3, target_rows_per_fragment=1000, cleanup_older_than=None))
    assert dg.materialize(assets, instance=instance).success
    meta = _metadata(instance, dg.AssetKey(["lance_maintenance", "events"]))
    assert meta["lance/maintenance/compacted"] is False
    assert meta["lance/maintenance/fragments_after"] == meta["lance/maintenance/fragments_before"] == 3
    assert meta["lance/maintenance/versions_removed"] == 0
    assert _versions(uri) == [1, 2, 3]


VERSIONS = dg.DynamicPartitionsDefinition(name="events_versions")


@dg.asset(partitions_def=VERSIONS)
def event_changes() -> None:  # the change-feed consumer; its materializations are reported below
    raise AssertionError("not materialized here")


def test_tagged_branch_and_change_feed_versions_survive(root, instance):
    uri = f"{root}/events.lance"
    _appends(uri, 6)
    ds = lance_format.dataset(uri)
    ds.tags.create("release", 2)
    ds.create_branch("dev", 3)
    # The sensor has added partitions 1..6; the consumer has finished 1..4, so (4, 5] and (5, 6]
    # are still to be read: version 4 onwards must stay.
    instance.add_dynamic_partitions("events_versions", [str(v) for v in range(1, 7)])
    for key in ["1", "2", "3", "4"]:
        instance.report_runless_asset_event(dg.AssetMaterialization(event_changes.key, partition=key))
    feed_before = LanceChangeFeed(uri, 4, 6).to_table()
    watch = LanceTableWatch("events", uri, partitions_def=VERSIONS, assets=[event_changes])
    assets = build_lance_maintenance_assets([watch], policy=POLICY)
    assert dg.materialize(assets, instance=instance).success
    meta = _metadata(instance, dg.AssetKey(["lance_maintenance", "events"]))
    latest = lance_format.dataset(uri).version
    assert meta["lance/maintenance/compacted"] is True
    assert meta["lance/maintenance/keep_versions_from"] == 4
    # removed: v1 (untagged, unreferenced, not needed); kept: the tag, the branch's base, the feed's
    assert _versions(uri) == [2, 3, 4, 5, 6, *range(7, latest + 1)]
    assert meta["lance/maintenance/versions_removed"] == 1
    assert lance_format.dataset(uri, version="release").count_rows() == 4
    assert lance_format.dataset(uri, version=3).count_rows() == 6
    assert LanceChangeFeed(uri, 4, 6).to_table().equals(feed_before)
    # the compaction's versions change no row: their partitions' feed is empty
    assert LanceChangeFeed(uri, 6, latest).to_table().num_rows == 0
    # The consumer catches up: now only what the sensor has not seen (after 6) is needed.
    for key in ["5", "6"]:
        instance.report_runless_asset_event(dg.AssetMaterialization(event_changes.key, partition=key))
    assert dg.materialize(assets, instance=instance).success
    meta = _metadata(instance, dg.AssetKey(["lance_maintenance", "events"]))
    assert meta["lance/maintenance/keep_versions_from"] == 6
    assert meta["lance/maintenance/compacted"] is False
    assert [v for v in _versions(uri) if v < 6] == [2, 3]  # the tag's and the branch's


def test_a_fixed_keep_versions_from_is_kept(root, instance):
    uri = f"{root}/events.lance"
    _appends(uri, 5)
    before = _files(uri)
    cleanup_only = LanceMaintenancePolicy(min_small_fragments=100, cleanup_older_than=NOW)
    assets = build_lance_maintenance_assets([uri], policy=cleanup_only, keep_versions_from={"events": 3})
    assert dg.materialize(assets, instance=instance).success
    assert _versions(uri) == [3, 4, 5]
    removed = {path: size for path, size in before.items() if path not in _files(uri)}
    meta = _metadata(instance, dg.AssetKey(["lance_maintenance", "events"]))
    assert meta["lance/maintenance/versions_removed"] == 2
    assert meta["lance/maintenance/bytes_removed"] == sum(removed.values()) > 0
    # versions 1 and 2: their transactions go; their data files stay (version 3 has them)
    assert meta["lance/maintenance/files_removed"] == len([p for p in removed if not p.startswith("_versions")]) == 2


def test_the_io_manager_policy_compacts_after_writes(root, instance):
    @dg.asset(metadata={"lance/write_mode": "append"})
    def clicks() -> pa.Table:
        return pa.table({"n": [1]})

    manager = LanceIOManager(base_uri=root, maintenance_min_small_fragments=2,
                             maintenance_target_rows_per_fragment=1000, maintenance_cleanup_older_than_seconds=0)
    compacted = []
    for _ in range(4):
        assert dg.materialize([clicks], instance=instance, resources={"io_manager": manager}).success
        compacted.append(_metadata(instance, clicks.key)["lance/maintenance/compacted"])
    uri = f"{root}/clicks.lance"
    ds = lance_format.dataset(uri)
    assert compacted == [False, False, True, False]  # the third write made 3 small fragments (> 2)
    assert ds.count_rows() == 4 and len(ds.get_fragments()) == 2
    assert _versions(uri) == [ds.version]
    # off by default: no maintenance metadata, nothing compacted
    plain = LanceIOManager(base_uri=f"{root}/plain")
    for _ in range(4):
        assert dg.materialize([clicks], instance=instance, resources={"io_manager": plain}).success
    assert not any(k.startswith("lance/maintenance/") for k in _metadata(instance, clicks.key))
    assert len(lance_format.dataset(f"{root}/plain/clicks.lance").get_fragments()) == 4


def test_bad_settings_are_refused():
    with pytest.raises(InvalidInputError):
        LanceMaintenancePolicy(target_rows_per_fragment=0)
    with pytest.raises(InvalidInputError):
        build_lance_maintenance_assets(["a/t.lance", "b/t.lance"])


def test_retain_versions_alone_keeps_the_newest(root, instance):
    uri = f"{root}/events.lance"
    _appends(uri, 5)
    policy = LanceMaintenancePolicy(min_small_fragments=100, cleanup_older_than=None, retain_versions=2)
    assert dg.materialize(build_lance_maintenance_assets([uri], policy=policy), instance=instance).success
    assert _versions(uri) == [4, 5]
    assert lance_format.dataset(uri).count_rows() == 10


# -- the IO manager's policy and change feeds ----------------------------------------------------
FEED_VERSIONS = dg.DynamicPartitionsDefinition(name="clicks_versions")


@dg.asset(metadata={"lance/write_mode": "append"})
def clicks(context) -> pa.Table:  # Dagster rejects a string annotation on context
    return pa.table({"n": [int(context.run.tags.get("n", "0"))]})


@dg.asset(partitions_def=FEED_VERSIONS)
def click_changes(clicks: LanceChangeFeed) -> None:
    changes = clicks.to_table()
    assert changes.num_rows == 1 and changes.column("_change_type").to_pylist() == ["insert"]  # the version's row


def _clicks_defs(root: str, *, with_sensor: bool, **settings) -> dg.Definitions:
    manager = LanceIOManager(base_uri=root, maintenance_min_small_fragments=1000,
                             maintenance_cleanup_older_than_seconds=0, **settings)
    sensors = []
    if with_sensor:
        watch = LanceTableWatch("clicks", f"{root}/clicks.lance", partitions_def=FEED_VERSIONS, assets=[click_changes])
        sensors.append(lance_version_sensor(watch, name="clicks_versions_sensor"))
    return dg.Definitions(assets=[clicks, click_changes], sensors=sensors, resources={"io_manager": manager},
                          executor=dg.in_process_executor)


FEED_ROOT_ENV = "LANCE_TEST_FEED_ROOT"


@dg.definitions
def clicks_code_location() -> dg.Definitions:
    """The definitions as a code location holds them (what dagster dev / dg dev serve): runs of
    it know their code location, so the IO manager finds the version sensor by itself."""
    return _clicks_defs(os.environ[FEED_ROOT_ENV], with_sensor=True)


class _Runner:
    """Runs assets in process (no code location) or, like a deployment, from the code location."""

    def __init__(self, defs: dg.Definitions | None, instance) -> None:
        self.defs, self.instance = defs, instance

    def __call__(self, asset: dg.AssetsDefinition, *, partition_key: str | None = None,
                 tags: dict[str, str] | None = None) -> None:
        tags = dict(tags or {})
        if self.defs is not None:
            result = self.defs.resolve_implicit_global_asset_job_def().execute_in_process(
                instance=self.instance, asset_selection=[asset.key], partition_key=partition_key, tags=tags)
        else:
            from dagster._core.definitions.reconstruct import ReconstructableRepository

            job = ReconstructableRepository.for_module(__name__, "clicks_code_location").get_reconstructable_job(
                "__ASSET_JOB")
            if partition_key is not None:
                tags["dagster/partition"] = partition_key
            result = dg.execute_job(job, self.instance, tags=tags, asset_selection=[asset.key])
        assert result.success


@pytest.mark.parametrize("found_by", ["sensor", "setting"])
def test_io_manager_policy_keeps_what_unfinished_change_feeds_need(root, instance, found_by, monkeypatch):
    """Retention 0 would remove every old version after each write; the versions an unmaterialized
    change-feed partition reads survive, and go once its partitions are materialized."""
    if found_by == "sensor":  # runs of the code location: its version sensor declares the feed
        monkeypatch.setenv(FEED_ROOT_ENV, root)
        run = _Runner(None, instance)
    else:  # in process, no sensor: the IO manager is told (by the asset key of its own table)
        run = _Runner(_clicks_defs(root, with_sensor=False, maintenance_change_feeds=[
            LanceChangeFeedConsumers(table="clicks", partitions="clicks_versions", consumers=["click_changes"])]),
            instance)
    uri = f"{root}/clicks.lance"

    def write(n: int) -> None:  # a write of clicks, and the sensor adding its version as a partition
        run(clicks, tags={"n": str(n)})
        instance.add_dynamic_partitions("clicks_versions", [str(lance_format.dataset(uri).version)])

    for n in range(1, 5):
        write(n)
    assert _versions(uri) == [1, 2, 3, 4]  # partitions 1..4 unfinished: (0,1] needs nothing, (1,2] needs 1, ...
    assert _metadata(instance, clicks.key)["lance/maintenance/keep_versions_from"] == 0
    for key in ["1", "2"]:
        run(click_changes, partition_key=key)
    write(5)  # partitions 3..5 unfinished: the oldest, (2,3], reads version 2
    assert _versions(uri) == [2, 3, 4, 5]
    assert _metadata(instance, clicks.key)["lance/maintenance/keep_versions_from"] == 2
    assert _metadata(instance, clicks.key)["lance/maintenance/versions_removed"] == 1
    for key in ["3", "4", "5"]:
        run(click_changes, partition_key=key)
    write(6)  # every partition the sensor added (up to 5) is done: (5, 6] needs 5
    assert _versions(uri) == [5, 6]
    run(click_changes, partition_key="6")
    write(7)
    assert _versions(uri) == [6, 7]
    assert lance_format.dataset(uri).to_table().column("n").to_pylist() == list(range(1, 8))


def test_without_the_feed_known_the_retention_alone_decides(root, instance):
    """The control case: neither a sensor nor the setting names the feed (or keeping is off, or
    in-process runs, which have no code location to find the sensor in), and the same writes
    leave only the latest version."""
    for defs in (_clicks_defs(root, with_sensor=False),
                 _clicks_defs(f"{root}/in_process", with_sensor=True),
                 _clicks_defs(f"{root}/off", with_sensor=False, maintenance_keep_change_feeds=False,
                              maintenance_change_feeds=[LanceChangeFeedConsumers(
                                  table="clicks", partitions="clicks_versions", consumers=["click_changes"])])):
        uri = f"{defs.resources['io_manager'].base_uri}/clicks.lance"
        for n in range(1, 4):
            _Runner(defs, instance)(clicks, tags={"n": str(n)})
            instance.add_dynamic_partitions("clicks_versions", [str(lance_format.dataset(uri).version)])
        assert _versions(uri) == [3]


def test_component_tables_tell_the_io_manager_their_change_feeds(root, instance):
    """A LanceTablesComponent whose YAML turns the IO manager's maintenance on: the tables'
    change_feed entries reach the IO manager, so even in-process runs keep what the feed needs."""
    from lance_assets.components import LanceTablesComponent

    component = LanceTablesComponent.resolve_from_yaml(f"""
base_uri: {root}
io_manager:
  settings: {{maintenance_min_small_fragments: 1000, maintenance_cleanup_older_than_seconds: 0}}
tables:
  - key: clicks
    change_feed: {{partitions: clicks_versions, consumers: [click_changes]}}
""")
    built = component.build_defs(None)  # type: ignore[arg-type]  # the context is not used
    manager = (built.resources or {})["io_manager"]
    uri = f"{root}/clicks.lance"
    assert [(w.uri, w.partitions_def.name, w.assets) for w in manager.change_feed_watches(uri)] == [
        (uri, "clicks_versions", [click_changes.key])]
    run = _Runner(dg.Definitions(assets=[clicks, click_changes], resources=built.resources), instance)
    for n in range(1, 4):
        run(clicks, tags={"n": str(n)})
        instance.add_dynamic_partitions("clicks_versions", [str(lance_format.dataset(uri).version)])
    assert _versions(uri) == [1, 2, 3]
    for key in ["1", "2", "3"]:
        run(click_changes, partition_key=key)
    run(clicks, tags={"n": "4"})
    assert _versions(uri) == [3, 4]


def test_maintenance_assets_keep_the_feeds_the_io_manager_names(root, instance):
    uri = f"{root}/clicks.lance"
    _appends(uri, 4)
    instance.add_dynamic_partitions("clicks_versions", ["1", "2", "3", "4"])
    instance.report_runless_asset_event(dg.AssetMaterialization(click_changes.key, partition="1"))
    manager = LanceIOManager(base_uri=root, maintenance_change_feeds=[
        LanceChangeFeedConsumers(table="clicks", partitions="clicks_versions", consumers=["click_changes"])])
    cleanup_only = LanceMaintenancePolicy(min_small_fragments=100, cleanup_older_than=NOW)
    assets = build_lance_maintenance_assets([clicks.key], policy=cleanup_only)
    assert dg.materialize([*assets, clicks], selection=assets, instance=instance,
                          resources={"io_manager": manager}).success
    assert _versions(uri) == [1, 2, 3, 4]  # partition 2 reads (1, 2]
    assert _metadata(instance, dg.AssetKey(["lance_maintenance", "clicks"]))["lance/maintenance/keep_versions_from"] == 1
