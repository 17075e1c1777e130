"""BITMAP: one row-identifier bitmap per distinct value.

File (pylance 14.0.2's layout): ``bitmap_page_lookup.lance`` with ``keys`` (the column's type,
the distinct values ascending, a null key first when the column has nulls) and ``bitmaps``
(binary: each key's rows in ``RowIdTreeMap`` framing, see :mod:`.common`); schema metadata
``lance:index_stats = {"num_bitmaps":N}``. Entries are ``_rowid`` s: stable row ids in tables
that have them, else row addresses.

A search reads the ``keys`` column once, finds the matching keys and reads only their bitmaps.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.index.scalar.base import ScalarIndex, ScalarIndexType, SearchResult, register
from lance_format.index.scalar.btree import gather_training, supports_value_type
from lance_format.index.scalar.common import (
    combined,
    deserialize_tree_map,
    is_float,
    matches,
    serialize_tree_maps,
    sort_order,
    union_sorted,
)
from lance_format.index.scalar.queries import ScalarQuery
from lance_format.index.store import IndexStore

BITMAP_LOOKUP = "bitmap_page_lookup.lance"
STATS_KEY = "lance:index_stats"


def group_bitmaps(values: pa.Array, ids: np.ndarray) -> tuple[pa.Array, pa.Array]:
    """The distinct ``values`` (a null key first when there are nulls, then ascending) and, for
    each, the serialized bitmap of its ``ids``. The values are dictionary-encoded, the (few)
    distinct ones sorted, and the rows grouped by one stable integer sort of their key's rank;
    one roaring bitmap is then built per key."""
    if len(ids) > 1 and bool(np.any(ids[1:] < ids[:-1])):  # stable row ids need not follow addresses
        by_id = np.argsort(ids, kind="stable")
        values, ids = values.take(pa.array(by_id)), ids[by_id]
    if len(values) == 0:
        return values, pa.array([], pa.binary())
    encoded = pc.dictionary_encode(values)
    dictionary = encoded.dictionary
    order = sort_order(dictionary)  # ranks of the distinct values
    rank = np.empty(len(dictionary), dtype=np.int64)
    rank[order] = np.arange(len(dictionary))
    codes = np.asarray(encoded.indices.fill_null(-1), dtype=np.int64)
    row_rank = np.where(codes < 0, -1, rank[np.maximum(codes, 0)]) if len(rank) else np.full(len(codes), -1)
    if len(dictionary) < 32767:
        row_rank = row_rank.astype(np.int16)  # numpy's stable sort of 16-bit integers is a radix sort
    rows = np.argsort(row_rank, kind="stable")  # nulls (-1) first; ids stay ascending within a key
    sorted_rank = row_rank[rows]
    sorted_ids = ids[rows]
    starts = np.flatnonzero(np.concatenate([[True], sorted_rank[1:] != sorted_rank[:-1]]))
    ends = np.append(starts[1:], len(rows))
    present = sorted_rank[starts]
    key_positions = order[present[present >= 0]]
    keys = dictionary.take(pa.array(key_positions, pa.int64()))
    if present[0] < 0:
        keys = pa.concat_arrays([pa.nulls(1, keys.type), keys])
    return keys, serialize_tree_maps(sorted_ids, starts, ends)


@register
class BitmapIndexType(ScalarIndexType):
    name = "BITMAP"
    display_name = "Bitmap"
    type_url = "/lance.table.BitmapIndexDetails"
    index_version = 0
    row_key = "_rowid"

    @classmethod
    def supports(cls, data_type: pa.DataType) -> bool:
        return supports_value_type(data_type)

    @classmethod
    def train(cls, store: IndexStore, batches: Iterable[pa.RecordBatch], value_type: pa.DataType,
              params: Mapping[str, Any]) -> None:
        values, ids = gather_training(batches, value_type)
        keys, bitmaps = group_bitmaps(values, ids)
        schema = pa.schema([pa.field("keys", keys.type, True), pa.field("bitmaps", pa.binary(), True)])
        table = pa.table([keys, bitmaps], schema=schema)
        store.write_table(BITMAP_LOOKUP, table,
                          metadata={STATS_KEY: json.dumps({"num_bitmaps": len(keys)}, separators=(",", ":"))})

    @classmethod
    def load(cls, store: IndexStore, details: bytes) -> ScalarIndex:
        return BitmapIndex(store)


class BitmapIndex(ScalarIndex):
    index_type = BitmapIndexType

    def __init__(self, store: IndexStore) -> None:
        self._store = store
        self._keys = combined(store.read_table(BITMAP_LOOKUP, columns=["keys"])["keys"])
        self._bitmaps: dict[int, np.ndarray] = {}  # key position -> decoded ids, filled as read
        self._lock = threading.Lock()

    def statistics(self) -> dict[str, Any]:
        return {"num_bitmaps": len(self._keys)}

    def prewarm(self) -> None:
        self._bitmaps_at(np.arange(len(self._keys)))

    def _bitmaps_at(self, positions: np.ndarray) -> list[np.ndarray]:
        with self._lock:  # a cached segment is shared by concurrent scans
            return self._bitmaps_at_locked(positions)

    def _bitmaps_at_locked(self, positions: np.ndarray) -> list[np.ndarray]:
        missing = np.asarray([p for p in positions.tolist() if p not in self._bitmaps], dtype=np.int64)
        if len(missing):
            raw = self._store.take(BITMAP_LOOKUP, missing, columns=["bitmaps"])["bitmaps"]
            path = self._store.path(BITMAP_LOOKUP)
            for position, data in zip(missing.tolist(), raw.to_pylist()):
                self._bitmaps[position] = (deserialize_tree_map(data, path=path) if data is not None
                                           else np.zeros(0, np.uint64))
        return [self._bitmaps[p] for p in positions.tolist()]

    def search(self, query: ScalarQuery) -> SearchResult | None:
        mask = matches(self._keys, query)
        if mask is None:
            return None
        positions = np.flatnonzero(mask)
        return SearchResult(union_sorted(self._bitmaps_at(positions)), exact=not is_float(self._keys.type))
