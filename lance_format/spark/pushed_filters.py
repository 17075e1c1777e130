"""Spark's pushed filters for the ``lance`` data source: which Sparks may be given them, and
which of them the engine evaluates exactly as Spark would.

**The leak.** From Spark 4.1 (the first with filter pushdown for Python data sources,
``spark.sql.python.filterPushdown.enabled``) to 4.3, the JVM stores the read plan that a
filter pushdown produced (partitions and read function) on the DataFrame's data source object,
which every later scan of that DataFrame shares, and reuses it for those scans: a view queried
twice, or referenced twice in one query (a self-join, TPC-H q22), silently reads with another
scan's filter (apache/spark SPARK-51575 put the plan there; SPARK-58551, for Spark 5.0, keeps it
per scan). A data source cannot defend itself while it accepts filters on such a Spark, so on
those versions the ``lance`` source accepts none: Spark evaluates every filter after the scan.

**Accepted filters** (a Spark without the leak) become SQL for the engine's filter
(:mod:`lance_format.dataset.sql.filter`, whose semantics follow Spark's where it matters here:
NaN equals NaN and sorts above +inf, -0.0 equals 0.0, decimals compare exactly, NULL never
passes). A filter is taken only when its column's Lance type and the value's type are a pair
whose comparison is known to agree with Spark's (integers, float32/float64, decimals of fewer
than 28 digits, which PySpark hands over unrounded, strings, booleans, dates); anything else -- timestamps, binary, unsigned 64-bit, dictionary columns,
nested fields, NULL in ``IN``, LIKE wildcards in a string value -- goes back to Spark.
"""

from __future__ import annotations

import datetime
import decimal
import re
import struct
import warnings
from collections.abc import Callable
from typing import Any

import pyarrow as pa

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
FIRST_WITH_PUSHDOWN = (4, 1)  # Python data sources get pushFilters from Spark 4.1 on
FIRST_WITHOUT_LEAK = (5, 0)  # the read plan stays with its scan (SPARK-58551)


class PushdownIgnoredWarning(UserWarning):
    """Filter pushdown is on, but this Spark would let one scan read with another's filter."""


def spark_version_tuple(version: str) -> tuple[int, int]:
    """``(major, minor)`` of a Spark version string (``"4.3.0"``, ``"5.0.0-SNAPSHOT"``)."""
    match = re.match(r"\s*(\d+)\.(\d+)", str(version))
    if match is None:
        raise ValueError(f"not a Spark version: {version!r}")
    return int(match.group(1)), int(match.group(2))


def pushdown_leaks(version: str) -> bool:
    """Whether Spark ``version`` reuses one scan's pushed-filter read plan for other scans of the
    same DataFrame (4.1 up to 5.0). An unparseable version counts as leaking."""
    try:
        parsed = spark_version_tuple(version)
    except ValueError:
        return True
    return FIRST_WITH_PUSHDOWN <= parsed < FIRST_WITHOUT_LEAK


def running_spark_leaks() -> bool:
    """:func:`pushdown_leaks` for the PySpark of this process (a planning worker's is its
    Spark's own)."""
    import pyspark

    return pushdown_leaks(pyspark.__version__)


_warned = False


def warn_pushdown_ignored(version: str) -> None:
    """Warn (once per process) that the session's pushdown setting is not used by ``lance``."""
    global _warned
    if _warned:
        return
    _warned = True
    warnings.warn(
        f"{PUSHDOWN_CONF}=true is ignored by the lance data source on Spark {version}: from "
        f"{FIRST_WITH_PUSHDOWN[0]}.{FIRST_WITH_PUSHDOWN[1]} up to {FIRST_WITHOUT_LEAK[0]}.{FIRST_WITHOUT_LEAK[1]}, "
        "Spark reuses one scan's pushed filters for every later scan of the same DataFrame, which gives "
        "wrong answers (a view queried twice, a self-join); Spark filters the rows after the scan instead. "
        "Turn the setting off: with it on, Spark still starts a Python worker per scan to offer the filters.",
        PushdownIgnoredWarning, stacklevel=3,
    )


