"""Lance logical-type strings <-> Arrow data types.

The strings are the ones official Lance stores in ``Field.logical_type`` (``halffloat``,
``timestamp:us:-``, ``decimal:128:10:2``, ``fixed_size_list:float:4``, ...). Nested types
(list, struct, map, fixed-size lists of nested values) also need the field's children.

Maps (logical type ``map``, file version 2.2 only) have one child, the non-null ``entries``
struct with a non-null key and a value; as in pylance, the Arrow map built from them always
names its children ``entries`` / ``key`` / ``value`` (Arrow map equality ignores those names)
and is never ``keys_sorted`` (pylance refuses sorted maps: Lance cannot record the flag).
"""

from __future__ import annotations

import pyarrow as pa

from lance_format.errors import UnsupportedFeatureError

_SIMPLE_TO_ARROW: dict[str, pa.DataType] = {
    "null": pa.null(),
    "bool": pa.bool_(),
    "int8": pa.int8(),
    "uint8": pa.uint8(),
    "int16": pa.int16(),
    "uint16": pa.uint16(),
    "int32": pa.int32(),
    "uint32": pa.uint32(),
    "int64": pa.int64(),
    "uint64": pa.uint64(),
    "halffloat": pa.float16(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "binary": pa.binary(),
    "large_string": pa.large_string(),
    "large_binary": pa.large_binary(),
    "json": pa.large_binary(),
    "date32:day": pa.date32(),
    "date64:ms": pa.date64(),
    "time32:s": pa.time32("s"),
    "time32:ms": pa.time32("ms"),
    "time64:us": pa.time64("us"),
    "time64:ns": pa.time64("ns"),
    "duration:s": pa.duration("s"),
    "duration:ms": pa.duration("ms"),
    "duration:us": pa.duration("us"),
    "duration:ns": pa.duration("ns"),
}
_SIMPLE_FROM_ARROW = {v: k for k, v in _SIMPLE_TO_ARROW.items() if k != "json"}


def logical_type_of(data_type: pa.DataType) -> str:
    """The logical-type string official Lance writes for an Arrow type."""
    if data_type in _SIMPLE_FROM_ARROW:
        return _SIMPLE_FROM_ARROW[data_type]
    if pa.types.is_timestamp(data_type):
        return f"timestamp:{data_type.unit}:{data_type.tz if data_type.tz else '-'}"
    if pa.types.is_decimal128(data_type):
        return f"decimal:128:{data_type.precision}:{data_type.scale}"
    if pa.types.is_decimal256(data_type):
        return f"decimal:256:{data_type.precision}:{data_type.scale}"
    if pa.types.is_fixed_size_binary(data_type):
        return f"fixed_size_binary:{data_type.byte_width}"
    if pa.types.is_struct(data_type):
        return "struct"
    if pa.types.is_map(data_type):
        if data_type.keys_sorted:
            raise UnsupportedFeatureError(
                f"Arrow type {data_type} has keys_sorted=true, which Lance cannot store (pylance refuses it too)"
            )
        return "map"
    if pa.types.is_list(data_type):
        return "list.struct" if pa.types.is_struct(data_type.value_type) else "list"
    if pa.types.is_large_list(data_type):
        return "large_list.struct" if pa.types.is_struct(data_type.value_type) else "large_list"
    if pa.types.is_fixed_size_list(data_type):
        return f"fixed_size_list:{logical_type_of(data_type.value_type)}:{data_type.list_size}"
    if pa.types.is_dictionary(data_type):
        return f"dict:{logical_type_of(data_type.value_type)}:{logical_type_of(data_type.index_type)}:false"
    raise UnsupportedFeatureError(f"Arrow type {data_type} cannot be stored in a Lance table")


def is_nested_logical_type(logical_type: str) -> bool:
    """Whether a field of this logical type has child fields in the Lance schema."""
    return (
        logical_type in ("struct", "list", "list.struct", "large_list", "large_list.struct", "map")
        or (logical_type.startswith("fixed_size_list:") and _fsl_parts(logical_type)[0] in _NESTED_FSL_ITEMS)
    )


_NESTED_FSL_ITEMS = ("struct", "list", "list.struct", "large_list", "large_list.struct")


def _fsl_parts(logical_type: str) -> tuple[str, int]:
    # "fixed_size_list:<item logical type, may contain ':'>:<size>"
    body = logical_type[len("fixed_size_list:") :]
    item, _, size = body.rpartition(":")
    return item, int(size)


def _map_type(children: list[pa.Field]) -> pa.DataType:
    """The Arrow map of a Lance ``map`` field from its single ``entries`` child."""
    if len(children) != 1 or not pa.types.is_struct(children[0].type) or children[0].type.num_fields != 2:
        raise UnsupportedFeatureError("a Lance map field needs one 'entries' struct child with a key and a value")
    entries = children[0].type
    key, value = entries.field(0), entries.field(1)
    # Arrow map keys are never null, whatever the stored field says
    return pa.map_(
        pa.field("key", key.type, False, metadata=key.metadata),
        pa.field("value", value.type, value.nullable, metadata=value.metadata),
    )


def arrow_type_of(logical_type: str, children: list[pa.Field] | None = None) -> pa.DataType:
    """The Arrow type for a logical-type string; nested types take their children's Arrow fields."""
    children = children or []
    if logical_type in _SIMPLE_TO_ARROW:
        return _SIMPLE_TO_ARROW[logical_type]
    try:
        if logical_type == "struct":
            return pa.struct(children)
        if logical_type in ("list", "list.struct"):
            return pa.list_(children[0])
        if logical_type in ("large_list", "large_list.struct"):
            return pa.large_list(children[0])
        if logical_type == "map":
            return _map_type(children)
        kind = logical_type.split(":", 1)[0]
        if kind == "timestamp":
            _, unit, tz = logical_type.split(":", 2)
            return pa.timestamp(unit, None if tz == "-" else tz)
        if kind == "decimal":
            _, width, precision, scale = logical_type.split(":")
            factory = pa.decimal128 if width == "128" else pa.decimal256
            return factory(int(precision), int(scale))
        if kind == "fixed_size_binary":
            return pa.binary(int(logical_type.split(":")[1]))
        if kind == "fixed_size_list":
            item, size = _fsl_parts(logical_type)
            if item == "lance.bfloat16":  # pylance's bfloat16 vectors: 2-byte values named by metadata
                bfloat16 = pa.field("item", pa.binary(2), True, metadata={
                    "ARROW:extension:name": "lance.bfloat16", "ARROW:extension:metadata": ""})
                return pa.list_(bfloat16, size)
            if children:
                return pa.list_(children[0], size)
            return pa.list_(pa.field("item", arrow_type_of(item), True), size)
        if kind == "dict":
            body = logical_type[len("dict:") :]
            # "dict:<value>:<key>:<ordered>"; the value type may itself contain ':'
            rest, _, _ordered = body.rpartition(":")
            value, _, key = rest.rpartition(":")
            return pa.dictionary(arrow_type_of(key), arrow_type_of(value))
    except (IndexError, ValueError) as exc:
        raise UnsupportedFeatureError(f"malformed Lance logical type {logical_type!r}") from exc
    raise UnsupportedFeatureError(f"unknown Lance logical type {logical_type!r}")
