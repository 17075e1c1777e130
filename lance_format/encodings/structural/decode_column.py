"""One leaf column of a 2.1/2.2 file: its pages, row lookup, and nested-array assembly.

Every leaf column has its own pages; a page's ``length`` is its number of top-level rows and its
``priority`` its first row. :class:`StructuralColumn` maps rows to pages and asks the page
decoders (mini-block, full-zip, constant, blob) for just those rows, so memory stays bounded by
the request. :func:`assemble` then builds the Arrow array of a (possibly nested) field from the
:class:`LeafData` of its leaves: structs and lists (and maps, which are
lists of their entries struct) take their validity and offsets from their first leaf (all leaves
below a node share them), leaves contribute their values.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import pyarrow as pa
from google.protobuf.message import DecodeError

from lance_format.encodings.buffers import DecodeContext
from lance_format.encodings.structural.decode_constant import BlobPage, ConstantPage
from lance_format.encodings.structural.decode_fullzip import FullZipPage
from lance_format.encodings.structural.decode_miniblock import MiniBlockPage
from lance_format.encodings.structural.decode_pages import PageDecoder, PageIO
from lance_format.encodings.structural.decode_repdef import LeafData, concat_leaves
from lance_format.encodings.structural.decoded_blocks import bitmap
from lance_format.errors import LanceError, UnsupportedFeatureError
from lance_format.proto import encodings_v2_1_pb2 as pb
from lance_format.proto import file2_pb2

_INT32_MAX = 2**31 - 1
# low-level failures that mean the bytes are bad (never TypeError: that would be our bug)
DECODE_ERRORS = (ValueError, IndexError, OverflowError, KeyError, pa.ArrowException, DecodeError)


def make_page(layout: pb.PageLayout, io: PageIO, rows: int, read_file: Callable[[int, int], np.ndarray]) -> PageDecoder:
    kind = layout.WhichOneof("layout")
    if kind == "mini_block_layout":
        return MiniBlockPage(layout.mini_block_layout, io, rows)
    if kind == "full_zip_layout":
        return FullZipPage(layout.full_zip_layout, io, rows)
    if kind == "constant_layout":
        return ConstantPage(layout.constant_layout, io, rows)
    if kind == "blob_layout":
        if not layout.blob_layout.HasField("inner_layout"):
            raise io.ctx.corrupt("blob page has no inner layout")
        inner = make_page(layout.blob_layout.inner_layout, io, rows, read_file)
        return BlobPage(layout.blob_layout, inner, io, rows, read_file)
    raise io.ctx.corrupt("page has no layout")


class StructuralColumn:
    """Rows of one leaf column, decoded page by page."""

    def __init__(self, pages: list[file2_pb2.ColumnMetadata.Page], ctx: DecodeContext,
                 layout_of: Callable[[int], pb.PageLayout], read_at: Callable[[int, int], np.ndarray],
                 data_limit: int, *, read_many: Callable[[list[tuple[int, int]]], list[np.ndarray]] | None = None) -> None:
        self.pages, self.ctx = pages, ctx
        self._layout_of, self._read_at, self._limit = layout_of, read_at, data_limit
        self._read_many = read_many
        lengths = np.fromiter((p.length for p in pages), np.int64, len(pages))
        self.starts = np.zeros(len(pages) + 1, np.int64)
        np.cumsum(lengths, out=self.starts[1:])
        self.total = int(self.starts[-1])
        priorities = np.fromiter((p.priority for p in pages), np.int64, len(pages))
        if len(pages) and priorities.any() and not np.array_equal(priorities, self.starts[:-1]):
            raise ctx.corrupt("page priorities do not match the rows of the pages before them")
        self._decoders: dict[int, PageDecoder] = {}
        self._recent: list[int] = []
        # the page decoders keep state (their last decoded run): one read or take at a time
        self._lock = threading.RLock()

    def _io(self, page: int) -> PageIO:
        meta = self.pages[page]
        if len(meta.buffer_offsets) != len(meta.buffer_sizes):
            raise self.ctx.corrupt(f"page {page} has mismatched buffer offsets and sizes")
        buffers = [(int(o), int(s)) for o, s in zip(meta.buffer_offsets, meta.buffer_sizes)]
        for offset, size in buffers:
            if offset + size > self._limit:
                raise self.ctx.corrupt(f"page {page} buffer [{offset}, {offset + size}) lies outside the data "
                                       f"region (ends at {self._limit})")
        return PageIO(self._read_at, buffers, self.ctx, self._read_many)

    def decoder(self, page: int) -> PageDecoder:
        dec = self._decoders.get(page)
        if dec is None:
            dec = self._guard(page, lambda: make_page(self._layout_of(page), self._io(page), int(self.pages[page].length),
                                                      self._read_at))
            self._decoders[page] = dec
        if page not in self._recent:
            # pages keep their last decoded run for the next batch; only the last two do
            self._recent.append(page)
            if len(self._recent) > 2:
                self._decoders[self._recent.pop(0)].drop_cache()
        return dec

    def _guard(self, page: int, work):
        try:
            return work()
        except LanceError:
            raise
        except DECODE_ERRORS as exc:
            raise self.ctx.corrupt(f"page {page} cannot be decoded: {exc}") from exc

    def read(self, start: int, stop: int, data_type: pa.DataType) -> LeafData:
        with self._lock:
            return self._read(start, stop, data_type)

    def take(self, rows: np.ndarray, data_type: pa.DataType) -> LeafData:
        with self._lock:
            return self._take(rows, data_type)

    def _read(self, start: int, stop: int, data_type: pa.DataType) -> LeafData:
        if stop > self.total:
            raise self.ctx.corrupt(f"column has {self.total} rows but {stop} are needed")
        if not self.pages:
            raise self.ctx.corrupt("column has no pages")
        first = max(int(np.searchsorted(self.starts, start, side="right")) - 1, 0)
        if start == stop:
            p = min(first, len(self.pages) - 1)
            local = start - int(self.starts[p])
            return self._checked(p, lambda: self.decoder(p).read(local, local, data_type), 0)
        last = int(np.searchsorted(self.starts, stop, side="left"))
        pieces = []
        for p in range(first, min(last, len(self.pages))):
            lo, hi = int(self.starts[p]), int(self.starts[p + 1])
            if hi <= lo:
                continue
            a, b = max(start, lo) - lo, min(stop, hi) - lo
            pieces.append(self._checked(p, lambda p=p, a=a, b=b: self.decoder(p).read(a, b, data_type), b - a))
        return concat_leaves(pieces)

    def _take(self, rows: np.ndarray, data_type: pa.DataType) -> LeafData:
        if len(rows) and int(rows[-1]) >= self.total:
            raise self.ctx.corrupt(f"column has {self.total} rows but row {int(rows[-1])} is needed")
        if len(rows) == 0:
            return self.read(0, 0, data_type)
        page_of = np.searchsorted(self.starts, rows, side="right") - 1
        bounds = np.append(np.flatnonzero(np.diff(page_of)) + 1, len(rows))
        pieces, at = [], 0
        for end in bounds.tolist():
            p = int(page_of[at])
            local = rows[at:end] - self.starts[p]
            pieces.append(self._checked(p, lambda p=p, local=local: self.decoder(p).take(local, data_type), len(local)))
            at = end
        return concat_leaves(pieces)

    def _checked(self, page: int, work, rows: int) -> LeafData:
        leaf = self._guard(page, work)
        if leaf.rows != rows or len(leaf.values) != _leaf_items(leaf):
            raise self.ctx.corrupt(f"page {page} decoded to {leaf.rows} rows instead of {rows}")
        return leaf


def _leaf_items(leaf: LeafData) -> int:
    n = leaf.rows
    for layer in leaf.layers:
        if layer.is_list:
            assert layer.offsets is not None  # list layers always carry offsets
            n = int(layer.offsets[-1] - layer.offsets[0])
    return n


# -- assembly ----------------------------------------------------------------------------------------


def leaf_plans(plan) -> list:
    """The plans of the leaf columns below (or at) ``plan``, depth-first."""
    if plan.column >= 0:
        return [plan]
    return [leaf for child in plan.children for leaf in leaf_plans(child)]


def _is_empty_struct(plan) -> bool:
    return pa.types.is_struct(plan.field.type) and plan.field.type.num_fields == 0


def _layered_leaf(plan):
    """The first leaf below ``plan`` whose layers describe its ancestors: an empty struct's column
    holds one all-null layer whatever its depth (pylance writes them only where nothing above is
    null or a list), so it says nothing about its parents; None when there is no other leaf."""
    return next((leaf for leaf in leaf_plans(plan) if not _is_empty_struct(leaf)), None)


def assemble(plan, leaves: dict[int, LeafData], ctx_for: Callable[[str], DecodeContext]) -> pa.Array:
    """The Arrow array of ``plan``'s field from the decoded leaves (keyed by column)."""
    first = leaf_plans(plan)[0]
    return _build(plan, leaves, 0, leaves[first.column].rows, ctx_for)


