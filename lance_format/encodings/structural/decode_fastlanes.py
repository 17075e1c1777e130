"""FastLanes bit-unpacking (the "unified transposed layout" of Lance's 2.1/2.2 bitpacking), in numpy.

A FastLanes block packs 1024 values of a ``W``-bit type (W = 8/16/32/64) at ``b`` bits each
into ``1024 * b / W`` words of W bits. The block is ``L = 1024 / W`` independent lanes: lane
``l`` owns the words at indices ``k * L + l`` (k = 0..b-1) and stores W values back to back in
that little-endian bit stream, value ``r`` occupying bits ``[r*b, r*b + b)``. Value ``r`` of lane
``l`` is output element ``FL_ORDER[r // 8] * 16 + (r % 8) * 128 + l``.

``unpack`` decodes any number of same-width blocks at once (one numpy pass over all of them);
callers group the blocks of a page by bit width first. ``take`` decodes single elements (a
selective take reads one or two words per value instead of unpacking whole blocks).
"""

from __future__ import annotations

from functools import cache

import numpy as np

from lance_format.encodings.structural import accel
from lance_format.encodings.structural.decoded_blocks import read_uint

BLOCK = 1024
FL_ORDER = (0, 4, 2, 6, 1, 5, 3, 7)
_DTYPES: dict[int, np.dtype] = {8: np.dtype("<u1"), 16: np.dtype("<u2"), 32: np.dtype("<u4"), 64: np.dtype("<u8")}


def word_dtype(width: int) -> np.dtype:
    """The little-endian unsigned dtype of a ``width``-bit word."""
    return _DTYPES[width]


def packed_words(bits: int, width: int) -> int:
    """Number of ``width``-bit words one 1024-value block packed at ``bits`` bits takes."""
    return BLOCK * bits // width


@cache
def _plan(bits: int, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]:
    """Word indices and shifts of every output row, already in output order.

    Seen as (8, 8 * width / 64 lanes-groups...) the output of one block is ``width`` rows of
    ``1024 / width`` lane values: row ``a * (width / 8) + slot`` holds value ``r = 8 * q + a``
    of every lane, where ``FL_ORDER[q] = slot * 64 / width``. Gathering the packed words in this
    row order makes the unpacked block come out in its final order.
    """
    nq = width // 8
    k = 64 // width
    rows = np.array([8 * FL_ORDER.index(slot * k) + a for a in range(8) for slot in range(nq)])
    bit = rows * bits
    lo_word = bit // width
    shift = bit % width
    spill = shift + bits > width
    hi_word = np.minimum(lo_word + 1, max(bits - 1, 0))
    # Rows that do not spill get a shift that moves the next word's bits above `bits`, where
    # the final mask clears them (this saves a pass that would zero them).
    hi_shift = np.where(shift > 0, width - shift, width - 1)
    dtype = word_dtype(width)
    return (lo_word, shift.astype(dtype)[None, :, None], hi_word, hi_shift.astype(dtype)[None, :, None],
            bool(spill.any()))


# Blocks unpacked per numpy pass: keeps the temporaries (a few x 8 KiB per block) cache-sized.
_STEP = 32


def unpack(packed: np.ndarray, bits: int, width: int) -> np.ndarray:
    """Unpack ``n`` blocks: ``packed`` is (n, 1024*bits/width) words; returns (n, 1024) words."""
    dtype = word_dtype(width)
    n = packed.shape[0]
    lanes = BLOCK // width
    out = np.empty((n, width, lanes), dtype)
    if bits == 0:
        out.fill(0)
        return out.reshape(n, BLOCK)
    compiled = accel.kernels()
    if compiled is not None and bits < width:
        # one compiled (vectorized) pass instead of several numpy passes per _STEP blocks
        words2d = np.ascontiguousarray(packed).reshape(n, -1)
        return compiled.fastlanes_unpack(words2d, bits, width, np.uint64((1 << bits) - 1),
                                         out.reshape(n, BLOCK))
    words = packed.reshape(n, bits, lanes)
    lo_word, shift, hi_word, hi_shift, any_spill = _plan(bits, width)
    mask = dtype.type((1 << bits) - 1)
    for a in range(0, n, _STEP):
        b = min(a + _STEP, n)
        part, dst = words[a:b], out[a:b]
        np.take(part, lo_word, axis=1, out=dst)
        if bits == width:
            continue
        np.right_shift(dst, shift, out=dst)
        if any_spill:
            hi = np.take(part, hi_word, axis=1)
            np.left_shift(hi, hi_shift, out=hi)
            np.bitwise_or(dst, hi, out=dst)
        np.bitwise_and(dst, mask, out=dst)
    return out.reshape(n, BLOCK)


@cache
def _element_origins(width: int) -> tuple[np.ndarray, np.ndarray]:
    """For each output element of a block: its value index ``r`` within its lane, and the lane."""
    lanes = BLOCK // width
    r = np.repeat(np.arange(width), lanes)
    lane = np.tile(np.arange(lanes), width)
    element = np.asarray(FL_ORDER)[r // 8] * 16 + (r % 8) * 128 + lane
    rows, lanes_of = np.empty(BLOCK, np.int64), np.empty(BLOCK, np.int64)
    rows[element], lanes_of[element] = r, lane
    return rows, lanes_of


def take(buf: np.ndarray, words_at: np.ndarray, bits: np.ndarray, elements: np.ndarray, width: int) -> np.ndarray:
    """Output elements ``elements`` (0..1023) of blocks packed at ``bits`` bits whose packed
    words start at byte ``words_at`` of ``buf`` (one entry per element taken), as ``width``-bit words."""
    wb = width // 8
    lanes = BLOCK // width
    rows, lane = _element_origins(width)
    bits = np.asarray(bits, np.int64)
    bit = rows[elements] * bits
    word, shift = bit // width, bit % width
    at = words_at + (word * lanes + lane[elements]) * wb
    value = read_uint(buf, np.where(bits > 0, at, 0), wb).view(np.uint64)  # no words when bits == 0
    value >>= shift.astype(np.uint64)
    spill = np.flatnonzero(shift + bits > width)
    if len(spill):
        above = read_uint(buf, at[spill] + lanes * wb, wb).view(np.uint64)
        value[spill] |= above << (width - shift[spill]).astype(np.uint64)
    mask = np.where(bits >= 64, np.uint64(0xFFFFFFFFFFFFFFFF),
                    (np.uint64(1) << np.minimum(bits, 63).astype(np.uint64)) - np.uint64(1))
    return (value & mask).astype(word_dtype(width))
