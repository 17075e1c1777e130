"""pylance's view of a schema's fields: ``schema.fields()`` gives ``LanceField`` objects whose
name, id and children are methods and whose metadata is a ``dict[str, str]``.

This engine's :class:`~lance_format.schema.fields.LanceSchema` keeps its fields as a list
(``schema.fields[0].name``); that list, called, returns these views, so code written for
pylance (``for f in ds.lance_schema.fields(): f.name()``) runs unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from lance_format.schema.fields import LanceField


class PylanceField:
    """One field as pylance's ``lance.schema.LanceField`` shows it."""

    def __init__(self, field: LanceField) -> None:
        self._field = field

    def name(self) -> str:
        return self._field.name

    def id(self) -> int:
        return self._field.id

    def children(self) -> list[PylanceField]:
        return [PylanceField(child) for child in self._field.children]

    def to_arrow(self) -> pa.Field:
        return self._field.to_arrow()

    @property
    def metadata(self) -> dict[str, str]:
        """The field's metadata as text (pylance's manifests hold it as UTF-8 strings)."""
        return {key: value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)
                for key, value in self._field.metadata.items()}

    def is_unenforced_primary_key(self) -> bool:
        return self._field.is_unenforced_primary_key

    def unenforced_primary_key_position(self) -> int | None:
        return self._field.primary_key_position if self._field.is_unenforced_primary_key else None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PylanceField) and other._field == self._field

    def __repr__(self) -> str:
        return field_debug_text(self._field)


# file.proto's Field.encoding values as pylance's Rust ``Encoding`` enum prints them
_ENCODING_NAMES = {1: "Plain", 2: "VarBinary", 3: "Dictionary", 4: "RLE"}


def _rust_str(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _metadata_debug_text(metadata: dict[str, bytes] | dict[str, str]) -> str:
    items = []
    for key, value in sorted(metadata.items()):
        text = value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)
        items.append(f"{_rust_str(key)}: {_rust_str(text)}")
    return "{" + ", ".join(items) + "}"


def field_debug_text(field: LanceField) -> str:
    """A field as pylance's ``repr`` shows it (Rust's ``Debug`` of ``lance_core``'s ``Field``);
    metadata sorted by key (pylance's order is a hash map's); a dictionary column's values are
    not printed (pylance prints the Arrow array)."""
    encoding = _ENCODING_NAMES.get(field.encoding)
    position = field.primary_key_position if field.is_unenforced_primary_key else None
    children = ", ".join(field_debug_text(child) for child in field.children)
    return (f"Field {{ name: {_rust_str(field.name)}, id: {field.id}, parent_id: {field.parent_id}, "
            f"logical_type: LogicalType({_rust_str(field.logical_type)}), "
            f"metadata: {_metadata_debug_text(field.metadata)}, "
            f"encoding: {f'Some({encoding})' if encoding else 'None'}, nullable: {str(field.nullable).lower()}, "
            f"children: [{children}], dictionary: None, "
            f"unenforced_primary_key_position: {f'Some({position})' if position is not None else 'None'}, "
            f"unenforced_clustering_key_position: None }}")


def schema_debug_text(fields: list[LanceField], metadata: dict[str, bytes]) -> str:
    """A schema as pylance's ``repr(LanceSchema)`` shows it: ``Schema { fields: [...], metadata: {...} }``."""
    return (f"Schema {{ fields: [{', '.join(field_debug_text(f) for f in fields)}], "
            f"metadata: {_metadata_debug_text(metadata)} }}")


class FieldList(list["LanceField"]):
    """A schema's top-level fields (a list); called, pylance's views of them."""

    def __call__(self) -> list[PylanceField]:
        return [PylanceField(field) for field in self]


__all__ = ["PylanceField", "FieldList", "field_debug_text", "schema_debug_text"]
