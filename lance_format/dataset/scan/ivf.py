"""Answering ``nearest`` from a pylance vector index (IVF_FLAT, IVF_PQ, IVF_SQ, IVF_HNSW_SQ,
IVF_HNSW_PQ; segments read by :mod:`lance_format.index.vector.ivf_reader`).

Per query (:meth:`AnnSearch.search`):

1. partitions are ranked by the query's distance to their centroids (l2; cosine: l2 of the
   normalized query, whose partitions were trained on normalized vectors; dot: dot distance;
   hamming: differing bits);
2. the first ``start`` partitions are measured: ``nprobes`` when given (pylance then probes
   exactly that many: ``minimum_nprobes = maximum_nprobes = nprobes``), else pylance's
   ``search_effort`` budget of rows (default 0.5: geometrically between the rows of the
   ``minimum_nprobes`` first partitions, default 1, and every row, see :meth:`AnnParams.start`);
   while fewer rows than wanted were found (a prefilter or deletions), further partitions are
   measured, up to ``maximum_nprobes`` (default all);
3. a partition's rows are measured from their codes, vectorized (IVF_FLAT: exact distances of the
   stored vectors; PQ: an ADC lookup table per query and partition; SQ: byte codes), only rows
   that are live and pass the prefilter count; an HNSW partition's graph is walked instead
   (:mod:`lance_format.index.vector.hnsw_search`, beam width ``ef``), as pylance does;
4. the best ``k`` (``k * refine_factor`` with a refine factor) are kept; a refine factor then
   re-ranks them by exact distances of the vectors read from the table. So does a search that
   also covers unindexed fragments (pylance re-measures the union of the index's best ``k`` and
   the flat search's exactly), so the index's approximate distances only come back when the
   index answers alone (every scanned fragment indexed, or ``fast_search``).

The rows of fragments the index does not cover are searched flat by the caller and merged (by
distance, then row id). With stable row ids the index holds row ids, mapped to addresses here.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from pyroaring import BitMap

from lance_format.dataset.scan.knn import Best, exact
from lance_format.errors import LanceError
from lance_format.index.catalog import row_id_lookup
from lance_format.index.vector.hnsw_search import walk
from lance_format.index.vector.ivf_reader import VectorIndexSegment, cached_segment

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset

_HIGH = np.uint64(32)
_NO_ADDRESS = np.iinfo(np.uint64).max
WALK_PRECOMPUTED_ROWS = 200_000  # HNSW partitions up to this size are measured whole, then walked
DEFAULT_SEARCH_EFFORT = 0.5  # pylance 14's default: between the minimum and every partition
_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).sum(axis=1).astype(np.int64)


@dataclass(frozen=True, eq=False)
class VectorIndex:
    """A column's vector index: its segments (a delta index adds some) and covered fragments."""

    name: str
    uuids: tuple[str, ...]
    segments: tuple[VectorIndexSegment, ...]
    segment_fragments: tuple[frozenset[int], ...]

    @property
    def fragments(self) -> frozenset[int]:
        return frozenset().union(*self.segment_fragments)

    @property
    def index_type(self) -> str:
        return self.segments[0].index_type

    @property
    def metric(self) -> str:
        return self.segments[0].metric

    @property
    def num_partitions(self) -> int:
        return max(s.num_partitions for s in self.segments)


def _uuid(raw: bytes) -> str:
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def vector_index(dataset: LanceDataset, column: str, metric: str | None) -> VectorIndex | None:
    """The table's vector index on ``column`` for ``metric`` (None: any, pylance then searches
    with the index's metric); None: no index, another metric, or a kind this engine does not
    read (the search then stays flat, exact)."""
    section = dataset.manifest_file.index_section
    if section is None:
        return None
    field_id = dataset.lance_schema.field(column).id
    found: dict[str, list[tuple[str, VectorIndexSegment, frozenset[int]]]] = {}
    for entry in section.indices:
        if list(entry.fields) != [field_id] or not entry.index_details.type_url.endswith("VectorIndexDetails"):
            continue
        uuid = _uuid(entry.uuid.uuid)
        try:
            segment = cached_segment(posixpath.join(dataset.uri, "_indices", uuid))
        except (LanceError, OSError, KeyError, ValueError):
            return None  # a kind or layout not read here: flat search (exact)
        covered = (frozenset(BitMap.deserialize(bytes(entry.fragment_bitmap))) if entry.fragment_bitmap
                   else frozenset(f.fragment_id for f in dataset.get_fragments()))
        found.setdefault(entry.name, []).append((uuid, segment, covered))
    for name, parts in found.items():
        if metric is None or all(seg.metric == metric for _, seg, _ in parts):
            return VectorIndex(name, tuple(p[0] for p in parts), tuple(p[1] for p in parts),
                               tuple(p[2] for p in parts))
    return None


