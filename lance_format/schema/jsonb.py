"""JSONB, the binary JSON official Lance stores for ``arrow.json`` columns (the ``jsonb`` crate's format).

A document is a container: a big-endian u32 header (``0x80000000 | n`` for an array of n values,
``0x40000000 | n`` for an object of n members, ``0x20000000`` for a lone scalar), then one u32
"JEntry" per value (the type in bits 28-30, the payload length in the low 28 bits; objects
list the n key entries before the n value entries), then the payloads in the same order.
Object keys are stored sorted bytewise; a nested container's payload is its whole encoding.
Numbers are a tag byte and a big-endian value in the fewest bytes: ``0x00`` zero, ``0x40``
int8/16/32/64 (negatives), ``0x50`` uint8/16/32/64 (positives), ``0x60`` float64, ``0x20`` /
``0x30`` +-infinity, ``0x10`` NaN. Integers beyond int64/uint64 are stored as float64.

Text is written the way pylance 14 writes it: no spaces, keys in stored order, strings escaped
like ``json.dumps(ensure_ascii=False)``, floats in their shortest round-trip form with ``.0``
for whole numbers and an exponent (``1e+16``, ``1e-6``) outside ``1e-5 <= |x| < 1e16``;
infinities and NaN become ``null``.

The format is recursive and variable-length, so documents are encoded and decoded one at a
time in Python (measured in ``tests/test_json_columns.py``); only JSON columns take this path.
"""

from __future__ import annotations

import json
import math
import struct
from decimal import Decimal
from typing import Any

import pyarrow as pa

from lance_format.errors import InvalidInputError
from lance_format.schema.json_lenient import parse_lenient

ARRAY_HEADER = 0x80000000
OBJECT_HEADER = 0x40000000
SCALAR_HEADER = 0x20000000
_HEADER_TYPE = 0xE0000000
_HEADER_COUNT = 0x1FFFFFFF
NULL, STRING, NUMBER, FALSE, TRUE, CONTAINER = (0x00000000, 0x10000000, 0x20000000, 0x30000000, 0x40000000,
                                               0x50000000)
_ENTRY_TYPE = 0x70000000
_ENTRY_LENGTH = 0x0FFFFFFF
_ZERO, _NAN, _INF, _NEG_INF, _INT, _UINT, _FLOAT = 0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60
_INT_FORMATS = {1: ">b", 2: ">h", 4: ">i", 8: ">q"}
_UINT_FORMATS = {1: ">B", 2: ">H", 4: ">I", 8: ">Q"}

JSON_TYPE = pa.json_(pa.string())


# ---------------------------------------------------------------------------------------- encoding
def _number(value: int | float) -> bytes:
    if isinstance(value, int) and -(2**63) <= value < 2**64:
        if value == 0:
            return bytes([_ZERO])
        if value < 0:
            for width, fmt in _INT_FORMATS.items():
                if value >= -(2 ** (8 * width - 1)):
                    return bytes([_INT]) + struct.pack(fmt, value)
        for width, fmt in _UINT_FORMATS.items():
            if value < 2 ** (8 * width):
                return bytes([_UINT]) + struct.pack(fmt, value)
    number = float(value)
    if math.isnan(number):
        return bytes([_NAN])
    if math.isinf(number):
        return bytes([_INF if number > 0 else _NEG_INF])
    return bytes([_FLOAT]) + struct.pack(">d", number)


def _entry(value: Any) -> tuple[int, bytes]:
    """The JEntry type and payload of one value."""
    if value is None:
        return NULL, b""
    if value is True:
        return TRUE, b""
    if value is False:
        return FALSE, b""
    if isinstance(value, str):
        return STRING, value.encode("utf-8")
    if isinstance(value, (int, float)):
        return NUMBER, _number(value)
    return CONTAINER, _container(value)


def _container(value: Any) -> bytes:
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: k.encode("utf-8"))
        encoded_keys = [k.encode("utf-8") for k in keys]
        entries = [_entry(value[k]) for k in keys]
        words = [OBJECT_HEADER | len(keys)] + [STRING | len(k) for k in encoded_keys]
        words += [code | len(payload) for code, payload in entries]
        return struct.pack(f">{len(words)}I", *words) + b"".join(encoded_keys) + b"".join(p for _, p in entries)
    if isinstance(value, list):
        entries = [_entry(v) for v in value]
        words = [ARRAY_HEADER | len(entries)] + [code | len(payload) for code, payload in entries]
        return struct.pack(f">{len(words)}I", *words) + b"".join(p for _, p in entries)
    code, payload = _entry(value)
    return struct.pack(">II", SCALAR_HEADER, code | len(payload)) + payload


class _DuplicateKey(ValueError):
    pass


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members = dict(pairs)
    if len(members) != len(pairs):
        seen: set[str] = set()
        duplicate = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise _DuplicateKey(f"duplicate object attribute {duplicate!r}")
    return members


