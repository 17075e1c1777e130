"""``LanceTablesComponent``: a lake of Lance tables configured from a ``defs.yaml``.

One component instance holds everything the tables under one ``base_uri`` need:

* resources: the :class:`LanceIOManager` (its write settings under ``io_manager``), a
  :class:`LanceTableResource` and, optionally, a :class:`SparkSessionResource`;
* ``definitions_module``: a Python module whose assets (and jobs, checks, ...) are stored by that
  IO manager; each such asset gets its table's ``dagster/uri`` and ``dagster/table_name`` as
  definition metadata, which the UI shows on the asset's Overview ("Storage");
* ``tables``: per table (an asset key, and a URI for tables not under the IO manager): checks,
  a change feed (a version sensor adding dynamic partitions for the consumer assets),
  observation of an external table, maintenance. The IO manager's maintenance policy
  (``io_manager.settings.maintenance_*``) and the maintenance assets keep every version an
  unfinished change-feed partition of a table still needs.

Example (``defs.yaml``)::

    type: lance_assets.components.LanceTablesComponent
    attributes:
      base_uri: /data/lake
      io_manager: {settings: {write_mode: overwrite}}
      definitions_module: my_project.assets
      tables:
        - key: orders
          checks: {min_rows: 1, schema_unchanged: true, max_age_seconds: 86400,
                   index_present: true, max_unindexed_rows: 0}
          indices: [{column: order_id, type: BTREE}, {column: status, type: BITMAP}]
          change_feed: {partitions: orders_versions, consumers: [order_totals]}

With ``namespace: {impl: dir, root: /data/catalog}`` (or the same as ``io_manager.settings.namespace``) the tables are
those of a Lance Namespace (key ``sales/orders`` is table ``sales.orders``,
:mod:`lance_assets.namespace`): their checks and sensors locate them when they run.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib
import warnings
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import dagster as dg
import dagster_shared.record
from pydantic import Field

from lance_assets.checks import lance_row_count_check, lance_schema_change_check, lance_version_freshness_check
from lance_assets.index_checks import lance_index_coverage_check, lance_index_present_check
from lance_assets.io_manager import LanceChangeFeedConsumers, LanceIndexConfig, LanceIOManager
from lance_assets.maintenance import (
    DEFAULT_TARGET_ROWS_PER_FRAGMENT,
    LanceMaintenancePolicy,
    MaintainedTable,
    build_lance_maintenance_assets,
    lance_maintenance_job,
)
from lance_assets.metadata import TABLE_NAME, table_definition_metadata
from lance_assets.resources import LanceTableResource, SparkSessionConfig, SparkSessionResource
from lance_assets.sensors import LanceTableWatch, lance_version_sensor, observable_lance_table


class SparkModel(dg.Model):
    """A local or remote Spark session for Spark DataFrame outputs and inputs."""

    master: str = Field(default="local[2]", description="Spark master URL, e.g. local[2] or spark://host:7077")
    app_name: str = Field(default="lance-assets")
    conf: dict[str, str] = Field(default_factory=dict, description="Extra Spark configuration")
    resource_key: str = Field(default="spark", description="Resource key of the SparkSessionResource")


class IOManagerModel(dg.Model):
    """The LanceIOManager: its resource key and its settings (any LanceIOManager field except
    base_uri, storage_options and spark, which come from the component)."""

    key: str = Field(default="io_manager", description="Resource key of the LanceIOManager")
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="LanceIOManager settings: write_mode, schema_mode, merge_on, namespace, preview_rows, ...")


class TableChecksModel(dg.Model):
    """Asset checks on a table (each reads manifests only, no rows)."""

    min_rows: int | None = Field(default=None, description="Row count check: at least this many rows")
    max_rows: int | None = Field(default=None, description="Row count check: at most this many rows")
    schema_unchanged: bool = Field(default=False, description="The latest version keeps the previous columns")
    max_age_seconds: float | None = Field(default=None, description="The latest commit is at most this old")
    column_schema_change: bool = Field(
        default=False, description="Dagster's column-schema change check on the materializations' dagster/column_schema")
    index_present: bool = Field(default=False, description="The table's declared indices exist with their types")
    max_unindexed_rows: int | None = Field(default=None, description="Index coverage: at most this many unindexed rows")
    max_unindexed_fraction: float | None = Field(
        default=None, description="Index coverage: at most this fraction (0..1) of the rows unindexed")
    blocking: bool = Field(default=False, description="Failed checks block downstream assets")


class IndexModel(dg.Model):
    """An index kept on a table (as in asset metadata ``lance/indices``)."""

    column: str
    type: str = Field(description="BTREE | BITMAP | LABEL_LIST | ZONEMAP | BLOOMFILTER | NGRAM | INVERTED "
                                  "| IVF_PQ | IVF_FLAT | IVF_SQ")
    name: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)


class ChangeFeedModel(dg.Model):
    """A table's change feed, consumed one version partition at a time."""

    partitions: str = Field(description="Name of the consumers' DynamicPartitionsDefinition (one key per version)")
    consumers: list[str] = Field(description="Asset keys ('a/b') whose runs read the feed of their version")
    sensor: str | None = Field(default=None, description="Sensor name (default: {table}_versions_sensor); "
                                                          "tables naming the same sensor share it")
    minimum_interval_seconds: int = Field(default=30)
    running: bool = Field(default=False, description="Start the sensor running (default: stopped)")
    description: str | None = None


