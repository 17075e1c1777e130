"""Table maintenance: compact small fragments and clean up old versions, reported as metadata.

Frequent small writes (a merge per sensor run) leave many small fragments and many versions.
:func:`maintain_table` compacts a table when more than ``min_small_fragments`` of its fragments
hold fewer than ``target_rows_per_fragment`` rows, then removes versions older than the
retention, and deletes old write-audit-publish branches (``audit/<run id>``) when the policy asks
(before the version cleanup, so versions only those branches kept can go). Cleanup never removes the latest version, tagged versions, versions a branch
references (the engine keeps those), nor versions at or after ``keep_versions_from``: the oldest
version a change-feed consumer still needs (the feed of ``(v-1, v]`` reads version ``v-1``).

:func:`build_lance_maintenance_assets` makes one asset per table whose materialization performs
this and reports the outcome; :func:`lance_maintenance_job` selects them (schedule it).
``LanceIOManager`` can apply the same policy after each write (its ``maintenance_*`` fields).
Both find the change feeds of a table in the code location by themselves: the runs-mode
``lance_version_sensor`` sensors carry their watches (:func:`watches_of_table`), so versions an
unfinished change-feed partition still needs survive whichever way maintenance runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

import dagster as dg

from lance_assets import engine
from lance_assets.indices import IndexSpec, refresh_all, resolve_specs, unindexed_rows
from lance_assets.metadata import STORAGE_KIND, TABLE_NAME, URI, VERSION, table_name_of
from lance_assets.partitions import versions_of_keys
from lance_assets.sensors import LanceTableWatch, _asset_keys, registered_watches
from lance_assets.wap import cleanup_audit_branches
from lance_format.errors import InvalidInputError

DEFAULT_TARGET_ROWS_PER_FRAGMENT = 1024 * 1024  # Lance's compaction default
PREFIX = "lance/maintenance/"


@dataclass(frozen=True)
class LanceMaintenancePolicy:
    """When to compact and which versions to clean up.

    ``min_small_fragments``: compact when MORE than this many fragments are smaller than
    ``target_rows_per_fragment``. ``cleanup_older_than``: remove versions older than this
    (None: by age no version goes); ``retain_versions``: always keep this many newest versions.
    With neither set, nothing is cleaned up. ``audit_branches_older_than`` / ``audit_branches_keep``:
    delete write-audit-publish branches (published or not) older than this, beyond the newest
    ``audit_branches_keep`` (either alone works; neither: audit branches stay).
    """

    min_small_fragments: int = 8
    target_rows_per_fragment: int = DEFAULT_TARGET_ROWS_PER_FRAGMENT
    cleanup_older_than: timedelta | None = timedelta(days=7)
    retain_versions: int | None = None
    audit_branches_older_than: timedelta | None = None
    audit_branches_keep: int | None = None

    def __post_init__(self) -> None:
        if self.min_small_fragments < 0:
            raise InvalidInputError(f"min_small_fragments must be >= 0; got {self.min_small_fragments}")
        if self.target_rows_per_fragment <= 0:
            raise InvalidInputError(f"target_rows_per_fragment must be positive; got {self.target_rows_per_fragment}")
        if self.retain_versions is not None and self.retain_versions <= 0:
            raise InvalidInputError(f"retain_versions must be positive; got {self.retain_versions}")
        if self.audit_branches_keep is not None and self.audit_branches_keep < 0:
            raise InvalidInputError(f"audit_branches_keep must be >= 0; got {self.audit_branches_keep}")

    @property
    def cleans_up(self) -> bool:
        """Whether the policy removes old versions (``cleanup_older_than`` or ``retain_versions`` set)."""
        return self.cleanup_older_than is not None or self.retain_versions is not None

    @property
    def cleans_audit_branches(self) -> bool:
        """Whether the policy deletes old write-audit-publish branches."""
        return self.audit_branches_older_than is not None or self.audit_branches_keep is not None


def maintain_table(
    uri: str,
    policy: LanceMaintenancePolicy,
    *,
    keep_versions_from: int | None = None,
    storage_options: engine.Options = None,
    transaction_properties: Mapping[str, str] | None = None,
    index_specs: Sequence[IndexSpec] = (),
) -> dict[str, Any]:
    """Compact (if the policy says so), bring the table's indices up to date and clean up the
    table at ``uri``; the outcome as metadata.

    ``keep_versions_from``: versions at or after it are never removed (change-feed consumers).
    ``index_specs``: the table's declared indices (the parameters of an index that is rebuilt
    where the engine cannot optimize it). Compaction runs first: it remaps the indices of the
    fragments it rewrites (fragments whose indices the engine cannot remap stay as they are),
    and ``optimize_indices`` then covers the rows no index covers yet.
    """
    ds = engine.open_table(uri, storage_options=storage_options)
    indexed = bool(engine.describe_indices(ds))
    unindexed_before = unindexed_rows(ds) if indexed else 0
    fragments_before = len(ds.get_fragments())
    small_before = engine.small_fragment_count(ds, policy.target_rows_per_fragment)
    compaction = {"fragments_removed": 0, "fragments_added": 0, "files_removed": 0, "files_added": 0}
    compacted = small_before > policy.min_small_fragments
    if compacted:
        ds, compaction = engine.compact(ds, target_rows_per_fragment=policy.target_rows_per_fragment,
                                        transaction_properties=transaction_properties or {})
    refreshed: list[str] = []
    if indexed:
        ds, refreshed = refresh_all(ds, index_specs)
    branches: dict[str, int] = {}
    if policy.cleans_audit_branches:
        branches = cleanup_audit_branches(ds, older_than=policy.audit_branches_older_than,
                                          keep=policy.audit_branches_keep)
    removed = {"versions_removed": 0, "bytes_removed": 0, "files_removed": 0, "data_files_removed": 0}
    if policy.cleans_up:
        candidates = None
        if keep_versions_from is not None:
            candidates = [v for v in engine.version_numbers(ds) if v < keep_versions_from]
        if candidates is None or candidates:  # an empty list: every version is still needed
            removed = engine.cleanup(ds, older_than=policy.cleanup_older_than,
                                     retain_versions=policy.retain_versions, versions=candidates)
    meta: dict[str, Any] = {
        PREFIX + "fragments_before": dg.MetadataValue.int(fragments_before),
        PREFIX + "small_fragments_before": dg.MetadataValue.int(small_before),
        PREFIX + "fragments_after": dg.MetadataValue.int(len(ds.get_fragments())),
        PREFIX + "compacted": dg.MetadataValue.bool(compacted and compaction["fragments_removed"] > 0),
        PREFIX + "fragments_removed": dg.MetadataValue.int(compaction["fragments_removed"]),
        PREFIX + "fragments_added": dg.MetadataValue.int(compaction["fragments_added"]),
        PREFIX + "versions_removed": dg.MetadataValue.int(removed["versions_removed"]),
        PREFIX + "files_removed": dg.MetadataValue.int(removed["files_removed"]),
        PREFIX + "bytes_removed": dg.MetadataValue.int(removed["bytes_removed"]),
        PREFIX + "version": dg.MetadataValue.int(ds.version),
    }
    if indexed:
        meta[PREFIX + "unindexed_rows_before"] = dg.MetadataValue.int(unindexed_before)
        meta[PREFIX + "unindexed_rows_after"] = dg.MetadataValue.int(unindexed_rows(ds))
        meta[PREFIX + "indices_optimized"] = dg.MetadataValue.text(", ".join(refreshed))
    for name, count in branches.items():
        meta[PREFIX + name] = dg.MetadataValue.int(count)
    if keep_versions_from is not None:
        meta[PREFIX + "keep_versions_from"] = dg.MetadataValue.int(keep_versions_from)
    return meta


def change_feed_floor(instance: dg.DagsterInstance, watch: LanceTableWatch) -> int | None:
    """The oldest version the change feed of ``watch`` still needs, or None when nothing is known.

    A version partition ``v`` that one of ``watch.assets`` has not materialized yet reads
    ``(v-1, v]``; versions the sensor has not seen yet read from its last seen version (the
    highest partition key). None when the partitions hold no key yet.
    """
    if watch.partitions_def is None or watch.partitions_def.name is None:
        raise InvalidInputError(f"table {watch.name!r}: a change feed needs the watch's partitions_def")
    keys = instance.get_dynamic_partitions(watch.partitions_def.name)
    if not keys:
        return None
    versions = versions_of_keys(keys, what="version partition key")
    floor = max(versions)
    for key in _asset_keys(watch.assets):
        done = instance.get_materialized_partitions(key)
        unfinished = [int(k) for k in keys if k not in done]
        if unfinished:
            floor = min(floor, min(unfinished) - 1)
    return floor


def watches_of_table(uri: str, watches: Sequence[LanceTableWatch] = (),
                     repository_def: dg.RepositoryDefinition | None = None) -> list[LanceTableWatch]:
    """The watches among ``watches`` and those the version sensors of ``repository_def`` carry
    (see :func:`lance_assets.registered_watches`) whose table is the one at ``uri``."""
    found = list(watches)
    if repository_def is not None:
        found.extend(registered_watches(repository_def.sensor_defs))
    name = table_name_of(uri)
    unique: dict[tuple[str, str], LanceTableWatch] = {}
    for watch in found:
        if table_name_of(watch.uri) == name and watch.partitions_def is not None and watch.partitions_def.name:
            unique.setdefault((watch.partitions_def.name, repr(_asset_keys(watch.assets))), watch)
    return list(unique.values())


def change_feeds_floor(instance: dg.DagsterInstance, watches: Sequence[LanceTableWatch]) -> int | None:
    """The oldest version any of ``watches``' change feeds still needs (None: none is known)."""
    floors = [f for f in (change_feed_floor(instance, w) for w in watches) if f is not None]
    return min(floors) if floors else None


