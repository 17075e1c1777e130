"""What each write mode does to a table, decided once for every kind of output.

The IO manager's write modes (``overwrite``, ``append``, ``merge``, ``error``, ``ignore``),
with or without partitions, come down to five table operations: create, append, whole-table
overwrite, replace-where (the partitions' rows, in one commit) and merge. :func:`write_output`
chooses the operation, refuses what must be refused (with one message per situation, whatever
the output type), scopes a merge's ``delete_not_matched_by_source`` to the written partitions,
and reports the commit's metadata. How the rows themselves are written is a :class:`RowWriter`'s
business: ``lance_assets.arrow_io`` streams pyarrow/pandas rows through the driver,
``lance_assets.spark_io`` has Spark's executors write them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import dagster as dg
import pyarrow as pa

from lance_assets import engine, metadata
from lance_assets.config import MergeOptions, WriteMode, WriteSettings
from lance_assets.engine import LanceDataset
from lance_assets.partitions import partition_predicate
from lance_format.errors import DatasetAlreadyExistsError, SchemaMismatchError


@dataclass
class CommitOutcome:
    """One commit made by a :class:`RowWriter`: the new version and what it did to the rows.

    ``deleted`` is only meaningful for replace-where and merge (a whole-table overwrite deletes
    every previous row, which :func:`write_output` knows). ``extra``: writer-specific metadata.
    """

    ds: LanceDataset
    inserted: int | None
    updated: int = 0
    deleted: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class RowWriter(Protocol):
    """How one output's rows reach its table; :func:`write_output` decides which method runs."""

    def plan(self, existing: LanceDataset | None, *, full_overwrite: bool) -> pa.Schema:
        """Reconcile the rows' schema with the table's (raising on a refused change) and return
        the schema partition predicates are built against."""
        ...

    def new_columns(self) -> list[str]:
        """Columns the write adds to the existing table (schema_mode='add_columns'), after :meth:`plan`."""
        ...

    def restrict(self, predicate: str) -> None:
        """Refuse rows outside ``predicate`` (the written partitions) while they are written."""
        ...

    def write(self, existing: LanceDataset | None, *, overwrite: bool) -> CommitOutcome:
        """Create the table (``existing`` None), append to it, or overwrite all of it."""
        ...

    def replace(self, existing: LanceDataset | None, predicate: str) -> CommitOutcome:
        """Replace exactly the rows matching ``predicate`` with the rows, in one commit."""
        ...

    def merge(self, existing: LanceDataset, options: MergeOptions, *,
              delete_not_matched_by_source: bool | str) -> CommitOutcome:
        """Upsert the rows into ``existing`` on ``options.on``."""
        ...


def scoped_delete_by_source(options: MergeOptions, predicate: str | None) -> bool | str:
    """A merge's ``delete_not_matched_by_source`` limited to ``predicate``'s rows (the written
    partitions): a partition's merge must never delete the other partitions' rows."""
    by_source = options.delete_not_matched_by_source
    if not by_source or predicate is None:
        return by_source
    return predicate if by_source is True else f"({predicate}) AND ({by_source})"


def _partition_scope(context: dg.OutputContext, settings: WriteSettings, keys: list[str] | None,
                     schema: pa.Schema, uri: str) -> str | None:
    if keys is None:
        return None
    if settings.partition_expr is None and settings.mode in (WriteMode.MERGE, WriteMode.APPEND):
        return None  # rows are not scoped by partition (e.g. an aggregate updated per version)
    return partition_predicate(context.asset_partitions_def, keys, settings.partition_expr, schema, table=uri)


def write_output(
    context: dg.OutputContext,
    writer: RowWriter,
    uri: str,
    settings: WriteSettings,
    keys: list[str] | None,
    *,
    table_name: str,
    storage_options: engine.Options,
    transaction_properties: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Write one output under ``settings.mode`` (partitions ``keys``, if any); returns the
    materialization metadata."""
    existing = engine.try_open(uri, storage_options=storage_options)
    mode = settings.mode
    asset = context.asset_key.to_user_string() if context.has_asset_key else f"op output {context.step_key}.{context.name}"
    schema = writer.plan(existing, full_overwrite=mode is WriteMode.OVERWRITE and keys is None)
    predicate = _partition_scope(context, settings, keys, schema, uri)
    prev_rows = existing.count_rows() if existing is not None else 0

    if mode in (WriteMode.ERROR, WriteMode.IGNORE) and existing is not None:
        occupied = existing.count_rows(predicate) if predicate else prev_rows
        if occupied:
            where = f"partition(s) {keys}" if predicate else "table"
            if mode is WriteMode.ERROR:
                raise DatasetAlreadyExistsError(
                    f"write_mode='error' but the {where} already holds {occupied} row(s) (asset {asset})",
                    table=uri, version=existing.version,
                )
            context.log.info(f"write_mode='ignore': the {where} already has rows; nothing written")
            meta = metadata.table_metadata(existing, table_name=table_name)
            meta.update({"lance/write_mode": mode.value, "lance/skipped": True})
            return meta
    adding = writer.new_columns() if existing is not None else []
    if adding and mode is WriteMode.MERGE:
        # A merge-insert cannot carry a schema change in its commit; adding the columns in a
        # commit of their own would leave them behind if the merge failed. Refuse instead.
        raise SchemaMismatchError(
            f"write_mode='merge' cannot add columns {adding} in the same commit; add them first "
            f"(LanceTableResource.add_columns) or write with write_mode='append'/'overwrite' (asset {asset})",
            table=uri, version=existing.version if existing is not None else None,
        )
    if adding:
        context.log.info(f"schema_mode='add_columns': adding {adding} to {uri} in the same commit as the rows")
    if predicate is not None and settings.check_partition_data and mode is not WriteMode.OVERWRITE:
        writer.restrict(predicate)  # an overwrite's replace-where checks its rows itself

    if mode is WriteMode.OVERWRITE and predicate is None:
        written = writer.write(existing, overwrite=True)
        written.deleted = prev_rows
    elif mode is WriteMode.OVERWRITE and predicate is not None:
        written = writer.replace(existing, predicate)
    elif mode is WriteMode.MERGE and existing is not None:
        assert settings.merge is not None
        written = writer.merge(existing, settings.merge,
                               delete_not_matched_by_source=scoped_delete_by_source(settings.merge, predicate))
    else:  # append; error/ignore on a missing or empty target; merge into a missing table
        written = writer.write(existing, overwrite=False)

    if settings.table_config:  # after the rows: a table that does not exist yet has no config to set
        written.ds = engine.apply_table_config(written.ds, settings.table_config,
                                               transaction_properties=transaction_properties or {})
    partition_rows = None
    if keys is not None:
        if mode is WriteMode.OVERWRITE or (mode is not WriteMode.MERGE and existing is None):
            partition_rows = written.inserted
        elif predicate is not None:
            partition_rows = written.ds.count_rows(predicate)
    extra = dict(written.extra)
    if settings.merge is not None:
        extra["lance/merge_on"] = list(settings.merge.on)
    return metadata.write_metadata(
        written.ds, table_name=table_name, write_mode=mode.value, inserted=written.inserted,
        updated=written.updated, deleted=written.deleted, partition_row_count=partition_rows, created=existing is None,
        preview_rows=settings.preview_rows, preview_filter=predicate, extra=extra,
    )