class TableModel(dg.Model):
    """One Lance table."""

    key: str = Field(description="Asset key, parts separated by '/'")
    uri: str | None = Field(default=None, description="The table's URI (default: the IO manager's table of the key)")
    observe: bool = Field(default=False, description="An external table: an observable asset whose data "
                                                     "version is the table's Lance version")
    description: str | None = None
    group_name: str | None = None
    checks: TableChecksModel | None = None
    indices: list[IndexModel] = Field(default_factory=list, description="Scalar indices the IO manager builds "
                                                                       "and keeps up to date after each write")
    change_feed: ChangeFeedModel | None = None
    maintain: bool = Field(default=False, description="Add a maintenance asset (compaction, version cleanup)")


class MaintenanceModel(dg.Model):
    """The policy of the maintenance assets of tables with ``maintain: true``, and their job."""

    min_small_fragments: int = 8
    target_rows_per_fragment: int = DEFAULT_TARGET_ROWS_PER_FRAGMENT
    cleanup_older_than_days: float | None = 7.0
    retain_versions: int | None = None
    audit_branches_older_than_days: float | None = Field(
        default=None, description="Delete write-audit-publish branches (audit/<run id>) older than this")
    audit_branches_keep: int | None = Field(
        default=None, description="Keep this many newest audit branches (with or without the age limit)")
    job_name: str = "lance_maintenance"


@contextlib.contextmanager
def _beta_api() -> Iterator[None]:
    # build_column_schema_change_checks is beta in Dagster 1.13: a notice to us, not to users.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)
        yield


