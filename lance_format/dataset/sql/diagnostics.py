"""Errors of SQL filters and expressions in the user's terms, not sqlglot's or pyarrow's.

sqlglot reports an incomplete expression as "Required keyword: 'expression' missing for <class
'sqlglot.expressions.core.EQ'>" and pyarrow a comparison of a string column with a number as
"Function 'greater' has no kernel matching input types (string, int8)". These helpers name the
operator as it was written, the position in the text, the operands and their types.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp
from sqlglot.errors import SqlglotError

from lance_format.dataset.sql.floats import is_number

# sqlglot node classes -> the SQL a user writes
_OPERATORS: dict[str, str] = {
    "EQ": "=", "NEQ": "!=", "GT": ">", "GTE": ">=", "LT": "<", "LTE": "<=", "NullSafeEQ": "<=>",
    "NullSafeNEQ": "IS DISTINCT FROM", "And": "AND", "Or": "OR", "Not": "NOT", "Like": "LIKE", "ILike": "ILIKE",
    "Add": "+", "Sub": "-", "Mul": "*", "Div": "/", "Mod": "%", "Neg": "-", "DPipe": "||", "Between": "BETWEEN",
    "In": "IN", "Is": "IS", "Escape": "ESCAPE", "Cast": "CAST", "Bracket": "[...]",
}
# pyarrow compute functions -> the SQL operator they implement
FUNCTION_OPERATORS: dict[str, str] = {
    "equal": "=", "not_equal": "!=", "less": "<", "less_equal": "<=", "greater": ">", "greater_equal": ">=",
    "add": "+", "subtract": "-", "multiply": "*", "divide": "/", "remainder": "%",
}
# pyarrow compute functions -> the SQL function names they implement
_SQL_FUNCTIONS = {"utf8_lower": "lower", "utf8_upper": "upper", "utf8_length": "length", "binary_length": "length",
                  "binary_join_element_wise": "||", "match_like": "LIKE", "abs": "abs"}
_MISSING_PARTS = {"this": "left-hand operand", "expression": "right-hand operand", "low": "lower bound",
                  "high": "upper bound", "to": "target type"}
_MISSING = re.compile(r"Required keyword: '(\w+)' missing for <class '[\w.]*\.(\w+)'>")
_CLASS = re.compile(r"<class '[\w.]*\.(\w+)'>")
_NO_KERNEL = re.compile(r"Function '(\w+)' has no kernel matching input types \(([^)]*)\)")


def syntax_detail(err: SqlglotError) -> str:
    """What is wrong with the text and where, without sqlglot's class names or terminal codes."""
    first = (getattr(err, "errors", None) or [{}])[0]
    description = first.get("description")
    if not description:
        text = re.sub(r"\x1b\[[0-9;]*m", "", str(err))
        if text.startswith("Error tokenizing"):
            return f"syntax error: cannot read the text near {text[len('Error tokenizing'):].strip()} " \
                   "(an unclosed quote or an unknown character?)"
        return f"syntax error: {_CLASS.sub(lambda m: _OPERATORS.get(m.group(1), m.group(1)), text)}"
    missing = _MISSING.match(description)
    if missing is not None:
        part, node = missing.groups()
        operator = _OPERATORS.get(node, node.upper())
        what = f"{operator!r} has no {_MISSING_PARTS.get(part, part)}"
        if node == "Not" or node == "Neg":
            what = f"{operator!r} has no operand"
    elif description == "Invalid expression / Unexpected token":
        what = f"unexpected {first.get('highlight', '')!r}"
    else:
        what = _CLASS.sub(lambda m: _OPERATORS.get(m.group(1), m.group(1)), description)
    highlight = first.get("highlight", "") or ""
    near = (first.get("start_context", "") or "") + highlight
    column = first.get("col")
    if isinstance(column, int) and highlight:
        column = max(1, column - len(highlight) + 1)  # sqlglot gives the token's last column
    return f"syntax error at line {first.get('line')}, column {column}, near {near.strip()!r}: {what}"


@dataclass(frozen=True)
class Operand:
    """One side of an operation, as written and as typed."""

    sql: str
    dtype: pa.DataType
    column: str | None = None  # set when the side is a column reference

    def describe(self) -> str:
        if self.column is not None:
            return f"column {self.column} ({self.dtype})"
        return f"{self.sql} ({self.dtype})"


def operand(node: exp.Expr | None, fallback: str, dtype: pa.DataType) -> Operand:
    """An operand description from its sqlglot node (``fallback`` text when there is none)."""
    if isinstance(node, exp.Paren):
        node = node.unnest()
    if isinstance(node, exp.Column):
        return Operand(node.sql(), dtype, column=".".join(p.name for p in node.parts))
    return Operand(node.sql() if node is not None else fallback, dtype)


def type_mismatch(function: str, sides: list[Operand]) -> str:
    """A comparison or arithmetic over operands of types it cannot take."""
    operator = FUNCTION_OPERATORS.get(function, function)
    if len(sides) == 2:
        left, right = sides
        verb = "compare" if function in ("equal", "not_equal", "less", "less_equal", "greater",
                                         "greater_equal") else f"apply {operator!r} to"
        joint = "with" if verb == "compare" else "and"
        text = f"cannot {verb} {left.describe()} {joint} {right.describe()}"
        texts = [s for s in sides if s.column is not None and is_text(s.dtype)]
        numbers = [s for s in sides if s.column is None and is_number(s.dtype)]
        if verb == "compare" and texts and numbers:
            text += f" (to compare as text, quote the value: '{numbers[0].sql}')"
        return text
    return f"cannot apply {operator!r} to " + ", ".join(s.describe() for s in sides)


def is_text(dtype: pa.DataType) -> bool:
    return pa.types.is_string(dtype) or pa.types.is_large_string(dtype) or pa.types.is_string_view(dtype)


def arrow_detail(err: Exception | str) -> str:
    """pyarrow's message with its kernel names turned into SQL operators."""
    text = str(err)
    match = _NO_KERNEL.search(text)
    if match is not None:
        function, types = match.groups()
        operator = FUNCTION_OPERATORS.get(function)
        name = f"operator {operator!r}" if operator else f"function {_SQL_FUNCTIONS.get(function, function)}"
        return f"{name} cannot take arguments of types ({types})"
    return text


__all__ = ["is_text", "syntax_detail", "Operand", "operand", "type_mismatch", "arrow_detail", "FUNCTION_OPERATORS"]
