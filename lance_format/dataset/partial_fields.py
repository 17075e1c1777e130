"""Nested fields a data file does not store: read the stored part, then add the rest as nulls.

A data file may hold only some children of a struct, also inside lists, and in any order: an
append whose ``list<struct<c, b>>`` lacks the schema's ``a`` writes ``DataFile.fields`` like
``[.., c, b]`` (official Lance up to at least 14 does; the Lance repository's
``v1.0.1/list_struct_reorder`` table is one). Official Lance reads the missing children as
nulls and puts the children in schema order. Here the file is read with a plan whose types
keep only the stored children (the readers find columns by field id, so order does not
matter), and :func:`fill_missing_children` widens the result to the schema's type.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def narrowed_type(data_type: pa.DataType, child_fields: list[pa.Field]) -> pa.DataType:
    """``data_type`` with its children replaced by ``child_fields`` (the stored ones)."""
    if pa.types.is_struct(data_type):
        return pa.struct(child_fields)
    (item,) = child_fields
    if pa.types.is_large_list(data_type):
        return pa.large_list(item)
    if pa.types.is_fixed_size_list(data_type):
        return pa.list_(item, data_type.list_size)
    if pa.types.is_list(data_type):
        return pa.list_(item)
    return data_type


def fill_missing_children(array: pa.Array, target: pa.DataType) -> pa.Array:
    """``array`` with the struct children of ``target`` it lacks added as nulls, in ``target``'s order."""
    if array.type == target:
        return array
    mask = pc.invert(array.is_valid()) if array.null_count else None
    if pa.types.is_struct(target) and pa.types.is_struct(array.type):
        stored = {array.type.field(i).name: i for i in range(array.type.num_fields)}
        children = [
            fill_missing_children(array.field(stored[f.name]), f.type) if f.name in stored
            else pa.nulls(len(array), f.type)
            for f in target
        ]
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if pa.types.is_fixed_size_list(target) and pa.types.is_fixed_size_list(array.type):
        size = target.list_size
        values = array.values.slice(array.offset * size, len(array) * size)
        return pa.FixedSizeListArray.from_arrays(
            fill_missing_children(values, target.value_type), type=target, mask=mask)
    if (pa.types.is_list(target) or pa.types.is_large_list(target)) and type(array.type) is type(target):
        offsets = np.asarray(array.offsets)
        first = int(offsets[0]) if len(offsets) else 0
        values = array.values.slice(first, int(offsets[-1]) - first if len(offsets) else 0)
        cls = pa.LargeListArray if pa.types.is_large_list(target) else pa.ListArray
        return cls.from_arrays(pa.array(offsets - first, array.offsets.type),
                               fill_missing_children(values, target.value_type), type=target, mask=mask)
    return array
