"""pyarrow filter expressions (what DuckDB and Polars push into a scan) -> the engine's SQL filters.

DuckDB and Polars hand a ``pyarrow.dataset.Dataset`` their filters as ``pc.Expression`` objects.
:func:`split_arrow_filter` translates the top-level conjuncts it can express *exactly* (same
rows as pyarrow would keep) into the SQL dialect of :mod:`lance_format.dataset.sql.filter`, so
they take the same path as a SQL filter string (the path scalar indices will serve), and leaves
the others as a pyarrow residual evaluated on the scanned batches, so results are always right.

Translated exactly: comparisons of a column (a struct field too) with a literal of its type
family, or of two columns of the same non-float type; ``is_in`` (each null-matching behaviour,
and DuckDB's ``if_else(is_valid(x), is_in(x, ...), null)``); ``is_null``/``is_valid``;
``and``/``or``/``not`` (Kleene); ``starts_with``/``ends_with``/``match_substring``/``match_like``
as LIKE/ILIKE; boolean columns; calls on literals only (``cast`` of a literal, ...), folded by
pyarrow first. Timestamps keep their instant (a literal finer than the column's unit stays
residual), dates, decimals and strings their value.

Left to pyarrow: float comparisons other than ``=``, ``!=``, ``<``, ``<=`` of a float64 column
with a finite number (the SQL layer orders floats by DataFusion's totalOrder, where NaN is
largest, and casts literals to float32 columns), casts and arithmetic on columns, regular
expressions, ``is_nan``, ``is_in`` with more than 256 values (cheaper for pyarrow than as SQL)
and anything else.
"""

from __future__ import annotations

import decimal
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from lance_format.dataset.sql.arrow_expressions import ExprNode, UnreadableExpression, read_expression, rebuild

__all__ = ["ArrowFilter", "split_arrow_filter"]


@dataclass
class ArrowFilter:
    """A pyarrow filter split in two: ``sql`` (the engine's dialect) AND ``residual`` (pyarrow)."""

    sql: str | None
    residual: pc.Expression | None


class _Untranslatable(Exception):
    pass


_OPERATORS = {"equal": "=", "not_equal": "!=", "less": "<", "less_equal": "<=", "greater": ">",
              "greater_equal": ">="}
_SWAPPED = {"equal": "equal", "not_equal": "not_equal", "less": "greater", "less_equal": "greater_equal",
            "greater": "less", "greater_equal": "less_equal"}
# float64 columns against a finite number: these agree under IEEE and totalOrder (NaN never
# less than a number in either, never equal, always unequal; zeros equal against a literal)
_FLOAT_SAFE = {"equal", "not_equal", "less", "less_equal"}
_INT64 = (-(2**63), 2**63)
_FLOAT_EXACT_INT = 2**53
_UNIT_NANOS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
# longer IN lists stay with pyarrow (exact, one hash lookup): their SQL text would cost more to
# parse and translate than the scan saves (about 0.1 s per 1,000 values)
_MAX_IN_VALUES = 256
_LIKE_FUNCTIONS = {"starts_with": ("", "%"), "ends_with": ("%", ""), "match_substring": ("%", "%")}
# pyarrow's SetLookupOptions.null_matching_behavior
_MATCH, _SKIP, _EMIT_NULL, _INCONCLUSIVE = 0, 1, 2, 3


def split_arrow_filter(expr: pc.Expression, schema: pa.Schema) -> ArrowFilter:
    """Split ``expr`` into translated SQL conjuncts and a pyarrow residual (see the module doc).

    ``schema`` is the scanned table's schema (system columns included). Never raises for an
    expression pyarrow accepts: what cannot be read or translated is all residual.
    """
    try:
        root = read_expression(expr)
    except UnreadableExpression:
        return ArrowFilter(None, expr)
    translated, left_over = [], []
    for conjunct in _flatten(root, "and_kleene"):
        try:
            translated.append(_Renderer(schema).predicate(conjunct))
        except (_Untranslatable, RecursionError):
            left_over.append(conjunct)
    if not translated:
        return ArrowFilter(None, expr)
    residual = None
    for node in left_over:
        part = rebuild(node)
        residual = part if residual is None else residual & part
    sql = " AND ".join(translated) if len(translated) == 1 else " AND ".join(f"({t})" for t in translated)
    return ArrowFilter(sql, residual)


