"""Arrow schemas as JSON-compatible dicts, in official Lance's layout (``schema_to_json`` /
``json_to_schema``).

A field is ``{"name", "type", "nullable"[, "metadata"]}``; a type is ``{"type": <Lance logical
type>}`` for flat types, with ``"fields"`` for struct/list/large_list/fixed_size_list children
and ``"length"`` for fixed-size lists and binaries. Maps are refused, as pylance refuses them.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lance_format.errors import InvalidInputError, UnsupportedFeatureError
from lance_format.schema.logical_types import arrow_type_of, logical_type_of


def _metadata(raw: dict[bytes, bytes] | None) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in (raw or {}).items()}


def _type_to_json(data_type: pa.DataType) -> dict[str, Any]:
    if pa.types.is_map(data_type):
        raise InvalidInputError(f"Failed to convert schema to json: Unsupported type: {data_type}")
    if pa.types.is_struct(data_type):
        return {"type": "struct", "fields": [_field_to_json(data_type.field(i)) for i in range(data_type.num_fields)]}
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        kind = "list" if pa.types.is_list(data_type) else "large_list"
        return {"type": kind, "fields": [_field_to_json(data_type.value_field)]}
    if pa.types.is_fixed_size_list(data_type):
        return {"type": "fixed_size_list", "fields": [_field_to_json(data_type.value_field)],
                "length": data_type.list_size}
    if pa.types.is_fixed_size_binary(data_type):
        return {"type": "fixed_size_binary", "length": data_type.byte_width}
    return {"type": logical_type_of(data_type)}


def _field_to_json(field: pa.Field) -> dict[str, Any]:
    out: dict[str, Any] = {"name": field.name, "type": _type_to_json(field.type), "nullable": field.nullable}
    if field.metadata:
        out["metadata"] = _metadata(field.metadata)
    return out


def schema_to_json(schema: pa.Schema) -> dict[str, Any]:
    """A JSON-compatible dict of ``schema`` (official Lance's layout).

    Raises
    ------
    InvalidInputError
        The schema has a type Lance's JSON form cannot express (maps); a ``ValueError``, as
        pylance raises.
    """
    out: dict[str, Any] = {"fields": [_field_to_json(f) for f in schema]}
    if schema.metadata:
        out["metadata"] = _metadata(schema.metadata)
    return out


def _type_from_json(spec: Any) -> pa.DataType:
    if not isinstance(spec, dict) or not isinstance(spec.get("type"), str):
        raise InvalidInputError(f"a JSON schema type must be an object with a 'type' string, got {spec!r}")
    kind = spec["type"]
    children = [_field_from_json(f) for f in spec.get("fields", [])]
    if kind == "struct":
        return pa.struct(children)
    if kind in ("list", "large_list", "fixed_size_list"):
        if len(children) != 1:
            raise InvalidInputError(f"a JSON {kind} type needs exactly one field, got {len(children)}")
        if kind == "list":
            return pa.list_(children[0])
        if kind == "large_list":
            return pa.large_list(children[0])
        return pa.list_(children[0], int(spec["length"]))
    if kind == "fixed_size_binary":
        return pa.binary(int(spec["length"]))
    try:
        return arrow_type_of(kind)
    except UnsupportedFeatureError as exc:
        raise InvalidInputError(f"unknown type in JSON schema: {kind!r}") from exc


def _field_from_json(spec: Any) -> pa.Field:
    if not isinstance(spec, dict) or "name" not in spec or "type" not in spec:
        raise InvalidInputError(f"a JSON schema field must be an object with 'name' and 'type', got {spec!r}")
    return pa.field(spec["name"], _type_from_json(spec["type"]), bool(spec.get("nullable", True)),
                    metadata=spec.get("metadata") or None)


def json_to_schema(schema_json: dict[str, Any]) -> pa.Schema:
    """The Arrow schema of a dict made by :func:`schema_to_json` (or by official Lance).

    Raises
    ------
    InvalidInputError
        The dict is not a schema in that layout (also a ``ValueError``).
    """
    if not isinstance(schema_json, dict) or not isinstance(schema_json.get("fields"), list):
        raise InvalidInputError("a JSON schema must be an object with a 'fields' list")
    return pa.schema([_field_from_json(f) for f in schema_json["fields"]], metadata=schema_json.get("metadata") or None)
