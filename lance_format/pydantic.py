"""Arrow schemas from pydantic models, as pylance's ``lance.pydantic`` maps them.

``int`` -> int64, ``float`` -> float64, ``str`` -> utf8, ``bool``, ``bytes`` -> binary,
``date`` -> date32, ``datetime`` -> timestamp[us] (a ``tz`` in the field's
``json_schema_extra`` sets its zone), ``list[T]`` -> list, nested models -> struct, string
enums -> dictionary<int32, utf8> (other enums by their values' type), ``Optional[T]`` ->
nullable; ``Vector(dim)`` / ``MultiVector(dim)`` are fixed-size-list embeddings. pydantic is
imported only by code that uses this module (it is not a dependency of ``lance_format``).
"""

from __future__ import annotations

import types
import typing
from datetime import date, datetime
from enum import Enum
from typing import Any

import pyarrow as pa

_FLOAT32 = pa.float32()
_SIMPLE: dict[type, pa.DataType] = {int: pa.int64(), float: pa.float64(), str: pa.utf8(), bool: pa.bool_(),
                                    bytes: pa.binary(), date: pa.date32()}


class _VectorType(list):  # type: ignore[type-arg]
    """Base of the classes ``Vector`` and ``MultiVector`` make (a list, as pydantic validates it)."""

    dim: int = 0
    value_type: pa.DataType = pa.float32()
    nullable_values: bool = True
    multi: bool = False

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        inner = handler.generate_schema(list[list[float]] if cls.multi else list[float])
        return inner


def Vector(dim: int, value_type: pa.DataType = _FLOAT32, nullable: bool = True) -> type:  # noqa: N802
    """A pydantic field type for a fixed-size embedding of ``dim`` values (pylance's ``Vector``)."""
    return type("FixedSizeList", (_VectorType,), {"dim": dim, "value_type": value_type, "nullable_values": nullable})


def MultiVector(dim: int, value_type: pa.DataType = _FLOAT32, nullable: bool = True) -> type:  # noqa: N802
    """A list of fixed-size embeddings (pylance's ``MultiVector``)."""
    return type("MultiVector", (_VectorType,), {"dim": dim, "value_type": value_type, "nullable_values": nullable,
                                                "multi": True})


def _optional_inner(annotation: Any) -> Any | None:
    """T for ``Optional[T]`` / ``T | None``; None for anything else."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(annotation)) == 2:
            return args[0]
    return None


def _extra(field: Any, key: str) -> Any:
    extra = getattr(field, "json_schema_extra", None)
    return extra.get(key) if isinstance(extra, dict) else None


def _arrow_type(annotation: Any, field: Any) -> pa.DataType:
    import pydantic

    inner = _optional_inner(annotation)
    if inner is not None:
        return _arrow_type(inner, field)
    if isinstance(annotation, type):
        if issubclass(annotation, pydantic.BaseModel):
            return pa.struct([_field(name, f) for name, f in annotation.model_fields.items()])
        if issubclass(annotation, _VectorType):
            vector = pa.list_(annotation.value_type, annotation.dim)
            return pa.list_(vector) if annotation.multi else vector
        if issubclass(annotation, Enum):
            kinds = {type(member.value) for member in annotation}
            if kinds == {str}:
                return pa.dictionary(pa.int32(), pa.utf8())
            return _arrow_type(kinds.pop(), field) if len(kinds) == 1 else pa.utf8()
        if annotation is datetime:
            return pa.timestamp("us", tz=_extra(field, "tz"))
        if annotation in _SIMPLE:
            return _SIMPLE[annotation]
    if typing.get_origin(annotation) in (list, tuple):
        args = typing.get_args(annotation)
        if not args:
            raise TypeError(f"Converting Pydantic type to Arrow Type: unsupported type {annotation}. Specify the "
                            "element type, e.g. List[int] instead of a bare List.")
        child = _optional_inner(args[0])
        return pa.list_(_arrow_type(child if child is not None else args[0], field))  # items always nullable
    raise TypeError(f"Converting Pydantic type to Arrow Type: unsupported type {annotation}.")


def _field(name: str, field: Any) -> pa.Field:
    annotation = field.annotation
    inner = _optional_inner(annotation)
    if isinstance(annotation, type) and issubclass(annotation, _VectorType):
        nullable = annotation.nullable_values  # a vector's own setting, as in pylance
    else:
        nullable = inner is not None
    return pa.field(name, _arrow_type(annotation, field), nullable)


def pydantic_to_schema(model: type) -> pa.Schema:
    """The Arrow schema pylance derives from a pydantic model class.

    Raises
    ------
    TypeError
        A field's type has no Arrow mapping (as pylance raises).
    """
    return pa.schema([_field(name, f) for name, f in model.model_fields.items()])  # type: ignore[attr-defined]


def models_to_table(model_class: type, data: list[Any], schema: pa.Schema | None = None) -> pa.Table:
    """Model instances as a table of ``pydantic_to_schema(model_class)`` (or of ``schema``).

    Raises
    ------
    TypeError
        ``model_class`` is not a pydantic model, ``data`` is not a list, or an item is not exactly
        a ``model_class`` (a subclass may carry fields the schema lacks); the message names its index.
    ValueError
        ``data`` is empty.
    """
    import pydantic

    if not (isinstance(model_class, type) and issubclass(model_class, pydantic.BaseModel)):
        raise TypeError(f"`model_class` must be a Pydantic BaseModel subclass, got {model_class!r}")
    if not isinstance(data, list):
        raise TypeError(f"Pydantic model data must be provided as a list, got {type(data)!r}")
    wrong = next((i for i, item in enumerate(data) if type(item) is not model_class), None)
    if wrong is not None:
        raise TypeError(f"data[{wrong}] must be an instance of {model_class!r} exactly (subclasses are not "
                        f"accepted), got {type(data[wrong])!r} (data has {len(data)} items)")
    if not data:
        raise ValueError("`data` must be a non-empty list of Pydantic model instances.")
    rows = [item.model_dump(mode="python") for item in data]
    for row in rows:  # enums go in as their values
        for key, value in row.items():
            if isinstance(value, Enum):
                row[key] = value.value
    return pa.Table.from_pylist(rows, schema=schema if schema is not None else pydantic_to_schema(model_class))


__all__ = ["Vector", "MultiVector", "pydantic_to_schema", "models_to_table"]
