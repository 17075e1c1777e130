"""A full-text query as the filter of a vector search (pylance's ``search_filter``).

pylance 14 accepts ``filter=MatchQuery(...)`` (any full-text query object) or
``filter={"expr_filter": <SQL or Expression>, "search_filter": <query>}`` on a ``nearest`` scan.
The rows the query matches (any score) restrict the k-NN search:

* ``prefilter=True``: only matching rows are candidates (with the expression filter too); pylance
  then searches them flat (exactly), not through a vector index, and so does this engine. As in
  pylance, a scan ``limit`` is pushed into that full-text search: only the ``limit + offset``
  best-scoring matching rows are candidates (equal scores: lowest row id first here; pylance's
  order of equal scores is not fixed);
* ``prefilter=False``: the k nearest rows are found first and those not matching are dropped
  (fewer than k may come back); only a :class:`MatchQuery` may post-filter (pylance's
  ``ValueError`` otherwise, raised when the scan runs).

With a ``full_text_query``, or with neither search, pylance refuses a search filter.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from lance_format.dataset.scan.fts_search import FullTextSearch, _Scorer, distinct, parse_query
from lance_format.errors import InvalidInputError, LanceError, UnsupportedFeatureError
from lance_format.index.scalar.fts_query import FullTextQuery, MatchQuery

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset
    from lance_format.dataset.scan.executor import ScanExecutor
    from lance_format.dataset.scan.plan import ScanPlan


def split_filter(filter: Any, table: str) -> tuple[Any, FullTextQuery | None]:
    """(the expression filter, the full-text search filter) of a scanner's ``filter`` argument:
    a query object is a search filter alone; a dict holds ``expr_filter`` and ``search_filter``.

    Raises
    ------
    InvalidInputError
        A dict with other keys, or whose ``search_filter`` is not a full-text query object.
    UnsupportedFeatureError
        A vector query as the search filter (pylance's ``VectorSearchQuery``).
    """
    if isinstance(filter, FullTextQuery):
        return None, filter
    if not isinstance(filter, Mapping):
        return filter, None
    unknown = sorted(set(filter) - {"expr_filter", "search_filter"})
    if unknown:
        raise InvalidInputError(f"a filter dict holds 'expr_filter' and 'search_filter', got {unknown}", table=table)
    search = filter.get("search_filter")
    if search is not None and not isinstance(search, FullTextQuery):
        if type(search).__name__ == "VectorSearchQuery":
            raise UnsupportedFeatureError("a vector query as a search filter is not supported by this engine",
                                          table=table)
        raise InvalidInputError(f"search_filter must be a full-text query object (MatchQuery, PhraseQuery, ...), "
                                f"got {type(search).__name__}", table=table)
    return filter.get("expr_filter"), search


@dataclass(frozen=True, eq=False)
class SearchFilter:
    """A full-text query restricting a vector search to the rows it matches."""

    query: FullTextQuery

    @property
    def post_filterable(self) -> bool:
        """Whether it may run after the k-NN (pylance: a match query only)."""
        return isinstance(self.query, MatchQuery)

    def check_post_filter(self, table: str) -> None:
        """Raise pylance's refusal of a query other than a match as a post-filter."""
        if not self.post_filterable:
            raise InvalidInputError("Not supported: Only Match queries are supported currently when using FTS as a "
                                    f"post-filter, got {type(self.query).__name__}", table=table)

    def rows(self, ds: LanceDataset) -> np.ndarray:
        """Sorted, distinct addresses of the rows the query matches (indexed and unindexed
        fragments; deleted rows may be among them, the search's candidates exclude them)."""
        try:
            return _Scorer(ds).score(self.query)[0].astype(np.uint64, copy=False)
        except LanceError as error:
            raise error.with_context(table=ds.uri)

    def candidate_rows(self, executor: ScanExecutor, candidates: ScanPlan) -> np.ndarray:
        """Sorted addresses of the rows a prefiltered search may return: the matching rows, or
        with a scan limit only the ``limit + offset`` best-scoring of those ``candidates`` holds
        (pylance pushes the limit into its full-text search)."""
        from lance_format.dataset.scan.executor import ScanExecutor  # the executor runs this step

        plan = executor.plan
        if plan.limit is None:
            return self.rows(executor.dataset)
        step = FullTextSearch(self.query, plan.limit + plan.offset, prefilter=True, candidates=candidates)
        addresses, _ = step.ranked(ScanExecutor(executor.dataset, candidates, executor.counts))
        return distinct(addresses.astype(np.uint64, copy=False))

    def explain_line(self, prefilter: bool) -> str:
        """pylance's step for ``explain_plan``."""
        columns = ", ".join(str(c) for c in self.query.columns())
        step = "MatchQuery" if prefilter else "FlatMatchFilter"
        return f"{step}: column={columns}, query={self.query!r}"


def search_filter_for(query: FullTextQuery, ds: LanceDataset, *, nearest: bool, full_text: bool) -> SearchFilter:
    """A :class:`SearchFilter` for a scan, checked as pylance checks it.

    Raises
    ------
    InvalidInputError
        A full-text search scan, a scan with no search, or a query pylance refuses.
    """
    if full_text:
        raise InvalidInputError("Invalid user input: Fts filter can't be used with fts search", table=ds.uri)
    if not nearest:
        raise InvalidInputError("Invalid user input: Query filter can only be used with full text search or "
                                "vector search", table=ds.uri)
    return SearchFilter(parse_query(query, ds))


def contains(sorted_values: np.ndarray, values: np.ndarray) -> np.ndarray:
    """A mask of ``values`` found in ``sorted_values`` (sorted, distinct)."""
    if not len(sorted_values):
        return np.zeros(len(values), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_values, values), len(sorted_values) - 1)
    return sorted_values[at] == values


__all__ = ["SearchFilter", "contains", "search_filter_for", "split_filter"]
