"""``LanceIOManager``: Dagster assets stored as Lance tables.

One table per asset key (``{base_uri}/{key path}.lance``, overridable with ``lance/uri`` or
``lance/table`` definition metadata). Outputs may be pyarrow, pandas or PySpark; the input's
annotation decides what is loaded. Write modes (``overwrite``, ``append``, ``merge``, ``error``,
``ignore``) and the schema policy come from the IO manager, the asset's definition metadata, or
output metadata set at run time. A partitioned overwrite replaces exactly the partitions' rows in
one commit (a Lance ``Update``). Every commit records the run id, asset key and partition in
its transaction properties, and every materialization reports Dagster's standard table metadata.
"""

from __future__ import annotations

from typing import Any, Mapping

import dagster as dg
import pyarrow as pa
from pydantic import Field, PrivateAttr

from lance_format.dataset.replace_where import checked_reader
from lance_format.errors import DatasetAlreadyExistsError, DatasetNotFoundError, LanceError, SchemaMismatchError
from lance_assets import engine, metadata, spark_io
from lance_assets.change_feed import LanceChangeFeed, load_changes
from lance_assets.config import (
    TABLE_NAME,
    TABLE_URI,
    ReadMode,
    SchemaMode,
    WriteMode,
    WriteSettings,
    resolve_read_settings,
    resolve_write_settings,
)
from lance_assets.partitions import partition_predicate
from lance_assets.resources import SparkSessionResource, table_uri
from lance_assets.schema_policy import plan_schema
from lance_assets.type_handlers import CountingReader, from_reader, is_spark_dataframe, load_kind, to_reader

RUN_ID_PROPERTY = "dagster/run_id"
ASSET_KEY_PROPERTY = "dagster/asset_key"
PARTITION_PROPERTY = "dagster/partition_key"
PARTITION_RANGE_PROPERTY = "dagster/partition_key_range"


def _plain_metadata(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: getattr(v, "value", v) if type(v).__module__.startswith("dagster") else v for k, v in (meta or {}).items()}


