"""Dagster resources: ``LanceTableResource`` (tables by name) and a lazy ``SparkSessionResource``.

``LanceTableResource`` opens, writes, merges, deletes from, compacts and reads change feeds of
tables under one ``base_uri``, from inside assets, ops and checks. Tables are named by a relative
path (``"sales/orders"``), an ``AssetKey`` (the IO manager's layout: ``{base_uri}/{key path}.lance``)
or an absolute URI.

``LanceTableResource.search`` answers vector and full-text searches (pyarrow, pandas or polars);
``SparkSessionResource.search_batch`` runs a k-nearest-neighbour join of many query vectors on
the executors.

``SparkSessionResource`` builds its SparkSession on first use (so assets that never touch Spark
never start a JVM), reuses an already active session, and is shared with the IO manager for
Spark inputs and outputs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import dagster as dg
import pyarrow as pa
from pydantic import Field, PrivateAttr

from lance_assets import engine
from lance_assets.config import MergeOptions, SchemaMode
from lance_assets.engine import LanceDataset
from lance_assets.schema_policy import plan_schema
from lance_assets.search import search_table, vector_column
from lance_assets.type_handlers import CountingReader, is_spark_dataframe, to_reader
from lance_format.errors import DatasetNotFoundError

TableRef = str | dg.AssetKey | Sequence[str]


def table_uri(base_uri: str, table: TableRef) -> str:
    """``{base_uri}/{path}.lance`` for names and asset keys; absolute URIs pass through."""
    if isinstance(table, dg.AssetKey):
        parts = list(table.path)
    elif isinstance(table, str):
        if "://" in table or os.path.isabs(table):
            return table
        parts = [p for p in table.split("/") if p]
    else:
        parts = list(table)
    if not parts:
        raise ValueError("empty table name")
    name = "/".join(parts)
    if not name.endswith(".lance"):
        name += ".lance"
    # a manifest-store URI (s3+ddb://bucket/lake?ddbTableName=t) keeps its query at the end
    base, sep, query = base_uri.partition("?") if "://" in base_uri else (base_uri, "", "")
    return base.rstrip("/") + "/" + name + sep + query


def spark_session(master: str, app_name: str, conf: Mapping[str, str]) -> Any:
    """The active SparkSession (tests and notebooks share one JVM), else a new one built from these settings."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if master.startswith("local"):
        # Local Python workers must run this interpreter (it has pyarrow and lance_format).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    defaults = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
                "spark.sql.session.timeZone": "UTC"}
    for key, value in {**defaults, **conf}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


class SparkSessionConfig(dg.Config):
    """The settings of a SparkSession, as plain config (what ``LanceIOManager(spark=...)`` holds).

    A nested *resource* would be initialized by Dagster 1.13 through the deprecated
    ``InitResourceContext.dagster_run`` on every run; plain config is not.
    """

    master: str = Field(default="local[2]", description="Spark master URL, e.g. local[2] or spark://host:7077")
    app_name: str = Field(default="lance-assets")
    conf: dict[str, str] = Field(default_factory=dict, description="Extra Spark configuration")

    def get_session(self) -> Any:
        """A session with these settings; an active one is reused."""
        return spark_session(self.master, self.app_name, self.conf)


