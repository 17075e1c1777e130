"""Full-text search (``full_text_query``), the scan plan's full-text search step: pylance 14's
BM25 answers to a query string, a ``{"query": ..., "columns": [...]}`` dict or a query object
(:mod:`lance_format.index.scalar.fts_query`).

A string (or dict) is a match query on its column, or on each of several columns (every column
with an INVERTED index when none is named) taking the best column's score; in double quotes, a
phrase query. Each column's rows
come from :mod:`.fts_sources` (its index's segments and its unindexed fragments). The query tree
is scored over every row (match: summed token scores times boost; phrase: the same, for rows
holding the phrase; boolean, boost and multi-match combine their clauses' scores), then deleted
rows, rows outside the scanned fragments and (``prefilter=True``) rows failing the filter are
dropped, and the best ``limit + offset`` rows kept (highest ``_score`` first; equal scores by
row address). The step takes their columns by address and adds ``_score``; with
``prefilter=False`` the filter then runs on those rows (fewer than ``limit`` may pass), as in
pylance.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lance_format.dataset.fragment import ROW_ADDRESS
from lance_format.dataset.scan.fts_sources import EMPTY_F32, EMPTY_U64, ColumnSource, column_source, inverted_columns
from lance_format.dataset.scan.search import take_by_address
from lance_format.dataset.sql.filter import matching_rows
from lance_format.errors import ArgumentTypeError, InvalidInputError, LanceError
from lance_format.index.scalar.fts_query import (
    BooleanQuery,
    BoostQuery,
    FullTextOperator,
    FullTextQuery,
    MatchQuery,
    MultiMatchQuery,
    PhraseQuery,
    check_query,
)
from lance_format.index.scalar.fts_tokenizer import RAW_WORDS, query_tokens, query_tokens_with_positions

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset
    from lance_format.dataset.scan.executor import ScanExecutor
    from lance_format.dataset.scan.plan import ScanPlan

SCORE = "_score"
Hits = tuple[np.ndarray, np.ndarray]  # (sorted distinct row addresses, float32 scores)
_NONE: Hits = (EMPTY_U64, EMPTY_F32)


def parse_query(value: Any, ds: LanceDataset) -> FullTextQuery:
    """``full_text_query``'s value as a query tree whose leaves name their columns.

    Raises
    ------
    ArgumentTypeError
        Not a string, dict or query object; a dict without a string ``query``.
    InvalidInputError
        No column named and none indexed; a query pylance refuses when it runs.
    """
    if isinstance(value, FullTextQuery):
        query = value
    elif isinstance(value, str) or isinstance(value, Mapping):
        text = value if isinstance(value, str) else value.get("query")
        if isinstance(text, FullTextQuery):  # pylance's ScannerBuilder.full_text_search(query=...)
            query = text
        else:
            if not isinstance(text, str):
                raise ArgumentTypeError(f"full_text_query's 'query' must be a string or a FullTextQuery, got "
                                        f"{type(text).__name__}", table=ds.uri)
            columns = None if isinstance(value, str) else value.get("columns")
            if isinstance(columns, str):
                columns = [columns]
            # pylance: a string in double quotes is a phrase
            phrase = len(text) >= 2 and text.startswith('"') and text.endswith('"')
            text = text[1:-1] if phrase else text
            if phrase and columns and len(columns) > 1:
                raise InvalidInputError("Phrase queries cannot be used with multiple columns.", table=ds.uri)
            if not columns:
                columns = list(inverted_columns(ds))
                if not columns:
                    raise InvalidInputError("Cannot perform full text search unless an INVERTED index has been "
                                            "created on at least one column", table=ds.uri)
                if phrase and len(columns) > 1:
                    raise InvalidInputError("the column must be specified in the query", table=ds.uri)
            if phrase:
                query = PhraseQuery(text, columns[0])
            else:
                query = MatchQuery(text, columns[0]) if len(columns) == 1 else MultiMatchQuery(text, list(columns))
    else:
        raise ArgumentTypeError(f"full_text_query must be a string, a dict or a FullTextQuery, got "
                                f"{type(value).__name__}", table=ds.uri)
    check_query(query, ds.uri)
    if None in query.columns():
        raise InvalidInputError("the column must be specified in the query", table=ds.uri)
    return query


# -- combining hits (sort-based: numpy's hashing np.unique is many times slower on addresses) --
def distinct(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values."""
    ordered = np.sort(values)
    return ordered[np.concatenate([[True], ordered[1:] != ordered[:-1]])] if len(ordered) else ordered


