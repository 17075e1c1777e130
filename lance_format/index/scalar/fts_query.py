"""Full-text query objects (pylance's ``lance.query``): what ``full_text_query`` accepts besides a
string or a ``{"query": ..., "columns": [...]}`` dict.

The classes take pylance's constructor arguments and check them as pylance does (a wrong type is
a ``TypeError``, a bad value a ``ValueError``, both typed :mod:`lance_format.errors`). Each is a
node of a query tree that :mod:`lance_format.dataset.scan.fts_search` scores:

* :class:`MatchQuery`: BM25 of the query's tokens (summed; ``AND``: rows holding every token),
  times ``boost``; ``fuzziness`` > 0 matches index tokens within that edit distance of the
  query's raw words (``max_expansions`` terms at most, the first ``prefix_length`` characters
  fixed);
* :class:`PhraseQuery`: rows holding the tokens in order (``slop`` extra positions allowed),
  scored as a match of the tokens (needs an index built ``with_position=True``);
* :class:`BooleanQuery`: ``MUST`` clauses intersect and add, ``SHOULD`` add (or unite, without a
  ``MUST``), ``MUST_NOT`` removes;
* :class:`BoostQuery`: the positive query's score less ``negative_boost`` times the negative's;
* :class:`MultiMatchQuery`: a match per column (times its boost), the best column's score.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Sequence
from enum import Enum
from typing import Any

from lance_format.errors import ArgumentTypeError, InvalidInputError, UnsupportedFeatureError


class FullTextQueryType(Enum):
    """The kinds of full-text query (pylance's names and values)."""

    MATCH = "match"
    MATCH_PHRASE = "match_phrase"
    BOOST = "boost"
    MULTI_MATCH = "multi_match"
    COMBINED_FIELDS = "combined_fields"
    BOOLEAN = "boolean"


class FullTextOperator(Enum):
    """How a match query combines its tokens."""

    AND = "AND"
    OR = "OR"


class DocumentGranularity(str, Enum):
    """The unit treated as one full-text-search document (only ``ROW`` is searched here)."""

    ROW = "row"
    LIST_ELEMENT = "list_element"


class Occur(Enum):
    """A boolean query clause's role."""

    SHOULD = "SHOULD"
    MUST = "MUST"
    MUST_NOT = "MUST_NOT"


def _string(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ArgumentTypeError(f"argument '{name}': '{type(value).__name__}' object is not an instance of 'str'")
    return value


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ArgumentTypeError(f"argument '{name}': '{type(value).__name__}' object cannot be interpreted as a float")
    return float(value)


def _count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(f"argument '{name}': '{type(value).__name__}' object cannot be interpreted as an "
                                "integer")
    if value < 0:
        raise InvalidInputError(f"argument '{name}' must not be negative, got {value}")
    return value


def _granularity(value: Any) -> DocumentGranularity | None:
    if value is None:
        return None
    granularity = DocumentGranularity(value)
    if granularity is not DocumentGranularity.ROW:
        raise UnsupportedFeatureError("list-element full-text documents are not supported yet")
    return granularity


def _rust_float(value: float) -> str:
    return repr(float(value))


class FullTextQuery(abc.ABC):
    """A full-text query (pylance's ``lance.query.FullTextQuery``); ``a & b`` and ``a | b`` make
    boolean queries."""

    @property
    def inner(self) -> FullTextQuery:
        """The query itself (pylance's handle to its Rust query object)."""
        return self

    @abc.abstractmethod
    def query_type(self) -> FullTextQueryType:
        """The kind of query."""

    @abc.abstractmethod
    def columns(self) -> set[str | None]:
        """The columns the query searches (None: not named, every indexed column)."""

    def __and__(self, other: FullTextQuery) -> FullTextQuery:
        """Both queries must match (their scores add)."""
        return BooleanQuery([(Occur.MUST, self), (Occur.MUST, other)])

    def __or__(self, other: FullTextQuery) -> FullTextQuery:
        """Either query matches (scores add where both do)."""
        return BooleanQuery([(Occur.SHOULD, self), (Occur.SHOULD, other)])


class MatchQuery(FullTextQuery):
    """Rows holding the query's tokens in ``column``, scored by BM25 (see the module docstring)."""

    def __init__(self, query: str, column: str | None, *, boost: float = 1.0, fuzziness: int | None = 0,
                 max_expansions: int = 50, operator: FullTextOperator = FullTextOperator.OR,
                 prefix_length: int = 0, document_granularity: DocumentGranularity | None = None) -> None:
        self.query = _string("query", query)
        self.column = None if column is None else _string("column", column)
        self.boost = _number("boost", boost)
        self.fuzziness = None if fuzziness is None else _count("fuzziness", fuzziness)
        self.max_expansions = _count("max_expansions", max_expansions)
        if not isinstance(operator, FullTextOperator):
            raise ArgumentTypeError(f"operator must be a FullTextOperator, got {type(operator).__name__}")
        self.operator = operator
        self.prefix_length = _count("prefix_length", prefix_length)
        self.document_granularity = _granularity(document_granularity)

    def query_type(self) -> FullTextQueryType:
        return FullTextQueryType.MATCH

    def columns(self) -> set[str | None]:
        return {self.column}

    def with_column(self, column: str) -> MatchQuery:
        """This query on ``column``."""
        return MatchQuery(self.query, column, boost=self.boost, fuzziness=self.fuzziness,
                          max_expansions=self.max_expansions, operator=self.operator,
                          prefix_length=self.prefix_length, document_granularity=self.document_granularity)

    def __repr__(self) -> str:
        column = "None" if self.column is None else f'Some("{self.column}")'
        fuzziness = "None" if self.fuzziness is None else f"Some({self.fuzziness})"
        return (f'Match(MatchQuery {{ column: {column}, terms: "{self.query}", boost: {_rust_float(self.boost)}, '
                f"fuzziness: {fuzziness}, max_expansions: {self.max_expansions}, "
                f"operator: {self.operator.value.title()}, prefix_length: {self.prefix_length}, "
                "document_granularity: Some(Row) })")


class PhraseQuery(FullTextQuery):
    """Rows holding the query's tokens in order, at most ``slop`` positions apart."""

    def __init__(self, query: str, column: str | None, *, slop: int = 0,
                 document_granularity: DocumentGranularity | None = None) -> None:
        self.query = _string("query", query)
        self.column = None if column is None else _string("column", column)
        self.slop = _count("slop", slop)
        self.document_granularity = _granularity(document_granularity)

    def query_type(self) -> FullTextQueryType:
        return FullTextQueryType.MATCH_PHRASE

    def columns(self) -> set[str | None]:
        return {self.column}

    def with_column(self, column: str) -> PhraseQuery:
        """This query on ``column``."""
        return PhraseQuery(self.query, column, slop=self.slop, document_granularity=self.document_granularity)

    def __repr__(self) -> str:
        column = "None" if self.column is None else f'Some("{self.column}")'
        return (f'Phrase(PhraseQuery {{ column: {column}, terms: "{self.query}", slop: {self.slop}, '
                "document_granularity: Some(Row) })")


def _query(name: str, value: Any) -> FullTextQuery:
    if not isinstance(value, FullTextQuery):
        raise ArgumentTypeError(f"{name} must be a FullTextQuery, got {type(value).__name__}")
    return value


class BoostQuery(FullTextQuery):
    """The positive query's rows, less ``negative_boost`` times the negative query's score."""

    def __init__(self, positive: FullTextQuery, negative: FullTextQuery, *, negative_boost: float = 0.5) -> None:
        self.positive = _query("positive", positive)
        self.negative = _query("negative", negative)
        self.negative_boost = _number("negative_boost", negative_boost)

    def query_type(self) -> FullTextQueryType:
        return FullTextQueryType.BOOST

    def columns(self) -> set[str | None]:
        return self.positive.columns() | self.negative.columns()

    def __repr__(self) -> str:
        return (f"Boosting(positive={self.positive!r}, negative={self.negative!r}, "
                f"negative_boost={_rust_float(self.negative_boost)})")


class MultiMatchQuery(FullTextQuery):
    """A match of ``query`` in each of ``columns`` (times its boost); a row scores its best."""

    def __init__(self, query: str, columns: Sequence[str], *, boosts: Sequence[float] | None = None,
                 operator: FullTextOperator = FullTextOperator.OR) -> None:
        query = _string("query", query)
        if isinstance(columns, str) or not isinstance(columns, Sequence):
            raise ArgumentTypeError(f"argument 'columns': '{type(columns).__name__}' object cannot be converted "
                                    "to 'Sequence'")
        if not columns:
            raise InvalidInputError("Cannot create MultiMatchQuery with no columns")
        weights = [1.0] * len(columns) if boosts is None else [_number("boosts", b) for b in boosts]
        if len(weights) != len(columns):
            raise InvalidInputError("Invalid boosts: Invalid user input: The number of boosts must match the "
                                    "number of queries")
        self.query = query
        self.operator = operator
        self.match_queries = [MatchQuery(query, _string("columns", c), boost=w, operator=operator)
                              for c, w in zip(columns, weights)]

    def query_type(self) -> FullTextQueryType:
        return FullTextQueryType.MULTI_MATCH

    def columns(self) -> set[str | None]:
        return {q.column for q in self.match_queries}

    def __repr__(self) -> str:
        return f"MultiMatch(MultiMatchQuery {{ match_queries: [{', '.join(map(repr, self.match_queries))}] }})"


class CombinedFieldsQuery(FullTextQuery):
    """pylance's BM25F query over several columns as one field: accepted, not searched yet
    (``full_text_query`` refuses it with :class:`~lance_format.errors.UnsupportedFeatureError`)."""

    def __init__(self, query: str, columns: Sequence[str], *, boosts: Sequence[float] | None = None,
                 operator: FullTextOperator = FullTextOperator.OR) -> None:
        self.query = _string("query", query)
        if isinstance(columns, str) or not isinstance(columns, Sequence) or not columns:
            raise ArgumentTypeError("CombinedFieldsQuery needs a list of columns")
        self.column_names = [_string("columns", c) for c in columns]
        self.boosts = [1.0] * len(columns) if boosts is None else [_number("boosts", b) for b in boosts]
        if len(self.boosts) != len(self.column_names):
            raise InvalidInputError("The number of boosts must match the number of columns")
        self.operator = operator

    def query_type(self) -> FullTextQueryType:
        return FullTextQueryType.COMBINED_FIELDS

    def columns(self) -> set[str | None]:
        return set(self.column_names)


class BooleanQuery(FullTextQuery):
    """Clauses with their :class:`Occur`: every ``MUST`` matches and adds its score, matching
    ``SHOULD`` scores add, ``MUST_NOT`` rows are excluded."""

    def __init__(self, queries: Sequence[tuple[Occur, FullTextQuery]]) -> None:
        self.must: list[FullTextQuery] = []
        self.should: list[FullTextQuery] = []
        self.must_not: list[FullTextQuery] = []
        for item in queries:
            if not isinstance(item, tuple) or len(item) != 2:
                raise ArgumentTypeError(f"a boolean clause is an (Occur, FullTextQuery) pair, got {item!r}")
            occur, query = item
            if not isinstance(occur, Occur):
                raise ArgumentTypeError(f"a boolean clause's occur must be an Occur, got {type(occur).__name__}")
            {Occur.MUST: self.must, Occur.SHOULD: self.should, Occur.MUST_NOT: self.must_not}[occur].append(
                _query("query", query))

    def query_type(self) -> FullTextQueryType:
        return FullTextQueryType.BOOLEAN

    def columns(self) -> set[str | None]:
        return set().union(*(q.columns() for q in self.must + self.should + self.must_not))

    def __repr__(self) -> str:
        parts = ", ".join(f"{n}=[{', '.join(map(repr, qs))}]" for n, qs in
                          (("must", self.must), ("should", self.should), ("must_not", self.must_not)))
        return f"Boolean({parts})"


def check_query(query: FullTextQuery, table: str | None = None) -> None:
    """pylance's checks made when a query runs (not when it is built)."""
    if isinstance(query, MatchQuery):
        if not math.isfinite(query.boost) or query.boost < 0:
            raise InvalidInputError(f"MatchQuery boost must be finite and non-negative, got {query.boost:g}",
                                    table=table)
    elif isinstance(query, BoostQuery):
        if not math.isfinite(query.negative_boost) or query.negative_boost < 0:
            raise InvalidInputError("BoostQuery negative_boost must be finite and non-negative, got "
                                    f"{query.negative_boost:g}", table=table)
        check_query(query.positive, table)
        check_query(query.negative, table)
    elif isinstance(query, MultiMatchQuery):
        for match in query.match_queries:
            check_query(match, table)
    elif isinstance(query, CombinedFieldsQuery):
        raise UnsupportedFeatureError("CombinedFieldsQuery (BM25F over several columns) is not supported yet",
                                      table=table)
    elif isinstance(query, BooleanQuery):
        if not query.must and not query.should:
            raise InvalidInputError("boolean query must have at least one should/must query", table=table)
        for child in query.must + query.should + query.must_not:
            check_query(child, table)


__all__ = ["BooleanQuery", "BoostQuery", "CombinedFieldsQuery", "DocumentGranularity", "FullTextOperator", "FullTextQuery",
           "FullTextQueryType", "MatchQuery", "MultiMatchQuery", "Occur", "PhraseQuery", "check_query"]
