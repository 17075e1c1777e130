"""Uncommitted fragments: written by independent workers (Spark tasks, other processes) and by
every write of this process (:func:`write_fragment_files`) before its commit.

A distributed write runs in two phases: workers write data files and describe them as
``DataFragment`` messages (ids 0, nothing visible), then one process commits them all in a
single transaction (:func:`lance_format.distributed.commit_fragments`). Every data file of one write
starts with the same *write prefix* derived from the write's id, so the files of a write that
never committed (a failed task, a job aborted after some tasks finished, a speculative task
attempt whose result was dropped) can be found and removed later without touching anybody
else's files.

The names keep official Lance's shape (24 binary digits, then 26 hex digits, ``.lance``): the
first 24 + 10 characters are the write prefix, the last 16 hex digits are random per file.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import InvalidInputError, SchemaMismatchError, UnsupportedFeatureError
from lance_format.file.legacy_v0_1_writer import LegacyFileWriter
from lance_format.file.writer import DataFileWriter, WrittenFile
from lance_format.io import ObjectStore, object_store_for
from lance_format.proto import table_pb2
from lance_format.schema import LanceSchema, check_arrow_compatible
from lance_format.schema.blob import binary_as_blob_v2, legacy_blobs_as_v2
from lance_format.schema.extensions import to_storage
from lance_format.table.legacy_dictionaries import LEGACY_STORAGE, latest_table_dictionaries
from lance_format.table.rowids import encode_row_ids

DATA_DIR = "data"
# DataFile.file_major_version / file_minor_version recorded for each file version.
FILE_VERSION_NUMBERS = {"0.1": (0, 2), "2.0": (2, 0), "2.1": (2, 1), "2.2": (2, 2)}
DEFAULT_MAX_ROWS_PER_FILE = 1024 * 1024
DEFAULT_MAX_BYTES_PER_FILE = 90 * 1024 * 1024 * 1024
PYLANCE_MAX_PAGE_BYTES = 32 * 1024 * 1024  # pylance's file writer default max_page_bytes
# Names pylance accepts for file versions; 2.3 ("next") and the legacy 0.1 format are refused.
_VERSION_ALIASES = {"legacy": "0.1", "stable": "2.2", "next": "2.3"}
# What new tables get when no version is asked for (pylance 14's default is "stable" = 2.2).
DEFAULT_STORAGE_VERSION = "2.2"
BLOB_V2_STORAGE = "2.2"  # the file version whose blob columns are blob v2 (lance.blob.v2)


def resolve_storage_version(requested: str | None, existing: str | None, *, table: str) -> str:
    """The file version a write uses: the table's (``existing``), else ``requested`` (an alias
    or a number), else the default; refused unless this engine can write it."""
    version = existing or _VERSION_ALIASES.get(requested or "", requested) or DEFAULT_STORAGE_VERSION
    if version not in FILE_VERSION_NUMBERS:
        raise UnsupportedFeatureError(
            f"writing Lance file version {version} is not supported (supported: {sorted(FILE_VERSION_NUMBERS)})",
            table=table,
        )
    return version


def write_target(append_to: table_pb2.Manifest | None, data_schema: pa.Schema, requested: str | None,
                 previous: str | None, *, table: str) -> tuple[LanceSchema, str]:
    """The schema and file version new data files get: the table's when appending to
    ``append_to`` (the data must fit its columns), else the data's, at ``requested`` or, when
    none is requested, ``previous`` (the version of a table being overwritten) or the default."""
    if append_to is not None:
        table_schema = LanceSchema.from_protos(list(append_to.fields), dict(append_to.schema_metadata))
        storage_version = resolve_storage_version(None, append_to.data_format.version or "2.0", table=table)
        if storage_version == BLOB_V2_STORAGE:
            data_schema = legacy_blobs_as_v2(data_schema)
        given = set(data_schema.names)
        missing = [f for f in table_schema.fields if f.name not in given]
        if missing and given and given <= set(table_schema.names()) and storage_version != LEGACY_STORAGE \
                and all(f.nullable for f in missing):
            # like pylance: appending some of the columns writes files of just those; the
            # fragment reads null for the others (not in legacy files, whose fragments need all)
            present = table_schema.project([f.name for f in table_schema.fields if f.name in given])
            check_arrow_compatible(present.to_arrow(), data_schema, table=table)
            return present, storage_version
        check_arrow_compatible(table_schema.to_arrow(), data_schema, table=table)
        return table_schema, storage_version
    storage_version = resolve_storage_version(requested, None if requested else previous, table=table)
    if storage_version == BLOB_V2_STORAGE:
        data_schema = legacy_blobs_as_v2(data_schema)
    return LanceSchema.from_arrow(data_schema), storage_version


def new_write_id() -> str:
    """A fresh write id (32 hex digits)."""
    return uuid.uuid4().hex


def write_prefix(write_id: str) -> str:
    """The file-name prefix shared by every data file of the write ``write_id``."""
    raw = bytes.fromhex(write_id)
    if len(raw) < 8:
        raise InvalidInputError(f"write id {write_id!r} is too short (needs at least 16 hex digits)")
    return "".join(f"{b:08b}" for b in raw[:3]) + raw[3:8].hex()


def data_file_name(prefix: str) -> str:
    return f"{prefix}{os.urandom(8).hex()}.lance"


# A write's staged outputs (rows a worker hands to the committing process, not Lance files):
# ``data/.tmp<write prefix><16 hex>.arrow``. Like official Lance's ``data/.tmp*`` staging files
# they are never referenced, so readers ignore them and cleanup removes stale ones; the write
# prefix after the mark lets the write that made them find and remove them.
STAGED_MARK = ".tmp"


def staged_file_name(prefix: str) -> str:
    return f"{STAGED_MARK}{prefix}{os.urandom(8).hex()}.arrow"


@dataclass(frozen=True)
class WriteTarget:
    """Where a new data file goes: a store, the base id the manifest records for it (None: the
    table's own root) and the folder inside it (``data`` for roots, nothing for other bases)."""

    store: ObjectStore
    base_id: int | None = None
    folder: str = DATA_DIR


class _LegacyDictionaries:
    """The dictionary values the legacy files of one write index into, shared by its files:
    the table's (loaded once), or, for a new table, the ones the write defines as it goes."""

    def __init__(self, root: ObjectStore, new_table: bool) -> None:
        self._root = root
        self.values: dict[int, pa.Array] | None = {} if new_table else None
        self.defined: set[int] | None = set() if new_table else None

    def load(self) -> dict[int, pa.Array]:
        if self.values is None:
            self.values = latest_table_dictionaries(self._root)
        return self.values


def _file_writer(store: ObjectStore, path: str, schema: LanceSchema,
                 storage_version: str, dictionaries: _LegacyDictionaries | None = None,
                 ) -> DataFileWriter | LegacyFileWriter:
    if storage_version not in FILE_VERSION_NUMBERS:
        raise UnsupportedFeatureError(
            f"writing Lance file version {storage_version} is not supported (supported: {sorted(FILE_VERSION_NUMBERS)})",
            table=store.uri,
            path=path,
        )
    if storage_version == "0.1":  # legacy tables keep getting legacy files, as with official Lance
        dictionaries = dictionaries or _LegacyDictionaries(store, new_table=False)
        return LegacyFileWriter(store, path, schema, load_dictionaries=dictionaries.load,
                                define_dictionaries=dictionaries.defined)
    # like pylance's writes, which leave the file writer's max_page_bytes at its 32 MiB default
    return DataFileWriter(store, path, schema, version=storage_version, split_page_bytes=PYLANCE_MAX_PAGE_BYTES)


class FragmentSink:
    """Streams batches into new data files, one fragment per file, rolled by rows and bytes.

    Batches must already have exactly ``schema.to_arrow()``'s column order and types. With
    ``row_ids`` given to :meth:`write`, the fragments carry those stable row ids (an update keeps
    the ids of the rows it rewrites); a sink takes either always or never row ids. ``targets``:
    where the files go, file by file in turn (pylance's ``target_bases``); the table's own
    ``data/`` by default. ``new_table``: the write replaces the table's data (create, overwrite),
    so legacy dictionary columns define the table's dictionaries instead of indexing into them.
    """

    def __init__(
        self,
        uri: str | os.PathLike[str] | ObjectStore,
        schema: LanceSchema,
        storage_version: str,
        *,
        prefix: str,
        max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
        max_bytes_per_file: int = DEFAULT_MAX_BYTES_PER_FILE,
        targets: Sequence[WriteTarget] | None = None,
        new_table: bool = False,
        on_file: Callable[[str, table_pb2.DataFragment], None] | None = None,
        begin_with_file: bool = False,
    ) -> None:
        if max_rows_per_file <= 0 or max_bytes_per_file <= 0:
            raise InvalidInputError("max_rows_per_file and max_bytes_per_file must be positive")
        self._store = object_store_for(uri)
        self._schema = schema
        self._version = storage_version
        self._numbers = FILE_VERSION_NUMBERS.get(storage_version)
        self._prefix = prefix
        self._max_rows = int(max_rows_per_file)
        self._max_bytes = int(max_bytes_per_file)
        self._current: DataFileWriter | LegacyFileWriter | None = None
        self._current_rows = 0
        self._current_ids: list[np.ndarray] | None = None
        self._targets = list(targets) if targets else [WriteTarget(self._store)]
        self._dictionaries = _LegacyDictionaries(self._store, new_table)
        self._paths: list[str] = []
        self._written: list[tuple[ObjectStore, str]] = []  # every file created, for abort()
        self._current_target = self._targets[0]
        self.fragments: list[table_pb2.DataFragment] = []
        self.rows = 0
        self.bytes = 0
        # ("begin", fragment) when a file opens, ("complete", fragment) when it is finished
        self._on_file = on_file
        # pylance's LanceFragment.create reports the file it opens with "begin" (write_dataset does not)
        self._begin_with_file = begin_with_file

    @property
    def paths(self) -> list[str]:
        """Paths of every file this sink created (finished or not), relative to the store each
        went to (the table's root unless ``targets`` named other bases)."""
        return list(self._paths)

    def _open(self) -> DataFileWriter | LegacyFileWriter:
        target = self._current_target = self._targets[len(self._paths) % len(self._targets)]
        name = data_file_name(self._prefix)
        path = f"{target.folder}/{name}" if target.folder else name
        self._paths.append(path)
        self._written.append((target.store, path))
        self._current = _file_writer(target.store, path, self._schema, self._version, self._dictionaries)
        self._current_rows = 0
        if self._on_file is not None:  # like pylance: the fragment to come, still without files
            begun = table_pb2.DataFragment()
            if self._begin_with_file and self._numbers is not None:
                opened = begun.files.add(path=name, file_major_version=self._numbers[0],
                                         file_minor_version=self._numbers[1])
                if target.base_id is not None:
                    opened.base_id = target.base_id
            self._on_file("begin", begun)
        return self._current

    def _close(self) -> None:
        if self._current is None:
            return
        written: WrittenFile = self._current.finish()
        self._current = None
        major, minor = self._numbers  # type: ignore[misc]
        fragment = table_pb2.DataFragment(physical_rows=written.num_rows)
        data_file = fragment.files.add()
        data_file.path = written.path.rsplit("/", 1)[-1]
        if self._current_target.base_id is not None:
            data_file.base_id = self._current_target.base_id
        data_file.fields.extend(written.field_ids)
        data_file.column_indices.extend(written.column_indices)
        data_file.file_major_version = major
        data_file.file_minor_version = minor
        data_file.file_size_bytes = written.size_bytes
        if self._current_ids is not None:
            ids = np.concatenate(self._current_ids) if self._current_ids else np.empty(0, np.uint64)
            fragment.inline_row_ids = encode_row_ids(ids.astype(np.uint64, copy=False))
            self._current_ids = []
        self.fragments.append(fragment)
        self.bytes += written.size_bytes
        if self._on_file is not None:
            self._on_file("complete", fragment)

    def write(self, batch: pa.RecordBatch, row_ids: np.ndarray | None = None) -> None:
        if row_ids is not None and len(row_ids) != batch.num_rows:
            raise InvalidInputError(f"{len(row_ids)} row ids for {batch.num_rows} rows", table=self._store.uri)
        if self._current_ids is None and row_ids is not None:
            if self.rows:
                raise InvalidInputError("a sink takes row ids for every batch or for none", table=self._store.uri)
            self._current_ids = []
        offset = 0
        while offset < batch.num_rows:
            writer = self._current or self._open()
            if isinstance(writer, LegacyFileWriter):
                take = min(batch.num_rows - offset, self._max_rows - self._current_rows, writer.room_in_batch())
            else:
                # like pylance's break_stream: batches are split where the stream's rows reach a
                # multiple of max_rows_per_file (a file begun after a cut by bytes is not realigned)
                take = min(batch.num_rows - offset, self._max_rows - self.rows % self._max_rows)
            piece = batch.slice(offset, take)
            writer.write_batch(piece)
            if self._current_ids is not None:
                if row_ids is None:
                    raise InvalidInputError("a sink takes row ids for every batch or for none", table=self._store.uri)
                self._current_ids.append(np.asarray(row_ids[offset:offset + take], dtype=np.uint64))
            self._current_rows += take
            self.rows += take
            offset += take
            # like pylance: a file is cut once the bytes it has written reach the limit (pages
            # still buffered in the writer do not count)
            if self._current_rows >= self._max_rows or writer.tell() >= self._max_bytes:
                self._close()

    def finish(self) -> list[table_pb2.DataFragment]:
        """Close the open file; the fragments of every file written (uncommitted, id 0)."""
        try:
            self._close()
        except BaseException:
            self.abort()
            raise
        return list(self.fragments)

    def abort(self) -> None:
        """Remove every file of this sink (finished ones included)."""
        if self._current is not None:
            try:
                self._current.abort()
            except Exception:
                pass
            self._current = None
        for store, path in self._written:
            try:
                store.delete(path)
            except OSError:
                pass


def _refuse_nulls(array: pa.Array, field: pa.Field, present: pa.Array | None, *, table: str) -> None:
    """Refuse nulls in a non-null field, nested ones too: a struct's child only where the struct
    is there (``present``), a list's items only inside lists (null lists hold none)."""
    nulls = array.null_count if present is None else \
        pc.sum(pc.and_(array.is_null(), present)).as_py() or 0 if array.null_count else 0
    if not field.nullable and nulls:
        raise SchemaMismatchError(
            f"The field `{field.name}` contained null values even though the field is marked non-null in the "
            f"schema ({nulls} null value(s))", table=table, column=field.name)
    kind = field.type
    if pa.types.is_struct(kind):
        here = array.is_valid() if present is None else pc.and_(array.is_valid(), present)
        for i in range(kind.num_fields):
            _refuse_nulls(array.field(i), kind.field(i), here, table=table)
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
        # items of the lists that are there (a null list holds none); lists under a missing
        # struct are checked as well (stricter, never looser)
        _refuse_nulls(pc.list_flatten(array), kind.value_field, None, table=table)


def _conform(batch: pa.RecordBatch, target: pa.Schema, *, table: str) -> pa.RecordBatch:
    """Reorder columns to the table's order and refuse nulls in non-nullable columns."""
    batch = binary_as_blob_v2(to_storage(batch), target)  # extension columns are written as their storage
    if batch.schema.names != target.names:
        batch = pa.RecordBatch.from_arrays([batch.column(n) for n in target.names], schema=target)
    for index, field in enumerate(target):
        _refuse_nulls(batch.column(index), field, None, table=table)
    if batch.schema.metadata != target.metadata or not batch.schema.equals(target):
        batch = pa.RecordBatch.from_arrays(batch.columns, schema=target)
    return batch


def write_fragment_files(
    reader: pa.RecordBatchReader,
    store: ObjectStore,
    schema: LanceSchema,
    storage_version: str,
    *,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    max_bytes_per_file: int = DEFAULT_MAX_BYTES_PER_FILE,
    targets: Sequence[WriteTarget] | None = None,
    new_table: bool = False,
    on_file: Callable[[str, table_pb2.DataFragment], None] | None = None,
    begin_with_file: bool = False,
) -> tuple[list[table_pb2.DataFragment], FragmentSink]:
    """Write all batches of ``reader`` as new fragments (uncommitted; ids 0).

    Returns the fragments and the sink, whose ``abort()`` removes the files again if the
    commit that should publish them fails.
    """
    target = schema.to_arrow()
    writer = FragmentSink(store, schema, storage_version, prefix=write_prefix(new_write_id()),
                          max_rows_per_file=max_rows_per_file, max_bytes_per_file=max_bytes_per_file,
                          targets=targets, new_table=new_table, on_file=on_file,
                          begin_with_file=begin_with_file)
    try:
        for batch in reader:
            if batch.num_rows:
                writer.write(_conform(batch, target, table=store.uri))
        return writer.finish(), writer
    except BaseException:
        writer.abort()
        raise


__all__ = [
    "FragmentSink", "WriteTarget", "new_write_id", "write_prefix", "data_file_name", "staged_file_name", "STAGED_MARK", "FILE_VERSION_NUMBERS",
    "DEFAULT_MAX_ROWS_PER_FILE", "DEFAULT_MAX_BYTES_PER_FILE", "DEFAULT_STORAGE_VERSION", "resolve_storage_version",
    "write_target",
    "write_fragment_files",
]
