"""What runs inside Spark tasks: writing fragments, writing deletion vectors, reading splits,
evaluating a merge's update condition.

Every function here is called in a Python worker with a small, picklable *spec* built on the
driver (a URI, a version, a serialized schema, ...) and returns an iterator function for
``mapInArrow`` / ``applyInArrow``. The specs are frozen dataclasses of plain values, so they
are pickled by value, and the functions by reference (the package is installed on the
workers). Workers open the table themselves; data never travels through the driver, only the
small fragment descriptions the tasks emit (pylance's ``FragmentMetadata`` JSON, which the
driver commits with ``LanceOperation.Append``/``Overwrite``/``Update``, as a pylance job would).

A task that fails removes the files it wrote; files of tasks that succeeded in a job that
failed are removed by the driver (they share the write's file-name prefix).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.distributed import (
    DataFragment,
    FragmentRange,
    FragmentSink,
    LanceDataset,
    Manifest,
    ScanExecutor,
    check_batch,
    delete_rows,
    fragment_json,
    plan_scan,
    schema_from_bytes,
    schema_to_bytes,
    serial_decoding,
    to_expression,
    write_prefix,
)
from lance_format.errors import CorruptFileError, InvalidInputError
from lance_format.spark.coalesce import StagedOutput, StagingFile, split_staged_ids, staged_schema, with_staged_ids
from lance_format.spark.common import StorageOptions, task_store
from lance_format.spark.types import BatchConverter
from lance_format.spark.worker_heap import freeze_imported_objects

# one row per fragment written; a small output staged for the commit has no fragment, its path in "staged"
FRAGMENT_DDL = "fragment string, num_rows long, num_bytes long, rewritten boolean, staged string"
DELETION_DDL = "fragment_id long, fragment string, removed boolean, deleted long, offsets binary"
ROW_ID_COLUMN = "__lance_rowid"  # merge: set on rewritten rows (their stable row id, if kept)
MAX_REPORTED_OFFSETS = 1 << 20  # per fragment; beyond it the commit cannot rebase, only retry

_FRAGMENT_SCHEMA = pa.schema([
    ("fragment", pa.string()), ("num_rows", pa.int64()), ("num_bytes", pa.int64()), ("rewritten", pa.bool_()),
    ("staged", pa.string()),
])
_DELETION_SCHEMA = pa.schema([
    ("fragment_id", pa.int64()), ("fragment", pa.string()), ("removed", pa.bool_()), ("deleted", pa.int64()),
    ("offsets", pa.binary()),
])


# -- schemas on the wire -------------------------------------------------------------------------
def arrow_schema_to_bytes(schema: pa.Schema) -> bytes:
    return schema.serialize().to_pybytes()


def arrow_schema_from_bytes(data: bytes) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(data))


# -- tables opened by workers ------------------------------------------------------------------------
_OPEN: OrderedDict[tuple[str, int, StorageOptions], LanceDataset] = OrderedDict()
_MAX_OPEN = 8


def manifest_identity(m: Manifest) -> str:
    """Tells two commits with the same version number apart (a table dropped and re-created)."""
    return f"{m.transaction_file}:{m.timestamp.seconds}:{m.timestamp.nanos}"


def open_version(uri: str, version: int, identity: str | None = None,
                 storage_options: StorageOptions = ()) -> LanceDataset:
    """A version of a table, cached per worker process (Python workers are reused by Spark).

    ``identity`` (:func:`manifest_identity` on the driver) makes sure a cached version is the
    one the driver planned with, not an older table that had the same URI.
    """
    key = (uri, int(version), storage_options)
    ds = _OPEN.get(key)
    if ds is not None and identity is not None and manifest_identity(ds.manifest) != identity:
        ds = None
    if ds is None:
        ds = LanceDataset(task_store(uri, storage_options), int(version))
        if identity is not None and manifest_identity(ds.manifest) != identity:
            raise CorruptFileError(f"version {version} changed after the job was planned (the table was "
                                   "replaced)", table=uri, version=int(version))
        _OPEN[key] = ds
        while len(_OPEN) > _MAX_OPEN:
            _OPEN.popitem(last=False)
    else:
        _OPEN.move_to_end(key)
    return ds


# -- writing data -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class WriteSpec:
    """What every write task needs: where, which schema (with field ids), which file version."""

    uri: str
    write_id: str
    schema: bytes  # file_pb2.Schema of the fields the files hold
    storage_version: str
    max_rows_per_file: int
    max_bytes_per_file: int
    check_filter: str | None = None  # replace_where: every new row must satisfy it
    split_rewritten: bool = False  # merge: rows with ROW_ID_COLUMN set go to fragments of their own
    keep_row_ids: bool = False  # ... and keep that column's value as their stable row id
    # > 0: stage the task's rows (coalesce.StagingFile) until they reach this many rows or
    # bytes; a task that stays below both hands its rows to the commit instead of writing files
    stage_rows: int = 0
    stage_bytes: int = 0
    storage_options: StorageOptions = field(default=(), repr=False)  # executors re-open the table with it


def _fragment_batch(fragments: list[DataFragment], rewritten: list[bool],
                    staged: StagedOutput | None = None) -> pa.RecordBatch:
    extra = [staged] if staged is not None else []
    return pa.RecordBatch.from_arrays(
        [
            pa.array([fragment_json(f) for f in fragments] + [None for _ in extra], pa.string()),
            pa.array([f.physical_rows for f in fragments] + [s.rows for s in extra], pa.int64()),
            pa.array([sum(d.file_size_bytes for d in f.files) for f in fragments] + [s.bytes for s in extra],
                     pa.int64()),
            pa.array(rewritten + [False for _ in extra], pa.bool_()),
            pa.array([None for _ in fragments] + [s.path for s in extra], pa.string()),
        ],
        schema=_FRAGMENT_SCHEMA,
    )


class PartitionWriter:
    """Writes one Spark partition's rows as fragments: converts each batch to the table's
    Arrow types, checks nulls (and the ``replace_where`` predicate), and streams the rows into
    rolled files; a merge's rewritten rows go to fragments of their own (keeping their stable
    row ids when asked: a fragment's kept ids must cover all its rows). With ``stage_rows`` /
    ``stage_bytes`` the rows are staged until they reach either limit, and a partition that
    never does is handed to the commit as a staged output (:mod:`lance_format.spark.coalesce`)."""

    def __init__(self, spec: WriteSpec) -> None:
        freeze_imported_objects()  # the worker's full gc.collect() after the task skips them
        self.spec = spec
        schema = schema_from_bytes(spec.schema)
        self.target = schema.to_arrow()
        self._convert = BatchConverter(self.target, table=spec.uri)
        self._check = to_expression(spec.check_filter, self.target) if spec.check_filter else None
        prefix = write_prefix(spec.write_id)
        store = task_store(spec.uri, spec.storage_options)

        def sink() -> FragmentSink:
            return FragmentSink(store, schema, spec.storage_version, prefix=prefix,
                                max_rows_per_file=spec.max_rows_per_file, max_bytes_per_file=spec.max_bytes_per_file)

        self._plain = sink()
        self._kept = sink() if spec.split_rewritten else None
        self._stage: StagingFile | None = None
        self.staged: StagedOutput | None = None  # after finish(): the small output handed to the commit
        if spec.stage_rows > 0 and spec.stage_bytes > 0:
            # a merge stages its rows with their ROW_ID_COLUMN: the commit splits them the same way
            staged = staged_schema(self.target) if spec.split_rewritten else self.target
            self._stage = StagingFile(store, prefix, staged)

    def write(self, raw: pa.RecordBatch) -> None:
        if raw.num_rows == 0:
            return
        check_batch(raw, what="a Spark task's rows", table=self.spec.uri)
        batch = self._convert(raw)
        if self._check is not None:
            _check_rows(batch, self._check, self.spec)
        ids = raw.column(raw.schema.get_field_index(ROW_ID_COLUMN)) if self._kept is not None else None
        if self._stage is not None:
            if ids is not None:
                batch = with_staged_ids(batch, ids)
            self._stage.write(batch)
            if self._stage.rows >= self.spec.stage_rows or self._stage.bytes >= self.spec.stage_bytes:
                self._spill()
            return
        self._route(batch, ids)

    def _route(self, batch: pa.RecordBatch, ids: pa.Array | None) -> None:
        """Rows into the plain sink, or (a merge) rows with an id into the kept sink."""
        if self._kept is None or ids is None:
            self._plain.write(batch)
            return
        has_id = ids.is_valid()
        if ids.null_count < len(ids):
            kept_ids = ids.filter(has_id).to_numpy().astype(np.uint64) if self.spec.keep_row_ids else None
            self._kept.write(batch.filter(has_id), kept_ids)
        if ids.null_count:
            self._plain.write(batch.filter(pc.invert(has_id)))

    def _spill(self) -> None:
        """The output is no longer small: its staged rows go to data files, and so do the rest."""
        stage, self._stage = self._stage, None
        assert stage is not None  # only called while staging
        try:
            for batch in stage.replay():
                if self._kept is None:
                    self._plain.write(batch)
                else:
                    self._route(*split_staged_ids(batch))
        finally:
            stage.abort()  # the staged copy is not needed any more (or the task fails)

    def finish(self) -> tuple[list[DataFragment], list[bool]]:
        """(fragments, rewritten flags) of every file written (see :attr:`staged` too)."""
        self.staged = self._stage.finish() if self._stage is not None else None
        inserted = self._plain.finish()
        rewritten = self._kept.finish() if self._kept is not None else []
        return inserted + rewritten, [False] * len(inserted) + [True] * len(rewritten)

    def abort(self) -> None:
        self._plain.abort()
        if self._kept is not None:
            self._kept.abort()
        if self._stage is not None:
            self._stage.abort()


def write_task(spec: WriteSpec, names: tuple[str, ...] | None = None
               ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``mapInArrow`` function: write the partition's rows as new fragments, emit their metadata.

    ``names``: the columns' real names when the DataFrame carries them under stand-ins (PySpark's
    classic ``mapInArrow`` cannot resolve a column named like ``a.b``).
    """

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        writer = PartitionWriter(spec)
        try:
            for batch in batches:
                if names is not None:
                    batch = pa.RecordBatch.from_arrays(batch.columns, names=list(names))
                writer.write(batch)
            fragments, rewritten = writer.finish()
        except BaseException:
            writer.abort()
            raise
        if fragments or writer.staged is not None:
            try:
                yield _fragment_batch(fragments, rewritten, writer.staged)
            except BaseException:
                writer.abort()  # Spark could not take the result (task cancelled): nobody commits it
                raise

    return run