def parse_text(text: str) -> Any:
    """A JSON document as Python values (ints stay ints), read like pylance 14 reads it.

    Standard JSON is read by Python's parser; what it refuses, and documents with ``\\u``
    escapes (whose lone surrogates pylance keeps as written), go to pylance's lenient grammar
    (:mod:`lance_format.schema.json_lenient`: ``+1``, ``01``, ``.5``, ``nan``, ``[1,]``,
    ``{a:1}``, ``'text'``, ...), which yields the same values for standard JSON.

    Raises
    ------
    InvalidInputError
        The document is not JSON even in the lenient grammar, or repeats an object key.
    """
    if not text.strip():
        return None
    if "\\u" not in text:
        try:
            return json.loads(text, object_pairs_hook=_unique_members, strict=False)
        except _DuplicateKey as err:
            raise InvalidInputError(f"Failed to encode JSON: {err}") from None
        except ValueError:
            pass
    return parse_lenient(text)


def encode_value(value: Any) -> bytes:
    """The JSONB document of a Python value (dict, list, str, int, float, bool or None)."""
    return _container(value)


def encode_text(text: str) -> bytes:
    """The JSONB document of a JSON text."""
    try:
        return _container(parse_text(text))
    except UnicodeEncodeError as err:
        raise InvalidInputError(f"Failed to encode JSON: {err}") from None


# ---------------------------------------------------------------------------------------- decoding
def _decode_number(data: bytes | memoryview) -> int | float:
    tag, body = data[0], bytes(data[1:])
    if tag == _ZERO:
        return 0
    if tag == _INT:
        return struct.unpack(_INT_FORMATS[len(body)], body)[0]
    if tag == _UINT:
        return struct.unpack(_UINT_FORMATS[len(body)], body)[0]
    if tag == _FLOAT:
        return struct.unpack(">d", body)[0]
    if tag == _NAN:
        return math.nan
    if tag == _INF:
        return math.inf
    if tag == _NEG_INF:
        return -math.inf
    raise InvalidInputError(f"invalid JSONB number tag 0x{tag:02x}")


def _decode_entry(data: bytes, word: int, start: int) -> Any:
    code, length = word & _ENTRY_TYPE, word & _ENTRY_LENGTH
    if code == NULL:
        return None
    if code == STRING:
        return data[start:start + length].decode("utf-8")
    if code == NUMBER:
        return _decode_number(data[start:start + length])
    if code == TRUE:
        return True
    if code == FALSE:
        return False
    if code == CONTAINER:
        return _decode_container(data, start)
    raise InvalidInputError(f"invalid JSONB entry type 0x{code:08x}")


def _decode_container(data: bytes, pos: int) -> Any:
    (header,) = struct.unpack_from(">I", data, pos)
    kind, count = header & _HEADER_TYPE, header & _HEADER_COUNT
    if kind == SCALAR_HEADER:
        (word,) = struct.unpack_from(">I", data, pos + 4)
        return _decode_entry(data, word, pos + 8)
    if kind == ARRAY_HEADER:
        words = struct.unpack_from(f">{count}I", data, pos + 4)
        start = pos + 4 + 4 * count
        items = []
        for word in words:
            items.append(_decode_entry(data, word, start))
            start += word & _ENTRY_LENGTH
        return items
    if kind == OBJECT_HEADER:
        words = struct.unpack_from(f">{2 * count}I", data, pos + 4)
        start = pos + 4 + 8 * count
        keys = []
        for word in words[:count]:
            keys.append(data[start:start + (word & _ENTRY_LENGTH)].decode("utf-8"))
            start += word & _ENTRY_LENGTH
        members = {}
        for key, word in zip(keys, words[count:]):
            members[key] = _decode_entry(data, word, start)
            start += word & _ENTRY_LENGTH
        return members
    raise InvalidInputError(f"invalid JSONB container header 0x{header:08x}")


def decode_value(data: bytes) -> Any:
    """The Python value of a JSONB document (objects keep their stored key order)."""
    try:
        return _decode_container(data, 0)
    except (struct.error, IndexError, KeyError, UnicodeDecodeError) as err:
        raise InvalidInputError(f"corrupt JSONB document: {err}") from None


def _float_text(value: float) -> str:
    if math.isnan(value) or math.isinf(value):
        return "null"
    text = repr(value)
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    power = int(exponent)
    if power == -5:  # Python switches to an exponent one decade earlier than pylance
        return format(Decimal(text), "f")
    return f"{mantissa}e{'+' if power > 0 else '-'}{abs(power)}"


def to_text(value: Any) -> str:
    """JSON text of a decoded value, formatted like pylance's."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float_text(value)
    if isinstance(value, list):
        return "[" + ",".join(to_text(v) for v in value) + "]"
    return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + to_text(v) for k, v in value.items()) + "}"


def decode_text(data: bytes) -> str:
    """The JSON text of a JSONB document, as pylance writes it."""
    return to_text(decode_value(data))


# ---------------------------------------------------------------------------------------- arrays
def encode_array(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    """JSON text (``arrow.json`` or string) -> JSONB ``large_binary``; nulls stay null."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if isinstance(array.type, pa.BaseExtensionType):
        array = array.storage
    return pa.array([None if text is None else encode_text(text) for text in array.to_pylist()], pa.large_binary())


def decode_array(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    """JSONB ``large_binary`` -> ``arrow.json`` text; nulls stay null."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    texts = pa.array([None if doc is None else decode_text(doc) for doc in array.to_pylist()], pa.string())
    return pa.ExtensionArray.from_storage(JSON_TYPE, texts)
