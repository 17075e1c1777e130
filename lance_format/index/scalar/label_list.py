"""LABEL_LIST: a bitmap per distinct list item (``bitmap_page_lookup.lance``), as pylance 14.0.2 writes it.

The file is BITMAP's layout over the lists' items: ``keys`` (the item type, null first, then
ascending; the null key holds rows with a null item) and ``bitmaps`` (``RowAddrTreeMap`` of the
rows' ``_rowid``s, :mod:`.rowsets`), with schema metadata ``lance:index_stats``
(``{"num_bitmaps":N}``) and ``lance:label_list_nulls``: the index of a global buffer holding
the rows whose list is null. Index version 1.

``array_has_any`` (union of the labels' bitmaps), ``array_has_all`` / ``array_contains``
(intersection) are exact; a null list matches neither (its row is in no bitmap).
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import ArgumentTypeError, InvalidInputError
from lance_format.index.scalar import queries as q
from lance_format.index.scalar.base import VALUE_COLUMN, ScalarIndex, ScalarIndexType, SearchResult, register
from lance_format.index.scalar.rowsets import deserialize_addr_treemap, serialize_addr_treemap
from lance_format.index.scalar.zones import read_global_buffer, write_segment_file
from lance_format.index.store import IndexStore

FILE = "bitmap_page_lookup.lance"
NULLS_KEY = "lance:label_list_nulls"
STATS_KEY = "lance:index_stats"


def _is_list(data_type: pa.DataType) -> bool:
    return pa.types.is_list(data_type) or pa.types.is_large_list(data_type)


def _sorted_groups(keys: pa.Array, rows: np.ndarray) -> tuple[pa.Array, list[np.ndarray]]:
    """Distinct keys (null first, then ascending) and each key's rows."""
    if len(keys) == 0:
        return keys, []
    order = pc.array_sort_indices(keys, null_placement="at_start")
    keys = keys.take(order)
    rows = rows[order.to_numpy()]
    nulls = keys.null_count
    valid = keys.slice(nulls)
    # group starts: where a key differs from the one before it
    changed = np.ones(len(valid), dtype=bool)
    if len(valid) > 1:
        changed[1:] = pc.not_equal(valid.slice(1), valid.slice(0, len(valid) - 1)).to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(changed) + nulls
    bounds = [*([0] if nulls else []), *starts.tolist(), len(keys)]
    distinct = keys.take(pa.array(np.array(bounds[:-1], dtype=np.int64)))
    return distinct, [rows[bounds[i]:bounds[i + 1]] for i in range(len(bounds) - 1)]


@register
class LabelListIndexType(ScalarIndexType):
    name = "LABEL_LIST"
    display_name = "LabelList"
    type_url = "/lance.table.LabelListIndexDetails"
    index_version = 1
    row_key = "_rowid"

    @classmethod
    def supports(cls, data_type: pa.DataType) -> bool:
        return _is_list(data_type)  # a list of nested items is refused by train, with pylance's message

    @classmethod
    def check_type(cls, column: str, data_type: pa.DataType) -> None:
        """pylance's refusals: a column that is not a list (TypeError), a list of nested items."""
        if not _is_list(data_type):
            raise ArgumentTypeError(f"LABEL_LIST index column {column} must be a list or large list")
        if pa.types.is_nested(data_type.value_type):
            raise InvalidInputError(f"LabelList index item type must be non-nested. Column {column!r} has type "
                                    f"{data_type}")

    @classmethod
    def train(cls, store: IndexStore, batches: Iterable[pa.RecordBatch], value_type: pa.DataType,
              params: Mapping[str, Any]) -> None:
        cls.check_type("value", value_type)
        item_keys: list[pa.Array] = []
        item_rows: list[np.ndarray] = []
        null_rows: list[np.ndarray] = []
        for batch in batches:
            lists = batch.column(VALUE_COLUMN)
            rows = batch.column(cls.row_key).to_numpy(zero_copy_only=False).astype(np.uint64, copy=False)
            if lists.null_count:
                null_rows.append(rows[lists.is_null().to_numpy(zero_copy_only=False)])
            parents = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False)
            item_keys.append(pc.list_flatten(lists))
            item_rows.append(rows[parents])
        item_type = value_type.value_type
        keys = pa.concat_arrays([k.cast(item_type) for k in item_keys]) if item_keys else pa.array([], item_type)
        rows = np.concatenate(item_rows) if item_rows else np.zeros(0, np.uint64)
        distinct, groups = _sorted_groups(keys, rows)
        table = pa.table({"keys": distinct, "bitmaps": pa.array([serialize_addr_treemap(g) for g in groups],
                                                                 pa.binary())})
        nulls = np.concatenate(null_rows) if null_rows else np.zeros(0, np.uint64)
        write_segment_file(store, FILE, table,
                           {STATS_KEY: json.dumps({"num_bitmaps": len(groups)}, separators=(",", ":"))},
                           [(NULLS_KEY, serialize_addr_treemap(nulls))])

    @classmethod
    def load(cls, store: IndexStore, details: bytes) -> "LabelListIndex":
        return LabelListIndex(store)


