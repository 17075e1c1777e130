"""Reader of Lance v2 data files, file versions 2.0, 2.1 and 2.2.

The caller says which fields to produce with :class:`ColumnPlan` trees: 2.0 has one column per
field, parents included; 2.1/2.2 have one column per leaf (parents are planned with column -1)
and are decoded by :mod:`lance_format.encodings.v2_1`, which this module only dispatches to.

For 2.0 files: Rows of a column are located by the cumulative page lengths (2.0
page priorities are always 0). List columns map rows to items through their offsets pages:
the items of offsets page *p* start at the sum of ``num_items`` of the pages before it.

Only pages that overlap the requested rows are read and decoded; each column keeps its last
decoded pages so that sequential batch reads do not decode a page once per batch. Local files
are memory-mapped, so fixed-width pages decode without copying and a take only touches the
memory pages holding its rows.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from lance_format.encodings.buffers import DecodeContext, bools_to_bitmap
from lance_format.encodings.v2_0_decode import ListOffsetsPage, decode_leaf, decode_leaf_window, decode_list_offsets
from lance_format.encodings.v2_1.column import StructuralColumn, assemble
from lance_format.errors import CorruptFileError, InvalidInputError, LanceError, UnsupportedFeatureError
from lance_format.file.container import FileMetadata, encoding_bytes, read_file_metadata, unpack_any
from lance_format.io.object_store import ObjectStore
from lance_format.proto import encodings_v2_0_pb2, encodings_v2_1_pb2, file_pb2
from lance_format.schema import LanceField, LanceSchema

_PAGE_CACHE_SIZE = 2
# Reads of fewer than 1/_WINDOW_FRACTION of a page's values decode only those values (when
# the encoding allows) instead of decoding and caching the whole page.
_WINDOW_FRACTION = 16
_RANGE_TAKE_ROWS = 1024  # contiguous takes at least this long use the sequential read path
_SMALL_FILE_ROWS = 16384  # ... and so do all contiguous takes from files this small
_INT32_MAX = 2**31 - 1


@dataclass
class ColumnPlan:
    """Which file column holds one (possibly nested) field, and the Arrow field to produce.

    In 2.1+ files parents (structs, lists) have no column: their plan has ``column == -1`` and
    the leaves below carry the columns.
    """

    field: pa.Field
    column: int
    children: list["ColumnPlan"] = field(default_factory=list)


def plans_for_schema(schema: LanceSchema) -> list[ColumnPlan]:
    """Plans for every top-level field of a file written with ``schema`` (2.0: depth-first columns)."""
    counter = [0]

    def plan(lance_field: LanceField) -> ColumnPlan:
        column = counter[0]
        counter[0] += 1
        children = [plan(c) for c in lance_field.children]
        return ColumnPlan(lance_field.to_arrow(), column, children)

    return [plan(f) for f in schema.fields]


def structural_plans_for_schema(schema: LanceSchema) -> list[ColumnPlan]:
    """Plans for every top-level field of a 2.1+ file written with ``schema`` (leaf columns only).

    A leaf is a field without children; a struct marked ``lance-encoding:packed`` is one leaf.
    """
    counter = [0]

    def plan(lance_field: LanceField) -> ColumnPlan:
        flag = lance_field.metadata.get("lance-encoding:packed", lance_field.metadata.get("packed", b""))
        packed = (flag.encode() if isinstance(flag, str) else flag).lower() in (b"true", b"1")
        if not lance_field.children or packed:
            column = counter[0]
            counter[0] += 1
            return ColumnPlan(lance_field.to_arrow(), column)
        return ColumnPlan(lance_field.to_arrow(), -1, [plan(c) for c in lance_field.children])

    return [plan(f) for f in schema.fields]


def _is_list(data_type: pa.DataType) -> bool:
    return pa.types.is_list(data_type) or pa.types.is_large_list(data_type)


class _Column:
    """Page index and decoded-page cache of one file column."""

    def __init__(self, reader: "LanceFileReader", index: int) -> None:
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
        self.ctx = DecodeContext(reader.path, str(index))

    def named(self, name: str) -> "_Column":
        self.ctx = DecodeContext(self.reader.path, name)
        return self

    def encoding(self, page: int) -> encodings_v2_0_pb2.ArrayEncoding:
        enc = self._encodings.get(page)
        if enc is None:
            raw = encoding_bytes(self.pages[page].encoding, self.reader._file, path=self.reader.path, column=self.ctx.column)
            enc = unpack_any(raw, encodings_v2_0_pb2.ArrayEncoding, path=self.reader.path, column=self.ctx.column)
            self._encodings[page] = enc
        return enc

    def check_rows(self, stop: int) -> None:
        if stop > self.total:
            raise self.ctx.corrupt(f"column has {self.total} values but {stop} are needed")

    def page_range(self, start: int, stop: int) -> range:
        first = int(np.searchsorted(self.starts, start, side="right")) - 1
        last = int(np.searchsorted(self.starts, stop, side="left"))
        return range(max(first, 0), min(last, len(self.pages)))

    def buffers(self, page: int) -> list[pa.Buffer]:
        meta = self.pages[page]
        if len(meta.buffer_offsets) != len(meta.buffer_sizes):
            raise self.ctx.corrupt("page has mismatched buffer offsets and sizes")
        if not meta.buffer_offsets:
            return []
        limit = self.reader.metadata.footer.column_meta_start
        ends = [o + s for o, s in zip(meta.buffer_offsets, meta.buffer_sizes)]
        lo, hi = min(meta.buffer_offsets), max(ends)
        if hi > limit:
            raise self.ctx.corrupt(f"page buffer [{lo}, {hi}) lies outside the data region (ends at {limit})")
        # Buffers of one page are adjacent: fetch them with one read.
        blob = self.reader._read(lo, hi - lo, self.ctx)
        return [blob.slice(o - lo, s) for o, s in zip(meta.buffer_offsets, meta.buffer_sizes)]

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

    def _decode(self, page: int, decode):
        """Run a page decoder, turning low-level failures on bad bytes into CorruptFileError."""
        try:
            return decode(self.encoding(page), self.buffers(page), self.pages[page].length, self.ctx)
        except LanceError:
            raise
        except (pa.ArrowException, ValueError, IndexError, OverflowError) as exc:
            raise self.ctx.corrupt(f"page {page} cannot be decoded: {exc}") from exc

    def leaf_page(self, page: int, data_type: pa.DataType) -> pa.Array:
        def make() -> pa.Array:
            array = self._decode(page, lambda e, b, n, c: decode_leaf(e, b, n, data_type, c))
            if len(array) != self.pages[page].length:
                raise self.ctx.corrupt(f"page {page} decoded to {len(array)} values instead of {self.pages[page].length}")
            return array

        return self._cached((page, str(data_type)), make)

    def leaf_window(self, page: int, data_type: pa.DataType, lo: int, hi: int) -> pa.Array:
        """Values ``[lo, hi)`` of a page: a small window of an uncached page is decoded alone."""
        length = self.pages[page].length
        if (lo, hi) == (0, length):
            return self.leaf_page(page, data_type)
        if (hi - lo) * _WINDOW_FRACTION < length and (page, str(data_type)) not in self._cache:
            window = self._decode(page, lambda e, b, n, c: decode_leaf_window(e, b, n, data_type, lo, hi, c))
            if window is not None:
                if len(window) != hi - lo:
                    raise self.ctx.corrupt(f"page {page} window decoded to {len(window)} values instead of {hi - lo}")
                return window
        return self.leaf_page(page, data_type).slice(lo, hi - lo)

    def list_page(self, page: int) -> ListOffsetsPage:
        return self._cached((page, "list"), lambda: self._decode(page, decode_list_offsets))

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


class LanceFileReader:
    """Random and sequential access to the rows of one Lance 2.0 data file."""

    def __init__(self, store: ObjectStore, path: str, *, size: int | None = None) -> None:
        self.store = store
        self.path = path
        self._file, self._mapped = _open(store, path)
        try:
            # size 0 means unknown (manifests may record 0 for file_size_bytes)
            file_size = size if size else self._file.size()
            self.metadata: FileMetadata = read_file_metadata(self._file, file_size, path=path)
        except BaseException:
            self._file.close()
            raise
        self.version: tuple[int, int] = self.metadata.version
        self.num_rows: int = int(self.metadata.descriptor.length)
        self.num_columns: int = len(self.metadata.columns)
        self._columns: dict[int, _Column] = {}
        self._verified: set[tuple[int, int]] = set()
        self.structural: bool = self.version[0] == 2 and self.version[1] >= 1
        self._leaf_columns: dict[int, StructuralColumn] = {}

    # -- plumbing --------------------------------------------------------------------------------
    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "LanceFileReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def schema(self) -> file_pb2.Schema:
        return self.metadata.descriptor.schema

    def lance_schema(self) -> LanceSchema:
        """The FileDescriptor schema as a :class:`LanceSchema`."""
        pb = self.metadata.descriptor.schema
        try:
            return LanceSchema.from_protos(list(pb.fields), dict(pb.metadata))
        except LanceError as exc:
            raise CorruptFileError(f"the file's schema is invalid: {exc.reason}", path=self.path) from exc

    def _read(self, offset: int, length: int, ctx: DecodeContext) -> pa.Buffer:
        if self._mapped is not None:
            # zero-copy: pages are decoded straight from the mapping, and a take only
            # touches the memory pages of the rows it needs
            if offset + length > len(self._mapped):
                raise ctx.corrupt(f"read of {length} bytes at {offset} runs past the end of the file")
            return self._mapped.slice(offset, length)
        data = self._file.read_at(length, offset)
        if len(data) != length:
            raise ctx.corrupt(f"short read of {length} bytes at {offset}")
        return pa.py_buffer(data)

    def _column(self, plan: ColumnPlan) -> _Column:
        if not 0 <= plan.column < self.num_columns:
            raise CorruptFileError(
                f"field refers to column {plan.column} but the file has {self.num_columns} columns",
                path=self.path,
                column=plan.field.name,
            )
        col = self._columns.get(plan.column)
        if col is None:
            col = self._columns[plan.column] = _Column(self, plan.column)
        return col.named(plan.field.name)

    def _check_plans(self, plans: list[ColumnPlan]) -> None:
        for plan in plans:
            col = self._column(plan)
            if col.total != self.num_rows and (plan.column, -1) not in self._verified:
                raise col.ctx.corrupt(f"column has {col.total} rows, the file has {self.num_rows}")
            self._verified.add((plan.column, -1))
            self._check_children(plan)

    def _check_children(self, plan: ColumnPlan) -> None:
        data_type = plan.field.type
        col = self._column(plan)
        if pa.types.is_struct(data_type) or _is_list(data_type):
            if len(plan.children) != (data_type.num_fields if pa.types.is_struct(data_type) else 1):
                raise InvalidInputError(f"plan for {plan.field.name!r} has the wrong number of children")
            if pa.types.is_struct(data_type) and (plan.column, -2) not in self._verified:
                for p in range(len(col.pages)):
                    if col.encoding(p).WhichOneof("array_encoding") != "struct":
                        raise col.ctx.corrupt(f"page {p} of a struct column is not a struct header page")
                self._verified.add((plan.column, -2))
            expected = col.total if pa.types.is_struct(data_type) else int(col.item_bases()[-1])
            for child in plan.children:
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

    # -- reads -----------------------------------------------------------------------------------
    def read_range(self, plans: list[ColumnPlan], start: int, stop: int) -> list[pa.Array]:
        """Rows ``[start, stop)`` of each planned field."""
        if not 0 <= start <= stop <= self.num_rows:
            raise InvalidInputError(f"row range [{start}, {stop}) is outside the file's {self.num_rows} rows")
        if self.structural:
            return self._structural(plans, lambda col, t: col.read(start, stop, t))
        self._check_plans(plans)
        return [self._read_plan(plan, start, stop) for plan in plans]

    def take(self, plans: list[ColumnPlan], indices) -> list[pa.Array]:
        """The rows at ``indices`` (any order, duplicates allowed) of each planned field."""
        idx = np.asarray(indices)
        if idx.ndim != 1:
            raise InvalidInputError("take indices must be one-dimensional")
        if idx.size and (idx.dtype.kind not in "iu" or int(idx.min()) < 0 or int(idx.max()) >= self.num_rows):
            raise InvalidInputError(f"take indices must be integers in [0, {self.num_rows})")
        idx = idx.astype(np.int64, copy=False)
        if not self.structural:
            self._check_plans(plans)
        ordered = idx.size < 2 or bool(np.all(idx[1:] > idx[:-1]))
        if ordered:
            rows, inverse = idx, None
        else:
            rows, inverse = np.unique(idx, return_inverse=True)
        if self.structural:
            # A long contiguous run reads like a scan; a short one (a point lookup) in a large
            # file must not trigger the scan's read-ahead, so it takes just the chunks holding
            # its rows. Small files are read whole either way, and the read path caches them.
            sequential = len(rows) >= _RANGE_TAKE_ROWS or self.num_rows <= _SMALL_FILE_ROWS
            if sequential and len(rows) and int(rows[-1]) - int(rows[0]) + 1 == len(rows):
                first, last = int(rows[0]), int(rows[-1]) + 1
                arrays = self._structural(plans, lambda col, t: col.read(first, last, t))
            else:
                arrays = self._structural(plans, lambda col, t: col.take(rows, t))
            return [a if inverse is None else a.take(pa.array(inverse.ravel())) for a in arrays]
        out = []
        for plan in plans:
            array = self._take_plan(plan, rows)
            out.append(array if inverse is None else array.take(pa.array(inverse.ravel())))
        return out

    # -- 2.1+ ------------------------------------------------------------------------------------
    def _structural(self, plans: list[ColumnPlan], fetch) -> list[pa.Array]:
        """Decode each plan's leaves with ``fetch(column, type)`` and assemble the fields."""
        out = []
        for plan in plans:
            named = self._named_leaves(plan, "")
            if self.num_rows == 0:
                out.append(pa.array([], type=plan.field.type))
                continue
            leaves = {lp.column: fetch(self._leaf_column(lp, name), lp.field.type) for lp, name in named}
            names = {lp.field.name: name for lp, name in named}
            out.append(assemble(plan, leaves, lambda n: DecodeContext(self.path, names.get(n, n))))
        return out

    def _named_leaves(self, plan: ColumnPlan, prefix: str) -> list[tuple[ColumnPlan, str]]:
        name = f"{prefix}{plan.field.name}"
        if (plan.field.metadata or {}).get(b"ARROW:extension:name") == b"lance.blob.v2":
            raise UnsupportedFeatureError("blob v2 columns (lance.blob.v2) are not supported yet",
                                          path=self.path, column=name)
        if plan.column >= 0:
            if plan.column >= self.num_columns:
                raise CorruptFileError(
                    f"field refers to column {plan.column} but the file has {self.num_columns} columns",
                    path=self.path, column=name,
                )
            return [(plan, name)]
        if not plan.children:
            raise InvalidInputError(f"plan for {name!r} has neither a column nor children")
        return [leaf for child in plan.children for leaf in self._named_leaves(child, name + ".")]

    def _leaf_column(self, plan: ColumnPlan, name: str) -> StructuralColumn:
        col = self._leaf_columns.get(plan.column)
        if col is None:
            ctx = DecodeContext(self.path, name)
            pages = list(self.metadata.columns[plan.column].pages)

            def layout_of(page: int) -> encodings_v2_1_pb2.PageLayout:
                raw = encoding_bytes(pages[page].encoding, self._file, path=self.path, column=name)
                return unpack_any(raw, encodings_v2_1_pb2.PageLayout, path=self.path, column=name)

            def read_at(offset: int, length: int) -> np.ndarray:
                return np.frombuffer(self._read(offset, length, ctx), np.uint8)

            col = StructuralColumn(pages, ctx, layout_of, read_at, self.metadata.footer.column_meta_start)
            if col.total != self.num_rows:
                raise ctx.corrupt(f"column has {col.total} rows, the file has {self.num_rows}")
            self._leaf_columns[plan.column] = col
        return col

    # -- range path ------------------------------------------------------------------------------
    def _read_plan(self, plan: ColumnPlan, start: int, stop: int) -> pa.Array:
        data_type = plan.field.type
        col = self._column(plan)
        col.check_rows(stop)
        if pa.types.is_struct(data_type):
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
        for p in col.page_range(start, stop):
            page_start, page_stop = int(col.starts[p]), int(col.starts[p + 1])
            if page_stop <= page_start:
                continue
            lo, hi = max(start, page_start) - page_start, min(stop, page_stop) - page_start
            pieces.append(col.leaf_window(p, data_type, lo, hi))
        return _concat(pieces, data_type)

    def _list_rows_range(self, col: _Column, start: int, stop: int) -> tuple[int, np.ndarray, np.ndarray]:
        """(first item, global end item of each list, validity) for rows [start, stop)."""
        bases = col.item_bases()
        ends, valid = [], []
        first = None
        for p in col.page_range(start, stop):
            page_start, page_stop = int(col.starts[p]), int(col.starts[p + 1])
            if page_stop <= page_start:
                continue
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
        data_type = plan.field.type
        col = self._column(plan)
        if len(rows):
            col.check_rows(int(rows[-1]) + 1)
        if pa.types.is_struct(data_type):
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
        for group in np.split(np.arange(len(rows)), bounds) if len(rows) else []:
            p = int(page_of[group[0]])
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
        pos = 0
        for group_rows in np.split(rows, bounds) if len(rows) else []:
            p = int(page_of[pos])
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


# -- helpers -------------------------------------------------------------------------------------


def _open(store: ObjectStore, path: str) -> tuple[pa.NativeFile, pa.Buffer | None]:
    """Open a data file; local files are memory-mapped (data files are immutable once written)."""
    full = store.local_path(path)
    if full is not None:
        try:
            mapped = pa.memory_map(full, "r")
        except FileNotFoundError as exc:
            raise CorruptFileError("file is missing", table=store.uri, path=path) from exc
        except (OSError, pa.ArrowException):
            pass  # e.g. an empty file cannot be mapped: fall back to plain reads
        else:
            return mapped, mapped.read_buffer()
    return store.open_input(path), None


# -- array builders ------------------------------------------------------------------------------


def _concat(pieces: list[pa.Array], data_type: pa.DataType) -> pa.Array:
    if not pieces:
        return pa.array([], type=data_type)
    if len(pieces) == 1:
        return pieces[0]
    return pa.concat_arrays(pieces)


def _struct(data_type: pa.StructType, length: int, children: list[pa.Array]) -> pa.Array:
    return pa.StructArray.from_buffers(data_type, length, [None], children=children)


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
