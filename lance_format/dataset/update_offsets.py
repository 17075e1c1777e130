"""pylance's ``LanceOperation.Update.updated_fragment_offsets``: per fragment, the physical row
offsets an update matched, as portable RoaringBitmap bytes. pylance 14 stores them in the Update
message's field 10 (``map<uint64, bytes> updated_fragment_offset_bitmaps``), which this engine's
protobuf classes do not name: they are written and read here as that field's raw map entries."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf import empty_pb2, unknown_fields
from pyroaring import BitMap

from lance_format.errors import ArgumentTypeError, InvalidInputError

_FIELD = 10  # updated_fragment_offset_bitmaps


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def encode_offsets(offsets: Mapping[int, bytes] | None) -> bytes:
    """The map entries of ``offsets`` as wire bytes of field 10 (to merge into an Update body).

    Raises
    ------
    InvalidInputError
        A value that is not portable RoaringBitmap bytes (also a ValueError, as in pylance).
    """
    if not offsets:
        return b""
    if not isinstance(offsets, Mapping):
        raise ArgumentTypeError(f"updated_fragment_offsets must be a dict of fragment id -> bytes, got "
                                f"{type(offsets).__name__}")
    wire = bytearray()
    for key in sorted(offsets):
        value = bytes(offsets[key])
        try:
            BitMap.deserialize(value)
        except (ValueError, OverflowError, MemoryError) as error:
            raise InvalidInputError(f"updated_fragment_offsets[{key}]: invalid portable RoaringBitmap bytes: "
                                    f"{error}") from None
        entry = (b"\x08" + _varint(int(key)) if key else b"") + b"\x12" + _varint(len(value)) + value
        wire += _varint(_FIELD << 3 | 2) + _varint(len(entry)) + entry
    return bytes(wire)


def decode_offsets(update_body: Any) -> dict[int, bytes] | None:
    """The offsets an Update body carries in field 10, or None when it has none."""
    found: dict[int, bytes] = {}
    for item in unknown_fields.UnknownFieldSet(update_body):
        if item.field_number != _FIELD:
            continue
        entry = empty_pb2.Empty.FromString(item.data)
        key, value = 0, b""
        for part in unknown_fields.UnknownFieldSet(entry):
            if part.field_number == 1:
                key = int(part.data)
            elif part.field_number == 2:
                value = bytes(part.data)
        found[key] = value
    return found or None


__all__ = ["encode_offsets", "decode_offsets"]
