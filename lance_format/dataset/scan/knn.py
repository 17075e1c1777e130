"""Exact k-nearest-neighbour kernels: distances of a batch of vectors to the query vectors, and a
running top-k that merges batch after batch (memory bounded by the batch and k, not the table).

Distances are pylance's: ``l2`` is the squared Euclidean distance, ``cosine`` is
``1 - cos(x, q)``, ``dot`` is ``1 - x.q``, ``hamming`` counts differing bits of uint8 vectors.
l2/cosine/dot go through one BLAS matrix product per batch (all queries at once); the few
candidates kept are then recomputed directly, so rounding in the product never reorders them.
Ties are broken by the smaller row id, as pylance's ``TopK`` sorts by ``(_distance, _rowid)``.
Null vectors and vectors at a NaN distance are never returned (pylance drops them too).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

METRICS = {"l2": "l2", "euclidean": "l2", "cosine": "cosine", "dot": "dot", "hamming": "hamming"}
DISTANCE_CELLS = 1 << 23  # distances computed at once (8M: 64 MB of float64), whatever the query count
_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).sum(axis=1).astype(np.uint8)


def _bit_distances(rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Differing bits between each uint8 row and the query (numpy 1.26 has no bitwise_count)."""
    return _BITS[rows ^ query].sum(axis=1, dtype=np.int64)


def vector_matrix(vectors: pa.Array | pa.ChunkedArray, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """(the non-null vectors of a fixed-size-list column as a (rows, dim) matrix, their
    positions in the column)."""
    if isinstance(vectors, pa.ChunkedArray):
        vectors = vectors.combine_chunks()
    if isinstance(vectors, pa.ExtensionArray):
        vectors = vectors.storage
    assert isinstance(vectors, pa.FixedSizeListArray)  # checked when the search was planned
    rows = np.arange(len(vectors))
    if vectors.null_count:
        rows = np.flatnonzero(np.asarray(vectors.is_valid().to_numpy(zero_copy_only=False)))
        vectors = vectors.take(pa.array(rows))
    values = vectors.flatten()  # honours the slice's offset
    values = values.storage if isinstance(values, pa.ExtensionArray) else values
    matrix = values.to_numpy(zero_copy_only=False).reshape(len(vectors), dim)
    return matrix, rows


def _compute_dtype(matrix: np.ndarray) -> np.dtype:
    """float64 vectors are measured in float64, the others in float32 (as pylance)."""
    return np.dtype(np.float64) if matrix.dtype == np.float64 else np.dtype(np.float32)


def approximate(metric: str, queries: np.ndarray, matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """((queries, rows) distances, per query how far they may be from the exact ones); for
    l2/cosine/dot through a matrix product (rounding corrected by :func:`exact` for the
    candidates kept)."""
    if metric == "hamming":
        distances = np.stack([_bit_distances(matrix, q) for q in queries])
        return distances.astype(np.float64), np.zeros(len(queries))
    dtype = _compute_dtype(matrix)
    x = matrix.astype(dtype, copy=False)
    q = queries.astype(dtype, copy=False)
    dots = q @ x.T
    # a dot product of d terms is off by at most d * eps * |x| * |q| (any summation order)
    eps = 2 * x.shape[1] * float(np.finfo(dtype).eps)
    xn = np.einsum("ij,ij->i", x, x)
    qn = np.einsum("ij,ij->i", q, q).astype(np.float64)
    largest = float(xn.max()) if len(xn) else 0.0
    reach = np.sqrt(qn * largest)
    if metric == "dot":
        return 1 - dots, eps * reach
    if metric == "l2":
        return np.maximum(qn[:, None].astype(dtype) + xn[None, :] - 2 * dots, 0), eps * (2 * reach + qn + largest)
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1 - dots / (np.sqrt(qn).astype(dtype)[:, None] * np.sqrt(xn)[None, :]), np.full(len(queries), 4 * eps)


def exact(metric: str, query: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Distances of ``rows`` (a few vectors) to one query, computed term by term."""
    if metric == "hamming":
        return _bit_distances(rows, query).astype(np.float64)
    dtype = _compute_dtype(rows)
    x = rows.astype(dtype, copy=False)
    q = query.astype(dtype, copy=False)
    if metric == "l2":
        diff = x - q
        return np.einsum("ij,ij->i", diff, diff)
    if metric == "dot":
        return 1 - (x @ q)
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1 - (x @ q) / (np.sqrt(np.einsum("ij,ij->i", x, x)) * np.sqrt(q @ q))


@dataclass
class Best:
    """One query's best rows so far: distances, row ids, row addresses (sorted, at most k)."""

    distances: np.ndarray
    row_ids: np.ndarray
    addresses: np.ndarray


class TopK:
    """The k nearest rows of each query, merged batch by batch."""

    def __init__(self, metric: str, queries: np.ndarray, k: int,
                 distance_range: tuple[float | None, float | None] = (None, None)) -> None:
        self.metric = metric
        self.lower = -np.inf if distance_range[0] is None else float(distance_range[0])
        self.upper = np.inf if distance_range[1] is None else float(distance_range[1])
        self.queries = queries
        self.k = k
        empty = Best(np.empty(0), np.empty(0, np.uint64), np.empty(0, np.uint64))
        self.best = [empty for _ in range(len(queries))]

    def add(self, matrix: np.ndarray, row_ids: np.ndarray, addresses: np.ndarray) -> None:
        """Merge a batch of vectors (rows of ``matrix``) with their row ids and addresses."""
        if not len(matrix):
            return
        # queries a product at a time: its (queries, rows) distances stay within DISTANCE_CELLS
        step = max(1, DISTANCE_CELLS // len(matrix))
        for first in range(0, len(self.queries), step):
            self._add_queries(first, self.queries[first:first + step], matrix, row_ids, addresses)

    def _add_queries(self, first: int, queries: np.ndarray, matrix: np.ndarray, row_ids: np.ndarray,
                     addresses: np.ndarray) -> None:
        approx, margins = approximate(self.metric, queries, matrix)
        k = self.k
        for j, query in enumerate(queries):
            i = first + j
            distances = approx[j]
            if self.lower > -np.inf or self.upper < np.inf:  # out of range (with room for rounding): last
                outside = (distances < self.lower - margins[j]) | (distances >= self.upper + margins[j])
                distances = np.where(outside, np.inf, distances)
            if len(distances) > k:
                # every row that may be among the k best once measured exactly (ties included)
                kth = np.partition(distances, k - 1)[k - 1]  # NaNs sort last
                chosen = np.flatnonzero(distances <= kth + margins[j])
            else:
                chosen = np.arange(len(distances))
            measured = exact(self.metric, query, matrix[chosen]) if self.metric != "hamming" else distances[chosen]
            keep = ~np.isnan(measured) & (measured >= self.lower) & (measured < self.upper)
            chosen, measured = chosen[keep], measured[keep]
            self.merge(i, Best(measured, row_ids[chosen], addresses[chosen]))

    def merge(self, i: int, other: Best) -> None:
        """Merge rows already measured into query ``i``'s best."""
        best = self.best[i]
        pool_d = np.concatenate([best.distances, other.distances])
        pool_ids = np.concatenate([best.row_ids, other.row_ids])
        pool_addr = np.concatenate([best.addresses, other.addresses])
        order = np.lexsort((pool_ids, pool_d))[:self.k]
        self.best[i] = Best(pool_d[order], pool_ids[order], pool_addr[order])


__all__ = ["METRICS", "Best", "TopK", "approximate", "exact", "vector_matrix"]
