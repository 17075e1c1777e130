"""``LanceIOManager``: Dagster assets and op outputs stored as Lance tables.

One table per asset key (``{base_uri}[/{namespace}]/{key path}.lance``, overridable with
``lance/uri`` or ``lance/table`` definition metadata; or, with a Lance Namespace config as
``namespace``, the catalog's table ``{key parts joined by '.'}``: :mod:`lance_assets.namespace`); an op's output (no asset key) is stored as
``{base_uri}[/{namespace}]/{op}/{output name}.lance`` unless its ``Out`` metadata names the table.
Outputs may be pyarrow, pandas, polars or PySpark; the input's annotation decides what is
loaded. Write modes, the schema policy, merge clauses, writer properties, commit properties and
table config come from the IO manager, then the asset's definition metadata, then output
metadata set at run time. A partitioned overwrite replaces exactly the partitions' rows in one
commit (a Lance ``Update``). Every commit records the run id, asset key (or op output) and
partition in its transaction properties, and every materialization reports Dagster's standard
table metadata. With write-audit-publish (``lance/write_audit_publish`` or ``write_audit_publish``)
an asset's output goes to the run's branch ``audit/<run id>`` instead, its checks' inputs load
that branch, and downstream inputs publish it first (:mod:`lance_assets.wap`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, TypedDict

import dagster as dg
import pyarrow as pa
from pydantic import Field, PrivateAttr, field_validator

from lance_assets import engine, spark_io, wap
from lance_assets.arrow_io import ArrowRows
from lance_assets.change_feed import LanceChangeFeed, load_changes
from lance_assets.config import (
    CHECK_PARTITION_DATA,
    COMMIT_PROPERTIES,
    DATA_STORAGE_VERSION,
    MAX_BYTES_PER_FILE,
    MAX_ROWS_PER_FILE,
    MERGE_DELETE_NOT_MATCHED_BY_SOURCE,
    MERGE_ON,
    MERGE_UPDATE_CONDITION,
    MERGE_WHEN_MATCHED,
    MERGE_WHEN_NOT_MATCHED,
    PREVIEW_ROWS,
    TABLE_CONFIG,
    NamespaceMode,
    ReadMode,
    SchemaMode,
    WriteMode,
    WriteSettings,
    resolve_read_settings,
    resolve_write_settings,
)
from lance_assets.indices import IndexSpec, ensure_indices, resolve_specs
from lance_assets.maintenance import (
    DEFAULT_TARGET_ROWS_PER_FRAGMENT,
    LanceMaintenancePolicy,
    change_feeds_floor,
    instance_of,
    maintain_table,
    repository_of,
    watches_of_table,
)
from lance_assets.namespace import NamespaceTables
from lance_assets.partitions import partition_predicate
from lance_assets.resources import SparkSessionConfig, SparkSessionResource
from lance_assets.sensors import LanceTableWatch
from lance_assets.type_handlers import from_reader, is_spark_dataframe, load_kind
from lance_assets.write_modes import RowWriter, write_output
from lance_format.errors import DatasetNotFoundError, InvalidInputError, LanceError

RUN_ID_PROPERTY = "dagster/run_id"
PENDING_INDICES = "lance/indices_on_publish"  # WAP: the declared indices the publish brings up to date
ASSET_KEY_PROPERTY = "dagster/asset_key"
PARTITION_PROPERTY = "dagster/partition_key"
PARTITION_RANGE_PROPERTY = "dagster/partition_key_range"
OP_OUTPUT_PROPERTY = "dagster/op_output"  # {op}/{output} of an op output (no asset key)


def output_path(context: dg.OutputContext) -> list[str]:
    """Where an output's table lives under ``base_uri``: its asset key's path, or for an op's
    output ``[op, output name]`` (the op's step key, so ops inside graphs stay apart)."""
    if context.has_asset_key:
        return list(context.asset_key.path)
    return [*context.step_key.split("."), context.name]


def _plain_metadata(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: getattr(v, "value", v) if type(v).__module__.startswith("dagster") else v for k, v in (meta or {}).items()}


class _RowWriterOptions(TypedDict):
    """The keyword arguments ArrowRows and SparkRows share."""

    schema_mode: SchemaMode
    transaction_properties: Mapping[str, str]
    enable_stable_row_ids: bool
    data_storage_version: str | None
    storage_options: engine.Options
    max_rows_per_file: int | None
    max_bytes_per_file: int | None


class LanceChangeFeedConsumers(dg.Config):
    """A table's change feed as its consumers read it: the dynamic partitions a version sensor
    fills (one key per version) and the assets partitioned by them. Maintenance keeps every
    version an unmaterialized partition still needs."""

    table: str = Field(description="The table: a table URI (containing '://', ending in '.lance' or an absolute "
                                   "path), or an "
                                   "asset key ('a/b') whose table is at its key path under base_uri (and namespace)")
    partitions: str = Field(description="Name of the consumers' DynamicPartitionsDefinition")
    consumers: list[str] = Field(description="Asset keys ('a/b') that read one version partition each")


class LanceIndexConfig(dg.Config):
    """A scalar index the IO manager keeps on a table (as in definition metadata ``lance/indices``)."""

    column: str = Field(description="The indexed column")
    type: str = Field(description="BTREE | BITMAP | LABEL_LIST | ZONEMAP | BLOOMFILTER | NGRAM")
    name: str | None = Field(default=None, description="Index name (default {column}_idx)")
    params: dict[str, Any] = Field(default_factory=dict, description="The index type's build parameters")


class LanceIOManager(NamespaceTables, dg.ConfigurableIOManager):
    """Stores each asset as a Lance table under ``base_uri``.

    An asset ``a/b`` is the table ``{base_uri}/a/b.lance`` (``namespace`` and the ``lance/table``
    / ``lance/uri`` output metadata change that). Outputs may be pyarrow Tables, pandas or polars
    DataFrames and Spark DataFrames; inputs are loaded as their annotation asks (or as a
    :class:`LanceChangeFeed`). Each write is one Lance commit, in the asset's ``write_mode``;
    a partitioned asset replaces exactly its partitions' rows. Every field below can be
    overridden per asset by definition metadata (``lance/<field>``) and per run with
    ``context.add_output_metadata``.

    Examples
    --------
    >>> import tempfile, dagster as dg, pyarrow as pa, lance_format as lance
    >>> from lance_assets import LanceIOManager
    >>> @dg.asset
    ... def orders() -> pa.Table:
    ...     return pa.table({"id": [1, 2], "amount": [9.5, 12.0]})
    >>> base = tempfile.mkdtemp()
    >>> dg.materialize([orders], resources={"io_manager": LanceIOManager(base_uri=base)}).success
    True
    >>> lance.dataset(f"{base}/orders.lance").to_table().to_pydict()
    {'id': [1, 2], 'amount': [9.5, 12.0]}
    """

    base_uri: str = Field(default="", description="Directory (or URI) under which each asset's table lives "
                                                  "(not needed when namespace is a Lance Namespace config)")
    storage_options: dict[str, str] = Field(
        default_factory=dict,
        description="Object-store options with Lance's keys (aws_access_key_id, aws_endpoint, allow_http, ...) "
                    "for s3://, gs:// and az:// tables; use dg.EnvVar for secrets",
    )
    write_mode: WriteMode = Field(default=WriteMode.OVERWRITE, description="Default write mode")
    schema_mode: SchemaMode = Field(default=SchemaMode.ERROR, description="error | add_columns | overwrite")
    namespace: Any = Field(
        default=None,
        description="Path ('prod/sales') under base_uri that extends (namespace_mode='prefix') or replaces "
                    "(namespace_mode='replace') each asset key's prefix, like dagster-iceberg's namespace; or a "
                    "Lance Namespace config ({impl: dir, root: ...}): asset key a/b is its table a.b "
                    "(lance_assets.namespace)",
    )
    namespace_mode: NamespaceMode = Field(default=NamespaceMode.PREFIX, description="prefix | replace")
    merge_on: list[str] | None = Field(
        default=None, description="Default key columns of write_mode='merge' (asset metadata lance/merge_on wins)")
    merge_when_matched: str | None = Field(default=None, description="update_all | do_nothing | delete | fail")
    merge_when_not_matched: str | None = Field(default=None, description="insert_all | do_nothing")
    merge_update_condition: str | None = Field(
        default=None, description="SQL over source./target. columns: update matched rows only where it holds")
    merge_delete_not_matched_by_source: bool | None = Field(
        default=None, description="Delete target rows whose key the output lacks (scoped to written partitions)")
    preview_rows: int | None = Field(default=None, description="Rows of the lance/preview metadata (0: none)")
    check_partition_data: bool | None = Field(
        default=None, description="Refuse rows outside the written partitions (default true)")
    commit_properties: dict[str, str] = Field(
        default_factory=dict,
        description="Added to every commit's transaction properties (asset metadata lance/commit_properties, "
                    "then run-time metadata, add and override keys; the dagster/* provenance keys win)")
    table_config: dict[str, str] = Field(
        default_factory=dict,
        description="Lance table config set after a write when it differs (update_config; asset metadata "
                    "lance/table_config adds and overrides keys)")
    max_rows_per_file: int | None = Field(default=None, description="Writer property (lance/max_rows_per_file)")
    max_bytes_per_file: int | None = Field(default=None, description="Writer property (lance/max_bytes_per_file)")
    write_audit_publish: bool = Field(
        default=False,
        description="Write every asset to a branch audit/<run id> of its table; main moves to it only when "
                    "lance_publish_asset runs after the blocking checks passed (asset metadata "
                    "lance/write_audit_publish overrides it per asset)")
    write_audit_publish_rebase: bool = Field(
        default=False,
        description="Publish by rebasing over main's commits made since the branch was taken when they are "
                    "compatible (appends, other partitions; never under an overwrite) instead of refusing "
                    "(asset metadata lance/write_audit_publish_rebase overrides it)")
    enable_stable_row_ids: bool = Field(default=True, description="For new tables; change feeds need it")
    data_storage_version: str | None = Field(default=None, description="Lance file version of new tables")
    maintenance_min_small_fragments: int | None = Field(
        default=None,
        description="Maintenance after each write (off when unset): compact the table when more than this many "
                    "fragments are smaller than maintenance_target_rows_per_fragment")
    maintenance_target_rows_per_fragment: int = Field(
        default=DEFAULT_TARGET_ROWS_PER_FRAGMENT, description="Rows per fragment compaction aims for")
    maintenance_cleanup_older_than_seconds: float | None = Field(
        default=None,
        description="With maintenance on: also remove versions older than this many seconds (never the latest, "
                    "tagged or branch-referenced ones, nor those an unfinished change feed needs: see "
                    "maintenance_keep_change_feeds)")
    maintenance_retain_versions: int | None = Field(
        default=None, description="With maintenance on: always keep this many newest versions")
    maintenance_keep_change_feeds: bool = Field(
        default=True,
        description="With maintenance on: never clean up versions an unfinished change-feed partition of the table "
                    "still needs; the change feeds are found in the run's code location (the lance_version_sensor "
                    "sensors watching the table) and in maintenance_change_feeds")
    maintenance_change_feeds: list[LanceChangeFeedConsumers] = Field(
        default_factory=list,
        description="Change feeds of this IO manager's tables to keep versions for, beside those the code "
                    "location's version sensors declare (for feeds filled without a lance_version_sensor)")
    indices: dict[str, list[LanceIndexConfig]] = Field(
        default_factory=dict,
        description="Scalar indices per asset key ('a/b'), built after each write and kept up to date "
                    "(an asset's lance/indices metadata replaces its entry)")
    spark: SparkSessionConfig | None = Field(
        default=None,
        description="Session settings for Spark inputs/outputs (a SparkSessionResource is accepted and "
                    "converted to its settings; an active session is always reused)",
    )

    @field_validator("spark", mode="before")
    @classmethod
    def _spark_settings(cls, value: Any) -> Any:
        # Not kept as a nested resource: Dagster 1.13 initializes those through a deprecated API.
        return value.settings() if isinstance(value, SparkSessionResource) else value

    _run_tags: dict[str, str] = PrivateAttr(default_factory=dict)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """Dagster's hook at the start of a run: remember the run's tags (partition ranges)."""
        # A single-run backfill passes its partition range only through run tags; change-feed
        # inputs of unpartitioned upstreams need it.
        run = getattr(context, "run", None)
        self._run_tags = dict(run.tags) if run is not None else {}

    # -- naming (uri_for, table_path, table_name, table_id: lance_assets.namespace) --------
    def _uri_of(self, context: dg.OutputContext) -> str:
        """The table an output (an asset's, or an op's) is stored in (declared in a Lance Namespace
        on its first write)."""
        return self.uri_for(output_path(context), context.definition_metadata, create=True)

    @property
    def table_storage_options(self) -> dict[str, str] | None:
        """The storage options every table of this IO manager is opened with."""
        return engine.storage_options_of(self.storage_options)

    def _properties(self, context: dg.OutputContext) -> dict[str, str]:
        if context.has_asset_key:
            props = {ASSET_KEY_PROPERTY: context.asset_key.to_user_string()}
        else:
            props = {OP_OUTPUT_PROPERTY: "/".join(output_path(context))}
        try:
            props[RUN_ID_PROPERTY] = context.run_id
        except Exception:  # built contexts in unit tests may have no run
            pass
        if context.has_asset_partitions:
            keys = context.asset_partition_keys
            if len(keys) == 1:
                props[PARTITION_PROPERTY] = str(keys[0])
            else:
                try:
                    key_range = context.asset_partition_key_range
                    props[PARTITION_RANGE_PROPERTY] = f"{key_range.start}...{key_range.end}"
                except Exception:
                    props[PARTITION_RANGE_PROPERTY] = f"{len(keys)} partitions"
        return props

    # -- outputs ----------------------------------------------------------------------------
    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        """Write ``obj`` to the output's table as one commit and report the materialization's metadata.

        Raises
        ------
        SchemaMismatchError
            The output's columns differ from the table's and ``schema_mode`` is ``error``.
        InvalidInputError
            A setting is invalid, or partition rows fall outside the partition
            (``check_partition_data``).
        CommitConflictError
            A concurrent commit conflicts with this write.
        """
        if obj is None:
            context.log.debug("asset returned None; nothing written to Lance")
            return
        settings = resolve_write_settings(
            write_mode=self.write_mode,
            schema_mode=self.schema_mode,
            definition_metadata=context.definition_metadata,
            output_metadata=context.output_metadata,
            defaults=self._write_defaults(),
        )
        uri = self._uri_of(context)
        keys = list(context.asset_partition_keys) if context.has_asset_partitions else None
        props = {**settings.commit_properties, **self._properties(context)}
        if context.has_asset_key and wap.is_enabled(self.write_audit_publish, context.definition_metadata,
                                                    context.output_metadata):
            context.add_output_metadata(self._write_to_audit_branch(context, obj, uri, settings, keys, props))
            return
        try:
            meta = write_output(context, self._writer(obj, uri, settings, props), uri, settings, keys,
                                table_name=self.table_name_at(output_path(context), context.definition_metadata, uri),
                                storage_options=self.table_storage_options, transaction_properties=props)
        except LanceError as exc:
            raise exc.with_context(table=uri)
        specs = self.index_specs(context)
        if specs:
            meta.update(self._ensure_indices(context, engine.open_table(uri, storage_options=self.table_storage_options),
                                             specs, settings, keys, uri))
        policy = self.maintenance_policy()
        if policy is not None:
            try:
                meta.update(maintain_table(uri, policy, storage_options=self.table_storage_options,
                                           transaction_properties=props,
                                           keep_versions_from=self.change_feed_floor(uri, context),
                                           index_specs=specs))
            except LanceError as exc:
                raise exc.with_context(table=uri)
        context.add_output_metadata(meta)

    def _write_to_audit_branch(self, context: dg.OutputContext, obj: Any, uri: str, settings: WriteSettings,
                               keys: list[str] | None, props: dict[str, str]) -> dict[str, Any]:
        """Write-audit-publish: the output (and the table config it sets) is committed to the run's
        branch ``audit/<run id>``, beside what the run's other outputs wrote to the table."""
        storage = self.table_storage_options
        create = dict(transaction_properties=props, enable_stable_row_ids=self.enable_stable_row_ids,
                      data_storage_version=settings.data_storage_version)
        writer = "|".join(str(props.get(k, "")) for k in (ASSET_KEY_PROPERTY, PARTITION_PROPERTY,
                                                          PARTITION_RANGE_PROPERTY))
        try:
            branch, base = wap.start_branch(
                uri, context.run_id, writer,
                new_table_schema=lambda: self._writer(obj, uri, settings, props).plan(None, full_overwrite=True),
                create_options=create, storage_options=storage,
                rebase=wap.is_enabled(self.write_audit_publish_rebase, context.definition_metadata,
                                      context.output_metadata, key=wap.PUBLISH_REBASE),
            )
            meta = write_output(context, self._writer(obj, engine.location_of(branch), settings, props),
                                engine.location_of(branch), settings, keys,
                                table_name=self.table_name_at(output_path(context), context.definition_metadata, uri),
                                storage_options=storage, transaction_properties=props)
            written = engine.open_branch(uri, wap.audit_branch_name(context.run_id), storage_options=storage)
        except LanceError as exc:
            raise exc.with_context(table=uri)
        specs = self.index_specs(context)
        if specs:
            # The engine publishes data and config commits only (an index commit on the branch
            # would make it unpublishable): the publish step builds / refreshes them on main.
            meta[PENDING_INDICES] = ", ".join(spec.index_name for spec in specs)
            context.log.info(f"{uri}: indices {meta[PENDING_INDICES]} are brought up to date on main by the publish")
        meta.update(wap.branch_metadata(written, context.run_id, base, uri))
        context.log.info(f"wrote {uri} to branch {wap.audit_branch_name(context.run_id)} (version "
                         f"{written.version}); main stays at version {base} until it is published")
        return meta

    def index_specs(self, context: dg.OutputContext) -> list[IndexSpec]:
        """The indices an output's table keeps: run-time metadata ``lance/indices``, else the
        definition's, else this IO manager's ``indices`` entry for the asset key."""
        where = context.asset_key.to_user_string() if context.has_asset_key else "/".join(output_path(context))
        return resolve_specs(self.indices.get(where), context.definition_metadata, context.output_metadata,
                             where=f"asset {where}" if context.has_asset_key else f"op output {where}")

    def _ensure_indices(self, context: dg.OutputContext, ds: engine.LanceDataset, specs: list[IndexSpec],
                        settings: WriteSettings, keys: list[str] | None, uri: str) -> dict[str, Any]:
        """Build or refresh the declared indices on the version just written (an overwrite of the
        whole table rebuilds them); the materialization's index metadata."""
        asset = context.asset_key.to_user_string() if context.has_asset_key else "/".join(output_path(context))
        rebuild = settings.mode is WriteMode.OVERWRITE and keys is None
        _, meta = ensure_indices(ds, specs, rebuild=rebuild, asset=asset, uri=uri)
        context.log.info(f"{uri}: indices " + ", ".join(
            f"{name.split('/')[-2]}" for name in meta if name.endswith("/type")))
        return meta

    def publish_audited(self, uri: str, run_id: str, asset_key: dg.AssetKey | None = None,
                        context: Any = None, definition_metadata: Mapping[str, Any] | None = None,
                        ) -> dict[str, Any] | None:
        """Publish run ``run_id``'s audit branch of ``uri`` to main (idempotent), then build or
        refresh the asset's declared indices on main (``definition_metadata``'s ``lance/indices``,
        else this IO manager's ``indices``) and apply the maintenance policy (keeping what the
        change feeds found through ``context``, a Dagster context of the run, still need); the
        publish metadata, or None when the run wrote no branch."""
        props = {RUN_ID_PROPERTY: run_id, "lance/operation": "publish"}
        if asset_key is not None:
            props[ASSET_KEY_PROPERTY] = asset_key.to_user_string()
        policy = self.maintenance_policy()
        storage = self.table_storage_options

        where = asset_key.to_user_string() if asset_key is not None else uri
        specs = resolve_specs(self.indices.get(where), definition_metadata, None, where=f"asset {where}")

        def maintain(table: str) -> dict[str, Any]:
            meta: dict[str, Any] = {}
            if specs:
                _, meta = ensure_indices(engine.open_table(table, storage_options=storage), specs, rebuild=False,
                                         asset=where, uri=table)
            if policy is None:
                return meta
            return {**meta, **maintain_table(table, policy, storage_options=storage, transaction_properties=props,
                                             keep_versions_from=self.change_feed_floor(table, context),
                                             index_specs=specs)}

        instance = instance_of(context) if context is not None else None

        def unaudited_writers(keys: list[dg.AssetKey]) -> list[str]:
            # Dagster runs this publish only after asset_key's blocking checks passed; the other
            # assets that wrote to the same branch must have passed theirs too.
            others = [k for k in keys if k != asset_key]
            return wap.unaudited(instance, run_id, others) if instance is not None and others else []

        return wap.publish_run(uri, run_id, transaction_properties=props, storage_options=storage, after=maintain,
                               unaudited_writers=unaudited_writers)

    def change_feed_watches(self, uri: str, repository_def: dg.RepositoryDefinition | None = None,
                            ) -> list[LanceTableWatch]:
        """The change feeds of the table at ``uri``: ``maintenance_change_feeds`` naming it, and the
        watches of the version sensors of ``repository_def``."""
        configured = []
        for feed in self.maintenance_change_feeds:
            table = feed.table
            if "://" not in table and not table.rstrip("/").endswith(".lance") and not os.path.isabs(table):
                table = self.uri_for(dg.AssetKey.from_user_string(table))
            configured.append(LanceTableWatch(
                name=feed.partitions, uri=table, partitions_def=dg.DynamicPartitionsDefinition(name=feed.partitions),
                assets=[dg.AssetKey.from_user_string(k) for k in feed.consumers]))
        return watches_of_table(uri, configured, repository_def)

    def change_feed_floor(self, uri: str, context: Any) -> int | None:
        """The oldest version of ``uri`` an unfinished change feed still needs (None: no limit).
        The partitions' state comes from the Dagster instance of ``context`` (an output, input or
        asset context of a run), the sensors from its code location; without an instance (a
        context built outside a run) nothing can be known, and there is no limit."""
        if not self.maintenance_keep_change_feeds or context is None:
            return None
        instance = instance_of(context)
        if instance is None:
            return None
        return change_feeds_floor(instance, self.change_feed_watches(uri, repository_of(context)))

    def maintenance_policy(self) -> LanceMaintenancePolicy | None:
        """The policy applied after each write, or None when maintenance is off (the default)."""
        if self.maintenance_min_small_fragments is None:
            return None
        older = self.maintenance_cleanup_older_than_seconds
        return LanceMaintenancePolicy(
            min_small_fragments=self.maintenance_min_small_fragments,
            target_rows_per_fragment=self.maintenance_target_rows_per_fragment,
            cleanup_older_than=timedelta(seconds=older) if older is not None else None,
            retain_versions=self.maintenance_retain_versions,
        )

    def _write_defaults(self) -> dict[str, Any]:
        """The IO manager's write settings, keyed like the metadata that overrides them."""
        return {
            MERGE_ON: self.merge_on or None,
            MERGE_WHEN_MATCHED: self.merge_when_matched,
            MERGE_WHEN_NOT_MATCHED: self.merge_when_not_matched,
            MERGE_UPDATE_CONDITION: self.merge_update_condition,
            MERGE_DELETE_NOT_MATCHED_BY_SOURCE: self.merge_delete_not_matched_by_source,
            PREVIEW_ROWS: self.preview_rows,
            CHECK_PARTITION_DATA: self.check_partition_data,
            COMMIT_PROPERTIES: dict(self.commit_properties),
            TABLE_CONFIG: dict(self.table_config),
            MAX_ROWS_PER_FILE: self.max_rows_per_file,
            MAX_BYTES_PER_FILE: self.max_bytes_per_file,
            DATA_STORAGE_VERSION: self.data_storage_version,
        }

    def _writer(self, obj: Any, uri: str, settings: WriteSettings, props: dict[str, str]) -> RowWriter:
        common = _RowWriterOptions(
            schema_mode=settings.schema_mode, transaction_properties=props,
            enable_stable_row_ids=self.enable_stable_row_ids, data_storage_version=settings.data_storage_version,
            storage_options=self.table_storage_options, max_rows_per_file=settings.max_rows_per_file,
            max_bytes_per_file=settings.max_bytes_per_file,
        )
        if is_spark_dataframe(obj):
            return spark_io.SparkRows(obj, uri, **common)
        return ArrowRows(obj, uri, check_partition_data=settings.check_partition_data, **common)

    # -- inputs -----------------------------------------------------------------------------
    def load_input(self, context: dg.InputContext) -> Any:
        """Read the upstream table (its partitions, or its change feed) as the input's annotated type."""
        settings = resolve_read_settings(context.definition_metadata)
        upstream = context.upstream_output
        if upstream is None:
            raise InvalidInputError(
                f"input {context.name!r} has no upstream output to load (LanceIOManager loads asset and op outputs)"
            )
        upstream_meta = upstream.definition_metadata
        try:
            uri = self.uri_for(output_path(upstream), upstream_meta)
        except DatasetNotFoundError as exc:  # a Lance Namespace without the table
            raise DatasetNotFoundError(f"{exc.reason} (was {'/'.join(output_path(upstream))} materialized?)") from exc
        annotation = context.dagster_type.typing_type
        if context.has_asset_partitions and not context.asset_partition_keys:
            # A partition mapping that maps to no upstream partition (the first partition of an
            # asset that depends on its own previous one): an empty input, as in dagster-duckdb.
            return self._empty_input(uri, annotation, settings.columns)
        # before a change feed too: a downstream consumer of this run's audited write publishes it first
        audited = self._audited_input(context, uri, upstream_meta) if settings.version is None else None
        if annotation is LanceChangeFeed or settings.mode is ReadMode.CHANGES:
            kind = "feed" if annotation is LanceChangeFeed else load_kind(annotation)
            return load_changes(context, uri, settings, kind=kind, run_tags=self._run_tags, spark=self.spark,
                                storage_options=self.table_storage_options)
        kind = load_kind(annotation)
        try:
            ds = audited if audited is not None else engine.open_table(
                uri, settings.version, storage_options=self.table_storage_options)
        except DatasetNotFoundError as exc:
            what = f"asset {context.asset_key.to_user_string()}" if context.has_asset_key else (
                f"op output {'/'.join(output_path(upstream))}")
            raise DatasetNotFoundError(f"{what} has no Lance table (was it materialized?)", table=uri) from exc
        predicate = None
        partition_expr = _plain_metadata(upstream_meta).get("partition_expr")
        if context.has_asset_partitions:
            if partition_expr is None:
                context.log.debug(f"{uri} has no partition_expr; loading all of its rows")
            else:
                predicate = partition_predicate(
                    context.asset_partitions_def, list(context.asset_partition_keys), partition_expr, ds.schema, table=uri
                )
        if kind == "spark":
            return spark_io.read_input(self, engine.location_of(ds) if audited is not None else uri, ds.version, settings.columns,
                                       predicate)
        reader = ds.scanner(columns=settings.columns, filter=predicate).to_reader()
        return from_reader(reader, kind)

    def _audited_input(self, context: dg.InputContext, uri: str, upstream_meta: Any) -> engine.LanceDataset | None:
        """For an input of a write-audit-publish asset written in this run: the run's branch when
        the reader is a check of that asset; otherwise (a downstream asset, which Dagster runs only
        after the blocking checks passed) the branch is published first and main is read (None)."""
        if not context.has_asset_key or not wap.is_enabled(self.write_audit_publish, upstream_meta, None):
            return None
        run_id = _run_id_of(context)
        if run_id is None:
            return None
        if _is_check_of(context, context.asset_key):
            return wap.audited_branch(uri, run_id, storage_options=self.table_storage_options)
        meta = self.publish_audited(uri, run_id, context.asset_key, context, upstream_meta)
        if meta is not None and wap.WAITING_FOR in meta:
            context.log.warning(f"{uri}: the run's branch is not published yet (checks still to pass: "
                                f"{meta[wap.WAITING_FOR]}); reading main as it is")
        elif meta is not None:
            context.log.info(f"published {meta[wap.BRANCH]} of {uri} (main version "
                             f"{meta[wap.PUBLISHED_VERSION].value}) before reading it")
        return None

    def _empty_input(self, uri: str, annotation: Any, columns: list[str] | None) -> Any:
        """No rows, in the input's type: the table's (projected) schema if the table exists, else no columns."""
        kind = load_kind(annotation)
        existing = engine.try_open(uri, storage_options=self.table_storage_options)
        schema = existing.schema if existing is not None else pa.schema([])
        if columns is not None and existing is not None:
            schema = pa.schema([schema.field(c) for c in columns])
        if kind == "spark":
            return spark_io.empty_dataframe(self.spark, schema)
        return from_reader(schema.empty_table().to_reader(), kind)



def _run_id_of(context: dg.InputContext) -> str | None:
    try:
        return context.step_context.run_id
    except Exception:  # a context built outside a run (unit tests) has no step
        return None


def _is_check_of(context: dg.InputContext, asset_key: dg.AssetKey) -> bool:
    """Whether the op loading this input evaluates a check of ``asset_key``."""
    step = context.step_context
    layer = step.job_def.asset_layer
    for output in context.op_def.output_defs:
        check_key = layer.get_asset_check_key_for_node_output(step.node_handle, output.name)
        if check_key is not None and check_key.asset_key == asset_key:
            return True
    return False


def lance_asset(fn: Any = None, **kwargs: Any) -> Any:
    """``@dg.asset`` with the ``lance`` kind added (plus any ``kinds`` given); same arguments."""
    kinds = set(kwargs.pop("kinds", None) or ()) | {"lance"}
    if fn is not None:
        return dg.asset(fn, kinds=kinds, **kwargs)
    return dg.asset(kinds=kinds, **kwargs)