def _grouped(rows: np.ndarray, scores: np.ndarray, reduce: np.ufunc) -> Hits:
    """(distinct rows, ``reduce`` of each row's scores in the order given)."""
    if not len(rows):
        return _NONE
    order = np.argsort(rows, kind="stable")
    rows, scores = rows[order], scores[order].astype(np.float32)
    starts = np.flatnonzero(np.concatenate([[True], rows[1:] != rows[:-1]]))
    return rows[starts], reduce.reduceat(scores, starts)


def _summed(addresses: list[np.ndarray], scores: list[np.ndarray]) -> Hits:
    if not addresses:
        return _NONE
    return _grouped(np.concatenate(addresses), np.concatenate(scores), np.add)  # summed in the order scored


def _restricted(hits: Hits, keep: np.ndarray) -> Hits:
    mask = np.isin(hits[0], keep, assume_unique=True)
    return hits[0][mask], hits[1][mask]


@dataclass
class _Scorer:
    """Scores a query tree over one table version (sources loaded once per column)."""

    ds: LanceDataset
    prefilter: Any = None  # the filter the unindexed rows are read with (prefilter=True)

    def __post_init__(self) -> None:
        self.sources: dict[str, ColumnSource] = {}

    def source(self, column: str) -> ColumnSource:
        if column not in self.sources:
            self.sources[column] = column_source(self.ds, column, self.prefilter)
        return self.sources[column]

    def score(self, query: FullTextQuery) -> Hits:
        if isinstance(query, MatchQuery):
            return self.match(query)
        if isinstance(query, PhraseQuery):
            return self.phrase(query)
        if isinstance(query, MultiMatchQuery):  # the best column's score
            per_column = [self.match(q) for q in query.match_queries]
            return _grouped(np.concatenate([r for r, _ in per_column]), np.concatenate([s for _, s in per_column]),
                            np.maximum)
        if isinstance(query, BoostQuery):  # the positive rows, less the negative's weighted score
            rows, scores = self.score(query.positive)
            negative_rows, negative = self.score(query.negative)
            at = np.searchsorted(negative_rows, rows)
            hit = (at < len(negative_rows)) & (negative_rows[np.minimum(at, len(negative_rows) - 1)] == rows) \
                if len(negative_rows) else np.zeros(len(rows), bool)
            scores = scores.copy()
            scores[hit] -= np.float32(query.negative_boost) * negative[at[hit]]
            return rows, scores
        assert isinstance(query, BooleanQuery)
        return self.boolean(query)

    def boolean(self, query: BooleanQuery) -> Hits:
        musts = [self.score(q) for q in query.must]
        shoulds = [self.score(q) for q in query.should]
        if musts:
            rows, scores = _summed([r for r, _ in musts], [s for _, s in musts])
            for must_rows, _ in musts:  # every MUST clause matches
                rows, scores = _restricted((rows, scores), must_rows)
            if shoulds:  # SHOULD scores add to the rows the MUSTs keep
                extra = _restricted(_summed([r for r, _ in shoulds], [s for _, s in shoulds]), rows)
                rows, scores = _summed([rows, extra[0]], [scores, extra[1]])
        else:
            rows, scores = _summed([r for r, _ in shoulds], [s for _, s in shoulds])
        for excluded in query.must_not:
            excluded_rows = self.score(excluded)[0]
            keep = ~np.isin(rows, excluded_rows)
            rows, scores = rows[keep], scores[keep]
        return rows, scores

    def match(self, query: MatchQuery) -> Hits:
        source = self.source(query.column)  # type: ignore[arg-type]
        fuzzy = bool(query.fuzziness) and source.indexed
        if query.fuzziness:  # the query's raw words, each expanded to the index's tokens near it
            words = query_tokens(query.query, RAW_WORDS)
            groups = _expand(words, source.vocabulary(), query.fuzziness, query.prefix_length, query.max_expansions)
            if fuzzy:  # pylance's flat search of the unindexed rows looks for the words unexpanded
                groups = [g + [w] for g, w in zip(groups, words)]
        else:
            # every occurrence of a token adds its score ("fox fox" weighs fox twice)
            groups = [[t] for t in query_tokens(query.query, source.params)]
        addresses, scores, matched = [], [], []
        for group in groups:
            group_rows = []
            for at, token in enumerate(group):
                raw = fuzzy and at == len(group) - 1
                hits = source.term(token, indexed=not raw, unindexed=raw or not fuzzy)
                addresses.append(hits.addresses)
                scores.append(hits.scores)
                group_rows.append(hits.addresses)
            if query.operator is FullTextOperator.AND:  # the rows holding this word (or an expansion)
                matched.append(distinct(np.concatenate(group_rows)) if group_rows else EMPTY_U64)
        rows, summed = _summed(addresses, scores)
        if query.operator is FullTextOperator.AND:
            for holding in matched:
                rows, summed = _restricted((rows, summed), holding)
        return rows, summed * np.float32(query.boost)

    def phrase(self, query: PhraseQuery) -> Hits:
        source = self.source(query.column)  # type: ignore[arg-type]
        if source.indexed and not source.has_positions:
            raise InvalidInputError("position is not found but required for phrase queries, try recreating the "
                                    "index with position", table=self.ds.uri, column=query.column)
        tokens, positions = query_tokens_with_positions(query.query, source.params)
        if not tokens:
            return _NONE
        terms = [source.term(t, with_positions=True) for t in tokens]
        candidates = distinct(terms[0].addresses)
        for hits in terms[1:]:
            candidates = np.intersect1d(candidates, hits.addresses, assume_unique=True)  # a row once per term
        if not len(candidates):
            return _NONE
        # each term's (row, position - its place in the query) pairs as sortable int64 keys; a
        # row matches when consecutive terms' keys chain within ``slop`` (0: all equal)
        feasible: np.ndarray | None = None
        for hits, place in sorted(zip(terms, positions), key=lambda x: x[1]):
            keys = _position_keys(hits, candidates, place)
            if feasible is not None:
                at = np.searchsorted(feasible, keys - query.slop, side="left")
                ok = at < len(feasible)
                ok[ok] = feasible[at[ok]] <= keys[ok]
                keys = keys[ok]
            feasible = np.sort(keys)
        assert feasible is not None
        found = candidates[distinct(feasible >> 33)]
        return _restricted(_summed([h.addresses for h in terms], [h.scores for h in terms]), found)


