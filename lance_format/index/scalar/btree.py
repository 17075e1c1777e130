"""BTREE: sorted values in pages, with a small lookup of each page's first and last value.

Files (pylance 14.0.2's layout):

- ``page_data.lance``: ``values`` (the column's type, nullable) and ``ids`` (uint64, not null),
  every indexed row sorted by value, nulls first and NaN last; page ``i`` is rows
  ``[i * batch_size, (i + 1) * batch_size)``.
- ``page_lookup.lance``: one row per page: ``min`` and ``max`` (the page's first and last
  value, so ``min`` is null when the page holds nulls and ``max`` only when it holds nothing
  else), ``null_count`` (uint32) and ``page_idx`` (uint32); schema metadata
  ``range_partitioned = "false"`` and ``batch_size`` (``"4096"``).

``ids`` are row *addresses*; in a table with stable row ids pylance 14.0.2 marks that with
``index_version`` 1 (a version-0 segment's ids are read as stable row ids there).
A search finds the candidate pages from the lookup (binary search on the page bounds), reads
only those pages and compares their values: the answer is exact.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from lance_format.errors import CorruptFileError, InvalidInputError
from lance_format.index.scalar.base import RowKey, ScalarIndex, ScalarIndexType, SearchResult, register
from lance_format.index.scalar.common import combined, is_float, matches, scalar_text, sort_order, storage
from lance_format.index.scalar.queries import Equals, IsIn, IsNotNull, IsNull, Range, ScalarQuery
from lance_format.index.store import IndexStore

PAGE_DATA = "page_data.lance"
PAGE_LOOKUP = "page_lookup.lance"
DEFAULT_BATCH_SIZE = 4096
# rows of pages kept in memory per segment once read (pylance keeps them in its index cache):
# 16M rows is 256 MiB of int64 values and ids; a segment this size is kept whole once mostly read
_CACHED_ROWS = 1 << 24
_WHOLE_FRACTION = 8  # a search needing more than 1/8 of the pages of a segment that fits reads it all


def supports_value_type(data_type: pa.DataType) -> bool:
    """The column types pylance builds BTREE and BITMAP indices on."""
    t = data_type.storage_type if isinstance(data_type, pa.ExtensionType) else data_type
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
                or pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
                or pa.types.is_large_binary(t) or pa.types.is_temporal(t) or pa.types.is_decimal(t)
                or pa.types.is_fixed_size_binary(t))


def gather_training(batches: Iterable[pa.RecordBatch], value_type: pa.DataType) -> tuple[pa.Array, np.ndarray]:
    """All training values (one array) and their row identifiers (uint64)."""
    values: list[pa.Array] = []
    ids: list[np.ndarray] = []
    for batch in batches:
        values.append(storage(combined(batch.column(0))))
        ids.append(np.asarray(batch.column(1), dtype=np.uint64))
    t = value_type.storage_type if isinstance(value_type, pa.ExtensionType) else value_type
    array = pa.concat_arrays(values) if values else pa.array([], type=t)
    return array, (np.concatenate(ids) if ids else np.zeros(0, dtype=np.uint64))


@register
class BTreeIndexType(ScalarIndexType):
    name = "BTREE"
    display_name = "BTree"
    type_url = "/lance.table.BTreeIndexDetails"
    index_version = 0
    row_key = "_rowaddr"

    @classmethod
    def version_for(cls, stable_row_ids: bool) -> int:
        # pylance 14.0.2: version 1 marks entries that are row addresses in a table with stable
        # row ids (version 0 entries are read as row ids there); other tables get version 0
        return 1 if stable_row_ids else 0

    @classmethod
    def entries_hold(cls, index_version: int) -> RowKey:
        return "_rowaddr" if index_version >= 1 else "_rowid"

    @classmethod
    def supports(cls, data_type: pa.DataType) -> bool:
        return supports_value_type(data_type)

    @classmethod
    def train(cls, store: IndexStore, batches: Iterable[pa.RecordBatch], value_type: pa.DataType,
              params: Mapping[str, Any]) -> None:
        batch_size = int(params.get("batch_size") or DEFAULT_BATCH_SIZE)
        if batch_size <= 0:
            raise InvalidInputError(f"BTREE batch_size must be positive, got {batch_size}")
        values, ids = gather_training(batches, value_type)
        order = sort_order(values)
        values = values.take(pa.array(order))
        ids = ids[order]
        n = len(values)
        starts = np.arange(0, n, batch_size, dtype=np.int64)
        ends = np.minimum(starts + batch_size, n)
        nulls = values.null_count  # nulls sort first
        null_counts = np.clip(nulls - starts, 0, ends - starts).astype(np.uint32)
        data_schema = pa.schema([pa.field("values", values.type, True), pa.field("ids", pa.uint64(), False)])
        store.write_table(PAGE_DATA, pa.table([values, pa.array(ids, pa.uint64())], schema=data_schema))
        lookup_schema = pa.schema([pa.field("min", values.type, True), pa.field("max", values.type, True),
                                   pa.field("null_count", pa.uint32(), False),
                                   pa.field("page_idx", pa.uint32(), False)])
        lookup = pa.table([values.take(pa.array(starts)), values.take(pa.array(ends - 1)),
                           pa.array(null_counts, pa.uint32()),
                           pa.array(np.arange(len(starts), dtype=np.uint32), pa.uint32())], schema=lookup_schema)
        store.write_table(PAGE_LOOKUP, lookup,
                          metadata={"range_partitioned": "false", "batch_size": str(batch_size)})

    @classmethod
    def load(cls, store: IndexStore, details: bytes) -> ScalarIndex:
        return BTreeIndex(store)


class BTreeIndex(ScalarIndex):
    index_type = BTreeIndexType

    def __init__(self, store: IndexStore) -> None:
        self._store = store
        meta = store.schema_metadata(PAGE_LOOKUP)
        if meta.get("range_partitioned", "false") != "false":
            raise CorruptFileError("range-partitioned BTREE indices are not supported",
                                   path=store.path(PAGE_LOOKUP))
        self._batch_size = int(meta.get("batch_size", DEFAULT_BATCH_SIZE))
        lookup = store.read_table(PAGE_LOOKUP).sort_by("page_idx")
        self._mins = combined(lookup["min"])
        self._maxs = combined(lookup["max"])
        self._null_counts = np.asarray(lookup["null_count"], dtype=np.int64)
        self._pages = np.asarray(lookup["page_idx"], dtype=np.int64)
        self._rows = store.num_rows(PAGE_DATA)
        self._data: pa.Table | None = None  # all of page_data once prewarmed (or mostly read)
        self._whole: tuple[pa.Array, np.ndarray] | None = None  # its values and ids, combined
        self._cached: dict[int, pa.Table] = {}  # page position -> its rows, up to _CACHED_ROWS rows
        self._cached_rows = 0
        self._lock = threading.Lock()
        # pages whose min is null (they hold nulls) come first, then pages whose max is null
        # (only nulls) are the first of those
        self._null_min = int(self._mins.null_count)
        self._null_max = int(self._maxs.null_count)
        self._min_np = self._mins.slice(self._null_min).to_numpy(zero_copy_only=False)
        self._max_np = self._maxs.slice(self._null_max).to_numpy(zero_copy_only=False)

    def statistics(self) -> dict[str, Any]:
        n = len(self._pages)
        return {"min": scalar_text(self._mins[0] if n else None), "max": scalar_text(self._maxs[n - 1] if n else None),
                "num_pages": n}

    def prewarm(self) -> None:
        with self._lock:
            if self._data is None:
                self._keep(self._store.read_table(PAGE_DATA))

    def _keep(self, data: pa.Table) -> None:
        """Hold all of ``page_data`` (and its values and ids as single arrays, for binary search)."""
        self._data = data
        self._whole = (combined(data["values"]), np.asarray(combined(data["ids"]), dtype=np.uint64))

    # -- search ------------------------------------------------------------------------------------

    def _interval_pages(self, lower: Any, upper: Any) -> tuple[int, int]:
        """Pages ``[first, last]`` that may hold values in ``[lower, upper]`` (None: open)."""
        first = self._null_max + (0 if lower is None else int(np.searchsorted(self._max_np, lower, "left")))
        last = len(self._pages) - 1 if upper is None else (
            self._null_min - 1 + int(np.searchsorted(self._min_np, upper, "right")))
        return first, last

    def _candidate_pages(self, query: ScalarQuery) -> np.ndarray | None:
        n = len(self._pages)
        if isinstance(query, IsNull):
            return np.flatnonzero(self._null_counts > 0)
        if isinstance(query, IsNotNull):
            return np.arange(self._null_max, n)
        if isinstance(query, Range) and any(b is not None and not b.is_valid for b in (query.lower, query.upper)):
            return np.zeros(0, dtype=np.int64)  # a comparison with NULL matches nothing
        if is_float(self._mins.type):
            # NaN sorts last and compares unlike numbers: read every page from the first candidate on
            if isinstance(query, Range):
                lower = None if query.lower is None else self._plain(query.lower)
                return np.arange(self._interval_pages(lower, None)[0], n)
            if isinstance(query, (Equals, IsIn)):
                points = self._points(query)
                if points is None:
                    return None
                return np.arange(self._interval_pages(np.min(points), None)[0], n) if len(points) else np.zeros(0, int)
        if isinstance(query, Range):
            lower = None if query.lower is None else self._plain(query.lower)
            upper = None if query.upper is None else self._plain(query.upper)
            first, last = self._interval_pages(lower, upper)
            return np.arange(first, max(first, last + 1))
        if isinstance(query, (Equals, IsIn)):
            points = self._points(query)
            if points is None:
                return None
            if not len(points):
                return np.zeros(0, dtype=np.int64)
            firsts = self._null_max + np.searchsorted(self._max_np, points, "left")
            lasts = self._null_min - 1 + np.searchsorted(self._min_np, points, "right")
            keep = lasts >= firsts
            if not keep.any():
                return np.zeros(0, dtype=np.int64)
            # the union of the ranges [first, last]: mark starts and ends, then a running sum
            marks = np.zeros(n + 1, dtype=np.int64)
            np.add.at(marks, firsts[keep], 1)
            np.add.at(marks, lasts[keep] + 1, -1)
            return np.flatnonzero(np.cumsum(marks)[:n] > 0)
        return None

    def _plain(self, value: pa.Scalar) -> Any:
        """A query bound as the numpy value the lookup arrays compare with."""
        target = self._mins.type
        value = value.value if isinstance(value, pa.ExtensionScalar) else value
        return pa.array([value.cast(target) if value.type != target else value]).to_numpy(zero_copy_only=False)[0]

    def _points(self, query: Equals | IsIn) -> np.ndarray | None:
        target = self._mins.type
        if isinstance(query, Equals):
            if query.value is None or not query.value.is_valid:
                return np.zeros(0)
            array = pa.array([query.value.value if isinstance(query.value, pa.ExtensionScalar) else query.value])
        else:
            array = storage(query.values)
        array = array.drop_null()
        if array.type != target:
            array = array.cast(target)
        return np.sort(array.to_numpy(zero_copy_only=False))

    def _read_pages(self, pages: np.ndarray) -> pa.Table:
        """The rows of ``pages`` (ascending) of ``page_data.lance``: from memory when cached,
        else contiguous missing pages read at once (and cached while the budget lasts)."""
        with self._lock:  # a cached segment is shared by concurrent scans
            return self._read_pages_locked(pages)

    def _read_pages_locked(self, pages: np.ndarray) -> pa.Table:
        data = self._data
        fits = self._rows <= _CACHED_ROWS
        if data is None and len(pages) * (_WHOLE_FRACTION if fits else 2) > len(self._pages):
            # much of the file: one sequential read beats many scattered ones (and, kept when it
            # fits, later searches are binary searches of memory)
            data = self._store.read_table(PAGE_DATA)
            if fits:
                self._keep(data)
        if data is not None:
            if not len(pages):
                return self._empty()
            # one slice per run of consecutive pages (pages are stored in order)
            breaks = np.flatnonzero(np.diff(pages) != 1) + 1
            return pa.concat_tables([
                data.slice(self._pages_offset(int(run[0])),
                           self._pages_offset(int(run[-1])) + self._batch_size - self._pages_offset(int(run[0])))
                for run in np.split(pages, breaks)])
        missing = np.asarray([p for p in pages.tolist() if p not in self._cached], dtype=np.int64)
        if len(missing):
            breaks = np.flatnonzero(np.diff(missing) != 1) + 1
            for run in np.split(missing, breaks):
                start = self._pages_offset(int(run[0]))
                stop = min(self._pages_offset(int(run[-1])) + self._batch_size, self._rows)
                rows = self._store.read_range(PAGE_DATA, start, stop)
                for i, page in enumerate(run.tolist()):
                    piece = rows.slice(i * self._batch_size, self._batch_size)
                    if self._cached_rows + piece.num_rows <= _CACHED_ROWS:
                        self._cached[page] = piece
                        self._cached_rows += piece.num_rows
                    else:
                        return self._read_uncached(pages)
        return pa.concat_tables([self._cached[p] for p in pages.tolist()]) if len(pages) else self._empty()

    def _read_uncached(self, pages: np.ndarray) -> pa.Table:
        breaks = np.flatnonzero(np.diff(pages) != 1) + 1
        pieces = []
        for run in np.split(pages, breaks):
            start = self._pages_offset(int(run[0]))
            stop = min(self._pages_offset(int(run[-1])) + self._batch_size, self._rows)
            if stop > start:
                pieces.append(self._store.read_range(PAGE_DATA, start, stop))
        return pa.concat_tables(pieces) if pieces else self._empty()

    def _empty(self) -> pa.Table:
        return pa.table({"values": pa.array([], self._mins.type), "ids": pa.array([], pa.uint64())})

    def _pages_offset(self, position: int) -> int:
        return int(self._pages[position]) * self._batch_size

    def search(self, query: ScalarQuery) -> SearchResult | None:
        pages = self._candidate_pages(query)
        if pages is None:
            return None
        if not len(pages):
            return SearchResult()
        whole = self._whole
        if whole is not None:  # the segment is in memory: binary search all of it at once
            found = _sorted_positions(whole[0], query, self._plain, self._points)
            if found is not None:
                return SearchResult.of(whole[1][found])
        rows = self._read_pages(pages)
        values = combined(rows["values"])
        found = _sorted_positions(values, query, self._plain, self._points)
        if found is not None:
            return SearchResult.of(np.asarray(combined(rows["ids"]))[found])
        mask = matches(values, query)
        if mask is None:
            return None
        ids = np.asarray(rows["ids"].filter(pa.array(mask)), dtype=np.uint64) if len(rows) else np.zeros(0, np.uint64)
        return SearchResult.of(ids, exact=not is_float(self._mins.type))


def _sorted_positions(values: pa.Array, query: ScalarQuery, plain: Any, points: Any) -> np.ndarray | None:
    """Positions of the ``values`` (ascending integers without nulls, as the pages of a BTREE
    hold them) that an equality, IN or range query selects, by binary search instead of a
    comparison of every value; None for other types and queries (``matches`` decides those)."""
    if not pa.types.is_integer(values.type) or values.null_count or not isinstance(query, (Equals, IsIn, Range)):
        return None
    array = values.to_numpy(zero_copy_only=False)
    if isinstance(query, Range):
        if any(b is not None and not b.is_valid for b in (query.lower, query.upper)):
            return np.zeros(0, dtype=np.int64)
        start = 0 if query.lower is None else int(np.searchsorted(
            array, plain(query.lower), "left" if query.lower_inclusive else "right"))
        stop = len(array) if query.upper is None else int(np.searchsorted(
            array, plain(query.upper), "right" if query.upper_inclusive else "left"))
        return np.arange(start, max(start, stop))
    keys = points(query)
    if keys is None:
        return None
    starts = np.searchsorted(array, keys, "left")
    counts = np.searchsorted(array, keys, "right") - starts
    keep = counts > 0
    starts, counts = starts[keep], counts[keep]
    if not len(counts):
        return np.zeros(0, dtype=np.int64)
    # every [start, start + count): the starts repeated, plus each one's running position
    firsts = np.cumsum(counts) - counts
    return np.repeat(starts - firsts, counts) + np.arange(int(counts.sum()))