def _flatten(node: ExprNode, name: str) -> list[ExprNode]:
    """The operands of a chain of ``name`` calls (iteratively: chains can be thousands long)."""
    operands, pending = [], [node]
    while pending:
        current = pending.pop()
        if current.kind == "call" and current.name == name and len(current.args) == 2 and not current.options:
            pending.extend(reversed(current.args))
        else:
            operands.append(current)
    return operands


def _constant(node: ExprNode) -> bool:
    """Whether ``node`` reads no column (walked iteratively, chains can be deep)."""
    pending = [node]
    while pending:
        current = pending.pop()
        if current.kind == "field":
            return False
        pending.extend(current.args)
    return True


def quote_identifier(name: str) -> str:
    if "`" in name or not name:
        raise _Untranslatable(f"column name {name!r}")
    return f"`{name}`"


def _quote_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _like_escape(text: str) -> str:
    """``text`` matched literally by a LIKE pattern (backslash is the escape character)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class _Renderer:
    """Renders one conjunct as SQL, or raises :class:`_Untranslatable`."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema

    # -- operands ----------------------------------------------------------------------------
    def _fold(self, node: ExprNode) -> ExprNode:
        """A call on literals only becomes the literal pyarrow computes for it."""
        if node.kind != "call" or not _constant(node):
            return node
        try:
            value = pads.dataset(pa.table({"_": [0]})).to_table(columns={"v": rebuild(node)}).column("v")[0]
        except (pa.ArrowException, TypeError, ValueError):
            raise _Untranslatable(f"{node.name} of literals") from None
        return ExprNode("literal", node.span, node.source, value=value)

    def _column(self, node: ExprNode) -> tuple[str, pa.DataType]:
        if node.kind != "field":
            raise _Untranslatable("not a column")
        names = self.schema.names
        head = node.path[0]
        if names.count(head) != 1:
            raise _Untranslatable(f"column {head!r}")
        dtype = self.schema.field(head).type
        for child in node.path[1:]:
            if not pa.types.is_struct(dtype) or dtype.get_field_index(child) < 0:
                raise _Untranslatable(f"field {child!r}")
            dtype = dtype.field(child).type
        return ".".join(quote_identifier(p) for p in node.path), dtype

    # -- predicates --------------------------------------------------------------------------
    def predicate(self, node: ExprNode) -> str:
        node = self._fold(node)
        if node.kind == "field":
            text, dtype = self._column(node)
            if not pa.types.is_boolean(dtype):
                raise _Untranslatable("a non-boolean column as a predicate")
            return text
        if node.kind != "call":
            raise _Untranslatable("a literal predicate")
        name = node.name
        if name in ("and_kleene", "or_kleene"):
            joiner = " AND " if name == "and_kleene" else " OR "
            return joiner.join(f"({self.predicate(p)})" for p in _flatten(node, name))
        if name == "invert" and len(node.args) == 1:
            return f"NOT ({self.predicate(node.args[0])})"
        if name in _OPERATORS and len(node.args) == 2:
            return self._comparison(name, self._fold(node.args[0]), self._fold(node.args[1]))
        if name in ("is_null", "is_valid") and len(node.args) == 1:
            text, dtype = self._column(node.args[0])
            nan_is_null = (node.options or {}).get("nan_is_null")
            if name == "is_null" and nan_is_null is not None and nan_is_null.as_py() and pa.types.is_floating(dtype):
                raise _Untranslatable("is_null with nan_is_null")
            return f"{text} IS {'NOT ' if name == 'is_valid' else ''}NULL"
        if name == "is_in" and len(node.args) == 1:
            return self._is_in(node.args[0], node.options or {}, None)
        if name == "if_else" and len(node.args) == 3:
            return self._null_guarded_is_in(node)
        if (name in _LIKE_FUNCTIONS or name == "match_like") and len(node.args) == 1:
            return self._like(node)
        raise _Untranslatable(f"function {name}")

    def _comparison(self, name: str, left: ExprNode, right: ExprNode) -> str:
        if left.kind == "literal" and right.kind == "field":
            left, right, name = right, left, _SWAPPED[name]
        text, dtype = self._column(left)
        if right.kind == "field":
            other, other_type = self._column(right)
            if dtype != other_type or not _comparable_type(dtype) or pa.types.is_floating(dtype):
                raise _Untranslatable("columns of different or float types")
            return f"{text} {_OPERATORS[name]} {other}"
        if right.kind != "literal" or right.value is None:
            raise _Untranslatable("a comparison with an expression")
        if pa.types.is_floating(dtype) and name not in _FLOAT_SAFE:
            raise _Untranslatable("a float ordering comparison (NaN orders differently)")
        return f"{text} {_OPERATORS[name]} {_literal(right.value, dtype)}"

    def _is_in(self, operand: ExprNode, options: dict[str, pa.Scalar], behaviour: int | None) -> str:
        text, dtype = self._column(operand)
        value_set = options.get("value_set")
        if behaviour is None:
            matching = options.get("null_matching_behavior")
            behaviour = int(matching.as_py()) if matching is not None and matching.is_valid else _MATCH
        if value_set is None or not value_set.is_valid or pa.types.is_floating(dtype):
            raise _Untranslatable("is_in")
        values = value_set.values
        if len(values) > _MAX_IN_VALUES:
            raise _Untranslatable(f"is_in with more than {_MAX_IN_VALUES} values")
        has_null = values.null_count > 0
        literals = [_literal(v, dtype) for v in values if v.is_valid]
        if not literals:
            raise _Untranslatable("is_in with no values")
        listed = f"{text} IN ({', '.join(literals)})"
        if behaviour == _MATCH:
            # a null input matches a null in the set, else it is not in it (never null)
            return f"{text} IS NULL OR {listed}" if has_null else f"{text} IS NOT NULL AND {listed}"
        if behaviour == _SKIP:
            return f"{text} IS NOT NULL AND {listed}"
        if behaviour == _EMIT_NULL:
            return listed  # a null input gives null; the set's nulls never match
        if behaviour == _INCONCLUSIVE:
            return f"{text} IN ({', '.join(literals + ['NULL'])})" if has_null else listed
        raise _Untranslatable(f"null_matching_behavior {behaviour}")

    def _null_guarded_is_in(self, node: ExprNode) -> str:
        """DuckDB's ``if_else(is_valid(x), is_in(x, ...), null)``: null for a null ``x``."""
        condition, then, otherwise = node.args
        if (condition.kind == "call" and condition.name == "is_valid" and len(condition.args) == 1
                and condition.args[0].kind == "field" and then.kind == "call" and then.name == "is_in"
                and len(then.args) == 1 and then.args[0].kind == "field"
                and then.args[0].path == condition.args[0].path and otherwise.kind == "literal"
                and otherwise.value is not None and not otherwise.value.is_valid):
            return self._is_in(then.args[0], then.options or {}, _EMIT_NULL)
        raise _Untranslatable("if_else")

    def _like(self, node: ExprNode) -> str:
        text, dtype = self._column(node.args[0])
        if not (pa.types.is_string(dtype) or pa.types.is_large_string(dtype)):
            raise _Untranslatable("LIKE on a non-string column")
        options = node.options or {}
        pattern, ignore_case = options.get("pattern"), options.get("ignore_case")
        if pattern is None or not pattern.is_valid or not isinstance(pattern.as_py(), str):
            raise _Untranslatable("a LIKE pattern")
        if node.name == "match_like":
            like = pattern.as_py()
        else:
            before, after = _LIKE_FUNCTIONS[node.name]
            like = before + _like_escape(pattern.as_py()) + after
        operator = "ILIKE" if ignore_case is not None and ignore_case.as_py() else "LIKE"
        return f"{text} {operator} {_quote_string(like)}"


