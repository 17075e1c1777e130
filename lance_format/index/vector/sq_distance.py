"""Scalar-quantization (8-bit) distances as pylance computes them.

Every value of every vector is coded as ``(v - start) * 255 / (end - start)`` cast to a byte
(saturating) over the index's one ``bounds`` range; ``scale = (end - start) / 255``.

- l2 and cosine (normalized vectors): the query is coded the same way; the distance is the sum of
  squared code differences times ``scale**2`` (pylance reports it for cosine as well);
- dot: ``1 - (start * sum(q) + scale * sum(code * q))`` with the float query.

All in float32 (the code sums exactly, in integers), vectorized over a partition's rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SqBounds:
    """The range codes are spread over, the bits per code (8) and the index's metric."""

    start: float
    end: float
    num_bits: int
    metric: str

    @property
    def value_scale(self) -> np.float32:
        return np.float32(self.end - self.start) / np.float32(255.0)

    def encode(self, vectors: np.ndarray) -> np.ndarray:
        """Byte codes of float vectors (pylance's saturating cast; NaN codes as 0)."""
        if self.start == self.end:
            return np.zeros(np.shape(vectors), dtype=np.uint8)
        scaled = (np.asarray(vectors, dtype=np.float64) - self.start) * 255.0 / (self.end - self.start)
        return np.nan_to_num(np.clip(scaled, 0, 255), nan=0.0).astype(np.uint8)

    def distances(self, query: np.ndarray, codes: np.ndarray) -> np.ndarray:
        """float32 distances of (rows, dim) byte codes to one float query."""
        if self.metric == "dot":
            q = np.asarray(query, dtype=np.float32)
            weighted = codes.astype(np.float32) @ q
            dot = np.float32(self.start) * q.sum(dtype=np.float32) + self.value_scale * weighted
            return (np.float32(1.0) - dot).astype(np.float32)
        diff = codes.astype(np.int32) - self.encode(query).astype(np.int32)
        squares = np.einsum("ij,ij->i", diff, diff)
        return squares.astype(np.float32) * (self.value_scale * self.value_scale)


__all__ = ["SqBounds"]
