"""SQL filter predicates (the DataFusion dialect pylance accepts) -> ``pyarrow.compute`` expressions.

``to_expression`` parses a SQL ``WHERE``-clause predicate with sqlglot and translates the tree into a
``pc.Expression`` that ``pyarrow.Table.filter`` / ``pyarrow.dataset`` can evaluate. Semantics follow
Lance's planner (``rust/lance-datafusion/src/planner.rs``):

* Backticks quote identifiers (case-sensitive); double quotes make a *string literal*, like pylance
  (``s = "abc"`` compares with the text ``abc``). Unquoted column names fall back to a
  case-insensitive match; struct fields are matched exactly (``a.b.c``, ``a['b']``).
* SQL three-valued logic (Kleene AND/OR, NULL-propagating comparisons, ``x NOT IN (1, NULL)`` is
  never true). A filter keeps a row only when the predicate is TRUE, which is what
  ``Table.filter`` does with a NULL result.
* LIKE uses ``%``/``_`` wildcards with backslash as the default escape (an ``ESCAPE 'c'`` clause is
  also accepted, which pylance itself rejects).
* String literals compared with date/timestamp/time/decimal columns are converted to the column
  type (pylance rejects these; we accept them). A timestamp literal without a zone offset compared
  with a tz-aware column is read as UTC, like DataFusion; a literal with an offset is converted to
  UTC first.
* Integer ``/`` truncates, ``%`` takes the dividend's sign, float division by zero gives +-inf.
* Floats compare by DataFusion's totalOrder, not IEEE (:mod:`lance_format.dataset.sql.floats`):
  NaN equals NaN and sorts above +inf; against a literal, -0.0 equals 0.0.
* pylance's JSON functions (``json_extract``, ``json_get*``, ``json_exists``,
  ``json_array_contains``, ``json_array_length``) apply to JSON columns
  (:mod:`lance_format.dataset.sql.json_functions`).

A ``pc.Expression`` given as a filter (what DuckDB and Polars push into a scan) is translated into
this dialect where that is exact, the rest kept for pyarrow (:mod:`lance_format.dataset.sql.pushdown`);
``matching_rows`` evaluates predicates over top-level columns by direct kernel calls
(:mod:`lance_format.dataset.sql.evaluate`).

System columns ``_rowid``, ``_rowaddr``, ``_row_created_at_version`` and
``_row_last_updated_at_version`` (uint64) may be referenced even when ``schema`` lacks them.
"""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
import pyarrow.acero as acero
import pyarrow.compute as pc
import pyarrow.dataset as pads
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from lance_format.dataset.sql.evaluate import compiled
from lance_format.dataset.sql.pushdown import split_arrow_filter
from lance_format.dataset.sql.translate import (
    SYSTEM_COLUMNS,
    LanceFilterDialect,
    Translator,
    syntax_detail,
    too_deep,
    validation_schema,
)
from lance_format.errors import InvalidInputError

__all__ = ["SYSTEM_COLUMNS", "compile_filter", "to_expression", "to_value_expression", "referenced_columns", "matching_rows"]


def to_expression(filter: str | pc.Expression | None, schema: pa.Schema) -> pc.Expression | None:
    """Translate a SQL predicate into a ``pc.Expression`` over ``schema``.

    Raises :class:`InvalidInputError` for syntax errors, unknown columns, unsupported constructs
    and predicates that do not evaluate to a boolean. A pyarrow expression is translated
    where it can be exactly (see :func:`_from_arrow`).
    """
    if filter is None:
        return None
    if isinstance(filter, pc.Expression):
        return _from_arrow(filter, schema)
    if not isinstance(filter, str):
        raise InvalidInputError(
            f"filter must be a SQL string or a pyarrow.compute.Expression, got {type(filter).__name__}"
        )
    return Translator(filter, schema).translate()


# filters naming these may call a clock (now(), current_date(), today()): translated every time
_VOLATILE = ("now", "current_", "today")


def compile_filter(text: str, schema: pa.Schema) -> tuple[pc.Expression, tuple[str, ...]]:
    """A SQL filter's expression and the columns it reads (as :func:`referenced_columns` orders
    them), translated once per (text, schema) in this process: a point lookup repeated on freshly
    opened datasets would otherwise spend most of its time parsing and type-checking the same text.

    Raises :class:`InvalidInputError` as :func:`to_expression` does.
    """
    if any(word in text.lower() for word in _VOLATILE):
        return _compile(text, schema)
    return _compiled(text, schema)


