"""The ``lance`` Python data source: ``spark.read.format("lance")`` / ``df.write.format("lance")``.

A thin shell over the same pieces as :func:`read_dataframe`, :func:`read_changes` and
:func:`write_dataframe`: the reader plans (and pins) the version when Spark creates it and
reads the same splits with the same task function; the writer plans like ``write_dataframe``,
its tasks run the same write function, and its commit builds the same transaction.

Read options (strings): ``version``, ``columns`` (comma-separated: Python data sources get no
column pruning from Spark, so ask for columns here), ``filter`` (SQL, evaluated by the engine),
``with_row_id``, ``with_row_address``, ``rows_per_split``, ``batch_size`` (rows per Arrow batch;
default 65,536, fewer for wide rows: :func:`lance_format.spark.read.batch_rows`); with
``begin_version`` (and optionally ``end_version``) the DataFrame is the change feed instead.
Spark's own filters are pushed into the engine when the session has
``spark.sql.python.filterPushdown.enabled=true`` at :func:`register` time, but only on a Spark
that keeps each scan's filters to that scan (5.0 on): Spark 4.1-4.3 would let one scan of a
DataFrame read with another scan's filters (:mod:`lance_format.spark.pushed_filters`), so there
the setting is ignored with a warning and Spark filters the rows.

Write options: ``mode("append")`` or ``mode("overwrite")`` (Spark allows no other save mode
for Python data sources), ``replace_where``, ``schema_mode``, ``enable_stable_row_ids``,
``max_rows_per_file`` / ``maxRowsPerFile``, ``max_bytes_per_file`` / ``maxBytesPerFile`` (hard
limits, as in pylance), ``target_rows_per_file`` / ``targetRowsPerFile``,
``target_bytes_per_file`` / ``targetBytesPerFile`` (default 1,048,576 rows / 256 MiB of Arrow
data, capped by the limits), ``coalesceSmallFragments`` (default true: a task whose output stays
below 1/8 of a target hands it to the commit, which coalesces all such outputs into files of
the target size in the same single version, see :mod:`lance_format.spark.coalesce`; the
transaction records the fragment counts before and after),
``data_storage_version``, ``commit_message``, ``compactSmallFragments`` (``true`` or a number of
small fragments, default 50: compact the table's small fragments after the commit; off by
default, see :mod:`lance_format.spark.compaction`), ``compactMinSmallFragments``,
``idempotency_key``, ``transaction_properties`` (JSON object), ``fixed_size_lists`` (JSON
object). Spark runs ``commit()`` in a separate Python process, so the committed version is
not returned to the caller: use :func:`write_dataframe` for that (or look the
``idempotency_key`` up). With the data source, ``replace_where`` finds the rows to delete in
that commit process instead of on the executors.

Change feed: ``begin_version`` (exclusive) / ``end_version``, or Delta's ``readChangeFeed=true``
with ``startingVersion`` (inclusive) / ``endingVersion``. Streams: ``readStream`` / ``writeStream``
(:mod:`lance_format.spark.streaming_source`, :mod:`lance_format.spark.streaming_sink`). SQL:
``CREATE TABLE t USING lance OPTIONS (path '...')`` (:mod:`lance_format.spark.catalog_tables`).

Catalogs (reads, writes, streams): ``namespace.impl`` (``dir``, ``rest`` or a class path), the
namespace's properties as ``namespace.<key>`` (``namespace.root``, ``namespace.uri``,
``namespace.headers.<Name>``, ``namespace.storage.<key>``) and ``table_id`` (``sales.orders``)
address a Lance Namespace table instead of a path; a write declares a missing table
(:mod:`lance_format.spark.namespace_options`).

Storage options (reads and writes): every option named ``storage.<key>`` passes ``<key>`` to
the object store with Lance's keys, e.g. ``.option("storage.aws_endpoint", "http://...")``,
``.option("storage.aws_region", "us-east-1")``, ``.option("storage.allow_http", "true")``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, overload

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)

from lance_format.distributed import IDEMPOTENCY_KEY, FragmentMetadata, LanceDataset, object_store_for, to_expression
from lance_format.errors import InvalidInputError
from lance_format.spark.catalog_tables import (
    declared_schema,
    is_catalog_creation,
    nullable_columns,
    resolved_options,
    table_options,
    with_table_options,
    without_table_options,
)
from lance_format.spark.changes import ChangeSpec, plan_changes, version_changes
from lance_format.spark.coalesce import StagedOutput, coalescing_from_options
from lance_format.spark.common import CommitResult
from lance_format.spark.compaction import compact_after_write, compaction_from_options
from lance_format.spark.namespace_options import resolve_options
from lance_format.spark.pushed_filters import (
    PUSHDOWN_CONF,
    filter_sql,
    pushdown_leaks,
    running_spark_leaks,
    warn_pushdown_ignored,
)
from lance_format.spark.read import DEFAULT_ROWS_PER_SPLIT, ReadPlan, plan_read, read_schema
from lance_format.spark.tasks import read_split, write_partition
from lance_format.spark.worker_heap import freeze_imported_objects
from lance_format.spark.write import Deletions, TaskOutputs, commit_coalesced, discard_write
from lance_format.spark.write_plan import plan_write

NAME = "lance"
DELEGATE_NAME = "lance_python"  # the Python source as the JVM source reaches it
ABORT_GRACE_SECONDS = 2.5


def _flag(options: Any, key: str) -> bool:
    return str(options.get(key, "false")).strip().lower() == "true"


@overload
def _int(options: Any, key: str, default: int) -> int: ...
@overload
def _int(options: Any, key: str, default: None = None) -> int | None: ...
def _int(options: Any, key: str, default: int | None = None) -> int | None:
    value = options.get(key)
    if value is None or str(value).strip() == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise InvalidInputError(f"option {key!r} must be an integer, got {value!r}") from None


def _path(options: Any) -> str:
    path = options.get("path")
    if not path:
        raise InvalidInputError("the lance data source needs a path: .load(uri) / .save(uri) / "
                                "CREATE TABLE t USING lance OPTIONS (path '...') (Spark passes no path to "
                                "CREATE TABLE ... AS SELECT, saveAsTable or writeTo: create the table first)")
    return path


STORAGE_PREFIX = "storage."


def _storage(options: Any) -> dict[str, str]:
    """The ``storage.<key>`` options as Lance storage options (``<key>`` -> value)."""
    result = {}
    for key, value in options.items():
        if str(key).lower().startswith(STORAGE_PREFIX):
            name = str(key)[len(STORAGE_PREFIX):]
            if not name:
                raise InvalidInputError("option 'storage.' needs a storage option name after the prefix")
            result[name.lower()] = str(value)
    return result


def _columns(options: Any) -> list[str] | None:
    value = options.get("columns")
    if value is None:
        return None
    return [c.strip() for c in value.split(",") if c.strip()]


def _json(options: Any, key: str) -> dict:
    value = options.get(key)
    if not value:
        return {}
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"option {key!r} must be a JSON object: {exc}") from None
    if not isinstance(parsed, dict):
        raise InvalidInputError(f"option {key!r} must be a JSON object")
    return parsed


def _change_range(options: Any) -> tuple[int, int | None] | None:
    """``(begin, end)`` of a change-feed read: ``begin_version`` (exclusive) / ``end_version``,
    or Delta's ``readChangeFeed`` with ``startingVersion`` (inclusive, default 1) / ``endingVersion``."""
    begin, end = _int(options, "begin_version"), _int(options, "end_version")
    if begin is None and _flag(options, "readChangeFeed"):
        begin = max((_int(options, "startingVersion") or 1) - 1, 0)
        end = _int(options, "endingVersion")
    return None if begin is None else (begin, end)


