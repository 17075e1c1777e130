"""File sizes of Spark writes: fewer, fuller files than Spark has partitions.

``write_dataframe`` plans its tasks from Spark's size estimate (:func:`coalesce_to_target`:
``coalesce()`` to as many tasks as the estimate fills files). Where that is not possible, small
task outputs are coalesced in the commit, described below.

Coalescing small task outputs in the commit of ``df.write.format("lance")`` and the streaming
sink (and of ``write_dataframe``, for DataFrames without an estimate):

A Python data source cannot change Spark's partitioning, and its ``commit()`` runs in a Python
worker on the driver host with no SparkSession (no second job can run there). So a write of
2,000 small partitions would commit 2,000 small fragments. Instead, by default:

1. Each task streams its rows into a *staged output* first: an Arrow IPC file
   ``data/.tmp<write prefix><random>.arrow`` (:func:`staged_file_name`). Once the task's rows
   reach 1/8 of the target rows or bytes per file (no longer a small file, see
   :func:`lance_format.spark.common.is_small_fragment`), the staged rows are replayed into Lance
   data files and the task goes on writing those, as without coalescing. Memory stays bounded
   by Spark's batch size either way.
2. The task reports its fragments and, if it stayed small, its staged output.
3. The commit streams the staged outputs, batch by batch, into new data files rolled at the
   target rows and bytes (:func:`coalesce_staged`: bin-packing in task order, so every file but
   the last is full), and commits them with the tasks' large fragments in ONE transaction.
   The staged files are never referenced: readers never see them, a failed or duplicate commit
   removes them with the write's other files (they share its prefix), and after the commit they
   are deleted. Rows are rewritten at most once, and only small outputs: at most 1/8 of the
   target per task.

The transaction records the counts (:func:`coalescing_properties`): the fragments the tasks'
outputs would have made, the fragments committed, and the small outputs coalesced.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.distributed import (
    DATA_DIR,
    FragmentMetadata,
    FragmentSink,
    LanceSchema,
    ObjectStore,
    fragment_from_proto,
    staged_file_name,
)
from lance_format.errors import CorruptFileError, InvalidInputError
from lance_format.spark.common import SMALL_FILE_FRACTION

if TYPE_CHECKING:
    from lance_format.spark.write_plan import WritePlan

COALESCE_OPTION = "coalesceSmallFragments"
# Transaction properties of a data-source or streaming-sink commit.
FRAGMENTS_BEFORE_KEY = "lance_format.write.fragments_before_coalescing"
FRAGMENTS_KEY = "lance_format.write.fragments"
COALESCED_KEY = "lance_format.write.small_outputs_coalesced"
# A merge's staged rows carry their row id (null: an inserted row) in this column.
STAGED_ROW_ID = "__lance_staged_rowid"


def coalescing_from_options(options: Any) -> bool:
    """``coalesceSmallFragments`` (default true)."""
    value = str(options.get(COALESCE_OPTION, "true")).strip().lower()
    if value not in ("true", "false"):
        raise InvalidInputError(f"option {COALESCE_OPTION!r} must be true or false, got {value!r}")
    return value == "true"


def staging_limits(target_rows: int, target_bytes: int) -> tuple[int, int]:
    """(rows, bytes) at which a task's output stops being small and is written as Lance files."""
    return max(int(target_rows) // SMALL_FILE_FRACTION, 1), max(int(target_bytes) // SMALL_FILE_FRACTION, 1)


@dataclass(frozen=True)
class StagedOutput:
    """A task's small output: its staged file (relative to the table), rows and Arrow bytes."""

    path: str
    rows: int
    bytes: int


class StagingFile:
    """Streams one task's batches into a staged Arrow IPC file (uncompressed: it is read once)."""

    def __init__(self, store: ObjectStore, prefix: str, schema: pa.Schema) -> None:
        self.store = store
        self.schema = schema
        self.path = f"{DATA_DIR}/{staged_file_name(prefix)}"
        self.rows = 0
        self.bytes = 0
        self._sink: Any = None
        self._writer: pa.ipc.RecordBatchFileWriter | None = None

    def write(self, batch: pa.RecordBatch) -> None:
        if self._writer is None:
            self._sink = self.store.open_output(self.path)
            self._writer = pa.ipc.new_file(self._sink, self.schema)
        self._writer.write_batch(batch)
        self.rows += batch.num_rows
        self.bytes += batch.nbytes

    def _close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._sink.close()
            self._writer = self._sink = None

    def finish(self) -> StagedOutput | None:
        """The staged output (None when no row was written)."""
        self._close()
        return StagedOutput(self.path, self.rows, self.bytes) if self.rows else None

    def replay(self) -> Iterator[pa.RecordBatch]:
        """The staged batches, one at a time (the file is closed first)."""
        self._close()
        if self.rows:
            yield from read_staged(self.store, self.path, self.schema)

    def abort(self) -> None:
        try:
            self._close()
        except Exception:
            pass
        try:
            self.store.delete(self.path)
        except OSError:
            pass  # best effort: the write's prefix finds it later


def read_staged(store: ObjectStore, path: str, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """A staged file's batches, one at a time, with exactly ``schema``."""
    try:
        reader = pa.ipc.open_file(store.open_input(path))
    except pa.ArrowInvalid as exc:
        raise CorruptFileError(f"staged output is not an Arrow IPC file: {exc}", table=store.uri, path=path) from None
    for index in range(reader.num_record_batches):
        batch = reader.get_batch(index)
        if not batch.schema.equals(schema, check_metadata=True):
            batch = pa.RecordBatch.from_arrays(batch.columns, schema=schema)
        yield batch


def staged_schema(table: pa.Schema) -> pa.Schema:
    """A merge's staged file: the table's columns plus each row's :data:`STAGED_ROW_ID` (null
    for an inserted row; set for an updated row: its stable row id, or any value without them)."""
    return table.append(pa.field(STAGED_ROW_ID, pa.int64()))


def with_staged_ids(batch: pa.RecordBatch, ids: pa.Array) -> pa.RecordBatch:
    """``batch`` (the table's columns) with its rows' ids appended, as :func:`staged_schema`."""
    return pa.RecordBatch.from_arrays(batch.columns + [ids.cast(pa.int64())],
                                      schema=staged_schema(batch.schema))


def split_staged_ids(batch: pa.RecordBatch) -> tuple[pa.RecordBatch, pa.Array]:
    """A staged batch of a merge back into (the table's columns, the rows' ids)."""
    return batch.drop_columns([STAGED_ROW_ID]), batch.column(batch.num_columns - 1)


class _SplitSinks:
    """Where a merge's staged rows go at the commit: inserted rows (no id) to one sink, updated
    rows to another, whose fragments carry their stable row ids (``keep_row_ids``) in the order
    the rows are rewritten, so each row keeps its id and lineage as without coalescing."""

    def __init__(self, make: Any, keep_row_ids: bool) -> None:
        self.inserted: FragmentSink = make()
        self.updated: FragmentSink = make()
        self.keep_row_ids = keep_row_ids
        self.fragments_before = 0  # one per kind of row in each output, as its task would have written
        self._seen = (0, 0)

    def end_output(self) -> None:
        """One staged output is done: count the fragments its task would have written."""
        rows = (self.inserted.rows, self.updated.rows)
        self.fragments_before += sum(now > then for now, then in zip(rows, self._seen))
        self._seen = rows

    def write(self, batch: pa.RecordBatch) -> None:
        rows, ids = split_staged_ids(batch)
        has_id = ids.is_valid()
        if ids.null_count < len(ids):
            kept = ids.filter(has_id).to_numpy().astype(np.uint64) if self.keep_row_ids else None
            self.updated.write(rows.filter(has_id), kept)
        if ids.null_count:
            self.inserted.write(rows.filter(pc.invert(has_id)))

    def finish(self) -> list:
        return self.inserted.finish() + self.updated.finish()

    def abort(self) -> None:
        self.inserted.abort()
        self.updated.abort()


def coalesce_staged(
    store: ObjectStore,
    staged: Sequence[StagedOutput],
    schema: LanceSchema,
    storage_version: str,
    *,
    prefix: str,
    target_rows: int,
    target_bytes: int,
    split_rewritten: bool = False,
    keep_row_ids: bool = False,
) -> tuple[list[FragmentMetadata], Any]:
    """The staged outputs' rows as new fragments of about the target size (uncommitted).

    Streams every staged file in order into one sink that rolls its files at ``target_rows`` /
    ``target_bytes``: all files but the last are full. ``split_rewritten`` (a merge): the files
    hold :func:`staged_schema` and updated rows get fragments of their own (:class:`_SplitSinks`).
    Returns the fragments and the sink, whose ``abort()`` removes the new files if the commit
    does not happen (a merge's sink also counts its updated rows and the fragments the outputs
    would have made on their own).
    """
    def make() -> FragmentSink:
        return FragmentSink(store, schema, storage_version, prefix=prefix, max_rows_per_file=target_rows,
                            max_bytes_per_file=target_bytes)

    sink: Any = _SplitSinks(make, keep_row_ids) if split_rewritten else make()
    arrow = staged_schema(schema.to_arrow()) if split_rewritten else schema.to_arrow()
    try:
        for output in staged:
            for batch in read_staged(store, output.path, arrow):
                if batch.num_rows:
                    sink.write(batch)
            if split_rewritten:
                sink.end_output()
        fragments = sink.finish()
    except BaseException:
        sink.abort()
        raise
    return [fragment_from_proto(f) for f in fragments], sink


def delete_staged(store: ObjectStore, staged: Iterable[StagedOutput]) -> None:
    """Remove staged files once their rows are committed (best effort: the prefix finds orphans)."""
    paths = [s.path for s in staged]
    if paths:
        try:
            store.delete_many(paths)
        except Exception:
            pass


@dataclass(frozen=True)
class CoalescedOutputs:
    """What a commit commits: the tasks' fragments plus the coalesced small outputs."""

    fragments: list[FragmentMetadata]
    fragments_before: int  # the fragments the tasks' outputs would have made on their own
    coalesced: int  # the small outputs coalesced
    sink: Any  # the coalesced files' sink, or None (abort() removes them)
    rewritten_rows: int = 0  # a merge: the coalesced rows that are updated rows

    @property
    def properties(self) -> dict[str, str]:
        return coalescing_properties(self.fragments_before, len(self.fragments), self.coalesced)

    def abort(self) -> None:
        if self.sink is not None:
            self.sink.abort()


def coalesce_outputs(
    store: ObjectStore,
    fragments: Sequence[FragmentMetadata],
    staged: Sequence[StagedOutput],
    schema: LanceSchema,
    storage_version: str,
    *,
    prefix: str,
    target_rows: int,
    target_bytes: int,
    split_rewritten: bool = False,
    keep_row_ids: bool = False,
) -> CoalescedOutputs:
    """The tasks' ``fragments`` followed by their ``staged`` small outputs coalesced (a merge's
    with ``split_rewritten``, see :func:`coalesce_staged`)."""
    if not staged:
        return CoalescedOutputs(list(fragments), len(fragments), 0, None)
    coalesced, sink = coalesce_staged(store, staged, schema, storage_version, prefix=prefix,
                                      target_rows=target_rows, target_bytes=target_bytes,
                                      split_rewritten=split_rewritten, keep_row_ids=keep_row_ids)
    if split_rewritten:
        return CoalescedOutputs(list(fragments) + coalesced, len(fragments) + sink.fragments_before, len(staged),
                                sink, sink.updated.rows)
    return CoalescedOutputs(list(fragments) + coalesced, len(fragments) + len(staged), len(staged), sink)


def estimated_size(df: Any) -> tuple[int | None, int | None]:
    """(rows, bytes) Spark's optimizer estimates for ``df``, each None when unknown.

    Read from the optimized plan's statistics (no job runs). Spark reports an unknown size as
    ``Long.MaxValue`` (e.g. a DataFrame made from a Python list); Spark Connect exposes none.
    """
    try:
        stats = df._jdf.queryExecution().optimizedPlan().stats()
        size = int(stats.sizeInBytes())
        count = stats.rowCount()
        rows = int(str(count.get())) if count.isDefined() else None
        row_width = 8 + int(df._jdf.schema().defaultSize())  # Spark's own estimate of a row's size
    except Exception:
        return None, None
    if not 0 <= size < (1 << 63) - 1:
        return rows, None
    if rows is None:  # most operators keep only the size: Spark derives it from rows x row width
        rows = size // max(row_width, 1)
    return rows, size


def planned_tasks(df: Any, plan: WritePlan) -> int | None:
    """How many write tasks bring each task's output near the target file size, or None
    when Spark has no estimate (the DataFrame's partitions are then kept)."""
    rows, size = estimated_size(df)
    if rows is None and size is None:
        return None
    wanted = 1
    if rows is not None:
        wanted = max(wanted, -(-rows // plan.target_rows_per_file))
    if size is not None:
        wanted = max(wanted, -(-size // plan.target_bytes_per_file))
    return int(wanted)


def coalesce_to_target(df: Any, plan: WritePlan) -> Any:
    """``df`` with fewer partitions when its estimated size fills fewer files than it has
    partitions: without it, a DataFrame of 2,000 tiny partitions leaves 2,000 tiny fragments.

    ``coalesce`` merges partitions without a shuffle (a shuffle before it keeps its own
    parallelism); the rows stay on the executors. Files still roll at ``max_rows_per_file`` /
    ``max_bytes_per_file``, so an underestimate makes fewer, fuller tasks, never larger files.
    """
    wanted = planned_tasks(df, plan)
    if wanted is None:
        return df
    try:
        partitions = df.rdd.getNumPartitions()
    except Exception:
        return df
    return df.coalesce(wanted) if wanted < partitions else df


def coalescing_properties(fragments_before: int, fragments: int, coalesced: int) -> dict[str, str]:
    """The fragment counts a commit records in its transaction properties."""
    return {FRAGMENTS_BEFORE_KEY: str(int(fragments_before)), FRAGMENTS_KEY: str(int(fragments)),
            COALESCED_KEY: str(int(coalesced))}


__all__ = ["COALESCE_OPTION", "FRAGMENTS_BEFORE_KEY", "FRAGMENTS_KEY", "COALESCED_KEY", "StagedOutput",
           "StagingFile", "CoalescedOutputs", "coalesce_outputs", "coalesce_staged", "coalescing_from_options", "coalescing_properties", "delete_staged",
           "read_staged", "staging_limits", "staged_schema", "with_staged_ids", "split_staged_ids", "STAGED_ROW_ID", "estimated_size", "planned_tasks", "coalesce_to_target"]