@dataclass(frozen=True)
class PartitionOutput:
    """What one task of ``df.write.format("lance")`` or of the streaming sink wrote."""

    fragments: list[str]  # pylance's FragmentMetadata JSON of each data file
    staged: StagedOutput | None  # its rows, staged for the commit to coalesce (a small output)


def write_partition(spec: WriteSpec, batches: Iterator[pa.RecordBatch]) -> PartitionOutput:
    """Write one partition (a data-source writer task); see :class:`PartitionWriter`."""
    writer = PartitionWriter(spec)
    try:
        for batch in batches:
            writer.write(batch)
        fragments, _ = writer.finish()
    except BaseException:
        writer.abort()
        raise
    return PartitionOutput([fragment_json(f) for f in fragments], writer.staged)


def _check_rows(batch: pa.RecordBatch, check: pc.Expression, spec: WriteSpec) -> None:
    matches = pa.Table.from_batches([batch]).filter(check).num_rows
    if matches != batch.num_rows:
        raise InvalidInputError(
            f"{batch.num_rows - matches} new row(s) do not satisfy the replace_where predicate "
            f"{spec.check_filter!r}; a later replace of that predicate would not find them",
            table=spec.uri,
        )


# -- merge update conditions ------------------------------------------------------------------------
@dataclass(frozen=True)
class ConditionSpec:
    """A merge's update condition (SQL over ``source.``/``target.`` columns) and the table
    types of the columns it reads on each side, in the order the UDF receives them."""

    uri: str
    version: int
    condition: str
    source: bytes  # Arrow schema (the table's types) of the source columns the condition reads
    target: bytes  # ... of the target columns it reads


