"""The ``lance`` streaming sink: ``df.writeStream.format("lance").start(uri)``, one version per micro-batch.

Spark plans the writer once per query run and pickles it to every task; each micro-batch's
tasks write their rows as new data files (each task under a write id of its own) and return
the fragment descriptions; ``commit(messages, batch_id)`` then runs in a fresh Python worker
on the driver host and commits ONE transaction: an Append (``outputMode("append")``) or an
Overwrite (``outputMode("complete")``: the whole result replaces the table). ``update`` mode
is refused by Spark for Python data sources; merge each batch on keys with
:func:`merge_each_batch` in ``foreachBatch`` instead. Small task outputs are coalesced into
files of the target size within the batch's commit (:mod:`lance_format.spark.coalesce`), unless
``coalesceSmallFragments=false``.

Exactly once: every commit carries the query's id (``txnAppId`` option, else Spark's query id,
stable across restarts from one checkpoint) and the batch id in its transaction properties.
Spark re-runs a batch whose commit it did not record (a crash between our commit and its
checkpoint's ``commits/N``); batch ids of one query only grow, so before committing the sink
looks for the newest commit of the same query among the last ``idempotencyWindow`` versions
and skips the batch (removing the re-run's files) if that commit's batch id is not lower. The
same key also goes into ``idempotency_key``: two attempts racing to commit one batch make the
commit loop refuse the second.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from lance_format.distributed import (
    DEFAULT_IDEMPOTENCY_WINDOW,
    IDEMPOTENCY_KEY,
    WRITE_ID_KEY,
    FragmentMetadata,
    ObjectStore,
    discard_uncommitted,
    latest_manifest,
    list_versions,
    load_transaction,
    new_write_id,
    object_store_for,
    read_manifest,
    write_prefix,
)
from lance_format.errors import (
    DuplicateCommitError,
    InvalidInputError,
    LanceError,
    SchemaMismatchError,
)
from lance_format.spark.coalesce import (
    CoalescedOutputs,
    StagedOutput,
    coalesce_outputs,
    coalescing_from_options,
    delete_staged,
)
from lance_format.spark.common import CommitResult, count_small_fragments
from lance_format.spark.compaction import compact_after_write, compaction_from_options
from lance_format.spark.datasource import _flag, _int, _json, _path, _storage, file_size_options, task_retried
from lance_format.spark.merge import merge_dataframe
from lance_format.spark.tasks import schema_from_bytes, write_partition
from lance_format.spark.write import commit_written, write_dataframe
from lance_format.spark.write_plan import plan_write

STREAM_APP_ID = "lance_format.stream.app_id"
STREAM_BATCH_ID = "lance_format.stream.batch_id"
QUERY_ID_PROPERTY = "sql.streaming.queryId"  # Spark's local property on every task of a streaming query


def stream_key(app_id: str, batch_id: int) -> str:
    """The idempotency key of one micro-batch of one streaming query."""
    return f"spark-stream:{app_id}:{int(batch_id)}"


def stream_properties(app_id: str, batch_id: int) -> dict[str, str]:
    """Transaction properties that record which batch of which query a commit holds."""
    return {STREAM_APP_ID: app_id, STREAM_BATCH_ID: str(int(batch_id))}


def last_stream_commit(store: ObjectStore, app_id: str, *,
                       window: int = DEFAULT_IDEMPOTENCY_WINDOW) -> tuple[int, int] | None:
    """``(version, batch_id)`` of the newest commit of stream ``app_id`` among the last
    ``window`` versions, or None. Stops at the first (newest) match: usually the latest version."""
    listing = list_versions(store)
    for version in sorted(listing.versions, reverse=True)[: max(int(window), 0)]:
        try:
            txn = load_transaction(store, read_manifest(store, listing.versions[version]))
        except LanceError:
            continue  # an unreadable old transaction cannot hold our id
        if txn is not None and txn.transaction_properties.get(STREAM_APP_ID) == app_id:
            try:
                return version, int(txn.transaction_properties.get(STREAM_BATCH_ID, "-1"))
            except ValueError:
                return version, -1
    return None


def batch_committed(store: ObjectStore, app_id: str, batch_id: int, *,
                    window: int = DEFAULT_IDEMPOTENCY_WINDOW) -> int | None:
    """The version that holds batch ``batch_id`` (or a later one) of stream ``app_id``, or None."""
    prior = last_stream_commit(store, app_id, window=window)
    if prior is not None and prior[1] >= int(batch_id):
        return prior[0]
    return None


@dataclass
class StreamCommitMessage(WriterCommitMessage):
    """What one task of a micro-batch wrote."""

    write_id: str
    fragments: list[str]  # pylance's FragmentMetadata JSON of each file written
    schema: bytes  # the fields the files hold (file_pb2.Schema)
    query_id: str | None  # Spark's streaming query id, as the task saw it
    retried: bool = False  # an earlier attempt of this task failed (its files share the prefix)
    staged: StagedOutput | None = None  # a small output, for the commit to coalesce


BATCH_ID_PROPERTY = "streaming.sql.batchId"  # Spark's local property: the micro-batch a task belongs to


def _derived_write_id(plan_write_id: str, *parts: object) -> str:
    """A write id whose file-name prefix (the first 8 bytes, see ``write_prefix``) is fixed by
    ``parts``; the rest is random."""
    import hashlib

    head = hashlib.sha256(":".join([plan_write_id, *map(str, parts)]).encode()).hexdigest()[:16]
    return head + new_write_id()[16:]


def commit_write_id(messages: Sequence[StreamCommitMessage | None], batch_id: int) -> str:
    """The write id of the files a micro-batch's commit writes (its coalesced small outputs).
    Spark builds a new writer for the commit and another for the abort, so the prefix comes
    from what both receive: the tasks' messages (their write ids) and the batch id."""
    ids = sorted(m.write_id for m in messages if m is not None)
    return _derived_write_id(ids[0] if ids else "", int(batch_id), "commit")