class SparkSessionResource(dg.ConfigurableResource):
    """A SparkSession created on first use (or the active one), shared by assets and the IO manager."""

    master: str = Field(default="local[2]", description="Spark master URL, e.g. local[2] or spark://host:7077")
    app_name: str = Field(default="lance-assets")
    conf: dict[str, str] = Field(default_factory=dict, description="Extra Spark configuration")
    stop_on_teardown: bool = Field(default=False, description="Stop the session when the step ends")

    _session: Any = PrivateAttr(default=None)

    def get_session(self) -> Any:
        """The session; an active one is reused (tests and notebooks share one JVM)."""
        if self._session is None:
            self._session = spark_session(self.master, self.app_name, self.conf)
        return self._session

    def settings(self) -> SparkSessionConfig:
        """This resource's session settings as plain config."""
        return SparkSessionConfig(master=self.master, app_name=self.app_name, conf=dict(self.conf))

    @property
    def is_started(self) -> bool:
        """Whether this resource has created (or taken) its session yet."""
        return self._session is not None

    def search_batch(self, tables: LanceTableResource, table: TableRef, queries: Any, column: str | None = None,
                     k: int = 10, *, metric: str | None = None, filter: str | None = None,
                     columns: Sequence[str] | None = None, query_column: str = "vector",
                     query_id_column: str | None = None, with_row_id: bool = False,
                     version: int | str | None = None, **options: Any) -> Any:
        """The ``k`` nearest rows of ``tables``' ``table`` to every query vector of ``queries``
        (a Spark DataFrame, or pyarrow/pandas rows made one), computed on the executors
        (``lance_format.spark.nearest``: exact, the table and the queries never reach the
        driver). ``filter`` runs before the search. Returns a Spark DataFrame: the queries'
        columns (or ``query_id_column``), the table's ``columns``, ``_distance`` (and ``_rowid``).

        Raises
        ------
        DatasetNotFoundError
            There is no such table.
        InvalidInputError
            An unknown column, a query vector of another dimension than the table's, a bad ``k``,
            ``metric`` or ``filter``.
        """
        session = self.get_session()
        if not (hasattr(queries, "sparkSession") and hasattr(queries, "schema")):
            if isinstance(queries, pa.Table) and query_column in queries.column_names:
                vectors = queries.column(query_column)
                if pa.types.is_fixed_size_list(vectors.type):  # Spark has arrays, not fixed-size lists
                    queries = queries.set_column(queries.column_names.index(query_column), query_column,
                                                 vectors.cast(pa.list_(vectors.type.value_type)))
            queries = session.createDataFrame(queries)
        ds = tables.open(table, version)
        return engine.spark_nearest(session, tables.uri_for(table), queries, vector_column(ds, column), k,
                                    metric=metric, filter=filter, columns=columns, query_column=query_column,
                                    query_id_column=query_id_column, with_row_id=with_row_id, version=ds.version,
                                    storage_options=tables.table_storage_options, **options)

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        """Stop the session after the run when ``stop_on_teardown`` is set."""
        if self.stop_on_teardown and self._session is not None:
            self._session.stop()
            self._session = None