def _position_keys(hits: Any, candidates: np.ndarray, place: int) -> np.ndarray:
    """``row index << 33 | (position - place + 2**32)`` of each occurrence in a candidate row."""
    row = np.searchsorted(candidates, hits.addresses)
    inside = (row < len(candidates)) & (candidates[np.minimum(row, len(candidates) - 1)] == hits.addresses)
    counts = hits.freqs.astype(np.int64)
    occurrence_row = np.repeat(row, counts)
    keep = np.repeat(inside, counts)
    relative = hits.positions.astype(np.int64) - place + (1 << 32)
    return (occurrence_row[keep].astype(np.int64) << 33) | relative[keep]


def _levenshtein_within(a: str, b: str, limit: int) -> bool:
    """Whether ``a`` and ``b`` are at most ``limit`` edits (insert, delete, substitute) apart."""
    if abs(len(a) - len(b)) > limit:
        return False
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb))
        if min(current) > limit:
            return False
        previous = current
    return previous[-1] <= limit


def _expand(words: list[str], vocabulary: list[str], fuzziness: int, prefix_length: int,
            max_expansions: int) -> list[list[str]]:
    """Each word's index tokens within ``fuzziness`` edits sharing its first ``prefix_length``
    characters, in token order, ``max_expansions`` over the whole query at most (pylance)."""
    groups: list[list[str]] = []
    total = 0
    for word in words:
        remaining = max_expansions - total
        if remaining <= 0:
            break
        prefix = word[:prefix_length]
        # a loop over the vocabulary's words per query word (not per row): small and bounded
        found = [t for t in vocabulary if t.startswith(prefix) and _levenshtein_within(word, t, fuzziness)]
        groups.append(found[:remaining])
        total += len(groups[-1])
    return groups


