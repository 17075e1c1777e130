"""Deletion files (``_deletions/{fragment}-{read_version}-{id}.arrow|.bin``), as pylance 14 writes them.

A deletion file holds the physical offsets of a fragment's deleted rows:

* ``.arrow`` (``ARROW_ARRAY``): an Arrow IPC *file* with one record batch whose schema is exactly
  ``row_id: uint32 not null`` (no metadata); pylance compresses the body with ZSTD.
* ``.bin`` (``BITMAP``): a 32-bit RoaringBitmap in the portable serialization (what
  ``pyroaring.BitMap.serialize()`` writes when ``run_optimize`` is not called).

Every new deletion file holds the union of the old and new deletions.
"""

from __future__ import annotations

import array
import os
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
from pyroaring import BitMap

from lance_format.errors import CorruptFileError, InvalidInputError, LanceError, UnsupportedFeatureError
from lance_format.proto import table_pb2
from lance_format.table.u64_segment import sorted_unique

# Lance keeps a hash set up to this many deletions and switches to a roaring bitmap above it.
BITMAP_THRESHOLD = 5000
DELETIONS_DIR = "_deletions"

_SCHEMA = pa.schema([pa.field("row_id", pa.uint32(), nullable=False)])
_SUFFIX = {
    table_pb2.DeletionFile.ARROW_ARRAY: "arrow",
    table_pb2.DeletionFile.BITMAP: "bin",
}


def deletion_file_path(fragment_id: int, deletion_file_pb: table_pb2.DeletionFile) -> str:
    """Table-relative path ``_deletions/{fragment_id}-{read_version}-{id}.{arrow|bin}``."""
    suffix = _SUFFIX.get(deletion_file_pb.file_type)
    if suffix is None:
        raise UnsupportedFeatureError(
            f"unknown deletion file type {deletion_file_pb.file_type} for fragment {fragment_id}"
        )
    return f"{DELETIONS_DIR}/{fragment_id}-{deletion_file_pb.read_version}-{deletion_file_pb.id}.{suffix}"


def deleted_row_count(fragment: table_pb2.DataFragment) -> int:
    """Rows the fragment's deletion file removes, as the manifest records them (0 without one).

    Official Lance always fills ``num_deleted_rows``; 0 with a deletion file present means a
    writer that did not, and only reading the file can tell.
    """
    return fragment.deletion_file.num_deleted_rows if fragment.HasField("deletion_file") else 0


def live_row_count(fragment: table_pb2.DataFragment) -> int:
    """Physical rows minus the recorded deletions: the fragment's row count from metadata alone."""
    return fragment.physical_rows - deleted_row_count(fragment)


# -- decoding ----------------------------------------------------------------------------------
# Deletion files are tiny: handing their decoding to Arrow's thread pool costs more than it does.
_READ_OPTIONS = ipc.IpcReadOptions(use_threads=False)


def decode_arrow_deletions(data: bytes, path: str | None = None) -> np.ndarray:
    """Sorted unique uint32 offsets of an ``.arrow`` deletion file; CorruptFileError otherwise."""
    try:
        reader = ipc.open_file(pa.py_buffer(data), options=_READ_OPTIONS)
        if reader.num_record_batches != 1:
            raise CorruptFileError(
                f"expected exactly one batch in deletion file, got {reader.num_record_batches}", path=path
            )
        batch = reader.get_batch(0)
    except LanceError:  # already says what is wrong (LanceErrors are also OSError/ValueError)
        raise
    except (pa.ArrowException, ValueError, OSError) as exc:  # ArrowInvalid and IO errors
        raise CorruptFileError(f"unreadable Arrow IPC deletion file: {exc}", path=path) from exc
    # Lance compares the whole schema, metadata included, with `row_id: UInt32 not null`.
    if not batch.schema.equals(_SCHEMA, check_metadata=True) or batch.schema.field(0).metadata:
        raise CorruptFileError(
            f"deletion file schema must be exactly 'row_id: uint32 not null', got {batch.schema}",
            path=path,
        )
    column = batch.column(0)
    if column.null_count:
        raise CorruptFileError("null values are not allowed in deletion files", path=path)
    return sorted_unique(column.to_numpy(zero_copy_only=False).astype(np.uint32, copy=False))


