"""Where pylance 14 cuts an RLE mini-block page into chunks (its rolling RLE encoder).

Each chunk looks at the next ``min(4096, remaining)`` values and adds their runs (a run longer
than 255 values costs one value + u8 length pair per 255) while they fit ``8 KiB - 6`` bytes; the
run still open at the window's end is added last if it fits. Along the way it remembers the
power-of-two checkpoints (64, 128, ... 4096; from 256 for 8-bit and 128 for 16-bit values) it
has passed, at most one per value looked at. A chunk that stops short (over the byte budget, or
not ending on a power of two) falls back to the last checkpoint; the final chunk takes whatever
is left. The walk is per chunk (a few per 4096 values), the runs of a chunk are found with numpy.
"""

from __future__ import annotations

import numpy as np

MAX_VALUES = 4096
MAX_BYTES = 8 * 1024 - 6
_CHECKPOINTS = {1: (256, 512, 1024, 2048, 4096), 2: (128, 256, 512, 1024, 2048, 4096)}
_WIDE_CHECKPOINTS = (64, 128, 256, 512, 1024, 2048, 4096)


def _chunk_values(window: np.ndarray, remaining: int, width: int) -> int:
    """How many values the chunk starting with ``window`` takes (0: none fit)."""
    size = len(window)
    run_ends = np.append(np.flatnonzero(window[1:] != window[:-1]) + 1, size)
    lengths = np.diff(run_ends, prepend=0)
    cum = np.cumsum((lengths + 254) // 255 * (width + 1))
    closed = len(run_ends) - 1  # runs closed by a change of value inside the window
    over = np.flatnonzero(cum[:closed] > MAX_BYTES)
    added = int(over[0]) if len(over) else closed
    # iterations run over window positions 1..size-1; a break happens at the failing run's start
    last_iteration = int(run_ends[added]) - 1 if len(over) else size - 1
    added_ends = run_ends[:added]
    checkpoint = None
    at = 0
    for mark in _CHECKPOINTS.get(width, _WIDE_CHECKPOINTS):
        if mark > remaining:
            break
        j = int(np.searchsorted(added_ends, mark))  # first added run ending at or after mark
        if j >= added:
            break
        at = max(at + 1, int(added_ends[j]))
        if at > last_iteration:
            break
        checkpoint = mark
    if len(over):
        return checkpoint or 0
    total = int(run_ends[added - 1]) if added else 0
    if cum[-1] <= MAX_BYTES:
        total = size
    if total == remaining or (total & (total - 1) == 0 and total):
        return total
    return checkpoint or 0


def rle_chunk_counts(words: np.ndarray) -> np.ndarray | None:
    """Values per chunk of an RLE page as pylance writes it, or None if a chunk cannot be cut."""
    n = len(words)
    width = words.dtype.itemsize
    counts = []
    offset = 0
    while offset < n:
        remaining = n - offset
        taken = _chunk_values(words[offset : offset + min(MAX_VALUES, remaining)], remaining, width)
        if taken == 0:
            return None
        counts.append(taken)
        offset += taken
    return np.asarray(counts, np.int64)
