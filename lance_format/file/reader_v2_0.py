"""Reading Lance file version 2.0: one column per field, pages described by ``ArrayEncoding`` trees.

Every field, parents included, has its own column (see :func:`~lance_format.file.plans.plans_for_schema`);
pages are decoded by :mod:`lance_format.encodings.array_v2_0`. Rows of a column are located by the
cumulative page lengths (2.0 page priorities are always 0). List columns map rows to items
through their offsets pages: the items of offsets page *p* start at the sum of ``num_items`` of
the pages before it. Struct columns hold header pages only; their children carry the rows.

Strings and binaries written by Lance 0.13 and earlier (file version "0.3", the pre-release 2.0)
are two columns: list offsets pages, and the bytes as a ``uint8`` column right after; they read
as ``list<uint8>`` and are turned into the string type (:meth:`ArrayEncodedReader._as_stored`).

Only pages that overlap the requested rows are read and decoded; each column keeps its last
decoded pages so that sequential batch reads do not decode a page once per batch, and a read of
a small window of a page decodes only that window when the encoding allows.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from lance_format.encodings.array_v2_0.decode import (
    ListOffsetsPage,
    decode_leaf,
    decode_leaf_window,
    decode_list_offsets,
)
from lance_format.encodings.buffers import DecodeContext, bools_to_bitmap
from lance_format.errors import CorruptFileError, InvalidInputError, LanceError, UnsupportedFeatureError
from lance_format.file.plans import ColumnPlan
from lance_format.proto import encodings_v2_0_pb2

# a blob column's descriptions; a null blob is (1, 0) (lance_format.file.blob_columns writes them)
BLOB_DESCRIPTION = pa.struct([pa.field("position", pa.uint64(), False), pa.field("size", pa.uint64(), False)])
_NULL_BLOB_POSITION = 1

if TYPE_CHECKING:
    from lance_format.file.reader import DataFileReader

_PAGE_CACHE_SIZE = 2
# Reads of fewer than 1/_WINDOW_FRACTION of a page's values decode only those values (when
# the encoding allows) instead of decoding and caching the whole page.
_WINDOW_FRACTION = 16
_INT32_MAX = 2**31 - 1
# On object stores the buffers of the pages a read will decode are fetched ahead as one batch of
# coalesced requests, at most this many bytes at a time (the rest when the decoding gets there).
_PREFETCH_BYTES = 64 << 20


def _list_key(page: int) -> tuple:
    """The cache key of a decoded list offsets page."""
    return (page, "list")


def _is_list(data_type: pa.DataType) -> bool:
    return pa.types.is_list(data_type) or pa.types.is_large_list(data_type)


def _is_binary_like(data_type: pa.DataType) -> bool:
    return (pa.types.is_string(data_type) or pa.types.is_large_string(data_type)
            or pa.types.is_binary(data_type) or pa.types.is_large_binary(data_type))


class _Column:
    """Page index and decoded-page cache of one file column."""

    def __init__(self, reader: DataFileReader, index: int) -> None:
        self.reader = reader
        self.index = index
        self.pages = reader.metadata.columns[index].pages
        lengths = np.fromiter((p.length for p in self.pages), np.int64, len(self.pages))
        self.starts = np.zeros(len(self.pages) + 1, np.int64)
        np.cumsum(lengths, out=self.starts[1:])
        self.total = int(self.starts[-1])
        self._encodings: dict[int, encodings_v2_0_pb2.ArrayEncoding] = {}
        self._cache: OrderedDict[tuple, object] = OrderedDict()
        self._item_bases: np.ndarray | None = None
        self._fetched: dict[int, pa.Buffer] = {}  # page -> its buffers' bytes, fetched ahead
        self.ctx = DecodeContext(reader.path, str(index))

    def named(self, name: str) -> _Column:
        self.ctx = DecodeContext(self.reader.path, name)
        return self

    def encoding(self, page: int) -> encodings_v2_0_pb2.ArrayEncoding:
        enc = self._encodings.get(page)
        if enc is None:
            enc = self.reader.page_encoding(self.pages[page], encodings_v2_0_pb2.ArrayEncoding, self.ctx.column)
            self._encodings[page] = enc
        return enc

    def check_rows(self, stop: int) -> None:
        if stop > self.total:
            raise self.ctx.corrupt(f"column has {self.total} values but {stop} are needed")

    def page_range(self, start: int, stop: int) -> range:
        first = int(np.searchsorted(self.starts, start, side="right")) - 1
        last = int(np.searchsorted(self.starts, stop, side="left"))
        return range(max(first, 0), min(last, len(self.pages)))

    def _extent(self, page: int) -> tuple[int, int] | None:
        """``[lo, hi)`` of the page's buffers (adjacent in the file), None when it has none."""
        meta = self.pages[page]
        if len(meta.buffer_offsets) != len(meta.buffer_sizes):
            raise self.ctx.corrupt("page has mismatched buffer offsets and sizes")
        if not meta.buffer_offsets:
            return None
        limit = self.reader.metadata.footer.column_meta_start
        lo = min(meta.buffer_offsets)
        hi = max(o + s for o, s in zip(meta.buffer_offsets, meta.buffer_sizes))
        if hi > limit:
            raise self.ctx.corrupt(f"page buffer [{lo}, {hi}) lies outside the data region (ends at {limit})")
        return lo, hi

    def buffers(self, page: int) -> list[pa.Buffer]:
        extent = self._extent(page)
        if extent is None:
            return []
        lo, hi = extent
        meta = self.pages[page]
        # Buffers of one page are adjacent: fetch them with one read (or take them fetched ahead).
        blob = self._fetched.pop(page, None)
        if blob is None:
            blob = self.reader.read_bytes(lo, hi - lo, self.ctx)
        return [blob.slice(o - lo, s) for o, s in zip(meta.buffer_offsets, meta.buffer_sizes)]

    def fetch_ahead(self, pages: Sequence[int], key: Callable[[int], tuple]) -> None:
        """Before decoding ``pages[0]``: on an object store, fetch the buffers of it and of the
        pages after it that are neither decoded (``key(page)`` in the cache) nor fetched yet, as
        one batch of coalesced parallel requests (up to :data:`_PREFETCH_BYTES`). A take's or a
        range's pages then cost a few requests instead of one each."""
        if not self.reader.remote or not pages or pages[0] in self._fetched or key(pages[0]) in self._cache:
            return
        self._fetched.clear()  # what is left of an earlier batch was decoded from the cache instead
        wanted: list[int] = []
        ranges: list[tuple[int, int]] = []
        total = 0
        for page in pages:
            if page in self._fetched or key(page) in self._cache or page in wanted:
                continue
            extent = self._extent(page)
            if extent is None:
                continue
            if ranges and total + extent[1] - extent[0] > _PREFETCH_BYTES:
                break
            wanted.append(page)
            ranges.append((extent[0], extent[1] - extent[0]))
            total += extent[1] - extent[0]
        if len(ranges) > 1:
            self._fetched.update(zip(wanted, self.reader.read_many(ranges, self.ctx)))

    def _cached(self, key: tuple, make):
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        value = make()
        self._cache[key] = value
        if len(self._cache) > _PAGE_CACHE_SIZE:
            self._cache.popitem(last=False)
        return value

    def _decode(self, page: int, decode, buffers: list[pa.Buffer] | None = None):
        """Run a page decoder, turning low-level failures on bad bytes into CorruptFileError."""
        try:
            if buffers is None:
                buffers = self.buffers(page)
            return decode(self.encoding(page), buffers, self.pages[page].length, self.ctx)
        except LanceError:
            raise
        except (pa.ArrowException, ValueError, IndexError, OverflowError) as exc:
            raise self.ctx.corrupt(f"page {page} cannot be decoded: {exc}") from exc

    def leaf_page(self, page: int, data_type: pa.DataType, buffers: list[pa.Buffer] | None = None) -> pa.Array:
        def make() -> pa.Array:
            array = self._decode(page, lambda e, b, n, c: decode_leaf(e, b, n, data_type, c), buffers)
            if len(array) != self.pages[page].length:
                raise self.ctx.corrupt(f"page {page} decoded to {len(array)} values instead of {self.pages[page].length}")
            return array

        return self._cached((page, str(data_type)), make)

    def leaf_window(self, page: int, data_type: pa.DataType, lo: int, hi: int) -> pa.Array:
        """Values ``[lo, hi)`` of a page: a small window of an uncached page is decoded alone."""
        length = self.pages[page].length
        if (lo, hi) == (0, length):
            return self.leaf_page(page, data_type)
        buffers = None
        if (hi - lo) * _WINDOW_FRACTION < length and (page, str(data_type)) not in self._cache:
            buffers = self.buffers(page)  # read once: the whole page may be decoded after all
            window = self._decode(page, lambda e, b, n, c: decode_leaf_window(e, b, n, data_type, lo, hi, c), buffers)
            if window is not None:
                if len(window) != hi - lo:
                    raise self.ctx.corrupt(f"page {page} window decoded to {len(window)} values instead of {hi - lo}")
                return window
        return self.leaf_page(page, data_type, buffers).slice(lo, hi - lo)

    def list_page(self, page: int) -> ListOffsetsPage:
        return self._cached(_list_key(page), lambda: self._decode(page, decode_list_offsets))

    def item_bases(self) -> np.ndarray:
        """First item of each offsets page (plus the total), from the page encodings."""
        if self._item_bases is None:
            counts = []
            for p in range(len(self.pages)):
                enc = self.encoding(p)
                if enc.WhichOneof("array_encoding") != "list":
                    raise self.ctx.corrupt(f"page {p} of a list column is not a list offsets page")
                counts.append(enc.list.num_items)
            bases = np.zeros(len(counts) + 1, np.int64)
            np.cumsum(np.asarray(counts, np.int64), out=bases[1:])
            self._item_bases = bases
        return self._item_bases