def _version(options: Any) -> int | str | None:
    value = options.get("version")
    if value is None or str(value).strip() == "":
        return None
    return int(value) if str(value).strip().isdigit() else str(value)


# -- reading ---------------------------------------------------------------------------------------
@dataclass
class LancePartition(InputPartition):
    index: int


class LanceReader(DataSourceReader):
    """Plans when Spark creates it (the version is pinned then); reads splits or feed tasks."""

    def __init__(self, options: Any) -> None:
        self.path = _path(options)
        self.changes: ChangeSpec | None = None  # set for change-feed reads,
        self.plan: ReadPlan | None = None  # else this
        storage = _storage(options)
        changes = _change_range(options)
        if changes is not None:
            begin, end = changes
            if end is None:
                end = LanceDataset(self.path, storage_options=storage).version
            self.changes, self.tasks, _ = plan_changes(self.path, begin, end, _columns(options),
                                                       storage_options=storage)
            self.plan = None
            return
        self.changes = None
        self.plan = plan_read(
            self.path, version=_version(options), columns=_columns(options), filter=options.get("filter"),
            with_row_id=_flag(options, "with_row_id"), with_row_address=_flag(options, "with_row_address"),
            target_splits=_int(options, "target_splits", 2), rows_per_split=_int(options, "rows_per_split",
                                                                                  DEFAULT_ROWS_PER_SPLIT),
            batch_size=_int(options, "batch_size"), storage_options=storage,
        )

    def partitions(self) -> list[LancePartition]:
        if self.changes is not None:
            count = len(self.tasks)
        else:
            assert self.plan is not None  # a reader plans either a change feed or a scan
            count = len(self.plan.splits)
        return [LancePartition(i) for i in range(count)]

    def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
        index = getattr(partition, "index", None)
        if index is None:  # Spark turns an empty partition list into one empty partition
            return
        if self.changes is not None:
            yield from version_changes(self.changes, *self.tasks[index])
        else:
            assert self.plan is not None  # a reader plans either a change feed or a scan
            yield from read_split(self.plan.spec, self.plan.splits[index])