def _compile(text: str, schema: pa.Schema) -> tuple[pc.Expression, tuple[str, ...]]:
    translator = Translator(text, schema)
    expr = translator.translate()
    found = translator.referenced
    ordered = [name for name in schema.names if name in found]
    ordered += [name for name in SYSTEM_COLUMNS if name in found and name not in schema.names]
    return expr, tuple(ordered)


_compiled = functools.lru_cache(maxsize=256)(_compile)


def _from_arrow(expr: pc.Expression, schema: pa.Schema) -> pc.Expression:
    """A pyarrow filter (DuckDB's, Polars', a user's) through this SQL layer where it translates
    exactly (:mod:`lance_format.dataset.sql.pushdown`), the rest evaluated by pyarrow as given."""
    split = split_arrow_filter(expr, validation_schema(schema))
    if split.sql is None:
        return expr
    try:
        translated = Translator(split.sql, schema).translate()
    except InvalidInputError:
        return expr  # not expected; pyarrow evaluating the whole filter is right in any case
    return translated if split.residual is None else translated & split.residual


def referenced_columns(expr: pc.Expression | str, schema: pa.Schema) -> list[str]:
    """Top-level column names (schema order, then system columns) that ``expr`` reads."""
    if isinstance(expr, str):
        translator = Translator(expr, schema)
        translator.translate()
        found = translator.referenced
    elif isinstance(expr, pc.Expression):
        found = _expression_columns(expr, schema)
    else:
        raise InvalidInputError(
            f"filter must be a SQL string or a pyarrow.compute.Expression, got {type(expr).__name__}"
        )
    ordered = [name for name in schema.names if name in found]
    ordered += [name for name in SYSTEM_COLUMNS if name in found and name not in schema.names]
    return ordered


def _binds(expr: pc.Expression, schema: pa.Schema) -> bool:
    try:
        # A projection binds any expression type (a filter would also demand a boolean).
        pads.dataset(schema.empty_table()).to_table(columns={"v": expr})
    except (pa.ArrowException, TypeError, ValueError):
        return False
    return True


def _expression_columns(expr: pc.Expression, schema: pa.Schema) -> set[str]:
    """Columns of a pyarrow expression, found by binding it against reduced schemas.

    pyarrow has no public API to list an expression's field references, so we use group testing:
    binding is monotonic in the schema's columns (dropping a column can only break it), so a group
    of columns is unreferenced exactly when the expression still binds without it.
    """
    full = validation_schema(schema)
    if not _binds(expr, full):
        raise InvalidInputError(f"filter expression {expr} cannot be applied to the table schema")
    text = str(expr)
    # Field refs print their names, so only columns named in the text can be referenced (a cheap
    # pre-filter; refs by index are not printed by name, hence the fallback to all columns).
    candidates = [f.name for f in full if f.name in text]
    keep = set(candidates)
    if not _binds(expr, pa.schema([f for f in full if f.name in keep])):
        candidates = list(full.names)
        keep = set(candidates)

    def reduced(without: set[str]) -> pa.Schema:
        return pa.schema([f for f in full if f.name in keep and f.name not in without])

    needed: set[str] = set()
    groups = [candidates]
    while groups:
        group = groups.pop()
        if _binds(expr, reduced(set(group))):
            keep.difference_update(group)
        elif len(group) == 1:
            needed.add(group[0])
        else:
            mid = len(group) // 2
            groups.extend([group[:mid], group[mid:]])
    return needed


def to_value_expression(sql: str, schema: pa.Schema) -> tuple[pc.Expression, pa.DataType, list[str]]:
    """Translate a SQL scalar expression (an UPDATE value, a new column's definition).

    Returns the expression, its Arrow type over ``schema`` and the top-level columns it reads.
    Raises :class:`InvalidInputError` like :func:`to_expression`, without requiring a boolean.
    """
    if not isinstance(sql, str):
        raise InvalidInputError(f"a SQL expression must be a string, got {type(sql).__name__}")
    if sql in schema.names:
        # an expression that is exactly a column's name is that column, even "0" (as in pylance)
        sql = "`" + sql.replace("`", "``") + "`"
    translator = Translator(sql, schema)
    if not sql.strip():
        raise InvalidInputError("Invalid SQL expression: the expression is empty")
    try:
        tree = sqlglot.parse_one(sql, read=LanceFilterDialect)
        node = translator.visit(tree)  # type: ignore[arg-type]  # sqlglot 30 types parse_one as Expr
    except SqlglotError as err:
        raise InvalidInputError(f"Invalid SQL expression {sql!r}: {syntax_detail(err)}") from None
    except RecursionError:
        raise too_deep("expression", sql) from None
    dtype = translator._type_of(node)
    found = translator.referenced
    columns = [n for n in schema.names if n in found] + [n for n in SYSTEM_COLUMNS if n in found and n not in schema.names]
    return node.expr, dtype, columns


