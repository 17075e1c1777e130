"""The ``nearest`` step of a scan (a :class:`~lance_format.dataset.scan.plan.SearchStep`):
k-nearest-neighbour search, exact (flat) or through a pylance vector index, with pylance's
parameters, results and error texts.

How it runs (:meth:`VectorSearch.run`):

1. the candidate scan (:attr:`VectorSearch.candidates`, a plan of its own) reads the vector
   column with ``_rowid`` and ``_rowaddr`` of the live rows (passing the filter first when
   ``prefilter=True``), batch by batch; each batch's distances to every query go into a running
   top-k (:class:`~lance_format.dataset.scan.knn.TopK`): memory is a batch plus k rows;
2. the k rows of each query are taken by address with the outer plan's columns; with
   ``prefilter=False`` the filter runs on them now (so fewer than k rows may come back, as in
   pylance); ``_distance`` (float32) and, for a batch of queries, ``query_index`` (int32) are
   added; rows come ordered by ``(query, _distance, _rowid)``;
3. the outer executor applies offset and limit, then projects.

``k`` defaults to the limit, else 10 (pylance's); ``distance_range=(lower, upper)`` keeps
distances in ``[lower, upper)`` before the top k. With ``use_index`` (the default) a pylance-built
vector index of the column (IVF_FLAT, IVF_PQ, IVF_SQ, IVF_HNSW_SQ, IVF_HNSW_PQ; :mod:`.ivf`)
answers for the fragments it covers, each query probing its own partitions with pylance's
``nprobes`` / ``minimum_nprobes`` / ``maximum_nprobes`` / ``search_effort`` and ``refine_factor``;
the other fragments are searched flat and merged (the index's best rows then re-measured exactly,
as pylance does). Without a metric the index's own metric is used; an index of another metric,
or of a kind not read here, leaves the search flat (exact). ``prefilter=True`` restricts the
index's rows to those passing the filter (a scan of the filter's columns over the indexed
fragments); deleted rows never count. ``ef`` is the beam width of the HNSW graph walk (pylance's
default ``k + k // 2``). ``fast_search`` searches, as pylance's, only the fragments a vector
index of the column covers (none without an index).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lance_format.dataset.fragment import ROW_ADDRESS
from lance_format.dataset.scan.ivf import AnnParams, row_filter_for
from lance_format.dataset.scan.knn import METRICS, TopK, exact, vector_matrix
from lance_format.errors import ArgumentTypeError, InvalidInputError, LanceError, UnsupportedFeatureError

if TYPE_CHECKING:
    from lance_format.dataset.scan.executor import ScanExecutor
    from lance_format.dataset.scan.ivf import AnnSearch
    from lance_format.dataset.scan.plan import ScanPlan
    from lance_format.dataset.scan.search_filter import SearchFilter
    from lance_format.schema import LanceSchema

DISTANCE = "_distance"
QUERY_INDEX = "query_index"
NEAREST_KEYS = {"column", "q", "k", "metric", "distance_type", "nprobes", "minimum_nprobes", "maximum_nprobes",
                "refine_factor", "use_index", "ef", "query_parallelism", "approx_mode", "search_effort",
                "distance_range", "fast_search"}
_FLOATS = {pa.float16(): np.float16, pa.float32(): np.float32, pa.float64(): np.float64}
_TYPE_NAMES = {pa.float16(): "Float16", pa.float32(): "Float32", pa.float64(): "Float64", pa.uint8(): "UInt8"}


@dataclass(frozen=True, eq=False)
class VectorSearch:
    """A planned flat k-NN search (see the module docstring)."""

    column: str
    queries: np.ndarray  # (queries, dim), in the column's element type (uint8 for hamming)
    batch: bool  # a batch of queries (adds ``query_index``)
    k: int
    metric: str
    prefilter: bool
    distance_range: tuple[float | None, float | None] = (None, None)  # [lower, upper): distances kept
    params: AnnParams = AnnParams()
    use_index: bool = True
    metric_given: bool = True  # False: an index's own metric is used (as pylance)
    ann: AnnSearch | None = None  # the index search for the fragments it covers (candidates: the others)
    ann_fragments: tuple[int, ...] = ()  # the scanned fragments the index answers for
    mask: ScanPlan | None = None  # the prefilter's passing rows (_rowaddr) of ``ann_fragments``
    candidates: ScanPlan | None = None  # reads the vector column, _rowid and _rowaddr (and the prefilter)
    search_filter: SearchFilter | None = None  # a full-text query's rows restrict the search (filter=MatchQuery)

    def describe(self) -> str:
        queries = f"queries={len(self.queries)}, " if self.batch else ""
        return (f"KNNVectorDistance: {queries}k={self.k}, metric={self.metric}, column={self.column}, "
                "exact flat search")

    def explain_lines(self) -> list[str]:
        """pylance's steps between the output and the read of the vectors."""
        lines = [] if self.batch else [f"FilterExec: {DISTANCE} IS NOT NULL",
                                       f"SortExec: TopK(fetch={self.k}), expr=[{DISTANCE} ASC NULLS LAST, "
                                       "_rowid ASC NULLS LAST]"]
        if self.ann is not None:
            lines += self.ann.explain_lines(self.k)
            lines.append(f"(fragments {list(self.ann_fragments)} from the index; the others searched flat:)")
        lines.append(self.describe())
        if self.search_filter is not None:  # pylance: above the k-NN (postfilter) or below it
            line = self.search_filter.explain_line(self.prefilter)
            lines.insert(len(lines) if self.prefilter else 0, line)
        return lines

    def run(self, executor: ScanExecutor) -> Iterator[pa.RecordBatch]:
        """The top-k rows of each query with the outer plan's read columns, ``_distance`` and
        (a batch) ``query_index``, the postfilter applied; ordered by query, distance, row id."""
        from lance_format.dataset.scan.executor import ScanExecutor  # the executor runs this step
        from lance_format.dataset.scan.search_filter import contains
        from lance_format.dataset.sql.filter import matching_rows

        plan = executor.plan
        assert self.candidates is not None  # planned by plan_scan
        matched = None  # a full-text search filter's rows (sorted addresses)
        if self.search_filter is not None:
            if not self.prefilter:
                self.search_filter.check_post_filter(executor.dataset.uri)
            matched = (self.search_filter.candidate_rows(executor, self.candidates) if self.prefilter
                       else self.search_filter.rows(executor.dataset))
        top = TopK(self.metric, self.queries, self.k, self.distance_range)
        dim = self.queries.shape[1]
        inner = ScanExecutor(executor.dataset, self.candidates, executor.counts)
        for batch in inner.rows():
            matrix, rows = vector_matrix(batch.column(self.column), dim)
            ids = np.asarray(batch.column("_rowid").to_numpy(zero_copy_only=False))[rows]
            addresses = np.asarray(batch.column(ROW_ADDRESS).to_numpy(zero_copy_only=False))[rows]
            if matched is not None and self.prefilter:  # only the query's rows are candidates
                keep = contains(matched, addresses.astype(np.uint64))
                matrix, ids, addresses = matrix[keep], ids[keep], addresses[keep]
            top.add(matrix, ids.astype(np.uint64), addresses.astype(np.uint64))
        if self.ann is not None:
            self._probe(executor, top)
        distances = np.concatenate([b.distances for b in top.best])
        addresses = np.concatenate([b.addresses for b in top.best])
        query_index = np.repeat(np.arange(len(top.best), dtype=np.int32), [len(b.distances) for b in top.best])
        if matched is not None and not self.prefilter:  # the k nearest rows the query matches
            keep = contains(matched, addresses)
            distances, addresses, query_index = distances[keep], addresses[keep], query_index[keep]
        if not len(addresses):
            return
        taken = take_by_address(executor, addresses)
        taken = taken.append_column(pa.field(DISTANCE, pa.float32()), pa.array(distances.astype(np.float32)))
        if self.batch:
            taken = taken.append_column(pa.field(QUERY_INDEX, pa.int32()), pa.array(query_index))
        if not self.prefilter and plan.filter is not None:
            taken = taken.take(matching_rows(taken, plan.filter))
        if taken.num_rows:
            yield taken

    def _probe(self, executor: ScanExecutor, top: TopK) -> None:
        """Merge into ``top`` each query's best rows of the index (live rows of the scanned,
        covered fragments; those passing the filter with a prefilter)."""
        from lance_format.dataset.scan.executor import ScanExecutor  # the executor runs this step

        assert self.ann is not None  # planned with ann_fragments
        scanned = {part.fragment.fragment_id: part.fragment for part in executor.plan.fragments}
        live = {fid: (scanned[fid].live_offsets() if scanned[fid].deletion_file() else None)
                for fid in self.ann_fragments}
        allowed = None
        if self.mask is not None:  # the prefilter: offsets of the passing rows, per fragment
            inner = ScanExecutor(executor.dataset, self.mask, executor.counts)
            found = [np.asarray(b.column(ROW_ADDRESS).to_numpy(zero_copy_only=False), dtype=np.uint64)
                     for b in inner.rows()]
            passing = np.sort(np.concatenate(found)) if found else np.zeros(0, np.uint64)
            owners = passing >> np.uint64(32)
            allowed = {fid: passing[owners == np.uint64(fid)] & np.uint64(0xFFFFFFFF) for fid in self.ann_fragments}
        vectors = executor.dataset.lance_schema.project([self.column])
        rerank = self.candidates is not None and bool(self.candidates.fragments)  # unindexed fragments searched too
        row_filter = row_filter_for(executor.dataset, self.ann.index, self.ann_fragments, allowed, live)
        for i, query in enumerate(self.queries):
            refine = ((lambda addresses, q=query: self._exact(scanned, vectors, q, addresses))
                      if self.params.refine_factor or rerank else None)
            top.merge(i, self.ann.search(query, self.k, row_filter, self.distance_range, refine))

    def _exact(self, fragments: Mapping[int, Any], vectors: LanceSchema, query: np.ndarray, addresses: np.ndarray,
               ) -> np.ndarray:
        """Exact distances of the vectors at ``addresses`` (read from the table) to ``query``."""
        distances = np.full(len(addresses), np.nan)
        if not len(addresses):
            return distances
        owners = addresses >> np.uint64(32)
        dim = self.queries.shape[1]
        for fid in np.unique(owners):
            at = np.flatnonzero(owners == fid)
            fragment = fragments[int(fid)]
            batch = fragment.take_physical(vectors, [],
                                           addresses[at] & np.uint64(0xFFFFFFFF))
            matrix, rows = vector_matrix(batch.column(0), dim)
            distances[at[rows]] = exact(self.metric, query, matrix.astype(self.queries.dtype, copy=False))
        return distances