class LancePushdownReader(LanceReader):
    """A reader that takes Spark's filters, on a Spark that keeps each scan's pushed filters to
    that scan (see :mod:`lance_format.spark.pushed_filters`); on the Sparks that leak them it
    returns every filter to Spark."""

    @staticmethod
    def _accepts_filters() -> bool:
        return not running_spark_leaks()

    def pushFilters(self, filters: list) -> Iterator:
        if self.plan is None or not self._accepts_filters():  # the change feed filters nothing itself
            yield from filters
            return
        taken: list[str] = []
        spec = self.plan.spec
        table_schema = LanceDataset(spec.uri, spec.version, storage_options=dict(spec.storage_options)).schema
        for f in filters:
            sql = filter_sql(f, table_schema)
            if sql is not None:
                try:
                    to_expression(sql, table_schema)
                except Exception:
                    sql = None  # the engine cannot evaluate it: Spark keeps it
            if sql is None:
                yield f
            else:
                taken.append(sql)
        if taken:
            parts = ([f"({self.plan.spec.filter})"] if self.plan.spec.filter else []) + [f"({s})" for s in taken]
            self.plan = replace(self.plan, spec=replace(self.plan.spec, filter=" AND ".join(parts)))


class EmptyReader(DataSourceReader):
    """No rows (a catalog table whose Lance table is not written yet)."""

    def partitions(self) -> list[LancePartition]:
        return []

    def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
        return iter(())


# -- writing ---------------------------------------------------------------------------------------
@dataclass
class LanceCommitMessage(WriterCommitMessage):
    fragments: list[str]  # pylance's FragmentMetadata JSON of each file written
    retried: bool = False  # an earlier attempt of this task failed (and may have left files)
    staged: StagedOutput | None = None  # a small output, for the commit to coalesce


# File-size options: pylance's write parameter names, or Spark-style camelCase ones.
SIZE_OPTIONS = {"max_rows_per_file": "maxRowsPerFile", "max_bytes_per_file": "maxBytesPerFile",
                "target_rows_per_file": "targetRowsPerFile", "target_bytes_per_file": "targetBytesPerFile"}


