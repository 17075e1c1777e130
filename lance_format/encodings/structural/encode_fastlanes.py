"""FastLanes bit-packing (the writer side of Lance's 2.1/2.2 bitpacking), vectorized in numpy.

A block packs 1024 values of a ``W``-bit type (W = 8/16/32/64) at ``b`` bits each into
``1024 * b / W`` words of W bits. The block is ``L = 1024 / W`` lanes; lane ``l`` owns the words
at indices ``k * L + l`` (k = 0..b-1) and stores W values back to back in that little-endian bit
stream, value ``r`` at bits ``[r*b, r*b + b)`` (a value may straddle two words). Value ``r`` of
lane ``l`` is input element ``FL_ORDER[r // 8] * 16 + (r % 8) * 128 + l`` of the block.

Two framings use these blocks:

* inline bitpacking (mini-block values): each chunk is ``[b as one W-bit word][packed block]``
  with its own ``b``; the chunk is zero-padded to 1024 values;
* out-of-line bitpacking (rep/def levels): one ``b`` for the whole buffer, whole blocks back to
  back, and the tail of ``r < 1024`` values is either stored raw (``r`` words) or zero-padded and
  packed, whichever is smaller (pack iff ``b * (1024 - r) < (W - b) * r``, as Lance decides).

Every function works on many blocks at once: the loop runs over the W rows of a block, each step
a numpy operation over all blocks and lanes.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from lance_format.encodings.structural import accel

BLOCK = 1024
FL_ORDER = (0, 4, 2, 6, 1, 5, 3, 7)
_DTYPES: dict[int, np.dtype] = {8: np.dtype("<u1"), 16: np.dtype("<u2"), 32: np.dtype("<u4"), 64: np.dtype("<u8")}


def uint_dtype(width: int) -> np.dtype:
    """The little-endian unsigned dtype of a ``width``-bit word."""
    return _DTYPES[width]


@cache
def transpose_index(width: int) -> np.ndarray:
    """``idx[r, l]``: the block element that is value ``r`` of lane ``l`` (shape ``(W, 1024/W)``)."""
    rows = np.arange(width)
    base = np.asarray(FL_ORDER)[rows // 8] * 16 + (rows % 8) * 128
    return base[:, None] + np.arange(BLOCK // width)[None, :]


def bit_widths(values: np.ndarray) -> np.ndarray:
    """Bits needed for the largest value of each row of ``values`` (unsigned, 0 for all-zero rows)."""
    if values.size == 0:
        return np.zeros(values.shape[:-1], np.int64)
    top = values.max(axis=-1).astype(np.uint64)
    # bit_length via float log2 is unsafe near 2**53; count shifts instead (at most 64 steps).
    widths = np.zeros(top.shape, np.int64)
    remaining = top.copy()
    for shift in (32, 16, 8, 4, 2, 1):
        big = remaining >= (np.uint64(1) << np.uint64(shift))
        widths += big * shift
        remaining = np.where(big, remaining >> np.uint64(shift), remaining)
    return widths + (remaining > 0)


def pack_blocks(blocks: np.ndarray, bits: int) -> np.ndarray:
    """Pack ``blocks`` (shape ``(m, 1024)``, unsigned W-bit, every value < 2**bits) at ``bits`` bits.

    Returns shape ``(m, 1024*bits/W)``. Row ``r = 8q + s`` of lane ``l`` is block element
    ``s*128 + FL_ORDER[q]*16 + l``, so with the block viewed as ``(8, 128)`` every row of every
    block is a strided slice: no transposed copy is made.
    """
    dtype = blocks.dtype
    width = dtype.itemsize * 8
    lanes = BLOCK // width
    m = blocks.shape[0]
    out = np.zeros((m, bits, lanes), dtype)
    if bits == 0 or m == 0:
        return out.reshape(m, bits * lanes)
    grid = blocks.reshape(m, 8, 128)
    for r in range(width):
        q, s = divmod(r, 8)
        base = FL_ORDER[q] * 16
        value = grid[:, s, base : base + lanes]
        word, shift = divmod(r * bits, width)
        if shift == 0:
            out[:, word, :] |= value
        else:
            out[:, word, :] |= value << dtype.type(shift)
            if shift + bits > width:
                out[:, word + 1, :] |= value >> dtype.type(width - shift)
    return out.reshape(m, bits * lanes)


def unpack_blocks(packed: np.ndarray, bits: int, width: int) -> np.ndarray:
    """Inverse of :func:`pack_blocks` (used by the tests): ``packed`` is ``(m, words)``, result ``(m, 1024)``."""
    dtype = uint_dtype(width)
    lanes = BLOCK // width
    packed = np.asarray(packed, dtype)
    m = packed.shape[0]
    out = np.zeros((m, BLOCK), dtype)
    if bits == 0:
        return out
    words = packed.reshape(m, bits, lanes)
    mask = dtype.type((1 << bits) - 1) if bits < width else dtype.type(np.iinfo(dtype).max)
    index = transpose_index(width)
    for r in range(width):
        word, shift = divmod(r * bits, width)
        value = words[:, word, :] >> dtype.type(shift)
        if shift and shift + bits > width:
            value |= words[:, word + 1, :] << dtype.type(width - shift)
        out[:, index[r]] = value & mask
    return out


def _padded_blocks(values: np.ndarray, starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Rows of 1024 values: ``values[starts[i] : starts[i] + counts[i]]`` zero-padded."""
    m = len(starts)
    if m and counts[: m - 1].min(initial=BLOCK) == BLOCK and np.array_equal(starts, np.arange(m) * BLOCK):
        # the usual case: back-to-back full blocks, only the last one short -> no gather
        out = np.zeros((m, BLOCK), values.dtype)
        flat = out.reshape(-1)
        flat[: int(starts[-1] + counts[-1])] = values[: int(starts[-1] + counts[-1])]
        return out
    lane = np.arange(BLOCK)
    index = starts[:, None] + lane[None, :]
    valid = lane[None, :] < counts[:, None]
    if len(values) == 0:
        return np.zeros(index.shape, values.dtype)
    picked = values[np.minimum(index, len(values) - 1)]
    picked[~valid] = 0
    return picked