def _comparable_type(dtype: pa.DataType) -> bool:
    return (pa.types.is_integer(dtype) or pa.types.is_floating(dtype) or pa.types.is_decimal(dtype)
            or pa.types.is_string(dtype) or pa.types.is_large_string(dtype) or pa.types.is_binary(dtype)
            or pa.types.is_large_binary(dtype) or pa.types.is_boolean(dtype) or pa.types.is_date(dtype)
            or pa.types.is_timestamp(dtype))


def _literal(value: pa.Scalar, target: pa.DataType) -> str:
    """SQL text the SQL layer reads back, against a column of type ``target``, as ``value``
    exactly (the comparison keeps pyarrow's result)."""
    source = value.type
    if not value.is_valid:
        raise _Untranslatable("a null literal")
    if pa.types.is_integer(target) and pa.types.is_integer(source):
        number = value.as_py()
        if pa.types.is_uint64(target) and number >= 0:
            # the SQL layer's integer literals are int64, and pyarrow compares a uint64 column
            # with one as int64 (refusing values above its range): keep the column's type
            return f"arrow_cast('{number}', 'UInt64')"
        if not _INT64[0] <= number < _INT64[1] or pa.types.is_uint64(target):
            raise _Untranslatable("an integer beyond int64")
        return str(number)
    if pa.types.is_float64(target) and (pa.types.is_integer(source) or pa.types.is_floating(source)):
        number = value.as_py()
        if pa.types.is_integer(source) and abs(number) >= _FLOAT_EXACT_INT or not np.isfinite(float(number)):
            raise _Untranslatable("a number not exact as a finite float64")
        return repr(float(number))
    if pa.types.is_decimal(target) and (pa.types.is_decimal(source) or pa.types.is_integer(source)):
        number = value.as_py()
        if isinstance(number, decimal.Decimal) and not number.is_finite():
            raise _Untranslatable("a non-finite decimal")
        return _quote_string(str(number))
    if (pa.types.is_string(target) or pa.types.is_large_string(target)) and (
            pa.types.is_string(source) or pa.types.is_large_string(source)):
        return _quote_string(value.as_py())
    if (pa.types.is_binary(target) or pa.types.is_large_binary(target)) and (
            pa.types.is_binary(source) or pa.types.is_large_binary(source)):
        return f"X'{value.as_py().hex()}'"
    if pa.types.is_boolean(target) and pa.types.is_boolean(source):
        return "TRUE" if value.as_py() else "FALSE"
    if pa.types.is_date(target) and pa.types.is_date(source):
        return _quote_string(value.cast(pa.date32()).as_py().isoformat())
    if pa.types.is_timestamp(target) and pa.types.is_timestamp(source):
        return _timestamp_literal(value, target)
    raise _Untranslatable(f"a {source} literal against a {target} column")


def _timestamp_literal(value: pa.Scalar, target: pa.DataType) -> str:
    """An ISO timestamp at the column's unit: with ``+00:00`` for a zoned literal (an instant),
    without for a naive one (the SQL layer reads it as wall-clock time in the column's zone, as
    pylance does; pyarrow refuses to compare naive with zoned)."""
    ticks = value.cast(pa.int64()).as_py()
    scale = _UNIT_NANOS[value.type.unit] / _UNIT_NANOS[target.unit]
    if scale >= 1:
        ticks = ticks * int(scale)
    else:
        step = int(1 / scale)
        if ticks % step:
            raise _Untranslatable("a timestamp literal finer than the column's unit")
        ticks //= step
    text = str(np.datetime_as_string(np.datetime64(ticks, target.unit), unit=target.unit))
    if value.type.tz is not None:
        if target.tz is None:
            raise _Untranslatable("a zoned literal against a naive column")
        text += "+00:00"
    return _quote_string(text)
