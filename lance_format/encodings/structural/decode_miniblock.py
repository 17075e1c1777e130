"""Mini-block pages of 2.1/2.2: values, rep and def levels in small chunks of up to a few KiB.

Page buffers: ``[0]`` chunk metadata, ``[1]`` chunk data, ``[2]`` dictionary (if any), then the
repetition index (if ``repetition_index_depth > 0``). One metadata word per chunk (u16 in 2.1,
u32 when ``has_large_chunk``, always so in 2.2): ``((chunk_bytes / 8 - 1) << 4) | log2(values)``;
the last chunk holds the remaining ``num_items``.

A chunk: ``u16 num_levels | [u16 rep bytes] | [u16 def bytes] | num_buffers x (u16|u32) sizes``,
padded to 8, then the rep levels, def levels and each value buffer, each padded to 8.

The repetition index has ``depth + 1`` u64 per chunk: the rows that end in the chunk and the
items of a row left unfinished at its end (a "trailer" continued by the next chunk's
"preamble"). It maps rows to chunks, so reads and takes decode only the chunks they need; all
headers of the needed chunks are parsed with numpy at once and the values of all chunks are
decoded together by the chunk codecs. A take (e.g. the other columns of the rows a filter
kept) goes further: without lists the codecs decode only the values taken (``ChunkCodec.take``);
with lists the levels of the chunks holding the rows are decoded first, each row is found by a
walk over its own chunk's levels (compiled: ``numba_read_kernels.row_levels``), and then only
the values of those rows are decoded; either way only those rows become Arrow arrays. Takes
open pages afresh (a dataset opened per query), so the chunk table is built in one compiled
pass too (``numba_read_kernels.chunk_table``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lance_format.encodings.structural import accel
from lance_format.encodings.structural import decode_fsst as fsst
from lance_format.encodings.structural.decode_block_codecs import block_codec, decode_levels
from lance_format.encodings.structural.decode_chunk_codecs import FsstChunks, chunk_codec
from lance_format.encodings.structural.decode_pages import PageDecoder, PageIO, build_leaf, empty_leaf
from lance_format.encodings.structural.decode_repdef import LeafData, check_layers, max_rep, max_visible_def
from lance_format.encodings.structural.decoded_blocks import (
    Dictionary,
    Fixed,
    Variable,
    group_of,
    ranges_index,
    read_uint,
)
from lance_format.proto import encodings_v2_1_pb2 as pb

_ALIGN = 8
# Range reads decode at least this many values, so that small scan batches share one decode
# (fixed-width values: up to READ_AHEAD_BYTES of them, see _read_ahead_values).
READ_AHEAD_VALUES = 1 << 16
READ_AHEAD_BYTES = 1 << 21


@dataclass
class _ChunkLevels:
    """Decoded chunks before their values: where their value buffers are, and their levels."""

    chunks: np.ndarray
    buf: np.ndarray
    sizes: np.ndarray
    buf_starts: np.ndarray
    counts: np.ndarray  # values of each chunk
    num_levels: np.ndarray
    rep: np.ndarray | None
    defs: np.ndarray | None


def _pad(n: np.ndarray | int):
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


class MiniBlockPage(PageDecoder):
    def __init__(self, layout: pb.MiniBlockLayout, io: PageIO, rows: int) -> None:
        ctx = io.ctx
        self.io, self.rows, self.ctx = io, rows, ctx
        self.meanings = list(layout.layers)
        check_layers(self.meanings, ctx)
        self.rep_codec = block_codec(layout.rep_compression, ctx) if layout.HasField("rep_compression") else None
        self.def_codec = block_codec(layout.def_compression, ctx) if layout.HasField("def_compression") else None
        if not layout.HasField("value_compression"):
            raise ctx.corrupt("mini-block page has no value compression")
        self.values = chunk_codec(layout.value_compression, ctx)
        self.num_buffers = int(layout.num_buffers)
        if self.num_buffers != self.values.num_buffers:
            raise ctx.corrupt(f"mini-block page says {self.num_buffers} value buffers, its compression uses "
                              f"{self.values.num_buffers}")
        self.num_items = int(layout.num_items)
        self.large = bool(layout.has_large_chunk)
        self.depth = int(layout.repetition_index_depth)
        self.dictionary_enc = layout.dictionary if layout.HasField("dictionary") else None
        self.num_dictionary_items = int(layout.num_dictionary_items)
        expected = 2 + (self.dictionary_enc is not None) + (self.depth > 0)
        if len(io.buffers) != expected:
            raise ctx.corrupt(f"mini-block page has {len(io.buffers)} buffers, expected {expected}")
        if self.rep_codec is not None and self.depth == 0:
            # without an index rows cannot be mapped to chunks: such pages are read whole
            self.whole_page = True
        else:
            self.whole_page = False
        self._meta_loaded = False
        self._run: tuple | None = None  # (first chunk, last chunk, type, decoded rows) of the last read
        self._value_ends: np.ndarray | None = None

    # -- page metadata ------------------------------------------------------------------------------
    def _load(self) -> None:
        if self._meta_loaded:
            return
        ctx = self.ctx
        width = 4 if self.large else 2
        raw = self.io.buffer(0)
        if len(raw) % width:
            raise ctx.corrupt(f"chunk metadata of {len(raw)} bytes is not a whole number of words")
        words = np.ascontiguousarray(raw).view(f"<u{width}").astype(np.int64)
        n = len(words)
        if n == 0:
            if self.num_items or self.rows:
                raise ctx.corrupt("mini-block page has values but no chunks")
        index = None
        if self.depth > 0:
            raw_index = self.io.buffer(len(self.io.buffers) - 1)
            stride = self.depth + 1
            if len(raw_index) != n * stride * 8:
                raise ctx.corrupt(f"repetition index has {len(raw_index)} bytes for {n} chunks")
            index = np.ascontiguousarray(raw_index).view("<u8").astype(np.int64).reshape(n, stride)
        compiled = accel.read_kernels()
        if compiled is not None:
            # one compiled pass: pages are opened afresh by every take (dozens of numpy calls each)
            status, counts, offsets, first_row, nrows, trailer, trailer_end = compiled.chunk_table(
                words, self.num_items, np.zeros((0, 2), np.int64) if index is None else index, index is not None)
            if status == compiled.TABLE_ITEMS_MISMATCH:
                raise ctx.corrupt(f"chunk metadata does not add up to the page's {self.num_items} items")
            if status == compiled.TABLE_INDEX_INCONSISTENT:
                raise ctx.corrupt("repetition index is inconsistent")
        else:
            counts, offsets, first_row, nrows, trailer, trailer_end = self._chunk_table(words, index)
        if offsets[-1] > self.io.size(1):
            raise ctx.corrupt(f"chunks take {int(offsets[-1])} bytes but the data buffer has {self.io.size(1)}")
        rows = int(first_row[-1] + nrows[-1]) if n else 0
        if (self.rep_codec is None or not self.whole_page) and rows != self.rows:
            raise ctx.corrupt(f"chunks hold {rows} rows but the page has {self.rows}")
        self.chunk_counts, self.chunk_offsets = counts, offsets
        self.first_row, self.chunk_rows, self.trailer, self.trailer_end = first_row, nrows, trailer, trailer_end
        self.dictionary = None
        if self.dictionary_enc is not None:
            codec = block_codec(self.dictionary_enc, ctx)
            self.dictionary = codec.decode(self.io.buffer(2), self.num_dictionary_items, ctx)
            if self.dictionary.n != self.num_dictionary_items:
                raise ctx.corrupt(f"dictionary has {self.dictionary.n} items, expected {self.num_dictionary_items}")
        self._meta_loaded = True

    def _chunk_table(self, words: np.ndarray, index: np.ndarray | None):
        """The chunk table of :func:`numba_read_kernels.chunk_table`, with numpy."""
        ctx, n = self.ctx, len(words)
        logs = words & 0xF
        sizes = ((words >> 4) + 1) * _ALIGN
        counts = np.left_shift(np.int64(1), logs)
        if n:
            counts[-1] = self.num_items - int(counts[:-1].sum())
            if counts[-1] < 0 or (logs[-1] and counts[-1] != 1 << int(logs[-1])) or bool((logs[:-1] == 0).any()):
                raise ctx.corrupt(f"chunk metadata does not add up to the page's {self.num_items} items")
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(sizes, out=offsets[1:])
        if index is not None:
            ends, partial = index[:, 0], index[:, 1]
            trailer = partial > 0
            preamble = np.zeros(n, np.bool_)
            preamble[1:] = trailer[:-1]
            nrows = ends + trailer - preamble
            if bool((nrows < 0).any()):
                raise ctx.corrupt("repetition index is inconsistent")
        else:
            nrows = counts.copy()
            trailer = np.zeros(n, np.bool_)
        first = np.zeros(n, np.int64)
        np.cumsum(nrows[:-1], out=first[1:])
        # the chunk where a row left unfinished by chunk c ends: the first later chunk that is
        # not entirely a continuation
        continues = (nrows == 0) & trailer
        stops = np.flatnonzero(~continues)
        pick = np.minimum(np.searchsorted(stops, np.arange(n) + 1), len(stops) - 1) if len(stops) else None
        trailer_end = np.where(trailer, stops[pick], np.arange(n)) if pick is not None else np.arange(n)
        return counts, offsets, first, nrows, trailer, trailer_end

    def _chunks_for(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """First and last chunk holding each (sorted) row."""
        n = len(self.chunk_counts)
        if self.whole_page:
            return np.zeros(len(rows), np.int64), np.full(len(rows), n - 1, np.int64)
        chunk = np.searchsorted(self.first_row, rows, side="right") - 1
        chunk = np.clip(chunk, 0, n - 1)
        is_trailer = self.trailer[chunk] & (rows == self.first_row[chunk] + self.chunk_rows[chunk] - 1)
        last = np.where(is_trailer, self.trailer_end[chunk], chunk)
        return chunk, last

    # -- decoding -----------------------------------------------------------------------------------
    def _decode_run(self, c0: int, c1: int, data_type: pa.DataType) -> LeafData:
        return self._decode_chunks(np.arange(c0, c1 + 1), data_type)

    def _chunk_bytes(self, chunks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The bytes of the given (sorted) chunks, and where each starts and ends in them."""
        offsets = self.chunk_offsets
        c0, c1 = int(chunks[0]), int(chunks[-1])
        base = int(offsets[c0])
        if c1 - c0 + 1 == len(chunks):
            buf = self.io.buffer(1, base, int(offsets[c1 + 1]) - base)
            return buf, offsets[chunks] - base, offsets[chunks + 1] - base
        sizes = offsets[chunks + 1] - offsets[chunks]
        span = int(offsets[c1 + 1]) - base
        if span <= 4 * int(sizes.sum()) + (1 << 20):
            # one read of the whole span; the chunks stay where they are in it (not copied:
            # the codecs find them by position)
            buf = self.io.buffer(1, base, span)
            return buf, offsets[chunks] - base, offsets[chunks + 1] - base
        buf = np.concatenate(self.io.buffer_ranges(1, offsets[chunks], sizes))
        starts = np.zeros(len(chunks), np.int64)
        np.cumsum(sizes[:-1], out=starts[1:])
        return buf, starts, starts + sizes

    def _decode_chunks(self, chunks: np.ndarray, data_type: pa.DataType) -> LeafData:
        """Decode the given chunks as if they were adjacent (callers keep rows whole)."""
        rep, defs, values, _ = self._decode_raw(chunks)
        return build_leaf(rep, defs, values, self.meanings, data_type, self.ctx)

    def _headers(self, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray):
        """The chunks' level counts, level sizes and starts (None without such levels), and
        their value buffers' sizes and starts ((chunks, num_buffers) arrays)."""
        ctx = self.ctx
        has_rep, has_def = self.rep_codec is not None, self.def_codec is not None
        bw = 4 if self.large else 2
        compiled = accel.read_kernels()
        if compiled is not None and buf.dtype == np.uint8 and buf.ndim == 1:
            # one compiled pass instead of a dozen small numpy passes per decode
            status, num_levels, rep_size, def_size, rep_at, def_at, sizes, buf_starts = compiled.chunk_headers(
                np.ascontiguousarray(buf), np.asarray(starts, np.int64), np.asarray(ends, np.int64),
                has_rep, has_def, bw, self.num_buffers)
            if status == compiled.SHORTER_THAN_HEADER:
                raise ctx.corrupt("mini-block chunk is shorter than its header")
            if status == compiled.BUFFERS_PAST_END:
                raise ctx.corrupt("mini-block chunk buffers run past the end of the chunk")
            if not has_rep:
                rep_size = rep_at = None
            if not has_def:
                def_size = def_at = None
            return num_levels, rep_size, def_size, rep_at, def_at, sizes, buf_starts
        header = 2 + 2 * has_rep + 2 * has_def + bw * self.num_buffers
        if bool((ends - starts < header).any()):
            raise ctx.corrupt("mini-block chunk is shorter than its header")
        num_levels = read_uint(buf, starts, 2)
        pos = starts + 2
        rep_size = def_size = None
        if has_rep:
            rep_size, pos = read_uint(buf, pos, 2), pos + 2
        if has_def:
            def_size, pos = read_uint(buf, pos, 2), pos + 2
        sizes = read_uint(buf, (pos[:, None] + bw * np.arange(self.num_buffers)[None, :]).reshape(-1), bw)
        sizes = sizes.reshape(len(starts), self.num_buffers)
        at = starts + _pad(header)
        rep_at = def_at = None
        if has_rep:
            assert rep_size is not None  # read above when has_rep
            rep_at, at = at, at + _pad(rep_size)
        if has_def:
            assert def_size is not None  # read above when has_def
            def_at, at = at, at + _pad(def_size)
        buf_starts = np.empty_like(sizes)
        for k in range(self.num_buffers):
            buf_starts[:, k] = at
            at = at + _pad(sizes[:, k])
        if bool((at > ends).any()):
            raise ctx.corrupt("mini-block chunk buffers run past the end of the chunk")
        return num_levels, rep_size, def_size, rep_at, def_at, sizes, buf_starts

    def _decode_raw(self, chunks: np.ndarray, values_codec=None, picks: np.ndarray | None = None):
        """Levels, values and per-chunk level counts of the given chunks (``values_codec``: to
        decode the values with another codec than the page's, e.g. FSST's inner one; ``picks``:
        sorted indices into the chunks' values, to decode only those values)."""
        levels = self._decode_levels(chunks)
        values = self._decode_values(levels, values_codec, picks)
        return levels.rep, levels.defs, values, levels.num_levels

    def _decode_levels(self, chunks: np.ndarray) -> _ChunkLevels:
        """The chunks' headers parsed and their rep/def levels decoded (values left for later)."""
        ctx = self.ctx
        buf, starts, ends = self._chunk_bytes(chunks)
        has_rep, has_def = self.rep_codec is not None, self.def_codec is not None
        num_levels, rep_size, def_size, rep_at, def_at, sizes, buf_starts = self._headers(buf, starts, ends)
        rep = defs = None
        if has_rep:
            # the page has a rep codec when its chunks have rep levels; sizes/positions were set above
            assert self.rep_codec is not None and rep_at is not None and rep_size is not None
            rep = decode_levels(self.rep_codec, buf, rep_at, rep_size, num_levels, ctx)
        if has_def:
            # the page has a def codec when its chunks have def levels; sizes/positions were set above
            assert self.def_codec is not None and def_at is not None and def_size is not None
            defs = decode_levels(self.def_codec, buf, def_at, def_size, num_levels, ctx)
        if not (has_rep or has_def) and bool((num_levels != 0).any()):
            raise ctx.corrupt("mini-block chunk has levels but the page has no rep/def compression")
        return _ChunkLevels(chunks, buf, sizes, buf_starts, self.chunk_counts[chunks], num_levels, rep, defs)

    def _decode_values(self, levels: _ChunkLevels, values_codec=None, picks: np.ndarray | None = None):
        """The values of the chunks whose levels were decoded (only those at ``picks``, when given)."""
        ctx, chunks, counts = self.ctx, levels.chunks, levels.counts
        buf, buf_starts, sizes = levels.buf, levels.buf_starts, levels.sizes
        codec = values_codec or self.values
        expected = int(counts.sum())
        if picks is None:
            values = codec.decode(buf, buf_starts, sizes, counts, ctx)
        else:
            if len(picks) and int(picks[-1]) >= expected:
                raise ctx.corrupt(f"chunks {int(chunks[0])}..{int(chunks[-1])} hold {expected} values, "
                                  f"{int(picks[-1]) + 1} were expected")
            values = codec.take(buf, buf_starts, sizes, counts, picks, ctx)
            expected = len(picks)
        if values.n != expected:
            raise ctx.corrupt(f"mini-block chunks decoded to {values.n} values instead of {expected}")
        if self.dictionary is not None:
            if not isinstance(values, Fixed) or values.bits not in (8, 16, 32, 64):
                raise ctx.corrupt("dictionary indices are not fixed-width integers")
            indices = np.ascontiguousarray(values.data).view(f"<u{values.bits // 8}").astype(np.int64)
            values = Dictionary(indices, self.dictionary)
        return values

    def _check_rows(self, leaf: LeafData, c0: int, c1: int, need: int) -> None:
        if leaf.rows < need:
            raise self.ctx.corrupt(f"chunks {c0}..{c1} hold {leaf.rows} rows, {need} were expected")

    def read(self, start: int, stop: int, data_type: pa.DataType) -> LeafData:
        self._load()
        if stop <= start:
            return self._empty(data_type)
        first, last = self._chunks_for(np.array([start, stop - 1], np.int64))
        c0, c1 = int(first[0]), int(last[1])
        run = self._run
        if run is not None and run[2] == data_type and c0 < run[0] <= c1 + 1:
            # a batch arriving after the next one (batches decode on several threads): its own
            # chunks only, keeping the run ahead for the batches that follow
            run = (c0, c1, data_type, self._decode_run(c0, c1, data_type))
        elif run is None or run[0] > c0 or run[1] < c1 or run[2] != data_type:
            # sequential scans read batch after batch: decode ahead and serve the next batches
            end = self._read_ahead(c0, c1, data_type)
            run = self._run = (c0, end, data_type, self._decode_run(c0, end, data_type))
        run_c0, run_c1, _, leaf = run
        origin = 0 if self.whole_page else int(self.first_row[run_c0])
        self._check_rows(leaf, run_c0, run_c1, stop - origin)
        return leaf.slice(start - origin, stop - origin)

    def drop_cache(self) -> None:
        self._run = None

    def _read_ahead(self, c0: int, c1: int, data_type: pa.DataType) -> int:
        if self.whole_page:
            return c1
        if self._value_ends is None:
            self._value_ends = np.cumsum(self.chunk_counts)
        limit = self._value_ends[c0] - self.chunk_counts[c0] + _read_ahead_values(data_type)
        end = int(np.searchsorted(self._value_ends, limit, side="left"))
        return min(max(c1, end), len(self.chunk_counts) - 1)

    def take(self, rows: np.ndarray, data_type: pa.DataType) -> LeafData:
        self._load()
        if len(rows) == 0:
            return self._empty(data_type)
        if self.rep_codec is None:
            # one row per value: decode all the chunks holding the rows together
            chunk = group_of(rows, self.first_row)  # rows are sorted
            first_of_chunk = np.append(True, chunk[1:] != chunk[:-1])
            chosen = chunk[first_of_chunk]
            base = np.zeros(len(chosen), np.int64)
            np.cumsum(self.chunk_counts[chosen][:-1], out=base[1:])
            local = base[np.cumsum(first_of_chunk) - 1] + rows - self.first_row[chunk]
            if isinstance(self.values, FsstChunks) and self.dictionary is None:
                return self._take_fsst(chosen, local, data_type)
            # without lists each level has a value: only the rows taken are decoded to Arrow
            _, defs, values, _ = self._decode_raw(chosen, picks=local)
            return build_leaf(None, None if defs is None else defs[local], values, self.meanings, data_type, self.ctx)
        if self.whole_page:
            decoded = self._decode_levels(np.arange(len(self.chunk_counts)))
            assert decoded.rep is not None  # a page with a rep codec has rep levels
            zeros = np.zeros(len(rows), np.int64)
            # one chunk as far as rows go: the walk per row of the compiled path would be quadratic
            return self._rows_of_levels(decoded, zeros, zeros, rows, np.full(len(rows), len(decoded.rep)),
                                        data_type, walk=False)
        first, last = self._chunks_for(rows)
        # runs of overlapping or adjacent chunk ranges; all runs are decoded in one go
        reach = np.maximum.accumulate(last)
        new_run = np.ones(len(rows), np.bool_)
        new_run[1:] = first[1:] > reach[:-1] + 1
        run_of_row = np.cumsum(new_run) - 1
        heads = np.flatnonzero(new_run)
        run_c0 = first[heads]
        run_c1 = reach[np.append(heads[1:], len(rows)) - 1]
        run_len = run_c1 - run_c0 + 1
        chunks = run_c0.repeat(run_len) + ranges_index(np.zeros(len(heads), np.int64), run_len)
        decoded = self._decode_levels(chunks)
        # where each decoded chunk's levels and values begin, and where each run's levels end
        level_from = np.zeros(len(chunks) + 1, np.int64)
        np.cumsum(decoded.num_levels, out=level_from[1:])
        value_from = np.zeros(len(chunks), np.int64)
        np.cumsum(decoded.counts[:-1], out=value_from[1:])
        run_end = level_from[np.cumsum(run_len)]
        at = np.searchsorted(chunks, first)  # each row's own chunk among those decoded
        return self._rows_of_levels(decoded, level_from[at], value_from[at], rows - self.first_row[first],
                                    run_end[run_of_row], data_type)

    def _rows_of_levels(self, decoded: _ChunkLevels, level_from: np.ndarray, value_from: np.ndarray,
                        row_in: np.ndarray, limit: np.ndarray, data_type: pa.DataType, *, walk: bool = True) -> LeafData:
        """The rows taken from chunks whose levels are decoded: row ``i`` is the ``row_in[i]``-th
        row start from level ``level_from[i]`` on (the first level of its chunk, whose first value
        is ``value_from[i]``) and ends at the next row start or at ``limit[i]`` (the end of the
        chunks decoded with it). A chunk may begin with the end of a row from an earlier chunk.
        Only the levels of the rows taken are unravelled, and only their values decoded."""
        rep, defs = decoded.rep, decoded.defs
        assert rep is not None  # only pages with lists take rows by their levels
        max_visible = max_visible_def(self.meanings)
        visible = None if defs is None else defs <= max_visible
        n_visible = len(rep) if visible is None else int(np.count_nonzero(visible))
        n_values = int(decoded.counts.sum())
        if n_values != n_visible:
            raise self.ctx.corrupt(f"rep/def levels describe {n_visible} values but the chunks hold {n_values}")
        top = max_rep(self.meanings)
        compiled = accel.read_kernels(len(rep) * 2) if walk else None
        if compiled is not None and len(row_in):
            # each row walks its own chunk only, in one compiled pass (no pass over all levels)
            status, levels, picks = compiled.row_levels(
                rep, np.zeros(0, rep.dtype) if defs is None else defs, defs is not None, top, max_visible,
                np.asarray(level_from, np.int64), np.asarray(value_from, np.int64), np.asarray(row_in, np.int64),
                np.asarray(limit, np.int64))
            if status != compiled.ROWS_OK:
                raise self.ctx.corrupt(f"the chunks hold fewer rows than the {len(row_in)} taken")
        else:
            starts_at = np.flatnonzero(rep == top)
            local = np.searchsorted(starts_at, level_from) + row_in
            if len(local) and int(local.max()) >= len(starts_at):
                raise self.ctx.corrupt(f"the chunks hold {len(starts_at)} rows, {int(local.max()) + 1} were expected")
            begin = starts_at[local]
            following = local + 1  # the next row's start, or the end of the levels after the last row
            end = np.where(following < len(starts_at), starts_at[np.minimum(following, len(starts_at) - 1)], len(rep))
            end = np.minimum(end, limit)
            levels = ranges_index(begin, end - begin)
            if visible is None or n_visible == len(rep):
                picks = levels
            else:
                picks = (np.cumsum(visible) - 1)[levels[visible[levels]]]
        # the rows are sorted and unique, so are their values: decode just those
        if isinstance(self.values, FsstChunks) and self.dictionary is None:
            picked = self._decode_values(decoded, self.values.inner, picks)
            if not isinstance(picked, Variable):
                raise self.ctx.corrupt("FSST values are not variable-width")
            values = fsst.decompress(picked, self.values.table, self.ctx)
        else:
            values = self._decode_values(decoded, None, picks)
        return build_leaf(rep[levels], None if defs is None else defs[levels], values, self.meanings, data_type,
                          self.ctx)

    def _take_fsst(self, chosen: np.ndarray, local: np.ndarray, data_type: pa.DataType) -> LeafData:
        """Take from FSST chunks without lists: decompress only the strings of the rows taken."""
        assert isinstance(self.values, FsstChunks)  # checked by the caller
        _, defs, picked, _ = self._decode_raw(chosen, self.values.inner, picks=local)
        if not isinstance(picked, Variable):
            raise self.ctx.corrupt("FSST values are not variable-width")
        values = fsst.decompress(picked, self.values.table, self.ctx)
        return build_leaf(None, None if defs is None else defs[local], values, self.meanings, data_type, self.ctx)

    def _empty(self, data_type: pa.DataType) -> LeafData:
        return empty_leaf(self.meanings, data_type)


def _read_ahead_values(data_type: pa.DataType) -> int:
    """Values a sequential scan decodes at once: more for narrow fixed-width values, where the
    per-call work dominates, within READ_AHEAD_BYTES of decoded values."""
    try:
        width = data_type.bit_width // 8
    except ValueError:  # variable width: its values may be large
        return READ_AHEAD_VALUES
    return max(READ_AHEAD_VALUES, READ_AHEAD_BYTES // max(width, 1))