@dataclass(frozen=True)
class AnnParams:
    """pylance's probing and refinement parameters of one search."""

    minimum_nprobes: int = 1
    maximum_nprobes: int | None = None
    start_nprobes: int | None = None  # an explicit ``nprobes``
    search_effort: float | None = None
    refine_factor: int | None = None
    ef: int | None = None

    def start(self, sizes: np.ndarray) -> int:
        """Partitions measured before any expansion, given the rows of each partition in probing
        order: an explicit ``nprobes``; else the fewest partitions holding the ``search_effort``
        budget of rows, ``first ** (1 - effort) * total ** effort`` (``first``: the rows of the
        ``minimum_nprobes`` first partitions; geometric between them and every row), within
        ``[minimum_nprobes, maximum_nprobes]`` (pylance's choices, found by measuring them)."""
        partitions = len(sizes)
        if self.start_nprobes is not None and self.search_effort is None:
            return max(1, min(self.start_nprobes, partitions))
        top = self.limit(partitions)
        low = max(1, min(self.minimum_nprobes, top))
        effort = DEFAULT_SEARCH_EFFORT if self.search_effort is None else float(self.search_effort)
        held = np.cumsum(sizes, dtype=np.float64)
        if not len(held) or held[-1] <= 0:
            return low
        first = max(float(held[low - 1]), 1.0)
        budget = first ** (1 - effort) * float(held[-1]) ** effort
        wanted = int(np.searchsorted(held, budget * (1 - 1e-9))) + 1
        return min(top, max(low, wanted))

    def limit(self, partitions: int) -> int:
        """Partitions measured at most."""
        if self.start_nprobes is not None and self.search_effort is None:
            return max(1, min(self.start_nprobes, partitions))
        return partitions if self.maximum_nprobes is None else max(1, min(partitions, self.maximum_nprobes))


def _centroid_order(segment: VectorIndexSegment, query: np.ndarray) -> np.ndarray:
    centroids = segment.centroids
    if segment.metric == "hamming":
        distances = _BITS[centroids.astype(np.uint8) ^ query.astype(np.uint8)].sum(axis=1)
    elif segment.metric == "dot":
        distances = 1 - centroids @ query.astype(np.float32)
    else:
        diff = centroids - query.astype(np.float32)
        distances = np.einsum("ij,ij->i", diff, diff)
    return np.argsort(distances, kind="stable")


def _normalized(metric: str, query: np.ndarray) -> np.ndarray:
    if metric != "cosine":
        return query
    q = query.astype(np.float32)
    norm = np.float32(np.sqrt(np.dot(q, q)))
    return q / norm if norm else q