def condition_pair_schema(source: pa.Schema, target: pa.Schema) -> pa.Schema:
    """The schema a condition is evaluated over: one struct per side, like ``merge_insert``."""
    return pa.schema([pa.field("target", pa.struct(list(target))), pa.field("source", pa.struct(list(source)))])


def _side(arrays: list, schema: pa.Schema, rows: np.ndarray, convert) -> pa.StructArray:
    if not len(schema):  # the condition reads nothing of this side: a valid, field-less struct
        return pa.StructArray.from_buffers(pa.struct([]), int(rows.size), [None])
    taken = pa.array(rows)
    batch = convert(pa.RecordBatch.from_arrays([a.take(taken) for a in arrays], names=schema.names))
    return pa.StructArray.from_arrays(list(batch.columns), names=schema.names)


class ConditionEvaluator:
    """Evaluates ``spec``'s condition over (matched flag, the source columns, the target
    columns): TRUE where a matched row's condition holds, FALSE elsewhere.

    The condition goes through the engine's SQL translation and ``Table.filter``, exactly as
    in ``merge_insert``, on the table's Arrow types (the Spark values are cast back first), so
    SQL's three-valued logic applies: a NULL condition does not update. Unmatched rows are
    never evaluated (their target side is all null, and an error there would be spurious).
    """

    def __init__(self, spec: ConditionSpec) -> None:
        self.spec = spec
        self.source = arrow_schema_from_bytes(spec.source)
        self.target = arrow_schema_from_bytes(spec.target)
        self.expr = to_expression(spec.condition, condition_pair_schema(self.source, self.target))
        self._to_source = BatchConverter(self.source, table=spec.uri, check_nulls=False)
        self._to_target = BatchConverter(self.target, table=spec.uri, check_nulls=False)

    def __call__(self, columns: list) -> pa.Array:
        matched = columns[0].fill_null(False).to_numpy(zero_copy_only=False)
        result = np.zeros(matched.size, dtype=bool)
        rows = np.flatnonzero(matched)
        if rows.size:
            n_source = len(self.source)
            pair = pa.table({
                "target": _side(list(columns[1 + n_source:]), self.target, rows, self._to_target),
                "source": _side(list(columns[1:1 + n_source]), self.source, rows, self._to_source),
                "__i": pa.array(np.arange(rows.size)),
            })
            try:
                chosen = pair.filter(self.expr).column("__i").to_numpy()
            except (pa.ArrowException, TypeError, ValueError) as err:
                raise InvalidInputError(
                    f"when_matched_update_condition {self.spec.condition!r} failed to evaluate: {err}",
                    table=self.spec.uri, version=self.spec.version,
                ) from None
            result[rows[chosen]] = True
        return pa.array(result, pa.bool_())


