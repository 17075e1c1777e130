"""HNSW sub-indices of IVF_HNSW_SQ / IVF_HNSW_PQ partitions, in pylance 14.0.2's layout.

``index.idx`` of an IVF_HNSW index holds, partition after partition, one row per node and level:
``__vector_id`` (uint32, the node's position in the partition's rows of ``auxiliary.idx``),
``__neighbors`` (list<uint32>, ids of its neighbours on that level) and ``_distance``
(list<float>, their distances); levels one after the other, level 0 first (every node, in id
order), then the nodes promoted to each higher level (in id order). ``lance:hnsw`` holds per
partition a JSON text: ``entry_point`` (a node of the top level), ``params`` (``max_level`` 7,
``m`` 20, ``ef_construction`` 150, ``prefetch_distance`` 2) and ``level_offsets`` (the row where
each level starts within the partition, ``max_level + 1`` entries). The IVF message of
``index.idx`` gives each partition's row offset and count in that file.

The graph is built level by level from the exact ``2 x cap`` nearest nodes of each node on the
level (chunked BLAS distances; ``cap`` = ``2 m`` on level 0, ``m`` above), pruned by HNSW's
diversity heuristic and made undirected (reverse edges, nearest first, at most ``cap``): all
vectorized over the level's nodes, but quadratic in the partition size, so partitions are meant
to stay modest (tens of thousands of rows).
A node's level is drawn as pylance's are (``floor(-ln U / ln m)``, at most ``max_level - 1``).
Distances are measured on the quantized vectors, as pylance's are.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

M = 20
EF_CONSTRUCTION = 150
MAX_LEVEL = 7
PREFETCH_DISTANCE = 2
GRAPH_SCHEMA = pa.schema([pa.field("__vector_id", pa.uint32()), pa.field("__neighbors", pa.list_(pa.uint32())),
                          pa.field("_distance", pa.list_(pa.float32()))])
_CHUNK_ENTRIES = 1 << 22


@dataclass(frozen=True)
class Graph:
    """One partition's graph rows and its ``lance:hnsw`` entry."""

    rows: pa.RecordBatch
    metadata: str


def _distances(a: np.ndarray, b: np.ndarray, metric: str) -> np.ndarray:
    product = a @ b.T
    if metric == "dot":
        return 1.0 - product
    out = np.einsum("ij,ij->i", a, a)[:, None] - 2.0 * product + np.einsum("ij,ij->i", b, b)[None, :]
    return np.maximum(out, 0.0)


def _knn(x: np.ndarray, k: int, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``k`` nearest other rows (ids and distances, nearest first)."""
    n = len(x)
    ids = np.empty((n, k), dtype=np.uint32)
    dists = np.empty((n, k), dtype=np.float32)
    step = max(1, _CHUNK_ENTRIES // max(n, 1))
    for start in range(0, n, step):
        block = _distances(x[start:start + step], x, metric)
        block[np.arange(len(block)), np.arange(start, start + len(block))] = np.inf  # not itself
        near = np.argpartition(block, k - 1, axis=1)[:, :k] if k < n else np.argsort(block, axis=1)[:, :k]
        near_d = np.take_along_axis(block, near, axis=1)
        order = np.argsort(near_d, axis=1, kind="stable")
        ids[start:start + step] = np.take_along_axis(near, order, axis=1)
        dists[start:start + step] = np.take_along_axis(near_d, order, axis=1)
    return ids, dists


def _diverse(x: np.ndarray, near: np.ndarray, dist: np.ndarray, cap: int, metric: str) -> np.ndarray:
    """HNSW's neighbour heuristic, vectorized over the nodes (one step per candidate rank, nodes
    in chunks so the gathered neighbour vectors stay small): a candidate is kept when it is
    nearer the node than to every neighbour kept so far, so neighbours spread in all directions
    instead of crowding one side. A (nodes x k) mask."""
    step = max(64, (1 << 22) // max(cap * x.shape[1], 1))
    return np.concatenate([_diverse_chunk(x, near[s:s + step], dist[s:s + step], cap, metric)
                           for s in range(0, len(near), step)]) if len(near) else np.zeros(near.shape, bool)


def _diverse_chunk(x: np.ndarray, near: np.ndarray, dist: np.ndarray, cap: int, metric: str) -> np.ndarray:
    n, k = near.shape
    keep = np.zeros((n, k), dtype=bool)
    kept_ids = np.zeros((n, cap), dtype=np.int64)
    kept_count = np.zeros(n, dtype=np.int64)
    for r in range(k):
        cand = near[:, r].astype(np.int64)
        ok = kept_count < cap
        if r and kept_count.any():
            width = int(min(kept_count.max(), cap))
            kept = x[kept_ids[:, :width]]  # nodes x width x dim
            c = x[cand][:, None, :]
            if metric == "dot":
                between = 1.0 - np.einsum("nwd,nwd->nw", kept, np.broadcast_to(c, kept.shape))
            else:
                between = ((kept - c) ** 2).sum(axis=2)
            valid = np.arange(width)[None, :] < kept_count[:, None]
            closer = (between < dist[:, r][:, None]) & valid
            ok &= ~closer.any(axis=1)
        keep[:, r] = ok
        rows = np.flatnonzero(ok)
        kept_ids[rows, kept_count[rows]] = cand[rows]
        kept_count[rows] += 1
    return keep


def _undirected(near: np.ndarray, dist: np.ndarray, keep: np.ndarray, cap: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each node's chosen neighbours plus the nodes that chose it (reverse edges join clusters
    one-way edges leave apart), nearest first, at most ``cap``: offsets, ids, distances."""
    n, k = near.shape
    src = np.repeat(np.arange(n, dtype=np.int64), k)[keep.ravel()]
    dst = near.ravel().astype(np.int64)[keep.ravel()]
    chosen_d = dist.ravel()[keep.ravel()]
    both_src = np.concatenate([src, dst])
    both_dst = np.concatenate([dst, src])
    both_d = np.concatenate([chosen_d, chosen_d])
    _, first = np.unique(both_src * n + both_dst, return_index=True)
    both_src, both_dst, both_d = both_src[first], both_dst[first], both_d[first]
    order = np.lexsort((both_d, both_src))
    both_src, both_dst, both_d = both_src[order], both_dst[order], both_d[order]
    counts = np.bincount(both_src, minlength=n)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    keep = (np.arange(len(both_src)) - starts[both_src]) < cap
    kept = np.minimum(counts, cap)
    offsets = np.concatenate([[0], np.cumsum(kept)]).astype(np.int32)
    return offsets, both_dst[keep], both_d[keep].astype(np.float32)


