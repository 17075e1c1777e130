"""Arrow extension types in Lance tables, stored the way official Lance stores them.

A column of an extension type is written as its storage type, with the Arrow field metadata
``ARROW:extension:name`` / ``ARROW:extension:metadata`` (and the name in the field's
``extension_name``): ``arrow.fixed_shape_tensor`` as a fixed-size list, ``arrow.uuid`` as 16
bytes, Python-defined extension types by their own serialization. Vectors of pylance's
``lance.bfloat16`` are the logical type ``fixed_size_list:lance.bfloat16:N`` (2-byte values).

Reads give the extension type back when pyarrow has it registered (the canonical ones always;
``lance.bfloat16`` once pylance is imported, which registers it), and the storage type with the
metadata otherwise, so nothing is lost. ``arrow.json`` is refused: official Lance stores JSON as
binary JSONB, which this engine does not encode.
"""

from __future__ import annotations

import json

import pyarrow as pa

from lance_format.errors import UnsupportedFeatureError

EXTENSION_NAME_KEY = b"ARROW:extension:name"
EXTENSION_METADATA_KEY = b"ARROW:extension:metadata"
BFLOAT16 = "lance.bfloat16"
# extension types official Lance stores in a format of its own that this engine does not write
_REFUSED = {"arrow.json": "JSON columns (official Lance stores them as JSONB, which this engine does not encode)",
            "lance.blob.v2": "blob v2 columns (official Lance writes them out of line)"}


def _serialized(data_type: pa.BaseExtensionType) -> bytes:
    serialize = getattr(data_type, "__arrow_ext_serialize__", None)
    if serialize is not None:
        return bytes(serialize())
    if data_type.extension_name == "arrow.fixed_shape_tensor":
        spec: dict[str, object] = {"shape": list(data_type.shape)}
        if data_type.dim_names:
            spec["dim_names"] = list(data_type.dim_names)
        if data_type.permutation and list(data_type.permutation) != sorted(data_type.permutation):
            spec["permutation"] = list(data_type.permutation)
        return json.dumps(spec, separators=(",", ":")).encode()
    if data_type.extension_name in ("arrow.uuid", "arrow.bool8"):
        return b""
    raise UnsupportedFeatureError(f"extension type {data_type.extension_name} cannot be stored (unknown serialization)")


def storage_field(field: pa.Field) -> pa.Field:
    """``field`` with every extension type replaced by its storage type plus the metadata that
    names it; fields without extension types come back unchanged."""
    data_type = field.type
    metadata = dict(field.metadata or {})
    if isinstance(data_type, pa.BaseExtensionType):
        name = data_type.extension_name
        if name in _REFUSED:
            raise UnsupportedFeatureError(f"field {field.name!r} has extension type {name}: {_REFUSED[name]} "
                                          "are not supported", column=field.name)
        metadata[EXTENSION_NAME_KEY] = name.encode()
        metadata[EXTENSION_METADATA_KEY] = _serialized(data_type)
        return storage_field(pa.field(field.name, data_type.storage_type, field.nullable, metadata=metadata))
    if pa.types.is_struct(data_type):
        children = [storage_field(data_type.field(i)) for i in range(data_type.num_fields)]
        return field.with_type(pa.struct(children))
    if pa.types.is_list(data_type):
        return field.with_type(pa.list_(storage_field(data_type.value_field)))
    if pa.types.is_large_list(data_type):
        return field.with_type(pa.large_list(storage_field(data_type.value_field)))
    if pa.types.is_fixed_size_list(data_type):
        return field.with_type(pa.list_(storage_field(data_type.value_field), data_type.list_size))
    return field


def has_extension(data_type: pa.DataType) -> bool:
    """Whether a type is or contains an extension type."""
    if isinstance(data_type, pa.BaseExtensionType):
        return True
    if pa.types.is_struct(data_type):
        return any(has_extension(data_type.field(i).type) for i in range(data_type.num_fields))
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type) or pa.types.is_fixed_size_list(data_type):
        return has_extension(data_type.value_type)
    return False


def storage_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with extension types as their storage (see :func:`storage_field`)."""
    if not any(has_extension(f.type) for f in schema):
        return schema
    return pa.schema([storage_field(f) for f in schema], metadata=schema.metadata)


def to_storage(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A batch whose extension columns are cast to their storage (zero-copy)."""
    target = storage_schema(batch.schema)
    if target is batch.schema:
        return batch
    columns = [c.cast(f.type) if not c.type.equals(f.type) else c for c, f in zip(batch.columns, target)]
    return pa.RecordBatch.from_arrays(columns, schema=target)


def _names_extension(metadata: dict[bytes, bytes] | None) -> bool:
    return bool(metadata) and EXTENSION_NAME_KEY in metadata  # type: ignore[operator]


def _mentions_extension(data_type: pa.DataType) -> bool:
    if pa.types.is_struct(data_type):
        return any(_names_extension(data_type.field(i).metadata) or _mentions_extension(data_type.field(i).type)
                   for i in range(data_type.num_fields))
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type) or pa.types.is_fixed_size_list(data_type):
        return _names_extension(data_type.value_field.metadata) or _mentions_extension(data_type.value_type)
    return False


def with_extension_types(schema: pa.Schema) -> pa.Schema:
    """Storage fields that name a registered extension type become that type (an IPC round trip
    of the schema, as pyarrow imports any schema); the others keep storage and metadata."""
    if not any(_names_extension(f.metadata) or _mentions_extension(f.type) for f in schema):
        return schema
    return pa.ipc.read_schema(schema.serialize())


def as_extension_arrays(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` (storage columns) cast to ``schema`` (from :func:`with_extension_types`)."""
    if batch.schema.equals(schema, check_metadata=False):
        return batch
    columns = [c.cast(f.type) if not c.type.equals(f.type) else c for c, f in zip(batch.columns, schema)]
    return pa.RecordBatch.from_arrays(columns, schema=schema)
