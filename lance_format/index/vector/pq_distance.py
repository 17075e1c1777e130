"""Product-quantization distances as pylance computes them (asymmetric distance computation).

A PQ codebook splits a ``dim`` vector into ``num_sub_vectors`` sub-vectors of ``dim /
num_sub_vectors`` values, each coded by the nearest of ``2**nbits`` centroids (one byte, or one
nibble for 4-bit codes: low nibble first). A query's distance to a code is the sum over
sub-vectors of a lookup table (sub-vectors x centroids) computed once per query (and partition:
l2 and cosine indices code the *residual* ``vector - partition centroid``, so the query's residual
is used too; dot codes the vector itself):

- l2 and cosine: squared l2 of each query sub-vector to each centroid, summed (cosine indices hold
  normalized vectors, and pylance reports this l2 value as the distance);
- dot: ``1 - q_m . c`` per sub-vector, summed, minus ``num_sub_vectors - 1`` (``1 - q . x``).

All in float32, as pylance; no per-row loop: one gather of the table by the codes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from lance_format.errors import CorruptFileError


@dataclass(frozen=True, eq=False)
class PqCodebook:
    """A codebook (``num_sub_vectors``, ``2**nbits``, ``sub_dim``) and how codes are stored."""

    centroids: np.ndarray  # float32 (exactly the stored values)
    nbits: int
    transposed: bool
    metric: str
    stored: np.dtype = np.dtype(np.float32)  # the codebook's own type: float16 queries are rounded to it

    @classmethod
    def from_flat(cls, codebook: np.ndarray, *, num_sub_vectors: int, nbits: int, transposed: bool,
                  metric: str) -> PqCodebook:
        """From pylance's codebook tensor (``2**nbits * num_sub_vectors`` rows of sub-vectors,
        however shaped: sub-vector ``m``'s centroids are its ``m``-th block)."""
        if nbits not in (4, 8):
            raise CorruptFileError(f"PQ codebook with {nbits} bits per code")
        values = np.asarray(codebook, dtype=np.float32).reshape(-1)
        per = num_sub_vectors * (1 << nbits)
        if num_sub_vectors < 1 or len(values) % per:
            raise CorruptFileError(f"PQ codebook of {len(values)} values for {num_sub_vectors} sub-vectors")
        return cls(values.reshape(num_sub_vectors, 1 << nbits, len(values) // per), nbits, transposed, metric,
                   np.dtype(codebook.dtype))

    @functools.cached_property
    def _columns(self) -> list[np.ndarray]:
        """Each sub-vector value of every centroid, (num_sub_vectors, 2**nbits), contiguous."""
        return [np.ascontiguousarray(self.centroids[:, :, j]) for j in range(self.centroids.shape[2])]

    @property
    def num_sub_vectors(self) -> int:
        return int(self.centroids.shape[0])

    @property
    def code_width(self) -> int:
        """Bytes a row's code takes."""
        return self.num_sub_vectors if self.nbits == 8 else self.num_sub_vectors // 2

    def tables(self, queries: np.ndarray) -> np.ndarray:
        """The (queries, num_sub_vectors, 2**nbits) lookup tables of queries (or residuals)."""
        queries = np.asarray(queries)
        if self.stored == np.float16:  # pylance measures a float16 index in float16 values
            queries = queries.astype(np.float16)
        sub = queries.astype(np.float32).reshape(len(queries), self.num_sub_vectors, 1, -1)
        # summed term by term over the few values of a sub-vector, in order (as pylance; a
        # reduction over a short last axis is slow in numpy)
        total = np.zeros((len(queries), self.num_sub_vectors, self.centroids.shape[1]), dtype=np.float32)
        for j in range(self.centroids.shape[2]):
            if self.metric == "dot":
                total += self._columns[j] * sub[..., j]
            else:
                diff = self._columns[j] - sub[..., j]
                total += diff * diff
        return (np.float32(1) - total) if self.metric == "dot" else total

    def positions(self, codes: np.ndarray) -> np.ndarray:
        """Stored codes, sub-vector major ((code bytes, rows)), as positions in a flattened
        lookup table: (num_sub_vectors, rows), sub-vector ``m``'s code ``c`` at ``m * 2**nbits +
        c`` (int16: a search is then one gather per partition)."""
        if self.nbits == 4:  # two codes a byte: the low nibble first
            codes = np.stack([codes & 0x0F, codes >> 4], axis=1).reshape(-1, codes.shape[1])
        width = 1 << self.nbits
        dtype = np.int16 if self.num_sub_vectors * width <= np.iinfo(np.int16).max else np.int32
        positions: np.ndarray = codes.astype(dtype)
        positions += (np.arange(self.num_sub_vectors, dtype=dtype) * width)[:, None]
        return positions

    def distances(self, table: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """float32 distances of one partition's codes (:meth:`positions`) through one query's
        (num_sub_vectors, 2**nbits) ``table``: one gather, summed in sub-vector order (as
        pylance)."""
        total = table.reshape(-1).take(positions).sum(axis=0, dtype=np.float32)
        if self.metric == "dot":
            total -= np.float32(self.num_sub_vectors - 1)
        return total


__all__ = ["PqCodebook"]
