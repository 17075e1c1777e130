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

    def __init__(self, field: "LanceField") -> None:
        self._field = field

    def name(self) -> str:
        return self._field.name

    def id(self) -> int:
        return self._field.id

    def children(self) -> list["PylanceField"]:
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
        return (f"Field {{ name: {self._field.name!r}, id: {self._field.id}, parent_id: {self._field.parent_id}, "
                f"logical_type: {self._field.logical_type!r}, nullable: {str(self._field.nullable).lower()}, "
                f"children: {self.children()!r} }}")


class FieldList(list["LanceField"]):
    """A schema's top-level fields (a list); called, pylance's views of them."""

    def __call__(self) -> list[PylanceField]:
        return [PylanceField(field) for field in self]


__all__ = ["PylanceField", "FieldList"]
