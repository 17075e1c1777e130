"""Dagster partitions -> SQL predicates on a Lance table's columns.

* Static and dynamic partitions: ``col IN (...)`` with literals typed after the column
  (strings quoted, integers bare, dates as ``DATE '...'``).
* Time windows: ``col >= start AND col < end`` (range semantics, so intra-day values belong to
  their day). tz-aware timestamp columns compare with the window's instants (rendered as wall
  time in the column's zone, which is how Lance reads literals); naive timestamp columns hold
  wall-clock times in the partitions definition's timezone (the case dagster-deltalake turns
  into a full-table overwrite); date columns need day-aligned windows; string columns compare
  with the window bounds formatted like the partition keys.
* Multi-partitions: the AND of the dimensions' predicates (``partition_expr`` maps dimension ->
  column); several keys are OR-ed.
* ``partition_expr`` is a column name or, when it is not one, a SQL expression over the columns
  (``CAST(ts AS DATE)``, ``substr(region, 1, 2)``): the engine's SQL layer gives its type, which
  decides how the partition bounds are rendered, and the predicate compares the expression.

The predicates use the engine's SQL dialect (backtick identifiers), which Spark shares.
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from collections.abc import Mapping, Sequence

import dagster as dg
import pyarrow as pa

from lance_assets import engine
from lance_format.errors import InvalidInputError


def quote_identifier(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _string_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _partition_sql(schema: pa.Schema, expr: str, *, table: str | None) -> tuple[str, pa.DataType]:
    """The SQL a ``partition_expr`` is compared as, and its type: a quoted column, or the
    parenthesized SQL expression typed by the engine."""
    if expr in schema.names:
        return quote_identifier(expr), schema.field(expr).type
    try:
        data_type = engine.expression_type(expr, schema)
    except InvalidInputError as exc:
        raise InvalidInputError(
            f"partition_expr {expr!r} is neither one of the columns {schema.names} nor a SQL expression over "
            f"them ({exc.reason})",
            table=table, column=expr,
        ) from None
    return f"({expr})", data_type


def key_literal(key: str, data_type: pa.DataType, *, column: str, table: str | None = None) -> str:
    """A SQL literal for a static/dynamic partition key compared with a column of ``data_type``."""
    if pa.types.is_string(data_type) or pa.types.is_large_string(data_type) or pa.types.is_string_view(data_type):
        return _string_literal(key)
    if pa.types.is_integer(data_type):
        try:
            return str(int(key))
        except ValueError:
            raise InvalidInputError(
                f"partition key {key!r} is not an integer but column {column!r} is {data_type}",
                table=table, column=column,
            ) from None
    if pa.types.is_date(data_type):
        try:
            return f"DATE '{dt.date.fromisoformat(key).isoformat()}'"
        except ValueError:
            raise InvalidInputError(
                f"partition key {key!r} is not an ISO date but column {column!r} is {data_type}",
                table=table, column=column,
            ) from None
    if pa.types.is_boolean(data_type) and key.lower() in ("true", "false"):
        return key.lower()
    raise InvalidInputError(
        f"static/dynamic partitions need a string, integer, date or boolean column; {column!r} is {data_type}",
        table=table, column=column,
    )


def _zone(name: str) -> dt.tzinfo:
    """A tzinfo for an Arrow timezone string (IANA name or fixed offset like ``+05:30``)."""
    match = re.fullmatch(r"([+-])(\d{2}):?(\d{2})", name)
    if match:
        sign = 1 if match.group(1) == "+" else -1
        return dt.timezone(sign * dt.timedelta(hours=int(match.group(2)), minutes=int(match.group(3))))
    if name.upper() in ("UTC", "Z"):
        return dt.UTC
    return zoneinfo.ZoneInfo(name)


def _timestamp_text(value: dt.datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S.%f")


def time_window_predicate(
    window: dg.TimeWindow,
    column: str,
    data_type: pa.DataType,
    *,
    fmt: str | None = None,
    table: str | None = None,
    column_sql: str | None = None,
) -> str:
    """``start <= col < end`` for one time window, with bounds rendered for the column's type.
    ``column_sql``: what to compare (default: the quoted column)."""
    start, end = window.start, window.end
    col = column_sql or quote_identifier(column)
    if pa.types.is_timestamp(data_type):
        if data_type.tz is not None:
            # Lance (DataFusion) reads an offset-free literal as wall-clock time in the column's
            # zone, and mishandles explicit offsets on non-UTC columns: render local wall time.
            zone = _zone(data_type.tz)
            lo = _timestamp_text(start.astimezone(zone).replace(tzinfo=None))
            hi = _timestamp_text(end.astimezone(zone).replace(tzinfo=None))
        else:
            # Naive values are wall-clock times in the partitions' timezone.
            lo, hi = _timestamp_text(start.replace(tzinfo=None)), _timestamp_text(end.replace(tzinfo=None))
        return f"{col} >= TIMESTAMP '{lo}' AND {col} < TIMESTAMP '{hi}'"
    if pa.types.is_date(data_type):
        for bound in (start, end):
            if (bound.hour, bound.minute, bound.second, bound.microsecond) != (0, 0, 0, 0):
                raise InvalidInputError(
                    f"column {column!r} is a date but the partition window {start}..{end} is not whole days",
                    table=table, column=column,
                )
        return f"{col} >= DATE '{start.date().isoformat()}' AND {col} < DATE '{end.date().isoformat()}'"
    if pa.types.is_string(data_type) or pa.types.is_large_string(data_type):
        fmt = fmt or "%Y-%m-%d"
        return f"{col} >= {_string_literal(start.strftime(fmt))} AND {col} < {_string_literal(end.strftime(fmt))}"
    raise InvalidInputError(
        f"time-window partitions need a timestamp, date or string column; {column!r} is {data_type}",
        table=table, column=column,
    )


def _keys_predicate(keys: Sequence[str], column: str, data_type: pa.DataType, *, table: str | None,
                    column_sql: str) -> str:
    literals = sorted({key_literal(k, data_type, column=column, table=table) for k in keys})
    col = column_sql
    if len(literals) == 1:
        return f"{col} = {literals[0]}"
    return f"{col} IN ({', '.join(literals)})"


def _dimension_predicate(
    partitions_def: dg.PartitionsDefinition,
    keys: Sequence[str],
    column: str,
    schema: pa.Schema,
    *,
    table: str | None,
) -> str:
    column_sql, data_type = _partition_sql(schema, column, table=table)
    if isinstance(partitions_def, dg.TimeWindowPartitionsDefinition):
        windows = sorted((partitions_def.time_window_for_partition_key(k) for k in keys), key=lambda w: w.start)
        # Merge adjacent windows so a range of days becomes one range predicate.
        merged: list[dg.TimeWindow] = []
        for window in windows:
            if merged and merged[-1].end >= window.start:
                merged[-1] = dg.TimeWindow(merged[-1].start, max(merged[-1].end, window.end))
            else:
                merged.append(window)
        parts = [time_window_predicate(w, column, data_type, fmt=partitions_def.fmt, table=table,
                                       column_sql=column_sql) for w in merged]
        return parts[0] if len(parts) == 1 else "(" + ") OR (".join(parts) + ")"
    return _keys_predicate(keys, column, data_type, table=table, column_sql=column_sql)


def partition_predicate(
    partitions_def: dg.PartitionsDefinition,
    partition_keys: Sequence[str],
    partition_expr: str | Mapping[str, str] | None,
    schema: pa.Schema,
    *,
    table: str | None = None,
) -> str:
    """The SQL predicate selecting exactly the rows of ``partition_keys``."""
    if not partition_keys:
        raise InvalidInputError("no partition keys to build a predicate from", table=table)
    if partition_expr is None:
        raise InvalidInputError(
            "partitioned asset has no 'partition_expr' definition metadata naming its partition column "
            "(a dict {dimension: column} for multi-partitions); refusing to guess, since a wrong guess would "
            "overwrite other partitions",
            table=table,
        )
    if isinstance(partitions_def, dg.MultiPartitionsDefinition):
        if not isinstance(partition_expr, Mapping):
            raise InvalidInputError(
                "multi-partitioned assets need partition_expr as a dict {dimension: column}", table=table
            )
        dimensions = {d.name: d.partitions_def for d in partitions_def.partitions_defs}
        missing = [name for name in dimensions if name not in partition_expr]
        if missing:
            raise InvalidInputError(f"partition_expr has no column for dimension(s) {missing}", table=table)
        keys = [partitions_def.get_partition_key_from_str(k) if isinstance(k, str) else k for k in partition_keys]
        by_dimension: dict[str, set[str]] = {name: set() for name in dimensions}
        for key in keys:
            for name, value in key.keys_by_dimension.items():
                by_dimension[name].add(value)
        combos = {tuple(sorted(k.keys_by_dimension.items())) for k in keys}
        cartesian = len(combos) == _product(len(v) for v in by_dimension.values())
        if cartesian:
            # A full grid of keys (the usual range selection) collapses to one predicate per dimension.
            return " AND ".join(
                f"({_dimension_predicate(dimensions[n], sorted(v), partition_expr[n], schema, table=table)})"
                for n, v in by_dimension.items()
            )
        clauses = []
        for combo in sorted(combos):
            clauses.append(" AND ".join(
                f"({_dimension_predicate(dimensions[n], [v], partition_expr[n], schema, table=table)})" for n, v in combo
            ))
        return "(" + ") OR (".join(clauses) + ")"
    if not isinstance(partition_expr, str):
        raise InvalidInputError("partition_expr must be a column name for single-dimension partitions", table=table)
    return _dimension_predicate(partitions_def, list(partition_keys), partition_expr, schema, table=table)


def _product(values) -> int:
    result = 1
    for v in values:
        result *= v
    return result


def version_partitions(name: str) -> dg.DynamicPartitionsDefinition:
    """The dynamic partitions (one key per Lance version, e.g. ``"7"``) a version sensor fills."""
    return dg.DynamicPartitionsDefinition(name=name)


def versions_of_keys(keys: Sequence[str], *, what: str = "partition key") -> list[int]:
    """Version numbers of version-partition keys, sorted; clear error for non-numeric keys."""
    try:
        return sorted(int(k) for k in keys)
    except ValueError:
        raise InvalidInputError(
            f"{what}s {list(keys)} are not Lance version numbers; change-feed inputs need version partitions"
        ) from None
