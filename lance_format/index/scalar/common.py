"""Helpers the scalar index types share: sorting values as pylance does, comparing a query with
an arrow array, the ``RowIdTreeMap`` framing of row-identifier bitmaps, and stats text.
"""

from __future__ import annotations

import struct
from typing import Iterable

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


def sort_order(values: pa.Array) -> np.ndarray:
    """Positions that sort ``values`` ascending with nulls first and NaN after every number
    (DataFusion's ``asc_nulls_first``, which pylance's training sort uses); ties keep their
    input order (a stable sort)."""
    values = storage(values)
    valid = np.asarray(values.is_valid())
    nulls = np.flatnonzero(~valid)
    present = np.flatnonzero(valid)
    subset = values.filter(pa.array(valid)) if len(nulls) else values
    # array_sort_indices is stable and puts NaN after every number
    order = np.asarray(pc.array_sort_indices(subset, order="ascending", null_placement="at_end"))
    return np.concatenate([nulls, present[order]]).astype(np.int64)


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
        data = BitMap(low[start:end]).serialize()
        parts.append(_U32x2.pack(int(high[start]), len(data)))
        parts.append(data)
    return b"".join(parts)


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