class LanceTableResource(dg.ConfigurableResource):
    """Tables under ``base_uri``: open, write, merge, delete, compact, and read change feeds."""

    base_uri: str = Field(description="Directory (or URI) holding the tables")
    storage_options: dict[str, str] = Field(
        default_factory=dict,
        description="Object-store options with Lance's keys (aws_access_key_id, aws_endpoint, allow_http, ...) "
                    "for s3://, gs:// and az:// tables; use dg.EnvVar for secrets",
    )
    enable_stable_row_ids: bool = Field(default=True, description="For new tables; the change feed needs it")
    data_storage_version: str | None = Field(default=None, description="Lance file version for new tables")

    def uri_for(self, table: TableRef) -> str:
        """The URI of ``table`` (an asset key, a key path or a relative name) under ``base_uri``."""
        return table_uri(self.base_uri, table)

    @property
    def table_storage_options(self) -> dict[str, str] | None:
        """The storage options every table of this resource is opened with."""
        return engine.storage_options_of(self.storage_options)

    def _try_open(self, uri: str) -> LanceDataset | None:
        return engine.try_open(uri, storage_options=self.table_storage_options)

    def exists(self, table: TableRef) -> bool:
        """Whether a Lance table exists at ``table``'s URI."""
        return self._try_open(self.uri_for(table)) is not None

    def open(self, table: TableRef, version: int | str | None = None) -> LanceDataset:
        """A version (number or tag) of the table; ``DatasetNotFoundError`` when missing."""
        return engine.open_table(self.uri_for(table), version, storage_options=self.table_storage_options)

    def latest_version(self, table: TableRef) -> int | None:
        """The latest version of ``table``, or None when there is no table."""
        ds = self._try_open(self.uri_for(table))
        return ds.version if ds is not None else None

    def versions(self, table: TableRef) -> list[dict[str, Any]]:
        """The versions of ``table``: dicts with ``version``, ``timestamp`` and ``metadata``.

        Raises
        ------
        DatasetNotFoundError
            There is no table.
        """
        return self.open(table).versions()

    def read(self, table: TableRef, *, columns: list[str] | None = None, filter: str | None = None,
             version: int | str | None = None) -> pa.Table:
        """Read ``table`` (some ``columns``, the rows matching ``filter``, at ``version``) into a pyarrow Table.

        Parameters
        ----------
        table
            An asset key, a key path or a relative name under ``base_uri``.
        columns
            The columns to read; all if None.
        filter
            A SQL predicate (the engine's filter dialect).
        version
            A version number or tag; the latest if None.

        Raises
        ------
        DatasetNotFoundError
            There is no table.
        VersionNotFoundError
            ``version`` does not exist.
        InvalidInputError
            An unknown column or an invalid filter.
        """
        return self.open(table, version).to_table(columns=columns, filter=filter)

    def search(self, table: TableRef, vector: Any = None, *, column: str | None = None, k: int = 10,
               filter: str | None = None, full_text: str | Mapping[str, Any] | None = None,
               columns: Sequence[str] | None = None, metric: str | None = None, nprobes: int | None = None,
               refine_factor: int | None = None, prefilter: bool | None = None, version: int | str | None = None,
               with_row_id: bool = False, output: str = "pyarrow") -> Any:
        """Search ``table``: the ``k`` rows nearest to ``vector`` (exact unless an index is probed),
        or the ``k`` best BM25 matches of ``full_text``, as ``LanceDataset.to_table`` answers them.

        Parameters
        ----------
        table
            An asset key, a key path or a relative name under ``base_uri``.
        vector
            A query vector, or a batch of them (then a ``query_index`` column says which).
        column
            The vector column (default: the table's only one), or the text column of ``full_text``.
        k
            Rows per query.
        filter
            A SQL predicate; with ``prefilter=True`` it runs before the search (each query gets
            k matching rows), else on its results (pylance's default: fewer rows may come back).
        full_text
            A query string, or pylance's ``{"query": ..., "columns": [...]}``; needs an
            INVERTED index on the column (built by pylance today).
        columns
            The table's columns returned (all by default); ``_distance`` / ``_score`` come too.
        metric, nprobes, refine_factor
            pylance's vector-search options (``l2``, ``cosine``, ``dot``, ``hamming``).
        version
            A version number or tag; the latest if None.
        output
            ``"pyarrow"`` (a Table), ``"pandas"`` or ``"polars"`` (a DataFrame).

        Raises
        ------
        DatasetNotFoundError
            There is no table.
        InvalidInputError
            Neither or both of ``vector`` and ``full_text``; an unknown column; a vector of another
            dimension than the column's; a bad ``k``, ``metric``, ``filter`` or ``output``; no
            INVERTED index for ``full_text``.
        """
        return search_table(self.open(table, version), vector=vector, column=column, k=k, filter=filter,
                            full_text=full_text, columns=columns, metric=metric, nprobes=nprobes,
                            refine_factor=refine_factor, prefilter=prefilter, with_row_id=with_row_id,
                            output=output)

    def _conformed(self, uri: str, data: Any) -> pa.RecordBatchReader:
        """``data`` as batches of the existing table's schema (safe casts only), if there is one."""
        reader = to_reader(data)
        existing = self._try_open(uri)
        if existing is None:
            return reader
        plan = plan_schema(existing.schema, reader.schema, SchemaMode.ERROR, full_overwrite=False, table=uri)
        return CountingReader(reader, plan.conformer(table=uri), schema=plan.target).reader()

    def write(self, table: TableRef, data: Any, *, mode: str = "append",
              transaction_properties: Mapping[str, str] | None = None) -> LanceDataset:
        """``create`` / ``append`` / ``overwrite`` with pyarrow, pandas or a Spark DataFrame."""
        uri = self.uri_for(table)
        if is_spark_dataframe(data):
            result = engine.spark_write(
                data, uri, mode=mode, enable_stable_row_ids=self.enable_stable_row_ids,
                data_storage_version=self.data_storage_version,
                transaction_properties=dict(transaction_properties or {}), storage_options=self.table_storage_options,
            )
            return engine.open_table(uri, result.version, storage_options=self.table_storage_options)
        reader = to_reader(data) if mode in ("overwrite", "create") else self._conformed(uri, data)
        return engine.write(
            uri, reader, mode=mode, transaction_properties=transaction_properties or {},
            enable_stable_row_ids=self.enable_stable_row_ids, data_storage_version=self.data_storage_version,
            storage_options=self.table_storage_options,
        )

    def replace_where(self, table: TableRef, predicate: str, data: Any, *,
                      transaction_properties: Mapping[str, str] | None = None) -> LanceDataset:
        """Replace exactly the rows matching ``predicate`` with ``data`` in one commit."""
        uri = self.uri_for(table)
        if is_spark_dataframe(data):
            result = engine.spark_write(
                data, uri, mode="overwrite", replace_where=predicate,
                enable_stable_row_ids=self.enable_stable_row_ids, data_storage_version=self.data_storage_version,
                transaction_properties=dict(transaction_properties or {}), storage_options=self.table_storage_options,
            )
            return engine.open_table(uri, result.version, storage_options=self.table_storage_options)
        return engine.replace(
            uri, predicate, self._conformed(uri, data), transaction_properties=transaction_properties or {},
            enable_stable_row_ids=self.enable_stable_row_ids, data_storage_version=self.data_storage_version,
            storage_options=self.table_storage_options,
        )

    def merge(self, table: TableRef, data: Any, on: str | Sequence[str], *, when_matched: str = "update_all",
              when_not_matched: str = "insert_all", delete_not_matched_by_source: bool | str = False,
              update_condition: str | None = None,
              transaction_properties: Mapping[str, str] | None = None) -> tuple[LanceDataset, dict[str, int]]:
        """Upsert ``data`` on key column(s) ``on``; creates the table when missing.

        ``update_condition``: SQL over ``source.``/``target.`` columns; matched rows are updated
        only where it holds (e.g. ``source.ts > target.ts`` so a stale writer never wins).
        """
        options = MergeOptions(
            on=(on,) if isinstance(on, str) else tuple(on), when_matched=when_matched,
            when_not_matched=when_not_matched, delete_not_matched_by_source=delete_not_matched_by_source,
            update_condition=update_condition,
        )
        uri = self.uri_for(table)
        ds = self._try_open(uri)
        if is_spark_dataframe(data):
            return self._spark_merge(uri, ds is not None, data, options, transaction_properties)
        reader = self._conformed(uri, data)
        if ds is None:
            created = engine.write(
                uri, reader, mode="create", transaction_properties=transaction_properties or {},
                enable_stable_row_ids=self.enable_stable_row_ids, data_storage_version=self.data_storage_version,
                storage_options=self.table_storage_options,
            )
            return created, {"inserted": created.count_rows(), "updated": 0, "deleted": 0}
        return engine.merge(ds, reader, options, delete_not_matched_by_source=options.delete_not_matched_by_source,
                            transaction_properties=transaction_properties or {})

    def _spark_merge(self, uri: str, exists: bool, df: Any, options: MergeOptions,
                     transaction_properties: Mapping[str, str] | None) -> tuple[LanceDataset, dict[str, int]]:
        """The upsert computed on the executors (``merge_dataframe``), never on the driver."""
        props = dict(transaction_properties or {})
        storage = self.table_storage_options
        if not exists:  # like the pyarrow path: a merge into a missing table creates it
            result = engine.spark_write(df, uri, mode="append", enable_stable_row_ids=self.enable_stable_row_ids,
                                        data_storage_version=self.data_storage_version,
                                        transaction_properties=props, storage_options=storage)
            stats = {"inserted": result.rows, "updated": 0, "deleted": 0}
        else:
            result, stats = engine.spark_merge(df, uri, options,
                                               delete_not_matched_by_source=options.delete_not_matched_by_source,
                                               transaction_properties=props, storage_options=storage)
        return engine.open_table(uri, result.version, storage_options=storage), stats

    def delete(self, table: TableRef, predicate: str, *,
               transaction_properties: Mapping[str, str] | None = None) -> LanceDataset:
        """Delete the rows matching ``predicate``; returns the new version."""
        ds = self.open(table)
        ds.delete(predicate, transaction_properties=dict(transaction_properties or {}))
        return ds  # mutations move the dataset object to the version they commit

    def add_columns(self, table: TableRef, fields: Sequence[pa.Field]) -> LanceDataset:
        """Add all-null (nullable) columns in one commit."""
        return engine.add_columns(self.open(table), fields, transaction_properties={})

    def compact(self, table: TableRef, **options: Any) -> Any:
        """Compact small fragments (``ds.optimize.compact_files``); returns the engine's metrics."""
        return self.open(table).optimize.compact_files(**options)

    def cleanup(self, table: TableRef, older_than: timedelta = timedelta(days=7), **options: Any) -> Any:
        """Remove files of versions older than ``older_than`` (``cleanup_old_versions``)."""
        return self.open(table).cleanup_old_versions(older_than=older_than, **options)

    def changes(self, table: TableRef, begin_version: int, end_version: int | None = None, *,
                columns: list[str] | None = None) -> pa.RecordBatchReader:
        """The change feed of versions ``(begin_version, end_version]`` (default: up to latest)."""
        uri = self.uri_for(table)
        if end_version is None:
            ds = self._try_open(uri)
            if ds is None:
                raise DatasetNotFoundError("no Lance table here", table=uri)
            end_version = ds.version
        return engine.change_feed(uri, begin_version, end_version, columns=columns,
                                  storage_options=self.table_storage_options)
