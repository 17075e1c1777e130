"""BLOOMFILTER: a split-block bloom filter per zone (``bloomfilter.lance``), as pylance 14.0.2 writes it.

Zones hold ``number_of_items`` rows (default 8192; see :mod:`.zones`), and each zone's filter is
sized for that many items at false-positive rate ``probability`` (default 0.00057: 32 KiB).
File columns ``fragment_id``/``zone_start``/``zone_length`` (uint64), ``has_null`` (bool) and
``bloom_filter_data`` (binary, :mod:`.sbbf`); schema metadata ``bloomfilter_item``,
``bloomfilter_probability`` and ``null_bitmap`` (global buffer of the null rows' addresses,
which answers ``IS NULL`` exactly). Values are hashed by their physical bytes (:mod:`.xxhash64`):
numbers, dates and times little-endian, strings and binaries as they are.

``=`` and ``IN`` answer a superset of row addresses: the zones whose filter may hold a value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import InvalidInputError
from lance_format.index.scalar import queries as q
from lance_format.index.scalar import sbbf
from lance_format.index.scalar.base import ScalarIndex, ScalarIndexType, SearchResult, register
from lance_format.index.scalar.rowsets import deserialize_addr_treemap, serialize_addr_treemap
from lance_format.index.scalar.xxhash64 import hash_binary, hash_fixed
from lance_format.index.scalar.zonemap import rows_per_zone_param
from lance_format.index.scalar.zones import (
    iter_zones,
    read_global_buffer,
    write_segment_file,
    zone_addresses,
    zone_bound,
)
from lance_format.index.store import IndexStore

FILE = "bloomfilter.lance"
DEFAULT_ITEMS = 8192
DEFAULT_PROBABILITY = 0.00057
_SUPPORTED = ("Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64, Float32, Float64, Utf8, LargeUtf8, "
              "Binary, LargeBinary, Date32, Date64, Time32, Time64, Timestamp")
SCHEMA = pa.schema([
    pa.field("fragment_id", pa.uint64(), nullable=False), pa.field("zone_start", pa.uint64(), nullable=False),
    pa.field("zone_length", pa.uint64(), nullable=False), pa.field("has_null", pa.bool_(), nullable=False),
    pa.field("bloom_filter_data", pa.binary(), nullable=False),
])


def _is_supported(data_type: pa.DataType) -> bool:
    t = pa.types
    return (t.is_integer(data_type) or t.is_float32(data_type) or t.is_float64(data_type)
             or t.is_string(data_type) or t.is_large_string(data_type) or t.is_binary(data_type)
             or t.is_large_binary(data_type) or t.is_date(data_type) or t.is_time(data_type)
             or t.is_timestamp(data_type))


def hash_values(values: pa.Array, distinct: bool = False) -> np.ndarray:
    """xxHash64 of each non-null value's physical bytes (nulls dropped). ``distinct``: hash each
    distinct byte pattern once (a filter holds sets: repeats add nothing)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    values = values.drop_null()
    t = values.type
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return hash_binary(pc.unique(values) if distinct else values)
    if pa.types.is_floating(t) or pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_timestamp(t):
        # by their bits: -0.0 and 0.0 (or two NaNs) stay apart when deduplicated
        values = values.view(pa.int32() if t.bit_width == 32 else pa.int64())
    if distinct:
        values = pc.unique(values)
    data = values.to_numpy(zero_copy_only=False)
    if pa.types.is_floating(t):
        data = data.view(np.float32 if t.bit_width == 32 else np.float64)
    return hash_fixed(data)


def probability_param(params: Mapping[str, Any]) -> float:
    value = params.get("probability", DEFAULT_PROBABILITY)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < float(value) < 1.0:
        raise InvalidInputError(f"probability must be a number between 0 and 1, got {value!r}")
    return float(value)


def rust_float_text(value: float) -> str:
    """``value`` as Rust's ``f64::to_string`` prints it (no exponent: ``0.00057``, ``1e-5`` -> ``0.00001``)."""
    return np.format_float_positional(value, trim="-")


