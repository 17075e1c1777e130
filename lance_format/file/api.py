"""pylance's ``lance.file`` API: :class:`LanceFileReader`, :class:`LanceFileWriter` and
:class:`LanceFileSession` over paths and URIs, with pylance's constructors and methods.

These wrap the engine's own file classes (:class:`lance_format.file.reader.DataFileReader`,
which takes an object store and column plans, and :class:`lance_format.file.writer.DataFileWriter`,
which takes a :class:`~lance_format.schema.LanceSchema`); ``lance_format.file`` exports these
pylance-shaped ones, so code written for ``lance.file`` runs unchanged. New files are file version
2.2 (:func:`stable_version`) unless ``version`` says otherwise; errors are pylance's builtin kinds
(``ValueError`` for bad requests) through :mod:`lance_format.errors`.
"""

from __future__ import annotations

import os
import posixpath
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Union

import numpy as np
import pyarrow as pa

from lance_format.errors import InvalidInputError
from lance_format.file.blob_writers import DedicatedBlobWriter, PackedBlobWriter
from lance_format.file.plans import ColumnPlan, plans_for_schema, structural_plans_for_schema
from lance_format.file.reader import DataFileReader as _EngineReader
from lance_format.file.writer import DataFileWriter as _EngineWriter
from lance_format.io import ObjectStore, object_store_for
from lance_format.proto import encodings_v2_0_pb2, encodings_v2_1_pb2
from lance_format.rust_debug import prost_message, render
from lance_format.schema import LanceSchema
from lance_format.schema.arrow_checks import check_table

_STABLE_VERSION = "2.2"
# pylance's version spellings; the engine writer knows "2.0", "2.1", "2.2"
_VERSION_ALIASES = {"stable": _STABLE_VERSION, "next": _STABLE_VERSION, "2": "2.0", "0.3": "2.0"}

PathLike = Union[str, "os.PathLike[str]"]


def stable_version() -> str:
    """The file version new files get when none is asked for (pylance: ``"2.2"``)."""
    return _STABLE_VERSION


def _split_path(path: PathLike) -> tuple[str, str]:
    """``(directory URI, file name)`` of a file path or URI."""
    text = os.fspath(path)
    if "://" in text:
        parent, _, name = text.rstrip("/").rpartition("/")
        return parent, name
    absolute = os.path.abspath(text)
    return os.path.dirname(absolute), os.path.basename(absolute)


def _file_location(owner: str, path: PathLike, storage_options: Mapping[str, str] | None,
                   namespace_client: Any, table_id: Any, store: ObjectStore | None) -> tuple[ObjectStore, str]:
    """``(store, name)`` of the file a reader or writer (``owner``) opens: ``path`` within
    ``store`` when one is given, else the file at ``path`` in a store made for its directory."""
    if namespace_client is not None or table_id is not None:
        raise InvalidInputError(f"{owner}(namespace_client=..., table_id=...) is not supported here")
    if store is not None:
        return store, os.fspath(path)
    parent, name = _split_path(path)
    return object_store_for(parent, storage_options), name


# -- metadata --------------------------------------------------------------------------------------


@dataclass
class LanceBufferDescriptor:
    """Where one buffer lies in the file."""

    position: int
    size: int


@dataclass
class LancePageMetadata:
    """One page: its buffers and its encoding (rendered as text)."""

    buffers: list[LanceBufferDescriptor]
    encoding: str


@dataclass
class LanceColumnMetadata:
    """One column: its column-wide buffers and its pages."""

    column_buffers: list[LanceBufferDescriptor]
    pages: list[LancePageMetadata]


@dataclass
class LanceFileMetadata:
    """What a file's footer and tables describe (pylance's ``LanceFileMetadata``)."""

    schema: pa.Schema
    num_rows: int
    num_data_bytes: int
    num_column_metadata_bytes: int
    num_global_buffer_bytes: int
    global_buffers: list[LanceBufferDescriptor]
    columns: list[LanceColumnMetadata]
    major_version: int
    minor_version: int


@dataclass
class LanceColumnStatistics:
    """Pages and page bytes of one column."""

    num_pages: int
    size_bytes: int


@dataclass
class LanceFileStatistics:
    """Per-column statistics of a file (pylance's ``LanceFileStatistics``)."""

    columns: list[LanceColumnStatistics] = field(default_factory=list)


# -- reading ---------------------------------------------------------------------------------------