class LabelListIndex(ScalarIndex):
    """A loaded LABEL_LIST segment: its keys in memory, bitmaps read when a query needs them."""

    index_type = LabelListIndexType

    def __init__(self, store: IndexStore) -> None:
        self.store = store
        self.keys = store.read_table(FILE, columns=["keys"]).column("keys").combine_chunks()
        self._meta = store.schema_metadata(FILE)
        self._bitmaps: dict[int, np.ndarray] = {}
        self._null_lists: np.ndarray | None = None

    def statistics(self) -> dict[str, Any]:
        return {"num_bitmaps": len(self.keys)}

    def null_lists(self) -> np.ndarray:
        """Row ids of the rows whose list is null (empty for files without the buffer)."""
        if self._null_lists is None:
            index = self._meta.get(NULLS_KEY)
            self._null_lists = np.zeros(0, np.uint64) if index is None else deserialize_addr_treemap(
                read_global_buffer(self.store, FILE, int(index)), what=f"{FILE} null lists")
        return self._null_lists

    def prewarm(self) -> None:
        self._rows_of(np.arange(len(self.keys)))
        self.null_lists()

    def _rows_of(self, positions: np.ndarray) -> list[np.ndarray]:
        missing = sorted({int(p) for p in positions} - self._bitmaps.keys())
        if missing:
            table = self.store.take(FILE, np.array(missing, dtype=np.int64), columns=["bitmaps"])
            for position, data in zip(missing, table.column("bitmaps").to_pylist()):
                self._bitmaps[position] = deserialize_addr_treemap(data or b"\0\0\0\0", what=f"{FILE} bitmap")
        return [self._bitmaps[int(p)] for p in positions]

    def _positions(self, labels: pa.Array) -> tuple[np.ndarray, bool]:
        """Positions of the (non-null) labels among the keys, and whether every label was found."""
        labels = labels.drop_null()
        if labels.type != self.keys.type:
            labels = labels.cast(self.keys.type)
        found = pc.index_in(labels, value_set=self.keys)
        positions = found.drop_null().to_numpy(zero_copy_only=False).astype(np.int64)
        return np.unique(positions), found.null_count == 0

    def search(self, query: q.ScalarQuery) -> SearchResult | None:
        if isinstance(query, q.LabelListHasAny):
            positions, _ = self._positions(query.values)
            sets = self._rows_of(positions)
            return SearchResult.of(np.concatenate(sets) if sets else np.zeros(0, np.uint64))
        if isinstance(query, q.LabelListHasAll):
            if len(query.values.drop_null()) == 0:
                return None  # every non-null list holds "all of nothing": leave it to the scan
            positions, all_found = self._positions(query.values)
            if not all_found:
                return SearchResult()
            sets = self._rows_of(positions)
            result = sets[0]
            for rows in sets[1:]:
                result = np.intersect1d(result, rows, assume_unique=True)
            return SearchResult(np.asarray(result, dtype=np.uint64))
        if isinstance(query, q.IsNull):
            return SearchResult.of(self.null_lists())
        return None
