"""Tables of Spark's session catalog backed by the ``lance`` data source (SQL).

``CREATE TABLE t USING lance OPTIONS (path '...')`` stores the table in the catalog, but Spark
4.3 hands a Python data source none of the table's options when the table is later read or
written (``spark.table``, ``SELECT``, ``INSERT INTO``): only the options of that read, and the
catalog's schema. So when Spark asks for the schema at ``CREATE TABLE`` (the one call that sees
the table's options) the source records those options in the metadata of the schema's first
field (key ``lance.table``); the catalog keeps that schema, and readers and writers take the
path, storage options and pinned version back from it. Options of the read itself win
(``spark.read.option("version", 3).table("t")``, ``SELECT * FROM t WITH ('version' = '3')``).

A table that does not exist yet needs its schema: ``OPTIONS (path '...', schema 'id long, s string')``;
the first ``INSERT`` creates it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from lance_format.errors import InvalidInputError

TABLE_OPTIONS_KEY = "lance.table"
CATALOG_MARKERS = ("provider", "owner")  # options Spark adds when a catalog table is created
_NOT_TABLE_OPTIONS = ("location", "owner", "provider", "schema", "external")


def is_catalog_creation(options: Any) -> bool:
    """Whether ``schema()`` is being asked for by ``CREATE TABLE ... USING lance``."""
    return str(options.get("provider", "")).lower() == "lance" and "path" in options


def _local_path(path: str) -> str:
    # Spark qualifies a catalog path as "file:/..." for local files.
    if path.startswith("file:") and not path.startswith("file://"):
        return path[len("file:"):]
    return path


def table_options(options: Any) -> dict[str, str]:
    """The options a catalog table keeps: path, storage options, version, ..."""
    kept = {}
    for key, value in options.items():
        name = str(key)
        if name.lower() in _NOT_TABLE_OPTIONS or name.lower().startswith("option."):
            continue
        kept[name] = str(value)
    kept["path"] = _local_path(kept["path"])
    return kept


def with_table_options(schema: Any, options: Any) -> Any:
    """``schema`` with the catalog table's options in its first field's metadata."""
    from pyspark.sql.types import StructField, StructType

    if not schema.fields:
        raise InvalidInputError("a Lance table in the catalog needs at least one column")
    first = schema.fields[0]
    metadata = {**(first.metadata or {}), TABLE_OPTIONS_KEY: json.dumps(table_options(options), sort_keys=True)}
    return StructType([StructField(first.name, first.dataType, first.nullable, metadata)] + list(schema.fields[1:]))


def declared_schema(options: Any) -> Any:
    """The ``schema`` option (DDL such as ``id long, tags array<string>``) of a table created
    before its first write, or None. Parsed here: the worker asking has no Spark session."""
    text = options.get("schema")
    if not text:
        return None
    from pyspark.sql.types import StructType

    parser = _DDLParser(str(text))
    fields = parser.fields(end=None)
    return StructType(fields)


_ATOMIC = {
    "boolean": "BooleanType", "tinyint": "ByteType", "byte": "ByteType", "smallint": "ShortType",
    "short": "ShortType", "int": "IntegerType", "integer": "IntegerType", "bigint": "LongType", "long": "LongType",
    "float": "FloatType", "real": "FloatType", "double": "DoubleType", "string": "StringType",
    "binary": "BinaryType", "date": "DateType", "timestamp": "TimestampType", "timestamp_ltz": "TimestampType",
    "timestamp_ntz": "TimestampNTZType",
}
_TOKEN = re.compile(r"\s*(`(?:[^`]|``)*`|[A-Za-z_][A-Za-z0-9_]*|\d+|[<>(),:])")


class _DDLParser:
    """Column lists of Spark DDL: atomic types, decimal(p, s), array<>, map<,>, struct<>."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[str] = []
        pos = 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            match = _TOKEN.match(text, pos)
            if match is None:
                raise InvalidInputError(f"option 'schema': cannot read {text[pos:]!r}")
            self.tokens.append(match.group(1))
            pos = match.end()
        self.at = 0

    def _next(self) -> str:
        if self.at >= len(self.tokens):
            raise InvalidInputError(f"option 'schema' ends early: {self.text!r}")
        self.at += 1
        return self.tokens[self.at - 1]

    def _expect(self, token: str) -> None:
        got = self._next()
        if got != token:
            raise InvalidInputError(f"option 'schema': expected {token!r}, got {got!r} in {self.text!r}")

    def _peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def fields(self, end: str | None) -> list:
        from pyspark.sql.types import StructField

        result = []
        while True:
            name = self._next()
            if name.startswith("`"):
                name = name[1:-1].replace("``", "`")
            if self._peek() == ":":
                self._next()
            result.append(StructField(name, self.type(), True))
            following = self._peek()
            if following == ",":
                self._next()
                continue
            if following == end:
                return result
            raise InvalidInputError(f"option 'schema': unexpected {following!r} in {self.text!r}")

    def type(self) -> Any:
        from pyspark.sql import types as T

        word = self._next().lower()
        if word in _ATOMIC:
            return getattr(T, _ATOMIC[word])()
        if word in ("decimal", "dec", "numeric"):
            precision, scale = 10, 0
            if self._peek() == "(":
                self._next()
                precision = int(self._next())
                if self._peek() == ",":
                    self._next()
                    scale = int(self._next())
                self._expect(")")
            return T.DecimalType(precision, scale)
        if word == "array":
            self._expect("<")
            element = self.type()
            self._expect(">")
            return T.ArrayType(element, True)
        if word == "map":
            self._expect("<")
            key = self.type()
            self._expect(",")
            value = self.type()
            self._expect(">")
            return T.MapType(key, value, True)
        if word == "struct":
            self._expect("<")
            fields = self.fields(end=">")
            self._expect(">")
            return T.StructType(fields)
        raise InvalidInputError(f"option 'schema': unknown type {word!r} in {self.text!r}")


def resolved_options(options: Any, schema: Any) -> Any:
    """``options`` completed with the catalog table's options found in ``schema`` (if any)."""
    if options.get("path") or schema is None or not getattr(schema, "fields", None):
        return options
    stored = (schema.fields[0].metadata or {}).get(TABLE_OPTIONS_KEY)
    if not stored:
        return options
    from pyspark.sql.datasource import CaseInsensitiveDict

    merged = CaseInsensitiveDict(json.loads(stored))
    merged.update({str(k): str(v) for k, v in options.items()})
    return merged


def without_table_options(schema: Any) -> Any:
    """``schema`` without the catalog marker (what a write maps to the table)."""
    from pyspark.sql.types import StructField, StructType

    if schema is None or not schema.fields or TABLE_OPTIONS_KEY not in (schema.fields[0].metadata or {}):
        return schema
    first = schema.fields[0]
    metadata = {k: v for k, v in first.metadata.items() if k != TABLE_OPTIONS_KEY}
    return StructType([StructField(first.name, first.dataType, first.nullable, metadata)] + list(schema.fields[1:]))


def nullable_columns(schema: Any) -> Any:
    """``schema`` with nullable top-level columns (SQL's ``VALUES`` make non-null ones)."""
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(f.name, f.dataType, True, f.metadata) for f in schema.fields])


__all__ = [
    "TABLE_OPTIONS_KEY",
    "declared_schema",
    "is_catalog_creation",
    "nullable_columns",
    "resolved_options",
    "table_options",
    "with_table_options",
    "without_table_options",
]
