"""Translation of sqlglot trees (Lance's SQL dialect) into ``pyarrow.compute`` expressions.

The semantics are described in :mod:`lance_format.dataset.sql.filter`, the public entry point;
this module holds the dialect and the tree walker (``Translator``); literal coercions are in ``sql.literals``
and the functions in ``sql.functions``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import sqlglot
from sqlglot import exp, tokens
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError

from lance_format.dataset.sql.diagnostics import (
    arrow_detail,
    is_text,
    operand,
    syntax_detail,
    type_mismatch,
)
from lance_format.dataset.sql.floats import compare_floats, is_float, is_number, literal_key, order_key
from lance_format.dataset.sql.functions import FunctionTranslations
from lance_format.dataset.sql.literals import LiteralCoercions, Node, literal_node, parses_from_string
from lance_format.errors import InvalidInputError

#: Columns the scanner synthesises; they can be filtered on without being in the table schema.
SYSTEM_COLUMNS: dict[str, pa.DataType] = {
    "_rowid": pa.uint64(),
    "_rowaddr": pa.uint64(),
    "_row_created_at_version": pa.uint64(),
    "_row_last_updated_at_version": pa.uint64(),
}


class LanceFilterDialect(Dialect):
    """sqlglot dialect matching Lance's tokenizer: backtick identifiers, double-quoted strings."""

    class Tokenizer(tokens.Tokenizer):
        QUOTES = ["'", '"']
        IDENTIFIERS = ["`"]
        HEX_STRINGS = [("x'", "'"), ("X'", "'")]  # binary literals, X'616263'

    def to_json_path(self, path: exp.Expr | None) -> exp.Expr | None:
        # keep json_extract's path a string literal; sql.json_functions reads it like pylance
        return path



_COMPARISONS: dict[type, str] = {
    exp.EQ: "equal",
    exp.NEQ: "not_equal",
    exp.LT: "less",
    exp.LTE: "less_equal",
    exp.GT: "greater",
    exp.GTE: "greater_equal",
}
# Unchecked kernels: integer division by zero still raises (as DataFusion does), float division by
# zero yields inf/nan like DataFusion, and integer overflow wraps like DataFusion's arithmetic.
_ARITHMETIC: dict[type, str] = {
    exp.Add: "add",
    exp.Sub: "subtract",
    exp.Mul: "multiply",
    exp.Div: "divide",
    exp.Mod: "remainder",
}
_UNARY_FUNCTIONS: dict[type, str] = {exp.Lower: "utf8_lower", exp.Upper: "utf8_upper", exp.Abs: "abs"}
# sqlglot type names -> Arrow types for CAST (Lance's planner maps the same SQL names).
_SIMPLE_TYPES: dict[str, pa.DataType] = {
    "TINYINT": pa.int8(), "SMALLINT": pa.int16(), "INT": pa.int32(), "BIGINT": pa.int64(),
    "UTINYINT": pa.uint8(), "USMALLINT": pa.uint16(), "UINT": pa.uint32(), "UBIGINT": pa.uint64(),
    "FLOAT": pa.float32(), "DOUBLE": pa.float64(), "BOOLEAN": pa.bool_(),
    "TEXT": pa.string(), "VARCHAR": pa.string(), "CHAR": pa.string(), "NVARCHAR": pa.string(),
    "NCHAR": pa.string(), "BINARY": pa.binary(), "VARBINARY": pa.binary(), "BLOB": pa.binary(),
    "DATE": pa.date32(), "TIME": pa.time64("us"),
}
_TIMESTAMP_UNITS = {0: "s", 3: "ms", 6: "us", 9: "ns"}
_NULL_BOOL = pa.scalar(None, pa.bool_())


def validation_schema(schema: pa.Schema) -> pa.Schema:
    extra = [pa.field(n, t) for n, t in SYSTEM_COLUMNS.items() if n not in schema.names]
    return pa.schema(list(schema) + extra)