def condition_udf(spec: ConditionSpec) -> Callable[[Iterator[tuple[pa.Array, ...]]], Iterator[pa.Array]]:
    """An iterator Arrow UDF over the :class:`ConditionEvaluator` columns (classic sessions:
    only those columns travel to Python)."""

    def run(batches: Iterator[tuple[pa.Array, ...]]) -> Iterator[pa.Array]:
        evaluate = ConditionEvaluator(spec)
        for columns in batches:
            if isinstance(columns, (pa.Array, pa.ChunkedArray)):
                columns = (columns,)
            yield evaluate(list(columns))

    return run


def condition_task(spec: ConditionSpec, names: list[str], output: str) -> Callable:
    """``mapInArrow`` twin of :func:`condition_udf` for Spark Connect DataFrames (pyspark builds
    Connect Arrow UDFs only in a process running in Connect mode): every batch comes back with
    the result appended as ``output``; ``names`` are the evaluator's columns, matched flag first."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        evaluate = ConditionEvaluator(spec)
        for batch in batches:
            flags = evaluate([batch.column(n) for n in names])
            yield batch.append_column(pa.field(output, pa.bool_()), flags)

    return run


# -- deletion vectors -------------------------------------------------------------------------------
@dataclass(frozen=True)
class DeleteSpec:
    uri: str
    version: int
    write_id: str
    predicate: str | None = None  # replace_where: delete what matches; merge: the given addresses
    identity: str | None = None  # manifest_identity of the version
    storage_options: StorageOptions = field(default=(), repr=False)  # may hold credentials


def _deletion_row(fragment_id: int, updated: DataFragment | None, added: int,
                  offsets: np.ndarray) -> pa.RecordBatch:
    reported = offsets.astype(np.uint32).tobytes() if offsets.size <= MAX_REPORTED_OFFSETS else None
    return pa.RecordBatch.from_arrays(
        [
            pa.array([fragment_id], pa.int64()),
            pa.array([fragment_json(updated) if updated is not None else None], pa.string()),
            pa.array([updated is None], pa.bool_()),
            pa.array([added], pa.int64()),
            pa.array([reported], pa.binary()),
        ],
        schema=_DELETION_SCHEMA,
    )


def _apply_deletions(spec: DeleteSpec, fragment_id: int, offsets: np.ndarray) -> pa.RecordBatch | None:
    ds = open_version(spec.uri, spec.version, spec.identity, spec.storage_options)
    fragment = ds.get_fragment(fragment_id)
    if fragment is None:
        raise CorruptFileError(f"fragment {fragment_id} is not in version {spec.version}", table=spec.uri,
                               version=spec.version)
    offsets = np.unique(offsets.astype(np.int64))
    updated, added = delete_rows(ds.object_store, fragment.proto, offsets, read_version=spec.version,
                                 write_id=spec.write_id,
                                 deletion_store=ds.base_stores.deletion_store(fragment.proto.deletion_file))
    if added == 0:
        return None
    return _deletion_row(fragment_id, updated, added, offsets)


def delete_matching_task(spec: DeleteSpec, groups: list[list[int]]) -> Callable:
    """``mapInArrow`` over ``spark.range(len(groups))``: for each fragment id of the task's group,
    delete the live rows matching ``spec.predicate`` (replace_where)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                for fragment_id in groups[index]:
                    ds = open_version(spec.uri, spec.version, spec.identity, spec.storage_options)
                    fragment = ds.get_fragment(fragment_id)
                    pieces = [
                        b.column(0).to_numpy(zero_copy_only=False)
                        for b in ds.scanner(columns=[], filter=spec.predicate, with_row_address=True,
                                            # the fragment ids come from this version
                                            fragments=[fragment]).to_batches()  # type: ignore[list-item]
                    ]
                    if not pieces:
                        continue
                    offsets = (np.concatenate(pieces).astype(np.uint64) & np.uint64(0xFFFFFFFF)).astype(np.int64)
                    row = _apply_deletions(spec, fragment_id, offsets)
                    if row is not None:
                        yield row

    return run


