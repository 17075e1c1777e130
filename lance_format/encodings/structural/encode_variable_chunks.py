"""Where pylance 14 cuts a mini-block page of variable-width values into chunks.

From each chunk start it tries 2, 4, 8, ... values and keeps the largest count whose offsets
(``count + 1`` of them) and bytes fit the aim (4 KiB, or the field's
``lance-encoding:minichunk-size``); when the doubled count would pass the end of the page it
takes the rest if the rest fits, else the count it had. A chunk holds at least two values
however large (a chunk's log2 count of 0 means "the last chunk"), but the last one may hold one.
The walk is per chunk; each step is one lookup in the offsets (compiled when the writer's
kernels are loaded: the walk visits every chunk of the page).
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np

from lance_format.encodings.structural import accel

DEFAULT_AIM_BYTES = 4 * 1024
MAX_AIM_BYTES_2_1 = 32 * 1024  # pylance 14 ignores larger aims in 2.1 (u16 chunk sizes)


def variable_chunk_counts(offsets: np.ndarray, offset_width: int, aim: int = DEFAULT_AIM_BYTES) -> np.ndarray:
    """Values per chunk for values with these ``offsets`` (n + 1 of them, from 0).

    ``t`` values from ``s`` fit when ``cost[s + t] - cost[s] + width <= aim`` with ``cost[i] =
    offsets[i] + i * width``; the cost rises, so the doubling stops at the largest power of two
    that fits, found with one bisection per chunk.
    """
    n = len(offsets) - 1
    width = offset_width
    cost_array = np.asarray(offsets, np.int64) + width * np.arange(n + 1)
    compiled = accel.write_kernels(8 * (n + 1))
    if compiled is not None:
        return compiled.variable_chunk_counts(cost_array, np.int64(aim), np.int64(width))
    cost = cost_array.tolist()
    counts = []
    last = 0
    while last < n:
        remaining = n - last
        # the most values that fit from here (the cost never falls)
        fitting = bisect_right(cost, cost[last] + aim - width, last) - 1 - last
        power = 1 << (min(fitting, remaining).bit_length() - 1) if min(fitting, remaining) >= 2 else 0
        if power:
            if 2 * power > remaining:  # the next try passes the end: the rest, if it fits
                count = remaining if cost[n] - cost[last] + width <= aim else power
            else:
                count = power
        else:
            if remaining < 2:
                count = remaining
            else:
                count = 2  # even two values do not fit: a chunk holds two anyway
        counts.append(count)
        last += count
    return np.asarray(counts, np.int64)
