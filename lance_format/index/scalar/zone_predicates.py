"""Which zones may hold rows matching a query, from their ``min``/``max``/``nan_count`` (vectorized).

Comparisons use pyarrow kernels over the zones' arrays (any orderable type: numbers, strings,
binaries, decimals, temporal types). Floats follow pylance's total order: NaN above every value,
so a zone whose ``max`` is NaN has an unknown finite max and stays a candidate for any lower
bound; a NaN query value matches zones with ``nan_count > 0``. A zone without a finite ``min``
(nulls and NaNs only) holds no comparable value. A comparison with NULL matches nothing.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.index.scalar import queries as q


def _is_nan(value: pa.Scalar | None) -> bool:
    if value is None or not value.is_valid or not pa.types.is_floating(value.type):
        return False
    return math.isnan(float(value.as_py()))


def _mask(array: pa.Array) -> np.ndarray:
    return np.asarray(array.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)


def _cast(value: pa.Scalar, data_type: pa.DataType) -> pa.Scalar:
    return value if value.type == data_type else value.cast(data_type)


class _Zones:
    def __init__(self, mins: pa.Array, maxs: pa.Array, nan_counts: np.ndarray) -> None:
        self.mins, self.maxs, self.nans = mins, maxs, nan_counts > 0
        floating = pa.types.is_floating(mins.type)
        self.max_nan = _mask(pc.is_nan(maxs)) if floating else np.zeros(len(maxs), bool)
        min_valid = _mask(pc.is_valid(mins))
        self.finite_min = min_valid & ~_mask(pc.is_nan(mins)) if floating else min_valid

    def ge_lower(self, value: pa.Scalar, inclusive: bool) -> np.ndarray:
        """Zones whose max is above ``value`` (or unknown: a NaN max)."""
        cmp = pc.greater_equal if inclusive else pc.greater
        return self.max_nan | _mask(cmp(self.maxs, _cast(value, self.maxs.type)))

    def le_upper(self, value: pa.Scalar, inclusive: bool) -> np.ndarray:
        cmp = pc.less_equal if inclusive else pc.less
        return _mask(cmp(self.mins, _cast(value, self.mins.type)))

    def equals(self, value: pa.Scalar) -> np.ndarray:
        if value is None or not value.is_valid:
            return np.zeros(len(self.nans), bool)
        if _is_nan(value):
            return self.nans.copy()
        return self.finite_min & self.le_upper(value, True) & self.ge_lower(value, True)


def _prefix_matches(zones: _Zones, prefix: str) -> np.ndarray:
    """String zones that may hold a value starting with ``prefix``: max >= prefix and min either
    below the prefix or starting with it."""
    if not prefix:
        return zones.finite_min.copy()
    scalar = pa.scalar(prefix, zones.mins.type)
    below = _mask(pc.less(zones.mins, scalar)) | _mask(pc.starts_with(zones.mins, prefix))
    return zones.finite_min & below & _mask(pc.greater_equal(zones.maxs, scalar))


def zone_matches(mins: pa.Array, maxs: pa.Array, nan_counts: np.ndarray, query: q.ScalarQuery) -> np.ndarray | None:
    """A boolean mask over the zones, or None when the query is not a zone query."""
    zones = _Zones(mins, maxs, nan_counts)
    if isinstance(query, q.Equals):
        return zones.equals(query.value)
    if isinstance(query, q.IsIn):
        out = np.zeros(len(nan_counts), bool)
        values = query.values.drop_null()
        if len(values) == 0:
            return out
        if pa.types.is_floating(values.type) and _mask(pc.is_nan(values)).any():
            out |= zones.nans
            values = values.filter(pc.invert(pc.is_nan(values)))
        return out | _any_in(zones, values)
    if isinstance(query, q.Range):
        return _range(zones, query)
    if isinstance(query, q.StringPrefix):
        if not (pa.types.is_string(mins.type) or pa.types.is_large_string(mins.type)):
            return None
        return _prefix_matches(zones, query.prefix)
    return None


def _any_in(zones: _Zones, values: pa.Array) -> np.ndarray:
    """Zones whose [min, max] holds one of ``values``: each zone's smallest value >= min (found by
    a binary search over the sorted values) must be <= its max."""
    values = pc.unique(values.cast(zones.mins.type) if values.type != zones.mins.type else values)
    ordered = values.take(pc.sort_indices(values))
    if len(ordered) == 0:
        return np.zeros(len(zones.nans), bool)
    keys = ordered.to_numpy(zero_copy_only=False)
    lows = zones.mins.to_numpy(zero_copy_only=False)
    usable = zones.finite_min
    position = np.zeros(len(lows), dtype=np.int64)
    if usable.any():
        position[usable] = np.searchsorted(keys, lows[usable], side="left")
    inside = usable & (position < len(keys))
    out = np.zeros(len(lows), bool)
    if inside.any():
        candidates = ordered.take(pa.array(position[inside]))
        highs = zones.maxs.filter(pa.array(inside))
        out[inside] = zones.max_nan[inside] | _mask(pc.less_equal(candidates, highs))
    return out


def _range(zones: _Zones, query: q.Range) -> np.ndarray:
    lower, upper = query.lower, query.upper
    if (lower is not None and not lower.is_valid) or (upper is not None and not upper.is_valid):
        return np.zeros(len(zones.nans), bool)
    # rows that are NaN satisfy a range whose upper end is open or NaN (NaN sorts above all)
    nan_rows = zones.nans if (upper is None or (_is_nan(upper) and query.upper_inclusive)) else np.zeros(len(zones.nans), bool)
    if lower is not None and _is_nan(lower):
        return zones.nans.copy() if query.lower_inclusive else np.zeros(len(zones.nans), bool)
    match = zones.finite_min.copy()
    if lower is not None:
        match &= zones.ge_lower(lower, query.lower_inclusive)
    if upper is not None and not _is_nan(upper):
        match &= zones.le_upper(upper, query.upper_inclusive)
    return match | nan_rows