def file_size_options(options: Any) -> dict[str, int]:
    """The file-size options given (``max_rows_per_file`` or ``maxRowsPerFile``, ...)."""
    sizes: dict[str, int] = {}
    for key, alias in SIZE_OPTIONS.items():
        given = {name: int(_int(options, name, 0)) for name in (key, alias) if options.get(name)}
        if len(set(given.values())) > 1:
            raise InvalidInputError(f"options {key!r} and {alias!r} disagree: {given}")
        if given:
            sizes[key] = next(iter(given.values()))
    return sizes


def task_retried() -> bool:
    """Whether the running task is not the first attempt of its task."""
    try:
        from pyspark import TaskContext

        context = TaskContext.get()
        return context is not None and context.attemptNumber() > 0
    except Exception:
        return False


class LanceWriter(DataSourceArrowWriter):
    """Plans like ``write_dataframe`` when Spark creates it; tasks write, the commit commits."""

    def __init__(self, options: Any, schema: Any, overwrite: bool) -> None:
        properties = {str(k): str(v) for k, v in _json(options, "transaction_properties").items()}
        if options.get("idempotency_key"):
            properties[IDEMPOTENCY_KEY] = options["idempotency_key"]
        sizes = {str(k): int(v) for k, v in _json(options, "fixed_size_lists").items()}
        extra: dict[str, Any] = file_size_options(options)
        self.coalesce = coalescing_from_options(options)
        self.plan = plan_write(
            schema, _path(options), mode="overwrite" if overwrite else "append",
            replace_where=options.get("replace_where"), schema_mode=options.get("schema_mode", "error"),
            enable_stable_row_ids=_flag(options, "enable_stable_row_ids"), transaction_properties=properties,
            commit_message=options.get("commit_message"), data_storage_version=options.get("data_storage_version"),
            fixed_size_lists=sizes or None, storage_options=_storage(options), **extra,
        )
        self.compaction = compaction_from_options(options, self.plan)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> LanceCommitMessage:
        if self.plan.skipped is not None:
            for _ in iterator:
                pass
            return LanceCommitMessage([])
        output = write_partition(self.plan.spec(stage_small_outputs=self.coalesce), iterator)
        return LanceCommitMessage(output.fragments, task_retried(), output.staged)

    def commit(self, messages: list) -> None:
        freeze_imported_objects()  # a planning-style worker: see worker_heap
        commit_data_source_write(self, messages)

    def abort(self, messages: list) -> None:
        if self.plan.skipped is None:
            # Runs in its own worker, right after the job failed: tasks being cancelled may still
            # create files until their Python workers are killed (spark.python.task.killTimeout,
            # 2 s by default), so sweep again after that. Files a landed commit references stay.
            discard_write(self.plan)
            time.sleep(ABORT_GRACE_SECONDS)
            discard_write(self.plan)


def commit_data_source_write(writer: LanceWriter, messages: list) -> CommitResult | None:
    """The commit of ``df.write.format("lance")``: the tasks' fragments and their small outputs
    coalesced to the target file size (:mod:`lance_format.spark.coalesce`), in ONE transaction
    that records the fragment counts; then the staged outputs (and the files of failed task
    attempts) are removed, and the optional compaction runs."""
    plan = writer.plan
    if plan.skipped is not None:
        return None
    written = [m for m in messages if m is not None]
    deletions = Deletions()
    if plan.operation == "replace":
        deletions = _local_deletions(plan)
    fragments = [FragmentMetadata.from_json(blob) for m in written for blob in m.fragments]
    staged = [m.staged for m in written if m.staged is not None]
    result = commit_coalesced(plan, TaskOutputs(fragments, staged=staged), deletions)
    if any(m.retried for m in written):
        discard_write(plan)  # files of the failed attempts (the committed ones are kept)
    return compact_after_write(plan.store, result, getattr(writer, "compaction", None))


