"""The parts of a SQL filter a scalar index can answer, as a small tree.

``index_terms(filter, schema)`` parses the filter (the dialect of :mod:`.filter`) and keeps its
shape over AND / OR / NOT: a comparison of a column with a literal (``=``, ``<>``, ``<``, ``<=``,
``>``, ``>=``, ``BETWEEN``, ``IN``, ``IS [NOT] NULL``) becomes a :class:`Leaf` holding an index
query (:mod:`lance_format.index.scalar.queries`); anything else is :data:`OPAQUE`. Literals are
coerced to the column's type exactly as the filter itself coerces them (``Translator``), and a
literal whose coerced type is not the column's (``id > 2.5`` on an int column) leaves the term
opaque: the caller only ever narrows the rows it reads with these terms and re-applies the
whole filter, so an opaque term costs speed, never correctness.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp
from sqlglot.errors import SqlglotError

from lance_format.dataset.sql.index_terms_text import text_term
from lance_format.dataset.sql.translate import Translator, parse_filter
from lance_format.errors import InvalidInputError
from lance_format.index.scalar.queries import Equals, IsIn, IsNull, Range, ScalarQuery


@dataclass(frozen=True)
class Leaf:
    """``query`` on the column at ``column`` (a dotted path)."""

    column: str
    query: ScalarQuery


@dataclass(frozen=True)
class And:
    children: tuple[Term, ...]


@dataclass(frozen=True)
class Or:
    children: tuple[Term, ...]


@dataclass(frozen=True)
class Not:
    child: Term


class _Opaque:
    def __repr__(self) -> str:
        return "OPAQUE"


OPAQUE = _Opaque()
Term = Leaf | And | Or | Not | _Opaque

_FLIP: dict[type, type] = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE, exp.EQ: exp.EQ, exp.NEQ: exp.NEQ}


def _storage(data_type: pa.DataType) -> pa.DataType:
    return data_type.storage_type if isinstance(data_type, pa.ExtensionType) else data_type


class _Extractor:
    def __init__(self, text: str, schema: pa.Schema) -> None:
        self._translator = Translator(text, schema)

    def column(self, node: exp.Expr) -> tuple[str, pa.DataType] | None:
        """The dotted path and type of a plain column reference, else None."""
        if not isinstance(node, exp.Column) or any(not isinstance(p, exp.Identifier) for p in node.parts):
            return None
        try:
            translated = self._translator.visit(node)
        except InvalidInputError:
            return None
        parts = [p.name for p in node.parts]
        parts[0] = self._translator._resolve_top_level(parts[0], bool(node.parts[0].args.get("quoted")))
        return ".".join(parts), self._translator._type_of(translated)

    def literal(self, node: exp.Expr, target: pa.DataType) -> pa.Scalar | None:
        """``node`` as a scalar of exactly ``target``'s type, coerced as the filter coerces it."""
        try:
            translated = self._translator.visit(node)
        except InvalidInputError:
            return None
        if not translated.is_literal:
            return None
        try:
            coerced = self._translator._coerce_literal(translated, target).literal
        except (InvalidInputError, pa.ArrowException, ValueError, TypeError):
            return None
        want = _storage(target)
        if not coerced.is_valid:
            return pa.scalar(None, want)
        if coerced.type == want:
            return coerced
        same_family = ((pa.types.is_integer(coerced.type) and pa.types.is_integer(want))
                       or (pa.types.is_integer(coerced.type) and pa.types.is_floating(want))
                       or (pa.types.is_floating(coerced.type) and pa.types.is_floating(want))
                       or (pa.types.is_string(coerced.type) and pa.types.is_large_string(want))
                       or (pa.types.is_decimal(coerced.type) and pa.types.is_decimal(want)))
        if not same_family:
            return None
        try:
            return coerced.cast(want)  # a safe cast: 2.5 never becomes 2, 300 never an int8
        except (pa.ArrowException, ValueError, TypeError, OverflowError):
            return None

    def term(self, node: exp.Expr) -> Term:
        if isinstance(node, exp.Paren):
            return self.term(node.this)
        if isinstance(node, exp.And):
            return And(_merge_ranges(self._conjuncts(node)))
        if isinstance(node, exp.Or):
            return Or((self.term(node.this), self.term(node.expression)))
        if isinstance(node, exp.Not):
            inner = self.term(node.this)
            return OPAQUE if inner is OPAQUE else Not(inner)
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            found = self.column(node.this)
            return OPAQUE if found is None else Leaf(found[0], IsNull())
        if isinstance(node, exp.Between) and not node.args.get("symmetric"):
            found = self.column(node.this)
            if found is None:
                return OPAQUE
            low, high = self.literal(node.args["low"], found[1]), self.literal(node.args["high"], found[1])
            if low is None or high is None:
                return OPAQUE
            return Leaf(found[0], Range(low, high, True, True))
        if isinstance(node, exp.In):
            return self._in(node)
        if type(node) in _FLIP:
            return self._comparison(node)
        found = text_term(self, node)  # LABEL_LIST / NGRAM terms (index_terms_text)
        return OPAQUE if found is None else Leaf(*found)

    def _conjuncts(self, node: exp.Expr) -> list[Term]:
        """The terms of a chain of ANDs (parentheses looked through)."""
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.And):
            return self._conjuncts(node.this) + self._conjuncts(node.expression)
        return [self.term(node)]

    def _in(self, node: exp.In) -> Term:
        if any(node.args.get(key) is not None for key in ("query", "unnest", "field")) or not node.expressions:
            return OPAQUE
        found = self.column(node.this)
        if found is None:
            return OPAQUE
        fast = _plain_literals(node.expressions, found[1])
        if fast is not None:
            return Leaf(found[0], IsIn(fast))
        values = [self.literal(item, found[1]) for item in node.expressions]
        if any(v is None for v in values):
            return OPAQUE
        valid = [v for v in values if v is not None and v.is_valid]
        return Leaf(found[0], IsIn(pa.array([v.as_py() for v in valid], type=_storage(found[1]))))

    def _comparison(self, node: exp.Expr) -> Term:
        kind: type = type(node)
        left, right = node.this, node.expression
        found = self.column(left)
        if found is None:
            found = self.column(right)
            if found is None:
                return OPAQUE
            kind, right = _FLIP[kind], left
        value = self.literal(right, found[1])
        if value is None:
            return OPAQUE
        column = found[0]
        if kind is exp.EQ:
            return Leaf(column, Equals(value))
        if kind is exp.NEQ:
            return Not(Leaf(column, Equals(value)))
        if kind in (exp.GT, exp.GTE):
            return Leaf(column, Range(lower=value, lower_inclusive=kind is exp.GTE))
        return Leaf(column, Range(upper=value, upper_inclusive=kind is exp.LTE))