def decode_bitmap_deletions(data: bytes, path: str | None = None) -> np.ndarray:
    """Sorted uint32 offsets of a ``.bin`` (portable 32-bit roaring) deletion file."""
    try:
        bitmap = BitMap.deserialize(bytes(data))
    except (ValueError, IndexError, MemoryError) as exc:
        raise CorruptFileError(f"invalid roaring bitmap in deletion file: {exc}", path=path) from exc
    return np.frombuffer(bitmap.to_array(), dtype=np.uint32).copy()


def read_deletion_file(store: Any, fragment_id: int, deletion_file_pb: table_pb2.DeletionFile) -> np.ndarray:
    """Deleted physical offsets of a fragment: sorted, unique ``uint32``.

    Every problem (missing file, bad IPC, wrong schema, nulls, garbage bitmap) is a
    CorruptFileError naming the file.
    """
    path = deletion_file_path(fragment_id, deletion_file_pb)
    try:
        data = store.read_bytes(path)
    except CorruptFileError as exc:
        raise exc.with_context(path=path)
    except OSError as exc:
        raise CorruptFileError(f"cannot read deletion file: {exc}", path=path) from exc
    if deletion_file_pb.file_type == table_pb2.DeletionFile.BITMAP:
        return decode_bitmap_deletions(data, path)
    return decode_arrow_deletions(data, path)


# -- encoding ----------------------------------------------------------------------------------
def _normalize(deleted: np.ndarray) -> np.ndarray:
    values = np.asarray(deleted)
    if values.ndim != 1:
        raise InvalidInputError("deleted offsets must be a 1-D array")
    if values.size == 0:
        raise InvalidInputError("no deletions: a fragment without deletions has no deletion file")
    if values.dtype.kind not in "iu":
        raise InvalidInputError(f"deleted offsets must be integers, got {values.dtype}")
    if values.min() < 0 or values.max() > np.iinfo(np.uint32).max:
        raise InvalidInputError("deleted offsets must fit in uint32")
    return sorted_unique(values.astype(np.uint32))


def encode_arrow_deletions(deleted: np.ndarray) -> bytes:
    """Arrow IPC file with one ``row_id: uint32 not null`` batch, ZSTD-compressed like pylance."""
    values = _normalize(deleted)
    batch = pa.record_batch([pa.array(values, type=pa.uint32())], schema=_SCHEMA)
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, _SCHEMA, options=ipc.IpcWriteOptions(compression="zstd")) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def encode_bitmap_deletions(deleted: np.ndarray) -> bytes:
    """Portable 32-bit roaring serialization; no run_optimize, so bytes equal pylance's."""
    values = _normalize(deleted)
    bitmap = BitMap()
    # update() with array.array('I') is pyroaring's bulk path (no per-value Python loop). Not
    # BitMap(values): the constructor run-optimizes by default, and roaring-rs (pylance) never
    # writes run containers, so the bytes would differ for contiguous runs.
    bitmap.update(array.array("I", values.tobytes()))
    return bitmap.serialize()


def write_deletion_file(
    store: Any,
    fragment_id: int,
    read_version: int,
    deleted: np.ndarray,
    *,
    file_type: Literal["auto", "arrow", "bitmap"] = "auto",
) -> table_pb2.DeletionFile:
    """Write the deletion file for the UNION of old and new deleted offsets; return its DeletionFile.

    ``auto`` chooses ``.bin`` above ``BITMAP_THRESHOLD`` (5000) offsets, ``.arrow`` otherwise.
    (pylance also writes ``.bin`` for exactly 5000 when a single scan batch deletes them all
    at once; both kinds read back the same, so the simple rule is used.)
    """
    values = _normalize(deleted)
    if file_type == "auto":
        use_bitmap = values.size > BITMAP_THRESHOLD
    elif file_type in ("arrow", "bitmap"):
        use_bitmap = file_type == "bitmap"
    else:
        raise InvalidInputError(f"file_type must be 'auto', 'arrow' or 'bitmap', got {file_type!r}")
    pb = table_pb2.DeletionFile(
        file_type=table_pb2.DeletionFile.BITMAP if use_bitmap else table_pb2.DeletionFile.ARROW_ARRAY,
        read_version=read_version,
        id=int.from_bytes(os.urandom(8), "little"),
        num_deleted_rows=int(values.size),
    )
    data = encode_bitmap_deletions(values) if use_bitmap else encode_arrow_deletions(values)
    store.write_bytes(deletion_file_path(fragment_id, pb), data)
    return pb
