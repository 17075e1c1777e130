"""The IO manager's Spark path: PySpark DataFrames written and read by ``lance_format.spark``.

Rows never pass through the driver: writes go through ``write_dataframe`` / ``merge_dataframe``
(executors write fragments, the driver commits once; :class:`SparkRows` is the
:class:`~lance_assets.write_modes.RowWriter` the write modes use) and reads through
``read_dataframe``. The session comes from the IO manager's ``SparkSessionResource``, else the
active session, else a default local one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lance_assets import engine
from lance_assets.config import MergeOptions, SchemaMode
from lance_assets.engine import LanceDataset
from lance_assets.resources import SparkSessionConfig
from lance_assets.type_handlers import spark_arrow_schema
from lance_assets.write_modes import Written

if TYPE_CHECKING:
    from lance_assets.io_manager import LanceIOManager
    from lance_assets.resources import SparkSessionConfig, SparkSessionResource


def session_for(settings: SparkSessionConfig | SparkSessionResource | None) -> Any:
    """The session for the IO manager's Spark inputs: the active one, else one built from ``settings``."""
    if settings is not None:
        return settings.get_session()

    return SparkSessionConfig().get_session()


def empty_dataframe(settings: SparkSessionConfig | None, schema: pa.Schema) -> Any:
    """A Spark DataFrame with no rows and ``schema``'s columns."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return session_for(settings).createDataFrame([], from_arrow_schema(schema))


class SparkRows:
    """A Spark DataFrame output, written by the executors (the driver commits once).

    The schema policy is the Spark writer's (``schema_mode`` goes to ``write_dataframe``, which
    adds new columns in the same commit as the rows). Rows are not checked against the written
    partitions while they stream (that would cost a Spark job), except by a partition overwrite,
    whose replace-where refuses rows outside the partitions.
    """

    def __init__(self, df: Any, uri: str, *, schema_mode: SchemaMode, transaction_properties: Mapping[str, str],
                 enable_stable_row_ids: bool, data_storage_version: str | None,
                 storage_options: engine.Options, max_rows_per_file: int | None = None,
                 max_bytes_per_file: int | None = None) -> None:
        self._df = df
        self._uri = uri
        self._schema_mode = schema_mode
        self._props = dict(transaction_properties)
        self._options = storage_options
        self._common: dict[str, Any] = dict(
            schema_mode=schema_mode.value, enable_stable_row_ids=enable_stable_row_ids,
            transaction_properties=self._props, data_storage_version=data_storage_version,
            storage_options=storage_options,
        )
        for key, value in (("max_rows_per_file", max_rows_per_file), ("max_bytes_per_file", max_bytes_per_file)):
            if value is not None:
                self._common[key] = value
        self._new_columns: list[str] = []

    def plan(self, existing: LanceDataset | None, *, full_overwrite: bool) -> pa.Schema:
        if existing is None:
            return spark_arrow_schema(self._df)
        if self._schema_mode is SchemaMode.ADD_COLUMNS and not full_overwrite:
            self._new_columns = [name for name in self._df.columns if name not in existing.schema.names]
        return existing.schema

    def new_columns(self) -> list[str]:
        return list(self._new_columns)

    def restrict(self, predicate: str) -> None:
        pass  # see the class docstring

    def _written(self, result: Any, *, deleted: int = 0, updated: int = 0, inserted: int | None = None) -> Written:
        ds = engine.open_table(self._uri, result.version, storage_options=self._options)
        return Written(ds, inserted=result.rows if inserted is None else inserted, updated=updated, deleted=deleted,
                       extra={"lance/commit_retries": result.retries, "lance/engine": "spark"})

    def write(self, existing: LanceDataset | None, *, overwrite: bool) -> Written:
        result = engine.spark_write(self._df, self._uri, mode="overwrite" if overwrite else "append", **self._common)
        return self._written(result)

    def replace(self, existing: LanceDataset | None, predicate: str) -> Written:
        result = engine.spark_write(self._df, self._uri, mode="overwrite", replace_where=predicate, **self._common)
        return self._written(result, deleted=result.rows_deleted if existing is not None else 0)

    def merge(self, existing: LanceDataset, options: MergeOptions, *,
              delete_not_matched_by_source: bool | str) -> Written:
        result, stats = engine.spark_merge(self._df, self._uri, options,
                                           delete_not_matched_by_source=delete_not_matched_by_source,
                                           transaction_properties=self._props, storage_options=self._options)
        return self._written(result, inserted=stats["inserted"], updated=stats["updated"], deleted=stats["deleted"])


def read_input(manager: LanceIOManager, uri: str, version: int, columns: list[str] | None,
               predicate: str | None) -> Any:
    spark = session_for(manager.spark)
    return engine.spark_read(spark, uri, version=version, columns=columns, filter=predicate,
                             storage_options=manager.table_storage_options)
