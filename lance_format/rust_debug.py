"""Rust's pretty ``Debug`` text (``{:#?}``), which pylance prints for manifests, transactions
and page encodings: values built from :class:`Struct`, :class:`Tuple` and :class:`Unit`, and
protobuf messages in the layout prost's generated ``Debug`` gives them (:func:`prost_message`),
so dumps read the same from either engine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

INDENT = "    "


@dataclass
class Struct:
    """``Name { key: value, ... }``."""

    name: str
    fields: list[tuple[str, Any]]


@dataclass
class Tuple:
    """``Name(value, ...)`` (``Some(x)``, ``LogicalType("int64")``)."""

    name: str
    values: list[Any]


@dataclass
class Unit:
    """A bare name: ``None``, ``Plain``, ``Array``."""

    name: str


NONE = Unit("None")


def some(value: Any) -> Any:
    return NONE if value is None else Tuple("Some", [value])


def render(value: Any, depth: int = 0) -> str:
    """``value`` as Rust's ``{:#?}`` would print it."""
    pad, inner = INDENT * depth, INDENT * (depth + 1)
    if isinstance(value, Unit):
        return value.name
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, RustBytes):
        return _bytes_text(value)
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Struct):
        if not value.fields:
            return value.name
        body = "".join(f"{inner}{k}: {render(v, depth + 1)},\n" for k, v in value.fields)
        return f"{value.name} {{\n{body}{pad}}}"
    if isinstance(value, Tuple):
        body = "".join(f"{inner}{render(v, depth + 1)},\n" for v in value.values)
        return f"{value.name}(\n{body}{pad})"
    if isinstance(value, dict):
        if not value:
            return "{}"
        body = "".join(f"{inner}{render(k, depth + 1)}: {render(v, depth + 1)},\n" for k, v in value.items())
        return f"{{\n{body}{pad}}}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        body = "".join(f"{inner}{render(v, depth + 1)},\n" for v in value)
        return f"[\n{body}{pad}]"
    return json.dumps(str(value))


def camel(name: str) -> str:
    """``snake_case`` or ``SCREAMING_CASE`` as Rust's ``UpperCamelCase``."""
    return "".join(part.capitalize() for part in name.lower().split("_"))


class RustBytes(bytes):
    """A ``bytes::Bytes`` value: printed as ``b"..."`` with Rust's escapes."""


def _bytes_text(data: bytes) -> str:
    out = []
    for byte in data:
        char = chr(byte)
        if char in "\n\r\t":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}[char])
        elif char in "\\\"":
            out.append("\\" + char)
        elif byte == 0:
            out.append("\\0")
        elif 0x20 <= byte < 0x7F:
            out.append(char)
        else:
            out.append(f"\\x{byte:02x}")
    return 'b"' + "".join(out) + '"'


def _enum_variant(descriptor: FieldDescriptor, number: int) -> Any:
    """prost's variant name of an enum value: the enum's own name stripped as a prefix."""
    value = descriptor.enum_type.values_by_number.get(number)
    if value is None:
        return number
    prefix = "".join(f"_{c}" if c.isupper() else c.upper() for c in descriptor.enum_type.name).lstrip("_") + "_"
    name = value.name[len(prefix):] if value.name.startswith(prefix) else value.name
    return Unit(camel(name))


def _prost_value(descriptor: FieldDescriptor, value: Any) -> Any:
    if descriptor.type == FieldDescriptor.TYPE_MESSAGE:
        return prost_message(value)
    if descriptor.type == FieldDescriptor.TYPE_ENUM:
        return _enum_variant(descriptor, value)
    if descriptor.type == FieldDescriptor.TYPE_BYTES:
        return RustBytes(value)
    return value


def prost_message(message: Message, name: str | None = None) -> Struct:
    """``message`` as prost's derived ``Debug`` shows it: every field in declaration order
    (defaults included, unset messages and proto3 ``optional`` values as ``None``/``Some``),
    then each ``oneof`` as ``Some(Variant(value))`` or ``None``."""
    fields: list[tuple[str, Any]] = []
    descriptor = message.DESCRIPTOR
    for field in descriptor.fields:
        if field.containing_oneof is not None and not _is_synthetic(field.containing_oneof):
            continue  # printed with its oneof, after the plain fields
        value = getattr(message, field.name)
        if field.is_repeated:
            fields.append((field.name, [_prost_value(field, item) for item in value]))
        elif field.type == FieldDescriptor.TYPE_MESSAGE or _is_proto3_optional(field):
            present = message.HasField(field.name)
            fields.append((field.name, some(_prost_value(field, value) if present else None)))
        else:
            fields.append((field.name, _prost_value(field, value)))
    for oneof in descriptor.oneofs:
        if _is_synthetic(oneof):
            continue
        chosen = message.WhichOneof(oneof.name)
        if chosen is None:
            fields.append((oneof.name, NONE))
            continue
        field = descriptor.fields_by_name[chosen]
        fields.append((oneof.name, some(Tuple(camel(chosen), [_prost_value(field, getattr(message, chosen))]))))
    return Struct(name or descriptor.name, fields)


def _is_synthetic(oneof: Any) -> bool:
    return len(oneof.fields) == 1 and _is_proto3_optional(oneof.fields[0])


def _is_proto3_optional(field: FieldDescriptor) -> bool:
    oneof = field.containing_oneof
    return oneof is not None and len(oneof.fields) == 1 and oneof.name == "_" + field.name
