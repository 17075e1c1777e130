"""Literal nodes of the filter translator and how literals take their column's type.

``Node`` is a translated sub-expression; a literal compared with a column is converted to the
column's type the way pylance (DataFusion) does: strings parse as dates, timestamps and
decimals, naive timestamps are wall-clock time in a tz-aware column's zone, numbers compare
with decimal columns exactly.
"""

from __future__ import annotations

import decimal
import re
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

_LOOSE_DATE = re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})(.*)$", re.DOTALL)


@dataclass
class Node:
    """A translated sub-expression; ``scalar`` is set when it is a constant literal."""

    expr: pc.Expression
    scalar: pa.Scalar | None = None
    dtype: pa.DataType | None = None

    @property
    def is_literal(self) -> bool:
        return self.scalar is not None

    @property
    def literal(self) -> pa.Scalar:
        """The constant of a literal node (callers check ``is_literal`` first)."""
        assert self.scalar is not None
        return self.scalar


def literal_node(scalar: pa.Scalar) -> Node:
    """A constant node of ``scalar``."""
    return Node(pc.scalar(scalar), scalar=scalar, dtype=scalar.type)


class LiteralCoercions:
    """Mixed into ``Translator``: literal conversions to the other operand's type."""

    # provided by Translator
    _type_of: Callable[[Node], pa.DataType]
    _invalid: Callable[..., Exception]

    def _coerce_pair(self, left: Node, right: Node) -> tuple[Node, Node]:
        """Make literals take the type of the column side; align date vs timestamp operands."""
        if left.is_literal and not right.is_literal:
            left = self._coerce_literal(left, self._type_of(right))
        elif right.is_literal and not left.is_literal:
            right = self._coerce_literal(right, self._type_of(left))
        lt, rt = self._type_of(left), self._type_of(right)
        if pa.types.is_date(lt) and pa.types.is_timestamp(rt):
            left = Node(left.expr.cast(rt), dtype=rt)
        elif pa.types.is_timestamp(lt) and pa.types.is_date(rt):
            right = Node(right.expr.cast(lt), dtype=lt)
        elif pa.types.is_timestamp(lt) and pa.types.is_timestamp(rt) and (lt.tz is None) != (
            rt.tz is None
        ):
            # Naive vs tz-aware: the naive side is wall-clock time in the other side's zone.
            if lt.tz is None:
                left = Node(_assume_tz(left.expr, rt.tz), dtype=pa.timestamp(lt.unit, rt.tz))
            else:
                right = Node(_assume_tz(right.expr, lt.tz), dtype=pa.timestamp(rt.unit, lt.tz))
        return left, right

    def _coerce_literal(self, node: Node, target: pa.DataType) -> Node:
        scalar = node.scalar
        assert scalar is not None
        if not scalar.is_valid:
            return literal_node(pa.scalar(None, target)) if not pa.types.is_null(target) else node
        source = scalar.type
        if pa.types.is_string(source) or pa.types.is_large_string(source):
            if parses_from_string(target):
                return literal_node(self._parse_literal(scalar.as_py(), target))
        elif pa.types.is_timestamp(source) and pa.types.is_timestamp(target):
            if source != target:
                return literal_node(self._timestamp_literal(scalar, target))
        elif pa.types.is_date(source) and pa.types.is_timestamp(target):
            # pylance: a DATE literal against a tz-aware column is midnight UTC.
            return literal_node(scalar.cast(target))
        elif pa.types.is_decimal(target) and (pa.types.is_integer(source) or pa.types.is_floating(source)):
            # Compare exactly as decimals; pyarrow's int64 -> decimal promotion can overflow
            # the precision of a narrow decimal column.
            value = decimal.Decimal(repr(scalar.as_py()))
            if value.is_finite():
                return literal_node(pa.scalar(value))
        return node

    def _timestamp_literal(self, scalar: pa.Scalar, target: pa.DataType) -> pa.Scalar:
        """Convert a timestamp literal to ``target``'s unit and zone, the way pylance 14 does."""
        try:
            if scalar.type.tz is None and target.tz is not None:
                # pylance reads a naive literal as wall-clock time in the column's time zone.
                scalar = pc.assume_timezone(
                    pa.array([scalar]), timezone=target.tz, ambiguous="earliest", nonexistent="earliest"
                )[0]
            elif scalar.type.tz is not None and target.tz is None:
                scalar = scalar.cast(pa.timestamp(scalar.type.unit))
            # A literal finer than the column is truncated to the column unit, as DataFusion does.
            return scalar.cast(target, safe=False)
        except (pa.ArrowException, ValueError) as err:
            raise self._invalid(f"cannot interpret timestamp literal {scalar} as {target}: {err}") from None

    def _parse_literal(self, text: str, target: pa.DataType) -> pa.Scalar:
        """Interpret a string literal as ``target`` (date, timestamp, time or decimal)."""
        try:
            if pa.types.is_decimal(target):
                return pa.scalar(decimal.Decimal(text.strip()))
            text = _pad_date(text.strip())
            if pa.types.is_timestamp(target):
                try:
                    value = pa.scalar(text).cast(pa.timestamp(target.unit))
                except pa.ArrowInvalid:
                    # The literal carries a zone offset: it names an exact instant.
                    value = pa.scalar(text).cast(pa.timestamp(target.unit, "UTC"))
                return self._timestamp_literal(value, target)
            if pa.types.is_date(target):
                try:
                    return pa.scalar(text).cast(target)
                except pa.ArrowInvalid:
                    # Also accept a timestamp literal against a date column (keeps the date part).
                    return pa.scalar(text).cast(pa.timestamp("us")).cast(target, safe=False)
            return pa.scalar(text).cast(target)
        except (pa.ArrowException, decimal.InvalidOperation, ValueError) as err:
            raise self._invalid(f"cannot interpret literal {text!r} as {target}: {err}") from None


def parses_from_string(dtype: pa.DataType) -> bool:
    """Types whose string literals we convert (pylance would reject the comparison)."""
    return pa.types.is_temporal(dtype) or pa.types.is_decimal(dtype)


def _assume_tz(expr: pc.Expression, tz: str) -> pc.Expression:
    return pc.assume_timezone(expr, timezone=tz, ambiguous="earliest", nonexistent="earliest")


def _pad_date(text: str) -> str:
    """Zero-pad ``2024-1-5`` style dates, which DataFusion accepts but Arrow's parser does not."""
    match = _LOOSE_DATE.match(text)
    if not match:
        return text
    year, month, day, rest = match.groups()
    return f"{year}-{int(month):02d}-{int(day):02d}{rest}"
