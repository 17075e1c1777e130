"""Shared machinery of the mutations (delete, update, merge_insert, replace_where, schema and
metadata changes, compaction).

A mutation is *prepared* against one version (scan, write new data and deletion files, build
the transaction) and then committed. If the commit reports a retryable conflict (a concurrent
writer changed the same fragments in a way that cannot be rebased), the files of the attempt
are removed and the mutation is prepared again against the latest version, like pylance's
``execute_with_retry``; incompatible conflicts and all other errors surface immediately.
Whatever fails, nothing written by a failed attempt stays referenced.
"""

from __future__ import annotations

import contextlib
import contextvars
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from lance_format.dataset.sql.filter import to_expression
from lance_format.dataset.writing.fragment_sink import (
    DEFAULT_MAX_BYTES_PER_FILE,
    DEFAULT_MAX_ROWS_PER_FILE,
    WriteTarget,
    resolve_storage_version,
    write_fragment_files,
)
from lance_format.errors import (
    CommitConflictError,
    DatasetNotFoundError,
    InvalidInputError,
    LanceError,
    RetryableCommitConflictError,
)
from lance_format.proto import table_pb2, transaction_pb2
from lance_format.table.commit import CommittedVersion, commit_landed, commit_transaction
from lance_format.table.deletion import deletion_file_path, write_deletion_file
from lance_format.table.naming import list_versions
from lance_format.table.rowids import encode_row_ids
from lance_format.table.transaction import BuildOptions, new_transaction

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset

DEFAULT_CONFLICT_RETRIES = 10
DEFAULT_RETRY_TIMEOUT = timedelta(seconds=30)
_LOW32 = np.uint64(0xFFFFFFFF)


@dataclass
class Prepared:
    """A mutation ready to commit: its transaction, the rows it removes and its files."""

    txn: transaction_pb2.Transaction
    result: Any
    affected_rows: dict[int, np.ndarray] | None = None
    written: list[str] = field(default_factory=list)
    aborts: list[Callable[[], None]] = field(default_factory=list)
    storage_version: str | None = None

    def __post_init__(self) -> None:
        # Register with the running attempt so its files are removed if preparing fails midway.
        attempt = _ATTEMPT.get()
        if attempt is not None:
            attempt.append(self)

    def discard(self, store) -> None:
        for abort in self.aborts:
            try:
                abort()
            except Exception:  # best effort: the files are unreferenced either way
                pass
        for path in self.written:
            try:
                store.delete(path)
            except OSError:
                pass


_ATTEMPT: contextvars.ContextVar[list | None] = contextvars.ContextVar("lance_format_attempt", default=None)


@contextlib.contextmanager
def table_context(ds: LanceDataset) -> Iterator[None]:
    """Name the table and version in any engine error raised inside (and clean up attempts)."""
    try:
        yield
    except LanceError as exc:
        raise exc.with_context(table=ds.uri, version=ds.version)


def _prepare(prepare, current: LanceDataset) -> Prepared:
    attempt: list[Prepared] = []
    token = _ATTEMPT.set(attempt)
    try:
        return prepare(current)
    except BaseException:
        for prepared in attempt:
            prepared.discard(current.object_store)
        raise
    finally:
        _ATTEMPT.reset(token)


def transaction_for(ds: LanceDataset, properties: Mapping[str, str] | None, commit_message: str | None):
    return new_transaction(ds.version, properties=properties, commit_message=commit_message)


