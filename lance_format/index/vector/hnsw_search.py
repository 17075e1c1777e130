"""Walking the HNSW graphs of an IVF_HNSW_* index (pylance 14.0.2's layout, see
:mod:`lance_format.index.vector.hnsw`) to answer one query in one partition.

As pylance searches them: from the partition's entry point a greedy descent through the upper
levels (each step moves to the nearest neighbour while it is nearer) down to level 1, then a
beam search of width ``ef`` on level 0 (default ``k + k // 2``, ``k`` counting the refine
factor). Nodes the row filter rejects (prefilter, deletions) are walked through but never
returned. Distances are those of the storage (PQ table, SQ codes, flat vectors), given by the
caller: per expanded node for its whole neighbour list at once (one vectorized gather per step),
or looked up in distances the caller measured for the whole partition in one pass (cheaper in
numpy for modest partitions; the walk is the same). The walk itself is a Python loop over
expanded nodes, bounded by ``ef`` and the neighbour counts.
"""

from __future__ import annotations

import heapq
import json
import posixpath
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lance_format.errors import CorruptFileError
from lance_format.file.api import LanceFileReader
from lance_format.proto import index_pb2

Distances = Callable[[np.ndarray], np.ndarray]  # local node ids -> float32 distances to the query


@dataclass(frozen=True, eq=False)
class PartitionGraph:
    """One partition's graph: per level the node ids (sorted) and their neighbour lists."""

    entry_point: int
    levels: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]  # (node ids, offsets, neighbours); level 0 first

    def neighbours(self, level: int, node: int) -> np.ndarray:
        ids, offsets, values = self.levels[level]
        row = node if level == 0 else int(np.searchsorted(ids, node))
        return values[offsets[row]:offsets[row + 1]]


@dataclass(frozen=True, eq=False)
class HnswGraphs:
    """Every partition's graph of one index segment (``index.idx``, read whole once)."""

    vector_ids: np.ndarray
    offsets: np.ndarray  # neighbour list bounds of every row of the file
    neighbours: np.ndarray
    row_starts: np.ndarray  # first row of each partition
    entries: tuple[dict, ...]

    def partition(self, partition: int) -> PartitionGraph:
        entry = self.entries[partition]
        base = int(self.row_starts[partition])
        bounds = [base + int(b) for b in entry["level_offsets"]]
        levels = []
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            if hi <= lo:
                break
            first, last = int(self.offsets[lo]), int(self.offsets[hi])
            levels.append((self.vector_ids[lo:hi], self.offsets[lo:hi + 1] - first, self.neighbours[first:last]))
        return PartitionGraph(int(entry.get("entry_point", 0)), tuple(levels))


def read_graphs(directory: str) -> HnswGraphs:
    """The graphs of the IVF_HNSW segment in ``directory``."""
    where = posixpath.join(directory, "index.idx")
    reader = LanceFileReader(where)
    raw = reader.metadata().schema.metadata or {}
    meta = {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
            for k, v in raw.items()}
    if "lance:hnsw" not in meta or "lance:ivf" not in meta:
        raise CorruptFileError(f"{where}: no lance:hnsw / lance:ivf metadata")
    entries = tuple(json.loads(e) if isinstance(e, str) else e for e in json.loads(meta["lance:hnsw"]))
    ivf = index_pb2.IVF()
    ivf.ParseFromString(bytes(reader.read_global_buffer(int(meta["lance:ivf"]))))
    table = reader.read_all(batch_size=1 << 16).to_table()
    neighbours = table.column("__neighbors").combine_chunks()
    offsets = np.asarray(neighbours.offsets.to_numpy(), dtype=np.int64)
    values = np.asarray(neighbours.values.to_numpy(zero_copy_only=False), dtype=np.int64)
    if len(offsets) and offsets[0]:
        values, offsets = values[offsets[0]:], offsets - offsets[0]
    if len(entries) != len(ivf.offsets):
        raise CorruptFileError(f"{where}: {len(entries)} graphs for {len(ivf.offsets)} partitions")
    return HnswGraphs(np.asarray(table.column("__vector_id").to_numpy(), dtype=np.int64), offsets, values,
                      np.asarray(ivf.offsets, dtype=np.int64), entries)


def walk(graph: PartitionGraph, size: int, distances: Distances, k: int, ef: int,
         allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(local node ids, distances) of the query's ``k`` nearest nodes found by the walk, nearest
    first; ``allowed``: a mask of the nodes that may be returned (None: all)."""
    if not graph.levels or size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    ef = max(ef, k)
    current = graph.entry_point
    current_d = float(distances(np.asarray([current]))[0])
    for level in range(len(graph.levels) - 1, 0, -1):  # greedy descent, level 0 left to the beam
        while True:
            near = graph.neighbours(level, current)
            if not len(near):
                break
            d = distances(near)
            best = int(np.argmin(d))
            if d[best] >= current_d:
                break
            current, current_d = int(near[best]), float(d[best])
    visited = np.zeros(size, dtype=bool)
    visited[current] = True
    candidates = [(current_d, current)]
    results: list[tuple[float, int]] = []  # max-heap of (-distance, node): the ef best allowed
    if allowed is None or allowed[current]:
        results.append((-current_d, current))
    ids0, offsets0, values0 = graph.levels[0]
    while candidates:
        d_c, c = heapq.heappop(candidates)
        if len(results) >= ef and d_c > -results[0][0]:
            break
        near = values0[offsets0[c]:offsets0[c + 1]]
        near = near[~visited[near]]
        if not len(near):
            continue
        visited[near] = True
        d = distances(near)
        worst = -results[0][0] if len(results) >= ef else np.inf
        close = d < worst if np.isfinite(worst) else np.ones(len(d), dtype=bool)
        for node, dist in zip(near[close].tolist(), d[close].tolist()):
            if len(results) >= ef and dist >= -results[0][0]:
                continue
            heapq.heappush(candidates, (dist, node))
            if allowed is None or allowed[node]:
                if len(results) >= ef:
                    heapq.heapreplace(results, (-dist, node))
                else:
                    heapq.heappush(results, (-dist, node))
    best_first = sorted((-nd, n) for nd, n in results)[:k]
    return (np.asarray([n for _, n in best_first], dtype=np.int64),
            np.asarray([d for d, _ in best_first], dtype=np.float32))


__all__ = ["HnswGraphs", "PartitionGraph", "read_graphs", "walk"]
