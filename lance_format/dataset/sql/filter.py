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

System columns ``_rowid``, ``_rowaddr``, ``_row_created_at_version`` and
``_row_last_updated_at_version`` (uint64) may be referenced even when ``schema`` lacks them.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import sqlglot
from sqlglot.errors import SqlglotError

from lance_format.dataset.sql.translate import (
    SYSTEM_COLUMNS,
    LanceFilterDialect,
    Translator,
    syntax_detail,
    validation_schema,
)
from lance_format.errors import InvalidInputError

__all__ = ["SYSTEM_COLUMNS", "to_expression", "to_value_expression", "referenced_columns"]


def to_expression(filter: str | pc.Expression | None, schema: pa.Schema) -> pc.Expression | None:
    """Translate a SQL predicate into a ``pc.Expression`` over ``schema``; expressions pass through.

    Raises :class:`InvalidInputError` for syntax errors, unknown columns, unsupported constructs
    and predicates that do not evaluate to a boolean.
    """
    if filter is None or isinstance(filter, pc.Expression):
        return filter
    if not isinstance(filter, str):
        raise InvalidInputError(
            f"filter must be a SQL string or a pyarrow.compute.Expression, got {type(filter).__name__}"
        )
    return Translator(filter, schema).translate()


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
    translator = Translator(sql, schema)
    if not sql.strip():
        raise InvalidInputError("Invalid SQL expression: the expression is empty")
    try:
        tree = sqlglot.parse_one(sql, read=LanceFilterDialect)
    except SqlglotError as err:
        raise InvalidInputError(f"Invalid SQL expression {sql!r}: {syntax_detail(err)}") from None
    node = translator.visit(tree)  # type: ignore[arg-type]  # sqlglot 30 types parse_one as Expr
    dtype = translator._type_of(node)
    found = translator.referenced
    columns = [n for n in schema.names if n in found] + [n for n in SYSTEM_COLUMNS if n in found and n not in schema.names]
    return node.expr, dtype, columns