class LanceIOManager(dg.ConfigurableIOManager):
    """Stores each asset as a Lance table under ``base_uri``."""

    base_uri: str = Field(description="Directory (or URI) under which each asset's table lives")
    storage_options: dict[str, str] = Field(
        default_factory=dict,
        description="Object-store options with Lance's keys (aws_access_key_id, aws_endpoint, allow_http, ...) "
                    "for s3://, gs:// and az:// tables; use dg.EnvVar for secrets",
    )
    write_mode: WriteMode = Field(default=WriteMode.OVERWRITE, description="Default write mode")
    schema_mode: SchemaMode = Field(default=SchemaMode.ERROR, description="error | add_columns | overwrite")
    enable_stable_row_ids: bool = Field(default=True, description="For new tables; change feeds need it")
    data_storage_version: str | None = Field(default=None, description="Lance file version of new tables")
    spark: SparkSessionResource | None = Field(default=None, description="Session for Spark inputs/outputs")

    _run_tags: dict[str, str] = PrivateAttr(default_factory=dict)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        # A single-run backfill passes its partition range only through run tags; change-feed
        # inputs of unpartitioned upstreams need it.
        run = getattr(context, "run", None)
        self._run_tags = dict(run.tags) if run is not None else {}

    # -- naming -----------------------------------------------------------------------------
    def uri_for(self, asset_key: dg.AssetKey, definition_metadata: Mapping[str, Any] | None = None) -> str:
        meta = _plain_metadata(definition_metadata)
        if meta.get(TABLE_URI):
            uri = str(meta[TABLE_URI])
        elif meta.get(TABLE_NAME):
            uri = table_uri(self.base_uri, str(meta[TABLE_NAME]))
        else:
            uri = table_uri(self.base_uri, asset_key)
        return uri

    @property
    def table_storage_options(self) -> dict[str, str] | None:
        """The storage options every table of this IO manager is opened with."""
        return engine.storage_options_of(self.storage_options)

    @staticmethod
    def table_name(asset_key: dg.AssetKey) -> str:
        return "lance." + ".".join(asset_key.path)

    def _properties(self, context: dg.OutputContext) -> dict[str, str]:
        props = {ASSET_KEY_PROPERTY: context.asset_key.to_user_string()}
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
        if obj is None:
            context.log.debug("asset returned None; nothing written to Lance")
            return
        settings = resolve_write_settings(
            write_mode=self.write_mode,
            schema_mode=self.schema_mode,
            definition_metadata=context.definition_metadata,
            output_metadata=context.output_metadata,
        )
        uri = self.uri_for(context.asset_key, context.definition_metadata)
        keys = list(context.asset_partition_keys) if context.has_asset_partitions else None
        props = self._properties(context)
        try:
            if is_spark_dataframe(obj):
                meta = spark_io.write_output(self, context, obj, uri, settings, keys, props)
            else:
                meta = self._write_arrow(context, obj, uri, settings, keys, props)
        except LanceError as exc:
            raise exc.with_context(table=uri)
        context.add_output_metadata(meta)

    def _predicate(self, context: dg.OutputContext, settings: WriteSettings, keys: list[str] | None,
                   schema: pa.Schema, uri: str) -> str | None:
        if keys is None:
            return None
        if settings.partition_expr is None and settings.mode in (WriteMode.MERGE, WriteMode.APPEND):
            return None  # rows are not scoped by partition (e.g. an aggregate updated per version)
        return partition_predicate(context.asset_partitions_def, keys, settings.partition_expr, schema, table=uri)

    def _write_arrow(self, context: dg.OutputContext, obj: Any, uri: str, settings: WriteSettings,
                     keys: list[str] | None, props: dict[str, str]) -> dict[str, Any]:
        source = to_reader(obj)
        existing = engine.try_open(uri, storage_options=self.table_storage_options)
        table_schema = existing.schema if existing is not None else None
        full_overwrite = settings.mode is WriteMode.OVERWRITE and keys is None
        plan = plan_schema(table_schema, source.schema, settings.schema_mode, full_overwrite=full_overwrite, table=uri)
        counter = CountingReader(source, plan.conformer(table=uri), schema=plan.target)
        reader = counter.reader()
        predicate = self._predicate(context, settings, keys, plan.target, uri)
        name = self.table_name(context.asset_key)
        create = dict(
            transaction_properties=props, enable_stable_row_ids=self.enable_stable_row_ids,
            data_storage_version=self.data_storage_version, storage_options=self.table_storage_options,
        )
        mode = settings.mode
        prev_rows = existing.count_rows() if existing is not None else 0
        stats: dict[str, int | None] = {"inserted": None, "updated": 0, "deleted": 0}
        extra: dict[str, Any] = {}

        if mode in (WriteMode.ERROR, WriteMode.IGNORE) and existing is not None:
            occupied = existing.count_rows(predicate) if predicate else prev_rows
            if occupied:
                where = f"partition(s) {keys}" if predicate else "table"
                if mode is WriteMode.ERROR:
                    raise DatasetAlreadyExistsError(
                        f"write_mode='error' but the {where} already holds {occupied} row(s) "
                        f"(asset {context.asset_key.to_user_string()})",
                        table=uri, version=existing.version,
                    )
                context.log.info(f"write_mode='ignore': the {where} already has rows; nothing written")
                meta = metadata.table_metadata(existing, table_name=name)
                meta.update({"lance/write_mode": mode.value, "lance/skipped": True})
                return meta
        adding = bool(plan.add_fields) and existing is not None
        if adding and mode is WriteMode.MERGE:
            # A merge-insert cannot carry a schema change in its commit; adding the columns in a
            # commit of their own would leave them behind if the merge failed. Refuse instead.
            raise SchemaMismatchError(
                f"write_mode='merge' cannot add columns {[f.name for f in plan.add_fields]} in the same "
                f"commit; add them first (LanceTableResource.add_columns) or write with "
                f"write_mode='append'/'overwrite' (asset {context.asset_key.to_user_string()})",
                table=uri, version=existing.version,
            )
        if adding:
            context.log.info(f"schema_mode='add_columns': adding {[f.name for f in plan.add_fields]} to {uri} "
                             "in the same commit as the rows")

        if predicate is not None and settings.check_partition_data and mode is not WriteMode.OVERWRITE:
            reader = checked_reader(reader, predicate, table=uri)

        if adding:
            assert existing is not None
            scope = predicate if mode is WriteMode.OVERWRITE else None
            ds = engine.write_adding_columns(existing, reader, plan.add_fields, predicate=scope,
                                             transaction_properties=props,
                                             check_data=settings.check_partition_data)
            if scope is not None:
                stats.update(deleted=prev_rows + counter.rows - ds.count_rows())
            stats["inserted"] = counter.rows
        elif mode is WriteMode.OVERWRITE:
            if predicate is None:
                ds = engine.write(uri, reader, mode="overwrite" if existing is not None else "create", **create)
                stats.update(deleted=prev_rows)
            else:
                ds = engine.replace(uri if existing is None else existing, predicate, reader,
                                    check_data=settings.check_partition_data, **create)
                stats.update(deleted=prev_rows + counter.rows - ds.count_rows() if existing is not None else 0)
            stats["inserted"] = counter.rows
        elif mode is WriteMode.MERGE and existing is not None:
            assert settings.merge is not None
            ds, merged = engine.merge(existing, reader, settings.merge, scope=predicate, transaction_properties=props)
            stats.update(merged)
        else:  # append, error/ignore on empty targets, merge into a missing table
            ds = engine.write(uri, reader, mode="append" if existing is not None else "create", **create)
            stats["inserted"] = counter.rows
        if settings.merge is not None:
            extra["lance/merge_on"] = list(settings.merge.on)
        partition_rows = None
        if keys is not None:
            if mode is WriteMode.OVERWRITE or (mode is not WriteMode.MERGE and existing is None):
                partition_rows = counter.rows
            elif predicate is not None:
                partition_rows = ds.count_rows(predicate)
        return metadata.write_metadata(
            ds, table_name=name, write_mode=mode.value, inserted=stats["inserted"], updated=stats["updated"],
            deleted=stats["deleted"], partition_row_count=partition_rows, preview_rows=settings.preview_rows,
            preview_filter=predicate, extra=extra,
        )

    # -- inputs -----------------------------------------------------------------------------
    def load_input(self, context: dg.InputContext) -> Any:
        settings = resolve_read_settings(context.definition_metadata)
        upstream_meta = context.upstream_output.definition_metadata if context.upstream_output else None
        uri = self.uri_for(context.asset_key, upstream_meta)
        annotation = context.dagster_type.typing_type
        if annotation is LanceChangeFeed or settings.mode is ReadMode.CHANGES:
            kind = "feed" if annotation is LanceChangeFeed else load_kind(annotation)
            return load_changes(context, uri, settings, kind=kind, run_tags=self._run_tags, spark=self.spark,
                                storage_options=self.table_storage_options)
        kind = load_kind(annotation)
        try:
            ds = engine.open_table(uri, settings.version, storage_options=self.table_storage_options)
        except DatasetNotFoundError as exc:
            raise DatasetNotFoundError(
                f"asset {context.asset_key.to_user_string()} has no Lance table (was it materialized?)", table=uri
            ) from exc
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
            return spark_io.read_input(self, uri, ds.version, settings.columns, predicate)
        reader = ds.scanner(columns=settings.columns, filter=predicate).to_reader()
        return from_reader(reader, kind)



def lance_asset(fn: Any = None, **kwargs: Any) -> Any:
    """``@dg.asset`` with the ``lance`` kind added (plus any ``kinds`` given); same arguments."""
    kinds = set(kwargs.pop("kinds", None) or ()) | {"lance"}
    if fn is not None:
        return dg.asset(fn, kinds=kinds, **kwargs)
    return dg.asset(kinds=kinds, **kwargs)
