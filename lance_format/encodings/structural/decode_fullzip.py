"""Full-zip pages of 2.1/2.2: large values with their rep/def levels zipped in front of each value.

Buffer ``[0]`` holds, for every level entry: a control word of ``ceil((bits_rep + bits_def)/8)``
bytes rounded to 1/2/4 (def in the low ``bits_def`` bits, rep above), then, if the entry is
visible (it has a value slot), the value: fixed-width values always, variable-width values only
when valid, as a length (``bits_per_offset / 8`` bytes) and the bytes. Buffer ``[1]``, present
for variable-width values or lists, is the repetition index: ``rows + 1`` byte offsets of the
rows into buffer 0, each 1, 2, 4 or 8 bytes wide.

Rows are located through the repetition index (or a fixed stride), so a read or take fetches
only its rows' bytes. Without lists every row is one entry and parsing is plain array
arithmetic; with lists the entries of all rows are walked in lockstep, one entry per row at a
time.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_format.encodings.structural.decode_pages import PageDecoder, PageIO, build_leaf
from lance_format.encodings.structural.decode_repdef import LeafData, check_layers, max_rep, max_visible_def
from lance_format.encodings.structural.decode_value_codecs import FixedValues, VariableValues
from lance_format.encodings.structural.decoded_blocks import Variable, gather, read_uint
from lance_format.proto import encodings_v2_1_pb2 as pb


class FullZipPage(PageDecoder):
    def __init__(self, layout: pb.FullZipLayout, io: PageIO, rows: int) -> None:
        ctx = io.ctx
        self.io, self.rows, self.ctx = io, rows, ctx
        self.meanings = list(layout.layers)
        check_layers(self.meanings, ctx)
        self.bits_rep, self.bits_def = int(layout.bits_rep), int(layout.bits_def)
        total = self.bits_rep + self.bits_def
        self.cw = 0 if total == 0 else 1 if total <= 8 else 2 if total <= 16 else 4
        if total > 32:
            raise ctx.corrupt(f"full-zip control words of {total} bits")
        self.max_rep, self.max_visible = max_rep(self.meanings), max_visible_def(self.meanings)
        if (self.bits_rep == 0) != (self.max_rep == 0):
            raise ctx.corrupt("full-zip repetition bits do not match the page's list layers")
        details = layout.WhichOneof("details")
        if not layout.HasField("value_compression"):
            raise ctx.corrupt("full-zip page has no value compression")
        if details == "bits_per_value":
            self.fixed: FixedValues | None = FixedValues(layout.value_compression, ctx)
            self.variable: VariableValues | None = None
            if self.fixed.bytes_per_value * 8 != layout.bits_per_value and self.fixed.item_bits != 1:
                raise ctx.corrupt(f"full-zip values are {layout.bits_per_value} bits but their encoding "
                                  f"gives {self.fixed.bytes_per_value * 8}")
        elif details == "bits_per_offset":
            if layout.bits_per_offset not in (8, 16, 32, 64):
                raise ctx.corrupt(f"full-zip lengths of {layout.bits_per_offset} bits")
            self.fixed = None
            self.variable = VariableValues(layout.value_compression, ctx)
            self.lw = layout.bits_per_offset // 8
        else:
            raise ctx.corrupt("full-zip page has neither bits_per_value nor bits_per_offset")
        needs_index = self.variable is not None or self.max_rep > 0
        if len(io.buffers) not in (1, 2) or (needs_index and len(io.buffers) != 2):
            raise ctx.corrupt(f"full-zip page has {len(io.buffers)} buffers")
        self.has_index = len(io.buffers) == 2
        self._index: np.ndarray | None = None

    def _row_offsets(self) -> np.ndarray:
        """Byte offset of every row in buffer 0 (rows + 1 entries)."""
        if self._index is None:
            if self.has_index:
                raw = self.io.buffer(1)
                if len(raw) % (self.rows + 1):
                    raise self.ctx.corrupt(f"repetition index of {len(raw)} bytes for {self.rows} rows")
                width = len(raw) // (self.rows + 1)
                if width not in (1, 2, 4, 8):
                    raise self.ctx.corrupt(f"repetition index entries of {width} bytes")
                index = np.ascontiguousarray(raw).view(f"<u{width}").astype(np.int64)
            else:
                assert self.fixed is not None  # only fixed-width pages without lists lack an index
                stride = self.cw + self.fixed.bytes_per_value
                index = np.arange(self.rows + 1, dtype=np.int64) * stride
            if bool((np.diff(index) < 0).any()) or int(index[-1]) > self.io.size(0):
                raise self.ctx.corrupt("full-zip repetition index is not increasing or points past the data")
            self._index = index
        return self._index

    def read(self, start: int, stop: int, data_type: pa.DataType) -> LeafData:
        index = self._row_offsets()
        lo, hi = int(index[start]), int(index[stop])
        buf = self.io.buffer(0, lo, hi - lo)
        return self._parse(buf, index[start : stop + 1] - lo, data_type)

    def take(self, rows: np.ndarray, data_type: pa.DataType) -> LeafData:
        index = self._row_offsets()
        starts, ends = index[rows], index[rows + 1]
        lo, hi = int(starts[0]), int(ends[-1])
        needed = int((ends - starts).sum())
        if hi - lo <= 4 * needed + (1 << 20):
            whole = self.io.buffer(0, lo, hi - lo)
            buf = gather(whole, starts - lo, ends - starts)
        else:
            # scattered rows of a large page: fetch only their bytes
            buf = np.concatenate(self.io.buffer_ranges(0, starts, ends - starts))
        bounds = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(ends - starts, out=bounds[1:])
        return self._parse(buf, bounds, data_type)

    def _parse(self, buf: np.ndarray, bounds: np.ndarray, data_type: pa.DataType) -> LeafData:
        """Decode the rows whose bytes are ``buf[bounds[i]:bounds[i+1]]``."""
        ctx = self.ctx
        n = len(bounds) - 1
        if self.cw == 0:
            entry_at = bounds[:-1]
            rep = defs = None
            visible_at = entry_at
        elif self.max_rep == 0:
            entry_at = bounds[:-1]
            words = read_uint(buf, entry_at, self.cw) if n else np.zeros(0, np.int64)
            rep, defs = None, (words & ((1 << self.bits_def) - 1)).astype(np.uint16)
            visible_at = entry_at
        else:
            entry_at, words = self._walk(buf, bounds)
            rep = (words >> self.bits_def).astype(np.uint16)
            defs = (words & ((1 << self.bits_def) - 1)).astype(np.uint16) if self.bits_def else None
            visible = defs <= self.max_visible if defs is not None else np.ones(len(entry_at), np.bool_)
            visible_at = entry_at[visible]
            defs_visible = defs[visible] if defs is not None else None
        if rep is None:
            defs_visible = defs
        values_at = visible_at + self.cw
        if self.fixed is not None:
            width = self.fixed.bytes_per_value
            if len(values_at) and int(values_at[-1]) + width > len(buf):
                raise ctx.corrupt("full-zip value runs past the page data")
            data = _strided(buf, values_at, width)
            if data is None:
                data = gather(buf, values_at, np.full(len(values_at), width))
            values = self.fixed.decode(data, len(values_at), ctx)
        else:
            assert self.variable is not None  # a page has either fixed or variable values
            valid = defs_visible == 0 if defs_visible is not None else np.ones(len(values_at), np.bool_)
            lengths = np.zeros(len(values_at), np.int64)
            if bool(valid.any()):
                lengths[valid] = read_uint(buf, values_at[valid], self.lw)
            begin = values_at + self.lw
            offsets = np.zeros(len(values_at) + 1, np.int64)
            np.cumsum(lengths, out=offsets[1:])
            if bool(valid.any()) and int((begin + lengths)[valid].max()) > len(buf):
                raise ctx.corrupt("full-zip value runs past the page data")
            values = self.variable.decode(Variable(offsets, gather(buf, begin, lengths)), ctx)
        if rep is None and self.variable is not None:
            # without lists every row is exactly one entry: check the row sizes add up
            expected = self.cw + np.where(valid, self.lw + lengths, 0)
            if not np.array_equal(np.diff(bounds), expected):
                raise ctx.corrupt("full-zip rows do not match their repetition index")
        return build_leaf(rep, defs, values, self.meanings, data_type, ctx)

    def _walk(self, buf: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions and control words of every entry of every row (rows walked in lockstep)."""
        ctx = self.ctx
        cursor = bounds[:-1].copy()
        end = bounds[1:]
        positions, words = [], []
        active = np.flatnonzero(cursor < end)
        first = True
        while len(active):
            at = cursor[active]
            if bool((at + self.cw > end[active]).any()):
                raise ctx.corrupt("full-zip control word runs past its row")
            word = read_uint(buf, at, self.cw)
            rep = word >> self.bits_def
            if first and bool((rep != self.max_rep).any()) or not first and bool((rep == self.max_rep).any()):
                raise ctx.corrupt("full-zip rows do not start exactly at their repetition index entries")
            first = False
            defs = word & ((1 << self.bits_def) - 1)
            visible = defs <= self.max_visible
            if self.fixed is not None:
                size = self.cw + np.where(visible, self.fixed.bytes_per_value, 0)
            else:
                valid = visible & (defs == 0)
                size = np.full(len(at), self.cw, np.int64)
                if bool(valid.any()):
                    size[valid] += self.lw + read_uint(buf, at[valid] + self.cw, self.lw)
            positions.append(at)
            words.append(word)
            cursor[active] = at + size
            if bool((cursor[active] > end[active]).any()):
                raise ctx.corrupt("full-zip value runs past its row")
            active = active[cursor[active] < end[active]]
        if not positions:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        pos = np.concatenate(positions)
        order = np.argsort(pos, kind="stable")
        return pos[order], np.concatenate(words)[order]


def _strided(buf: np.ndarray, at: np.ndarray, width: int) -> np.ndarray | None:
    """The ``width`` bytes at every position of ``at`` when the positions are evenly spaced.

    The common full-zip case (fixed-width values, no lists) places values at a constant stride;
    a strided view copied once is far cheaper than gathering each value's bytes separately.
    Returns None when the spacing is irregular.
    """
    n = len(at)
    if n == 0 or width == 0:
        return None
    first = int(at[0])
    if n == 1:
        return buf[first : first + width]
    stride = int(at[1]) - first
    if stride < width or int(at[-1]) != first + (n - 1) * stride or not bool((np.diff(at) == stride).all()):
        return None
    if stride == width:
        return buf[first : first + n * width]
    view = np.lib.stride_tricks.as_strided(buf[first:], shape=(n, width), strides=(stride, buf.strides[0]),
                                           writeable=False)
    return np.ascontiguousarray(view).reshape(-1)


__all__ = ["FullZipPage"]