@register
class BloomFilterIndexType(ScalarIndexType):
    name = "BLOOMFILTER"
    display_name = "BloomFilter"
    type_url = "/lance.index.pb.BloomFilterIndexDetails"
    index_version = 0
    row_key = "_rowaddr"

    @classmethod
    def supports(cls, data_type: pa.DataType) -> bool:
        return _is_supported(data_type)

    @classmethod
    def check_type(cls, column: str, data_type: pa.DataType) -> None:
        """pylance's refusal of a column type, as an :class:`InvalidInputError` naming the column."""
        if pa.types.is_nested(data_type):
            raise InvalidInputError(f"A bloom filter index can only be created on a non-nested field "
                                    f"(column {column!r} has type {data_type}).")
        if not _is_supported(data_type):
            raise InvalidInputError(f"Bloom filter index does not support data type: {data_type} (column "
                                    f"{column!r}). Supported types: {_SUPPORTED}")

    @classmethod
    def check_params(cls, params: Mapping[str, Any]) -> None:
        rows_per_zone_param(params, "number_of_items", DEFAULT_ITEMS)
        probability_param(params)

    @classmethod
    def train(cls, store: IndexStore, batches: Iterable[pa.RecordBatch], value_type: pa.DataType,
              params: Mapping[str, Any]) -> None:
        cls.check_type("value", value_type)
        items = rows_per_zone_param(params, "number_of_items", DEFAULT_ITEMS)
        probability = probability_param(params)
        size = sbbf.filter_bytes(items, probability)
        bounds: list[tuple[int, int, int]] = []
        has_null: list[bool] = []
        filters: list[bytes] = []
        null_addrs: list[np.ndarray] = []
        for values, addrs in iter_zones(batches, items):
            bounds.append(zone_bound(addrs))
            has_null.append(values.null_count > 0)
            filters.append(sbbf.build(hash_values(values, distinct=True), size))
            if values.null_count:
                null_addrs.append(addrs[values.is_null().to_numpy(zero_copy_only=False)])
        columns = [np.array(c, dtype=np.uint64) for c in zip(*bounds)] if bounds else [np.zeros(0, np.uint64)] * 3
        table = pa.table([*(pa.array(c, pa.uint64()) for c in columns), pa.array(has_null, pa.bool_()),
                          pa.array(filters, pa.binary())], schema=SCHEMA)
        null_rows = np.concatenate(null_addrs) if null_addrs else np.zeros(0, np.uint64)
        write_segment_file(store, FILE, table,
                           {"bloomfilter_item": str(items), "bloomfilter_probability": rust_float_text(probability)},
                           [("null_bitmap", serialize_addr_treemap(null_rows))])

    @classmethod
    def load(cls, store: IndexStore, details: bytes) -> BloomFilterIndex:
        return BloomFilterIndex(store)


class BloomFilterIndex(ScalarIndex):
    """A loaded BLOOMFILTER segment: zone bounds and filters in memory."""

    index_type = BloomFilterIndexType

    def __init__(self, store: IndexStore) -> None:
        self.store = store
        table = store.read_table(FILE)
        meta = store.schema_metadata(FILE)
        self.items = int(meta.get("bloomfilter_item", DEFAULT_ITEMS))
        self.probability = float(meta.get("bloomfilter_probability", DEFAULT_PROBABILITY))
        self.fragment_ids = table.column("fragment_id").to_numpy()
        self.starts = table.column("zone_start").to_numpy()
        self.lengths = table.column("zone_length").to_numpy().astype(np.int64)
        self.has_null = table.column("has_null").to_numpy(zero_copy_only=False).astype(bool)
        self.filters = table.column("bloom_filter_data").to_pylist()
        self._null_buffer = meta.get("null_bitmap")
        self._null_rows: np.ndarray | None = None

    def statistics(self) -> dict[str, Any]:
        return {"type": "BloomFilter", "num_blocks": len(self.lengths), "number_of_items": self.items,
                "probability": self.probability}

    def null_rows(self) -> np.ndarray | None:
        if self._null_rows is None and self._null_buffer is not None:
            data = read_global_buffer(self.store, FILE, int(self._null_buffer))
            self._null_rows = deserialize_addr_treemap(data, what=f"{FILE} null bitmap")
        return self._null_rows

    def _zones(self, matches: np.ndarray) -> SearchResult:
        rows = zone_addresses(self.fragment_ids[matches], self.starts[matches], self.lengths[matches])
        return SearchResult(rows, exact=False)

    def _probe(self, values: pa.Array) -> np.ndarray:
        """Zones whose filter may hold one of the (non-null) ``values``."""
        values = values.drop_null()
        if len(values) == 0:
            return np.zeros(len(self.lengths), bool)
        if pa.types.is_floating(values.type):
            data = values.to_numpy(zero_copy_only=False)
            if np.isnan(data).any():
                # a NaN's bytes vary with its payload: every zone may hold one
                return np.ones(len(self.lengths), bool)
            # -0.0 = 0.0 in SQL but hashes differently: probe both spellings
            if (data == 0).any():
                values = pa.concat_arrays([values, pa.array(-data[data == 0], values.type)])
        hashes = hash_values(values)
        return np.array([sbbf.might_contain(f, hashes).any() for f in self.filters], dtype=bool)

    def search(self, query: q.ScalarQuery) -> SearchResult | None:
        if isinstance(query, q.IsNull):
            exact = self.null_rows()
            return SearchResult(exact, True) if exact is not None else self._zones(self.has_null)
        if isinstance(query, q.Equals):
            if query.value is None or not query.value.is_valid:
                return SearchResult()
            return self._zones(self._probe(pa.array([query.value.as_py()], query.value.type)))
        if isinstance(query, q.IsIn):
            return self._zones(self._probe(query.values))
        return None
