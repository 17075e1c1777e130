"""``alter_columns``: renames and nullability changes (``Project``) and safe casts (``Merge``).

A cast column gets a new field id (one above every id in use, like pylance) and its values,
cast with overflow checks, go to one new data file per fragment; the old data stays on disk
under the old id until compaction and cleanup remove it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.dataset.evolution.base import (
    new_column_file,
    next_field_id_of,
    resolve_field,
    set_merge,
    set_project,
)
from lance_format.dataset.mutations.base import Prepared, cast_to, storage_version_of, transaction_for
from lance_format.errors import InvalidInputError, UnsupportedFeatureError
from lance_format.index.metadata import user_segments
from lance_format.proto import file_pb2
from lance_format.schema import LanceField, LanceSchema
from lance_format.schema.fields import refuse_dotted_names

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset


def _has_nulls(ds: LanceDataset, path: str) -> bool:
    top, *rest = path.split(".")
    for batch in ds.scanner(columns=[top]).to_batches():
        column = batch.column(0)
        for name in rest:
            column = pc.struct_field(column, name)
        if column.null_count:
            return True
    return False


def _castable(source: pa.DataType, target: pa.DataType) -> bool:
    t = pa.types
    pairs = [
        (t.is_integer, t.is_integer), (t.is_floating, t.is_floating),
        (lambda x: t.is_string(x) or t.is_large_string(x), lambda x: t.is_string(x) or t.is_large_string(x)),
        (lambda x: t.is_binary(x) or t.is_large_binary(x), lambda x: t.is_binary(x) or t.is_large_binary(x)),
        (lambda x: t.is_timestamp(x), lambda x: t.is_timestamp(x)),
    ]
    if any(a(source) and b(target) for a, b in pairs):
        return True
    lists = (t.is_list, t.is_large_list)
    if any(f(source) for f in lists) and any(f(target) for f in lists):
        return _castable(source.value_type, target.value_type)
    if t.is_fixed_size_list(source) and t.is_fixed_size_list(target):
        return source.list_size == target.list_size and _castable(source.value_type, target.value_type)
    return False


_ARROW_RS_NAMES = {
    "int8": "Int8", "int16": "Int16", "int32": "Int32", "int64": "Int64",
    "uint8": "UInt8", "uint16": "UInt16", "uint32": "UInt32", "uint64": "UInt64",
    "halffloat": "Float16", "float": "Float32", "double": "Float64", "bool": "Boolean",
    "string": "Utf8", "large_string": "LargeUtf8", "string_view": "Utf8View",
    "binary": "Binary", "large_binary": "LargeBinary", "date32[day]": "Date32", "date64[ms]": "Date64",
}


def arrow_rs_name(dtype: pa.DataType) -> str:
    """The name pylance's messages give a type (arrow-rs's), e.g. ``Utf8`` for ``string``."""
    return _ARROW_RS_NAMES.get(str(dtype), str(dtype))


def _cast_values(array: pa.Array, target: pa.DataType, *, column: str, table: str) -> pa.Array:
    """A checked cast; a value the target cannot hold is named as pylance names it
    ("Can't cast value 1024 to type Int8")."""
    try:
        return cast_to(array, target, column=column, table=table)
    except InvalidInputError:
        try:
            # the values that do not survive a round trip through the target type are the lost ones
            back = pc.cast(pc.cast(array, target, safe=False), array.type, safe=False)
            lost = pc.fill_null(pc.not_equal(array, back), False)
            first = pc.index(lost, True).as_py()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            first = -1
        if first < 0:
            raise
        raise InvalidInputError(f"Cast error: Can't cast value {array[first].as_py()} to type "
                                f"{arrow_rs_name(target)}", table=table, column=column) from None


def _refuse_indexed_casts(ds: LanceDataset, casts: Mapping[int, pa.DataType]) -> None:
    """pylance refuses to cast a column an index is attached to (the cast would invalidate it)."""
    if not casts:
        return
    original = {f.id: f.name for f in ds.manifest.fields}  # pylance names them before any rename
    covered = {child.id: top for top in casts for child in ds.lance_schema.walk() if _within(ds, child.id, top)}
    names: list[str] = []
    columns: list[str] = []
    for segment in user_segments(ds.manifest_file.index_section):
        hit = [covered[f] for f in segment.meta.fields if f in covered]
        if hit:
            if segment.name not in names:
                names.append(segment.name)
            columns.extend(original[top] for top in hit if original[top] not in columns)
    if names:
        ordered = [original[top] for top in casts if original[top] in columns]
        raise InvalidInputError(
            f"Cannot cast column(s) [{', '.join(ordered)}] to a new type: they have {len(names)} index(es) "
            f"attached: [{', '.join(names)}]. Cast rewrites column data and invalidates any index on the affected "
            "column(s). Drop the index(es) with drop_index() before altering, then recreate them after the cast "
            "completes.", table=ds.uri)


def _within(ds: LanceDataset, field_id: int, top: int) -> bool:
    parents = {f.id: f.parent_id for f in ds.manifest.fields}
    while field_id != -1:
        if field_id == top:
            return True
        field_id = parents.get(field_id, -1)
    return False


def apply_alterations(
    ds: LanceDataset, alterations: tuple[Mapping[str, Any], ...], properties, commit_message
) -> Prepared:
    fields = [file_pb2.Field.FromString(f.SerializeToString()) for f in ds.manifest.fields]
    by_id = {f.id: f for f in fields}
    casts: dict[int, pa.DataType] = {}
    changes_nullability = False
    for alteration in alterations:
        path = alteration["path"]
        target = by_id[resolve_field(ds, path).id]
        if alteration.get("name") is not None:
            name = alteration["name"]
            if any(f.parent_id == target.parent_id and f.name == name and f.id != target.id for f in fields):
                raise InvalidInputError(f"cannot rename {path!r} to {name!r}: a column of that name exists",
                                        table=ds.uri, column=path)
            if target.parent_id == -1:
                refuse_dotted_names([name], table=ds.uri)
            target.name = name
        if alteration.get("nullable") is not None:
            nullable = bool(alteration["nullable"])
            if not nullable and target.nullable and _has_nulls(ds, path):
                raise InvalidInputError(f"column {path!r} contains nulls, so it cannot be made non-nullable",
                                        table=ds.uri, column=path)
            changes_nullability = True
            target.nullable = nullable
        if alteration.get("data_type") is not None:
            new_type = alteration["data_type"]
            if not isinstance(new_type, pa.DataType):
                raise InvalidInputError(f"data_type for {path!r} must be a pyarrow DataType", table=ds.uri)
            if target.parent_id != -1:
                raise UnsupportedFeatureError(f"casting the nested column {path!r} is not supported", table=ds.uri)
            old_type = next(f for f in ds.lance_schema.fields if f.id == target.id).data_type

            if not old_type.equals(new_type) and not _castable(old_type, new_type):
                raise InvalidInputError(f'Cannot cast column "{path}" from {arrow_rs_name(old_type)} to '
                                        f'{arrow_rs_name(new_type)}',
                                        table=ds.uri, column=path)
            if not old_type.equals(new_type):
                casts[target.id] = new_type

    _refuse_indexed_casts(ds, casts)
    prepared = Prepared(transaction_for(ds, properties, commit_message), None, storage_version=storage_version_of(ds))
    if not casts:
        set_project(prepared, fields, preserves_nullability=not changes_nullability)
        return prepared

    # Casts: rebuild the cast columns' field subtrees under new ids, in schema order.
    next_id = [next_field_id_of(ds.manifest)]
    old_schema = LanceSchema.from_protos(list(ds.manifest.fields), dict(ds.manifest.schema_metadata))
    new_fields: list[LanceField] = []
    old_names: list[str] = []
    result: list[file_pb2.Field] = []
    for field in LanceSchema.from_protos(fields, dict(ds.manifest.schema_metadata)).fields:
        if field.id not in casts:
            result.extend(field.to_protos())
            continue
        arrow = pa.field(field.name, casts[field.id], field.nullable,
                         metadata={k.encode(): v for k, v in field.metadata.items()} or None)
        replacement = LanceField.from_arrow(arrow, next_id)
        new_fields.append(replacement)
        old_names.append(next(f.name for f in old_schema.fields if f.id == field.id))
        result.extend(replacement.to_protos())
    new_schema = LanceSchema(new_fields, {})
    arrow_schema = new_schema.to_arrow()

    def cast_batches(fragment):
        for batch in ds.scanner(columns=old_names, fragments=[fragment]).to_batches():
            columns = [_cast_values(batch.column(i), f.type, column=f.name, table=ds.uri)
                       for i, f in enumerate(arrow_schema)]
            yield pa.RecordBatch.from_arrays(columns, schema=arrow_schema)

    metas = [new_column_file(ds, f, new_schema, cast_batches(f), prepared) for f in ds.get_fragments()]
    set_merge(ds, prepared, metas, result)
    return prepared