class ArrayEncodedReader:
    """Range reads and takes of planned fields from the columns of one 2.0 file.

    :class:`~lance_format.file.reader.DataFileReader` validates the requests and owns the file;
    this class checks the column tree against the plans and decodes the pages.
    """

    def __init__(self, reader: DataFileReader) -> None:
        self.reader = reader
        self.path = reader.path
        self.num_rows = reader.num_rows
        self.num_columns = reader.num_columns
        self._columns: dict[int, _Column] = {}
        self._verified: set[tuple[int, int]] = set()

    def read_range(self, plans: list[ColumnPlan], start: int, stop: int) -> list[pa.Array]:
        """Rows ``[start, stop)`` (already validated) of each planned field."""
        self.check(plans)
        return [self._read_plan(plan, start, stop) for plan in plans]

    def take(self, plans: list[ColumnPlan], rows: np.ndarray) -> list[pa.Array]:
        """The rows at ``rows`` (sorted, unique, already validated) of each planned field."""
        self.check(plans)
        return [self._take_plan(plan, rows) for plan in plans]

    # -- plan checks -----------------------------------------------------------------------------
    def _column(self, plan: ColumnPlan) -> _Column:
        if not 0 <= plan.column < self.num_columns:
            raise CorruptFileError(
                f"field refers to column {plan.column} but the file has {self.num_columns} columns",
                path=self.path,
                column=plan.field.name,
            )
        col = self._columns.get(plan.column)
        if col is None:
            col = self._columns[plan.column] = _Column(self.reader, plan.column)
        return col.named(plan.field.name)

    def _as_stored(self, plan: ColumnPlan) -> ColumnPlan:
        """The plan of what the column really holds: a string or binary field stored the pre-2.0
        way (its column holds list offsets pages) reads as ``list<uint8>`` whose bytes are the
        next column, as official Lance reads such files."""
        if plan.children or not _is_binary_like(plan.field.type):
            return plan
        col = self._column(plan)
        if not col.pages or col.encoding(0).WhichOneof("array_encoding") != "list":
            return plan
        large = pa.types.is_large_string(plan.field.type) or pa.types.is_large_binary(plan.field.type)
        item = pa.field("item", pa.uint8())
        stored = pa.field(plan.field.name, pa.large_list(item) if large else pa.list_(item), plan.field.nullable)
        return ColumnPlan(stored, plan.column, [ColumnPlan(item, plan.column + 1)])

    def check(self, plans: list[ColumnPlan]) -> None:
        """Check that the planned columns hold as many rows and values as their parents need."""
        for plan in plans:
            plan = self._as_stored(plan)
            col = self._column(plan)
            if col.total != self.num_rows and (plan.column, -1) not in self._verified:
                raise col.ctx.corrupt(f"column has {col.total} rows, the file has {self.num_rows}")
            self._verified.add((plan.column, -1))
            self._check_children(plan)

    def _check_children(self, plan: ColumnPlan) -> None:
        data_type = plan.field.type
        col = self._column(plan)
        if (pa.types.is_struct(data_type) and plan.children) or _is_list(data_type):  # no children: packed
            if len(plan.children) != (data_type.num_fields if pa.types.is_struct(data_type) else 1):
                raise InvalidInputError(f"plan for {plan.field.name!r} has the wrong number of children")
            if pa.types.is_struct(data_type) and (plan.column, -2) not in self._verified:
                for p in range(len(col.pages)):
                    if col.encoding(p).WhichOneof("array_encoding") != "struct":
                        raise col.ctx.corrupt(f"page {p} of a struct column is not a struct header page")
                self._verified.add((plan.column, -2))
            expected = col.total if pa.types.is_struct(data_type) else int(col.item_bases()[-1])
            for child in plan.children:
                child = self._as_stored(child)
                key = (plan.column, child.column)
                if key not in self._verified:
                    child_col = self._column(child)
                    if child_col.total != expected:
                        raise child_col.ctx.corrupt(
                            f"column has {child_col.total} values, its parent {plan.field.name!r} needs {expected}"
                        )
                    self._verified.add(key)
                self._check_children(child)
        elif plan.children:
            raise UnsupportedFeatureError(
                f"nested values inside {data_type} are not supported in file version 2.0",
                path=self.path,
                column=plan.field.name,
            )

    # -- blob columns ----------------------------------------------------------------------------
    def _blob_descriptions(self, plan: ColumnPlan) -> ColumnPlan | None:
        """For a ``large_binary`` field stored as a blob column (its pages a packed struct of
        ``(position, size)`` descriptions, the bytes elsewhere in the file, as pylance writes
        ``lance-encoding:blob`` fields in 2.0): the plan reading those descriptions."""
        if plan.children or not pa.types.is_large_binary(plan.field.type):
            return None
        col = self._column(plan)
        if not col.pages or col.encoding(0).WhichOneof("array_encoding") != "packed_struct":
            return None
        return ColumnPlan(pa.field(plan.field.name, BLOB_DESCRIPTION, plan.field.nullable), plan.column)

    def _resolve_blobs(self, descriptions: pa.StructArray, ctx: DecodeContext) -> pa.Array:
        """The blobs' bytes (one read spanning the rows' blobs) as ``large_binary``."""
        n = len(descriptions)
        positions = descriptions.field(0).to_numpy(zero_copy_only=False).astype(np.int64)
        sizes = descriptions.field(1).to_numpy(zero_copy_only=False).astype(np.int64)
        null = (sizes == 0) & (positions == _NULL_BLOB_POSITION)
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(sizes, out=offsets[1:])
        data = np.zeros(0, np.uint8)
        if offsets[-1]:
            stored = sizes > 0
            lo, hi = int(positions[stored].min()), int((positions + sizes)[stored].max())
            if lo < 0 or hi > self.reader.metadata.footer.column_meta_start:
                raise ctx.corrupt(f"blob bytes [{lo}, {hi}) lie outside the data region")
            span = np.frombuffer(self.reader.read_bytes(lo, hi - lo, ctx), np.uint8)
            data = span[np.repeat(positions - lo - offsets[:-1], sizes) + np.arange(offsets[-1], dtype=np.int64)]
        validity = bools_to_bitmap(~null) if null.any() else None
        return pa.Array.from_buffers(pa.large_binary(), n, [validity, pa.py_buffer(offsets), pa.py_buffer(data)])

    # -- range path ------------------------------------------------------------------------------
    def _read_plan(self, plan: ColumnPlan, start: int, stop: int) -> pa.Array:
        described = self._blob_descriptions(plan)
        if described is not None:
            return self._resolve_blobs(self._read_plan(described, start, stop), self._column(plan).ctx)
        stored = self._as_stored(plan)
        if stored is not plan:
            return _bytes_as(plan.field.type, self._read_plan(stored, start, stop))
        data_type = plan.field.type
        col = self._column(plan)
        col.check_rows(stop)
        if pa.types.is_struct(data_type) and plan.children:  # without children: a packed struct leaf
            children = [self._read_plan(c, start, stop) for c in plan.children]
            return _struct(data_type, stop - start, children)
        if _is_list(data_type):
            first, ends, valid = self._list_rows_range(col, start, stop)
            last = int(ends[-1]) if len(ends) else first
            items = self._read_plan(plan.children[0], first, last)
            return _list(data_type, ends - first, valid, items, col.ctx)
        return self._leaf_range(col, data_type, start, stop)

    def _leaf_range(self, col: _Column, data_type: pa.DataType, start: int, stop: int) -> pa.Array:
        pieces = []
        pages = list(col.page_range(start, stop))
        for i, p in enumerate(pages):
            page_start, page_stop = int(col.starts[p]), int(col.starts[p + 1])
            if page_stop <= page_start:
                continue
            col.fetch_ahead(pages[i:], lambda q: (q, str(data_type)))
            lo, hi = max(start, page_start) - page_start, min(stop, page_stop) - page_start
            pieces.append(col.leaf_window(p, data_type, lo, hi))
        return _concat(pieces, data_type)

    def _list_rows_range(self, col: _Column, start: int, stop: int) -> tuple[int, np.ndarray, np.ndarray]:
        """(first item, global end item of each list, validity) for rows [start, stop)."""
        bases = col.item_bases()
        ends, valid = [], []
        first = None
        pages = list(col.page_range(start, stop))
        for i, p in enumerate(pages):
            page_start, page_stop = int(col.starts[p]), int(col.starts[p + 1])
            if page_stop <= page_start:
                continue
            col.fetch_ahead(pages[i:], _list_key)
            page = col.list_page(p)
            lo, hi = max(start, page_start) - page_start, min(stop, page_stop) - page_start
            base = int(bases[p])
            if first is None:
                first = base + (int(page.ends[lo - 1]) if lo else 0)
            ends.append(page.ends[lo:hi] + base)
            valid.append(page.valid[lo:hi])
        if first is None:
            return 0, np.zeros(0, np.int64), np.zeros(0, np.bool_)
        return first, np.concatenate(ends), np.concatenate(valid)

    # -- take path -------------------------------------------------------------------------------
    def _take_plan(self, plan: ColumnPlan, rows: np.ndarray) -> pa.Array:
        """Rows (sorted, unique) of one planned field."""
        if len(rows) and int(rows[-1]) - int(rows[0]) + 1 == len(rows):
            return self._read_plan(plan, int(rows[0]), int(rows[-1]) + 1)  # contiguous: range path
        described = self._blob_descriptions(plan)
        if described is not None:
            return self._resolve_blobs(self._take_plan(described, rows), self._column(plan).ctx)
        stored = self._as_stored(plan)
        if stored is not plan:
            return _bytes_as(plan.field.type, self._take_plan(stored, rows))
        data_type = plan.field.type
        col = self._column(plan)
        if len(rows):
            col.check_rows(int(rows[-1]) + 1)
        if pa.types.is_struct(data_type) and plan.children:  # without children: a packed struct leaf
            children = [self._take_plan(c, rows) for c in plan.children]
            return _struct(data_type, len(rows), children)
        if _is_list(data_type):
            starts, ends, valid = self._list_rows_take(col, rows)
            lengths = ends - starts
            offsets = np.zeros(len(rows) + 1, np.int64)
            np.cumsum(lengths, out=offsets[1:])
            item_rows = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1], dtype=np.int64)
            items = self._take_plan(plan.children[0], item_rows)
            return _list(data_type, offsets[1:], valid, items, col.ctx)
        pieces = []
        page_of = np.searchsorted(col.starts, rows, side="right") - 1
        bounds = np.flatnonzero(np.diff(page_of)) + 1
        pages = np.unique(page_of).tolist()
        for i, group in enumerate(np.split(np.arange(len(rows)), bounds) if len(rows) else []):
            p = int(page_of[group[0]])
            col.fetch_ahead(pages[i:], lambda q: (q, str(data_type)))
            local = rows[group] - col.starts[p]
            lo, hi = int(local[0]), int(local[-1]) + 1  # rows are sorted
            pieces.append(col.leaf_window(p, data_type, lo, hi).take(pa.array(local - lo)))
        return _concat(pieces, data_type)

    def _list_rows_take(self, col: _Column, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        bases = col.item_bases()
        starts = np.empty(len(rows), np.int64)
        ends = np.empty(len(rows), np.int64)
        valid = np.empty(len(rows), np.bool_)
        page_of = np.searchsorted(col.starts, rows, side="right") - 1
        bounds = np.flatnonzero(np.diff(page_of)) + 1
        pages = np.unique(page_of).tolist()
        pos = 0
        for i, group_rows in enumerate(np.split(rows, bounds) if len(rows) else []):
            p = int(page_of[pos])
            col.fetch_ahead(pages[i:], _list_key)
            page = col.list_page(p)
            local = group_rows - col.starts[p]
            n = len(local)
            page_ends = page.ends[local]
            prev = np.where(local > 0, page.ends[np.maximum(local - 1, 0)], 0)
            starts[pos : pos + n] = prev + bases[p]
            ends[pos : pos + n] = page_ends + bases[p]
            valid[pos : pos + n] = page.valid[local]
            pos += n
        return starts, ends, valid


# -- array builders ------------------------------------------------------------------------------



def _concat(pieces: list[pa.Array], data_type: pa.DataType) -> pa.Array:
    if not pieces:
        return pa.array([], type=data_type)
    if len(pieces) == 1:
        return pieces[0]
    return pa.concat_arrays(pieces)


def _struct(data_type: pa.StructType, length: int, children: list[pa.Array]) -> pa.Array:
    return pa.StructArray.from_buffers(data_type, length, [None], children=children)


def _bytes_as(data_type: pa.DataType, lists: pa.Array) -> pa.Array:
    """A ``list<uint8>`` array as the string/binary type its bytes are (no copy)."""
    if lists.offset:  # _list builds unsliced arrays; a sliced one is normalised first
        lists = pa.concat_arrays([lists])
    items = lists.values  # the items of this array only, offset applied
    offsets = lists.offsets  # relative to the unsliced items: rebase on the first
    large = pa.types.is_large_string(data_type) or pa.types.is_large_binary(data_type)
    base = offsets[0].as_py() if len(offsets) else 0
    values = items.buffers()[1]
    offset_values = np.asarray(offsets, np.int64 if large else np.int32)
    if base or items.offset:
        offset_values = offset_values - base
        values = values.slice(items.offset + base)
    return pa.Array.from_buffers(data_type, len(lists), [lists.buffers()[0], pa.py_buffer(offset_values), values])


def _list(data_type: pa.DataType, ends: np.ndarray, valid: np.ndarray, items: pa.Array, ctx: DecodeContext) -> pa.Array:
    """A list array from end offsets relative to the first item of ``items``."""
    large = pa.types.is_large_list(data_type)
    n = len(ends)
    if not large and n and int(ends[-1]) > _INT32_MAX:
        raise ctx.corrupt("list has more than 2^31 items in one read; use large_list")
    offsets = np.empty(n + 1, np.int64 if large else np.int32)
    offsets[0] = 0
    offsets[1:] = ends
    validity = None if valid.all() else bools_to_bitmap(valid)
    return pa.Array.from_buffers(data_type, n, [validity, pa.py_buffer(offsets)], children=[items])