def _build(plan, leaves: dict[int, LeafData], depth: int, n: int, ctx_for) -> pa.Array:
    data_type = plan.field.type
    ctx = ctx_for(plan.field.name)
    if plan.column >= 0 and _is_empty_struct(plan):
        # an empty struct's page is all-null with one layer; pylance reads it as n valid rows
        return pa.StructArray.from_buffers(data_type, n, [None], children=[])
    if plan.column >= 0:
        leaf = leaves[plan.column]
        if depth != len(leaf.layers) - 1 or leaf.layers[depth].is_list:
            raise ctx.corrupt(f"the column's {len(leaf.layers)} rep/def layers do not match the schema "
                              f"(the field is at depth {depth + 1})")
        if len(leaf.values) != n:
            raise ctx.corrupt(f"column has {len(leaf.values)} values where {n} are needed")
        return leaf.values
    layered = _layered_leaf(plan)
    if layered is None:  # only empty structs below: nothing above them is null
        children = [_build(c, leaves, depth + 1, n, ctx_for) for c in plan.children]
        return pa.StructArray.from_buffers(data_type, n, [None], children=children)
    leaf = leaves[layered.column]
    if depth >= len(leaf.layers) - 1:
        raise ctx.corrupt("the column's rep/def layers do not match the schema (too few layers)")
    layer = leaf.layers[depth]
    validity = bitmap(layer.validity)
    if pa.types.is_struct(data_type):
        if layer.is_list:
            raise ctx.corrupt("the column's rep/def layers put a list where the schema has a struct")
        if len(plan.children) != data_type.num_fields:
            raise ctx.corrupt(f"struct {plan.field.name!r} has {len(plan.children)} planned children")
        children = [_build(c, leaves, depth + 1, n, ctx_for) for c in plan.children]
        return pa.StructArray.from_buffers(data_type, n, [validity], children=children)
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type) or pa.types.is_map(data_type):
        if not layer.is_list:
            raise ctx.corrupt("the column's rep/def layers put a struct where the schema has a list")
        offsets = layer.offsets
        assert offsets is not None  # list layers always carry offsets
        if len(offsets) != n + 1:
            raise ctx.corrupt(f"list layer has {len(offsets) - 1} lists where {n} are needed")
        child = _build(plan.children[0], leaves, depth + 1, int(offsets[-1]), ctx_for)
        large = pa.types.is_large_list(data_type)
        if not large and int(offsets[-1]) > _INT32_MAX:
            raise ctx.corrupt("list has more than 2^31 items in one read; use large_list")
        buf = pa.py_buffer(offsets.astype(np.int64 if large else np.int32))
        return pa.Array.from_buffers(data_type, n, [validity, buf], children=[child])
    raise UnsupportedFeatureError(f"nested fields of type {data_type} are not supported in file version 2.1+",
                                  path=ctx.path, column=ctx.column)
