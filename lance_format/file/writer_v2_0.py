"""Column writers of Lance file version 2.0 (the byte layout of pylance 14's ``version="2.0"``).

Every schema field, parents included, gets one column (depth-first order), whose pages are
``ArrayEncoding`` trees encoded by :mod:`lance_format.encodings.array_v2_0`. Leaf columns buffer
their data and write a page once more than ``max_page_bytes`` have accumulated, so memory stays
bounded by the page size, not the file size. Like pylance's accumulation queues, they count an
array at the memory pylance would see: of arrays from Python, their buffers as arrow-rs imports
them (:func:`imported_nbytes`); in a compaction, the arrays pylance's decoders would have built
(:data:`legacy_decoded_memory_model`); several buffered arrays make one page. List columns
write an offsets page and then flush their item column, because a 2.0 item page must never be
shared by two offsets pages (pylance's reader relies on it). Struct columns write one header page (``SimpleStruct``, no buffers) at the end.
Given the same batches, the output is byte-identical to pylance 14's (checked by the tests).

:class:`~lance_format.file.writer.DataFileWriter` drives these writers and places their pages
in the file.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextvars import ContextVar

import numpy as np
import pyarrow as pa

from lance_format.encodings.array_v2_0.encode import (
    EncodedPage,
    check_encodable,
    compression_from_metadata,
    encode_leaf_pages,
    encode_list_offsets,
    leaf_nbytes,
    struct_page,
)
from lance_format.encodings.buffers import validity_bools
from lance_format.errors import UnsupportedFeatureError
from lance_format.schema import LanceField

EmitPage = Callable[[int, EncodedPage], None]
"""Receives each finished page with its column number (the file writer writes it out)."""

# The bytes a buffered leaf array counts for (None: its length in bytes). A compaction of 2.0
# files sets it to the memory pylance's 2.0 decoders allocate for the arrays it reads: pylance's
# writer flushes a page once that memory passes the page size, which decides where it cuts files
# (lance_format.dataset.maintenance.decoded_memory_v2_0).
legacy_decoded_memory_model: ContextVar[Callable[[pa.Array], int | None] | None] = ContextVar(
    "legacy_decoded_memory_model", default=None)

_BYTE_ARRAY_STRUCT = 120  # size_of arrow-rs GenericByteArray<i32>
_PRIMITIVE_STRUCT = 96  # size_of arrow-rs PrimitiveArray<T>


def _fixed_width(data_type: pa.DataType) -> bool:
    t = pa.types
    return (t.is_integer(data_type) or t.is_floating(data_type) or t.is_timestamp(data_type) or t.is_date(data_type)
            or t.is_time(data_type) or t.is_duration(data_type))


def imported_nbytes(array: pa.Array, whole: bool = False) -> int | None:
    """The memory pylance's writer counts for ``array`` handed over from Python (arrow's C data
    interface), None where not modelled.

    arrow-rs sizes an imported buffer by the array's offset plus length, so a slice counts every
    row before it too; a struct's children and a list's items are exported (and counted) whole
    (``whole``: their buffers' full sizes). A validity bitmap counts only when there are nulls."""
    data_type = array.type
    buffers = array.buffers()
    end = array.offset + len(array)
    if whole:
        has_validity = buffers[0] is not None
    else:
        has_validity = array.null_count > 0
    validity = (buffers[0].size if whole else (end + 7) // 8) if has_validity and buffers[0] is not None else 0
    if _fixed_width(data_type) and len(buffers) == 2 and buffers[1] is not None:
        values = buffers[1].size if whole else end * data_type.byte_width
        return values + validity + _PRIMITIVE_STRUCT
    t = pa.types
    if (t.is_string(data_type) or t.is_binary(data_type) or t.is_large_string(data_type)
            or t.is_large_binary(data_type)) and len(buffers) == 3 and buffers[1] is not None:
        width = 8 if t.is_large_string(data_type) or t.is_large_binary(data_type) else 4
        if whole:
            return buffers[1].size + (buffers[2].size if buffers[2] is not None else 0) + validity + _BYTE_ARRAY_STRUCT
        last = int(np.frombuffer(buffers[1], np.int64 if width == 8 else np.int32, 1, end * width)[0])
        return (end + 1) * width + last + validity + _BYTE_ARRAY_STRUCT
    return None


class ColumnWriter:
    """Buffers one field's data and emits pages for it (and for its child columns)."""

    def __init__(self, column: int, name: str, max_page_bytes: int, emit: EmitPage) -> None:
        self.column = column
        self.name = name
        self.max_page_bytes = max_page_bytes
        self.emit = emit

    def append(self, array: pa.Array) -> None:
        raise NotImplementedError

    def append_child(self, array: pa.Array) -> None:
        """Buffer ``array``, a struct's child or a list's items (which pylance counts whole)."""
        self.append(array)

    def flush(self) -> None:
        raise NotImplementedError

    def finish(self) -> None:
        """Emit final pages (struct headers) after everything was flushed."""


class _LeafWriter(ColumnWriter):
    def __init__(self, column: int, name: str, max_page_bytes: int, emit: EmitPage, lance_field: LanceField,
                 split_page_bytes: int | None = None) -> None:
        super().__init__(column, name, max_page_bytes, emit)
        # pylance splits a single buffered array into pages past its max_page_bytes (32 MiB),
        # counting the array's memory; None: past max_page_bytes of the array's own rows
        self.split_page_bytes = split_page_bytes
        self.compression = compression_from_metadata(lance_field.metadata)
        self.chunks: list[pa.Array] = []
        self.buffered = 0

    def append(self, array: pa.Array) -> None:
        self._buffer(array, whole=False)

    def append_child(self, array: pa.Array) -> None:
        self._buffer(array, whole=True)

    def _buffer(self, array: pa.Array, whole: bool) -> None:
        # Empty chunks are kept too: pylance writes a 0-row page for them (e.g. items of all-null lists).
        self.chunks.append(array)
        model = legacy_decoded_memory_model.get()
        modelled = model(array) if model is not None else imported_nbytes(array, whole)
        if modelled is None:
            self.buffered += leaf_nbytes(array)
            if self.buffered >= self.max_page_bytes:
                self.flush()
            return
        # pylance's accumulation queue: a page once the arrays' memory is strictly over the limit
        self.buffered += modelled
        if self.buffered > self.max_page_bytes:
            self.flush()

    def flush(self) -> None:
        if not self.chunks:
            return
        chunks, buffered = self.chunks, self.buffered
        self.chunks, self.buffered = [], 0
        if pa.types.is_dictionary(chunks[0].type):
            pages = encode_leaf_pages(chunks, column=self.name)
        else:
            array = chunks[0] if len(chunks) == 1 else pa.concat_arrays(chunks)
            # Like pylance, several buffered arrays make one page; one oversized array is split
            # into equal row ranges.
            if self.split_page_bytes is not None:
                size, limit = buffered, self.split_page_bytes
            else:
                size, limit = leaf_nbytes(array), self.max_page_bytes
            parts = 1 if len(chunks) > 1 else max(1, min(math.ceil(size / limit), len(array)))
            step = math.ceil(len(array) / parts) if len(array) else 0
            pieces = [array.slice(i, step) for i in range(0, len(array), step)] if step else [array]
            pages = [p for piece in pieces for p in encode_leaf_pages([piece], self.compression, column=self.name)]
        for page in pages:
            self.emit(self.column, page)


class _ListWriter(ColumnWriter):
    def __init__(self, column: int, name: str, max_page_bytes: int, emit: EmitPage, child: ColumnWriter) -> None:
        super().__init__(column, name, max_page_bytes, emit)
        self.child = child
        self.chunks: list[tuple[np.ndarray, np.ndarray | None]] = []
        self.buffered = 0

    def append(self, array: pa.Array) -> None:
        large = pa.types.is_large_list(array.type)
        dtype = np.int64 if large else np.int32
        max_rows = max(1, self.max_page_bytes // 8)
        n = len(array)
        # Feed at most one offsets page worth of lists at a time so that offsets pages (and the
        # item flush they force) fall on chunk boundaries.
        for start in range(0, max(n, 1), max_rows):
            piece = array.slice(start, max_rows) if n > max_rows else array
            count = len(piece)
            raw = piece.buffers()[1]
            if count == 0 or raw is None:
                offsets = np.zeros(1, dtype)
            else:
                offsets = np.frombuffer(raw, dtype, count + 1, piece.offset * np.dtype(dtype).itemsize)
            first, last = int(offsets[0]), int(offsets[-1])
            self.chunks.append((offsets, validity_bools(piece)))
            self.child.append_child(piece.values.slice(first, last - first))
            # pylance queues the offsets (sized as imported: every offset up to the last; arrays
            # its decoder built for a compaction: their own) and the validity (an empty boolean
            # array without nulls)
            end = count if legacy_decoded_memory_model.get() is not None else piece.offset + count
            width = 8 if large else 4
            self.buffered += (end + 1) * width + _PRIMITIVE_STRUCT + ((end + 7) // 8 if piece.null_count else 0) + 80
            if self.buffered > self.max_page_bytes:
                self.flush()

    def flush(self) -> None:
        if self.chunks:
            page = encode_list_offsets(self.chunks)
            self.chunks, self.buffered = [], 0
            self.emit(self.column, page)
        self.child.flush()

    def finish(self) -> None:
        self.child.finish()


class _StructWriter(ColumnWriter):
    def __init__(self, column: int, name: str, max_page_bytes: int, emit: EmitPage, children: list[ColumnWriter]) -> None:
        super().__init__(column, name, max_page_bytes, emit)
        self.children = children
        self.rows = 0

    def append(self, array: pa.Array) -> None:
        if array.null_count:
            raise UnsupportedFeatureError(
                "file version 2.0 does not encode struct validity (null structs); "
                "use file version 2.1 or later",
                column=self.name,
            )
        for i, child in enumerate(self.children):
            child.append_child(array.field(i))
        self.rows += len(array)

    def flush(self) -> None:
        for child in self.children:
            child.flush()

    def finish(self) -> None:
        self.emit(self.column, struct_page(self.rows))
        for child in self.children:
            child.finish()


def make_column_writer(
    lance_field: LanceField, name: str, field_ids: list[int], max_page_bytes: int, emit: EmitPage, path: str | None,
    split_page_bytes: int | None = None,
) -> ColumnWriter:
    """The writer of ``lance_field`` and its children; appends their field ids to ``field_ids``,
    whose positions are the column numbers (parents before their children). ``split_page_bytes``:
    see :class:`~lance_format.file.writer.DataFileWriter`."""
    column = len(field_ids)
    field_ids.append(lance_field.id)
    data_type = lance_field.data_type
    if pa.types.is_struct(data_type):
        children = [
            make_column_writer(c, f"{name}.{c.name}", field_ids, max_page_bytes, emit, path, split_page_bytes)
            for c in lance_field.children
        ]
        return _StructWriter(column, name, max_page_bytes, emit, children)
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        child = lance_field.children[0]
        child_writer = make_column_writer(child, f"{name}.{child.name}", field_ids, max_page_bytes, emit, path,
                                          split_page_bytes)
        return _ListWriter(column, name, max_page_bytes, emit, child_writer)
    if pa.types.is_map(data_type):
        raise UnsupportedFeatureError(
            f"map column {name!r} cannot be written in file version 2.0 (pylance 14: \"Lance v2.0 has no "
            "field encoding\" for maps); use file version 2.2",
            path=path,
            column=name,
        )
    if pa.types.is_fixed_size_list(data_type) and pa.types.is_struct(data_type.value_type):
        raise UnsupportedFeatureError(
            "fixed_size_list of struct cannot be stored in file version 2.0 "
            "(pylance's own 2.0 reader fails on it)",
            path=path,
            column=name,
        )
    check_encodable(data_type, name)
    return _LeafWriter(column, name, max_page_bytes, emit, lance_field, split_page_bytes)