def _local_deletions(plan: Any) -> Deletions:
    """``replace_where`` in the commit process: the matching rows' deletion vectors."""
    from lance_format.spark.tasks import DeleteSpec, delete_matching_task

    ds = LanceDataset(plan.store, plan.read_version)
    spec = DeleteSpec(uri=plan.uri, version=plan.read_version, write_id=plan.write_id, predicate=plan.replace_where,
                      storage_options=plan.packed_options)
    groups = [[f.fragment_id] for f in ds.get_fragments()]
    run = delete_matching_task(spec, groups)
    rows: list[tuple[Any, ...]] = []
    for batch in run(iter([pa.record_batch([pa.array(range(len(groups)), pa.int64())], names=["id"])])):
        rows.extend(tuple(r.values()) for r in batch.to_pylist())
    return Deletions.from_rows(rows)


def _checked(reader: LanceReader, schema: Any) -> LanceReader:
    """Refuse a read whose pinned version no longer has the schema the DataFrame was built with
    (the latest version changed between ``load()`` and the action): reload instead."""
    plan = reader.plan
    planned = plan.schema if plan is not None else None
    if plan is None or planned is None or schema is None:
        return reader
    if planned.simpleString() != schema.simpleString():
        raise InvalidInputError(
            f"the table's schema changed since the DataFrame was loaded ({schema.simpleString()} -> "
            f"{planned.simpleString()}); load it again or pin option('version', ...)",
            table=reader.path, version=plan.version,
        )
    if [f.nullable for f in planned] != [f.nullable for f in schema]:
        # A catalog table's columns may be nullable where the Lance fields are not: Spark wants
        # its own schema's nullability in every batch.
        from lance_format.spark.tasks import arrow_schema_to_bytes
        from lance_format.spark.types import spark_arrow_schema

        target = arrow_schema_to_bytes(spark_arrow_schema(without_table_options(schema)))
        reader.plan = replace(plan, spec=replace(plan.spec, target=target))
    return reader


class LanceDataSource(DataSource):
    """``format("lance")``: see the module docstring for options."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def _located(self, *, create: bool) -> Any:
        """The options, a namespace table resolved to its path (kept: resolving is done once)."""
        self.options = resolve_options(self.options, create=create)
        return self.options

    def schema(self) -> Any:
        # each planning call ends with the worker's full gc.collect(): see worker_heap
        freeze_imported_objects()
        options = self._located(create=False)
        if is_catalog_creation(options):  # CREATE TABLE ... USING lance: keep the table's options
            table = table_options(options)
            declared = declared_schema(options)
            if declared is not None and not _exists(table):
                return with_table_options(declared, table)
            return with_table_options(_table_schema(table), table)
        return _table_schema(options)

    def reader(self, schema: Any) -> LanceReader | EmptyReader:
        freeze_imported_objects()
        self._located(create=False)
        options = resolved_options(self.options, schema)
        if options is not self.options and not _exists(options):
            return EmptyReader()  # a catalog table before its first INSERT
        return _checked(self._reader_class(options), schema)

    _reader_class = LanceReader

    def writer(self, schema: Any, overwrite: bool) -> LanceWriter:
        freeze_imported_objects()
        self._located(create=True)
        options = resolved_options(self.options, schema)
        if options is not self.options:  # INSERT into a catalog table: its columns are nullable
            schema = nullable_columns(schema)
        return LanceWriter(options, without_table_options(schema), overwrite)

    def streamWriter(self, schema: Any, overwrite: bool) -> Any:
        from lance_format.spark.streaming_sink import LanceStreamWriter

        self._located(create=True)
        return LanceStreamWriter(resolved_options(self.options, schema), without_table_options(schema), overwrite)

    def streamReader(self, schema: Any) -> Any:
        from lance_format.spark.streaming_source import LanceStreamReader

        self._located(create=False)
        return LanceStreamReader(resolved_options(self.options, schema), schema)


def _exists(options: Any) -> bool:
    from lance_format.distributed import latest_manifest

    return latest_manifest(object_store_for(_path(options), _storage(options))) is not None


def _table_schema(options: Any) -> Any:
    """The Spark schema of a read (or of the change feed) with these options."""
    path = _path(options)
    storage = _storage(options)
    if _flag(options, "readChangeFeed") and not options.get("endingVersion"):
        from lance_format.spark.streaming_source import change_feed_schema

        return change_feed_schema(options)
    changes = _change_range(options)
    if changes is not None:
        begin, end = changes
        if end is None:
            end = LanceDataset(path, storage_options=storage).version
        return plan_changes(path, min(begin, end), end, _columns(options), storage_options=storage)[2]
    return read_schema(path, version=_version(options), columns=_columns(options),
                       with_row_id=_flag(options, "with_row_id"), with_row_address=_flag(options, "with_row_address"),
                       storage_options=storage)


class LancePushdownDataSource(LanceDataSource):
    """The same source with filter pushdown (registered when the session enables it)."""

    _reader_class = LancePushdownReader


class LanceDelegateDataSource(LanceDataSource):
    """The Python source under the name the JVM source hands writes, streams and the change feed
    to (``lance`` itself may belong to the JVM source, which Spark then refuses to register over)."""

    @classmethod
    def name(cls) -> str:
        return DELEGATE_NAME


def _register_python(spark: Any, source: type[LanceDataSource]) -> None:
    """``source`` as ``lance`` where Spark lets it take the name (not where the JVM source holds
    it: a session started with ``jvm.configure``, or a second ``register`` on a thread that has
    the JVM source), and always as the JVM source's delegate."""
    from pyspark.errors import AnalysisException

    try:
        spark.dataSource.register(source)
    except AnalysisException as exc:
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(exc):
            raise
    spark.dataSource.register(LanceDelegateDataSource)