def run_mutation(
    ds: LanceDataset,
    prepare: Callable[[LanceDataset], Prepared],
    *,
    conflict_retries: int = DEFAULT_CONFLICT_RETRIES,
    retry_timeout: timedelta = DEFAULT_RETRY_TIMEOUT,
) -> Any:
    """Prepare and commit, redoing the work on retryable conflicts; ``ds`` moves to the new version."""
    if conflict_retries < 0:
        raise InvalidInputError("conflict_retries must be >= 0", table=ds.uri)
    start = time.monotonic()
    current = ds
    attempt = 0
    while True:
        if list_versions(ds.object_store).latest is None:
            raise DatasetNotFoundError("the table no longer exists (no manifests in _versions/)", table=ds.uri)
        with table_context(current):
            prepared = _prepare(prepare, current)
        try:
            committed = commit_prepared(current, prepared)
        except RetryableCommitConflictError as exc:
            prepared.discard(current.object_store)
            attempt += 1
            if attempt > conflict_retries or time.monotonic() - start > retry_timeout.total_seconds():
                raise CommitConflictError(
                    f"too much write contention: gave up after {attempt} attempt(s): {exc.reason}",
                    table=ds.uri, version=exc.version, path=exc.path,
                ) from exc
            time.sleep(min(0.2, 0.01 * 2**attempt) * (0.5 + random.random()))
            current = ds.open_latest()
            continue
        except BaseException as error:
            if not commit_landed(error):
                prepared.discard(current.object_store)
            raise
        ds._replace_version(committed.version)
        return prepared.result


def commit_prepared(ds: LanceDataset, prepared: Prepared) -> CommittedVersion:
    options = BuildOptions(data_storage_version=prepared.storage_version)
    return commit_transaction(
        ds.object_store, prepared.txn, options=options,
        affected_rows=prepared.affected_rows, read_manifest_file=ds.manifest_file,
    )


# -- rows and deletions ----------------------------------------------------------------------
def split_addresses(addresses: np.ndarray) -> dict[int, np.ndarray]:
    """Row addresses -> {fragment id: sorted physical offsets (uint32)}."""
    addresses = np.asarray(addresses, dtype=np.uint64)
    if addresses.size == 0:
        return {}
    addresses = np.sort(addresses)
    fragment_ids = (addresses >> np.uint64(32)).astype(np.int64)
    offsets = (addresses & _LOW32).astype(np.uint32)
    bounds = np.flatnonzero(np.diff(fragment_ids)) + 1
    starts = np.concatenate([[0], bounds])
    ends = np.concatenate([bounds, [addresses.size]])
    return {int(fragment_ids[s]): offsets[s:e] for s, e in zip(starts.tolist(), ends.tolist())}


def apply_deletions(
    ds: LanceDataset, offsets: Mapping[int, np.ndarray], prepared: Prepared
) -> tuple[list[table_pb2.DataFragment], list[int]]:
    """New deletion files (union of old and new) for the fragments that lose rows.

    Returns (updated fragments, ids of fragments whose rows are now all deleted).
    """
    updated: list[table_pb2.DataFragment] = []
    removed: list[int] = []
    for fragment in ds.get_fragments():
        new = offsets.get(fragment.fragment_id)
        if new is None or len(new) == 0:
            continue
        union = np.union1d(fragment.deleted_offsets, new)
        if union.size >= fragment.physical_rows:
            removed.append(fragment.fragment_id)
            continue
        pb = write_deletion_file(ds.object_store, fragment.fragment_id, ds.version, union)
        prepared.written.append(deletion_file_path(fragment.fragment_id, pb))
        copy = table_pb2.DataFragment()
        copy.CopyFrom(fragment.proto)
        copy.deletion_file.CopyFrom(pb)
        updated.append(copy)
    return updated, removed


def concat(arrays: list[np.ndarray], dtype=np.uint64) -> np.ndarray:
    return np.concatenate(arrays).astype(dtype, copy=False) if arrays else np.zeros(0, dtype=dtype)


