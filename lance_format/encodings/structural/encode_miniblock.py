"""The mini-block page layout of file versions 2.1/2.2: small chunks of levels and values.

Page buffers: ``[chunk metadata, chunk data, (dictionary), (repetition index)]``.

* chunk metadata: one word per chunk, ``((chunk_bytes / 8 - 1) << 4) | log2(values)`` (log 0 for
  the last chunk), u16 in 2.1 and u32 in 2.2 (``has_large_chunk``);
* a chunk: ``u16 num_levels | [u16 rep bytes] | [u16 def bytes] | value-buffer sizes (u16 in 2.1,
  u32 in 2.2)``, padded to 8 with 0xFE, then rep, def and each value buffer, each padded to 8;
* every chunk but the last holds a power-of-two number of items; a chunk's levels run from just
  after the previous chunk's last item to just after its own last item (the last chunk takes the
  rest), so invisible entries (null/empty lists) that follow an item belong to the next chunk;
* levels are out-of-line bit-packed per chunk (one bit width for the page);
* with lists, the repetition index has one ``(rows finished in the chunk, leftover levels)``
  pair of u64 per chunk, computed the way Lance does.

Chunk boundaries come from a cost model (``ValuePlan``): ~4 KiB of values per chunk, at most
32767 levels (the level byte counts are u16), and in 2.1 at most 32 KiB per chunk. When even one
item cannot fit (a huge run of empty lists) the caller falls back to full-zip.
"""

from __future__ import annotations

import numpy as np

from lance_format.encodings.structural import accel
from lance_format.encodings.structural.encode_compression import DeferredVariableChunks, ValuePlan, flat_encoding
from lance_format.encodings.structural.encode_dictionary import dictionary_block
from lance_format.encodings.structural.encode_fastlanes import BLOCK, bit_widths, inline_pack_chunks, out_of_line_pack
from lance_format.encodings.structural.encode_repdef import LeafPage
from lance_format.encodings.structural.field_params import DEFAULT_PARAMS, FieldParams
from lance_format.proto import encodings_v2_1_pb2 as pb

CHUNK_PAD = 0xFE
MAX_LEVELS_PER_CHUNK = 32767  # raw u16 levels must fit the u16 byte counts of the chunk header
MAX_CHUNK_BYTES_2_1 = 32 * 1024  # 12 bits of 8-byte words in the u16 metadata word
MAX_CHUNK_BYTES_2_2 = 1024 * 1024  # our own bound: chunks are meant to be small
_PADS = bytes([CHUNK_PAD]) * 8


def _pad8(n: int) -> int:
    return (-n) % 8


