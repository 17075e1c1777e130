"""Decoders of legacy (file version 0.1) pages: plain, var-binary and list-offsets pages.

Every function reads only the bytes of the requested values ``[lo, hi)`` of one page through
``read_at(offset, length)``, which must return exactly ``length`` bytes or raise
:class:`~lance_format.errors.CorruptFileError`. Legacy pages carry no validity: nulls written
by the legacy writer read back as whatever bytes lay under them (official Lance behaves the
same), except var-binary values of nullable fields, where an empty value reads as null.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from lance_format.encodings.buffers import DecodeContext

ReadAt = Callable[[int, int], pa.Buffer]

_INT32_MAX = 2**31 - 1


def fixed_stride_bits(data_type: pa.DataType) -> int | None:
    """Bits per value of a type the legacy plain encoding stores, or None if it is not fixed-stride."""
    if pa.types.is_boolean(data_type):
        return 1
    if pa.types.is_fixed_size_list(data_type):
        inner = fixed_stride_bits(data_type.value_type)
        return None if inner is None else inner * data_type.list_size
    if pa.types.is_fixed_size_binary(data_type):  # also decimals: their bit_width is set
        return data_type.byte_width * 8
    if (
        pa.types.is_integer(data_type)
        or pa.types.is_floating(data_type)
        or pa.types.is_temporal(data_type)
        or pa.types.is_decimal(data_type)
    ):
        try:
            return data_type.bit_width
        except ValueError:
            return None
    return None


def _aligned(buf: pa.Buffer, alignment: int) -> pa.Buffer:
    # Legacy pages are not aligned; Arrow kernels expect naturally aligned values.
    if alignment > 1 and buf.address % alignment:
        return pa.py_buffer(np.frombuffer(buf, np.uint8).copy())
    return buf


def _check_window(lo: int, hi: int, page_length: int, ctx: DecodeContext) -> None:
    if not 0 <= lo <= hi <= page_length:
        raise ctx.corrupt(f"values [{lo}, {hi}) are needed from a page of {page_length} values")


def read_fixed(
    read_at: ReadAt, data_type: pa.DataType, position: int, page_length: int, lo: int, hi: int, ctx: DecodeContext
) -> pa.Array:
    """Values ``[lo, hi)`` of a plain page of ``page_length`` fixed-stride values at ``position``."""
    _check_window(lo, hi, page_length, ctx)
    n = hi - lo
    if pa.types.is_fixed_size_list(data_type):
        size = data_type.list_size
        items = read_fixed(read_at, data_type.value_type, position, page_length * size, lo * size, hi * size, ctx)
        return pa.Array.from_buffers(data_type, n, [None], children=[items])
    bits = fixed_stride_bits(data_type)
    if bits is None:
        raise ctx.corrupt(f"type {data_type} is not stored in plain pages")
    if bits == 1:
        first = lo // 8
        buf = read_at(position + first, (hi + 7) // 8 - first) if n else pa.py_buffer(b"")
        return pa.Array.from_buffers(data_type, n, [None, buf], offset=lo % 8 if n else 0)
    width = bits // 8
    buf = _aligned(read_at(position + lo * width, n * width), min(width, 8))
    return pa.Array.from_buffers(data_type, n, [None, buf])


def read_offsets(
    read_at: ReadAt, dtype: np.dtype, position: int, count: int, lo: int, hi: int, ctx: DecodeContext
) -> np.ndarray:
    """Entries ``lo..hi`` (inclusive) of ``count`` plain offsets as int64, checked non-decreasing."""
    _check_window(lo, hi + 1, count, ctx)
    width = np.dtype(dtype).itemsize
    raw = read_at(position + lo * width, (hi - lo + 1) * width)
    values = np.frombuffer(raw, dtype).astype(np.int64)
    if len(values) > 1 and bool(np.any(values[1:] < values[:-1])):
        raise ctx.corrupt("offsets or positions decrease")
    if len(values) and int(values[0]) < 0:
        raise ctx.corrupt("offsets or positions are negative")
    return values


def read_binary(
    read_at: ReadAt,
    data_type: pa.DataType,
    nullable: bool,
    position: int,
    page_length: int,
    lo: int,
    hi: int,
    ctx: DecodeContext,
) -> pa.Array:
    """Values ``[lo, hi)`` of a var-binary page (``position`` points at its n + 1 file positions)."""
    positions = read_offsets(read_at, np.dtype("<i8"), position, page_length + 1, lo, hi, ctx)
    start, end = int(positions[0]), int(positions[-1])
    if end > position:
        raise ctx.corrupt(f"value bytes [{start}, {end}) overlap the page's positions at {position}")
    data = read_at(start, end - start) if end > start else pa.py_buffer(b"")
    offsets = positions - start
    large = pa.types.is_large_string(data_type) or pa.types.is_large_binary(data_type)
    if not large and end - start > _INT32_MAX:
        raise ctx.corrupt(f"{data_type} values of more than 2 GiB in one read")
    n = hi - lo
    validity = None
    if nullable and n:
        valid = offsets[1:] != offsets[:-1]
        if not valid.all():
            validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
    offset_buf = pa.py_buffer(offsets if large else offsets.astype(np.int32))
    return pa.Array.from_buffers(data_type, n, [validity, offset_buf, data])