def task_write_id(plan_write_id: str) -> str:
    """The write id of one task attempt. Its file-name prefix (the first 8 bytes, see
    ``write_prefix``) is the same for every attempt of one task of one micro-batch, so the
    commit can remove the files a failed attempt left; the rest is random per attempt."""
    try:
        from pyspark import TaskContext

        context = TaskContext.get()
        batch = context.getLocalProperty(BATCH_ID_PROPERTY) if context is not None else None
        partition = context.partitionId() if context is not None else None
    except Exception:
        batch = partition = None
    if batch is None or partition is None:
        return new_write_id()
    return _derived_write_id(plan_write_id, batch, partition)


def _query_id() -> str | None:
    try:
        from pyspark import TaskContext

        context = TaskContext.get()
        return context.getLocalProperty(QUERY_ID_PROPERTY) if context is not None else None
    except Exception:
        return None


class LanceStreamWriter(DataSourceStreamArrowWriter):
    """Writes each micro-batch as one version (see the module docstring)."""

    def __init__(self, options: Any, schema: Any, overwrite: bool) -> None:
        self.complete = bool(overwrite)
        self.app_id = options.get("txnAppId") or None
        self.window = _int(options, "idempotencyWindow", DEFAULT_IDEMPOTENCY_WINDOW)
        properties = {str(k): str(v) for k, v in _json(options, "transaction_properties").items()}
        sizes = {str(k): int(v) for k, v in _json(options, "fixed_size_lists").items()}
        extra: dict[str, Any] = file_size_options(options)
        self.coalesce = coalescing_from_options(options)
        # Planned when the query starts (tasks) and again for every commit (its own process):
        # a table created by batch 0 is appended to by the commits that follow.
        self.plan = plan_write(
            schema, _path(options), mode="overwrite" if overwrite else "append",
            schema_mode=options.get("schema_mode", "error"),
            enable_stable_row_ids=_flag(options, "enable_stable_row_ids"), transaction_properties=properties,
            commit_message=options.get("commit_message"), data_storage_version=options.get("data_storage_version"),
            fixed_size_lists=sizes or None, storage_options=_storage(options), **extra,
        )
        self.compaction = compaction_from_options(options, self.plan)

    # -- executors ---------------------------------------------------------------------------------
    def write(self, iterator: Iterator[pa.RecordBatch]) -> StreamCommitMessage:
        spec = replace(self.plan.spec(stage_small_outputs=getattr(self, "coalesce", False)),
                       write_id=task_write_id(self.plan.write_id))  # one per task attempt
        output = write_partition(spec, iterator)
        return StreamCommitMessage(spec.write_id, output.fragments, spec.schema, _query_id(), task_retried(),
                                   output.staged)

    # -- driver (commit worker) ----------------------------------------------------------------------
    def _stream_id(self, messages: Sequence[StreamCommitMessage | None]) -> str | None:
        if self.app_id:
            return self.app_id
        ids = {m.query_id for m in messages if m is not None and m.query_id}
        return ids.pop() if len(ids) == 1 else None

    def _discard(self, store: ObjectStore, messages: Sequence[StreamCommitMessage | None],
                 batch_id: int | None = None) -> None:
        """Remove the batch's uncommitted files: the tasks' (staged outputs too) and, given
        ``batch_id``, those its commit wrote."""
        latest = list_versions(store).latest or 0
        prefixes = [write_prefix(m.write_id) for m in messages if m is not None]
        if batch_id is not None:
            prefixes.append(write_prefix(commit_write_id(messages, batch_id)))
        for prefix in prefixes:
            try:
                discard_uncommitted(store, prefix, read_version=latest)
            except Exception:
                pass  # best effort: an orphan is harmless and cleanup_old_versions removes it

    def commit(self, messages: list, batchId: int) -> None:
        commit_batch(self, messages, batchId)

    def abort(self, messages: list, batchId: int) -> None:
        store = self.plan.store
        app_id = self._stream_id(messages)
        if app_id is not None and batch_committed(store, app_id, batchId, window=self.window) is not None:
            return  # the commit landed before the error: its files are the table's now
        self._discard(store, messages, batchId)