# -- filters -> engine SQL -------------------------------------------------------------------------
def _is_string(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _is_integer(t: pa.DataType) -> bool:
    return pa.types.is_signed_integer(t) or t in (pa.uint8(), pa.uint16(), pa.uint32())


def _literal_for(t: pa.DataType, value: Any) -> str | None:
    """SQL for ``value`` compared with a column of Arrow type ``t``, or None when the engine's
    comparison of the pair is not known to equal Spark's."""
    if value is None:
        return None
    if pa.types.is_boolean(t):
        return ("TRUE" if value else "FALSE") if isinstance(value, bool) else None
    if isinstance(value, bool):
        return None
    if _is_integer(t):
        return str(value) if isinstance(value, int) else None
    if pa.types.is_float32(t) or pa.types.is_float64(t):
        if isinstance(value, int):
            value = float(value)
        if not isinstance(value, float):
            return None
        if value != value or value in (float("inf"), float("-inf")):
            return None  # NaN and infinite literals stay with Spark
        if pa.types.is_float32(t) and struct.unpack("f", struct.pack("f", value))[0] != value:
            return None  # the engine would compare in float32: only exact float32 values
        return repr(value)
    if pa.types.is_decimal(t):
        if isinstance(value, int):
            value = decimal.Decimal(value)
        if not isinstance(value, decimal.Decimal) or not _fits(value, t):
            return None
        # a quoted literal takes the column's decimal type exactly (a bare one would be a double)
        return "'" + format(value, "f") + "'"
    if _is_string(t):
        return "'" + value.replace("'", "''") + "'" if isinstance(value, str) else None
    if pa.types.is_date32(t):
        if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
            return f"DATE '{value.isoformat()}'"
        return None
    return None  # timestamps, binary, nested and other types stay with Spark


def _fits(value: decimal.Decimal, t: Any) -> bool:
    """Whether ``value`` is exactly a value of decimal type ``t`` (an IN list takes the column's
    type, so a value with more digits would be rounded)."""
    if not value.is_finite() or len(value.as_tuple().digits) >= decimal.getcontext().prec:
        # PySpark rebuilds a pushed decimal in the default context (28 digits): one that long
        # may already be rounded, and only Spark still has the exact value
        return False
    step = decimal.Decimal(1).scaleb(-t.scale)
    with decimal.localcontext() as context:
        context.prec = 80
        exact = value.quantize(step)
        if exact != value:
            return False
        return len(exact.as_tuple().digits) <= t.precision


def _column(attribute: Any, schema: pa.Schema) -> tuple[str, pa.DataType] | None:
    if attribute is None or len(attribute) != 1:
        return None  # nested fields stay with Spark
    name = attribute[0]
    index = schema.get_field_index(name)
    if index < 0:
        return None
    return "`" + name.replace("`", "``") + "`", schema.field(index).type


def _comparison(f: Any, schema: pa.Schema, op: str) -> str | None:
    column = _column(f.attribute, schema)
    if column is None:
        return None
    literal = _literal_for(column[1], f.value)
    return None if literal is None else f"{column[0]} {op} {literal}"


def _in(f: Any, schema: pa.Schema) -> str | None:
    column = _column(f.attribute, schema)
    if column is None or not f.value:
        return None
    literals = [_literal_for(column[1], v) for v in f.value]
    if any(literal is None for literal in literals):
        return None  # a NULL in the list, or a value the engine may compare differently
    return f"{column[0]} IN ({', '.join(literals)})"  # type: ignore[arg-type]  # no None left


def _null_check(f: Any, schema: pa.Schema, negated: bool) -> str | None:
    column = _column(f.attribute, schema)
    return None if column is None else f"{column[0]} IS {'NOT ' if negated else ''}NULL"


def _equal_null_safe(f: Any, schema: pa.Schema) -> str | None:
    if f.value is None:
        return _null_check(f, schema, negated=False)
    equal = _comparison(f, schema, "=")
    if equal is None:
        return None
    # never NULL, as <=> is: under a NOT, a NULL row must pass
    return f"({_null_check(f, schema, negated=True)} AND {equal})"


def _string_match(f: Any, schema: pa.Schema, pattern: str) -> str | None:
    column = _column(f.attribute, schema)
    if column is None or not _is_string(column[1]) or not isinstance(f.value, str):
        return None
    if any(c in f.value for c in "%_\\"):
        return None  # a wildcard in the value: Spark matches it literally
    return f"{column[0]} LIKE " + "'" + pattern.format(f.value).replace("'", "''") + "'"


def filter_sql(f: Any, schema: pa.Schema) -> str | None:
    """SQL for one pushed Spark filter against a table of Arrow ``schema``, or None when the
    filter should stay with Spark."""
    from pyspark.sql import datasource as D

    handlers: dict[type, Callable[[Any, pa.Schema], str | None]] = {
        D.EqualTo: lambda f, s: _comparison(f, s, "="),
        D.GreaterThan: lambda f, s: _comparison(f, s, ">"),
        D.GreaterThanOrEqual: lambda f, s: _comparison(f, s, ">="),
        D.LessThan: lambda f, s: _comparison(f, s, "<"),
        D.LessThanOrEqual: lambda f, s: _comparison(f, s, "<="),
        D.EqualNullSafe: _equal_null_safe,
        D.In: _in,
        D.IsNull: lambda f, s: _null_check(f, s, negated=False),
        D.IsNotNull: lambda f, s: _null_check(f, s, negated=True),
        D.StringStartsWith: lambda f, s: _string_match(f, s, "{}%"),
        D.StringEndsWith: lambda f, s: _string_match(f, s, "%{}"),
        D.StringContains: lambda f, s: _string_match(f, s, "%{}%"),
    }
    if type(f) is D.Not:
        inner = filter_sql(f.child, schema)
        return None if inner is None else f"NOT ({inner})"
    handler = handlers.get(type(f))
    return None if handler is None else handler(f, schema)


__all__ = ["PUSHDOWN_CONF", "PushdownIgnoredWarning", "pushdown_leaks", "running_spark_leaks", "filter_sql",
           "spark_version_tuple", "warn_pushdown_ignored"]