class ReaderResults:
    """What a read returned (a reader or a table), as a table or as batches of ``batch_size`` rows."""

    def __init__(self, reader: pa.RecordBatchReader | pa.Table, batch_size: int = 1024) -> None:
        if batch_size < 1:
            raise InvalidInputError(f"batch_size must be positive, got {batch_size}")
        self._table = reader.read_all() if isinstance(reader, pa.RecordBatchReader) else reader
        self._batch_size = int(batch_size)

    def to_table(self) -> pa.Table:
        return self._table

    def to_batches(self) -> pa.RecordBatchReader:
        batches = self._table.to_batches(max_chunksize=self._batch_size)
        return pa.RecordBatchReader.from_batches(self._table.schema, batches)


class LanceFileReader:
    """Reads one Lance data file (pylance's ``lance.file.LanceFileReader``)."""

    def __init__(self, path: PathLike, storage_options: Mapping[str, str] | None = None,
                 columns: list[str] | None = None, *, namespace_client: Any = None, table_id: Any = None,
                 _store: ObjectStore | None = None) -> None:
        store, name = _file_location("LanceFileReader", path, storage_options, namespace_client, table_id, _store)
        self._reader = _EngineReader(store, name)
        schema = self._reader.lance_schema()
        plans: list[ColumnPlan] = (structural_plans_for_schema(schema) if self._reader.structural
                                   else plans_for_schema(schema))
        if columns is not None:
            by_name = {p.field.name: p for p in plans}
            missing = [c for c in columns if c not in by_name]
            if missing:
                raise InvalidInputError(f"columns {missing} are not in the file (it has {list(by_name)})",
                                        path=name)
            plans = [by_name[c] for c in columns]
        self._plans = plans
        self._file_schema = schema.to_arrow()
        self._schema = pa.schema([p.field for p in plans], metadata=self._file_schema.metadata)

    def _results(self, arrays: list[pa.Array], batch_size: int) -> ReaderResults:
        return ReaderResults(pa.Table.from_arrays(arrays, schema=self._schema), batch_size)

    def read_all(self, *, batch_size: int = 1024, batch_readahead: int = 16) -> ReaderResults:
        """Every row of the file."""
        return self._results(self._reader.read_range(self._plans, 0, self._reader.num_rows), batch_size)

    def read_range(self, start: int, num_rows: int, *, batch_size: int = 1024, batch_readahead: int = 16
                   ) -> ReaderResults:
        """Rows ``[start, start + num_rows)``."""
        return self._results(self._reader.read_range(self._plans, int(start), int(start) + int(num_rows)),
                             batch_size)

    def take_rows(self, indices: Any, *, batch_size: int = 1024, batch_readahead: int = 16) -> ReaderResults:
        """The rows at ``indices``, which must be in ascending order (as in pylance)."""
        positions = np.asarray(indices, dtype=np.int64)
        if positions.size > 1 and bool(np.any(positions[1:] < positions[:-1])):
            at = int(np.argmax(positions[1:] < positions[:-1]))
            raise InvalidInputError(f"Indices must be sorted in ascending order for file API, got "
                                    f"{int(positions[at])} > {int(positions[at + 1])}")
        return self._results(self._reader.take(self._plans, positions), batch_size)

    def num_rows(self) -> int:
        """The number of rows in the file."""
        return self._reader.num_rows

    def metadata(self) -> LanceFileMetadata:
        """The file's layout: schema, versions, buffers, columns and pages."""
        meta = self._reader.metadata
        footer = meta.footer
        global_bytes = sum(size for _, size in meta.global_buffers)
        columns = [
            LanceColumnMetadata(
                column_buffers=[LanceBufferDescriptor(int(p), int(s))
                                for p, s in zip(column.buffer_offsets, column.buffer_sizes)],
                pages=[LancePageMetadata(
                    buffers=[LanceBufferDescriptor(int(p), int(s)) for p, s in zip(page.buffer_offsets,
                                                                                   page.buffer_sizes)],
                    encoding=self._encoding_text(page)) for page in column.pages],
            )
            for column in meta.columns
        ]
        return LanceFileMetadata(
            schema=self._file_schema,
            num_rows=self._reader.num_rows,
            num_data_bytes=footer.column_meta_start - global_bytes,
            num_column_metadata_bytes=footer.gbo_table_start - footer.column_meta_start,
            num_global_buffer_bytes=global_bytes,
            global_buffers=[LanceBufferDescriptor(p, s) for p, s in meta.global_buffers],
            columns=columns,
            major_version=footer.major,
            minor_version=footer.minor,
        )

    def _encoding_text(self, page: Any) -> str:
        """A page's encoding as pylance prints it: Rust's pretty ``Debug`` of the prost message."""
        message_cls = encodings_v2_1_pb2.PageLayout if self._reader.structural else encodings_v2_0_pb2.ArrayEncoding
        raw = self._reader.page_encoding(page, message_cls, None) if page.HasField("encoding") else None
        if raw is None:
            return ""
        return render(prost_message(raw))

    def file_statistics(self) -> LanceFileStatistics:
        """Pages and page bytes of each column."""
        return LanceFileStatistics([
            LanceColumnStatistics(num_pages=len(column.pages),
                                  size_bytes=sum(sum(page.buffer_sizes) for page in column.pages))
            for column in self._reader.metadata.columns
        ])

    def read_global_buffer(self, index: int) -> bytes:
        """The bytes of global buffer ``index`` (0 is the file's schema descriptor)."""
        return self._reader.read_global_buffer(int(index))


