"""Encoders of legacy (file version 0.1) pages, the inverse of :mod:`.pages`.

Each function returns the bytes of one page for the whole ``array`` and where the page starts
relative to those bytes. Legacy pages have no validity: values under nulls are written as the
array holds them (bools as false), as official Lance's legacy writer does.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.encodings.legacy_v0_1.pages import fixed_stride_bits
from lance_format.errors import UnsupportedFeatureError


def encode_fixed(array: pa.Array) -> bytes:
    """A plain page: fixed-width values back to back (fixed-size lists flattened, bools packed)."""
    data_type = array.type
    n = len(array)
    if pa.types.is_fixed_size_list(data_type):
        size = data_type.list_size
        return encode_fixed(array.values.slice(array.offset * size, n * size))
    if pa.types.is_boolean(data_type):
        bits = pc.fill_null(array, False).to_numpy(zero_copy_only=False)
        return np.packbits(bits, bitorder="little").tobytes()
    bits = fixed_stride_bits(data_type)
    if bits is None or bits % 8:
        raise ValueError(f"{data_type} is not a plain fixed-width type")
    width = bits // 8
    buf = array.buffers()[1]
    if buf is None:  # e.g. an all-null array without a values buffer
        return bytes(n * width)
    return memoryview(buf)[array.offset * width : (array.offset + n) * width].tobytes()


def encode_binary(array: pa.Array, start: int) -> tuple[int, bytes]:
    """A var-binary page written at file position ``start``: (offset of its positions, bytes).

    The value bytes come first, then ``n + 1`` i64 absolute file positions; a null value is
    empty (Arrow gives nulls zero length).
    """
    large = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
    n = len(array)
    dtype = np.dtype(np.int64 if large else np.int32)
    offsets = np.frombuffer(array.buffers()[1], dtype, n + 1, array.offset * dtype.itemsize).astype(np.int64)
    first, last = int(offsets[0]), int(offsets[-1])
    data = array.buffers()[2]
    body = memoryview(data)[first:last].tobytes() if data is not None and last > first else b""
    positions = (offsets - first + start).astype("<i8").tobytes()
    return len(body), body + positions


def list_offsets(array: pa.Array) -> tuple[bytes, pa.Array]:
    """(offsets page, the items it covers) of a list or large list: ``n + 1`` offsets from 0."""
    large = pa.types.is_large_list(array.type)
    offsets = np.asarray(array.offsets).astype(np.int64)
    first = int(offsets[0]) if len(offsets) else 0
    relative = offsets - first
    if not large and len(relative) and int(relative[-1]) > 2**31 - 1:
        raise OverflowError("a list page holds more than 2^31 items")
    items = array.values.slice(first, int(offsets[-1]) - first if len(offsets) else 0)
    return relative.astype("<i8" if large else "<i4").tobytes(), items


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