T = TypeVar("T")


def _of_run(context: Any, attribute: str, kind: type[T]) -> T | None:
    """``context.<attribute>`` or ``context.step_context.<attribute>`` if it is a ``kind``: output,
    input and asset contexts carry run-level objects in either place, or not at all."""
    for path in ((attribute,), ("step_context", attribute)):
        target = context
        try:
            for name in path:
                target = getattr(target, name)
        except Exception:  # Dagster raises an invariant error where none was set
            continue
        if isinstance(target, kind):
            return target
    return None


def repository_of(context: Any) -> dg.RepositoryDefinition | None:
    """The code location's definitions an (output, input or asset) context runs in, if known."""
    return _of_run(context, "repository_def", dg.RepositoryDefinition)


def instance_of(context: Any) -> dg.DagsterInstance | None:
    """The Dagster instance a context's run uses (None for contexts built outside a run)."""
    return _of_run(context, "instance", dg.DagsterInstance)


MaintainedTable = dg.AssetKey | dg.AssetsDefinition | LanceTableWatch | str


@dataclass(frozen=True)
class _Target:
    name: str
    uri: str | None  # None: the table of asset_key under the IO manager
    asset_key: dg.AssetKey | None
    definition_metadata: Mapping[str, Any]
    watch: LanceTableWatch | None


