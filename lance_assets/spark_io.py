"""The IO manager's Spark path: PySpark DataFrames written and read by ``lance_format.spark``.

Rows never pass through the driver: writes go through ``write_dataframe`` / ``merge_dataframe``
(executors write fragments, the driver commits once) and reads through ``read_dataframe``. The
session comes from the IO manager's ``SparkSessionResource``, else the active session, else a
default local one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import dagster as dg

from lance_format.errors import DatasetAlreadyExistsError
from lance_assets import engine, metadata
from lance_assets.config import WriteMode, WriteSettings
from lance_assets.partitions import partition_predicate
from lance_assets.type_handlers import spark_arrow_schema

if TYPE_CHECKING:
    from lance_assets.io_manager import LanceIOManager
    from lance_assets.resources import SparkSessionResource


def session_for(resource: "SparkSessionResource | None") -> Any:
    if resource is not None:
        return resource.get_session()
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    from lance_assets.resources import SparkSessionResource

    return SparkSessionResource().get_session()


def write_output(
    manager: "LanceIOManager",
    context: dg.OutputContext,
    df: Any,
    uri: str,
    settings: WriteSettings,
    keys: list[str] | None,
    props: dict[str, str],
) -> dict[str, Any]:
    options = manager.table_storage_options
    existing = engine.try_open(uri, storage_options=options)
    schema = existing.schema if existing is not None else spark_arrow_schema(df)
    predicate = None
    if keys is not None and not (settings.partition_expr is None and settings.mode in (WriteMode.MERGE, WriteMode.APPEND)):
        predicate = partition_predicate(context.asset_partitions_def, keys, settings.partition_expr, schema, table=uri)
    name = manager.table_name(context.asset_key)
    mode = settings.mode
    prev_rows = existing.count_rows() if existing is not None else 0
    common = dict(
        schema_mode=settings.schema_mode.value, enable_stable_row_ids=manager.enable_stable_row_ids,
        transaction_properties=props, data_storage_version=manager.data_storage_version, storage_options=options,
    )
    if mode in (WriteMode.ERROR, WriteMode.IGNORE) and existing is not None:
        occupied = existing.count_rows(predicate) if predicate else prev_rows
        if occupied:
            if mode is WriteMode.ERROR:
                raise DatasetAlreadyExistsError(
                    f"write_mode='error' but the target already holds {occupied} row(s)", table=uri,
                    version=existing.version,
                )
            meta = metadata.table_metadata(existing, table_name=name)
            meta.update({"lance/write_mode": mode.value, "lance/skipped": True})
            return meta
    if mode is WriteMode.MERGE and existing is not None:
        merge = settings.merge
        assert merge is not None
        by_source = merge.delete_not_matched_by_source
        if by_source and predicate is not None:
            # scope delete-by-source to this partition: only its target rows may be removed
            by_source = predicate if by_source is True else f"({predicate}) AND ({by_source})"
        result, stats = engine.spark_merge(df, uri, merge, delete_not_matched_by_source=by_source,
                                           transaction_properties=props, storage_options=options)
    elif mode is WriteMode.OVERWRITE:
        result = engine.spark_write(df, uri, mode="overwrite", replace_where=predicate, **common)
        if predicate is not None and existing is not None:
            stats = {"inserted": result.rows, "updated": 0, "deleted": result.rows_deleted}
        else:
            stats = {"inserted": result.rows, "updated": 0, "deleted": prev_rows}
    else:  # append; error/ignore on an empty target; merge into a missing table
        result = engine.spark_write(df, uri, mode="append", **common)
        stats = {"inserted": result.rows, "updated": 0, "deleted": 0}
    ds = engine.open_table(uri, result.version, storage_options=options)
    partition_rows = None
    if keys is not None:
        partition_rows = stats["inserted"] if mode is WriteMode.OVERWRITE else (
            ds.count_rows(predicate) if predicate else None)
    extra = {"lance/commit_retries": result.retries, "lance/engine": "spark"}
    return metadata.write_metadata(
        ds, table_name=name, write_mode=mode.value, inserted=stats["inserted"], updated=stats["updated"],
        deleted=stats["deleted"], partition_row_count=partition_rows, preview_rows=settings.preview_rows,
        preview_filter=predicate, extra=extra,
    )


def read_input(manager: "LanceIOManager", uri: str, version: int, columns: list[str] | None,
               predicate: str | None) -> Any:
    spark = session_for(manager.spark)
    return engine.spark_read(spark, uri, version=version, columns=columns, filter=predicate,
                             storage_options=manager.table_storage_options)
