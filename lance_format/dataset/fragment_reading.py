"""How a fragment's rows are read: its data files planned per column, read in physical row
ranges (as tasks the decode threads may run side by side), with deleted rows dropped and the
system columns (``_rowid``, ``_rowaddr``, row versions) attached.

:class:`FragmentReading` is the reading half of :class:`~lance_format.dataset.fragment.LanceFragment`;
the fragment supplies the manifest entry (``proto``), its dataset and the error context.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.dataset.overlays import overlaid, overlay_layers
from lance_format.dataset.partial_fields import fill_missing_children, narrowed_type
from lance_format.encodings.array_v2_0.packed_struct import is_packed_struct_leaf
from lance_format.encodings.structural.decode_column import leaf_plans
from lance_format.errors import CorruptFileError, LanceError, UnsupportedFeatureError
from lance_format.file.legacy_v0_1 import LegacyFileReader, is_legacy_version
from lance_format.file.reader import ColumnPlan, DataFileReader
from lance_format.file.utf8 import first_invalid_utf8, has_utf8
from lance_format.io import ObjectStore
from lance_format.io.decode_pool import map_ordered
from lance_format.proto import table_pb2
from lance_format.schema import LanceField, LanceSchema
from lance_format.schema.blob import (
    BLOB_V2_DESCRIPTION,
    blob_read_field,
    null_children_of_null_blobs,
    read_arrow_field,
    read_arrow_schema,
)
from lance_format.table.deletion import read_deletion_file
from lance_format.table.row_versions import read_created_at, read_last_updated_at
from lance_format.table.rowids import read_row_ids

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset

ROW_ID = "_rowid"
ROW_ADDRESS = "_rowaddr"
ROW_CREATED_AT = "_row_created_at_version"
ROW_LAST_UPDATED_AT = "_row_last_updated_at_version"
SYSTEM_COLUMNS = (ROW_ID, ROW_ADDRESS, ROW_CREATED_AT, ROW_LAST_UPDATED_AT)

# Footer-independent (major, minor) versions recorded in DataFile for each supported format.
_SUPPORTED_FILE_VERSIONS = {(2, 0), (2, 1), (2, 2)}
_V2_VERSION = re.compile(r"2\.\d+")
# A 2.0 file's footer says 0.3 (its pre-release name) while the manifest says 2.0.
_FOOTER_VERSION_NAMES = {(0, 3): (2, 0)}

_NO_OFFSETS = np.empty(0, dtype=np.uint64)  # batches that carry no system column need no offsets



@dataclass(frozen=True)
class _FilePlan:
    reader_path: str
    size: int | None
    plans: list[ColumnPlan]
    names: list[str]
    declared_version: tuple[int, int] | None = None  # (major, minor) the manifest records
    legacy_field_ids: tuple[int, int] | None = None  # legacy 0.1 files: the page table's field ids
    full_types: tuple[pa.DataType | None, ...] = ()  # per plan: the schema's type when the file lacks nested fields, else None
    store: ObjectStore | None = None  # the base holding the file (None: the table's own root)



class FragmentReading:
    """The reading half of ``LanceFragment`` (see the module docstring)."""

    proto: table_pb2.DataFragment
    _dataset: LanceDataset

    if TYPE_CHECKING:
        @property
        def fragment_id(self) -> int: ...

        @property
        def physical_rows(self) -> int: ...

        @property
        def object_store(self) -> ObjectStore: ...

        def error_context(self) -> dict[str, Any]: ...


    # -- deletions and lineage ---------------------------------------------------------------
    @cached_property
    def deleted_offsets(self) -> np.ndarray:
        if not self.proto.HasField("deletion_file"):
            return np.empty(0, dtype=np.uint32)
        store = self._dataset.base_stores.deletion_store(self.proto.deletion_file)
        offsets = read_deletion_file(store, self.fragment_id, self.proto.deletion_file)
        if len(offsets) and int(offsets.max()) >= self.physical_rows:
            raise CorruptFileError(
                f"deletion file of fragment {self.fragment_id} deletes offset {int(offsets.max())}, "
                f"beyond its {self.physical_rows} rows",
                **self.error_context(),
            )
        return offsets

    @cached_property
    def _keep_mask(self) -> np.ndarray | None:
        deleted = self.deleted_offsets
        if len(deleted) == 0:
            return None
        mask = np.ones(self.physical_rows, dtype=bool)
        mask[deleted] = False
        return mask

    @cached_property
    def _row_ids(self) -> np.ndarray | None:
        ids = read_row_ids(self.object_store, self.proto)
        if ids is None and self._dataset.has_stable_row_ids:
            # Without its sequence a fragment's row ids are unknown; addresses would be wrong ids.
            raise CorruptFileError(
                f"fragment {self.fragment_id} of a table with stable row ids has no row id sequence",
                **self.error_context(),
            )
        if ids is not None and len(ids) != self.physical_rows:
            raise CorruptFileError(
                f"fragment {self.fragment_id} has {len(ids)} row ids for {self.physical_rows} rows",
                **self.error_context(),
            )
        return ids

    @cached_property
    def _created_at(self) -> np.ndarray | None:
        return read_created_at(self.object_store, self.proto, self.physical_rows)

    @cached_property
    def _last_updated_at(self) -> np.ndarray | None:
        return read_last_updated_at(self.object_store, self.proto, self.physical_rows)

    def system_column(self, name: str, offsets: np.ndarray) -> pa.Array:
        """A system column for the given physical offsets (already filtered for deletions)."""
        offsets = offsets.astype(np.uint64, copy=False)
        if name == ROW_ADDRESS:
            return pa.array((np.uint64(self.fragment_id) << np.uint64(32)) | offsets, pa.uint64())
        if name == ROW_ID:
            ids = self._row_ids
            if ids is None:
                return self.system_column(ROW_ADDRESS, offsets)
            return pa.array(ids[offsets.astype(np.int64)], pa.uint64())
        sequence = self._created_at if name == ROW_CREATED_AT else self._last_updated_at
        if sequence is None:
            # Official Lance reports version 1 when a fragment carries no version metadata.
            return pa.array(np.ones(len(offsets), dtype=np.uint64), pa.uint64())
        return pa.array(sequence[offsets.astype(np.int64)], pa.uint64())

    # -- data --------------------------------------------------------------------------------
    def _file_plans(self, fields: list[LanceField]) -> list[_FilePlan]:
        remaining = {f.id: f for f in fields}
        result: list[_FilePlan] = []
        for data_file in self.proto.files:
            version = (data_file.file_major_version, data_file.file_minor_version)
            version = (2, 0) if version == (0, 3) else version  # 0.3: the pre-release name of 2.0
            legacy = is_legacy_version(*version)
            positions = {fid: col for fid, col in zip(data_file.fields, data_file.column_indices)}
            if legacy:
                positions = {fid: fid for fid in data_file.fields}  # legacy pages are found by field id
            elif len(data_file.column_indices) != len(data_file.fields):
                raise CorruptFileError(
                    "data file lists a different number of fields and column indices",
                    path=data_file.path,
                    **self.error_context(),
                )
            self._check_file_layout(data_file, version)
            structural = version >= (2, 1)
            owned = [f for f in fields if f.id in remaining and _stored_in(f, positions, structural)]
            if not owned:
                continue
            if version not in _SUPPORTED_FILE_VERSIONS and not legacy:
                raise UnsupportedFeatureError(
                    f"data file version {version[0]}.{version[1]} is not supported (supported: 2.0, 2.1, 2.2)",
                    path=data_file.path,
                    **self.error_context(),
                )
            plans = [self._column_plan(f, positions, data_file.path, structural) for f in owned]
            for f in owned:
                del remaining[f.id]
            store, reader_path = self._dataset.base_stores.data_file(data_file)
            result.append(
                _FilePlan(
                    reader_path,
                    data_file.file_size_bytes or None,
                    plans,
                    [f.name for f in owned],
                    declared_version=version,
                    legacy_field_ids=(data_file.fields[0], max(data_file.fields)) if legacy else None,
                    full_types=tuple(None if _fully_stored(f, positions, structural) else f.to_arrow().type
                                     for f in owned),
                    store=store,
                )
            )
        if remaining:
            # Fields with no data file (e.g. added without backfill) read as nulls.
            result.append(_FilePlan("", None, [], [f.name for f in remaining.values()]))
        return result

    def _check_file_layout(self, data_file: Any, version: tuple[int, int]) -> None:
        """Refuse manifests whose data-file entries would make us decode the wrong bytes."""
        columns = [c for c in data_file.column_indices if c >= 0]  # -1: a parent without a column
        if len(set(columns)) != len(columns):
            repeated = sorted({c for c in columns if columns.count(c) > 1})
            raise CorruptFileError(
                f"data file maps several fields to the same column(s) {repeated}",
                path=data_file.path, **self.error_context(),
            )
        table_version = self._dataset.data_storage_version
        if version[0] >= 2 and _V2_VERSION.fullmatch(table_version) and table_version != f"{version[0]}.{version[1]}":
            raise CorruptFileError(
                f"data file declares file version {version[0]}.{version[1]} in a table of file version "
                f"{table_version}",
                path=data_file.path, **self.error_context(),
            )

    def _column_plan(self, field: LanceField, positions: dict[int, int], path: str,
                     structural: bool = False) -> ColumnPlan:
        if structural:
            # 2.1+: only leaves have columns (DataFile.fields lists leaf ids; a fixed-size list
            # of primitives or a packed struct is one leaf); parents get column -1
            if field.id in positions:
                # a blob column reads as its descriptions, like official Lance
                return ColumnPlan(read_arrow_field(field), positions[field.id], [])
            if field.children:
                return self._parent_plan(field, -1, positions, path, True)
        if field.id not in positions:
            raise CorruptFileError(
                f"data file has no column for field {field.name!r} (id {field.id})",
                path=path,
                column=field.name,
                **self.error_context(),
            )
        if blob_read_field(field) is not None:  # 2.0 blob: its descriptions, one packed struct column
            return ColumnPlan(read_arrow_field(field), positions[field.id], [])
        if is_packed_struct_leaf(field, positions):  # 2.0 packed struct: one column, children have none
            return ColumnPlan(field.to_arrow(), positions[field.id], [])
        return self._parent_plan(field, positions[field.id], positions, path, False)

    def _parent_plan(self, field: LanceField, column: int, positions: dict[int, int], path: str,
                     structural: bool) -> ColumnPlan:
        children = field.children
        if pa.types.is_struct(field.data_type):
            # struct children the file lacks read as nulls (see partial_fields)
            children = [c for c in children if _stored_in(c, positions, structural)]
        plans = [self._column_plan(c, positions, path, structural) for c in children]
        arrow = field.to_arrow()
        if not _fully_stored(field, positions, structural):
            arrow = pa.field(arrow.name, narrowed_type(arrow.type, [p.field for p in plans]), arrow.nullable,
                             arrow.metadata)
        return ColumnPlan(arrow, column, plans)

    def _reader(self, plan: _FilePlan) -> DataFileReader | LegacyFileReader:
        readers: dict[str, DataFileReader | LegacyFileReader] = self.__dict__.setdefault("_readers", {})
        reader = readers.get(plan.reader_path)
        if reader is None:
            if plan.legacy_field_ids is not None:
                reader = LegacyFileReader(plan.store or self.object_store, plan.reader_path, field_ids=plan.legacy_field_ids,
                                          size=plan.size, dictionaries=self._dataset.legacy_dictionaries)
            else:
                v2_reader = reader = DataFileReader(plan.store or self.object_store, plan.reader_path, size=plan.size,
                                                     session=getattr(self._dataset, "_session", None))
                found = _FOOTER_VERSION_NAMES.get(v2_reader.version, v2_reader.version)
                if (plan.declared_version is not None and plan.declared_version[0] >= 2
                        and found != plan.declared_version):
                    raise CorruptFileError(
                        f"data file is file version {found[0]}.{found[1]} but the manifest "
                        f"records {plan.declared_version[0]}.{plan.declared_version[1]}",
                        path=plan.reader_path, **self.error_context(),
                    )
            if reader.num_rows != self.physical_rows:
                raise CorruptFileError(
                    f"data file has {reader.num_rows} rows but fragment {self.fragment_id} has {self.physical_rows}",
                    path=plan.reader_path,
                    **self.error_context(),
                )
            readers[plan.reader_path] = reader
        return reader

    def _read_columns(self, file_plans: list[_FilePlan], columns: dict[str, pa.Array],
                      getter: Callable[[DataFileReader | LegacyFileReader, list[ColumnPlan]], list[pa.Array]]) -> None:
        for plan in file_plans:
            if not plan.plans:
                for name in plan.names:
                    columns[name] = None  # filled with nulls by the caller
                continue
            try:
                arrays = getter(self._reader(plan), plan.plans)
            except LanceError as exc:
                # file-level errors know the file and column; add the table and version
                raise exc.with_context(**self.error_context())
            for name, array, column, full_type in zip(plan.names, arrays, plan.plans,
                                                      plan.full_types or [None] * len(plan.plans)):
                if full_type is not None:
                    array = fill_missing_children(array, full_type)
                if column.field.type == BLOB_V2_DESCRIPTION:
                    array = null_children_of_null_blobs(array)
                if has_utf8(array.type):
                    problem = first_invalid_utf8(array)
                    if problem:
                        raise CorruptFileError(f"column holds invalid UTF-8 text: {problem}", path=plan.reader_path,
                                               column=name, **self.error_context())
                columns[name] = array

    def read_batches(
        self,
        schema: LanceSchema,
        system_columns: list[str],
        batch_size: int,
        *,
        row_range: tuple[int, int] | None = None,
        include_deleted: bool = False,
        keep_addresses: bool = False,
        readahead: int = 0,
        ordered: bool = True,
    ) -> Iterator[pa.RecordBatch]:
        """Batches of the live rows, with ``schema``'s columns followed by ``system_columns``.

        ``row_range``: only physical rows ``[begin, end)`` (a split of a large fragment).
        ``include_deleted``: deleted rows too, with null ``_rowid`` and ``_rowaddr`` (pylance's
        ``include_deleted_rows``); with ``keep_addresses`` their ``_rowaddr`` stays set, for a
        caller that needs the physical offsets and nulls it itself.
        ``readahead``: decode up to this many batches at once on the decode pool (see
        :mod:`lance_format.io.decode_pool`), delivered in order (as they finish with ``ordered=False``);
        0 or 1 reads one at a time.
        """
        tasks = self.batch_tasks(schema, system_columns, batch_size, row_range=row_range,
                                 include_deleted=include_deleted, keep_addresses=keep_addresses,
                                 threads=readahead > 1)
        yield from map_ordered(_run_task, tasks, readahead, ordered=ordered)

    def batch_tasks(
        self,
        schema: LanceSchema,
        system_columns: list[str],
        batch_size: int,
        *,
        row_range: tuple[int, int] | None = None,
        include_deleted: bool = False,
        keep_addresses: bool = False,
        threads: bool = False,
    ) -> Iterator[Callable[[], pa.RecordBatch]]:
        """One task per batch of :meth:`read_batches` (same arguments), made lazily: calling it
        reads the batch. With ``threads``, the readers and system columns are loaded before the
        first task is handed out, so that tasks may run on several threads at once (batches of
        2.1+ files side by side, those of older files one at a time).
        """
        arrow_schema = read_arrow_schema(schema)
        out_schema = _with_system_columns(arrow_schema, system_columns)
        keep = self._keep_mask
        deleted_mask = None
        if include_deleted and keep is not None:
            deleted_mask, keep = ~keep, None
        file_plans = self._file_plans(schema.fields)
        layers = overlay_layers(self, schema)
        first, last = (0, self.physical_rows) if row_range is None else (
            max(0, int(row_range[0])), min(self.physical_rows, int(row_range[1])))

        def spans() -> Iterator[tuple[int, int, np.ndarray | None]]:
            for start in range(first, last, batch_size):
                stop = min(start + batch_size, last)
                selection = None if keep is None else keep[start:stop]
                if selection is None or selection.any():
                    yield start, stop, selection

        def batch_of(span: tuple[int, int, np.ndarray | None]) -> pa.RecordBatch:
            start, stop, selection = span
            # the offsets only where a system column needs them (not for a whole span's _rowaddr)
            offsets = _NO_OFFSETS
            if selection is not None or any(name != ROW_ADDRESS for name in system_columns):
                offsets = np.arange(start, stop, dtype=np.uint64)
                offsets = offsets if selection is None else offsets[selection]
            columns: dict[str, pa.Array] = {}
            self._read_columns(file_plans, columns, lambda r, p: r.read_range(p, start, stop))
            arrays = []
            mask = pa.array(selection) if selection is not None and not selection.all() else None
            for field in arrow_schema:
                array = columns[field.name]
                if array is None:
                    array = pa.nulls(stop - start, field.type)
                if field.name in layers:
                    array = overlaid(array, np.arange(start, stop, dtype=np.int64), layers[field.name])
                arrays.append(array.filter(mask) if mask is not None else array)
            for name in system_columns:
                if name == ROW_ADDRESS and selection is None:
                    # the late-materialization scan asks this of every batch: one arange, no second pass
                    base = self.fragment_id << 32
                    values = pa.array(np.arange(base + start, base + stop, dtype=np.uint64), pa.uint64())
                else:
                    values = self.system_column(name, offsets)
                if deleted_mask is not None and name in (ROW_ID, ROW_ADDRESS) and not keep_addresses:
                    values = pc.if_else(pa.array(deleted_mask[start:stop]), pa.scalar(None, pa.uint64()), values)
                arrays.append(values)
            if not arrays:  # no columns at all (pylance's columns=[]): the batch still counts rows
                rows = stop - start if selection is None else int(np.count_nonzero(selection))
                return pa.RecordBatch.from_arrays([pa.nulls(rows)], ["_"]).select([])
            return pa.RecordBatch.from_arrays(arrays, schema=out_schema)

        side_by_side = threads and self._ready_for_threads(file_plans, system_columns)
        # the readers of 2.0 and legacy files keep state without locks of their own
        lock = None if side_by_side else self._batch_lock
        for span in spans():
            yield partial(batch_of, span) if lock is None else partial(_locked, lock, batch_of, span)

    @cached_property
    def _batch_lock(self) -> threading.Lock:
        return threading.Lock()

    def _ready_for_threads(self, file_plans: list[_FilePlan], system_columns: list[str]) -> bool:
        """Open the readers and load the system columns here, before batch tasks share them;
        whether every file is a 2.1+ one (whose columns serialize their own reads, see
        ``StructuralColumn``): older files are read one batch at a time."""
        structural = True
        for plan in file_plans:
            if plan.plans:
                try:
                    reader = self._reader(plan)
                except LanceError as exc:
                    raise exc.with_context(**self.error_context())
                structural = structural and isinstance(reader, DataFileReader) and reader.structural
        for name in system_columns:
            self.system_column(name, np.zeros(0, np.uint64))
        return structural

    def stored_bytes_per_row(self, schema: LanceSchema) -> float:
        """Page bytes of ``schema``'s columns in this fragment's 2.1+ files, per physical row
        (what a batch of them reads; 0 for older files)."""
        total = 0
        for plan in self._file_plans(schema.fields):
            try:
                reader = self._reader(plan) if plan.plans else None
            except LanceError as exc:
                raise exc.with_context(**self.error_context())
            if not isinstance(reader, DataFileReader) or not reader.structural:
                continue
            columns = {leaf.column for top in plan.plans for leaf in leaf_plans(top) if 0 <= leaf.column < reader.num_columns}
            total += sum(sum(page.buffer_sizes) for c in columns for page in reader.metadata.columns[c].pages)
        return total / self.physical_rows if self.physical_rows else 0.0

    def take_physical(self, schema: LanceSchema, system_columns: list[str], offsets: np.ndarray) -> pa.RecordBatch:
        """Rows at the given physical offsets, in the given order."""
        arrow_schema = read_arrow_schema(schema)
        columns: dict[str, pa.Array] = {}
        self._read_columns(self._file_plans(schema.fields), columns, lambda r, p: r.take(p, offsets))
        arrays = [
            columns[f.name] if columns[f.name] is not None else pa.nulls(len(offsets), f.type) for f in arrow_schema
        ]
        layers = overlay_layers(self, schema)
        if layers:
            rows = np.asarray(offsets, dtype=np.int64)
            arrays = [overlaid(a, rows, layers[f.name]) if f.name in layers else a
                      for a, f in zip(arrays, arrow_schema)]
        arrays.extend(self.system_column(name, offsets) for name in system_columns)
        return pa.RecordBatch.from_arrays(arrays, schema=_with_system_columns(arrow_schema, system_columns))

    # -- integrity -------------------------------------------------------------------------------
    def column_sizes(self, data_file: table_pb2.DataFile) -> list[int]:
        """Bytes of page buffers per column of one of this fragment's 2.x data files."""
        store, path = self._dataset.base_stores.data_file(data_file)
        with DataFileReader(store, path, size=data_file.file_size_bytes or None) as reader:
            return [sum(sum(page.buffer_sizes) for page in column.pages) for column in reader.metadata.columns]

    def live_offsets(self) -> np.ndarray:
        """The physical row offsets of the fragment's live (not deleted) rows, ascending, as ``uint64``."""
        keep = self._keep_mask
        if keep is None:
            return np.arange(self.physical_rows, dtype=np.uint64)
        return np.flatnonzero(keep).astype(np.uint64)



def _run_task(task: Callable[[], pa.RecordBatch]) -> pa.RecordBatch:
    return task()


def _locked(lock: threading.Lock, work: Callable[[Any], pa.RecordBatch], span: Any) -> pa.RecordBatch:
    with lock:
        return work(span)


def _stored_in(field: LanceField, positions: dict[int, int], structural: bool) -> bool:
    """Whether a data file holds ``field`` (2.1+ files list only leaf ids)."""
    if field.id in positions:
        return True
    return structural and any(_stored_in(c, positions, True) for c in field.children)


def _fully_stored(field: LanceField, positions: dict[int, int], structural: bool) -> bool:
    """Whether a data file holds ``field`` and every field nested in it."""
    if field.id in positions and (structural or not field.children or is_packed_struct_leaf(field, positions)):
        return True
    if not field.children or not (structural or field.id in positions):
        return False
    return all(_fully_stored(c, positions, structural) for c in field.children)


def _with_system_columns(schema: pa.Schema, system_columns: list[str]) -> pa.Schema:
    for name in system_columns:
        schema = schema.append(pa.field(name, pa.uint64(), nullable=True))
    return schema