def is_typed_null(sql: str) -> bool:
    """Whether ``sql`` is ``CAST(NULL AS <type>)``: a new column pylance adds without writing data."""
    try:
        tree = sqlglot.parse_one(sql, read=LanceFilterDialect)
    except SqlglotError:
        return False
    return isinstance(tree, (exp.Cast, exp.TryCast)) and isinstance(tree.this, exp.Null)


def value_nullable(sql: str, schema: pa.Schema) -> bool:
    """Whether a new column defined by ``sql`` is nullable, by DataFusion's rules as pylance
    applies them: literals are not null, columns as declared, operators and casts null when an
    operand is, ``coalesce`` when all its arguments are, other functions always may be."""
    if sql in schema.names:
        return schema.field(sql).nullable
    try:
        tree = sqlglot.parse_one(sql, read=LanceFilterDialect)
    except SqlglotError:
        return True
    return _nullable(tree, schema)


def _nullable(node: exp.Expr, schema: pa.Schema) -> bool:
    if isinstance(node, exp.Null):
        return True
    if isinstance(node, (exp.Literal, exp.Boolean)):
        return False
    if isinstance(node, exp.Column):
        names = [p.name for p in node.parts]
        matches = [f for f in schema if f.name == names[0]] or [f for f in schema if f.name.lower() == names[0].lower()]
        return len(names) != 1 or len(matches) != 1 or matches[0].nullable
    if isinstance(node, exp.Is):  # IS [NOT] NULL / TRUE / FALSE
        return False
    if isinstance(node, exp.Anonymous) and str(node.this).lower() == "arrow_cast" and node.expressions:
        return _nullable(node.expressions[0], schema)  # a cast: null when its operand is
    if isinstance(node, exp.Coalesce):
        return all(_nullable(arg, schema) for arg in [node.this, *node.expressions])
    if isinstance(node, (exp.Cast, exp.Paren, exp.Neg, exp.Not, exp.Binary, exp.Between, exp.In)) and \
            not isinstance(node, exp.TryCast):
        return any(_nullable(child, schema) for child in node.iter_expressions() if not isinstance(child, exp.DataType))
    return True


_NO_ROWS = pa.array([], pa.uint64())


def matching_rows(batch: pa.RecordBatch | pa.Table, condition: pc.Expression) -> pa.Array:
    """The positions (ascending) of the rows of ``batch`` where ``condition`` is TRUE.

    The predicate is evaluated into one boolean column on this thread (``Table.filter`` would
    copy every column through a threaded plan, and scans already decode batches side by side).
    """
    matches = _evaluated(batch, condition)
    if matches is None:
        plan = acero.Declaration.from_sequence([
            acero.Declaration("table_source", acero.TableSourceNodeOptions(
                batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch]))),
            acero.Declaration("project", acero.ProjectNodeOptions([condition], ["matches"])),
        ])
        matches = plan.to_table(use_threads=False).column(0)
    if not pa.types.is_boolean(matches.type):
        # not a predicate (an expression given directly): Table.filter reports it as it always did
        positions = pa.array(np.arange(batch.num_rows, dtype=np.uint64))
        return pa.Table.from_batches([batch]).append_column("__position", positions).filter(condition) \
            .column("__position").combine_chunks()
    if isinstance(matches, pa.ChunkedArray):
        matches = matches.combine_chunks()
    if matches.true_count == 0:  # most batches of a selective filter: a popcount, no index scan
        return _NO_ROWS
    return pc.indices_nonzero(matches if matches.null_count == 0 else pc.fill_null(matches, False))


def _evaluated(batch: pa.RecordBatch, condition: pc.Expression) -> pa.Array | pa.ChunkedArray | None:
    """``condition`` on ``batch`` by direct kernel calls (:mod:`lance_format.dataset.sql.evaluate`),
    or None where the Acero plan must decide (including any kernel error: Acero reports it)."""
    evaluator = compiled(condition)
    if evaluator is None:
        return None
    try:
        result = evaluator(batch)
    except (pa.ArrowException, TypeError, ValueError, KeyError):
        return None
    if isinstance(result, pa.Scalar):
        return pa.repeat(result, batch.num_rows)
    if not isinstance(result, (pa.Array, pa.ChunkedArray)) or len(result) != batch.num_rows:
        return None
    return result