def register(spark: Any, jvm: bool | None = None) -> None:
    """Register the ``lance`` data source with ``spark``.

    ``jvm=True`` or the session conf ``spark.lance.jvm.enabled=true`` make ``format("lance")``
    the JVM source where it can be compiled (a ``javac``; :mod:`lance_format.spark.jvm`):
    column pruning, statistics, columnar batches and filter pushdown that keeps every scan's
    filters to that scan. Writes, ``readStream``/``writeStream`` and the change feed go through
    it to this Python source. It is opt-in: a nested column type can still fail in its reader
    (found by the suite's pushed-filter tests). ``LANCE_SPARK_JVM=0`` turns it off everywhere.
    Started with :func:`lance_format.spark.jvm.configure`, a session has the JVM source on every
    thread; else it is added here for this thread.

    The Python source takes Spark's filters (``spark.sql.python.filterPushdown.enabled``) only on
    a Spark that keeps them to their scan; on Spark 4.1-4.3 the setting is ignored, with a
    :class:`~lance_format.spark.pushed_filters.PushdownIgnoredWarning` when the Python source
    is the one in use.

    Python data sources are looked up through the JVM's active session: from a thread other
    than the one that created the session, call
    ``spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)`` first.

    ``df.write.format("lance")`` runs in Spark's own job, whose Arrow batches this module cannot
    size: with ``spark.sql.execution.arrow.maxBytesPerBatch`` at its default, Spark re-measures
    each batch after every row and the write takes about 2.4x longer (5M rows: 2.3 s against
    0.95 s with ``2147483647``). :func:`write_dataframe` sets it for its own jobs.
    """
    from lance_format.spark.common import conf_flag, use_driver_python
    from lance_format.spark.jvm import ENABLED_CONF, enable, loaded

    use_driver_python(spark)
    pushdown = conf_flag(spark, PUSHDOWN_CONF)
    leaks = pushdown_leaks(spark.version)
    _register_python(spark, LancePushdownDataSource if pushdown and not leaks else LanceDataSource)
    if jvm if jvm is not None else conf_flag(spark, ENABLED_CONF, default=False):
        enable(spark)
    if pushdown and leaks and not loaded(spark):  # the JVM source keeps each scan's filters
        warn_pushdown_ignored(spark.version)


__all__ = ["NAME", "DELEGATE_NAME", "LanceDelegateDataSource", "LanceDataSource", "LancePushdownDataSource", "LanceReader", "LancePushdownReader",
           "LanceWriter", "register"]
