"""Writing blob v1 columns (``large_binary`` with ``lance-encoding:blob``) as pylance 14 does,
file versions 2.0 and 2.1.

A blob's bytes never enter a page. When a batch arrives, the bytes of every non-empty, non-null
blob of the batch (blob columns in field order, rows in order) are written straight into the data
file at its current end, each padded to 64 bytes, *before* any page the batch completes. The column
itself stores one description per row, ``(position, size)`` as two u64 in a packed struct:

- an empty blob is ``(0, 0)``;
- a null blob is ``(1, 0)`` in 2.0 (the description is not null) and ``(def << 16 | rep, 0)`` in
  2.1, where ``def``/``rep`` are its rep/def levels (a top-level null is ``def = 1``).

2.0 stores the descriptions as a ``packed_struct`` page in a column whose ``ColumnEncoding`` is
``blob { inner: values }``; 2.1 writes the descriptions as a packed struct column (mini-block,
``ALL_VALID_ITEM``) and wraps each page layout in ``BlobLayout`` whose ``layers`` carry the blob
field's own validity (``NULLABLE_ITEM`` when the batch had nulls; a batch whose validity differs
from the previous one's starts a new page).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from lance_format.encodings.array_v2_0.encode import EncodedPage, flat, no_nulls
from lance_format.encodings.structural.encode_page import StructuralFieldWriter
from lance_format.errors import UnsupportedFeatureError
from lance_format.file.container import PAD_BYTE, PAGE_BUFFER_ALIGNMENT
from lance_format.file.writer_v2_0 import ColumnWriter, EmitPage
from lance_format.proto import encodings_v2_0_pb2 as pb20
from lance_format.proto import encodings_v2_1_pb2 as pb21
from lance_format.schema import LanceField

DESCRIPTION_TYPE = pa.struct([pa.field("position", pa.uint64(), False), pa.field("size", pa.uint64(), False)])
# 2.0 marks a null blob with this position (size 0); 2.1 puts its rep/def levels there instead
NULL_POSITION_V2_0 = 1
_DEF_SHIFT = 16


def check_blob_v1_field(lance_field: LanceField, path: str | None, *, top_level: bool) -> None:
    """Refuse blob v1 fields this writer cannot store the way pylance does, naming the column."""
    if not top_level:
        raise UnsupportedFeatureError(
            f"writing blob column {lance_field.name!r} nested inside another field is not supported",
            path=path, column=lance_field.name)
    if not pa.types.is_large_binary(lance_field.data_type):
        raise UnsupportedFeatureError(
            f"blob column {lance_field.name!r} has type {lance_field.data_type}; blob columns "
            "(lance-encoding:blob) must be large_binary", path=path, column=lance_field.name)


def out_of_line(array: pa.Array, base: int, minor: int | None) -> tuple[pa.StructArray, np.ndarray]:
    """The descriptions of a ``large_binary`` chunk whose bytes go at file position ``base``,
    and those bytes as written (each blob padded to 64 bytes). ``minor`` is the 2.x file
    version's minor number, ``None`` for 2.0."""
    n = len(array)
    offsets = np.frombuffer(array.buffers()[1], np.int64, n + 1, array.offset * 8) if n else np.zeros(1, np.int64)
    sizes = np.diff(offsets).astype(np.uint64)
    valid = np.ones(n, bool) if array.null_count == 0 else np.asarray(array.is_valid())
    sizes[~valid] = 0
    stored = sizes > 0
    padded = np.where(stored, sizes + ((-sizes.astype(np.int64)) % PAGE_BUFFER_ALIGNMENT).astype(np.uint64), 0)
    ends = np.cumsum(padded, dtype=np.uint64)
    starts = ends - padded
    positions = np.where(stored, starts + np.uint64(base), np.uint64(0))
    if minor is None:
        positions[~valid] = NULL_POSITION_V2_0
    else:
        positions[~valid] = np.uint64(1 << _DEF_SHIFT)  # top level: def 1, no rep
    descriptions = pa.StructArray.from_arrays(
        [pa.array(positions, pa.uint64()), pa.array(sizes, pa.uint64())], fields=list(DESCRIPTION_TYPE))
    total = int(ends[-1]) if n else 0
    payload = np.full(total, PAD_BYTE, np.uint8)
    if total:
        # the stored values' bytes back to back; a mask of where they land in the padded layout
        kept = array.filter(pa.array(stored)) if not stored.all() else array
        kept_offsets = np.frombuffer(kept.buffers()[1], np.int64, len(kept) + 1, kept.offset * 8)
        data = np.frombuffer(kept.buffers()[2], np.uint8)[kept_offsets[0]:kept_offsets[-1]]
        marks = np.zeros(total + 1, np.int8)
        first = starts[stored].astype(np.int64)
        marks[first] += 1  # starts are distinct, and so are ends
        marks[first + sizes[stored].astype(np.int64)] -= 1
        payload[np.cumsum(marks[:-1], dtype=np.int8).astype(bool)] = data
    return descriptions, payload