class _Chunker:
    """Greedy choice of chunk boundaries under the value, level and size limits."""

    def __init__(self, leaf: LeafPage, plan: ValuePlan, minor: int) -> None:
        self.n = leaf.num_items
        self.plan = plan
        self.total_levels = leaf.num_levels if (leaf.rep is not None or leaf.defs is not None) else 0
        self.level_streams = (leaf.rep is not None) + (leaf.defs is not None)
        visible = leaf.visible_mask()
        # end_of[v]: level index just after item v-1 (end_of[0] = 0)
        if self.level_streams == 0:
            self.end_of = None
        elif visible is None:
            self.end_of = np.arange(self.n + 1, dtype=np.int64)
        else:
            self.end_of = np.concatenate(([0], np.flatnonzero(visible) + 1)).astype(np.int64)
        self.hard = MAX_CHUNK_BYTES_2_1 if minor < 2 else MAX_CHUNK_BYTES_2_2
        size_width = 2 if minor < 2 else 4
        self.header = 2 + 2 * self.level_streams + size_width * plan.num_buffers
        self.cost = None if plan.uniform is not None else plan.cost_prefix()

    def _value_bytes(self, start: int, stop: int) -> float:
        if self.cost is None:
            assert self.plan.uniform is not None  # no cost prefix only when the cost is linear
            return (stop - start) * self.plan.uniform + self.plan.chunk_overhead
        return float(self.cost[stop] - self.cost[start]) + self.plan.chunk_overhead

    def _fits_levels(self, value_bytes: float, levels: int, smallest: bool) -> bool:
        if value_bytes > self.plan.target_bytes and not smallest:
            return False
        if levels > MAX_LEVELS_PER_CHUNK:
            return False
        total: float = self.header + 7 + 2 * levels * self.level_streams + 8 * self.level_streams
        total += value_bytes + 8 * self.plan.num_buffers
        return total <= self.hard

    def _fits(self, start: int, stop: int, final: bool, smallest: bool) -> bool:
        levels = 0
        if self.end_of is not None:
            level_stop = self.total_levels if final else int(self.end_of[stop])
            levels = level_stop - int(self.end_of[start])
        return self._fits_levels(self._value_bytes(start, stop), levels, smallest)

    def _uniform_size(self) -> int | None:
        """Fast path: linear cost and levels 1:1 with items -> one chunk size for the whole page."""
        if self.cost is not None or (self.end_of is not None and self.total_levels != self.n):
            return None

        def fits(k: int) -> bool:
            k = min(k, self.n)
            levels = k if self.end_of is not None else 0
            assert self.plan.uniform is not None  # no cost prefix only when the cost is linear
            value_bytes = k * self.plan.uniform + self.plan.chunk_overhead
            return self._fits_levels(value_bytes, levels, k <= self.plan.min_chunk)

        # pylance cuts every page into chunks of the full size (as many values as fit the
        # target), even a page that would fit one chunk whole
        k = self.full_size() or self.plan.max_chunk
        while k > self.plan.min_chunk and not fits(k):
            k //= 2
        return k if fits(k) else None

    def full_size(self) -> int | None:
        """Items in a full chunk of a linear-cost plan, whatever the page's length."""
        if self.plan.uniform is None:
            return None
        k = self.plan.max_chunk
        while k > self.plan.min_chunk and k * self.plan.uniform + self.plan.chunk_overhead > self.plan.target_bytes:
            k //= 2
        return k

    def _best_step(self, p: int) -> int:
        """The largest allowed non-final chunk size (a power of two) starting at item ``p``, or 0.

        Only the chunk starts the greedy walk visits are evaluated (a page has about one per
        kilobyte of values); the value budget is located with one binary search on the cost
        prefix, so at most a couple of sizes are tried per chunk.
        """
        k = self.plan.max_chunk
        smallest = self.plan.min_chunk
        if self.cost is not None:
            budget = self.cost[p] + (self.plan.target_bytes - self.plan.chunk_overhead)
            within = int(np.searchsorted(self.cost, budget, side="right")) - 1 - p  # items within target_bytes
            while k > smallest and k > within:
                k //= 2
        while k >= smallest:
            if p + k < self.n and self._fits(p, p + k, False, k <= smallest):
                return k
            k //= 2
        return 0

    def _planned(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The compression's own chunks, if it has them and they fit the level limits."""
        counts = self.plan.own_chunks()
        if counts is None:
            return None
        starts = np.cumsum(counts) - counts
        stops = starts + counts
        # the limits of _fits_levels (target size aside), for all chunks at once
        if self.cost is None:
            assert self.plan.uniform is not None  # no cost prefix only when the cost is linear
            value_bytes = counts * self.plan.uniform + self.plan.chunk_overhead
        else:
            value_bytes = self.cost[stops] - self.cost[starts] + self.plan.chunk_overhead
        levels = np.zeros(len(counts), np.int64)
        if self.end_of is not None:
            level_stops = self.end_of[stops]
            level_stops[-1] = self.total_levels
            levels = level_stops - self.end_of[starts]
        total = self.header + 7 + (2 * levels + 8) * self.level_streams + value_bytes + 8 * self.plan.num_buffers
        if (levels > MAX_LEVELS_PER_CHUNK).any() or (total > self.hard).any():
            return None
        return starts, counts

    def chunks(self) -> tuple[np.ndarray, np.ndarray] | None:
        n = self.n
        planned = self._planned()
        if planned is not None:
            return planned
        k = self._uniform_size()
        if k is not None:
            starts = np.arange(0, n, k, dtype=np.int64)
            return starts, np.minimum(k, n - starts)
        compiled = accel.kernels(int(self.cost[-1]) if self.cost is not None else 0)
        if compiled is not None and self.cost is not None:
            return self._compiled_chunks(compiled)
        chunk_starts: list[int] = []
        p = 0
        while p < n:
            chunk_starts.append(p)
            if n - p <= self.plan.max_chunk and self._fits(p, n, True, n - p <= self.plan.min_chunk):
                p = n
                break
            step = self._best_step(p)
            if step == 0:
                return None
            p += step
        starts_arr = np.asarray(chunk_starts, np.int64)
        return starts_arr, np.diff(np.append(starts_arr, n))

    def _compiled_chunks(self, compiled) -> tuple[np.ndarray, np.ndarray] | None:  # type: ignore[no-untyped-def]
        """:meth:`chunks` by the compiled walk (same starts: the tests compare them)."""
        assert self.cost is not None  # the caller checks
        cost = self.cost.astype(np.int64 if self.cost.dtype.kind in "iu" else np.float64, copy=False)
        end_of = self.end_of if self.end_of is not None else np.zeros(1, np.int64)
        starts = compiled.chunk_starts(
            cost, end_of, self.end_of is not None, self.total_levels, self.n, self.plan.max_chunk,
            self.plan.min_chunk, float(self.plan.target_bytes), float(self.plan.chunk_overhead), self.header,
            self.level_streams, self.plan.num_buffers, self.hard, MAX_LEVELS_PER_CHUNK)
        if starts is None:
            return None
        return starts, np.diff(np.append(starts, self.n))


def _rle_levels(words: np.ndarray, starts: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Block RLE of each chunk of u16 levels: ``u64 values bytes | u16 values | u8 run lengths``
    (runs cut at chunk starts and every 255 levels)."""
    n = len(words)
    boundary = np.zeros(n, np.bool_)
    boundary[0] = True
    boundary[1:] = words[1:] != words[:-1]
    boundary[starts[starts < n]] = True
    run_pos = np.flatnonzero(boundary)
    run_len = np.diff(np.append(run_pos, n))
    pieces = (run_len + 254) // 255
    sub_pos = np.repeat(run_pos, pieces) + 255 * (np.arange(int(pieces.sum())) - np.repeat(np.cumsum(pieces) - pieces, pieces))
    sub_len = np.diff(np.append(sub_pos, n))
    runs = np.diff(np.append(np.searchsorted(sub_pos, starts), len(sub_pos)))
    sizes = 8 + 3 * runs
    out = np.empty(int(sizes.sum()), np.uint8)
    firsts = np.cumsum(sizes) - sizes
    run_chunk = np.repeat(np.arange(len(starts)), runs)
    run_index = np.arange(len(sub_pos)) - np.repeat(np.cumsum(runs) - runs, runs)
    header = (runs * 2).astype("<u8").view(np.uint8).reshape(-1, 8)
    out[firsts[:, None] + np.arange(8)] = header
    value_pos = firsts[run_chunk] + 8 + 2 * run_index
    value_bytes = words[sub_pos].astype("<u2").view(np.uint8).reshape(-1, 2)
    out[value_pos[:, None] + np.arange(2)] = value_bytes
    out[firsts[run_chunk] + 8 + 2 * runs[run_chunk] + run_index] = sub_len.astype(np.uint8)
    return out, sizes


def _rle_wins(words: np.ndarray) -> bool:
    """2.2 levels: RLE when its (value, length) triples are fewer bytes than the plain levels and
    than bit-packing them (estimated per 1024-level block, as for values)."""
    n = len(words)
    change = np.flatnonzero(words[1:] != words[:-1]) + 1
    lengths = np.diff(np.concatenate(([0], change, [n])))
    rle = 8 + int(((lengths + 254) // 255).sum()) * 3  # with its u64 header
    full = n // BLOCK * BLOCK
    widths = bit_widths(words[:full].reshape(-1, BLOCK)) if full else np.zeros(0, np.int64)
    if full < n:
        widths = np.append(widths, bit_widths(words[full:][None, :]))
    packed = int(((1 + BLOCK * widths // 16) * 2).sum())
    return rle < 2 * n and rle <= packed


def _compress_levels(levels: np.ndarray, starts: np.ndarray, counts: np.ndarray,
                     minor: int = 2) -> tuple[np.ndarray, np.ndarray, pb.CompressiveEncoding]:
    """A page's rep or def levels, chunk by chunk, as pylance's block compressor writes u16 levels:
    in 2.2 RLE where it is the smallest; else out-of-line bit-packed at the page's width above
    1024 levels; up to 1024 levels, each chunk inline bit-packed (its own width first), or raw u16
    when one block of 1024 packed levels would not be smaller than the page's levels."""
    if minor >= 2 and len(levels) > 1 and _rle_wins(np.asarray(levels, np.uint16)):
        data, sizes = _rle_levels(np.ascontiguousarray(levels, np.uint16), starts, counts)
        return data, sizes, pb.CompressiveEncoding(rle=pb.Rle(values=flat_encoding(16), run_lengths=flat_encoding(8)))
    if len(levels) <= BLOCK:
        words = np.ascontiguousarray(levels, np.uint16)
        width = int(words.max()).bit_length() if len(words) else 0
        if width == 0 or (BLOCK * width + 7) // 8 >= words.nbytes:
            return words.view(np.uint8), counts * 2, flat_encoding(16)
        data, sizes = inline_pack_chunks(words, starts, counts)
        return data, sizes, pb.CompressiveEncoding(inline_bitpacking=pb.InlineBitpacking(uncompressed_bits_per_value=16))
    bits = max(1, int(levels.max()).bit_length()) if len(levels) else 1
    data, sizes = out_of_line_pack(levels, bits, starts, counts)
    encoding = pb.CompressiveEncoding(
        out_of_line_bitpacking=pb.OutOfLineBitpacking(uncompressed_bits_per_value=16, values=flat_encoding(bits))
    )
    return data, sizes, encoding


def _repetition_index(rep: np.ndarray, max_rep: int, lstarts: np.ndarray, lcounts: np.ndarray) -> np.ndarray:
    """Per chunk: rows finished in it and leftover levels of an unfinished row (Lance's rules)."""
    nchunks = len(lstarts)
    row_starts = np.flatnonzero(rep == max_rep)
    lends = lstarts + lcounts
    # row starts strictly after the first level of each chunk
    after_first = np.searchsorted(row_starts, lends) - np.searchsorted(row_starts, lstarts + 1)
    rows = after_first.astype(np.int64)
    last_start = np.searchsorted(row_starts, lends) - 1
    has_start = last_start >= np.searchsorted(row_starts, lstarts)
    safe_last = row_starts[np.maximum(last_start, 0)] if len(row_starts) else np.zeros(nchunks, np.int64)
    leftovers = np.where(has_start, lends - safe_last, lcounts).astype(np.int64)
    leftovers[-1] = 0
    rows[-1] += 1
    # A chunk that starts a new row proves the previous chunk's leftovers were a whole row.
    if nchunks > 1:
        starts_row = rep[lstarts[1:]] == max_rep
        fix = np.flatnonzero(starts_row & (leftovers[:-1] != 0))
        rows[fix] += 1
        leftovers[fix] = 0
    return np.column_stack([rows, leftovers]).astype("<u8").reshape(-1)


def _assemble_chunks(level_parts: list, value_buffers: list, num_levels, nchunks: int,
                     minor: int) -> tuple[bytes | np.ndarray, np.ndarray]:
    """Lay the chunks out: per chunk a header (level count, then every stream's byte size),
    padded to 8 bytes, then each stream's bytes for that chunk, each padded to 8 bytes.

    Streams (rep, def, then the value buffers) are ``(data, sizes)`` pairs whose chunks lie back
    to back in ``data``; level byte counts are u16, value buffer sizes u16 (2.1) or u32 (2.2).
    Headers are built as one structured array and every piece is a view, so the per-chunk work
    is a join (or, with the compiled kernels, one copy pass per stream into the final buffer).
    Returns the bytes and each chunk's size.
    """
    streams = level_parts + value_buffers
    size_dtype = "<u2" if minor < 2 else "<u4"
    fields = [("levels", "<u2")]
    fields += [(f"s{i}", "<u2" if i < len(level_parts) else size_dtype) for i in range(len(streams))]
    header = np.zeros(nchunks, np.dtype(fields))
    header["levels"] = num_levels
    columns: list[list] = []
    chunk_bytes = np.zeros(nchunks, np.int64)
    compiled = accel.kernels()
    raws: list[tuple[np.ndarray | DeferredVariableChunks, np.ndarray, np.ndarray]] = []  # (bytes, sizes, offset in the chunk)
    for i, (data, sizes) in enumerate(streams):
        sizes = np.asarray(sizes, np.int64)
        if len(sizes) and int(sizes.max()) > np.iinfo(header.dtype[f"s{i}"]).max:  # the chunker's limits prevent it
            raise ValueError(f"mini-block stream {i} holds {int(sizes.max())} bytes, more than its header field")
        header[f"s{i}"] = sizes
        pads = (-sizes) % 8
        if compiled is not None:
            if not isinstance(data, DeferredVariableChunks):
                data = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
            raws.append((data, sizes, chunk_bytes.copy()))
            chunk_bytes += sizes + pads
            continue
        assert not isinstance(data, DeferredVariableChunks)  # deferred only when the kernels are loaded
        chunk_bytes += sizes + pads
        # numpy's stubs declare ndarray.__buffer__ only for Python >= 3.12, hence the ignores below
        raw = memoryview(np.ascontiguousarray(data).view(np.uint8).reshape(-1))  # type: ignore[arg-type]
        ends = np.cumsum(sizes).tolist()
        columns.append([raw[a:b] for a, b in zip([0, *ends[:-1]], ends)])
        columns.append([_PADS[:p] for p in pads.tolist()])
    header_len = header.dtype.itemsize
    header_block = header_len + _pad8(header_len)
    heads = np.full((nchunks, header_block), CHUNK_PAD, np.uint8)
    heads[:, :header_len] = header.view(np.uint8).reshape(nchunks, header_len)
    chunk_bytes += header_block
    if compiled is not None:
        # every piece copied to its place in one compiled pass per stream; pads stay CHUNK_PAD
        chunk_pos = np.cumsum(chunk_bytes) - chunk_bytes
        out = np.full(int(chunk_bytes.sum()), CHUNK_PAD, np.uint8)
        compiled.copy_ranges(out, chunk_pos, heads.reshape(-1), np.arange(nchunks, dtype=np.int64) * header_block,
                             np.full(nchunks, header_block, np.int64))
        for piece, sizes, within in raws:
            if isinstance(piece, DeferredVariableChunks):
                piece.write_into(out, chunk_pos + header_block + within)
            else:
                compiled.copy_ranges(out, chunk_pos + header_block + within, piece, np.cumsum(sizes) - sizes, sizes)
        return out, chunk_bytes
    flat = memoryview(heads.reshape(-1))  # type: ignore[arg-type]  # numpy stubs: __buffer__ needs 3.12
    head_views = [flat[c : c + header_block] for c in range(0, nchunks * header_block, header_block)]
    body = b"".join([piece for row in zip(head_views, *columns) for piece in row])
    return body, chunk_bytes


def encode_miniblock(
    leaf: LeafPage,
    plan: ValuePlan,
    minor: int,
    dictionary=None,
    params: FieldParams = DEFAULT_PARAMS,
) -> tuple[list, pb.PageLayout] | None:
    """Encode a leaf page as mini-blocks; None when the items cannot be chunked (use full-zip)."""
    chunker = _Chunker(leaf, plan, minor)
    chunking = chunker.chunks()
    if chunking is None:
        return None
    starts, counts = chunking
    nchunks = len(starts)
    value_buffers = plan.encode(starts, counts)

    layout = pb.MiniBlockLayout(
        value_compression=plan.encoding,
        layers=leaf.layers,
        num_buffers=plan.num_buffers,
        num_items=leaf.num_items,
    )
    if minor >= 2:
        layout.has_large_chunk = True

    level_parts = []  # (data, sizes) for rep then def
    rep_index = None
    if chunker.end_of is not None:
        lstarts = chunker.end_of[starts]
        lends = np.append(lstarts[1:], chunker.total_levels)
        lcounts = lends - lstarts
        if leaf.rep is not None:
            data, sizes, encoding = _compress_levels(leaf.rep, lstarts, lcounts, minor)
            layout.rep_compression.CopyFrom(encoding)
            level_parts.append((data, sizes))
            rep_index = _repetition_index(leaf.rep, leaf.max_rep, lstarts, lcounts)
            layout.repetition_index_depth = 1
        if leaf.defs is not None:
            data, sizes, encoding = _compress_levels(leaf.defs, lstarts, lcounts, minor)
            layout.def_compression.CopyFrom(encoding)
            level_parts.append((data, sizes))
        num_levels = lcounts.tolist()
    else:
        num_levels = [0] * nchunks

    body, chunk_bytes = _assemble_chunks(level_parts, value_buffers, num_levels, nchunks, minor)
    logs = np.zeros(nchunks, np.uint64)
    if nchunks > 1:  # non-final chunks hold a power of two of values; the last one says 0
        logs[:-1] = np.log2(counts[:-1]).astype(np.uint64)
    if plan.full_last_chunk_log and nchunks and counts[-1] == chunker.full_size():
        logs[-1] = int(np.log2(counts[-1]))
    words = ((chunk_bytes.astype(np.uint64) // np.uint64(8) - np.uint64(1)) << np.uint64(4)) | logs
    if minor < 2 and nchunks and int(words.max()) > 0xFFFF:
        return None
    meta = words.astype("<u2" if minor < 2 else "<u4").tobytes()
    buffers = [meta, body]
    if dictionary is not None:
        block, encoding = dictionary_block(dictionary, minor, params)
        layout.dictionary.CopyFrom(encoding)
        layout.num_dictionary_items = dictionary.count
        buffers.append(block)
    if rep_index is not None:
        buffers.append(rep_index.tobytes())
    return buffers, pb.PageLayout(mini_block_layout=layout)
