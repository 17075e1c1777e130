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
from typing import Any, Iterable, Mapping

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
    serialize_tree_map,
    sort_order,
    union_sorted,
)
from lance_format.index.scalar.queries import ScalarQuery
from lance_format.index.store import IndexStore

BITMAP_LOOKUP = "bitmap_page_lookup.lance"
STATS_KEY = "lance:index_stats"


def group_bitmaps(values: pa.Array, ids: np.ndarray) -> tuple[pa.Array, list[bytes]]:
    """The distinct ``values`` (nulls first, then ascending) and, for each, the serialized
    bitmap of its ``ids``. One roaring bitmap is built per key and fragment: the rows are
    sorted once, by value and then by id."""
    by_id = np.argsort(ids, kind="stable")
    values, ids = values.take(pa.array(by_id)), ids[by_id]
    order = sort_order(values)  # stable: equal values keep ascending ids
    sorted_values = values.take(pa.array(order))
    sorted_ids = ids[order]
    n = len(sorted_values)
    if n == 0:
        return sorted_values, []
    # key boundaries: where the value changes (nulls form one group at the front)
    nulls = sorted_values.null_count
    rest = sorted_values.slice(nulls)
    changed = np.asarray(pc.fill_null(pc.not_equal(rest.slice(1), rest.slice(0, max(len(rest) - 1, 0))), True))
    if is_float(rest.type) and len(rest) > 1:
        # NaN != NaN: consecutive NaNs are one key
        nan = np.asarray(pc.fill_null(pc.is_nan(rest), False))
        changed &= ~(nan[1:] & nan[:-1])
    starts_rest = (np.flatnonzero(np.concatenate([[True], changed])) + nulls) if len(rest) else np.zeros(0, np.int64)
    starts = np.concatenate([[0] if nulls else np.zeros(0, np.int64), starts_rest]).astype(np.int64)
    ends = np.append(starts[1:], n)
    keys = sorted_values.take(pa.array(starts))
    bitmaps = [serialize_tree_map(sorted_ids[a:b]) for a, b in zip(starts.tolist(), ends.tolist())]
    return keys, bitmaps


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
        table = pa.table([keys, pa.array(bitmaps, pa.binary())], schema=schema)
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

    def statistics(self) -> dict[str, Any]:
        return {"num_bitmaps": len(self._keys)}

    def prewarm(self) -> None:
        self._bitmaps_at(np.arange(len(self._keys)))

    def _bitmaps_at(self, positions: np.ndarray) -> list[np.ndarray]:
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