# -- writing ---------------------------------------------------------------------------------------


class LanceFileWriter:
    """Writes one Lance data file (pylance's ``lance.file.LanceFileWriter``); the schema comes
    from the first batch when none is given. ``size_bytes`` is the file's size once closed.
    A writer dropped without ``close`` leaves no file behind, as in pylance."""

    def __init__(self, path: PathLike, schema: pa.Schema | None = None, *,
                 data_cache_bytes: int | None = None, version: str | None = None,
                 storage_options: Mapping[str, str] | None = None, namespace_client: Any = None,
                 table_id: Any = None, max_page_bytes: int | None = None,
                 _store: ObjectStore | None = None, **kwargs: Any) -> None:
        self._store, self._path = _file_location("LanceFileWriter", path, storage_options, namespace_client,
                                                 table_id, _store)
        self._version = _VERSION_ALIASES.get(version or "stable", version) or _STABLE_VERSION
        self._max_page_bytes = max_page_bytes
        self._metadata: dict[str, str] = {}
        self._global_buffers: list[bytes] = []
        self._writer: _EngineWriter | None = None
        self._lock = threading.Lock()
        self._rows = 0
        self.closed = False
        self.size_bytes: int | None = None
        if schema is not None:
            self._open(schema)

    def _open(self, schema: pa.Schema) -> _EngineWriter:
        options: dict[str, Any] = {"version": self._version}
        # only 2.0 splits pages on write at max_page_bytes (pylance's 2.1+ writers split on read)
        if self._version in ("2.0", "v2.0") and self._max_page_bytes:
            options["max_page_bytes"] = int(self._max_page_bytes)
        self._writer = _EngineWriter(self._store, self._path, LanceSchema.from_arrow(schema), **options)
        for data in self._global_buffers:
            self._writer.add_global_buffer(data)
        return self._writer

    def write_batch(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Append a batch or a table (safe to call from several threads)."""
        if self.closed:
            raise InvalidInputError("the file writer is already closed", path=self._path)
        check_table(batch, what="LanceFileWriter.write_batch", table=self._path)
        pieces = batch.to_batches() if isinstance(batch, pa.Table) else [batch]
        with self._lock:
            writer = self._writer or self._open(batch.schema)
            for piece in pieces:
                writer.write_batch(piece)
                self._rows += piece.num_rows

    def add_schema_metadata(self, key: str, value: str) -> None:
        """A key/value pair for the file's schema metadata (written on close)."""
        self._metadata[str(key)] = str(value)

    def add_global_buffer(self, data: bytes) -> int:
        """Write ``data`` as a global buffer of the file; its index (the first is 1)."""
        with self._lock:
            if self._writer is not None:
                return self._writer.add_global_buffer(bytes(data))
            self._global_buffers.append(bytes(data))
            return len(self._global_buffers)

    def close(self) -> int | None:
        """Finish the file; the number of rows written. Closing again does nothing."""
        if self.closed:
            return None
        with self._lock:
            if self._writer is None:
                self.closed = True
                raise InvalidInputError("Schema is unknown and file cannot be created", path=self._path)
            self.closed = True
            self._writer.schema.metadata.update({k: v.encode() for k, v in self._metadata.items()})
            written = self._writer.finish()
        self.size_bytes = written.size_bytes
        return self._rows

    def __enter__(self) -> LanceFileWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # the file is finished even when the block failed, as pylance does; a failure to close
        # then must not hide the block's own error
        if exc_type is None:
            self.close()
            return
        try:
            self.close()
        except Exception:  # noqa: BLE001 - the block's exception propagates instead
            pass

    def __del__(self) -> None:
        # pylance aborts the upload of a writer dropped unclosed: no partial file remains
        writer = getattr(self, "_writer", None)
        if writer is not None and not getattr(self, "closed", True):
            try:
                writer.abort()
            except Exception:  # noqa: BLE001 - best effort while the interpreter may be shutting down
                pass


# -- sessions --------------------------------------------------------------------------------------


@dataclass
class ListResult:
    """One directory level: child "directories" and files (pylance's ``ListResult``)."""

    common_prefixes: list[str]
    objects: list[str]


class LanceFileSession:
    """Readers, writers and objects under ``base_path``, sharing one object store (pylance's
    ``lance.file.LanceFileSession``). Paths are relative to the base path."""

    def __init__(self, base_path: PathLike | ObjectStore, storage_options: Mapping[str, str] | None = None,
                 namespace_client: Any = None, table_id: Any = None) -> None:
        if namespace_client is not None or table_id is not None:
            raise InvalidInputError("LanceFileSession(namespace_client=..., table_id=...) is not supported here")
        self._store = object_store_for(base_path if isinstance(base_path, ObjectStore) else os.fspath(base_path),
                                       storage_options)

    def open_reader(self, path: str, columns: list[str] | None = None) -> LanceFileReader:
        return LanceFileReader(path, columns=columns, _store=self._store)

    def open_writer(self, path: str, *, schema: pa.Schema | None = None, data_cache_bytes: int | None = None,
                    version: str | None = None, keep_original_array: bool | None = None,
                    max_page_bytes: int | None = None) -> LanceFileWriter:
        return LanceFileWriter(path, schema, version=version, max_page_bytes=max_page_bytes, _store=self._store)

    def open_packed_blob_writer(self, path: str, blob_id: int) -> PackedBlobWriter:
        """A writer of the pack sidecar ``blob_id`` of the data file ``path`` (written later)."""
        return PackedBlobWriter(self._store, path, blob_id)

    def open_dedicated_blob_writer(self, path: str, blob_id: int) -> DedicatedBlobWriter:
        """A writer of the dedicated sidecar ``blob_id`` of the data file ``path`` (written later)."""
        return DedicatedBlobWriter(self._store, path, blob_id)

    def contains(self, path: str) -> bool:
        return self._store.exists(path)

    def list(self, path: str | None = None) -> list[str]:
        """Every file under ``path`` (recursively), as paths relative to the base path."""
        infos = self._store.list_files(path or "", recursive=True)
        return [self._store.relative_path(i) for i in infos]

    def list_with_delimiter(self, path: str | None = None) -> ListResult:
        """The direct children of ``path``: "directories" (prefixes of deeper files) and files."""
        base = (path or "").strip("/")
        prefixes, objects = set(), []
        for relative in self.list(base or None):
            rest = relative[len(base) + 1:] if base else relative
            head, _, tail = rest.partition("/")
            child = posixpath.join(base, head) if base else head
            if tail:
                prefixes.add(child)
            else:
                objects.append(child)
        return ListResult(sorted(prefixes), sorted(objects))

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        """``length`` bytes of an object, from ``offset``."""
        if length <= 0:
            return b""
        return bytes(self._store.read_ranges(path, [(int(offset), int(length))])[0])

    def delete_file(self, path: str) -> None:
        self._store.delete(path)

    def upload_file(self, local_path: PathLike, remote_path: str) -> None:
        with open(local_path, "rb") as source:
            self._store.write_bytes(remote_path, source.read())

    def download_file(self, remote_path: str, local_path: PathLike) -> None:
        data = self._store.read_bytes(remote_path)
        with open(local_path, "wb") as target:
            target.write(data)


__all__ = [
    "LanceFileReader", "LanceFileWriter", "LanceFileSession", "ReaderResults", "ListResult", "LanceFileMetadata",
    "LanceColumnMetadata", "LancePageMetadata", "LanceBufferDescriptor", "LanceFileStatistics",
    "LanceColumnStatistics", "stable_version",
]