def _back_to_back(values: np.ndarray, starts: np.ndarray, counts: np.ndarray) -> bool:
    """Whether the chunks are non-empty and tile ``values`` in order (as the mini-block chunker
    cuts them), so that ``np.maximum.reduceat`` over ``starts`` gives each chunk's maximum."""
    return (len(starts) > 0 and int(starts[0]) == 0 and int(counts.min()) > 0
            and int(starts[-1] + counts[-1]) == len(values) and np.array_equal(starts[1:], starts[:-1] + counts[:-1]))


def inline_pack_chunks(values: np.ndarray, starts: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inline-bitpack chunks ``values[starts[i] : starts[i]+counts[i]]`` (each ≤ 1024 values).

    Returns ``(data, sizes)``: the chunks' bytes back to back (each ``[b][packed words]``) and
    each chunk's size in bytes.
    """
    dtype = values.dtype
    width = dtype.itemsize * 8
    compiled = accel.write_kernels(values.nbytes)
    if compiled is not None and _back_to_back(values, starts, counts):
        widths = bit_widths(np.maximum.reduceat(values, starts)[:, None])
        words_per_chunk = 1 + BLOCK * widths // width
        ends = np.cumsum(words_per_chunk)
        out = np.empty(int(ends[-1]), dtype)
        firsts = ends - words_per_chunk
        out[firsts] = widths.astype(dtype)
        compiled.pack_blocks_into(out, firsts + 1, values, starts.astype(np.int64, copy=False),
                                  counts.astype(np.int64, copy=False), widths)
        return out.view(np.uint8), words_per_chunk * dtype.itemsize
    blocks = _padded_blocks(values, starts, counts)
    widths = bit_widths(blocks)
    words_per_chunk = 1 + BLOCK * widths // width
    ends = np.cumsum(words_per_chunk)
    out = np.empty(int(ends[-1]) if len(ends) else 0, dtype)
    firsts = ends - words_per_chunk
    out[firsts] = widths.astype(dtype)
    # Neighbouring chunks mostly share a width: a run of equal widths is one pack straight into
    # a 2-D view of the output. Data whose widths keep changing is packed per distinct width
    # and scattered instead, so the number of packs stays bounded either way.
    runs = np.flatnonzero(np.diff(widths)) + 1
    bounds = [0, *runs.tolist(), len(widths)]
    distinct = np.unique(widths).tolist()
    if len(bounds) - 1 <= 2 * len(distinct):
        for a, b in zip(bounds[:-1], bounds[1:]):
            bits = int(widths[a])
            words = BLOCK * bits // width
            if words:
                target = out[int(firsts[a]) : int(ends[b - 1])].reshape(b - a, 1 + words)
                target[:, 1:] = pack_blocks(blocks[a:b], bits)
        return out.view(np.uint8), words_per_chunk * dtype.itemsize
    for bits in distinct:
        if bits == 0:
            continue
        which = np.flatnonzero(widths == bits)
        packed = pack_blocks(blocks[which], bits)
        dest = (firsts[which] + 1)[:, None] + np.arange(packed.shape[1])[None, :]
        out[dest] = packed
    return out.view(np.uint8), words_per_chunk * dtype.itemsize


def out_of_line_pack(values: np.ndarray, bits: int, starts: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Out-of-line-bitpack each segment ``values[starts[i] : starts[i]+counts[i]]`` at ``bits`` bits.

    Returns ``(data, sizes)``: the segments' bytes back to back and each one's size in bytes.
    """
    dtype = values.dtype
    width = dtype.itemsize * 8
    words = BLOCK * bits // width
    full = counts // BLOCK
    tail = counts % BLOCK
    pack_tail = (tail > 0) & (bits * (BLOCK - tail) < (width - bits) * tail)
    blocks_per_seg = full + pack_tail
    seg_words = blocks_per_seg * words + np.where(pack_tail, 0, tail)
    seg_ends = np.cumsum(seg_words)
    seg_firsts = seg_ends - seg_words
    out = np.zeros(int(seg_ends[-1]) if len(seg_ends) else 0, dtype)
    total_blocks = int(blocks_per_seg.sum())
    if total_blocks:
        seg_of_block = np.repeat(np.arange(len(counts)), blocks_per_seg)
        first_block = np.cumsum(blocks_per_seg) - blocks_per_seg
        j = np.arange(total_blocks) - first_block[seg_of_block]
        block_starts = starts[seg_of_block] + j * BLOCK
        block_counts = np.minimum(BLOCK, counts[seg_of_block] - j * BLOCK)
        block_dest = seg_firsts[seg_of_block] + j * words
        compiled = accel.write_kernels(values.nbytes)
        if compiled is not None:
            compiled.pack_blocks_into(out, block_dest, values, block_starts.astype(np.int64, copy=False),
                                      block_counts.astype(np.int64, copy=False), np.full(total_blocks, bits, np.int64))
        else:
            packed = pack_blocks(_padded_blocks(values, block_starts, block_counts), bits)
            out[block_dest[:, None] + np.arange(words)[None, :]] = packed
    raw = np.flatnonzero((tail > 0) & ~pack_tail)
    if len(raw):
        raw_counts = tail[raw]
        src = np.repeat(starts[raw] + full[raw] * BLOCK - np.cumsum(raw_counts) + raw_counts, raw_counts)
        src += np.arange(int(raw_counts.sum()))
        dst = np.repeat(seg_firsts[raw] + full[raw] * words - np.cumsum(raw_counts) + raw_counts, raw_counts)
        dst += np.arange(int(raw_counts.sum()))
        out[dst] = values[src]
    return out.view(np.uint8), seg_words * dtype.itemsize
