"""ZONEMAP: per-zone min, max, null and NaN counts (``zonemap.lance``), as pylance 14.0.2 writes it.

File columns: ``min``/``max`` (the column's type, null for a zone of nulls and NaNs only, and for
nested columns), ``null_count``/``nan_count`` (uint32), ``fragment_id``/``zone_start``/
``zone_length`` (uint64; see :mod:`.zones`). Schema metadata ``rows_per_zone`` (default 8192) and
``null_bitmap``: the index of a global buffer holding the null rows' addresses
(``RowAddrTreeMap``), which answers ``IS NULL`` exactly. A float zone's ``max`` is NaN when it
holds a NaN; ``min`` is the smallest non-NaN value, -0.0 below 0.0 (pylance's total order).

Searches answer a superset (``exact=False``) of row addresses: every address of each zone whose
statistics admit a match.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import InvalidInputError
from lance_format.index.scalar import queries as q
from lance_format.index.scalar.base import ScalarIndex, ScalarIndexType, SearchResult, register
from lance_format.index.scalar.details import decode_fields, encode_fields
from lance_format.index.scalar.rowsets import deserialize_addr_treemap, serialize_addr_treemap
from lance_format.index.scalar.zone_predicates import zone_matches
from lance_format.index.scalar.zones import (
    iter_zones,
    read_global_buffer,
    write_segment_file,
    zone_addresses,
    zone_bound,
)
from lance_format.index.store import IndexStore

FILE = "zonemap.lance"
DEFAULT_ROWS_PER_ZONE = 8192


def is_nested(data_type: pa.DataType) -> bool:
    return pa.types.is_nested(data_type)


def rows_per_zone_param(params: Mapping[str, Any], key: str, default: int) -> int:
    value = params.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) <= 0:
        raise InvalidInputError(f"{key} must be a positive integer, got {value!r}")
    return int(value)


def _float_extrema(values: pa.Array) -> tuple[Any, Any, int]:
    """``(min, max, nan_count)`` of a float zone in pylance's total order (NaN max, -0.0 < 0.0)."""
    data = values.drop_null().to_numpy(zero_copy_only=False)
    nan = np.isnan(data)
    nan_count = int(nan.sum())
    finite = data[~nan]
    if len(finite) == 0:
        return None, (float("nan") if nan_count else None), nan_count
    low, high = finite.min(), finite.max()
    zeros = finite[finite == 0]
    if low == 0 and np.signbit(zeros).any():
        low = -0.0
    if high == 0 and (~np.signbit(zeros)).any():
        high = 0.0
    return float(low), (float("nan") if nan_count else float(high)), nan_count


def _zone_stats(values: pa.Array) -> tuple[Any, Any, int]:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_floating(values.type):
        return _float_extrema(values)
    if values.null_count == len(values):
        return None, None, 0
    extrema = pc.min_max(values)
    return extrema["min"].as_py(), extrema["max"].as_py(), 0


def _typed_array(items: list[Any], data_type: pa.DataType) -> pa.Array:
    if pa.types.is_float16(data_type):
        mask = np.array([v is None for v in items], dtype=bool)
        data = np.array([0.0 if v is None else v for v in items], dtype=np.float16)
        return pa.array(data, type=data_type, mask=mask)
    return pa.array(items, type=data_type)


