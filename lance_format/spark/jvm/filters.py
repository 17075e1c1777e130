"""Spark's filters, as the JVM ``lance`` source sends them (JSON), into the engine's SQL.

Leaves become PySpark's data source filters and go through the Python source's own rules
(:func:`lance_format.spark.pushed_filters.filter_sql`: only type pairs whose comparison is known
to agree with Spark's). Spark evaluates every filter again after the scan, so a filter may be
*widened* (an ``AND`` side the engine cannot take is dropped) but never narrowed: under a
``NOT`` nothing may be dropped.
"""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import pyarrow as pa

_LEAVES = ("EqualTo", "EqualNullSafe", "GreaterThan", "GreaterThanOrEqual", "LessThan", "LessThanOrEqual",
           "StringStartsWith", "StringEndsWith", "StringContains", "IsNull", "IsNotNull", "In")


def _value(tagged: dict[str, Any]) -> Any:
    kind, text = tagged["t"], tagged["v"]
    if kind == "int":
        return int(text)
    if kind == "float":
        return float(text)
    if kind == "decimal":
        return decimal.Decimal(text)
    if kind == "date":
        return datetime.date.fromisoformat(text)
    return text  # str, bool


def _leaf(node: dict[str, Any]) -> Any:
    from pyspark.sql import datasource as D

    op, attribute = node["op"], (node["attr"],)
    if op in ("IsNull", "IsNotNull"):
        return getattr(D, op)(attribute)
    if op == "In":
        return D.In(attribute, tuple(_value(v) for v in node["values"]))
    return getattr(D, op)(attribute, _value(node["value"]))


def filter_to_sql(node: dict[str, Any] | None, schema: pa.Schema, exact: bool = False) -> str | None:
    """SQL the engine evaluates for ``node``, or None; with ``exact`` it selects exactly the rows
    Spark's filter does, else possibly more."""
    from lance_format.spark.pushed_filters import filter_sql

    if node is None:
        return None
    op = node["op"]
    if op == "And":
        left = filter_to_sql(node["left"], schema, exact)
        right = filter_to_sql(node["right"], schema, exact)
        if left is not None and right is not None:
            return f"({left}) AND ({right})"
        return None if exact else (left if left is not None else right)
    if op == "Or":
        left = filter_to_sql(node["left"], schema, exact)
        right = filter_to_sql(node["right"], schema, exact)
        return None if left is None or right is None else f"({left}) OR ({right})"
    if op == "Not":
        inner = filter_to_sql(node["left"], schema, exact=True)
        return None if inner is None else f"NOT ({inner})"
    if op not in _LEAVES:
        return None
    return filter_sql(_leaf(node), schema)


__all__ = ["filter_to_sql"]
