"""The list and text filter terms LABEL_LIST and NGRAM indices answer, for :mod:`.index_terms`.

- ``array_has_any(col, [..])`` -> :class:`LabelListHasAny`; ``array_has_all(col, [..])`` ->
  :class:`LabelListHasAll`; ``array_contains`` / ``array_has(col, v)`` -> ``LabelListHasAny([v])``
  (as pylance's ``explain_plan`` shows it), the labels coerced to the list's item type;
- ``contains(col, 's')`` -> :class:`StringContains`; ``starts_with(col, 's')`` and
  ``col LIKE 's%'`` -> :class:`StringPrefix`; any other ``LIKE`` pattern (without escapes) ->
  ``StringContains`` of its longest literal run, a superset the scan re-checks.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pyarrow as pa
from sqlglot import exp

from lance_format.index.scalar.queries import (
    LabelListHasAll,
    LabelListHasAny,
    ScalarQuery,
    StringContains,
    StringPrefix,
)

if TYPE_CHECKING:
    from lance_format.dataset.sql.index_terms import _Extractor


def _string_literal(node: exp.Expr) -> str | None:
    return node.this if isinstance(node, exp.Literal) and node.is_string else None


def _labels(extractor: _Extractor, node: exp.Expr, item_type: pa.DataType) -> pa.Array | None:
    items = node.expressions if isinstance(node, exp.Array) else [node]
    values = [extractor.literal(item, item_type) for item in items]
    if not values or any(v is None or not v.is_valid for v in values):
        return None  # a NULL label matches null items: left to the scan, which knows that
    return pa.array([v.as_py() for v in values if v is not None and v.is_valid], type=item_type)


def _list_query(extractor: _Extractor, node: exp.Expr) -> tuple[str, ScalarQuery] | None:
    kind: type[LabelListHasAny] | type[LabelListHasAll]
    if isinstance(node, exp.Anonymous) and str(node.this).lower() == "array_has_any" and len(node.expressions) == 2:
        column, labels, kind = node.expressions[0], node.expressions[1], LabelListHasAny
    elif isinstance(node, exp.ArrayContainsAll):
        column, labels, kind = node.this, node.expression, LabelListHasAll
    elif isinstance(node, exp.ArrayContains):
        column, labels, kind = node.this, node.expression, LabelListHasAny
    else:
        return None
    found = extractor.column(column)
    if found is None or not (pa.types.is_list(found[1]) or pa.types.is_large_list(found[1])):
        return None
    if isinstance(node, exp.ArrayContainsAll) and not isinstance(labels, exp.Array):
        return None
    values = _labels(extractor, labels, found[1].value_type)
    return None if values is None else (found[0], kind(values))


def _like_query(pattern: str) -> ScalarQuery | None:
    if "\\" in pattern:
        return None
    if pattern.endswith("%") and not re.search(r"[%_]", pattern[:-1]):
        return StringPrefix(pattern[:-1])
    runs = [r for r in re.split(r"[%_]", pattern) if r]
    return StringContains(max(runs, key=len)) if runs else None


def text_term(extractor: _Extractor, node: exp.Expr) -> tuple[str, ScalarQuery] | None:
    """``(column path, query)`` for a list or text term, or None."""
    found_list = _list_query(extractor, node)
    if found_list is not None:
        return found_list
    if isinstance(node, (exp.Contains, exp.StartsWith, exp.Like)):
        found = extractor.column(node.this)
        text = _string_literal(node.expression)
        if found is None or text is None or not (pa.types.is_string(found[1]) or pa.types.is_large_string(found[1])):
            return None
        if isinstance(node, exp.Contains):
            return found[0], StringContains(text)
        if isinstance(node, exp.StartsWith):
            return found[0], StringPrefix(text)
        if node.args.get("escape") is not None:
            return None
        query = _like_query(text)
        return None if query is None else (found[0], query)
    return None
