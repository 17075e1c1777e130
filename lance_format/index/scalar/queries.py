"""The questions a scalar index is asked: small frozen values, built from a filter's conjuncts.

Values are pyarrow scalars (arrays for sets) of the indexed column's type: the query builder
casts the SQL literals, so an index compares like with like (timestamps, decimals, strings).
SQL semantics: a comparison with NULL matches no row; ``Range`` bounds are ``None`` when open.
An index answers what it can (:meth:`ScalarIndex.search` returns ``None`` for the rest).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa


@dataclass(frozen=True, eq=False)
class Equals:
    """``column = value``."""

    value: pa.Scalar


@dataclass(frozen=True, eq=False)
class IsIn:
    """``column IN (values...)`` (nulls in ``values`` match nothing)."""

    values: pa.Array


@dataclass(frozen=True, eq=False)
class Range:
    """``lower <(=) column <(=) upper``; a ``None`` bound is open."""

    lower: pa.Scalar | None = None
    upper: pa.Scalar | None = None
    lower_inclusive: bool = True
    upper_inclusive: bool = True


@dataclass(frozen=True)
class IsNull:
    """``column IS NULL``."""


@dataclass(frozen=True)
class IsNotNull:
    """``column IS NOT NULL``."""


@dataclass(frozen=True, eq=False)
class LabelListHasAny:
    """``array_has_any(column, values)`` (LABEL_LIST)."""

    values: pa.Array


@dataclass(frozen=True, eq=False)
class LabelListHasAll:
    """``array_has_all(column, values)`` / ``array_contains(column, value)`` (LABEL_LIST)."""

    values: pa.Array


@dataclass(frozen=True)
class StringPrefix:
    """``column LIKE 'prefix%'`` / ``starts_with(column, prefix)`` (NGRAM, BTREE)."""

    prefix: str


@dataclass(frozen=True)
class StringContains:
    """``contains(column, substring)`` / ``column LIKE '%substring%'`` (NGRAM)."""

    substring: str


ScalarQuery = (Equals | IsIn | Range | IsNull | IsNotNull | LabelListHasAny | LabelListHasAll
               | StringPrefix | StringContains)


def describe(query: ScalarQuery, column: str) -> str:
    """The query as pylance's ``explain_plan`` prints it inside ``[...]`` (``id = 5``, ``id > 5``)."""
    def text(value: pa.Scalar | None) -> str:
        return "NULL" if value is None or not value.is_valid else str(value.as_py())

    if isinstance(query, Equals):
        return f"{column} = {text(query.value)}"
    if isinstance(query, IsIn):
        return f"{column} IN [{', '.join(str(v) for v in query.values.to_pylist())}]"
    if isinstance(query, Range):
        parts = []
        if query.lower is not None:
            parts.append(f"{column} {'>=' if query.lower_inclusive else '>'} {text(query.lower)}")
        if query.upper is not None:
            parts.append(f"{column} {'<=' if query.upper_inclusive else '<'} {text(query.upper)}")
        return " AND ".join(parts) if parts else f"{column} IS NOT NULL"
    if isinstance(query, IsNull):
        return f"{column} IS NULL"
    if isinstance(query, IsNotNull):
        return f"{column} IS NOT NULL"
    if isinstance(query, (LabelListHasAny, LabelListHasAll)):
        name = "array_has_any" if isinstance(query, LabelListHasAny) else "array_has_all"
        return f"{name}({column}, List([{', '.join(str(v) for v in query.values.to_pylist())}]))"
    if isinstance(query, StringPrefix):  # pylance's NGRAM answers LIKE 'p%' as a regular expression
        return f'regexp_like({column}, Utf8("{re.escape(query.prefix)}.*"))'
    return f'contains({column}, Utf8("{query.substring}"))'