def block_distances(segment: VectorIndexSegment, query: np.ndarray, partitions: np.ndarray,
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(row ids, distances as pylance reports them) of every row of ``partitions``, in their
    order, to a (normalized) query: vectorized per partition (PQ) or over all of them."""
    if segment.pq is not None:
        pq = segment.pq
        if segment.metric in ("l2", "cosine"):  # residuals were coded: one table per partition
            if pq.stored == np.float16:  # residuals of float16 values, in float16
                residuals = query.astype(np.float16)[None, :] - segment.centroids[partitions].astype(np.float16)
            else:
                residuals = query[None, :].astype(np.float32) - segment.centroids[partitions]
            tables = pq.tables(residuals)
        else:
            tables = np.broadcast_to(pq.tables(query[None, :]), (len(partitions), *pq.centroids.shape[:2]))
        pieces = [pq.distances(tables[i], segment.pq_codes(int(p))) for i, p in enumerate(partitions)]
        distances = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
        return segment.row_ids(partitions), distances
    ids, codes, _ = segment.partitions(partitions)
    if segment.sq is not None:
        return ids, segment.sq.distances(query, codes)
    return ids, exact(segment.metric, query, codes).astype(np.float32)


def _partition_distances(segment: VectorIndexSegment, query: np.ndarray, partition: int
                         ) -> Callable[[np.ndarray], np.ndarray]:
    """Local node ids of ``partition`` -> distances to the (normalized) query, from its storage."""
    if segment.pq is not None:
        pq = segment.pq
        if segment.metric in ("l2", "cosine"):
            if pq.stored == np.float16:
                residual = query.astype(np.float16)[None, :] - segment.centroids[partition].astype(np.float16)
            else:
                residual = query[None, :].astype(np.float32) - segment.centroids[partition]
            table = pq.tables(residual)[0]
        else:
            table = pq.tables(query[None, :])[0]
        positions = segment.pq_codes(partition)
        flat = table.reshape(-1)
        offset = np.float32(pq.num_sub_vectors - 1) if segment.metric == "dot" else np.float32(0)
        return lambda nodes: flat.take(positions[:, nodes]).sum(axis=0, dtype=np.float32) - offset
    _, codes = segment.partition(partition)
    if segment.sq is not None:
        sq = segment.sq
        return lambda nodes: sq.distances(query, codes[nodes])
    return lambda nodes: exact(segment.metric, query, codes[nodes]).astype(np.float32)


def hnsw_distances(segment: VectorIndexSegment, query: np.ndarray, partitions: np.ndarray, k: int,
                   ef: int | None, row_filter: RowFilter) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row ids, distances, addresses) of the best ``k`` rows each HNSW partition's graph walk
    finds (``ef``: pylance's default ``k + k // 2``), rows the filter rejects walked through
    but never returned."""
    graphs = segment.graphs()
    width = ef if ef is not None else k + k // 2
    pieces = []
    for p in partitions.tolist():
        size = int(segment.lengths[p])
        if not size:
            continue
        row_ids = segment.row_ids(np.asarray([p]))
        keep, addresses = row_filter(row_ids)
        measure = _partition_distances(segment, query, p)
        if size <= WALK_PRECOMPUTED_ROWS:
            # one vectorized pass over a modest partition costs less than the walk's many small
            # gathers from Python; the walk (and so the rows found) is the same
            every = measure(np.arange(size))
            measure = every.take
        nodes, distances = walk(graphs.partition(p), size, measure, k, width, keep)
        pieces.append((row_ids[nodes], distances, addresses[nodes]))
    if not pieces:
        return np.zeros(0, np.uint64), np.zeros(0, np.float32), np.zeros(0, np.uint64)
    return (np.concatenate([x[0] for x in pieces]), np.concatenate([x[1] for x in pieces]),
            np.concatenate([x[2] for x in pieces]))


RowFilter = Callable[[np.ndarray], tuple[np.ndarray | None, np.ndarray]]  # row ids -> (keep mask or None: all, addresses)


@dataclass(frozen=True, eq=False)
class AnnSearch:
    """One planned index search (the probing, the row filter and the refinement)."""

    index: VectorIndex
    params: AnnParams
    metric: str

    def search(self, query: np.ndarray, k: int, row_filter: RowFilter,
               distance_range: tuple[float | None, float | None],
               refine: Callable[[np.ndarray], np.ndarray] | None) -> Best:
        """The query's best rows from the index (approximate distances, or exact ones with a
        refine factor): at most ``k``. ``refine`` maps row addresses to exact distances: given,
        the best ``k * refine_factor`` (or ``k``) rows are re-ranked by them. (pylance measures the
        index's rows exactly whenever unindexed fragments are searched too: their union is
        re-ranked by exact distances.)"""
        wanted = k * self.params.refine_factor if self.params.refine_factor else k
        lower = -np.inf if distance_range[0] is None else float(distance_range[0])
        upper = np.inf if distance_range[1] is None else float(distance_range[1])
        pool: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        for segment in self.index.segments:
            q = _normalized(self.metric, query)
            order = _centroid_order(segment, q)
            start, limit = self.params.start(segment.lengths[order]), self.params.limit(len(order))
            found, rank = 0, 0
            while rank < limit and (rank < start or found < wanted):
                # the first ``start`` partitions at once, then one at a time while rows are missing
                block = order[rank:start] if rank < start else order[rank:rank + 1]
                rank += len(block)
                if not segment.lengths[block].any():
                    continue
                if segment.is_hnsw:
                    ids, distances, addresses = hnsw_distances(segment, q, block, wanted, self.params.ef, row_filter)
                else:
                    ids, distances = block_distances(segment, q, block)
                    keep, addresses = row_filter(ids)
                    if keep is not None:  # measured whole (vectorized), then the rows not searched dropped
                        ids, distances, addresses = ids[keep], distances[keep], addresses[keep]
                inside = ~np.isnan(distances) & (distances >= lower) & (distances < upper)
                found += int(inside.sum())
                pool.append((distances[inside], ids[inside], addresses[inside]))
        if not pool:
            return Best(np.empty(0), np.empty(0, np.uint64), np.empty(0, np.uint64))
        distances = np.concatenate([p[0] for p in pool]).astype(np.float64)
        ids = np.concatenate([p[1] for p in pool])
        addresses = np.concatenate([p[2] for p in pool])
        if len(distances) > wanted:  # the rows that may be among the best (ties included), then sorted
            chosen = np.flatnonzero(distances <= np.partition(distances, wanted - 1)[wanted - 1])
            distances, ids, addresses = distances[chosen], ids[chosen], addresses[chosen]
        order = np.lexsort((ids, distances))[:wanted]
        distances, ids, addresses = distances[order], ids[order], addresses[order]
        if refine is not None:
            distances = refine(addresses)
            keep = ~np.isnan(distances) & (distances >= lower) & (distances < upper)
            distances, ids, addresses = distances[keep], ids[keep], addresses[keep]
            order = np.lexsort((ids, distances))[:k]
            distances, ids, addresses = distances[order], ids[order], addresses[order]
        return Best(distances, ids, addresses)

    def explain_lines(self, k: int) -> list[str]:
        """pylance's ANN steps (``ANNSubIndex`` over ``ANNIvfPartition``)."""
        fetch = k * self.params.refine_factor if self.params.refine_factor else k
        metric = {"l2": "L2", "cosine": "Cosine", "dot": "Dot", "hamming": "Hamming"}[self.metric]
        low = self.params.start_nprobes if self.params.start_nprobes is not None else self.params.minimum_nprobes
        high = self.params.start_nprobes if self.params.start_nprobes is not None else self.params.maximum_nprobes
        deltas = len(self.index.segments)
        lines = []
        if self.params.refine_factor:
            lines += [f"KNNVectorDistance: metric={self.metric} (refine: exact distances of the vectors)",
                      f"SortExec: TopK(fetch={fetch}), expr=[_distance ASC NULLS LAST, _rowid ASC NULLS LAST]"]
        return lines + [
            f"ANNSubIndex: name={self.index.name}, k={fetch}, deltas={deltas}, metric={metric}, "
            f"type={self.index.index_type}",
            f"ANNIvfPartition: uuid={self.index.uuids[0]}, minimum_nprobes={low}, "
            f"maximum_nprobes={'None' if high is None else f'Some({high})'}, deltas={deltas}",
        ]


def row_filter_for(dataset: LanceDataset, index: VectorIndex, fragments: Sequence[int],
                   allowed: dict[int, np.ndarray] | None, live: dict[int, np.ndarray | None]) -> RowFilter:
    """Index row ids -> (which are searched, their addresses): rows of ``fragments`` (scanned and
    covered by the index), not deleted (``live``: a fragment's live offsets, None when it has
    no deletions), passing the prefilter (``allowed``: a fragment's passing offsets; None: no
    prefilter)."""
    searched = np.asarray(sorted(fragments), dtype=np.uint64)
    lookup = None
    if dataset.has_stable_row_ids:
        stamp = dataset.manifest.timestamp
        version_key = f"{dataset.manifest_path}@{stamp.seconds}.{stamp.nanos}"
        lookup = row_id_lookup(dataset.object_store, version_key,
                               [f.proto for f in dataset.get_fragments()])
    offsets_of = allowed if allowed is not None else live
    if lookup is None and allowed is None and all(v is None for v in live.values()) and index.fragments <= set(
            fragments):
        return lambda ids: (None, ids)  # every row of the index is live and searched

    def keep(ids: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
        addresses = lookup.address_of(ids) if lookup is not None else ids
        fragment_ids = addresses >> _HIGH
        mask = (addresses != _NO_ADDRESS) & np.isin(fragment_ids, searched)
        for fid in np.unique(fragment_ids[mask]):  # a few fragments a partition: one mask each
            offsets = offsets_of.get(int(fid))
            if offsets is None:
                continue
            mine = mask & (fragment_ids == fid)
            rows = addresses[mine] & np.uint64(0xFFFFFFFF)
            at = np.searchsorted(offsets, rows)
            hit = (at < len(offsets)) & (offsets[np.minimum(at, len(offsets) - 1)] == rows) if len(offsets) else (
                np.zeros(len(rows), dtype=bool))
            mask[mine] = hit
        return mask, addresses

    return keep


__all__ = ["AnnParams", "AnnSearch", "VectorIndex", "block_distances", "row_filter_for", "vector_index"]