def delete_addresses_task(spec: DeleteSpec) -> Callable[[pa.Table], pa.Table]:
    """``applyInArrow`` per fragment group: delete the rows at the group's ``_rowaddr`` values."""

    def run(table: pa.Table) -> pa.Table:
        if table.num_rows == 0:
            return _DELETION_SCHEMA.empty_table()
        addresses = table.column("_rowaddr").to_numpy().astype(np.uint64)
        fragment_id = int(addresses[0] >> np.uint64(32))
        if np.any((addresses >> np.uint64(32)) != np.uint64(fragment_id)):
            raise InvalidInputError("a deletion group spans several fragments", table=spec.uri)
        offsets = (addresses & np.uint64(0xFFFFFFFF)).astype(np.int64)
        row = _apply_deletions(spec, fragment_id, offsets)
        return pa.Table.from_batches([row]) if row is not None else _DELETION_SCHEMA.empty_table()

    return run


# -- reading ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ScanSpec:
    """A pinned read: version, columns (data then system), filter, Spark's Arrow schema."""

    uri: str
    version: int
    columns: tuple[str, ...]
    filter: str | None
    target: bytes  # the Arrow schema Spark expects (serialized)
    batch_size: int = 65536
    identity: str | None = None  # manifest_identity of the version
    storage_options: StorageOptions = field(default=(), repr=False)  # may hold credentials