class LanceTablesComponent(dg.Component, dg.Resolvable, dg.Model):
    """Lance tables under one base URI: IO manager and resources, per-table checks, version
    sensors with change-feed partitions, observed external tables and maintenance."""

    base_uri: str = Field(description="Directory or URI under which the IO manager stores tables")
    storage_options: dict[str, str] = Field(default_factory=dict, description="Object-store options (Lance keys)")
    io_manager: IOManagerModel = Field(default_factory=IOManagerModel)
    namespace: dict[str, str] | None = Field(
        default=None, description="A Lance Namespace ({impl: dir, root: ...}) whose tables the IO manager stores "
                                  "the assets in (key a/b: table a.b); null: tables under base_uri")
    table_resource_key: str | None = Field(default="lance", description="Resource key of a LanceTableResource "
                                                                        "on base_uri (null: none)")
    spark: SparkModel | None = None
    definitions_module: str | None = Field(
        default=None, description="Python module whose Dagster objects (assets, jobs, ...) belong to this lake")
    tables: list[TableModel] = Field(default_factory=list)
    maintenance: MaintenanceModel | None = None

    def build_io_manager(self, uris: dict[str, str | None] | None = None) -> LanceIOManager:
        """The IO manager; ``uris`` (table key -> URI, as :meth:`build_defs` resolves them) place
        the tables' change feeds, else a table is its ``uri`` or its key under ``base_uri``."""
        spark = None
        if self.spark is not None:
            spark = SparkSessionConfig(master=self.spark.master, app_name=self.spark.app_name, conf=self.spark.conf)
        settings = dict(self.io_manager.settings)
        if self.namespace:
            settings["namespace"] = dict(self.namespace)
        # The tables' change feeds, so the IO manager's maintenance policy keeps the versions their
        # unfinished partitions need even where the run's code location is not at hand.
        feeds = [LanceChangeFeedConsumers(table=(uris or {}).get(table.key) or table.uri or table.key,
                                          partitions=table.change_feed.partitions,
                                          consumers=list(table.change_feed.consumers))
                 for table in self.tables if table.change_feed is not None]
        declared = {table.key: [LanceIndexConfig(**index.model_dump()) for index in table.indices]
                    for table in self.tables if table.indices}
        if declared:
            settings["indices"] = {**settings.get("indices", {}), **declared}
        if feeds:
            settings["maintenance_change_feeds"] = [*settings.get("maintenance_change_feeds", []), *feeds]
        return LanceIOManager(base_uri=self.base_uri, storage_options=self.storage_options, spark=spark, **settings)

    def build_resources(self, uris: dict[str, str | None] | None = None) -> dict[str, Any]:
        resources: dict[str, Any] = {self.io_manager.key: self.build_io_manager(uris)}
        if self.table_resource_key:
            resources[self.table_resource_key] = LanceTableResource(base_uri=self.base_uri,
                                                                    storage_options=self.storage_options)
        if self.spark is not None:
            resources[self.spark.resource_key] = SparkSessionResource(
                master=self.spark.master, app_name=self.spark.app_name, conf=self.spark.conf)
        return resources

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        io_manager = self.build_io_manager()
        module_defs = self._module_defs(io_manager)
        definition_metadata = {spec.key: spec.metadata for spec in _asset_specs(module_defs)}
        uris: dict[str, str | None] = {}
        for table in self.tables:
            key = dg.AssetKey.from_user_string(table.key)
            # a Lance Namespace table is located when used (it may not be written yet): None here
            in_catalog = table.uri is None and io_manager.table_id(key, definition_metadata.get(key)) is not None
            uris[table.key] = table.uri or (None if in_catalog else io_manager.uri_for(key, definition_metadata.get(key)))
        assets: list[Any] = [self._observed(table, uris[table.key]) for table in self.tables if table.observe]
        checks = self._checks(uris)
        watches = self._watches(uris, io_manager)
        sensors = [
            lance_version_sensor(
                [watch for watch, _ in group], name=name,
                minimum_interval_seconds=min(feed.minimum_interval_seconds for _, feed in group),
                default_status=(dg.DefaultSensorStatus.RUNNING if any(feed.running for _, feed in group)
                                else dg.DefaultSensorStatus.STOPPED),
                description=next((feed.description for _, feed in group if feed.description), None),
            )
            for name, group in watches.items()
        ]
        jobs: list[Any] = []
        maintained = self._maintained(uris, watches)
        if maintained:
            settings = self.maintenance or MaintenanceModel()
            older = settings.cleanup_older_than_days
            policy = LanceMaintenancePolicy(
                min_small_fragments=settings.min_small_fragments,
                target_rows_per_fragment=settings.target_rows_per_fragment,
                cleanup_older_than=dt.timedelta(days=older) if older is not None else None,
                retain_versions=settings.retain_versions,
                audit_branches_older_than=(dt.timedelta(days=settings.audit_branches_older_than_days)
                                           if settings.audit_branches_older_than_days is not None else None),
                audit_branches_keep=settings.audit_branches_keep,
            )
            maintenance = build_lance_maintenance_assets(maintained, policy=policy, io_manager_key=self.io_manager.key,
                                                         storage_options=self.storage_options or None)
            assets.extend(maintenance)
            jobs.append(lance_maintenance_job(maintenance, name=settings.job_name))
        own = dg.Definitions(assets=assets, asset_checks=checks, sensors=sensors, jobs=jobs,
                             resources=self.build_resources(uris))
        return dg.Definitions.merge(module_defs, own)

    # -- parts ------------------------------------------------------------------------------
    def _module_defs(self, io_manager: LanceIOManager) -> dg.Definitions:
        """The module's definitions, its IO-manager assets carrying their table's location."""
        if not self.definitions_module:
            return dg.Definitions()
        defs = dg.load_definitions_from_module(importlib.import_module(self.definitions_module))
        stored = {spec.key for spec, io_key in _asset_specs_with_io_manager(defs) if io_key == self.io_manager.key}
        if not stored:
            return defs

        def with_location(spec: dg.AssetSpec) -> dg.AssetSpec:
            if spec.key not in stored:
                return spec
            if io_manager.table_id(spec.key, spec.metadata) is not None:  # a Lance Namespace table: its id
                return spec.merge_attributes(metadata={TABLE_NAME: io_manager.table_name(spec.key, spec.metadata)}
                                             if TABLE_NAME not in spec.metadata else {})
            uri = io_manager.uri_for(spec.key, spec.metadata)
            return spec.merge_attributes(metadata={k: v for k, v in table_definition_metadata(uri).items()
                                                   if k not in spec.metadata})

        # Definitions.map_asset_specs over all assets goes through a preview API; this does not.
        assets = list(defs.assets or [])
        mapped = dg.map_asset_specs(with_location, [a for a in assets if isinstance(a, (dg.AssetsDefinition, dg.AssetSpec))])
        others = [a for a in assets if not isinstance(a, (dg.AssetsDefinition, dg.AssetSpec))]
        return dagster_shared.record.replace(defs, assets=[*mapped, *others])

    def _observed(self, table: TableModel, uri: str | None) -> Any:
        if uri is None:
            raise ValueError(f"table {table.key!r}: observe needs the table's uri (it is a Lance Namespace "
                                    f"table, located only when used)")
        return observable_lance_table(table.key.split("/"), uri, description=table.description,
                                      group_name=table.group_name,
                                      storage_options=self.storage_options or None,
                                      metadata=table_definition_metadata(uri))

    def _checks(self, uris: dict[str, str | None]) -> list[dg.AssetChecksDefinition]:
        checks: list[dg.AssetChecksDefinition] = []
        schema_change_keys: list[dg.AssetKey] = []
        for table in self.tables:
            spec = table.checks
            if spec is None:
                continue
            key = dg.AssetKey.from_user_string(table.key)
            uri = uris[table.key]
            located: dict[str, Any] = {"uri": uri} if uri is not None else {"resource_key": self.io_manager.key}
            if spec.min_rows is not None or spec.max_rows is not None:
                checks.append(lance_row_count_check(key, min_rows=spec.min_rows, max_rows=spec.max_rows, **located,
                                                    blocking=spec.blocking))
            if spec.schema_unchanged:
                checks.append(lance_schema_change_check(key, **located, blocking=spec.blocking))
            if spec.max_age_seconds is not None:
                checks.append(lance_version_freshness_check(key, max_age=dt.timedelta(seconds=spec.max_age_seconds),
                                                            **located, blocking=spec.blocking))
            if spec.index_present:
                declared = [index.model_dump() for index in table.indices]
                checks.append(lance_index_present_check(key, declared, **located, blocking=spec.blocking))
            if spec.max_unindexed_rows is not None or spec.max_unindexed_fraction is not None:
                checks.append(lance_index_coverage_check(
                    key, max_unindexed_rows=spec.max_unindexed_rows, max_unindexed_fraction=spec.max_unindexed_fraction,
                    **located, blocking=spec.blocking))
            if spec.column_schema_change:
                schema_change_keys.append(key)
        if schema_change_keys:
            with _beta_api():
                checks.extend(dg.build_column_schema_change_checks(assets=schema_change_keys))
        return checks

    def _watches(self, uris: dict[str, str | None], io_manager: LanceIOManager,
                 ) -> dict[str, list[tuple[LanceTableWatch, ChangeFeedModel]]]:
        groups: dict[str, list[tuple[LanceTableWatch, ChangeFeedModel]]] = defaultdict(list)
        for table in self.tables:
            feed = table.change_feed
            if feed is None:
                continue
            name = _table_name(table)
            common: dict[str, Any] = dict(partitions_def=dg.DynamicPartitionsDefinition(name=feed.partitions),
                                          assets=[dg.AssetKey.from_user_string(k) for k in feed.consumers],
                                          storage_options=self.storage_options or None)
            uri = uris[table.key]
            if uri is None:  # a Lance Namespace table, located at each tick
                key = dg.AssetKey.from_user_string(table.key)
                assert io_manager.catalog is not None
                table_id = io_manager.table_id(key) or list(key.path)
                watch = LanceTableWatch.in_namespace(name, io_manager.catalog, table_id, **common)
            else:
                watch = LanceTableWatch(name=name, uri=uri, **common)
            groups[feed.sensor or f"{name}_versions_sensor"].append((watch, feed))
        return dict(groups)

    def _maintained(self, uris: dict[str, str | None],
                    watches: dict[str, list[tuple[LanceTableWatch, ChangeFeedModel]]]) -> list[MaintainedTable]:
        by_name = {watch.name: watch for group in watches.values() for watch, _ in group}
        maintained: list[MaintainedTable] = []
        for table in self.tables:
            if not table.maintain:
                continue
            name = _table_name(table)
            uri = uris[table.key]
            if name in by_name and by_name[name].namespace is None:  # keep the versions its change feed needs
                maintained.append(by_name[name])
            elif uri is not None and (table.uri is not None or table.observe):
                maintained.append(uri)
            else:
                maintained.append(dg.AssetKey.from_user_string(table.key))
        return maintained


def _table_name(table: TableModel) -> str:
    return "__".join(dg.AssetKey.from_user_string(table.key).path)


def _asset_specs(defs: dg.Definitions) -> list[dg.AssetSpec]:
    return [spec for spec, _ in _asset_specs_with_io_manager(defs)]


def _asset_specs_with_io_manager(defs: dg.Definitions) -> list[tuple[dg.AssetSpec, str | None]]:
    """The materializable assets of ``defs`` with the IO manager key of each."""
    found: list[tuple[dg.AssetSpec, str | None]] = []
    for item in defs.assets or []:
        if isinstance(item, dg.AssetsDefinition) and item.is_materializable:
            for spec in item.specs:
                found.append((spec, item.get_io_manager_key_for_asset_key(spec.key)))
        elif isinstance(item, dg.AssetSpec):
            found.append((item, None))
    return found