def commit_batch(writer: LanceStreamWriter, messages: Sequence[StreamCommitMessage | None],
                 batch_id: int) -> CommitResult:
    """Commit one micro-batch's files as one version (or nothing, if the batch is already in)."""
    plan = writer.plan
    store = plan.store
    app_id = writer._stream_id(messages)
    written = [m for m in messages if m is not None]
    # The version to commit against is read first: another attempt of this batch committing
    # after this point is caught by the commit loop (same idempotency key), before it by the check.
    existing = latest_manifest(store)
    read_version = existing[1].manifest.version if existing is not None else 0
    if app_id is not None:
        prior = batch_committed(store, app_id, batch_id, window=writer.window)
        if prior is not None:  # a re-run of a batch whose commit landed: keep that one only
            writer._discard(store, written)
            return CommitResult(version=prior, rows=0, fragments=0, bytes=0, read_version=prior, operation="none",
                                skipped=True)
    fragments = [FragmentMetadata.from_json(blob) for message in written for blob in message.fragments]
    staged = [m.staged for m in written if m.staged is not None]
    schemas = {m.schema for m in written}
    if len(schemas) > 1:
        raise SchemaMismatchError("the tasks of one micro-batch wrote different schemas", table=plan.uri)
    files_schema = schema_from_bytes(schemas.pop()) if schemas else plan.schema
    if existing is not None and not writer.complete:
        _check_files_schema(files_schema, plan, read_version)
    if not fragments and not staged and not writer.complete:
        return CommitResult(version=read_version, rows=0, fragments=0, bytes=0, read_version=read_version,
                            operation="none", skipped=True)  # an empty append adds no version
    properties = {k: v for k, v in plan.properties.items() if k != WRITE_ID_KEY}
    if app_id is not None:
        properties.update(stream_properties(app_id, batch_id))
        properties[IDEMPOTENCY_KEY] = stream_key(app_id, batch_id)
    operation = "overwrite" if writer.complete or existing is None else "append"
    outputs = None
    try:
        outputs = coalesce_outputs(store, fragments, staged, files_schema, plan.storage_version,
                                   prefix=write_prefix(commit_write_id(written, batch_id)),
                                   target_rows=plan.target_rows_per_file, target_bytes=plan.target_bytes_per_file)
        fragments = outputs.fragments
        properties.update(outputs.properties)
        committed = commit_written(
            store, operation, read_version=read_version, fragments=fragments, schema=files_schema,
            properties=properties, commit_message=plan.commit_message,
            enable_stable_row_ids=plan.enable_stable_row_ids, storage_version=plan.storage_version or None,
        )
    except DuplicateCommitError as duplicate:  # another attempt of this batch won the race
        _abandon(writer, store, written, outputs)
        assert duplicate.version is not None  # the commit loop names the winning version
        return CommitResult(version=duplicate.version, rows=0, fragments=0, bytes=0, read_version=read_version,
                            operation="none", skipped=True)
    except BaseException:
        _abandon(writer, store, written, outputs)
        raise
    assert outputs is not None  # set before the commit
    delete_staged(store, staged)
    for message in written:
        if message.retried:  # the failed attempts' files (this attempt's are referenced now)
            try:
                discard_uncommitted(store, write_prefix(message.write_id), read_version=read_version)
            except Exception:
                pass  # best effort: an orphan is harmless and cleanup_old_versions removes it
    result = CommitResult(
        version=committed.version, rows=sum(f.physical_rows for f in fragments), fragments=len(fragments),
        bytes=sum(d.file_size_bytes or 0 for f in fragments for d in f.files), retries=committed.retries,
        read_version=read_version, operation=operation, rows_inserted=sum(f.physical_rows for f in fragments),
        small_fragments=count_small_fragments(fragments, plan.target_rows_per_file, plan.target_bytes_per_file),
        table_fragments=len(committed.manifest_file.manifest.fragments),
        fragments_before_coalescing=outputs.fragments_before, small_outputs_coalesced=outputs.coalesced,
    )
    return compact_after_write(store, result, getattr(writer, "compaction", None))


