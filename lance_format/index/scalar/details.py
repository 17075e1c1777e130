"""Hand-encoded ``index_details`` messages of the zone types (varint fields only).

``lance.table.ZoneMapIndexDetails`` (``protos/index_old.proto``): ``rows_per_zone`` (1, uint64),
``use_seeds`` (2, bool) and ``has_null_bitmap`` (3, bool), all ``optional``, so pylance 14.0.2
writes each, false ones too (``08 80 40 10 00 18 01`` for 8192 rows, no seeds, a null bitmap).
The BLOOMFILTER, LABEL_LIST and NGRAM details messages are empty.
"""

from __future__ import annotations


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_fields(fields: list[tuple[int, int]]) -> bytes:
    """A message of varint ``(field number, value)`` pairs, in the order given."""
    return b"".join(_varint(number << 3) + _varint(value) for number, value in fields)


def decode_fields(data: bytes) -> dict[int, int]:
    """The varint fields of a message (other wire types are skipped)."""
    fields: dict[int, int] = {}
    pos = 0

    def read() -> int:
        nonlocal pos
        shift = result = 0
        while pos < len(data):
            byte = data[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        return result

    while pos < len(data):
        key = read()
        number, wire = key >> 3, key & 7
        if wire == 0:
            fields[number] = read()
        elif wire == 1:
            pos += 8
        elif wire == 2:
            pos += read()
        elif wire == 5:
            pos += 4
        else:
            break
    return fields
