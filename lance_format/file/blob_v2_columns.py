"""Writing blob v2 columns (the ``lance.blob.v2`` extension struct, file version 2.2) as pylance 14
does.

The column's values are ``struct<data: large_binary, uri: string[, position, size]>``; the data
file stores one descriptor per row, ``struct<kind: u8, position: u64, size: u64, blob_id: u32,
blob_uri: string>`` as a packed struct column (a null blob is a null descriptor), and the bytes by
size (thresholds from the field metadata, pylance's defaults otherwise):

- ``size <= inline`` (64 KiB): kind 0, in the data file like blob v1 (written when the batch
  arrives, each padded to 64 bytes; an empty blob is at the position the next one would take);
- ``inline < size <= dedicated`` (4 MiB): kind 1, appended to the data file's pack sidecar;
- larger: kind 2, a dedicated sidecar of its own.

Sidecars are ``<data file without .lance>/<blob_id>.blob`` (the id as 32 bits, least significant
first, as data file names are written); ids count from 1 per data file, in the order first needed.
External blobs (a ``uri``) are refused.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from lance_format.encodings.structural.encode_page import StructuralFieldWriter
from lance_format.errors import InvalidInputError, UnsupportedFeatureError
from lance_format.file.blob_writers import INLINE as INPUT_INLINE
from lance_format.file.blob_writers import INPUT_TYPE
from lance_format.file.container import PAD_BYTE, PAGE_BUFFER_ALIGNMENT
from lance_format.io.object_store import ObjectStore
from lance_format.proto import encodings_v2_1_pb2 as pb21
from lance_format.proto import file_pb2
from lance_format.schema import LanceField

DESCRIPTOR_TYPE = pa.struct([
    pa.field("kind", pa.uint8(), False), pa.field("position", pa.uint64(), False),
    pa.field("size", pa.uint64(), False), pa.field("blob_id", pa.uint32(), False),
    pa.field("blob_uri", pa.string(), False),
])
INLINE, PACKED, DEDICATED = 0, 1, 2
INLINE_THRESHOLD_KEY = "lance-encoding:blob-inline-size-threshold"
DEDICATED_THRESHOLD_KEY = "lance-encoding:blob-dedicated-size-threshold"
PACK_FILE_THRESHOLD_KEY = "lance-encoding:blob-pack-file-size-threshold"
DEFAULT_INLINE_THRESHOLD = 64 * 1024
DEFAULT_DEDICATED_THRESHOLD = 4 * 1024 * 1024

EmitStructural = Callable[[int, list, pb21.PageLayout, int, int], None]


def sidecar_name(blob_id: int) -> str:
    return format(blob_id, "032b")[::-1] + ".blob"


def _threshold(lance_field: LanceField, key: str, default: int | None) -> int | None:
    raw = lance_field.metadata.get(key)
    if raw is None:
        return default
    try:
        return int(raw.decode() if isinstance(raw, bytes) else raw)
    except ValueError:
        raise InvalidInputError(f"blob column {lance_field.name!r}: {key} is not an integer: {raw!r}",
                                column=lance_field.name) from None


class BlobSidecars:
    """The pack and dedicated sidecar files of one data file (blob ids count from 1)."""

    def __init__(self, store: ObjectStore, data_path: str) -> None:
        self.store = store
        self.folder = data_path.removesuffix(".lance")
        self.next_id = 1
        self.written: list[str] = []
        self._pack: tuple[int, object, int] | None = None  # (blob id, open output, bytes written)

    def _new_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def path(self, blob_id: int) -> str:
        return f"{self.folder}/{sidecar_name(blob_id)}"

    def dedicated(self, data: memoryview) -> int:
        blob_id = self._new_id()
        self.store.write_bytes(self.path(blob_id), bytes(data))
        self.written.append(self.path(blob_id))
        return blob_id

    def packed(self, data: memoryview, limit: int | None) -> tuple[int, int]:
        """(blob id, position) of ``data`` appended to the pack file (a new one past ``limit``)."""
        if self._pack is not None and limit is not None and self._pack[2] and self._pack[2] + len(data) > limit:
            self.close_pack()
        if self._pack is None:
            blob_id = self._new_id()
            self._pack = (blob_id, self.store.open_output(self.path(blob_id)), 0)
            self.written.append(self.path(blob_id))
        blob_id, out, position = self._pack
        out.write(data)  # type: ignore[attr-defined]
        self._pack = (blob_id, out, position + len(data))
        return blob_id, position

    def close_pack(self) -> None:
        if self._pack is not None:
            self._pack[1].close()  # type: ignore[attr-defined]
            self._pack = None

    def abort(self) -> None:
        self.close_pack()
        for path in self.written:
            self.store.delete(path, missing_ok=True)


def check_blob_v2_field(lance_field: LanceField, path: str | None, *, top_level: bool) -> None:
    names = [c.name for c in lance_field.children]
    if not top_level:
        raise UnsupportedFeatureError(
            f"writing blob column {lance_field.name!r} nested inside another field is not supported",
            path=path, column=lance_field.name)
    if names[:2] != ["data", "uri"] and names != INPUT_TYPE.names:
        raise InvalidInputError(f"blob v2 column {lance_field.name!r} must be struct<data, uri[, position, size]> "
                                f"(or BlobDescriptorArrayBuilder's input), got fields {names}",
                                path=path, column=lance_field.name)


def blob_v2_descriptors(array: pa.StructArray, base: int, lance_field: LanceField,
                        sidecars: BlobSidecars) -> tuple[pa.StructArray, np.ndarray]:
    """The descriptors of a chunk of a blob v2 column whose inline bytes go at file position
    ``base``, and those bytes as written (each padded to 64 bytes); packed and dedicated blobs
    are written to ``sidecars``."""
    n = len(array)
    valid = np.ones(n, bool) if array.null_count == 0 else np.asarray(array.is_valid())
    # BlobDescriptorArrayBuilder's input: rows of kind 1/2 name bytes already in sidecars
    referenced = np.zeros(n, bool)
    if array.type.names == INPUT_TYPE.names:
        input_kinds = np.asarray(array.field("kind").fill_null(INPUT_INLINE).to_numpy(), np.uint8)
        if (valid & ~np.isin(input_kinds, (INPUT_INLINE, PACKED, DEDICATED))).any():
            raise UnsupportedFeatureError(f"writing table-managed or external blobs in blob column "
                                          f"{lance_field.name!r} is not supported", column=lance_field.name)
        referenced = valid & (input_kinds != INPUT_INLINE)
    data = array.field("data")  # the chunk's rows (a slice's offset applied)
    uri = array.field("uri")
    has_uri = valid & np.asarray(uri.is_valid())
    if has_uri.any():
        raise UnsupportedFeatureError(f"writing external blobs (a uri) in blob column {lance_field.name!r} "
                                      "is not supported", column=lance_field.name)
    has_data = np.asarray(data.is_valid()) if data.null_count else np.ones(n, bool)
    if (valid & ~has_data & ~referenced).any():
        raise InvalidInputError(f"blob column {lance_field.name!r}: a non-null blob must set data or uri",
                                column=lance_field.name)
    offsets = np.frombuffer(data.buffers()[1], np.int64, n + 1, data.offset * 8) if n else np.zeros(1, np.int64)
    sizes = np.where(valid, np.diff(offsets), 0).astype(np.int64)
    inline_max = _threshold(lance_field, INLINE_THRESHOLD_KEY, DEFAULT_INLINE_THRESHOLD)
    dedicated_max = _threshold(lance_field, DEDICATED_THRESHOLD_KEY, DEFAULT_DEDICATED_THRESHOLD)
    pack_limit = _threshold(lance_field, PACK_FILE_THRESHOLD_KEY, None)
    assert inline_max is not None and dedicated_max is not None
    inlined = valid & ~referenced
    dedicated = inlined & (sizes > dedicated_max)
    packed = inlined & ~dedicated & (sizes > inline_max)
    inline = inlined & ~dedicated & ~packed
    kinds = np.where(dedicated, DEDICATED, np.where(packed, PACKED, INLINE)).astype(np.uint8)
    # inline: padded back to back from base; an empty one sits where the next would start
    padded = np.where(inline & (sizes > 0), sizes + (-sizes) % PAGE_BUFFER_ALIGNMENT, 0)
    ends = np.cumsum(padded)
    starts = ends - padded
    positions = np.where(inline, starts + base, 0).astype(np.uint64)
    blob_ids = np.zeros(n, np.uint32)
    # sidecar blobs are large (over the inline threshold): one write each, in row order
    raw = np.frombuffer(data.buffers()[2], np.uint8) if n and data.buffers()[2] is not None else np.zeros(0, np.uint8)
    for row in np.flatnonzero(dedicated | packed).tolist():
        value = raw[offsets[row]:offsets[row + 1]].data
        if dedicated[row]:
            blob_ids[row] = sidecars.dedicated(value)
        else:
            blob_ids[row], position = sidecars.packed(value, pack_limit)
            positions[row] = position
    total = int(ends[-1]) if n else 0
    payload = np.full(total, PAD_BYTE, np.uint8)
    stored = inline & (sizes > 0)
    if total:
        marks = np.zeros(total + 1, np.int8)
        marks[starts[stored]] += 1
        marks[starts[stored] + sizes[stored]] -= 1
        kept = data.filter(pa.array(stored))
        kept_offsets = np.frombuffer(kept.buffers()[1], np.int64, len(kept) + 1, kept.offset * 8)
        payload[np.cumsum(marks[:-1], dtype=np.int8).astype(bool)] = \
            np.frombuffer(kept.buffers()[2], np.uint8)[kept_offsets[0]:kept_offsets[-1]]
    sizes = np.where(valid, sizes, 0).astype(np.uint64)
    if referenced.any():
        kinds[referenced] = input_kinds[referenced]
        sizes[referenced] = np.asarray(array.field("blob_size").fill_null(0).to_numpy(), np.uint64)[referenced]
        blob_ids[referenced] = np.asarray(array.field("blob_id").fill_null(0).to_numpy(), np.uint32)[referenced]
        given = np.asarray(array.field("position").fill_null(0).to_numpy(), np.uint64)
        positions[referenced] = np.where(input_kinds == PACKED, given, 0)[referenced]
    children = [pa.array(kinds, pa.uint8()), pa.array(positions, pa.uint64()),
                pa.array(sizes, pa.uint64()), pa.array(blob_ids, pa.uint32()),
                pa.array(np.full(n, "", object), pa.string())]
    mask = None if valid.all() else pa.array(~valid)
    return pa.StructArray.from_arrays(children, fields=list(DESCRIPTOR_TYPE), mask=mask), payload


def descriptor_writer(lance_field: LanceField, column: int, max_page_bytes: int,
                      emit: EmitStructural) -> StructuralFieldWriter:
    """The 2.2 writer of the descriptor column (a packed struct, like pylance's)."""
    descriptor = LanceField(
        name=lance_field.name, id=lance_field.id, logical_type="struct", nullable=lance_field.nullable,
        metadata={"lance-encoding:packed": b"true"},
        children=[LanceField(name=f.name, id=-1, logical_type=_LOGICAL[f.type], nullable=False,
                             parent_id=lance_field.id) for f in DESCRIPTOR_TYPE])
    return StructuralFieldWriter(descriptor, column, 2, max_page_bytes, emit)


_LOGICAL = {pa.uint8(): "uint8", pa.uint64(): "uint64", pa.uint32(): "uint32", pa.string(): "string"}


def descriptor_protos(lance_field: LanceField) -> list[file_pb2.Field]:
    """The data file's schema entries for a blob v2 column, as pylance writes them: the descriptor
    struct (metadata ``packed`` and ``blob``) with its children (id and parent id -1)."""
    top = file_pb2.Field(name=lance_field.name, id=lance_field.id, parent_id=-1, logical_type="struct",
                         nullable=lance_field.nullable)
    top.metadata["lance-encoding:blob"] = b"true"  # pylance's order
    top.metadata["lance-encoding:packed"] = b"true"
    children = [file_pb2.Field(name=f.name, id=-1, parent_id=-1, logical_type=_LOGICAL[f.type],
                               encoding=file_pb2.VAR_BINARY if f.type == pa.string() else file_pb2.PLAIN)
                for f in DESCRIPTOR_TYPE]
    return [top, *children]

__all__ = ["BlobSidecars", "DESCRIPTOR_TYPE", "blob_v2_descriptors", "check_blob_v2_field", "descriptor_protos", "descriptor_writer",
           "sidecar_name"]
