"""Helpers the scalar index types share: sorting values as pylance does, comparing a query with
an arrow array, the ``RowIdTreeMap`` framing of row-identifier bitmaps, and stats text.
"""

from __future__ import annotations

import array
import struct
from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from lance_format.errors import CorruptFileError
from lance_format.index.scalar.base import sorted_unique
from lance_format.index.scalar.queries import Equals, IsIn, IsNotNull, IsNull, Range, ScalarQuery

_U32 = struct.Struct("<I")
_U32x2 = struct.Struct("<II")


def combined(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def storage(values: pa.Array) -> pa.Array:
    """The storage array of an extension array (indices compare storage values)."""
    return values.storage if isinstance(values, pa.ExtensionArray) else values


def _numpy_keys(values: pa.Array) -> np.ndarray | None:
    """Values without nulls as a numpy array that sorts like them (numbers, temporal values as
    their integers), or None for types numpy cannot order the same way (strings, decimals)."""
    t = values.type
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return values.to_numpy(zero_copy_only=False)
    if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_duration(t):
        width = pa.int32() if t.bit_width == 32 else pa.int64()
        return values.view(width).to_numpy(zero_copy_only=False)
    if pa.types.is_boolean(t):
        return values.to_numpy(zero_copy_only=False).astype(np.int8)
    return None


def _packed_order(keys: np.ndarray) -> np.ndarray | None:
    """The stable ascending order of integer ``keys`` from one plain sort of ``(key - min) << b | position``
    (numpy sorts plain 64-bit integers with SIMD, several times faster than a stable argsort;
    the position in the low bits breaks ties as a stable sort does), or None when the keys' span
    and positions do not fit together in 64 bits (or the keys are floats)."""
    if not len(keys) or keys.dtype.kind not in "iub":
        return None
    low, high = int(keys.min()), int(keys.max())
    shift = max(1, (len(keys) - 1).bit_length())
    if (high - low).bit_length() + shift > 64:
        return None
    if keys.dtype.kind == "u":
        offsets = keys.astype(np.uint64) - np.uint64(low)
    else:  # the span fits in 63 bits here, so the int64 difference cannot overflow
        offsets = (keys.astype(np.int64) - np.int64(low)).view(np.uint64)
    packed = (offsets << np.uint64(shift)) | np.arange(len(keys), dtype=np.uint64)
    packed.sort()
    return (packed & np.uint64((1 << shift) - 1)).astype(np.int64)


def sort_order(values: pa.Array) -> np.ndarray:
    """Positions that sort ``values`` ascending with nulls first and NaN after every number
    (DataFusion's ``asc_nulls_first``, which pylance's training sort uses); ties keep their
    input order (a stable sort)."""
    values = storage(values)
    valid = np.asarray(values.is_valid()) if values.null_count else None
    nulls = np.flatnonzero(~valid) if valid is not None else np.zeros(0, np.int64)
    present = np.flatnonzero(valid) if valid is not None else None
    subset = values.filter(pa.array(valid)) if valid is not None else values
    keys = _numpy_keys(subset)
    order = _packed_order(keys) if keys is not None else None
    if order is None and keys is not None:
        order = np.argsort(keys, kind="stable")  # radix/tim sort; NaN last
    elif order is None:
        # array_sort_indices is stable and puts NaN after every number
        order = np.asarray(pc.array_sort_indices(subset, order="ascending", null_placement="at_end"))
    ordered = present[order] if present is not None else order
    return np.concatenate([nulls, ordered]).astype(np.int64)


def is_float(data_type: pa.DataType) -> bool:
    return pa.types.is_floating(data_type)


def matches(values: pa.Array, query: ScalarQuery) -> np.ndarray | None:
    """A boolean mask of the ``values`` that ``query`` selects (SQL semantics: nulls never match
    a comparison), or None for a query these helpers do not evaluate. For floats, NaN values are
    selected by every comparison: engines disagree on how NaN compares, and a candidate set may
    be a superset (the filter is re-checked), never a subset."""
    values = storage(values)
    if isinstance(query, IsNull):
        return ~np.asarray(values.is_valid())
    if isinstance(query, IsNotNull):
        return np.asarray(values.is_valid())
    if isinstance(query, Equals):
        if query.value is None or not query.value.is_valid:
            return np.zeros(len(values), dtype=bool)
        mask = pc.equal(values, _scalar_like(query.value, values.type))
    elif isinstance(query, IsIn):
        mask = pc.is_in(values, value_set=_array_like(query.values, values.type), skip_nulls=True)
    elif isinstance(query, Range):
        mask = None
        if query.lower is not None:
            bound = _scalar_like(query.lower, values.type)
            mask = (pc.greater_equal if query.lower_inclusive else pc.greater)(values, bound)
        if query.upper is not None:
            bound = _scalar_like(query.upper, values.type)
            upper = (pc.less_equal if query.upper_inclusive else pc.less)(values, bound)
            mask = upper if mask is None else pc.and_(mask, upper)
        if mask is None:
            return np.asarray(values.is_valid())
    else:
        return None
    result = np.asarray(pc.fill_null(mask, False))
    if is_float(values.type) and not isinstance(query, IsIn):
        result = result | np.asarray(pc.fill_null(pc.is_nan(values), False))
    return result


def _scalar_like(value: pa.Scalar, data_type: pa.DataType) -> pa.Scalar:
    if isinstance(value, pa.ExtensionScalar):
        value = value.value
    return value if value.type == data_type else value.cast(data_type)


def _array_like(values: pa.Array, data_type: pa.DataType) -> pa.Array:
    values = storage(values)
    return values if values.type == data_type else values.cast(data_type)


# -- RowIdTreeMap framing --------------------------------------------------------------------------


def serialize_tree_map(ids: np.ndarray) -> bytes:
    """Sorted uint64 identifiers in ``RowIdTreeMap`` framing: a u32 count of the high halves (the
    fragment ids, for addresses), then per high half a u32 key, the u32 byte size of the roaring
    bitmap and the standard roaring bytes of the low halves (pylance writes no "full" entries)."""
    ids = np.asarray(ids, dtype=np.uint64)
    high = (ids >> np.uint64(32)).astype(np.uint32)
    low = (ids & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    starts = np.flatnonzero(np.concatenate([[True], high[1:] != high[:-1]])) if len(ids) else np.zeros(0, np.int64)
    ends = np.append(starts[1:], len(ids))
    parts = [_U32.pack(len(starts))]
    for start, end in zip(starts.tolist(), ends.tolist()):
        # an array.array of uint32 reaches pyroaring's bulk constructor (numpy arrays go value by value)
        data = BitMap(array.array("I", low[start:end].tobytes())).serialize()
        parts.append(_U32x2.pack(int(high[start]), len(data)))
        parts.append(data)
    return b"".join(parts)


_SMALL_HEADER = np.dtype([("count", "<u4"), ("fragment", "<u4"), ("size", "<u4"), ("cookie", "<u4"),
                          ("containers", "<u4"), ("key", "<u2"), ("cardinality", "<u2"), ("offset", "<u4")])
_ROARING_COOKIE_NO_RUNS = 12346  # the portable format's cookie when no container is a run container


def serialize_tree_maps(ids: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> pa.Array:
    """``serialize_tree_map(ids[a:b])`` for every group ``[a, b)`` of sorted ``ids``, as a binary
    array. Groups whose ids share one fragment and one 65536-row block and number at most 4096
    (every group of a high-cardinality column) are framed in one vectorized pass as a single
    roaring array container; the others go through pyroaring one by one."""
    ids = np.asarray(ids, dtype=np.uint64)
    counts = ends - starts
    if not len(counts):
        return pa.array([], pa.binary())
    block = ids >> np.uint64(16)
    small = (counts > 0) & (counts <= 4096) & (block[np.maximum(ends - 1, 0)] == block[starts])
    lengths = np.where(small, _SMALL_HEADER.itemsize + 2 * counts, 0)
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = np.zeros(int(offsets[-1]), dtype=np.uint8)
    chosen = np.flatnonzero(small)
    if len(chosen):
        first = ids[starts[chosen]]
        header = np.zeros(len(chosen), dtype=_SMALL_HEADER)
        header["count"] = 1
        header["fragment"] = (first >> np.uint64(32)).astype(np.uint32)
        header["size"] = 16 + 2 * counts[chosen]
        header["cookie"] = _ROARING_COOKIE_NO_RUNS
        header["containers"] = 1
        header["key"] = ((first >> np.uint64(16)) & np.uint64(0xFFFF)).astype(np.uint16)
        header["cardinality"] = (counts[chosen] - 1).astype(np.uint16)
        header["offset"] = 16
        where = offsets[chosen][:, None] + np.arange(_SMALL_HEADER.itemsize)
        data[where] = header.view(np.uint8).reshape(len(chosen), _SMALL_HEADER.itemsize)
        # the values: low 16 bits of each id, after its group's header
        member = np.repeat(chosen, counts[chosen])
        within = np.arange(len(member)) - np.repeat(np.cumsum(counts[chosen]) - counts[chosen], counts[chosen])
        rows = np.repeat(starts[chosen], counts[chosen]) + within
        low = (ids[rows] & np.uint64(0xFFFF)).astype("<u2").view(np.uint8).reshape(-1, 2)
        at = offsets[member] + _SMALL_HEADER.itemsize + 2 * within
        data[at] = low[:, 0]
        data[at + 1] = low[:, 1]
    if small.all():
        return pa.Array.from_buffers(pa.large_binary(), len(counts), [None, pa.py_buffer(offsets),
                                                                        pa.py_buffer(data)]).cast(pa.binary())
    items: list[bytes] = []
    raw = data.tobytes()
    for k, (a, b) in enumerate(zip(starts.tolist(), ends.tolist())):
        items.append(raw[offsets[k]:offsets[k + 1]] if small[k] else serialize_tree_map(ids[a:b]))
    return pa.array(items, pa.binary())


def deserialize_tree_map(data: bytes, *, fragment_rows: dict[int, int] | None = None, path: str | None = None
                         ) -> np.ndarray:
    """The sorted uint64 identifiers of a ``RowIdTreeMap``; a "full" entry (size 0) stands for
    every row of that fragment (``fragment_rows`` gives their counts; unknown -> refused)."""
    view = memoryview(data)
    try:
        (count,) = _U32.unpack_from(view, 0)
        offset = 4
        pieces: list[np.ndarray] = []
        for _ in range(count):
            key, size = _U32x2.unpack_from(view, offset)
            offset += 8
            if size == 0:
                if fragment_rows is None or key not in fragment_rows:
                    raise CorruptFileError(f"a bitmap selects all rows of fragment {key}, whose size is unknown",
                                           path=path)
                low = np.arange(fragment_rows[key], dtype=np.uint64)
            else:
                low = np.asarray(BitMap.deserialize(bytes(view[offset:offset + size])), dtype=np.uint64)
                offset += size
            pieces.append((np.uint64(key) << np.uint64(32)) | low)
    except struct.error as exc:
        raise CorruptFileError(f"a row-identifier bitmap is truncated: {exc}", path=path) from exc
    return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.uint64)


def union_sorted(arrays: Iterable[np.ndarray]) -> np.ndarray:
    items = [a for a in arrays if len(a)]
    if not items:
        return np.zeros(0, dtype=np.uint64)
    if len(items) == 1:
        return items[0]
    return sorted_unique(np.concatenate(items))


# -- statistics text -------------------------------------------------------------------------------


def scalar_text(value: pa.Scalar | None) -> str:
    """A value as pylance's index statistics print it (DataFusion's ``ScalarValue`` display):
    ``NULL`` for null, integral floats without ``.0``."""
    if value is None or not value.is_valid:
        return "NULL"
    if isinstance(value, pa.ExtensionScalar):
        value = value.value
    if pa.types.is_timestamp(value.type) or pa.types.is_time(value.type) or pa.types.is_duration(value.type):
        return str(value.cast(pa.int64()).as_py())  # DataFusion prints these as their raw integers
    python = value.as_py()
    if isinstance(python, float) and python.is_integer():
        return str(int(python))
    if isinstance(python, bytes):
        return python.hex()
    return str(python)