def _plain_literals(items: list[exp.Expr], target: pa.DataType) -> pa.Array | None:
    """A long ``IN`` list of plain integer or string literals against an integer or string
    column, converted at once (the general path coerces literal by literal); None otherwise."""
    want = _storage(target)
    if len(items) < 16 or not all(isinstance(i, exp.Literal) for i in items):
        return None
    if pa.types.is_integer(want) and not any(i.is_string for i in items):
        texts = [i.this for i in items]
        if not all(t.lstrip("-").isdigit() for t in texts):
            return None
        try:
            return pa.array([int(t) for t in texts], pa.int64()).cast(want)  # safe: out of range refuses
        except (pa.ArrowException, OverflowError):
            return None
    if (pa.types.is_string(want) or pa.types.is_large_string(want)) and all(i.is_string for i in items):
        return pa.array([i.this for i in items], want)
    return None


def _range_of(term: Term) -> Range:
    assert isinstance(term, Leaf) and isinstance(term.query, Range)  # recorded as such below
    return term.query


def _merge_ranges(terms: list[Term]) -> tuple[Term, ...]:
    """``col >= a AND col < b`` as one range (one index search instead of two half-open ones)."""
    out: list[Term] = []
    open_upper: dict[str, int] = {}  # column -> position in out of a range with only a lower bound
    open_lower: dict[str, int] = {}  # ... with only an upper bound
    for term in terms:
        if isinstance(term, Leaf) and isinstance(term.query, Range):
            query = term.query
            if query.upper is None and query.lower is not None and term.column in open_lower:
                at = open_lower.pop(term.column)
                other = _range_of(out[at])
                out[at] = Leaf(term.column, Range(query.lower, other.upper, query.lower_inclusive, other.upper_inclusive))
                continue
            if query.lower is None and query.upper is not None and term.column in open_upper:
                at = open_upper.pop(term.column)
                other = _range_of(out[at])
                out[at] = Leaf(term.column, Range(other.lower, query.upper, other.lower_inclusive, query.upper_inclusive))
                continue
            if query.upper is None and query.lower is not None:
                open_upper.setdefault(term.column, len(out))
            elif query.lower is None and query.upper is not None:
                open_lower.setdefault(term.column, len(out))
        out.append(term)
    return tuple(out)


def index_terms(filter: str, schema: pa.Schema) -> Term:
    """The index-answerable shape of a SQL filter (OPAQUE when none of it is)."""
    try:
        tree = parse_filter(filter)
    except SqlglotError:
        return OPAQUE
    return _Extractor(filter, schema).term(tree)