@register
class ZoneMapIndexType(ScalarIndexType):
    name = "ZONEMAP"
    display_name = "ZoneMap"
    type_url = "/lance.table.ZoneMapIndexDetails"
    index_version = 0
    row_key = "_rowaddr"

    @classmethod
    def supports(cls, data_type: pa.DataType) -> bool:
        return not pa.types.is_null(data_type) and not pa.types.is_dictionary(data_type)

    @classmethod
    def check_params(cls, params: Mapping[str, Any]) -> None:
        rows_per_zone_param(params, "rows_per_zone", DEFAULT_ROWS_PER_ZONE)

    @classmethod
    def details(cls, params: Mapping[str, Any]) -> bytes:
        # use_seeds stays false: pylance then rebuilds new fragments' zones by scanning them (it
        # sets it for strings, binaries, decimals and nested types, and would look for per-fragment
        # seed buffers that files this engine writes do not carry)
        rows = rows_per_zone_param(params, "rows_per_zone", DEFAULT_ROWS_PER_ZONE)
        return encode_fields([(1, rows), (2, 0), (3, 1)])

    @classmethod
    def train(cls, store: IndexStore, batches: Iterable[pa.RecordBatch], value_type: pa.DataType,
              params: Mapping[str, Any]) -> None:
        rows_per_zone = rows_per_zone_param(params, "rows_per_zone", DEFAULT_ROWS_PER_ZONE)
        nested = is_nested(value_type)
        mins: list[Any] = []
        maxs: list[Any] = []
        nulls: list[int] = []
        nans: list[int] = []
        bounds: list[tuple[int, int, int]] = []
        null_addrs: list[np.ndarray] = []
        for values, addrs in iter_zones(batches, rows_per_zone):
            low, high, nan_count = (None, None, 0) if nested else _zone_stats(values)
            mins.append(low)
            maxs.append(high)
            nans.append(nan_count)
            nulls.append(values.null_count)
            bounds.append(zone_bound(addrs))
            if values.null_count:
                null_addrs.append(addrs[values.is_null().to_numpy(zero_copy_only=False)])
        frags, starts, lengths = (np.array(c, dtype=np.uint64) for c in zip(*bounds)) if bounds else (
            np.zeros(0, np.uint64),) * 3
        table = pa.table({
            "min": pa.nulls(len(mins), value_type) if nested else _typed_array(mins, value_type),
            "max": pa.nulls(len(maxs), value_type) if nested else _typed_array(maxs, value_type),
            "null_count": pa.array(nulls, pa.uint32()),
            "nan_count": pa.array(nans, pa.uint32()),
            "fragment_id": pa.array(frags, pa.uint64()),
            "zone_start": pa.array(starts, pa.uint64()),
            "zone_length": pa.array(lengths, pa.uint64()),
        }, schema=file_schema(value_type))
        null_rows = np.concatenate(null_addrs) if null_addrs else np.zeros(0, np.uint64)
        write_segment_file(store, FILE, table, {"rows_per_zone": str(rows_per_zone)},
                           [("null_bitmap", serialize_addr_treemap(null_rows))])

    @classmethod
    def load(cls, store: IndexStore, details: bytes) -> ZoneMapIndex:
        return ZoneMapIndex(store, details)


def file_schema(value_type: pa.DataType) -> pa.Schema:
    return pa.schema([
        pa.field("min", value_type), pa.field("max", value_type),
        pa.field("null_count", pa.uint32(), nullable=False), pa.field("nan_count", pa.uint32(), nullable=False),
        pa.field("fragment_id", pa.uint64(), nullable=False), pa.field("zone_start", pa.uint64(), nullable=False),
        pa.field("zone_length", pa.uint64(), nullable=False),
    ])


class ZoneMapIndex(ScalarIndex):
    """A loaded ZONEMAP segment: its zones' statistics in memory."""

    index_type = ZoneMapIndexType

    def __init__(self, store: IndexStore, details: bytes) -> None:
        self.store = store
        table = store.read_table(FILE)
        meta = store.schema_metadata(FILE)
        self.rows_per_zone = int(meta.get("rows_per_zone", decode_fields(details).get(1, DEFAULT_ROWS_PER_ZONE)))
        self.mins = table.column("min").combine_chunks()
        self.maxs = table.column("max").combine_chunks()
        self.value_type = self.mins.type
        self.null_counts = table.column("null_count").to_numpy().astype(np.int64)
        self.nan_counts = table.column("nan_count").to_numpy().astype(np.int64)
        self.fragment_ids = table.column("fragment_id").to_numpy()
        self.starts = table.column("zone_start").to_numpy()
        self.lengths = table.column("zone_length").to_numpy().astype(np.int64)
        self._null_buffer = meta.get("null_bitmap")
        self._null_rows: np.ndarray | None = None

    def statistics(self) -> dict[str, Any]:
        return {"num_zones": len(self.lengths), "rows_per_zone": self.rows_per_zone}

    def null_rows(self) -> np.ndarray | None:
        """The exact null rows' addresses, or None for a file without the null bitmap."""
        if self._null_rows is None and self._null_buffer is not None:
            data = read_global_buffer(self.store, FILE, int(self._null_buffer))
            self._null_rows = deserialize_addr_treemap(data, what=f"{FILE} null bitmap")
        return self._null_rows

    def prewarm(self) -> None:
        self.null_rows()

    def _zones(self, matches: np.ndarray) -> SearchResult:
        rows = zone_addresses(self.fragment_ids[matches], self.starts[matches], self.lengths[matches])
        return SearchResult(rows, exact=False)

    def search(self, query: q.ScalarQuery) -> SearchResult | None:
        if isinstance(query, q.IsNull):
            exact = self.null_rows()
            return SearchResult(exact, True) if exact is not None else self._zones(self.null_counts > 0)
        if isinstance(query, q.IsNotNull):
            return self._zones(self.null_counts < self.lengths)
        if is_nested(self.value_type):
            return None
        try:
            matches = zone_matches(self.mins, self.maxs, self.nan_counts, query)
        except pa.ArrowNotImplementedError:
            return None  # a type pyarrow cannot compare (halffloat): the fragments are scanned
        return None if matches is None else self._zones(matches)