def take_by_address(executor: ScanExecutor, addresses: np.ndarray) -> pa.RecordBatch:
    """The plan's read columns of the rows at ``addresses``, in that order (a search step's
    ranked rows)."""
    plan = executor.plan
    if not plan.read.names:  # only the search's columns: rows with no others (dropped by projection)
        return pa.record_batch([pa.nulls(len(addresses))], names=["__row"])
    fragments = {part.fragment.fragment_id: part.fragment for part in plan.fragments}
    unique, inverse = np.unique(addresses, return_inverse=True)
    ids = unique >> np.uint64(32)
    pieces = []
    for fragment_id in np.unique(ids):
        offsets = unique[ids == fragment_id] & np.uint64(0xFFFFFFFF)
        pieces.append(fragments[int(fragment_id)].take_physical(plan.read.schema, list(plan.read.system), offsets))
    table = pa.Table.from_batches(pieces).combine_chunks()  # fragments ascend, as ``unique`` does
    return table.take(pa.array(inverse)).to_batches()[0] if table.num_rows else pieces[0]


def coerce_query_vector(query: Any) -> tuple[pa.Array, int]:
    """pylance's ``_coerce_query_vector``: (the query as a float array, or a list array of float32
    vectors for a batch; the dimension).

    Raises
    ------
    ArgumentTypeError
        ``query`` is not list-like or not numeric (a ``TypeError``, as in pylance).
    InvalidInputError
        A batch's vectors differ in length.
    """
    if isinstance(query, pa.ChunkedArray):
        query = query.combine_chunks()
    first = query[0] if hasattr(query, "__getitem__") and not isinstance(query, (str, bytes)) and len(query) else None
    if isinstance(first, (list, tuple, np.ndarray, pa.Array)):  # a batch of query vectors
        dim = len(first)
        vectors = []
        for vector in query:
            if len(vector) != dim:
                raise InvalidInputError(f"All query vectors must have the same length, but got {dim} and "
                                        f"{len(vector)}")
            vectors.append(coerce_query_vector(vector)[0])
        return pa.array(vectors, type=pa.list_(pa.float32())), dim
    if isinstance(query, pa.Scalar):
        query = query.value if isinstance(query, pa.ExtensionScalar) else query
        query = query.values if isinstance(query.type, pa.FixedSizeListType) else query
    elif isinstance(query, (list, tuple, np.ndarray)):
        try:
            query = pa.array(np.asarray(query).astype(np.float64), type=pa.float32(), from_pandas=True)
        except (TypeError, ValueError) as error:
            raise ArgumentTypeError(f"query vector must be list-like or pa.FloatingPointArray but received "
                                    f"{np.asarray(query).dtype}") from error
    elif not isinstance(query, pa.Array):
        try:
            query = pa.array(query)
        except (TypeError, ValueError, pa.ArrowException) as error:
            raise ArgumentTypeError(f"Query vectors should be an array of floats, got {type(query)} which we "
                                    "cannot coerce to a float array") from error
    if not isinstance(query, pa.FloatingPointArray):
        if not pa.types.is_integer(query.type):
            raise ArgumentTypeError(f"query vector must be list-like or pa.FloatingPointArray but received "
                                    f"{query.type}")
        query = query.cast(pa.float32())
    return query, len(query)


