"""Split-block bloom filters (SBBF) as BLOOMFILTER stores them, vectorized with numpy.

A filter is ``num_blocks`` blocks of eight little-endian u32 words. A value's xxHash64 picks a
block from its high 32 bits (``((hash >> 32) * num_blocks) >> 32``) and, for each word ``i``, one
bit ``((low32 * SALT[i]) mod 2**32) >> 27`` from its low 32 bits. The size is the smallest power
of two (32 bytes .. 128 MiB) whose estimated false-positive rate for ``ndv`` items is at most
``fpp`` (Putze et al.'s formula, summed over 750 Poisson terms, found by binary search), as
pylance's ``SbbfBuilder`` sizes it: 8192 items at 0.00057 give 32 KiB.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

SALT = np.array([0x47B6137B, 0x44974D91, 0x8824AD5B, 0xA2B7289D,
                 0x705495C7, 0x2DF1424B, 0x9EFC4947, 0x5C6BFB31], dtype=np.uint32)
_MIN_LOG2, _MAX_LOG2 = 5, 27


def _false_positive_probability(ndv: int, log2_bytes: int) -> float:
    bits = float(1 << log2_bytes) * 8.0
    if ndv == 0:
        return 0.0
    if ndv / bits > 2.0:
        return 1.0
    lam = 8.0 * 32.0 / (bits / ndv)
    loglam = math.log(lam)
    total = 0.0
    for i in range(749, -1, -1):
        logp = i * loglam - lam - math.lgamma(i + 1)
        inner = 1.0 - (1.0 - 1.0 / 32.0) ** i
        logfinner = 8.0 * math.log(inner) if inner > 0 else -math.inf
        total += math.exp(logp + logfinner)
    return min(total, 1.0)


@lru_cache(maxsize=64)
def filter_bytes(ndv: int, fpp: float) -> int:
    """The byte size of a filter for ``ndv`` items at false-positive rate ``fpp``."""
    low, high = 0, 64
    while high > low + 1:
        mid = (high + low) // 2
        if _false_positive_probability(ndv, mid) <= fpp:
            high = mid
        else:
            low = mid
    return 1 << min(max(high, _MIN_LOG2), _MAX_LOG2)


def _positions(hashes: np.ndarray, num_blocks: int) -> np.ndarray:
    """Each hash's eight bit positions in the filter's bit array, shape ``(n, 8)``."""
    hashes = np.asarray(hashes, dtype=np.uint64)
    block = ((hashes >> np.uint64(32)) * np.uint64(num_blocks)) >> np.uint64(32)
    low = hashes.astype(np.uint32)  # wraps: the low 32 bits
    with np.errstate(over="ignore"):
        bit = (low[:, None] * SALT[None, :]) >> np.uint32(27)
    word = block[:, None] * np.uint64(8) + np.arange(8, dtype=np.uint64)[None, :]
    return word * np.uint64(32) + bit.astype(np.uint64)


def build(hashes: np.ndarray, size_bytes: int) -> bytes:
    """The filter bytes holding ``hashes``."""
    bits = np.zeros(size_bytes * 8, dtype=bool)
    if len(hashes):
        bits[_positions(hashes, size_bytes // 32).ravel()] = True
    # bit b of the filter is bit (b % 8) of byte b // 8: little-endian u32 words
    return np.packbits(bits, bitorder="little").tobytes()


def might_contain(data: bytes, hashes: np.ndarray) -> np.ndarray:
    """Per hash, whether the filter ``data`` may hold it (no false negatives)."""
    if len(hashes) == 0:
        return np.zeros(0, dtype=bool)
    if len(data) == 0 or len(data) % 32:
        return np.ones(len(hashes), dtype=bool)  # unreadable size: conservatively "maybe"
    array = np.frombuffer(data, dtype=np.uint8)
    positions = _positions(hashes, len(data) // 32)
    bytes_ = array[(positions >> np.uint64(3)).astype(np.int64)]
    present = (bytes_ >> (positions & np.uint64(7)).astype(np.uint8)) & 1
    return np.asarray(present.all(axis=1), dtype=bool)
