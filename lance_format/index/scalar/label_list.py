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
import struct
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import ArgumentTypeError, InvalidInputError
from lance_format.index.scalar import queries as q
from lance_format.index.scalar.base import VALUE_COLUMN, ScalarIndex, ScalarIndexType, SearchResult, register
from lance_format.index.scalar.rowsets import (
    KeyedRowSets,
    deserialize_addr_treemap,
    serialize_addr_treemap,
    sorted_unique,
)
from lance_format.index.scalar.zones import read_global_buffer, write_segment_file
from lance_format.index.store import IndexStore

FILE = "bitmap_page_lookup.lance"
NULLS_KEY = "lance:label_list_nulls"
STATS_KEY = "lance:index_stats"


def _is_list(data_type: pa.DataType) -> bool:
    return pa.types.is_list(data_type) or pa.types.is_large_list(data_type)


class _Labels:
    """Numbers for the distinct labels met so far (dictionary-encoding each batch, then mapping
    its few distinct values: a loop over distinct labels, not rows). Float labels are told apart
    by their bits, as pylance's keys are: -0.0 and 0.0 are two labels, NaN one."""

    def __init__(self, item_type: pa.DataType) -> None:
        self.item_type = item_type
        self.floating = pa.types.is_floating(item_type)
        self.numbers: dict[Any, int] = {}
        self.values: list[Any] = []

    def _number(self, value: Any) -> int:
        key = struct.pack("<d", value) if self.floating and value is not None else value
        found = self.numbers.get(key)
        if found is None:
            found = self.numbers[key] = len(self.values)
            self.values.append(value)
        return found

    def encode(self, items: pa.Array) -> np.ndarray:
        encoded = pc.dictionary_encode(items, null_encoding="encode")
        mapping = np.array([self._number(v) for v in encoded.dictionary.to_pylist()], dtype=np.int64)
        codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        return mapping[codes] if len(mapping) else codes

    def sorted_keys(self) -> tuple[pa.Array, np.ndarray]:
        """The labels, null first then ascending (floats in total order: -0.0 before 0.0, NaN
        last), and their numbers in that order."""
        keys = pa.array(self.values, type=self.item_type)
        if self.floating:
            valid = np.asarray(keys.is_valid())
            data = keys.fill_null(0).to_numpy(zero_copy_only=False).astype(np.float64)
            nulls = np.flatnonzero(~valid)
            present = np.flatnonzero(valid)
            values = data[present]
            order = np.concatenate([nulls, present[np.lexsort((~np.signbit(values), values))]]).astype(np.int64)
        else:
            order = pc.array_sort_indices(keys, null_placement="at_start").to_numpy()
        return keys.take(pa.array(order, pa.int64())), order


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
        labels = _Labels(value_type.value_type)
        sets = KeyedRowSets()
        null_rows: list[np.ndarray] = []
        for batch in batches:
            lists = batch.column(VALUE_COLUMN)
            rows = batch.column(cls.row_key).to_numpy(zero_copy_only=False).astype(np.uint64, copy=False)
            if lists.null_count:
                null_rows.append(rows[lists.is_null().to_numpy(zero_copy_only=False)])
            parents = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False)
            items = pc.list_flatten(lists)
            if len(items):
                sets.add(labels.encode(items.cast(labels.item_type)), rows[parents])
        keys, numbers = labels.sorted_keys()
        fragments = sets.by_key()
        table = pa.table({"keys": keys, "bitmaps": pa.array(
            [sets.addr_treemap(int(n), fragments[int(n)]) for n in numbers], pa.binary())})
        nulls = np.concatenate(null_rows) if null_rows else np.zeros(0, np.uint64)
        write_segment_file(store, FILE, table,
                           {STATS_KEY: json.dumps({"num_bitmaps": len(keys)}, separators=(",", ":"))},
                           [(NULLS_KEY, serialize_addr_treemap(nulls))])

    @classmethod
    def load(cls, store: IndexStore, details: bytes) -> LabelListIndex:
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
        if pa.types.is_floating(labels.type) and len(labels):
            # SQL equality: NaN equals nothing, -0.0 equals 0.0 (the keys keep both spellings)
            data = labels.to_numpy(zero_copy_only=False)
            data = data[~np.isnan(data)]
            labels = pa.array(np.concatenate([data, -data[data == 0]]), labels.type)
        found = pc.index_in(labels, value_set=self.keys)
        positions = found.drop_null().to_numpy(zero_copy_only=False).astype(np.int64)
        return np.unique(positions), found.null_count == 0

    def search(self, query: q.ScalarQuery) -> SearchResult | None:
        if isinstance(query, q.LabelListHasAny):
            positions, _ = self._positions(query.values)
            sets = self._rows_of(positions)
            return SearchResult(sorted_unique(np.concatenate(sets)) if sets else np.zeros(0, np.uint64))
        if isinstance(query, q.LabelListHasAll):
            wanted = query.values.drop_null()
            if len(wanted) == 0:
                return None  # every non-null list holds "all of nothing": leave it to the scan
            result: np.ndarray | None = None
            # each label is one requirement (a float zero is met by either spelling)
            for label in pc.unique(wanted).to_pylist():
                positions, _ = self._positions(pa.array([label], wanted.type))
                sets = self._rows_of(positions)
                if not sets:
                    return SearchResult()
                rows = sets[0] if len(sets) == 1 else sorted_unique(np.concatenate(sets))
                result = rows if result is None else np.intersect1d(result, rows, assume_unique=True)
            return SearchResult(np.asarray(result, dtype=np.uint64))
        if isinstance(query, q.IsNull):
            return SearchResult(sorted_unique(self.null_lists()))
        return None
