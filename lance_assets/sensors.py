"""Version sensors: react to new commits of Lance tables.

``lance_version_sensor`` watches one or more tables. Its cursor holds the last version seen per
table; each tick probes only the versions after it (``lance_format.TableVersions``), so its cost
does not grow with the table's history. Two modes:

* ``runs`` (tables the pipeline consumes): one dynamic partition per new version is added to the
  table's ``DynamicPartitionsDefinition`` and a run of the target assets is requested for it; the
  targets read that version's change feed (see :mod:`lance_assets.change_feed`).
* ``observe`` (tables the pipeline does not own): an ``AssetObservation`` per new version whose
  data version is the Lance version, with the version's row count, schema and operation.

In runs mode the sensor carries its watches as definition metadata (``lance/change_feeds``), so
that maintenance (the IO manager's policy, the maintenance assets) finds the change-feed
consumers of a table in the code location without being told (:func:`registered_watches`).

``observable_lance_table`` builds an observable asset (an ``AssetSpec`` observed by a function,
not the deprecated ``SourceAsset``) whose data version is the latest Lance version, for
``AutomationCondition``-driven pipelines.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import dagster as dg

from lance_assets import engine
from lance_assets.engine import TableVersions
from lance_assets.metadata import (
    COLUMN_SCHEMA,
    OPERATION,
    ROW_COUNT,
    STORAGE_KIND,
    TABLE_NAME,
    URI,
    VERSION,
    column_schema,
    table_name_of,
)
from lance_assets.namespace import catalog_config, resolve_table

DATA_VERSION_TAG = "dagster/data_version"
KIND_TAG = "dagster/kind/lance"
TABLE_TAG = "lance/table"
WATCHES_METADATA = "lance/change_feeds"  # a runs-mode sensor's watches (uri, partitions, consumer assets)
VERSION_TAG = "lance/version"


@dataclass(frozen=True)
class LanceTableWatch:
    """One watched table.

    ``name``: its key in the cursor (and run keys). ``partitions_def``: the dynamic partitions to
    add one key per version to (runs mode). ``assets``: what to run per version (runs mode).
    ``asset_key``: the asset to observe (observe mode). ``storage_options``: object-store
    settings (Lance's keys) for an object-store table (``s3://``, ``gs://``, ``az://``).
    ``namespace``: a Lance Namespace config; ``uri`` is then the table's dotted id, located at
    each tick (see :meth:`in_namespace`).
    """

    name: str
    uri: str
    partitions_def: dg.DynamicPartitionsDefinition | None = None
    assets: Sequence[Any] = field(default_factory=tuple)
    asset_key: dg.AssetKey | None = None
    storage_options: Mapping[str, str] | None = field(default=None, repr=False, compare=False)
    namespace: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def in_namespace(cls, name: str, namespace: Mapping[str, Any], table_id: str | Sequence[str],
                     **kwargs: Any) -> LanceTableWatch:
        """A watch of table ``table_id`` (``"sales.orders"``) of a Lance Namespace (a config such as
        ``{"impl": "dir", "root": ...}``); before its first write the table has no versions."""
        config = catalog_config(namespace)
        if config is None:
            raise ValueError(f"watch {name!r}: namespace must be a Lance Namespace config with 'impl'")
        table = table_id if isinstance(table_id, str) else ".".join(table_id)
        return cls(name=name, uri=table, namespace=config, **kwargs)

    def location(self) -> str | None:
        """Where the table is now (None: a namespace table not written yet)."""
        return resolve_table(self.uri, self.namespace, storage_options=self.storage_options)


def _asset_keys(assets: Sequence[Any]) -> list[dg.AssetKey]:
    keys: list[dg.AssetKey] = []
    for item in assets:
        if isinstance(item, dg.AssetsDefinition):
            keys.extend(item.keys)
        else:
            keys.append(dg.AssetKey.from_coercible(item))
    return keys


def _watches_metadata(watches: Sequence[LanceTableWatch]) -> list[dict[str, Any]]:
    return [{"name": w.name, "uri": w.uri, "partitions": w.partitions_def.name if w.partitions_def else None,
             "consumers": [k.to_user_string() for k in _asset_keys(w.assets)]} for w in watches]


def registered_watches(sensors: Iterable[dg.SensorDefinition]) -> list[LanceTableWatch]:
    """The change feeds the runs-mode version sensors among ``sensors`` feed (e.g. a code
    location's ``repository_def.sensor_defs``), as watches with their partitions and consumers."""
    found: list[LanceTableWatch] = []
    for sensor in sensors:
        entry = sensor.metadata.get(WATCHES_METADATA) if sensor.metadata else None
        value = getattr(entry, "value", entry)
        if not isinstance(value, list):
            continue
        for item in value:
            if not isinstance(item, dict) or not item.get("partitions"):
                continue
            found.append(LanceTableWatch(
                name=str(item["name"]), uri=str(item["uri"]),
                partitions_def=dg.DynamicPartitionsDefinition(name=str(item["partitions"])),
                assets=[dg.AssetKey.from_user_string(k) for k in item.get("consumers", [])],
            ))
    return found


def version_metadata(table: str | TableVersions, version: int) -> dict[str, Any]:
    """Row count, schema and operation of one version, read from its manifest alone.

    ``table``: a URI, or the table's versions as the sensors hold them (one opened store).
    """
    versions = table if isinstance(table, TableVersions) else engine.table_versions(table)
    summary = versions.summary(version)
    return {
        VERSION: dg.MetadataValue.int(version),
        ROW_COUNT: dg.MetadataValue.int(summary.row_count),
        COLUMN_SCHEMA: dg.MetadataValue.table_schema(column_schema(summary.schema)),
        OPERATION: summary.operation or "unknown",
        URI: dg.MetadataValue.path(versions.uri),
        TABLE_NAME: table_name_of(versions.uri),
        STORAGE_KIND: "lance",
    }


def _load_cursor(cursor: str | None) -> dict[str, int]:
    if not cursor:
        return {}
    try:
        data = json.loads(cursor)
    except ValueError:
        return {}
    return {str(k): int(v) for k, v in data.items()} if isinstance(data, dict) else {}


def lance_version_sensor(
    tables: LanceTableWatch | Sequence[LanceTableWatch],
    *,
    name: str,
    mode: Literal["runs", "observe"] = "runs",
    minimum_interval_seconds: int = 30,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.STOPPED,
    start_after_version: int = 0,
    max_versions_per_tick: int = 100,
    description: str | None = None,
) -> dg.SensorDefinition:
    """A sensor that turns new Lance versions into partitioned runs or asset observations.

    Each tick probes every watched table for versions after the cursor's (without listing the
    history). The cursor is a JSON object of the last version seen per table name.

    Parameters
    ----------
    tables
        The watched tables; names must be unique.
    name
        The sensor's name.
    mode
        ``"runs"``: add one key per new version to each table's ``partitions_def`` and request a
        run of its ``assets`` per version (run key ``<table>:<version>``). ``"observe"``: report
        an observation of each table's ``asset_key`` whose data version is the Lance version.
    minimum_interval_seconds
        How often the sensor ticks.
    default_status
        ``dg.DefaultSensorStatus.RUNNING`` starts it on.
    start_after_version
        Versions up to this one are considered seen on the first tick.
    max_versions_per_tick
        Bounds one tick's work; the rest follow on later ticks.
    description
        Shown in the UI.

    Returns
    -------
    dg.SensorDefinition
        The sensor.

    Raises
    ------
    ValueError
        No table, duplicate names, an unknown mode, or a watch missing what its mode needs
        (``partitions_def`` and ``assets`` for runs, ``asset_key`` for observe).
    """
    watches = [tables] if isinstance(tables, LanceTableWatch) else list(tables)
    if not watches:
        raise ValueError("lance_version_sensor needs at least one table")
    if len({w.name for w in watches}) != len(watches):
        raise ValueError("watched table names must be unique")
    if mode not in ("runs", "observe"):
        raise ValueError(f"mode must be 'runs' or 'observe', got {mode!r}")
    target_keys: list[dg.AssetKey] = []
    for watch in watches:
        if mode == "runs":
            if watch.partitions_def is None or not watch.assets:
                raise ValueError(f"table {watch.name!r}: runs mode needs partitions_def and assets")
            target_keys.extend(k for k in _asset_keys(watch.assets) if k not in target_keys)
        elif watch.asset_key is None:
            raise ValueError(f"table {watch.name!r}: observe mode needs asset_key")

    def evaluate(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        cursor = _load_cursor(context.cursor)
        run_requests: list[dg.RunRequest] = []
        partition_requests: list[dg.AddDynamicPartitionsRequest] = []
        events: list[dg.AssetObservation] = []
        seen: list[str] = []
        for watch in watches:
            after = cursor.get(watch.name, start_after_version)
            location = watch.location()
            if location is None:
                continue
            table = engine.table_versions(location, storage_options=watch.storage_options)
            found = table.after(after, limit=max_versions_per_tick)
            if not found.versions:
                continue
            keys = [str(v) for v in found.versions]
            seen.append(f"{watch.name}: {keys[0]}..{keys[-1]}")
            if mode == "runs":
                assert watch.partitions_def is not None and watch.partitions_def.name is not None
                partition_requests.append(watch.partitions_def.build_add_request(keys))
                selection = _asset_keys(watch.assets)
                run_requests.extend(
                    dg.RunRequest(
                        run_key=f"{watch.name}:{key}",
                        partition_key=key,
                        asset_selection=selection,
                        tags={TABLE_TAG: watch.uri, VERSION_TAG: key},
                    )
                    for key in keys
                )
            else:
                assert watch.asset_key is not None
                for version in found.versions:
                    events.append(dg.AssetObservation(
                        asset_key=watch.asset_key,
                        metadata=version_metadata(table, version),
                        tags={DATA_VERSION_TAG: str(version)},
                    ))
            cursor[watch.name] = found.versions[-1]
        if not seen:
            return dg.SkipReason("no new Lance versions")
        context.log.info("new Lance versions: " + "; ".join(seen))
        return dg.SensorResult(
            run_requests=run_requests,
            dynamic_partitions_requests=partition_requests,
            asset_events=events,
            cursor=json.dumps(cursor, sort_keys=True),
        )

    evaluate.__name__ = name
    return dg.sensor(
        name=name,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        description=description or f"New versions of Lance tables {[w.name for w in watches]} ({mode})",
        target=target_keys if mode == "runs" else None,
        metadata={WATCHES_METADATA: dg.MetadataValue.json(_watches_metadata(watches))} if mode == "runs" else None,
    )(evaluate)


def observable_lance_table(
    key: str | Sequence[str] | dg.AssetKey,
    uri: str,
    *,
    description: str | None = None,
    group_name: str | None = None,
    metadata: dict[str, Any] | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> Any:
    """An observable asset (``AssetsDefinition``) whose data version is the table's latest Lance version."""
    spec = dg.AssetSpec(
        key=dg.AssetKey.from_coercible(key),
        description=description or f"Lance table {uri}",
        group_name=group_name,
        metadata={URI: dg.MetadataValue.path(uri), **(metadata or {})},
        kinds={"lance"},
    )

    def _observe() -> dg.ObserveResult:
        table = engine.table_versions(uri, storage_options=storage_options)
        version = table.latest()
        if version is None:
            return dg.ObserveResult(data_version=dg.DataVersion("0"), metadata={"lance/exists": False})
        return dg.ObserveResult(
            data_version=dg.DataVersion(str(version)),
            metadata=version_metadata(table, version),
        )

    # The decorator is Dagster's current way to observe an AssetSpec; it is marked beta, which
    # is Dagster's notice to us, not something every user of this factory should see.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)
        decorator = dg.multi_observable_source_asset(specs=[spec], name=_op_name(spec.key))
    return decorator(_observe)


def _op_name(key: dg.AssetKey) -> str:
    return "observe_" + re.sub(r"[^A-Za-z0-9_]", "_", "__".join(key.path))
