"""Materialization and observation metadata in Dagster's standard keys.

Standard keys (``dagster/row_count``, ``dagster/partition_row_count``, ``dagster/column_schema``,
``dagster/table_name``, ``dagster/uri``, ``dagster/storage_kind``) make the UI's Columns tab,
``build_column_schema_change_checks`` and ``build_metadata_bounds_checks`` work unchanged; the
``lance/*`` keys describe the commit (version, operation, rows inserted/updated/deleted).
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
from collections.abc import Mapping
from typing import Any

import dagster as dg
import pyarrow as pa

from lance_assets import engine
from lance_assets.engine import LanceDataset

ROW_COUNT = "dagster/row_count"
PARTITION_ROW_COUNT = "dagster/partition_row_count"
COLUMN_SCHEMA = "dagster/column_schema"
TABLE_NAME = "dagster/table_name"
URI = "dagster/uri"
STORAGE_KIND = "dagster/storage_kind"
VERSION = "lance/version"
OPERATION = "lance/operation"
ROWS_INSERTED = "lance/rows_inserted"
ROWS_UPDATED = "lance/rows_updated"
ROWS_DELETED = "lance/rows_deleted"
PREVIEW = "lance/preview"
COMMIT_TIMESTAMP = "lance/commit_timestamp"


def table_name_of(uri: str) -> str:
    """``dagster/table_name`` of the table at ``uri``: its location, which is what identifies a
    Lance table (there is no catalog). Local paths are made absolute, so two lakes under
    different ``base_uri``s never share a name and the same table always has one."""
    uri = uri.rstrip("/")
    if "://" not in uri:
        uri = os.path.abspath(uri)
    return uri


def table_definition_metadata(uri: str) -> dict[str, Any]:
    """Definition metadata locating an asset's table: ``dagster/table_name`` and ``dagster/uri``
    as text, which the UI shows on the asset's Overview ("Storage"); it renders a text or URL
    entry there, not a path entry."""
    return {TABLE_NAME: table_name_of(uri), URI: dg.MetadataValue.text(uri)}


def column_schema(schema: pa.Schema) -> dg.TableSchema:
    return dg.TableSchema(
        columns=[
            dg.TableColumn(
                name=f.name,
                type=str(f.type),
                constraints=dg.TableColumnConstraints(nullable=f.nullable),
            )
            for f in schema
        ]
    )


def _cell(value: Any) -> str | int | float | bool | None:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (dt.datetime, dt.date, dt.time, decimal.Decimal)):
        return value.isoformat() if hasattr(value, "isoformat") else str(value)
    text = str(value)
    return text if len(text) <= 120 else text[:117] + "..."


def preview(table: pa.Table) -> dg.MetadataValue:
    """A small ``TableRecord`` preview (values rendered to JSON-safe scalars)."""
    rows = table.to_pylist()
    records = [dg.TableRecord({k: _cell(v) for k, v in row.items()}) for row in rows]
    schema = dg.TableSchema(columns=[dg.TableColumn(name=f.name, type=str(f.type)) for f in table.schema])
    return dg.MetadataValue.table(records=records, schema=schema)


def commit_timestamp(ds: LanceDataset) -> dt.datetime:
    return engine.summary_of(ds).timestamp


def table_metadata(ds: LanceDataset, *, table_name: str | None = None) -> dict[str, Any]:
    """Metadata describing one version of a table (no row scan: counts come from the manifest).
    ``table_name`` defaults to :func:`table_name_of` the table's URI."""
    summary = engine.summary_of(ds)
    return {
        ROW_COUNT: dg.MetadataValue.int(ds.count_rows()),
        COLUMN_SCHEMA: dg.MetadataValue.table_schema(column_schema(ds.schema)),
        TABLE_NAME: table_name or table_name_of(ds.uri),
        URI: dg.MetadataValue.path(ds.uri),
        STORAGE_KIND: "lance",
        VERSION: dg.MetadataValue.int(ds.version),
        OPERATION: summary.operation or "unknown",
        COMMIT_TIMESTAMP: dg.MetadataValue.timestamp(summary.timestamp),
    }


def operation_label(write_mode: str, operation: str, *, created: bool) -> str:
    """``lance/operation`` of a write, worded so it never contradicts ``lance/write_mode``: Lance
    commits a merge as an ``update``, an overwrite of new partitions as an ``append``, and the
    write that creates a table as an ``overwrite`` whatever the mode."""
    if created:
        return f"create (the table's first version, by this {write_mode})"
    if operation == write_mode:
        return operation
    return f"{operation} (Lance's commit for this {write_mode})"


def write_metadata(
    ds: LanceDataset,
    *,
    table_name: str | None = None,
    write_mode: str,
    inserted: int | None,
    updated: int | None,
    deleted: int | None,
    partition_row_count: int | None = None,
    created: bool = False,
    preview_rows: int = 5,
    preview_filter: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Metadata of a materialization that committed ``ds.version`` (``created``: the write made
    the table)."""
    meta = table_metadata(ds, table_name=table_name)
    meta["lance/write_mode"] = write_mode
    meta[OPERATION] = operation_label(write_mode, str(meta[OPERATION]), created=created)
    for key, value in ((ROWS_INSERTED, inserted), (ROWS_UPDATED, updated), (ROWS_DELETED, deleted)):
        if value is not None:
            meta[key] = dg.MetadataValue.int(int(value))
    if partition_row_count is not None:
        meta[PARTITION_ROW_COUNT] = dg.MetadataValue.int(int(partition_row_count))
    if preview_rows:
        meta[PREVIEW] = preview(ds.to_table(filter=preview_filter, limit=preview_rows))
    meta.update(extra or {})
    return meta