_coerce_query_vector = coerce_query_vector  # pylance's name (lance.dataset._coerce_query_vector)


def _query_matrix(q: Any, table: str) -> tuple[np.ndarray, bool]:
    """(the query vectors as a (queries, dim) float32 matrix, whether ``q`` was a batch)."""
    try:
        query, dim = coerce_query_vector(q)
    except LanceError as error:
        raise error.with_context(table=table)
    if isinstance(query, pa.ListArray):
        values = query.flatten().to_numpy(zero_copy_only=False)
        return np.asarray(values, dtype=np.float32).reshape(len(query), dim), True
    return np.asarray(query.to_numpy(zero_copy_only=False), dtype=np.float32)[None, :], False


def _check_positive(name: str, value: Any, minimum: int, message: str, table: str) -> None:
    if value is not None and int(value) < minimum:
        raise InvalidInputError(message.format(value), table=table)


def _ann_params(nearest: Mapping[str, Any]) -> AnnParams:
    """pylance's probing parameters: ``nprobes`` fixes the partitions probed (minimum = maximum);
    else ``minimum_nprobes`` (default 1) to ``maximum_nprobes`` (default all) with the
    ``search_effort`` budget."""
    def number(key: str) -> int | None:
        value = nearest.get(key)
        return int(value) if value is not None else None

    effort = nearest.get("search_effort")
    if effort is not None and not 0 <= float(effort) <= 1:
        raise InvalidInputError(f"search_effort must be a finite value in [0, 1], got {effort}")
    return AnnParams(minimum_nprobes=number("minimum_nprobes") or 1, maximum_nprobes=number("maximum_nprobes") or None,
                     start_nprobes=number("nprobes") or None, search_effort=None if effort is None else float(effort),
                     refine_factor=number("refine_factor"), ef=number("ef"))