def _metadata(entry: int, level_offsets: list[int]) -> str:
    return json.dumps({"entry_point": entry, "params": {"max_level": MAX_LEVEL, "m": M,
                                                        "ef_construction": EF_CONSTRUCTION,
                                                        "prefetch_distance": PREFETCH_DISTANCE},
                       "level_offsets": level_offsets}, separators=(",", ":"))


def build(x: np.ndarray, metric: str, rng: np.random.Generator) -> Graph:
    """The graph of one partition's (quantized, float32) vectors ``x``."""
    n = len(x)
    if n == 0:
        empty = pa.record_batch([pa.array([], pa.uint32()), pa.array([], pa.list_(pa.uint32())),
                                 pa.array([], pa.list_(pa.float32()))], schema=GRAPH_SCHEMA)
        return Graph(empty, _metadata(0, [0] * (MAX_LEVEL + 1)))
    levels = np.minimum(np.floor(-np.log(1.0 - rng.random(n)) / np.log(M)), MAX_LEVEL - 1).astype(np.int64)
    top = int(levels.max())
    entry = int(np.flatnonzero(levels == top)[0])
    batches, offsets, row = [], [0], 0
    metric_for_graph = "dot" if metric == "dot" else "l2"
    for level in range(MAX_LEVEL):
        nodes = np.flatnonzero(levels >= level).astype(np.uint32)
        if level > top or not len(nodes):
            offsets.append(row)
            continue
        cap = 2 * M if level == 0 else M
        k = min(2 * cap, len(nodes) - 1)
        if k > 0:
            level_x = np.ascontiguousarray(x[nodes])
            near, dist = _knn(level_x, k, metric_for_graph)
            keep = _diverse(level_x, near, dist, cap, metric_for_graph)
            offsets_, local, distances = _undirected(near, dist, keep, cap)
        else:
            offsets_, local, distances = np.zeros(len(nodes) + 1, np.int32), np.zeros(0, np.int64), np.zeros(0, np.float32)
        neighbors = pa.ListArray.from_arrays(pa.array(offsets_), pa.array(nodes[local], pa.uint32()))
        neighbor_d = pa.ListArray.from_arrays(pa.array(offsets_), pa.array(distances, pa.float32()))
        batches.append(pa.record_batch([pa.array(nodes), neighbors, neighbor_d], schema=GRAPH_SCHEMA))
        row += len(nodes)
        offsets.append(row)
    rows = pa.Table.from_batches(batches, schema=GRAPH_SCHEMA).combine_chunks().to_batches()[0]
    return Graph(rows, _metadata(entry, offsets))


__all__ = ["EF_CONSTRUCTION", "GRAPH_SCHEMA", "Graph", "M", "MAX_LEVEL", "PREFETCH_DISTANCE", "build"]
