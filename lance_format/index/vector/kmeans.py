"""k-means training and nearest-centroid assignment, vectorized in numpy.

Distances go through one BLAS matmul per chunk of rows (``|x|^2 - 2 x.c + |c|^2`` for l2,
``-x.c`` for dot), so the memory of an assignment is bounded by ``chunk x k`` floats, whatever
the number of rows. Training follows pylance's defaults: random initial centroids drawn from the
sample (k-means++ seeding up to 1024 clusters), Lloyd iterations until ``max_iters`` or until the mean distance changes by less than
``tolerance`` (1e-4, relative). ``dot`` trains spherical k-means (centroids normalized after each
update, rows assigned by the largest inner product), as pylance's dot indices do; cosine callers
normalize the rows first and train l2.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# rows x centroids float32 entries one distance chunk may hold (16 M floats: 64 MiB)
_CHUNK_ENTRIES = 1 << 24
TOLERANCE = 1e-4


@dataclass(frozen=True)
class KMeans:
    """Trained centroids (k x dim, float32) and the final loss (sum of the rows' distances)."""

    centroids: np.ndarray
    loss: float


def _chunk_rows(k: int) -> int:
    return max(1024, _CHUNK_ENTRIES // max(k, 1))


def _chunk_distances(x: np.ndarray, centroids: np.ndarray, c_sq: np.ndarray | None, metric: str) -> np.ndarray:
    """The (rows x k) distances of one chunk: squared l2, or ``-x.c`` for dot."""
    product = x @ centroids.T
    if metric == "dot":
        return np.negative(product, out=product)
    product *= -2.0
    product += c_sq
    product += np.einsum("ij,ij->i", x, x)[:, None]
    return np.maximum(product, 0.0, out=product)


def assign(x: np.ndarray, centroids: np.ndarray, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Each row's nearest centroid (uint32) and its distance (float32), ``metric`` l2 or dot."""
    centroids = np.ascontiguousarray(centroids, dtype=np.float32)
    c_sq = np.einsum("ij,ij->i", centroids, centroids) if metric != "dot" else None
    ids = np.empty(len(x), dtype=np.uint32)
    dists = np.empty(len(x), dtype=np.float32)
    step = _chunk_rows(len(centroids))
    for start in range(0, len(x), step):
        block = _chunk_distances(np.asarray(x[start:start + step], dtype=np.float32), centroids, c_sq, metric)
        best = block.argmin(axis=1)
        ids[start:start + step] = best
        dists[start:start + step] = block[np.arange(len(block)), best]
    return ids, dists


def _means(x: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-cluster sums / counts without a Python loop: sort by cluster, ``add.reduceat``."""
    order = np.argsort(ids, kind="stable")
    counts = np.bincount(ids, minlength=k)
    sums = np.zeros((k, x.shape[1]), dtype=np.float64)
    present = np.flatnonzero(counts)
    if len(present):
        starts = np.concatenate([[0], np.cumsum(counts[present])[:-1]])
        sums[present] = np.add.reduceat(x[order].astype(np.float64), starts, axis=0)
    return sums, counts


def _normalize(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms == 0, 1, norms)


def seed_centroids(x: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k-means++ seeding on at most ``16 k`` rows: each next centroid drawn with probability
    proportional to the squared distance to the nearest chosen one (one vectorized pass per
    centroid), which avoids the split and merged clusters random seeding leaves behind."""
    rows = x if len(x) <= 16 * k else x[rng.choice(len(x), size=16 * k, replace=False)]
    chosen = np.empty((k, x.shape[1]), dtype=np.float32)
    chosen[0] = rows[rng.integers(len(rows))]
    nearest = ((rows - chosen[0]) ** 2).sum(axis=1)
    for i in range(1, k):
        total = float(nearest.sum())
        pick = rng.choice(len(rows), p=nearest / total) if total > 0 else rng.integers(len(rows))
        chosen[i] = rows[pick]
        np.minimum(nearest, ((rows - chosen[i]) ** 2).sum(axis=1), out=nearest)
    return chosen


# above this many clusters seeding is random (k-means++ costs one pass per centroid)
PLUS_PLUS_MAX_K = 1024


def train(sample: np.ndarray, k: int, metric: str = "l2", *, max_iters: int = 50, seed: int | None = None,
          init: np.ndarray | None = None, tolerance: float = TOLERANCE) -> KMeans:
    """Train ``k`` centroids on ``sample`` (rows x dim). ``init`` starts from given centroids."""
    x = np.ascontiguousarray(sample, dtype=np.float32)
    if len(x) == 0:
        raise ValueError("k-means needs at least one row")
    rng = np.random.default_rng(seed)
    k = int(k)
    if init is not None:
        centroids = np.asarray(init, dtype=np.float32).copy()
    elif len(x) >= k and k <= PLUS_PLUS_MAX_K:
        centroids = seed_centroids(x, k, rng)
    elif len(x) >= k:
        centroids = x[rng.choice(len(x), size=k, replace=False)].copy()
    else:  # fewer rows than clusters: every row a centroid, the rest copies (they stay empty)
        centroids = x[rng.integers(0, len(x), size=k)].copy()
    if metric == "dot":
        centroids = _normalize(centroids).astype(np.float32)
    previous = np.inf
    loss = 0.0
    for _ in range(max(1, int(max_iters))):
        ids, dists = assign(x, centroids, metric)
        loss = float(dists.astype(np.float64).sum())
        sums, counts = _means(x, ids, k)
        empty = np.flatnonzero(counts == 0)
        updated = (sums / np.maximum(counts, 1)[:, None]).astype(np.float32)
        if len(empty):
            # an empty cluster restarts at the rows farthest from their centroids (splits a big one)
            far = np.argsort(-dists, kind="stable")[:len(empty)]
            updated[empty[:len(far)]] = x[far] + rng.normal(scale=1e-4, size=(len(far), x.shape[1]))
        centroids = _normalize(updated).astype(np.float32) if metric == "dot" else updated
        mean = loss / len(x)
        if np.isfinite(previous) and abs(previous - mean) <= tolerance * max(abs(previous), 1e-12):
            break
        previous = mean
    # the loss is the last assignment's (one pass fewer than measuring the final centroids again)
    return KMeans(np.ascontiguousarray(centroids, dtype=np.float32), loss)


__all__ = ["KMeans", "assign", "train"]
