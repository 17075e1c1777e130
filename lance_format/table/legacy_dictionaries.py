"""Dictionary values of legacy (0.1) tables, which live in every manifest file.

A legacy table's dictionary fields keep their values outside the data files: each manifest
file starts with them (a var-binary page, or a plain page for integer values) and the
manifest's ``Field.dictionary`` gives their offset and count. Every new manifest must write
them again; a commit carries them over from the manifest it builds on.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_format.errors import UnsupportedFeatureError
from lance_format.io import ObjectStore
from lance_format.proto import table_pb2

LEGACY_STORAGE = "0.1"


def _dictionary_fields(manifest: table_pb2.Manifest) -> list:
    if manifest.data_format.version != LEGACY_STORAGE:
        return []
    return [f for f in manifest.fields if f.logical_type.startswith("dict:")]


def carried_dictionaries(store: ObjectStore, sources: list[tuple[str, table_pb2.Manifest]],
                         new: table_pb2.Manifest) -> dict[int, pa.Array]:
    """Dictionary values (by field id) the manifest ``new`` must hold, read from ``sources``
    (path and manifest of the versions it is built from); empty when it needs none."""
    if not _dictionary_fields(new):
        return {}
    from lance_format.file.legacy_v0_1 import manifest_dictionaries

    values: dict[int, pa.Array] = {}
    for path, manifest in sources:
        if _dictionary_fields(manifest):
            for field_id, array in manifest_dictionaries(store, path, manifest.fields).items():
                values.setdefault(field_id, array)
    return values


def dictionary_prefix(manifest: table_pb2.Manifest, dictionaries: dict[int, pa.Array] | None) -> bytes:
    """The bytes that open a legacy manifest file: its dictionary values. Sets each dictionary
    field's ``Field.dictionary`` (offset, count) in ``manifest`` to point at them."""
    out = bytearray()
    for field in _dictionary_fields(manifest):
        values = (dictionaries or {}).get(field.id)
        if values is None:
            raise UnsupportedFeatureError(
                f"the dictionary values of legacy field {field.name!r} are unknown, so its manifest cannot be written",
                column=field.name,
            )
        offset, data = encode_values(values, len(out))
        out += data
        field.dictionary.offset = offset
        field.dictionary.length = len(values)
    return bytes(out)


def encode_values(values: pa.Array, start: int) -> tuple[int, bytes]:
    """(offset of the page, bytes) of dictionary ``values`` written at file position ``start``.

    Strings/binary: the value bytes, then ``n + 1`` i64 absolute positions (the offset points at
    them); integers: the plain values.
    """
    data_type = values.type
    if pa.types.is_integer(data_type):
        width = data_type.bit_width // 8
        buf = values.buffers()[1]
        return start, bytes(buf)[values.offset * width : (values.offset + len(values)) * width]
    large = pa.types.is_large_string(data_type) or pa.types.is_large_binary(data_type)
    if not (large or pa.types.is_string(data_type) or pa.types.is_binary(data_type)):
        raise UnsupportedFeatureError(f"legacy dictionary values of type {data_type} are not supported")
    dtype = np.dtype(np.int64 if large else np.int32)
    raw = np.frombuffer(values.buffers()[1], dtype, len(values) + 1, values.offset * dtype.itemsize)
    offsets = raw.astype(np.int64)
    first, last = int(offsets[0]), int(offsets[-1])
    body = bytes(values.buffers()[2])[first:last] if last > first else b""
    positions = (offsets - first + start).astype("<i8").tobytes()
    return start + len(body), body + positions


__all__ = ["carried_dictionaries", "dictionary_prefix", "encode_values", "LEGACY_STORAGE"]
