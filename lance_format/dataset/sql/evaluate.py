"""Filter predicates evaluated on a batch by direct kernel calls, without an Acero plan.

``matching_rows`` runs once per scanned batch; an Acero plan per batch costs about as much as
the comparisons themselves on 64K rows. A predicate over top-level columns is read back as a
tree once (:mod:`lance_format.dataset.sql.arrow_expressions`) and evaluated call by call with
``pc.call_function`` (the same kernels and implicit casts Acero binds). Predicates this cannot
take (struct fields, unreadable parts), and any batch where a kernel raises, go to the Acero
plan as before, so results and errors stay Acero's.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.dataset.sql.arrow_expressions import ExprNode, UnreadableExpression, function_options, read_expression

__all__ = ["compiled"]

Evaluator = Callable[[pa.RecordBatch], Any]

_CACHE: OrderedDict[int, tuple[pc.Expression, Evaluator | None]] = OrderedDict()
_CACHE_SIZE = 64
_LOCK = threading.Lock()


def compiled(condition: pc.Expression) -> Evaluator | None:
    """An evaluator of ``condition`` on record batches, or None when it needs Acero (cached per
    expression object: a scan calls this for every batch with the same condition)."""
    key = id(condition)
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None and hit[0] is condition:
            _CACHE.move_to_end(key)
            return hit[1]
    try:
        evaluator: Evaluator | None = _compile(read_expression(condition))
    except (UnreadableExpression, RecursionError):
        evaluator = None
    with _LOCK:
        _CACHE[key] = (condition, evaluator)  # holds the expression, so its id is not reused
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return evaluator


def _compile(node: ExprNode) -> Evaluator | None:
    if node.kind == "literal":
        value = node.value
        return lambda batch: value
    if node.kind == "field":
        if len(node.path) != 1:
            return None  # struct fields: Acero's nested references decide null parents
        name = node.path[0]
        return lambda batch: batch.column(name)
    args = [_compile(arg) for arg in node.args]
    if any(a is None for a in args):
        return None
    try:
        options = function_options(node)
    except UnreadableExpression:
        return None
    name = node.name
    ready: list[Evaluator] = [a for a in args if a is not None]
    return lambda batch: pc.call_function(name, [a(batch) for a in ready], options)
