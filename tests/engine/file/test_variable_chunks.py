"""Where the writer cuts mini-block pages of variable-width values into chunks (pylance 14's
binary chunker), on the numpy walk and on the compiled one, against a literal reading of the rule."""

from __future__ import annotations

import numpy as np
import pytest

from lance_format.encodings.structural.variable_chunks import variable_chunk_counts


def _doubling(offsets: np.ndarray, width: int, aim: int) -> list[int]:
    """The rule as written: from each chunk start try 2, 4, 8, ... values while they fit."""
    n = len(offsets) - 1

    def fits(start: int, count: int) -> bool:
        return int(offsets[start + count] - offsets[start]) + (count + 1) * width <= aim

    counts, last = [], 0
    while last < n:
        remaining = n - last
        if remaining < 2:
            count = remaining
        elif not fits(last, 2):
            count = 2  # a chunk holds two values however large
        else:
            count = 2
            while True:
                if 2 * count > remaining:
                    count = remaining if fits(last, remaining) else count
                    break
                if not fits(last, 2 * count):
                    break
                count *= 2
        counts.append(count)
        last += count
    return counts


@pytest.mark.parametrize("width", [4, 8])
@pytest.mark.parametrize("aim", [64, 4096, 32 * 1024])
@pytest.mark.parametrize("shape", ["short", "skewed", "huge", "empty strings"])
def test_chunk_counts_follow_the_doubling_rule(kernel_policy, width, aim, shape):
    rng = np.random.default_rng(len(shape) * 31 + aim + width)
    n = 20_000
    lengths = {
        "short": rng.integers(5, 40, n),
        "skewed": np.where(rng.random(n) < 0.02, rng.integers(500, 20_000, n), rng.integers(0, 30, n)),
        "huge": rng.integers(3_000, 70_000, n),
        "empty strings": np.zeros(n, np.int64),
    }[shape]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    counts = variable_chunk_counts(offsets, width, aim)
    assert counts.tolist() == _doubling(offsets, width, aim)
    assert int(counts.sum()) == n


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5])
def test_chunk_counts_of_tiny_pages(kernel_policy, n):
    offsets = np.arange(n + 1, dtype=np.int64) * 10
    assert variable_chunk_counts(offsets, 4).tolist() == _doubling(offsets, 4, 4096)
