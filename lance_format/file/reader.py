"""Reader of Lance data files, file versions 2.0, 2.1 and 2.2: the public :class:`DataFileReader`.

Opening a file reads its container (:mod:`lance_format.file.container`: footer, column metadata,
file descriptor), which is the same for every version; the footer's version then picks the
reader of the column layout:

- 2.0 (footer (0, 3), or (2, 0)): :class:`~lance_format.file.reader_v2_0.ArrayEncodedReader`, one column
  per field with ``ArrayEncoding`` pages;
- 2.1/2.2: :class:`~lance_format.file.reader_structural.StructuralReader`, one column per leaf
  with structural page layouts.

The caller says which fields to produce with :class:`~lance_format.file.plans.ColumnPlan` trees.
Requests are validated here; only pages that overlap the requested rows are read. Local files
are memory-mapped, so fixed-width pages decode without copying and a take only touches the
memory pages holding its rows; on object stores the scattered reads of a take go out as one
batch (:meth:`DataFileReader.read_many`), coalesced and in parallel.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pyarrow as pa
from google.protobuf.message import Message

from lance_format.encodings.buffers import DecodeContext
from lance_format.errors import CorruptFileError, InvalidInputError, LanceError, StorageAccessError
from lance_format.file.container import FileMetadata, encoding_bytes, read_file_metadata, unpack_any
from lance_format.file.plans import ColumnPlan
from lance_format.file.reader_structural import StructuralReader
from lance_format.file.reader_v2_0 import ArrayEncodedReader
from lance_format.io.counters import count_reads
from lance_format.io.object_store import ObjectStore
from lance_format.proto import file2_pb2, file_pb2
from lance_format.schema import LanceSchema


class DataFileReader:
    """Random and sequential access to the rows of one Lance data file (file version 2.0, 2.1 or 2.2)."""

    def __init__(self, store: ObjectStore, path: str, *, size: int | None = None, session: Any = None) -> None:
        """``session``: a :class:`lance_format.Session` whose cache holds the file's metadata."""
        self.store = store
        self.path = path
        self._file, self._mapped = _open(store, path)
        self._reopen_lock = threading.Lock()
        self._opened_with = store.filesystem  # credentials refreshed since: reopen on refusal
        # a remote file: its columns are fetched side by side (each read is a request)
        self.remote: bool = self._mapped is None and store.local_path(path) is None
        try:
            # size 0 means unknown (manifests may record 0 for file_size_bytes)
            file_size = size if size else self._file.size()
            counted = _CountedReads(self._file, store)
            if session is None:
                self.metadata: FileMetadata = read_file_metadata(counted, file_size, path=path)
            else:
                # counted as the bytes of the column metadata, tables and footer it was read from
                self.metadata = session.file_metadata(
                    (store.uri, path), lambda: read_file_metadata(counted, file_size, path=path),
                    lambda m: m.file_size - m.footer.column_meta_start)

        except BaseException:
            self._file.close()
            raise
        self.version: tuple[int, int] = self.metadata.version
        self.num_rows: int = int(self.metadata.descriptor.length)
        self.num_columns: int = len(self.metadata.columns)
        self.structural: bool = self.version[0] == 2 and self.version[1] >= 1
        self._layout: ArrayEncodedReader | StructuralReader = (
            StructuralReader(self) if self.structural else ArrayEncodedReader(self)
        )

    # -- plumbing --------------------------------------------------------------------------------
    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> DataFileReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def schema(self) -> file_pb2.Schema:
        return self.metadata.descriptor.schema

    def lance_schema(self) -> LanceSchema:
        """The FileDescriptor schema as a :class:`LanceSchema`."""
        pb = self.metadata.descriptor.schema
        try:
            return LanceSchema.from_protos(list(pb.fields), dict(pb.metadata))
        except LanceError as exc:
            raise CorruptFileError(f"the file's schema is invalid: {exc.reason}", path=self.path) from exc

    def read_bytes(self, offset: int, length: int, ctx: DecodeContext) -> pa.Buffer:
        """``length`` bytes at ``offset`` (zero-copy for mapped files); short reads are corruption."""
        count_reads(length, 1, self.store.io_counters)
        if self._mapped is not None:
            # zero-copy: pages are decoded straight from the mapping, and a take only
            # touches the memory pages of the rows it needs
            if offset + length > len(self._mapped):
                raise ctx.corrupt(f"read of {length} bytes at {offset} runs past the end of the file")
            return self._mapped.slice(offset, length)
        data = self._read_remote(offset, length)
        if len(data) != length:
            raise ctx.corrupt(f"short read of {length} bytes at {offset}")
        return pa.py_buffer(data)

    def _read_remote(self, offset: int, length: int) -> bytes:
        """A ranged read of the open file, with the store's typed errors (see :meth:`_reopened`)."""
        file = self._file
        try:
            return file.read_at(length, offset)
        except LanceError:
            raise
        except OSError as exc:
            fresh = self._reopened(file, exc)
            return fresh.read_at(length, offset)

    def _reopened(self, file: pa.NativeFile, exc: OSError) -> pa.NativeFile:
        """After a failed read of ``file``: the file reopened, when the store's credentials were
        refreshed since it was opened or its provider now gives new ones (a ranged GET refused
        with 403 can surface as a mere stream failure, so any failure asks); else raises the
        store's typed error for ``exc`` (or ``exc``)."""
        typed = self.store.backend.translate_error(exc, f"reading {self.path!r}")
        if typed is None or isinstance(typed, StorageAccessError):
            with self._reopen_lock:  # column threads may fail together: one refresh
                if self._file is file and (self.store.filesystem is not self._opened_with
                                           or self.store.backend.refresh_credentials()):
                    self._file, self._opened_with = self.store.open_input(self.path), self.store.filesystem
                fresh = self._file
            if fresh is not file:
                return fresh
        if typed is None:
            raise exc
        raise typed from exc

    def read_many(self, ranges: list[tuple[int, int]], ctx: DecodeContext) -> list[pa.Buffer]:
        """The bytes of each ``(offset, length)`` range, in order: slices of the mapping locally,
        coalesced parallel requests on object stores (a take's chunks from many places)."""
        if self._mapped is not None:
            return [self.read_bytes(offset, length, ctx) for offset, length in ranges]
        file = self._file
        try:
            try:
                return self.store.read_ranges(self.path, ranges, file=file)
            except LanceError:
                raise
            except OSError as exc:
                return self.store.read_ranges(self.path, ranges, file=self._reopened(file, exc))
        except CorruptFileError as exc:
            raise ctx.corrupt(exc.reason) from exc

    def read_global_buffer(self, index: int) -> bytes:
        """The bytes of global buffer ``index`` (0 is the FileDescriptor)."""
        buffers = self.metadata.global_buffers
        if not 0 <= index < len(buffers):
            raise InvalidInputError(f"global buffer {index} does not exist (the file has {len(buffers)})",
                                    path=self.path)
        position, size = buffers[index]
        count_reads(size, 1, self.store.io_counters)
        return bytes(self._read_remote(position, size)) if self._mapped is None else \
            self._mapped.slice(position, size).to_pybytes()

    def page_encoding(self, page: file2_pb2.ColumnMetadata.Page, message_cls: type[Message], column: str | None) -> Message:
        """The encoding proto of a page (2.0 ``ArrayEncoding``, 2.1+ ``PageLayout``), direct or indirect."""
        raw = encoding_bytes(page.encoding, _CountedReads(self._file, self.store), path=self.path, column=column)
        return unpack_any(raw, message_cls, path=self.path, column=column)

    # -- reads -----------------------------------------------------------------------------------
    def read_range(self, plans: list[ColumnPlan], start: int, stop: int) -> list[pa.Array]:
        """Rows ``[start, stop)`` of each planned field."""
        if not 0 <= start <= stop <= self.num_rows:
            raise InvalidInputError(f"row range [{start}, {stop}) is outside the file's {self.num_rows} rows")
        return self._layout.read_range(plans, start, stop)

    def take(self, plans: list[ColumnPlan], indices) -> list[pa.Array]:
        """The rows at ``indices`` (any order, duplicates allowed) of each planned field."""
        idx = np.asarray(indices)
        if idx.ndim != 1:
            raise InvalidInputError("take indices must be one-dimensional")
        if idx.size and (idx.dtype.kind not in "iu" or int(idx.min()) < 0 or int(idx.max()) >= self.num_rows):
            raise InvalidInputError(f"take indices must be integers in [0, {self.num_rows})")
        idx = idx.astype(np.int64, copy=False)
        ordered = idx.size < 2 or bool(np.all(idx[1:] > idx[:-1]))
        if ordered:
            rows, inverse = idx, None
        else:
            rows, inverse = np.unique(idx, return_inverse=True)
        arrays = self._layout.take(plans, rows)
        return [a if inverse is None else a.take(pa.array(inverse.ravel())) for a in arrays]


# -- helpers -------------------------------------------------------------------------------------


class _CountedReads:
    """An open file whose ``read_at`` calls count as reads (process-wide and on the store): the
    footer, metadata and indirect encodings read outside the page reads."""

    def __init__(self, file: pa.NativeFile, store: ObjectStore) -> None:
        self._file, self._store = file, store

    def read_at(self, length: int, offset: int) -> Any:
        data = self._file.read_at(length, offset)
        count_reads(len(data), 1, self._store.io_counters)
        return data


def _open(store: ObjectStore, path: str) -> tuple[pa.NativeFile, pa.Buffer | None]:
    """Open a data file; local files are memory-mapped (data files are immutable once written)."""
    full = store.local_path(path)
    if full is not None:
        try:
            mapped = pa.memory_map(full, "r")
        except FileNotFoundError as exc:
            raise CorruptFileError("file is missing", table=store.uri, path=path) from exc
        except (OSError, pa.ArrowException):
            pass  # e.g. an empty file cannot be mapped: fall back to plain reads
        else:
            return mapped, mapped.read_buffer()
    return store.open_input(path), None
