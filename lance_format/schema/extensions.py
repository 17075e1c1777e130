"""Arrow extension types in Lance tables, stored the way official Lance stores them.

A column of an extension type is written as its storage type, with the Arrow field metadata
``ARROW:extension:name`` / ``ARROW:extension:metadata`` (and the name in the field's
``extension_name``): ``arrow.fixed_shape_tensor`` as a fixed-size list, ``arrow.uuid`` as 16
bytes, Python-defined extension types by their own serialization. Vectors of pylance's
``lance.bfloat16`` are the logical type ``fixed_size_list:lance.bfloat16:N`` (2-byte values).

Reads give the extension type back when pyarrow has it registered (the canonical ones always;
``lance.bfloat16`` once pylance is imported, which registers it), and the storage type with the
metadata otherwise, so nothing is lost. ``arrow.json`` columns are stored like pylance stores them:
logical type ``json``, extension name ``lance.json``, ``large_binary`` values holding JSONB
(:mod:`lance_format.schema.jsonb`); reads give ``arrow.json`` text back.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import UnsupportedFeatureError
from lance_format.schema.jsonb import JSON_TYPE, decode_array, encode_array

EXTENSION_NAME_KEY = b"ARROW:extension:name"
EXTENSION_METADATA_KEY = b"ARROW:extension:metadata"
BFLOAT16 = "lance.bfloat16"
ARROW_JSON = "arrow.json"
LANCE_JSON = "lance.json"
# extension types official Lance stores in a format of its own that this engine does not write
_REFUSED: dict[str, str] = {}


def is_lance_json(field: pa.Field) -> bool:
    """Whether a storage field holds JSONB (named ``lance.json`` in its metadata)."""
    return bool(field.metadata) and field.metadata.get(EXTENSION_NAME_KEY) == LANCE_JSON.encode()


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
        if name == ARROW_JSON:
            metadata[EXTENSION_NAME_KEY] = LANCE_JSON.encode()
            metadata[EXTENSION_METADATA_KEY] = b""
            return pa.field(field.name, pa.large_binary(), field.nullable, metadata=metadata)
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


def json_paths(field: pa.Field, prefix: str = "") -> set[str]:
    """Dotted paths of the JSONB (``lance.json``) fields in a storage field, itself included."""
    path = prefix + field.name
    found = {path} if is_lance_json(field) else set()
    data_type = field.type
    if pa.types.is_struct(data_type):
        for i in range(data_type.num_fields):
            found |= json_paths(data_type.field(i), path + ".")
    elif pa.types.is_list(data_type) or pa.types.is_large_list(data_type) or pa.types.is_fixed_size_list(data_type):
        found |= json_paths(data_type.value_field, path + ".")
    return found


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


def same_stored_type(a: pa.DataType, b: pa.DataType) -> bool:
    """Whether two Arrow types are stored alike: equal, or extension types of the same name over
    the same storage (e.g. pylance's and this package's ``lance.blob.v2`` classes)."""
    if a.equals(b):
        return True
    names = [t.extension_name if isinstance(t, pa.BaseExtensionType) else None for t in (a, b)]
    if names[0] != names[1]:
        return False
    return storage_field(pa.field("v", a)).type.equals(storage_field(pa.field("v", b)).type)


def to_storage(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A batch whose extension columns are cast to their storage (zero-copy)."""
    target = storage_schema(batch.schema)
    if target is batch.schema:
        return batch
    columns = [_to_storage_array(c, f.type) for c, f in zip(batch.columns, target)]
    return pa.RecordBatch.from_arrays(columns, schema=target)


def _has_json(data_type: pa.DataType) -> bool:
    if isinstance(data_type, pa.BaseExtensionType):
        return data_type.extension_name == ARROW_JSON
    if pa.types.is_struct(data_type):
        return any(_has_json(data_type.field(i).type) for i in range(data_type.num_fields))
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type) or pa.types.is_fixed_size_list(data_type):
        return _has_json(data_type.value_type)
    return False


def _rebuild(array: pa.Array, target: pa.DataType, convert: Callable[[pa.Array, pa.DataType], pa.Array]) -> pa.Array:
    """``array`` (a struct or list) with its children converted by ``convert`` to ``target``."""
    mask = array.is_null() if array.null_count else None
    if pa.types.is_struct(target):
        children = [convert(array.field(i), target.field(i).type) for i in range(target.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if pa.types.is_list(target) or pa.types.is_large_list(target):
        build = pa.LargeListArray if pa.types.is_large_list(target) else pa.ListArray
        values = array.values.slice(array.offsets[0].as_py(), array.offsets[-1].as_py() - array.offsets[0].as_py())
        offsets = pc.subtract(array.offsets, array.offsets[0])
        return build.from_arrays(offsets, convert(values, target.value_type), type=target, mask=mask)
    if pa.types.is_fixed_size_list(target):
        values = array.values.slice(array.offset * target.list_size, len(array) * target.list_size)
        return pa.FixedSizeListArray.from_arrays(convert(values, target.value_type), type=target, mask=mask)
    return array.cast(target)


def _to_storage_array(array: pa.Array | pa.ChunkedArray, target: pa.DataType) -> pa.Array:
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.type.equals(target):
        return array
    if not _has_json(array.type):
        return array.cast(target)
    if isinstance(array.type, pa.BaseExtensionType):  # arrow.json itself
        return encode_array(array)
    return _rebuild(array, target, _to_storage_array)


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
    return _json_as_extension(pa.ipc.read_schema(schema.serialize()))


def _json_field(field: pa.Field) -> pa.Field:
    if is_lance_json(field):
        return pa.field(field.name, JSON_TYPE, field.nullable)
    data_type = field.type
    if pa.types.is_struct(data_type):
        return field.with_type(pa.struct([_json_field(data_type.field(i)) for i in range(data_type.num_fields)]))
    if pa.types.is_list(data_type):
        return field.with_type(pa.list_(_json_field(data_type.value_field)))
    if pa.types.is_large_list(data_type):
        return field.with_type(pa.large_list(_json_field(data_type.value_field)))
    if pa.types.is_fixed_size_list(data_type):
        return field.with_type(pa.list_(_json_field(data_type.value_field), data_type.list_size))
    return field


def _json_as_extension(schema: pa.Schema) -> pa.Schema:
    """Storage fields named ``lance.json`` (no pyarrow type has that name) as ``arrow.json``."""
    return pa.schema([_json_field(f) for f in schema], metadata=schema.metadata)


def as_extension_arrays(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` (storage columns) cast to ``schema`` (from :func:`with_extension_types`)."""
    if batch.schema.equals(schema, check_metadata=False):
        return batch
    columns = [_from_storage_array(c, f.type) for c, f in zip(batch.columns, schema)]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _from_storage_array(array: pa.Array | pa.ChunkedArray, target: pa.DataType) -> pa.Array:
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.type.equals(target):
        return array
    if not _has_json(target):
        return array.cast(target)
    if isinstance(target, pa.BaseExtensionType):  # arrow.json from JSONB
        return decode_array(array)
    return _rebuild(array, target, _from_storage_array)
