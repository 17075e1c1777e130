"""SQL functions of Lance's filter dialect (DataFusion's, as pylance evaluates them).

A mixin of the :class:`~lance_format.dataset.sql.translate.Translator`: one ``_visit_<Node>``
per sqlglot node (or a name in ``_ANONYMOUS`` for functions sqlglot does not know), each
building a ``pyarrow.compute`` expression with DataFusion's semantics: ``concat`` skips nulls,
``round`` rounds half away from zero, ``strpos`` is 1-based with 0 for "not found", list
functions are 1-based, and ``regexp_match`` / ``contains`` in a filter mean "matches".

List functions that pyarrow has no kernel for (``array_has_any``, ``array_contains``,
``array_position``, element access) run as vectorized pyarrow UDFs over the list offsets, so
they stay usable inside any expression the dataset layer evaluates.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from lance_format.dataset.sql.arrow_types import ArrowTypeNameError, parse_arrow_type_name
from lance_format.dataset.sql.floats import is_float, order_key
from lance_format.dataset.sql.json_functions import PATH_FUNCTIONS
from lance_format.dataset.sql.literals import Node, literal_node

_UDFS: set[str] = set()


def _udf(name: str, function: Callable[..., pa.Array], in_types: dict[str, pa.DataType],
         out_type: pa.DataType) -> str:
    """Register a scalar UDF for these argument types once; returns its registered name."""
    key = f"lance_{name}__" + "__".join(str(t) for t in in_types.values())
    if key not in _UDFS:
        def wrapped(ctx: Any, *args: Any) -> pa.Array:
            return function(*args)

        try:
            pc.register_scalar_function(wrapped, key, {"summary": name, "description": name}, in_types, out_type)
        except pa.ArrowKeyError:
            pass  # registered by an earlier translator in this process
        _UDFS.add(key)
    return key


def _lists(array: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, pa.Array, np.ndarray]:
    """A list array's offsets (from 0), flat values and validity."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False))
    offsets = np.asarray(array.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    values = array.values.slice(offsets[0], offsets[-1] - offsets[0])
    return offsets - offsets[0], values, valid


def _per_list_any(hits: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    counts = np.concatenate([[0], np.cumsum(hits, dtype=np.int64)])
    return (counts[offsets[1:]] - counts[offsets[:-1]]) > 0


def _has_any(lists: pa.Array, needles: pa.Scalar) -> pa.Array:
    offsets, values, valid = _lists(lists)
    wanted = needles.values if isinstance(needles, pa.ListScalar) else pa.array([needles.as_py()])
    hits = np.asarray(pc.is_in(values, value_set=wanted.cast(values.type)).fill_null(False).to_numpy(
        zero_copy_only=False))
    return pa.array(_per_list_any(hits, offsets), pa.bool_(), mask=~valid)


def _contains(lists: pa.Array, needle: pa.Array | pa.Scalar) -> pa.Array:
    offsets, values, valid = _lists(lists)
    if isinstance(needle, pa.Scalar):
        if not needle.is_valid:
            return pa.nulls(len(valid), pa.bool_())
        hits = np.asarray(pc.equal(values, needle.cast(values.type)).fill_null(False).to_numpy(zero_copy_only=False))
        return pa.array(_per_list_any(hits, offsets), pa.bool_(), mask=~valid)
    rows = np.repeat(np.arange(len(valid)), np.diff(offsets))
    repeated = needle.take(pa.array(rows)) if len(rows) else needle.slice(0, 0)
    hits = np.asarray(pc.equal(values, repeated.cast(values.type)).fill_null(False).to_numpy(zero_copy_only=False))
    return pa.array(_per_list_any(hits, offsets), pa.bool_(), mask=~valid)


def _position(lists: pa.Array, needle: pa.Scalar) -> pa.Array:
    offsets, values, valid = _lists(lists)
    hits = np.asarray(pc.equal(values, needle.cast(values.type)).fill_null(False).to_numpy(zero_copy_only=False))
    first = np.full(len(valid), -1, dtype=np.int64)
    where = np.flatnonzero(hits)
    owners = np.searchsorted(offsets, where, side="right") - 1
    # the first hit of each list: reversed assignment keeps the smallest index per owner
    first[owners[::-1]] = (where - offsets[owners])[::-1]
    found = (first >= 0) & valid
    return pa.array(first + 1, pa.uint64(), mask=~found)


def _element(lists: pa.Array, index: pa.Scalar) -> pa.Array:
    offsets, values, valid = _lists(lists)
    lengths = np.diff(offsets)
    position = int(index.as_py()) if index.is_valid else 0
    # 1-based; negative counts from the end (DataFusion); out of range is null
    zero_based = np.full(len(lengths), position - 1) if position > 0 else lengths + position
    ok = valid & (zero_based >= 0) & (zero_based < lengths) & (position != 0)
    take = np.where(ok, offsets[:-1] + zero_based, 0)
    if len(values) == 0:
        return pa.nulls(len(lengths), values.type)
    result = values.take(pa.array(take))
    return pc.if_else(pa.array(ok), result, pa.scalar(None, values.type))


class FunctionTranslations:
    """Mixed into ``Translator``: the dialect's functions (see the module docstring)."""

    # provided by Translator
    visit: Callable[[exp.Expr], Node]
    _type_of: Callable[[Node], pa.DataType]
    _unsupported: Callable[[str], Exception]
    _invalid: Callable[..., Exception]
    _cast: Callable[[Node, pa.DataType], Node]

    def _args(self, node: exp.Expr) -> list[Node]:
        parts = [node.this] if node.this is not None else []
        parts += [a for a in node.expressions]
        for key in ("expression", "substr", "replacement", "position", "length", "decimals", "fill_pattern"):
            if isinstance(node.args.get(key), exp.Expr):
                parts.append(node.args[key])
        return [self.visit(p) for p in parts]

    def _node(self, expr: pc.Expression, dtype: pa.DataType | None = None) -> Node:
        return Node(expr, dtype=dtype)

    def _literal_value(self, node: Node, what: str) -> Any:
        if not node.is_literal:
            raise self._invalid(f"{what} must be a constant")
        return node.literal.as_py()

    # -- strings ---------------------------------------------------------------------------------
    def _visit_CurrentDate(self, node: exp.CurrentDate) -> Node:
        # DataFusion's current_date() is the UTC date when the query is planned
        today = datetime.datetime.now(datetime.UTC).date()
        return self._node(pc.scalar(pa.scalar(today, pa.date32())))

    def _visit_CurrentTimestamp(self, node: exp.CurrentTimestamp) -> Node:
        return self._now()

    def _now(self) -> Node:
        now = datetime.datetime.now(datetime.UTC)
        return self._node(pc.scalar(pa.scalar(now, pa.timestamp("ns", "+00:00"))))

    def _visit_StartsWith(self, node: exp.StartsWith) -> Node:
        value, prefix = self.visit(node.this), self.visit(node.expression)
        return self._node(pc.starts_with(value.expr, pattern=self._literal_value(prefix, "starts_with's prefix")))

    def _visit_EndsWith(self, node: exp.EndsWith) -> Node:
        value, suffix = self.visit(node.this), self.visit(node.expression)
        return self._node(pc.ends_with(value.expr, pattern=self._literal_value(suffix, "ends_with's suffix")))

    def _visit_Contains(self, node: exp.Contains) -> Node:
        value, part = self.visit(node.this), self.visit(node.expression)
        return self._node(pc.match_substring(value.expr, pattern=self._literal_value(part, "contains' argument")))

    def _visit_RegexpLike(self, node: exp.RegexpLike) -> Node:
        value, pattern = self.visit(node.this), self.visit(node.expression)
        return self._node(pc.match_substring_regex(value.expr, pattern=self._literal_value(pattern, "a pattern")))

    def _visit_Concat(self, node: exp.Concat) -> Node:
        parts = [self.visit(e) for e in node.expressions]
        strings = [p.expr.cast(pa.string()) if not pa.types.is_string(self._type_of(p)) else p.expr for p in parts]
        # DataFusion's concat treats null arguments as empty strings
        return self._node(pc.binary_join_element_wise(*strings, pc.scalar(""), null_handling="replace",
                                                      null_replacement=""), pa.string())

    def _visit_Replace(self, node: exp.Replace) -> Node:
        value, old, new = self._args(node)
        return self._node(pc.replace_substring(value.expr, pattern=self._literal_value(old, "replace's pattern"),
                                               replacement=self._literal_value(new, "replace's replacement")))

    def _visit_RegexpReplace(self, node: exp.RegexpReplace) -> Node:
        value = self.visit(node.this)
        pattern = self._literal_value(self.visit(node.expression), "a pattern")
        replacement = self._literal_value(self.visit(node.args["replacement"]), "a replacement")
        # the flags are the fourth argument (sqlglot files it under "position")
        modifiers = node.args.get("modifiers") or node.args.get("position")
        flags = str(self._literal_value(self.visit(modifiers), "flags")) if modifiers is not None else ""
        # DataFusion replaces the first match unless the flags hold 'g'; it writes groups as ${1}
        replacement = replacement.replace("${", "\\").replace("}", "") if "${" in replacement else replacement
        return self._node(pc.replace_substring_regex(value.expr, pattern=pattern, replacement=replacement,
                                                     max_replacements=None if "g" in flags else 1))

    def _visit_Left(self, node: exp.Left) -> Node:
        value, count = self.visit(node.this), self._literal_value(self.visit(node.expression), "left's length")
        return self._node(pc.utf8_slice_codeunits(value.expr, start=0, stop=max(int(count), 0)))

    def _visit_Right(self, node: exp.Right) -> Node:
        value, count = self.visit(node.this), int(self._literal_value(self.visit(node.expression), "a length"))
        if count <= 0:
            return self._node(pc.utf8_slice_codeunits(value.expr, start=0, stop=0))
        return self._node(pc.utf8_slice_codeunits(value.expr, start=-count))

    def _visit_StrPosition(self, node: exp.StrPosition) -> Node:
        value, part = self.visit(node.this), self.visit(node.args["substr"])
        pattern = self._literal_value(part, "strpos' argument")
        found = pc.greater_equal(pc.find_substring(value.expr, pattern=pattern), 0)
        # a character position (find_substring counts bytes): the length of the text before it
        before = pc.utf8_length(pc.list_element(pc.split_pattern(value.expr, pattern=pattern, max_splits=1), 0))
        return self._node(pc.if_else(found, pc.add(before, 1), 0))  # 1-based, 0 when absent

    def _visit_Reverse(self, node: exp.Reverse) -> Node:
        return self._node(pc.utf8_reverse(self.visit(node.this).expr))

    def _visit_Pad(self, node: exp.Pad) -> Node:
        value = self.visit(node.this)
        width = int(self._literal_value(self.visit(node.expression), "a pad width"))
        fill = node.args.get("fill_pattern")
        padding = self._literal_value(self.visit(fill), "a pad string") if fill is not None else " "
        if len(padding) != 1:
            raise self._unsupported("lpad/rpad with a padding of more than one character")
        kernel = pc.utf8_lpad if node.args.get("is_left") else pc.utf8_rpad
        # DataFusion truncates strings longer than the width
        return self._node(pc.utf8_slice_codeunits(kernel(value.expr, width=width, padding=padding), 0, width))

    def _visit_Initcap(self, node: exp.Initcap) -> Node:
        return self._node(pc.utf8_title(self.visit(node.this).expr))

    def _visit_BitLength(self, node: exp.BitLength) -> Node:
        return self._node(pc.multiply(pc.binary_length(self.visit(node.this).expr), 8))

    # -- nulls and NaN ---------------------------------------------------------------------------
    def _visit_IsNan(self, node: exp.IsNan) -> Node:
        return self._node(pc.is_nan(self.visit(node.this).expr))

    def _visit_Coalesce(self, node: exp.Coalesce) -> Node:
        parts = [self.visit(node.this)] + [self.visit(e) for e in node.expressions]
        return self._node(pc.coalesce(*[p.expr for p in parts]))

    def _signed_float_keys(self, parts: list[Node]) -> tuple[pa.DataType, list[pc.Expression]] | None:
        """totalOrder keys (-0.0 below 0.0) of numeric operands when one is a float, else None."""
        types = [self._type_of(p) for p in parts]
        if not any(is_float(t) for t in types) or not all(
                pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_null(t) for t in types):
            return None
        common = pa.float32() if all(pa.types.is_float32(t) for t in types) else pa.float64()
        return common, [order_key(p.expr.cast(common), common, zeros_equal=False) for p in parts]

    def _visit_Nullif(self, node: exp.Nullif) -> Node:
        value, other = self.visit(node.this), self.visit(node.expression)
        dtype = self._type_of(value)
        keyed = self._signed_float_keys([value, other])
        if keyed is not None:  # DataFusion: NaN equals NaN, and -0.0 differs from 0.0 even for a literal
            equal = pc.equal(*keyed[1])
        else:
            equal = self._compare("equal", value, other).expr  # type: ignore[attr-defined]  # Translator's
        same = pc.coalesce(equal, pc.scalar(False))  # null compares as "differs"
        return self._node(pc.if_else(same, pc.scalar(pa.scalar(None, dtype)), value.expr), dtype)

    def _extreme(self, parts: list[Node], pick: str) -> Node:
        """greatest/least skipping nulls; floats by totalOrder like DataFusion (NaN above inf)."""
        keyed = self._signed_float_keys(parts)
        if keyed is None:
            kernel = pc.max_element_wise if pick == "greater" else pc.min_element_wise
            return self._node(kernel(*[p.expr for p in parts], skip_nulls=True))
        common, keys = keyed
        best, best_key = parts[0].expr.cast(common), keys[0]
        for part, key in zip(parts[1:], keys[1:]):
            better = pc.or_kleene(pc.is_null(best_key), pc.coalesce(pc.Expression._call(pick, [key, best_key]),
                                                                    pc.scalar(False)))
            better = pc.and_kleene(better, pc.is_valid(key))
            best = pc.if_else(better, part.expr.cast(common), best)
            best_key = pc.if_else(better, key, best_key)
        return self._node(best, common)

    def _visit_Greatest(self, node: exp.Greatest) -> Node:
        return self._extreme([self.visit(node.this)] + [self.visit(e) for e in node.expressions], "greater")

    def _visit_Least(self, node: exp.Least) -> Node:
        return self._extreme([self.visit(node.this)] + [self.visit(e) for e in node.expressions], "less")

    # -- math ------------------------------------------------------------------------------------
    def _visit_Round(self, node: exp.Round) -> Node:
        value = self.visit(node.this)
        decimals = node.args.get("decimals")
        ndigits = int(self._literal_value(self.visit(decimals), "round's digits")) if decimals is not None else 0
        return self._node(pc.round(value.expr, ndigits=ndigits, round_mode="half_towards_infinity"))

    def _visit_Pow(self, node: exp.Pow) -> Node:
        base, exponent = self.visit(node.this), self.visit(node.expression)
        return self._node(pc.power(base.expr.cast(pa.float64()), exponent.expr.cast(pa.float64())))

    def _visit_Sqrt(self, node: exp.Sqrt) -> Node:
        return self._node(pc.sqrt(self.visit(node.this).expr.cast(pa.float64())))

    def _visit_Ln(self, node: exp.Ln) -> Node:
        return self._node(pc.ln(self.visit(node.this).expr.cast(pa.float64())))

    def _visit_Exp(self, node: exp.Exp) -> Node:
        return self._node(pc.exp(self.visit(node.this).expr.cast(pa.float64())))

    def _visit_Log(self, node: exp.Log) -> Node:
        if node.expression is None:  # log(x) is log10 in DataFusion
            return self._node(pc.log10(self.visit(node.this).expr.cast(pa.float64())))
        base, value = self.visit(node.this), self.visit(node.expression)
        return self._node(pc.logb(value.expr.cast(pa.float64()), base.expr.cast(pa.float64())))

    def _visit_Ceil(self, node: exp.Ceil) -> Node:
        return self._node(pc.ceil(self.visit(node.this).expr))

    def _visit_Floor(self, node: exp.Floor) -> Node:
        return self._node(pc.floor(self.visit(node.this).expr))

    def _visit_Sign(self, node: exp.Sign) -> Node:
        return self._node(pc.sign(self.visit(node.this).expr))

    def _visit_Trunc(self, node: exp.Trunc) -> Node:
        return self._node(pc.trunc(self.visit(node.this).expr))

    # -- lists -----------------------------------------------------------------------------------
    def _visit_Array(self, node: exp.Array) -> Node:
        items = [self.visit(e) for e in node.expressions]
        if not all(i.is_literal for i in items):
            raise self._unsupported("array literals of non-constant values")
        return literal_node(pa.scalar([i.literal.as_py() for i in items]))

    def _list_type(self, node: Node, what: str) -> pa.DataType:
        dtype = self._type_of(node)
        if not (pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or pa.types.is_fixed_size_list(dtype)):
            raise self._invalid(f"{what} needs a list column, got {dtype}")
        if pa.types.is_fixed_size_list(dtype):
            raise self._unsupported(f"{what} over fixed-size lists")
        return dtype

    def _call_udf(self, name: str, function: Callable[..., pa.Array], args: list[Node],
                  out_type: pa.DataType) -> Node:
        types = {f"a{i}": self._type_of(a) for i, a in enumerate(args)}
        registered = _udf(name, function, types, out_type)
        return self._node(pc.Expression._call(registered, [a.expr for a in args]), out_type)

    def _array_has_any(self, lists: Node, needles: Node) -> Node:
        self._list_type(lists, "array_has_any")
        if not needles.is_literal:
            raise self._unsupported("array_has_any with a non-constant list")
        return self._call_udf("array_has_any", _has_any, [lists, needles], pa.bool_())

    def _visit_ArrayContains(self, node: exp.ArrayContains) -> Node:
        lists, needle = self.visit(node.this), self.visit(node.expression)
        self._list_type(lists, "array_contains")
        return self._call_udf("array_contains", _contains, [lists, needle], pa.bool_())

    def _visit_ArrayContainsAll(self, node: exp.ArrayContainsAll) -> Node:
        lists, needles = self.visit(node.this), self.visit(node.expression)
        self._list_type(lists, "array_has_all")
        if not needles.is_literal:
            raise self._unsupported("array_has_all with a non-constant list")
        # each needle as a one-item has_any: a NULL needle matches a null item, as DataFusion's
        # array_has_all does (array_contains(col, NULL) matches nothing)
        one = needles.literal.type
        checks = [self._call_udf("array_has_any", _has_any, [lists, literal_node(pa.scalar([v.as_py()], one))],
                                 pa.bool_()).expr for v in needles.literal.values]
        result = pc.scalar(True)
        for check in checks:
            result = pc.and_kleene(result, check)
        return self._node(result, pa.bool_())

    def _visit_ArraySize(self, node: exp.ArraySize) -> Node:
        lists = self.visit(node.this)
        self._list_type(lists, "array_length")
        return self._node(pc.list_value_length(lists.expr).cast(pa.uint64()), pa.uint64())

    def _visit_ArrayPosition(self, node: exp.ArrayPosition) -> Node:
        lists, needle = self.visit(node.this), self.visit(node.expression)
        self._list_type(lists, "array_position")
        if not needle.is_literal:
            raise self._unsupported("array_position with a non-constant value")
        return self._call_udf("array_position", _position, [lists, needle], pa.uint64())

    def _list_element(self, lists: Node, index: Node) -> Node:
        dtype = self._list_type(lists, "list element access")
        if not index.is_literal:
            raise self._unsupported("list element access with a non-constant index")
        return self._call_udf("array_element", _element, [lists, index], dtype.value_type)

    # -- functions sqlglot leaves anonymous -------------------------------------------------------
    def _json_call(self, name: str, args: list[Node]) -> Node:
        function, out_type = PATH_FUNCTIONS[name]
        arity = 3 if name == "json_array_contains" else 2
        if len(args) != arity:
            raise self._invalid(f"{name} takes {arity} arguments")
        dtype = self._type_of(args[0])
        if isinstance(dtype, pa.BaseExtensionType) and dtype.extension_name == "arrow.json":
            # a decoded arrow.json column (delete/update see these): its JSON text
            args = [self._node(args[0].expr.cast(dtype.storage_type), dtype.storage_type)] + args[1:]
        elif not (pa.types.is_large_binary(dtype) or pa.types.is_binary(dtype)):
            raise self._invalid(f"{name} needs a JSON column (JSONB), got {dtype}")
        if not all(a.is_literal for a in args[1:]):
            raise self._unsupported(f"{name} with a non-constant path, key or value")
        return self._call_udf(name, function, args, out_type)

    def _visit_JSONExtract(self, node: exp.JSONExtract) -> Node:
        if node.expressions:
            raise self._unsupported("json_extract with more than one path")
        return self._json_call("json_extract", [self.visit(node.this), self.visit(node.expression)])

    def _visit_JSONArrayContains(self, node: exp.JSONArrayContains) -> Node:
        needle = node.args.get("json_type")
        parts = [node.this, node.expression] + ([needle] if isinstance(needle, exp.Expr) else [])
        return self._json_call("json_array_contains", [self.visit(p) for p in parts])

    def anonymous_function(self, name: str, node: exp.Anonymous) -> Node | None:
        args = [self.visit(a) for a in node.expressions]
        if name in PATH_FUNCTIONS:
            return self._json_call(name, args)
        if name == "regexp_match" and len(args) == 2:
            return self._node(pc.match_substring_regex(args[0].expr,
                                                       pattern=self._literal_value(args[1], "a pattern")))
        if name == "array_has_any" and len(args) == 2:
            return self._array_has_any(args[0], args[1])
        if name in ("list_contains", "list_has", "array_has") and len(args) == 2:
            self._list_type(args[0], name)
            return self._call_udf("array_contains", _contains, args, pa.bool_())
        if name in ("cardinality", "list_length") and len(args) == 1:
            self._list_type(args[0], name)
            return self._node(pc.list_value_length(args[0].expr).cast(pa.uint64()), pa.uint64())
        if name in ("array_element", "list_element", "array_extract") and len(args) == 2:
            return self._list_element(args[0], args[1])
        if name == "octet_length" and len(args) == 1:
            return self._node(pc.binary_length(args[0].expr.cast(pa.binary())))
        if name == "btrim" and len(args) in (1, 2):
            if len(args) == 1:
                return self._node(pc.utf8_trim_whitespace(args[0].expr))
            return self._node(pc.utf8_trim(args[0].expr, characters=self._literal_value(args[1], "btrim's chars")))
        if name == "arrow_cast" and len(args) == 2:
            type_name = self._literal_value(args[1], "arrow_cast's type name")
            try:
                target = parse_arrow_type_name(str(type_name))
            except ArrowTypeNameError:
                raise self._invalid(f"Unsupported type '{type_name}'. Must be a supported arrow type name such as "
                                    "'Int32' or 'Timestamp(ns)'") from None
            operand = args[0]
            if pa.types.is_date32(target) and pa.types.is_integer(self._type_of(operand)):
                # arrow-rs casts integers to Date32 as day numbers; pyarrow only from int32
                operand = self._cast(operand, pa.int32())
            return self._cast(operand, target)
        if name == "now" and not args:
            return self._now()
        if name == "today" and not args:  # DataFusion's alias of current_date()
            return self._visit_CurrentDate(exp.CurrentDate())
        if name == "to_timestamp" and len(args) == 1:
            dtype = self._type_of(args[0])
            if pa.types.is_integer(dtype):  # seconds since the epoch
                return self._node(pc.multiply(args[0].expr.cast(pa.int64()), 1_000_000_000).cast(pa.timestamp("ns")))
            return self._node(args[0].expr.cast(pa.timestamp("ns")))
        if name == "date_part" and len(args) == 2:
            part = str(self._literal_value(args[0], "date_part's unit")).lower()
            kernels = {"year": pc.year, "month": pc.month, "day": pc.day, "hour": pc.hour, "minute": pc.minute,
                       "second": pc.second, "dow": pc.day_of_week, "doy": pc.day_of_year, "week": pc.iso_week,
                       "quarter": pc.quarter}
            if part not in kernels:
                raise self._unsupported(f"date_part unit {part!r}")
            return self._node(kernels[part](args[1].expr))
        return None