class BlobColumnWriterV2_0(ColumnWriter):
    """2.0: buffers descriptions and writes them as ``packed_struct`` pages (like a fixed-width
    leaf: a page once ``max_page_bytes`` of descriptions have accumulated)."""

    def __init__(self, column: int, name: str, max_page_bytes: int, emit: EmitPage) -> None:
        super().__init__(column, name, max_page_bytes, emit)
        self.chunks: list[pa.StructArray] = []
        self.buffered = 0

    def append(self, array: pa.Array) -> None:
        self.chunks.append(array)
        self.buffered += 16 * len(array)
        if self.buffered >= self.max_page_bytes:
            self.flush()

    def flush(self) -> None:
        if not self.chunks:
            return
        chunks, total = self.chunks, self.buffered
        self.chunks, self.buffered = [], 0
        array = pa.concat_arrays(chunks) if len(chunks) > 1 else chunks[0]
        parts = max(1, min(math.ceil(total / self.max_page_bytes), len(array)))
        step = math.ceil(len(array) / parts) if len(array) else 0
        for start in range(0, len(array), step) if step else [0]:
            self.emit(self.column, _packed_description_page(array.slice(start, step) if step else array))


def _packed_description_page(array: pa.StructArray) -> EncodedPage:
    rows = np.empty((len(array), 2), np.uint64)
    rows[:, 0] = array.field(0).to_numpy(zero_copy_only=False)
    rows[:, 1] = array.field(1).to_numpy(zero_copy_only=False)
    page = EncodedPage(length=len(array))
    index = page.add(rows.tobytes())
    packed = page.encoding.packed_struct
    for _ in range(2):
        packed.inner.append(no_nulls(flat(64, index)))
    packed.buffer.buffer_index = index
    packed.buffer.buffer_type = pb20.Buffer.page
    return page


BLOB_COLUMN_ENCODING_V2_0 = pb20.ColumnEncoding(blob=pb20.Blob(inner=pb20.ColumnEncoding(values={})))

EmitStructural = Callable[[int, list, pb21.PageLayout, int, int], None]


class BlobFieldWriterV2_1:
    """2.1: the descriptions as a packed struct column, each page wrapped in ``BlobLayout``."""

    def __init__(self, lance_field: LanceField, column: int, max_page_bytes: int, emit: EmitStructural) -> None:
        description = LanceField(
            name=lance_field.name, id=lance_field.id, logical_type="struct", nullable=lance_field.nullable,
            metadata={"lance-encoding:packed": b"true"},
            children=[LanceField(name=f.name, id=-1, logical_type="uint64", nullable=False, parent_id=lance_field.id)
                      for f in DESCRIPTION_TYPE])
        self._emit = emit
        self._layer = pb21.RepDefLayer.REPDEF_ALL_VALID_ITEM
        self._inner = StructuralFieldWriter(description, column, 1, max_page_bytes, self._wrap)

    def append(self, descriptions: pa.StructArray, has_nulls: bool) -> None:
        layer = pb21.RepDefLayer.REPDEF_NULLABLE_ITEM if has_nulls else pb21.RepDefLayer.REPDEF_ALL_VALID_ITEM
        if layer != self._layer:
            # a page has one meaning of its levels: pylance ends the page when a batch's differs
            self._inner.flush()
            self._layer = layer
        self._inner.append(descriptions)

    def _wrap(self, column: int, buffers: list, layout: pb21.PageLayout, length: int, first_row: int) -> None:
        wrapped = pb21.PageLayout()
        wrapped.blob_layout.inner_layout.CopyFrom(layout)
        wrapped.blob_layout.layers.append(self._layer)
        self._emit(column, buffers, wrapped, length, first_row)

    def flush(self) -> None:
        self._inner.flush()

    def finish(self) -> None:
        self.flush()


__all__ = ["BLOB_COLUMN_ENCODING_V2_0", "BlobColumnWriterV2_0", "BlobFieldWriterV2_1", "DESCRIPTION_TYPE",
           "check_blob_v1_field", "out_of_line"]