Split = tuple[tuple[int, int, int], ...]  # (fragment id, first physical row, end physical row)


def task_cpus() -> int | None:
    """The cores Spark gave the running task (``spark.task.cpus``), None outside a Spark task."""
    try:
        from pyspark import TaskContext

        context = TaskContext.get()
        return None if context is None else int(context.cpus())
    except Exception:
        return None


def _decoded_serially(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``batches``, each decoded on the calling thread only (the context is set around each
    step, never across a ``yield``: the consumer's own decoding stays as it was)."""

    while True:
        with serial_decoding():
            batch = next(batches, None)
        if batch is None:
            return
        yield batch


def read_split(spec: ScanSpec, split: Split) -> Iterator[pa.RecordBatch]:
    """The live rows of one split, filtered and projected, in Spark's Arrow types (a filter
    is late-materialized: see :mod:`lance_format.dataset.scan.executor`).

    In a Spark task given one core (``spark.task.cpus=1``, the default) the columns are
    decoded one after another, not on the decode pool: Spark already runs a task per core, and
    pool threads on top of them only add CPU (a 1M-row realistic split decoded with the pool
    took ~5% more CPU than on one thread; Spark scans were no faster with it).
    """
    if task_cpus() == 1:
        yield from _decoded_serially(_read_split(spec, split))
    else:
        yield from _read_split(spec, split)


def _read_split(spec: ScanSpec, split: Split) -> Iterator[pa.RecordBatch]:
    freeze_imported_objects()  # the worker's full gc.collect() after the task skips them
    ds = open_version(spec.uri, spec.version, spec.identity, spec.storage_options)
    ranges = []
    for fragment_id, begin, end in split:
        fragment = ds.get_fragment(fragment_id)
        if fragment is None:
            raise CorruptFileError(f"fragment {fragment_id} is not in version {spec.version}", table=spec.uri,
                                   version=spec.version)
        ranges.append(FragmentRange(fragment, (begin, end)))
    # the engine's scan plan over the split's row ranges; the task decodes one batch at a time
    # (batch_readahead=0), and the batches are converted to Spark's types, not projected
    plan = plan_scan(ds, columns=list(spec.columns), filter=spec.filter or None, batch_size=spec.batch_size,
                     fragments=ranges, options={"batch_readahead": 0})
    convert = BatchConverter(arrow_schema_from_bytes(spec.target), table=spec.uri, check_nulls=False)
    for batch in ScanExecutor(ds, plan).rows():
        yield convert(batch)


def read_task(spec: ScanSpec, splits: list[Split]) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``mapInArrow`` over ``spark.range(len(splits))``: each task reads the splits of its ids."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                yield from read_split(spec, splits[index])

    return run


__all__ = [
    "FRAGMENT_DDL", "DELETION_DDL", "ROW_ID_COLUMN", "WriteSpec", "DeleteSpec", "ScanSpec", "Split",
    "schema_to_bytes", "schema_from_bytes", "arrow_schema_to_bytes", "arrow_schema_from_bytes", "open_version",
    "manifest_identity", "ConditionSpec", "ConditionEvaluator", "condition_pair_schema", "condition_udf",
    "condition_task",
    "PartitionWriter", "PartitionOutput", "write_partition", "write_task", "delete_matching_task", "delete_addresses_task", "read_split", "read_task", "task_cpus",
]