def vector_search(nearest: Mapping[str, Any], schema: LanceSchema, *, limit: int | None, prefilter: bool,
                  table: str) -> VectorSearch:
    """A :class:`VectorSearch` for pylance's ``nearest`` dict, checked as pylance checks it (its
    candidate plan is set by ``plan_scan``)."""
    if not isinstance(nearest, Mapping):
        raise UnsupportedFeatureError(f"nearest={type(nearest).__name__} is not supported; give pylance's dict",
                                      table=table)
    unknown = sorted(set(nearest) - NEAREST_KEYS)
    if unknown:
        raise ArgumentTypeError(f"nearest() got an unexpected keyword argument {unknown[0]!r}", table=table)
    column = nearest.get("column")
    if "q" not in nearest or column is None:
        raise ArgumentTypeError("nearest needs a 'column' and a query vector 'q'", table=table)
    queries, batch = _query_matrix(nearest["q"], table)
    field = next((f for f in schema.fields if f.name.lower() == str(column).lower()), None)
    if field is None:
        raise InvalidInputError(f"Embedding column {column} is not in the dataset", table=table, column=column)
    arrow_type = field.to_arrow().type
    storage = arrow_type.storage_type if isinstance(arrow_type, pa.ExtensionType) else arrow_type
    if pa.types.is_list(storage) and pa.types.is_fixed_size_list(storage.value_type):
        raise UnsupportedFeatureError(f"multivector column {column} cannot be searched by this engine yet",
                                      table=table, column=column)
    if not pa.types.is_fixed_size_list(storage):
        raise ArgumentTypeError(f"Query column {column} must be a vector. Got {arrow_type}.", table=table,
                                column=column)
    if queries.shape[1] != storage.list_size:
        raise InvalidInputError(f"Query vector size {queries.shape[1]} does not match index column size "
                                f"{storage.list_size}", table=table, column=column)
    k = nearest.get("k")
    _check_positive("k", k, 1, "Nearest-K must be > 0 but got {}", table)
    if nearest.get("search_effort") is None:
        _check_positive("nprobes", nearest.get("nprobes"), 1, "Nprobes must be > 0 but got {}", table)
    _check_positive("minimum_nprobes", nearest.get("minimum_nprobes"), 0, "Minimum nprobes must be >= 0 but got {}",
                    table)
    _check_positive("maximum_nprobes", nearest.get("maximum_nprobes"), 0, "Maximum nprobes must be >= 0 but got {}",
                    table)
    low, high = nearest.get("minimum_nprobes"), nearest.get("maximum_nprobes")
    if low is not None and high is not None and low > high:
        raise InvalidInputError("minimum_nprobes must be <= maximum_nprobes", table=table)
    _check_positive("refine_factor", nearest.get("refine_factor"), 1, "Refine factor must be 1 or more got {}", table)
    _check_positive("ef", nearest.get("ef"), 1, "ef must be > 0 but got {}", table)
    distance_range = nearest.get("distance_range")
    if distance_range is not None and len(distance_range) != 2:
        raise InvalidInputError("distance_range must be a tuple of (lower_bound, upper_bound)", table=table)
    element = storage.value_type
    name = nearest.get("metric") or nearest.get("distance_type")
    metric = METRICS.get(str(name).lower()) if name is not None else ("hamming" if element == pa.uint8() else "l2")
    if metric is None:
        raise InvalidInputError(f"Invalid argument error: Metric type '{name}' is not supported", table=table)
    if element not in _FLOATS and element != pa.uint8():  # bfloat16 too: pylance 14 cannot search it
        raise InvalidInputError(f"vector element is not expected type (Float16/Float32/Float64 or UInt8): "
                                f"{element} in column {column}", table=table, column=column)
    if (metric == "hamming") != (element == pa.uint8()):
        raise InvalidInputError(f"Invalid user input: Distance type {metric} does not support "
                                f"{_TYPE_NAMES.get(element, str(element))} vectors", table=table, column=column)
    queries = queries.astype(np.uint8) if metric == "hamming" else queries.astype(_FLOATS[element])
    if element == pa.float16():
        queries = queries.astype(np.float32)  # float16 vectors are measured in float32
    return VectorSearch(column=field.name, queries=queries, batch=batch,
                        k=int(k) if k is not None else (limit if limit else 10), metric=metric,
                        prefilter=prefilter, params=_ann_params(nearest), metric_given=name is not None,
                        use_index=nearest.get("use_index", True) is not False, distance_range=tuple(distance_range) if distance_range else (None, None))


__all__ = ["DISTANCE", "QUERY_INDEX", "VectorSearch", "coerce_query_vector", "take_by_address", "vector_search"]
