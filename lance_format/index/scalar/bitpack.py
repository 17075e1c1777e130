"""Vectorized byte encoders of the INVERTED index writer: ``BitPacker4x`` blocks of 128 values,
LEB128 varints, and the concatenation of per-entry byte pieces into one binary per entry.

Every function works on whole numpy arrays (many blocks or entries at once), never per value.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

BLOCK = 128


def bit_widths(values: np.ndarray) -> np.ndarray:
    """Bits needed for each value (0 for 0), as int64."""
    v = values.astype(np.uint64)
    out = np.zeros(v.shape, np.int64)
    for shift in (16, 8, 4, 2, 1):
        big = v >= (np.uint64(1) << np.uint64(shift))
        out += np.where(big, shift, 0)
        v = np.where(big, v >> np.uint64(shift), v)
    return out + (v > 0)


def pack4x(values: np.ndarray, bits: int) -> np.ndarray:
    """``BitPacker4x.compress`` of each row of ``values`` ((blocks, 128) uint32, every value
    below ``2 ** bits``): (blocks, 16 * bits) uint8. Value ``4 j + lane`` is the ``j``-th
    ``bits``-bit field of lane ``lane``'s stream of 32-bit words, least significant bits first;
    the lanes' words interleave."""
    count = len(values)
    if bits == 0 or count == 0:
        return np.zeros((count, 16 * bits), np.uint8)
    out = np.empty((count, 16 * bits), np.uint8)
    shifts = np.arange(bits, dtype=np.uint32)
    step = max(1, (1 << 22) // (BLOCK * bits))  # bounded scratch memory per chunk of blocks
    for at in range(0, count, step):
        chunk = values[at:at + step].astype(np.uint32)
        n = len(chunk)
        lanes = chunk.reshape(n, 32, 4).transpose(0, 2, 1)  # (blocks, lane, j)
        fields = ((lanes[..., None] >> shifts) & np.uint32(1)).astype(np.uint8)  # (blocks, lane, j, bit)
        packed = np.packbits(fields.reshape(n, 4, 32 * bits), axis=2, bitorder="little")  # (blocks, lane, 4 bits)
        words = packed.reshape(n, 4, bits, 4).transpose(0, 2, 1, 3)  # (blocks, word, lane, byte)
        out[at:at + n] = words.reshape(n, 16 * bits)
    return out


def varints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """LEB128 encodings of ``values``: (all bytes concatenated, bytes per value)."""
    v = np.asarray(values).astype(np.uint64)
    lengths = np.ones(len(v), np.int64)
    for step in range(1, 10):
        lengths += v >= (np.uint64(1) << np.uint64(7 * step))
    which = np.repeat(np.arange(len(v)), lengths)
    starts = np.cumsum(lengths) - lengths
    k = (np.arange(int(lengths.sum())) - np.repeat(starts, lengths)).astype(np.uint64)
    payload = (v[which] >> (np.uint64(7) * k)) & np.uint64(0x7F)
    more = k < (lengths[which] - 1).astype(np.uint64)
    return (payload | (more.astype(np.uint64) << np.uint64(7))).astype(np.uint8), lengths


def join_pieces(parts: Sequence[tuple[np.ndarray, np.ndarray]], count: int) -> tuple[np.ndarray, np.ndarray]:
    """Entry ``e``'s binary is part 0's bytes of ``e``, then part 1's, ...: each part is (its
    bytes for every entry concatenated, its bytes per entry). (buffer, int64 offsets)."""
    lengths = np.stack([np.asarray(n, np.int64) for _, n in parts]) if parts else np.zeros((0, count), np.int64)
    entry = lengths.sum(axis=0)
    offsets = np.zeros(count + 1, np.int64)
    np.cumsum(entry, out=offsets[1:])
    buffer = np.empty(int(offsets[-1]), np.uint8)
    before = offsets[:-1].copy()
    for k, (data, _) in enumerate(parts):
        n = lengths[k]
        src = np.cumsum(n) - n
        dest = np.repeat(before - src, n) + np.arange(int(n.sum()), dtype=np.int64)
        buffer[dest] = data
        before += n
    return buffer, offsets


def fixed_bytes(values: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Each value as little-endian ``dtype`` bytes: (bytes, bytes per value)."""
    arr = np.ascontiguousarray(np.asarray(values).astype(dtype))
    width = arr.dtype.itemsize
    return arr.view(np.uint8).reshape(-1), np.full(len(arr), width, np.int64)
