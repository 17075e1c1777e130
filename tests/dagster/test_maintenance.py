"""Table maintenance: the maintenance assets and job, and the IO manager's policy, on real tables.

Compaction happens only above the small-fragment threshold; cleanup removes old versions but
never tagged ones, ones a branch references, or ones a change-feed consumer still needs; the
metadata reports exactly what changed on disk.
"""

from __future__ import annotations

import os
from datetime import timedelta

import pyarrow as pa
import pytest

import dagster as dg
import lance_format
from lance_assets import (
    LanceChangeFeed,
    LanceIOManager,
    LanceMaintenancePolicy,
    LanceTableWatch,
    build_lance_maintenance_assets,
    lance_maintenance_job,
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
