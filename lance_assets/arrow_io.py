"""The IO manager's pyarrow path: pyarrow and pandas outputs streamed into the table by the driver.

:class:`ArrowRows` is the :class:`~lance_assets.write_modes.RowWriter` for them: it reconciles
the rows with the table's schema (:mod:`lance_assets.schema_policy`, safe casts while
streaming), counts them, and writes them through the engine gateway; new columns
(``schema_mode='add_columns'``) are added in the same commit as the rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from lance_assets import engine
from lance_assets.config import MergeOptions, SchemaMode
from lance_assets.engine import LanceDataset
from lance_assets.schema_policy import SchemaPlan, plan_schema
from lance_assets.type_handlers import CountingReader, to_reader
from lance_assets.write_modes import CommitOutcome


class ArrowRows:
    """A pyarrow/pandas output's rows, written by the driver (one streaming pass)."""

    def __init__(self, obj: Any, uri: str, *, schema_mode: SchemaMode, transaction_properties: Mapping[str, str],
                 enable_stable_row_ids: bool, data_storage_version: str | None,
                 storage_options: engine.Options, check_partition_data: bool,
                 max_rows_per_file: int | None = None, max_bytes_per_file: int | None = None) -> None:
        self._source = to_reader(obj)
        self._uri = uri
        self._schema_mode = schema_mode
        self._props = transaction_properties
        self._check = check_partition_data
        self._create: dict[str, Any] = dict(
            transaction_properties=transaction_properties, enable_stable_row_ids=enable_stable_row_ids,
            data_storage_version=data_storage_version, storage_options=storage_options,
            max_rows_per_file=max_rows_per_file, max_bytes_per_file=max_bytes_per_file,
        )
        self._plan: SchemaPlan | None = None
        self._counter: CountingReader | None = None
        self._reader: pa.RecordBatchReader | None = None

    def plan(self, existing: LanceDataset | None, *, full_overwrite: bool) -> pa.Schema:
        table_schema = existing.schema if existing is not None else None
        self._plan = plan_schema(table_schema, self._source.schema, self._schema_mode,
                                 full_overwrite=full_overwrite, table=self._uri)
        self._counter = CountingReader(self._source, self._plan.conformer(table=self._uri), schema=self._plan.target)
        self._reader = self._counter.reader()
        return self._plan.target

    def new_columns(self) -> list[str]:
        assert self._plan is not None
        return [f.name for f in self._plan.add_fields]

    def restrict(self, predicate: str) -> None:
        assert self._reader is not None
        self._reader = engine.checked_rows(self._reader, predicate, table=self._uri)

    @property
    def _rows(self) -> int:
        assert self._counter is not None
        return self._counter.rows

    def _adding(self, existing: LanceDataset | None) -> bool:
        assert self._plan is not None
        return bool(self._plan.add_fields) and existing is not None

    def write(self, existing: LanceDataset | None, *, overwrite: bool) -> CommitOutcome:
        assert self._reader is not None and self._plan is not None
        if self._adding(existing):  # appending rows that bring new columns: one Merge commit
            assert existing is not None
            ds = engine.write_adding_columns(existing, self._reader, self._plan.add_fields, predicate=None,
                                             transaction_properties=self._props, check_data=self._check)
            return CommitOutcome(ds, inserted=self._rows)
        if existing is None:
            mode = "create"
        else:
            mode = "overwrite" if overwrite else "append"
        ds = engine.write(self._uri, self._reader, mode=mode, **self._create)
        return CommitOutcome(ds, inserted=self._rows)

    def replace(self, existing: LanceDataset | None, predicate: str) -> CommitOutcome:
        assert self._reader is not None and self._plan is not None
        prev_rows = existing.count_rows() if existing is not None else 0
        if self._adding(existing):
            assert existing is not None
            ds = engine.write_adding_columns(existing, self._reader, self._plan.add_fields, predicate=predicate,
                                             transaction_properties=self._props, check_data=self._check)
        else:
            ds = engine.replace(self._uri if existing is None else existing, predicate, self._reader,
                                check_data=self._check, **self._create)
        # rows before + rows written - rows now: what the replace deleted
        deleted = prev_rows + self._rows - ds.count_rows() if existing is not None else 0
        return CommitOutcome(ds, inserted=self._rows, deleted=deleted)

    def merge(self, existing: LanceDataset, options: MergeOptions, *,
              delete_not_matched_by_source: bool | str) -> CommitOutcome:
        assert self._reader is not None
        ds, stats = engine.merge(existing, self._reader, options,
                                 delete_not_matched_by_source=delete_not_matched_by_source,
                                 transaction_properties=self._props)
        return CommitOutcome(ds, inserted=stats["inserted"], updated=stats["updated"], deleted=stats["deleted"])