# -- the plan's search step ----------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class FullTextSearch:
    """The full-text search step of a :class:`~lance_format.dataset.scan.plan.ScanPlan`."""

    query: FullTextQuery
    limit: int | None  # rows ranked: the scan's limit plus offset (None: all)
    prefilter: bool
    candidates: ScanPlan | None = None  # the rows searched: live rows of the scanned fragments (prefiltered)

    def describe(self) -> str:
        return f"CompoundFtsScorer: query={self.query!r}"

    def explain_lines(self) -> list[str]:
        """pylance's steps between the take of the rows and the read of the candidates."""
        top = f"SortExec: TopK(fetch={self.limit}), expr=[{SCORE} DESC NULLS LAST, _rowid ASC NULLS LAST]"
        return ([top] if self.limit is not None else []) + [self.describe()]

    def ranked(self, executor: ScanExecutor) -> Hits:
        """(addresses, scores) of the best rows, best first."""
        # the executor imports the plan, which imports this step: imported when it runs
        from lance_format.dataset.scan.executor import ScanExecutor

        ds = executor.dataset
        plan = executor.plan
        scorer = _Scorer(ds, plan.filter if self.prefilter else None)
        try:
            rows, scores = scorer.score(self.query)
        except LanceError as error:
            raise error.with_context(table=ds.uri)
        assert self.candidates is not None  # planned by plan_scan
        allowed: list[np.ndarray] = []
        row_ids: list[np.ndarray] = []
        for batch in ScanExecutor(ds, self.candidates, executor.counts).rows():
            allowed.append(np.asarray(batch.column(ROW_ADDRESS).to_numpy(zero_copy_only=False)).astype(np.uint64))
            row_ids.append(np.asarray(batch.column("_rowid").to_numpy(zero_copy_only=False)).astype(np.uint64))
        live = np.concatenate(allowed) if allowed else EMPTY_U64
        ids = np.concatenate(row_ids) if row_ids else EMPTY_U64
        if len(live) > 1 and not bool(np.all(live[1:] > live[:-1])):  # scans come in address order
            by_address = np.argsort(live, kind="stable")
            live, ids = live[by_address], ids[by_address]
        # the hits' places among the live rows (both sorted: a binary search, not a hash set)
        at = np.searchsorted(live, rows)
        inside = at < len(live)
        inside[inside] = live[at[inside]] == rows[inside]
        rows, scores, at = rows[inside], scores[inside], at[inside]
        if self.limit is None and isinstance(self.query, MatchQuery) and not scorer.source(
                self.query.column).indexed:  # type: ignore[arg-type]
            return rows, scores  # pylance's flat search of a column without an index: in row order
        # equal scores in row id order, as pylance sorts its results
        ids = ids[at]
        if self.limit and len(scores) > self.limit:
            # only rows scoring at least the limit-th best can rank: every tie at the cut is kept
            cut = np.partition(scores, len(scores) - self.limit)[len(scores) - self.limit]
            best = np.flatnonzero(scores >= cut)
            rows, scores, ids = rows[best], scores[best], ids[best]
        order = np.lexsort((ids, -scores))
        if self.limit is not None:
            order = order[:self.limit]
        return rows[order], scores[order]

    def run(self, executor: ScanExecutor) -> Iterator[pa.RecordBatch]:
        """The best rows with the plan's read columns and ``_score``, best first, the
        postfilter applied."""
        plan = executor.plan
        addresses, scores = self.ranked(executor)
        if not len(addresses):
            return
        taken = pa.Table.from_batches([take_by_address(executor, addresses)])
        taken = taken.append_column(pa.field(SCORE, pa.float32()), pa.array(scores, pa.float32()))
        if not self.prefilter and plan.filter is not None:
            taken = taken.take(matching_rows(taken, plan.filter))
        if taken.num_rows:
            yield from taken.combine_chunks().to_batches()


def full_text_search(value: Any, ds: LanceDataset, *, limit: int | None, offset: int | None,
                     prefilter: bool) -> FullTextSearch:
    """A :class:`FullTextSearch` for ``full_text_query``'s value (its candidate plan is set by
    ``plan_scan``)."""
    query = parse_query(value, ds)
    wanted = None if limit is None else limit + (offset or 0)
    return FullTextSearch(query, wanted, prefilter)


__all__ = ["SCORE", "FullTextSearch", "full_text_search", "parse_query"]