def _abandon(writer: LanceStreamWriter, store: ObjectStore, written: Sequence[StreamCommitMessage],
             outputs: CoalescedOutputs | None) -> None:
    """A commit that did not happen: remove the coalesced files and the tasks' files."""
    if outputs is not None:
        outputs.abort()
    writer._discard(store, written)


def _check_files_schema(files_schema: Any, plan: Any, version: int) -> None:
    """The files were written for the table the query started on: refuse them if the table's
    schema changed since (a concurrent overwrite, columns added or dropped)."""
    same = files_schema.field_ids() == plan.schema.field_ids() and files_schema.to_arrow().equals(plan.schema.to_arrow())
    if not same:
        raise SchemaMismatchError(
            "the table's schema changed while the stream was running (new or dropped columns, an overwrite); "
            "restart the query", table=plan.uri, version=version,
        )


# -- foreachBatch ------------------------------------------------------------------------------------
def merge_each_batch(
    uri: str | os.PathLike[str],
    on: str | Sequence[str],
    *,
    app_id: str | None = None,
    idempotency_window: int = DEFAULT_IDEMPOTENCY_WINDOW,
    storage_options: Mapping[str, str] | None = None,
    **merge_options: Any,
) -> Callable[[Any, int], CommitResult | None]:
    """A ``foreachBatch`` function that upserts each micro-batch into the table at ``uri`` by
    the key columns ``on`` (:func:`merge_dataframe`, one version per batch), exactly once.

    ``writeStream.foreachBatch(merge_each_batch(uri, "id")).option("checkpointLocation", ...)``.
    A batch whose commit already landed (a restart re-running it) is skipped: each commit
    records ``app_id`` (default: the streaming query's id, stable across restarts from one
    checkpoint; required on Spark Connect) and the batch id. A missing table is created, empty,
    from the first batch's schema. ``merge_options`` go to :func:`merge_dataframe`
    (``when_matched``, ``when_not_matched_by_source``, ``when_matched_update_condition``, ...);
    keys must be unique within a batch (deduplicate first, e.g. the latest row per key).
    """

    if "transaction_properties" in merge_options:
        extra_properties = dict(merge_options.pop("transaction_properties") or {})
    else:
        extra_properties = {}
    location = os.fspath(uri)

    def merge_batch(batch_df: Any, batch_id: int) -> CommitResult | None:
        stream = app_id
        if stream is None:
            try:
                stream = batch_df.sparkSession.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
            except Exception:
                stream = None
            if not stream:
                raise InvalidInputError("merge_each_batch needs app_id= here (no streaming query id is visible)",
                                        table=location)
        store = object_store_for(location, storage_options)
        if latest_manifest(store) is None:
            write_dataframe(batch_df.limit(0), location, mode="append", storage_options=storage_options)
        elif batch_committed(store, stream, batch_id, window=idempotency_window) is not None:
            return None
        properties = {**extra_properties, **stream_properties(stream, batch_id)}
        return merge_dataframe(batch_df, location, on, transaction_properties=properties,
                               storage_options=storage_options, **merge_options)

    return merge_batch


__all__ = [
    "STREAM_APP_ID",
    "STREAM_BATCH_ID",
    "LanceStreamWriter",
    "StreamCommitMessage",
    "batch_committed",
    "commit_batch",
    "last_stream_commit",
    "merge_each_batch",
    "stream_key",
    "stream_properties",
]