class Translator(LiteralCoercions, FunctionTranslations):
    """Walks a sqlglot tree and builds the pyarrow expression; records referenced columns."""

    def __init__(self, text: str, schema: pa.Schema) -> None:
        self.text = text
        self.schema = schema
        self.referenced: set[str] = set()
        self._full_schema = validation_schema(schema)
        self._empty: pa.Table | None = None
        # comparisons and arithmetic as built (innermost first), to name the one whose operand
        # types pyarrow refuses: (function, sqlglot operands or None, operand nodes, expression)
        self._operations: list[tuple[str, tuple[exp.Expr | None, ...], tuple[Node, ...], pc.Expression]] = []

    # ------------------------------------------------------------------ entry points
    def translate(self) -> pc.Expression:
        try:
            try:
                return self._translate()
            except RecursionError:
                raise too_deep("filter", self.text) from None
        except InvalidInputError as exc:
            # pylance's wording for every rejected filter; tests and users match on it
            exc.reason = f"Invalid user input: {exc.reason}"
            raise exc.with_context() from None

    def _translate(self) -> pc.Expression:
        if not self.text.strip():
            raise InvalidInputError("Invalid SQL filter: the filter string is empty")
        try:
            tree = parse_filter(self.text)
        except SqlglotError as err:
            raise InvalidInputError(f"Invalid SQL filter {self.text!r}: {syntax_detail(err)}") from None
        node = self.visit(tree)
        try:
            self._empty_table().filter(node.expr)
        except pa.ArrowTypeError as err:
            if "must evaluate to bool" in str(err):
                raise InvalidInputError(f"Filter {self.text!r} does not return a boolean") from None
            raise self.diagnosed(err) from None
        except (pa.ArrowException, TypeError, ValueError) as err:
            raise self.diagnosed(err) from None
        return node.expr

    def _invalid(self, err: Exception | str, column: str | None = None) -> InvalidInputError:
        return InvalidInputError(f"Invalid SQL filter {self.text!r}: {err}", column=column)

    def diagnosed(self, err: Exception) -> InvalidInputError:
        """The error of an expression pyarrow cannot bind, naming the first operation (innermost
        first) whose operand types it refuses, with those operands and their types."""
        for function, sources, nodes, expr in self._operations:
            try:
                pads.dataset(self._empty_table()).to_table(columns={"v": expr})
                continue
            except (pa.ArrowException, TypeError, ValueError):
                pass
            try:
                sides = [operand(source, str(node.expr), self._type_of(node)) for source, node in zip(sources, nodes)]
            except InvalidInputError:
                continue  # an operand is itself wrong: an inner operation names it
            column = next((side.column for side in sides if side.column is not None), None)
            return self._invalid(type_mismatch(function, sides), column=column)
        return self._invalid(arrow_detail(err))

    def _record(self, function: str, sources: tuple[exp.Expr | None, ...], nodes: tuple[Node, ...],
                expr: pc.Expression) -> Node:
        self._operations.append((function, sources, nodes, expr))
        return Node(expr)

    def _unsupported(self, what: str) -> InvalidInputError:
        return InvalidInputError(f"Unsupported construct in SQL filter {self.text!r}: {what}")

    def _empty_table(self) -> pa.Table:
        if self._empty is None:
            self._empty = self._full_schema.empty_table()
        return self._empty

    def _type_of(self, node: Node) -> pa.DataType:
        """Arrow type of a sub-expression, computed by projecting it over an empty table."""
        if node.dtype is None:
            try:
                result = pads.dataset(self._empty_table()).to_table(columns={"v": node.expr})
            except (pa.ArrowException, TypeError, ValueError) as err:
                raise self.diagnosed(err) from None
            node.dtype = result.schema.field("v").type
        return node.dtype

    # ------------------------------------------------------------------ dispatch
    def visit(self, node: exp.Expr) -> Node:
        handler: Callable[[Any], Node] | None = getattr(self, f"_visit_{type(node).__name__}", None)
        if handler is not None:
            return handler(node)
        if type(node) in _COMPARISONS:
            left, right = self.visit(node.this), self.visit(node.expression)
            return self._compare(_COMPARISONS[type(node)], left, right, (node.this, node.expression))
        if type(node) in _ARITHMETIC:
            return self._arithmetic(_ARITHMETIC[type(node)], node)
        if type(node) in _UNARY_FUNCTIONS:
            return Node(pc.Expression._call(_UNARY_FUNCTIONS[type(node)], [self.visit(node.this).expr]))
        if isinstance(node, exp.Func):
            raise self._unsupported(f"function {node.sql()}")
        raise self._unsupported(f"{type(node).__name__} ({node.sql()})")

    # ------------------------------------------------------------------ leaves
    def _visit_Column(self, node: exp.Column) -> Node:
        return self._field_path([(p.name, bool(p.args.get("quoted"))) for p in node.parts])

    def _visit_Dot(self, node: exp.Dot) -> Node:
        # sqlglot nests paths deeper than four parts as Dot(Column, Identifier).
        path: list[tuple[str, bool]] = []
        current: exp.Expression = node
        while isinstance(current, exp.Dot):
            ident = current.expression
            if not isinstance(ident, exp.Identifier):
                raise self._unsupported(f"field access {current.sql()}")
            path.insert(0, (ident.name, bool(ident.args.get("quoted"))))
            current = current.this
        if not isinstance(current, exp.Column):
            raise self._unsupported(f"field access {node.sql()}")
        head = [(p.name, bool(p.args.get("quoted"))) for p in current.parts]
        return self._field_path(head + path)

    def _visit_Bracket(self, node: exp.Bracket) -> Node:
        keys = node.expressions
        numeric = isinstance(keys[0], exp.Neg) and isinstance(keys[0].this, exp.Literal) if len(keys) == 1 else False
        if len(keys) == 1 and (numeric or isinstance(keys[0], exp.Literal) and not keys[0].is_string):
            return self._list_element(self.visit(node.this), self.visit(keys[0]))  # list[1]: 1-based
        if len(keys) != 1 or not (isinstance(keys[0], exp.Literal) and keys[0].is_string):
            raise self._unsupported(f"subscript {node.sql()} (only struct['field'] is supported)")
        if not isinstance(node.this, exp.Column):
            return self._struct_field(self.visit(node.this), keys[0].name, node)  # e.g. list[1]['x']
        path = [(p.name, bool(p.args.get("quoted"))) for p in node.this.parts]
        return self._field_path(path + [(keys[0].name, True)])

    def _struct_field(self, value: Node, name: str, node: exp.Expression) -> Node:
        """Field ``name`` of a struct-typed sub-expression (a list element, a function result)."""
        dtype = self._type_of(value)
        if not pa.types.is_struct(dtype):
            raise self._unsupported(f"subscript on {node.this.sql()} (not a struct: {dtype})")
        index = dtype.get_field_index(name)
        if index < 0:
            raise self._invalid(f"field {name!r} not found in {node.this.sql()} ({dtype})")
        return Node(pc.struct_field(value.expr, [index]), dtype=dtype.field(index).type)

    def _field_path(self, path: list[tuple[str, bool]]) -> Node:
        (first, quoted), rest = path[0], path[1:]
        name = self._resolve_top_level(first, quoted)
        self.referenced.add(name)
        dtype = self._full_schema.field(name).type
        names = [name]
        for child, _ in rest:
            if not pa.types.is_struct(dtype) or dtype.get_field_index(child) < 0:
                raise self._invalid(
                    f"field {child!r} not found in struct column {'.'.join(names)} ({dtype})",
                    column=".".join(names),
                )
            dtype = dtype.field(child).type
            names.append(child)
        return Node(pc.field(*names), dtype=dtype)

    def _resolve_top_level(self, name: str, quoted: bool) -> str:
        names = self._full_schema.names
        if name in names:
            return name
        if not quoted:
            # Lance resolves unquoted identifiers case-insensitively; backticks are exact.
            folded = [n for n in names if n.lower() == name.lower()]
            if len(folded) == 1:
                return folded[0]
        available = ", ".join(self.schema.names + [n for n in SYSTEM_COLUMNS if n not in self.schema.names])
        raise InvalidInputError(
            f"No field named {name}. Unknown column {name!r} in SQL filter {self.text!r}; "
            f"available columns: {available}",
            column=name,
        )

    def _visit_Literal(self, node: exp.Literal) -> Node:
        if node.is_string:
            return literal_node(pa.scalar(node.this, pa.string()))
        text = node.this
        try:
            value: int | float = int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                raise self._invalid(f"{text!r} is not a supported number") from None
        # Like DataFusion: integers that do not fit in int64 become float64.
        if isinstance(value, int) and not -(2**63) <= value < 2**63:
            value = float(value)
        return literal_node(pa.scalar(value, pa.int64() if isinstance(value, int) else pa.float64()))

    def _visit_Boolean(self, node: exp.Boolean) -> Node:
        return literal_node(pa.scalar(bool(node.this), pa.bool_()))

    def _visit_Null(self, node: exp.Null) -> Node:
        return literal_node(pa.scalar(None))

    def _visit_Paren(self, node: exp.Paren) -> Node:
        return self.visit(node.this)

    # ------------------------------------------------------------------ logic
    def _visit_And(self, node: exp.And) -> Node:
        return self._logical_chain(node, exp.And, pc.and_kleene)

    def _visit_Or(self, node: exp.Or) -> Node:
        return self._logical_chain(node, exp.Or, pc.or_kleene)

    def _logical_chain(
        self, node: exp.Expression, kind: type[exp.Expression],
        combine: Callable[[pc.Expression, pc.Expression], pc.Expression],
    ) -> Node:
        """``a OR b OR c ...`` flattened without recursion and recombined as a balanced tree.

        Filters built from partition keys or ID lists chain thousands of terms; sqlglot nests them
        one level per term, which a recursive walk cannot follow past Python's recursion limit.
        Kleene AND/OR are associative and commutative, so regrouping keeps the result, and the
        balanced tree keeps the Arrow expression's depth logarithmic in the number of terms.
        """
        operands: list[pc.Expression] = []
        pending = [node]
        while pending:
            current = pending.pop()
            while isinstance(current, exp.Paren) and isinstance(current.this, kind):
                current = current.this
            if isinstance(current, kind):
                pending.extend([current.expression, current.this])  # `this` is visited first
            else:
                operands.append(self.visit(current).expr)
        while len(operands) > 1:
            pairs = range(0, len(operands) - 1, 2)
            combined = [combine(operands[i], operands[i + 1]) for i in pairs]
            operands = combined + operands[len(combined) * 2:]
        return Node(operands[0])

    def _visit_Not(self, node: exp.Not) -> Node:
        return Node(pc.invert(self.visit(node.this).expr))

    def _visit_Is(self, node: exp.Is) -> Node:
        operand = self.visit(node.this)
        target = node.expression
        if isinstance(target, exp.Null):
            return Node(pc.is_null(operand.expr))
        if isinstance(target, exp.Boolean):
            # x IS TRUE / IS FALSE never yield NULL: a NULL operand counts as "not matched".
            value = operand.expr if target.this else pc.invert(operand.expr)
            return Node(pc.coalesce(value, pa.scalar(False)))
        raise self._unsupported(f"IS {target.sql()}")

    def _visit_NullSafeEQ(self, node: exp.NullSafeEQ) -> Node:
        left, right = self.visit(node.this), self.visit(node.expression)
        eq = self._compare("equal", left, right).expr
        both_null = pc.and_kleene(pc.is_null(left.expr), pc.is_null(right.expr))
        return Node(pc.coalesce(eq, both_null))

    def _visit_NullSafeNEQ(self, node: exp.NullSafeNEQ) -> Node:
        same = exp.NullSafeEQ(this=node.this.copy(), expression=node.expression.copy())  # the cached tree stays as parsed
        return Node(pc.invert(self._visit_NullSafeEQ(same).expr))

    # ------------------------------------------------------------------ comparisons
    def _compare(self, function: str, left: Node, right: Node,
                 sources: tuple[exp.Expr | None, exp.Expr | None] = (None, None)) -> Node:
        left, right = self._coerce_pair(left, right)
        by_total_order = self._float_compare(function, left, right)
        if by_total_order is not None:
            return by_total_order
        return self._record(function, sources, (left, right), pc.Expression._call(function, [left.expr, right.expr]))

    def _float_compare(self, function: str, left: Node, right: Node) -> Node | None:
        """A comparison involving floats, by DataFusion's totalOrder (see ``sql.floats``)."""
        sides = [(n.expr, self._type_of(n), n.scalar) for n in (left, right)]
        expr = compare_floats(function, sides[0], sides[1])
        return None if expr is None else Node(expr)

    def _visit_Between(self, node: exp.Between) -> Node:
        if node.args.get("symmetric"):
            raise self._unsupported("BETWEEN SYMMETRIC")
        value = self.visit(node.this)
        low = self._compare("greater_equal", value, self.visit(node.args["low"]), (node.this, node.args["low"]))
        high = self._compare("less_equal", value, self.visit(node.args["high"]), (node.this, node.args["high"]))
        return Node(pc.and_kleene(low.expr, high.expr))

    def _visit_In(self, node: exp.In) -> Node:
        if any(node.args.get(key) is not None for key in ("query", "unnest", "field")):
            raise self._unsupported(f"IN with a subquery ({node.sql()})")
        value = self.visit(node.this)
        items = [self.visit(item) for item in node.expressions]
        if not items:
            raise self._unsupported("empty IN list")
        if value.is_literal or not all(item.is_literal for item in items):
            return self._or_equalities(value, items, node)
        target = self._type_of(value)
        coerced = [self._coerce_literal(item, target).literal for item in items]
        for scalar, source in zip(coerced, node.expressions):
            # a text column against a number (or the reverse): pylance refuses it, a cast would
            # silently compare "1" with 1
            if scalar.is_valid and ((is_text(target) and is_number(scalar.type))
                                    or (is_number(target) and is_text(scalar.type))):
                sides = [operand(node.this, "", target), operand(source, str(scalar), scalar.type)]
                raise self._invalid(type_mismatch("equal", sides), column=sides[0].column)
        has_null = any(not s.is_valid for s in coerced)
        values = [s for s in coerced if s.is_valid]
        if not values:
            return Node(pc.scalar(_NULL_BOOL))
        if is_float(target) and all(is_number(s.type) for s in values):
            keys = pa.array([literal_key(float(s.as_py()), target) for s in values], pa.int64())
            found = pc.is_in(order_key(value.expr, target, zeros_equal=True), value_set=keys, skip_nulls=True)
            result = pc.if_else(pc.is_null(value.expr), pc.scalar(_NULL_BOOL), found)
            if has_null:
                result = pc.if_else(result, pc.scalar(True), pc.scalar(_NULL_BOOL))
            return Node(result)
        try:
            # Safe scalar casts: 2.5 must not silently become 2 in an int value set.
            value_set = pa.array([s.cast(target) for s in values], type=target)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            # Literals of another type (e.g. 2.5 against an int column): compare one by one.
            return self._or_equalities(value, items, node)
        found = pc.is_in(value.expr, value_set=value_set, skip_nulls=True)
        # SQL: NULL IN (...) is NULL; x IN (.., NULL) is NULL rather than FALSE when x is not found.
        result = pc.if_else(pc.is_null(value.expr), pc.scalar(_NULL_BOOL), found)
        if has_null:
            result = pc.if_else(result, pc.scalar(True), pc.scalar(_NULL_BOOL))
        return Node(result)

    def _or_equalities(self, value: Node, items: list[Node], node: exp.In) -> Node:
        # An OR of equalities gives SQL's NULL semantics for IN directly.
        pairs = list(zip(items, node.expressions))
        result = self._compare("equal", value, pairs[0][0], (node.this, pairs[0][1])).expr
        for item, source in pairs[1:]:
            result = pc.or_kleene(result, self._compare("equal", value, item, (node.this, source)).expr)
        return Node(result)

    # ------------------------------------------------------------------ LIKE
    def _visit_Like(
        self, node: exp.Expression, ignore_case: bool = False, escape: str | None = None
    ) -> Node:
        value = self.visit(node.this)
        pattern = self.visit(node.expression)
        if not pattern.is_literal:
            raise self._unsupported(f"LIKE with a non-literal pattern ({node.sql()})")
        if not pattern.literal.is_valid:
            return Node(pc.scalar(_NULL_BOOL))
        text = pattern.literal.as_py()
        if not isinstance(text, str):
            raise self._invalid(f"LIKE pattern must be a string, got {pattern.literal.type}")
        if escape is not None and escape != "\\":
            text = _rewrite_escape(text, escape)
        expr = pc.match_like(value.expr, pattern=text, ignore_case=ignore_case)
        if node.args.get("negate"):
            expr = pc.invert(expr)
        return Node(expr)

    def _visit_ILike(self, node: exp.ILike) -> Node:
        return self._visit_Like(node, ignore_case=True)

    def _visit_Escape(self, node: exp.Escape) -> Node:
        like, escape = node.this, node.expression
        if not isinstance(like, (exp.Like, exp.ILike)):
            raise self._unsupported(f"ESCAPE on {type(like).__name__}")
        if not (isinstance(escape, exp.Literal) and escape.is_string and len(escape.this) == 1):
            raise self._invalid("the ESCAPE character must be a single-character string literal")
        return self._visit_Like(like, ignore_case=isinstance(like, exp.ILike), escape=escape.this)

    # ------------------------------------------------------------------ arithmetic, casts, functions
    def _arithmetic(self, function: str, node: exp.Expr) -> Node:
        left, right = self.visit(node.this), self.visit(node.expression)
        if left.is_literal and right.is_literal and left.literal.is_valid and right.literal.is_valid:
            # Fold constants so that e.g. `x = 1 + 1` still compares a literal with the column.
            try:
                return literal_node(pc.call_function(function, [left.literal, right.literal]))
            except (pa.ArrowException, TypeError) as err:
                raise self._invalid(err) from None
        # Numeric literals next to a decimal become small decimals; pyarrow's int64 -> decimal(19, 0)
        # promotion would overflow the result precision of narrow decimal columns.
        if left.is_literal and not right.is_literal and pa.types.is_decimal(self._type_of(right)):
            left = self._coerce_literal(left, self._type_of(right))
        elif right.is_literal and not left.is_literal and pa.types.is_decimal(self._type_of(left)):
            right = self._coerce_literal(right, self._type_of(left))
        return self._record(function, (node.this, node.expression), (left, right),
                            pc.Expression._call(function, [left.expr, right.expr]))

    def _visit_Neg(self, node: exp.Neg) -> Node:
        operand = self.visit(node.this)
        if operand.is_literal and operand.literal.is_valid:
            try:
                return literal_node(pc.negate_checked(operand.literal))
            except (pa.ArrowException, TypeError) as err:
                raise self._invalid(err) from None
        return Node(pc.negate(operand.expr))

    def _visit_DPipe(self, node: exp.DPipe) -> Node:
        left, right = self.visit(node.this), self.visit(node.expression)
        return Node(pc.binary_join_element_wise(left.expr, right.expr, pc.scalar("")))

    def _visit_Cast(self, node: exp.Cast) -> Node:
        return self._cast(self.visit(node.this), self._arrow_type(node.args["to"]))

    def _cast(self, operand: Node, target: pa.DataType) -> Node:
        """SQL CAST semantics (also DataFusion's arrow_cast)."""
        if operand.is_literal:
            scalar = operand.literal
            if not scalar.is_valid:
                return literal_node(pa.scalar(None, target))
            if pa.types.is_string(scalar.type) and parses_from_string(target):
                return literal_node(self._parse_literal(scalar.as_py(), target))
            try:
                return literal_node(scalar.cast(target))
            except (pa.ArrowException, TypeError) as err:
                raise self._invalid(f"cannot cast {scalar.as_py()!r} to {target}: {err}") from None
        source = self._type_of(operand)
        # SQL CAST(float AS int) truncates (DataFusion); pyarrow's safe cast would refuse.
        safe = not (pa.types.is_floating(source) and pa.types.is_integer(target))
        return Node(operand.expr.cast(target, safe=safe), dtype=target)

    def _visit_TryCast(self, node: exp.TryCast) -> Node:
        raise self._unsupported("TRY_CAST")

    def _arrow_type(self, dtype: exp.DataType) -> pa.DataType:
        name = dtype.this.name
        params = [p.this for p in dtype.expressions]
        ints = [int(p.this) for p in params if isinstance(p, exp.Literal) and not p.is_string]
        if name in _SIMPLE_TYPES:
            return _SIMPLE_TYPES[name]
        if name in ("TIMESTAMP", "DATETIME", "TIMESTAMPTZ"):
            precision = ints[0] if ints else 6
            if precision not in _TIMESTAMP_UNITS:
                raise self._invalid(f"unsupported timestamp precision {precision} (use 0, 3, 6 or 9)")
            return pa.timestamp(_TIMESTAMP_UNITS[precision], "UTC" if name == "TIMESTAMPTZ" else None)
        if name == "DECIMAL":
            if len(ints) != 2:
                raise self._invalid("DECIMAL needs a precision and a scale, e.g. DECIMAL(10, 2)")
            return (pa.decimal128 if ints[0] <= 38 else pa.decimal256)(ints[0], ints[1])
        raise self._unsupported(f"CAST to type {dtype.sql()}")

    def _visit_Length(self, node: exp.Length) -> Node:
        operand = self.visit(node.this)
        dtype = self._type_of(operand)
        binary = pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype)
        function = "binary_length" if binary else "utf8_length"
        return Node(pc.Expression._call(function, [operand.expr]))

    def _visit_Anonymous(self, node: exp.Anonymous) -> Node:
        name = str(node.this).lower()
        if name == "is_valid" and len(node.expressions) == 1:
            # Legacy Lance spelling of IS NOT NULL.
            return Node(pc.is_valid(self.visit(node.expressions[0]).expr))
        translated = self.anonymous_function(name, node)
        if translated is None:
            raise self._unsupported(f"function {node.this}()")
        return translated

    def _visit_HexString(self, node: exp.HexString) -> Node:
        try:
            return literal_node(pa.scalar(bytes.fromhex(str(node.this)), pa.binary()))
        except ValueError:
            raise self._invalid(f"X'{node.this}' is not a hex string") from None


@functools.lru_cache(maxsize=32)
def parse_filter(text: str) -> exp.Expr:
    """The sqlglot tree of a filter, cached: a scan parses its filter for the filter itself and
    for the index step, and a long ``IN`` list takes sqlglot a good fraction of a second. The
    trees are only read, never modified."""
    return sqlglot.parse_one(text, read=LanceFilterDialect)


def too_deep(what: str, text: str) -> InvalidInputError:
    """A filter or expression nested deeper than the parser's recursion allows."""
    shown = text if len(text) <= 80 else f"{text[:40]}...{text[-20:]}"
    return InvalidInputError(f"Invalid SQL {what} {shown!r} ({len(text)} characters): it nests parentheses or "
                             f"operators too deeply to parse (about 45 levels at most, as in pylance); flatten it, e.g. "
                             f"`x IN (...)` instead of nested ORs")


def _rewrite_escape(pattern: str, escape: str) -> str:
    """Rewrite a LIKE pattern using a custom ESCAPE character into backslash-escape form."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == escape and i + 1 < len(pattern):
            out.append("\\" + pattern[i + 1])
            i += 2
            continue
        out.append("\\\\" if ch == "\\" else ch)
        i += 1
    return "".join(out)
