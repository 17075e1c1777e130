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
    """The ``schema`` option (DDL) of a table created before its first write, or None."""
    text = options.get("schema")
    if not text:
        return None
    from pyspark.sql.types import StructType, _parse_datatype_string

    parsed = _parse_datatype_string(str(text))
    if not isinstance(parsed, StructType):
        raise InvalidInputError(f"option 'schema' must be a list of columns, got {text!r}")
    return parsed


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


__all__ = ["TABLE_OPTIONS_KEY", "is_catalog_creation", "table_options", "with_table_options", "declared_schema",
           "resolved_options", "without_table_options"]