# -- predicates ------------------------------------------------------------------------------
def matching_offsets(ds: LanceDataset, predicate: str | pc.Expression) -> dict[int, np.ndarray]:
    """Physical offsets (per fragment id) of the live rows of ``ds`` that satisfy ``predicate``."""
    result: dict[int, np.ndarray] = {}
    for fragment in ds.get_fragments():
        pieces = [
            batch.column(0).to_numpy(zero_copy_only=False)
            for batch in ds.scanner(columns=[], filter=predicate, with_row_address=True,
                                    fragments=[fragment]).to_batches()
        ]
        if pieces:
            addresses = np.concatenate(pieces).astype(np.uint64, copy=False)
            result[fragment.fragment_id] = (addresses & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    return result


def checked_reader(reader: pa.RecordBatchReader, predicate: str | pc.Expression, *, table: str) -> pa.RecordBatchReader:
    """Stream ``reader`` through, refusing the first batch with a row outside ``predicate``."""
    expression = to_expression(predicate, reader.schema)

    def batches() -> Iterator[pa.RecordBatch]:
        seen = 0
        for batch in reader:
            if batch.num_rows:
                ok = pa.Table.from_batches([batch]).filter(expression).num_rows
                if ok != batch.num_rows:
                    raise InvalidInputError(
                        f"{batch.num_rows - ok} new row(s) (after {seen} valid ones) do not satisfy the "
                        f"replace predicate {predicate!s}; they would land outside the replaced range",
                        table=table,
                    )
                seen += batch.num_rows
            yield batch

    return pa.RecordBatchReader.from_batches(reader.schema, batches())


# -- expressions -----------------------------------------------------------------------------
def evaluate(table: pa.Table | pa.RecordBatch, expr: pc.Expression | pa.Scalar) -> pa.Array:
    """Value of a scalar expression for every row of ``table``."""
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if isinstance(expr, pa.Scalar):
        return pa.repeat(expr, table.num_rows)
    result = pads.dataset(table).to_table(columns={"v": expr}).column("v")
    return result.combine_chunks() if result.num_chunks != 1 else result.chunk(0)


def cast_to(array: pa.Array, target: pa.DataType, *, column: str, table: str) -> pa.Array:
    """Safe cast of computed values to a column's type (pylance refuses lossy casts)."""
    if array.type.equals(target):
        return array
    try:
        return pc.cast(array, target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise InvalidInputError(f"cannot cast the values for column {column!r} to {target}: {exc}",
                                table=table, column=column) from None


# -- new data --------------------------------------------------------------------------------
def storage_version_of(ds: LanceDataset) -> str:
    return resolve_storage_version(None, ds.data_storage_version, table=ds.uri)


def write_new_fragments(
    ds: LanceDataset, schema: pa.Schema, batches: Iterable[pa.RecordBatch], prepared: Prepared,
    lance_schema=None, max_rows_per_file: int | None = None, max_bytes_per_file: int | None = None,
    targets: Sequence[WriteTarget] | None = None,
) -> list[table_pb2.DataFragment]:
    """Write ``batches`` (the table's columns) as new uncommitted fragments via the write path."""
    reader = pa.RecordBatchReader.from_batches(schema, iter(batches))
    fragments, writer = write_fragment_files(
        reader, ds.object_store, lance_schema or ds.lance_schema, prepared.storage_version or storage_version_of(ds),
        max_rows_per_file=max_rows_per_file or DEFAULT_MAX_ROWS_PER_FILE,
        max_bytes_per_file=max_bytes_per_file or DEFAULT_MAX_BYTES_PER_FILE, targets=targets,
    )
    prepared.aborts.append(writer.abort)
    return fragments


def attach_row_ids(fragments: list[table_pb2.DataFragment], row_ids: np.ndarray) -> None:
    """Preserved row ids for the first ``len(row_ids)`` rows of the new fragments (in order).

    A fragment holding the boundary carries a partial sequence and later ones an empty one;
    the commit appends fresh ids for the rest (that is how pylance's merge-insert inserts rows,
    and its transactions show those partial and empty sequences).
    """
    position = 0
    for fragment in fragments:
        take = row_ids[position : position + fragment.physical_rows]
        fragment.inline_row_ids = encode_row_ids(take)
        position += take.size


def batches_of(table: pa.Table, size: int = 65536) -> Iterator[pa.RecordBatch]:
    for batch in table.to_batches(max_chunksize=size):
        if batch.num_rows:
            yield batch


def field_ids_of(ds: LanceDataset, names: Iterable[str]) -> list[int]:
    """Pre-order field ids of the given top-level columns (the column and its children)."""
    ids: list[int] = []
    for name in names:
        ids.extend(f.id for f in ds.lance_schema.field(name).walk())
    return ids