def _op_safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", text) or "table"


def _targets(tables: Sequence[MaintainedTable]) -> list[_Target]:
    targets: list[_Target] = []
    for item in tables:
        if isinstance(item, dg.AssetsDefinition):
            for key in item.keys:
                targets.append(_Target("__".join(key.path), None, key, dict(item.specs_by_key[key].metadata), None))
        elif isinstance(item, dg.AssetKey):
            targets.append(_Target("__".join(item.path), None, item, {}, None))
        elif isinstance(item, LanceTableWatch):
            targets.append(_Target(item.name, item.uri, None, {}, item))
        elif isinstance(item, str):
            stem = item.rstrip("/").rsplit("/", 1)[-1].removesuffix(".lance")
            targets.append(_Target(stem, item, None, {}, None))
        else:
            raise InvalidInputError(f"a maintained table is an AssetKey, AssetsDefinition, LanceTableWatch or URI; got {item!r}")
    names = [t.name for t in targets]
    if len(set(names)) != len(names):
        raise InvalidInputError(f"maintained tables need unique names; got {names}")
    return targets


def build_lance_maintenance_assets(
    tables: Sequence[MaintainedTable],
    *,
    policy: LanceMaintenancePolicy = LanceMaintenancePolicy(),
    io_manager_key: str = "io_manager",
    key_prefix: str = "lance_maintenance",
    group_name: str | None = "lance_maintenance",
    keep_versions_from: Mapping[str, int] | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> list[dg.AssetsDefinition]:
    """One maintenance asset per table, ``[key_prefix, name]``; materializing it maintains the table.

    ``tables``: asset keys or asset definitions (their tables under the ``LanceIOManager`` at
    ``io_manager_key``; the maintenance asset depends on them), ``LanceTableWatch`` objects (a
    table by URI whose change feed their ``partitions_def``/``assets`` consume: versions those
    still need are kept) or table URIs (opened with ``storage_options``).
    ``keep_versions_from``: per table name, the oldest version to keep regardless of age.
    """
    floors = dict(keep_versions_from or {})
    assets = []
    for target in _targets(tables):
        assets.append(_maintenance_asset(target, policy, io_manager_key, key_prefix, group_name, floors.get(target.name),
                                         storage_options))
    return assets


def _maintenance_asset(target: _Target, policy: LanceMaintenancePolicy, io_manager_key: str, key_prefix: str,
                       group_name: str | None, fixed_floor: int | None,
                       storage_options: Mapping[str, str] | None) -> dg.AssetsDefinition:
    name = _op_safe(target.name)
    needs_io_manager = target.uri is None

    @dg.asset(
        key=dg.AssetKey([key_prefix, name]),
        deps=[target.asset_key] if target.asset_key is not None else None,
        group_name=group_name,
        kinds={"lance"},
        required_resource_keys={io_manager_key} if needs_io_manager else None,
        description=f"Compacts small fragments of {target.uri or target.name}, brings its indices up to date "
                    "and cleans up old versions",
    )
    def _maintain(context) -> dg.MaterializeResult:  # Dagster rejects a string annotation on context
        options: engine.Options = storage_options
        known = [target.watch] if target.watch is not None else []
        specs: list[IndexSpec] = []
        if target.uri is None:
            io_manager = getattr(context.resources, io_manager_key)
            if not hasattr(io_manager, "uri_for"):
                raise InvalidInputError(f"resource {io_manager_key!r} is not a LanceIOManager")
            assert target.asset_key is not None
            uri = io_manager.uri_for(target.asset_key, target.definition_metadata)
            options = io_manager.table_storage_options
            specs = resolve_specs(getattr(io_manager, "indices", {}).get(target.asset_key.to_user_string()),
                                  target.definition_metadata, None, where=f"asset {target.asset_key.to_user_string()}")
            if hasattr(io_manager, "change_feed_watches"):  # the feeds its maintenance_change_feeds names
                known.extend(io_manager.change_feed_watches(uri))
        else:
            uri = target.uri
            if target.watch is not None:
                options = target.watch.storage_options
        floors = [f for f in (fixed_floor,) if f is not None]
        watches = watches_of_table(uri, known, repository_of(context))
        feed_floor = change_feeds_floor(context.instance, watches)
        if feed_floor is not None:
            floors.append(feed_floor)
        props = {"dagster/run_id": context.run.run_id}
        meta = maintain_table(uri, policy, keep_versions_from=min(floors) if floors else None,
                              storage_options=engine.storage_options_of(options), transaction_properties=props,
                              index_specs=specs)
        version = meta[PREFIX + "version"].value
        context.log.info(f"maintained {uri}: " + ", ".join(f"{k[len(PREFIX):]}={v.value}" for k, v in meta.items()))
        return dg.MaterializeResult(metadata={
            **meta, VERSION: dg.MetadataValue.int(version), TABLE_NAME: table_name_of(uri),
            URI: dg.MetadataValue.path(uri), STORAGE_KIND: "lance",
        })

    return _maintain


def lance_maintenance_job(
    assets: Sequence[dg.AssetsDefinition], *, name: str = "lance_maintenance",
) -> dg.UnresolvedAssetJobDefinition:
    """A job that materializes the maintenance assets (put both in ``Definitions``; schedule it)."""
    return dg.define_asset_job(name, selection=dg.AssetSelection.assets(*assets),
                               description="Compact small Lance fragments and clean up old versions")
