"""Schema evolution policy: how an asset's columns are reconciled with its table's columns.

``error`` refuses any difference; ``add_columns`` adds new columns to the table (and writes
nulls for table columns the data lacks); ``overwrite`` replaces the schema, which only a
full-table overwrite can do. Columns are never dropped silently, and a column whose type
changes is cast only when the cast cannot change values (widening, string <-> large_string, time
unit changes that a safe cast checks row by row).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa

from lance_assets.config import SchemaMode
from lance_format.errors import SchemaMismatchError

_INT_RANK = {pa.int8(): 1, pa.int16(): 2, pa.int32(): 3, pa.int64(): 4}
_UINT_RANK = {pa.uint8(): 1, pa.uint16(): 2, pa.uint32(): 3, pa.uint64(): 4}


def castable(src: pa.DataType, dst: pa.DataType) -> bool:
    """Whether data of type ``src`` may be written into a column of type ``dst``."""
    if src.equals(dst):
        return True
    if pa.types.is_dictionary(src):
        return castable(src.value_type, dst)
    strings = (pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view)
    if any(f(src) for f in strings) and any(f(dst) for f in strings):
        return True
    binaries = (pa.types.is_binary, pa.types.is_large_binary)
    if any(f(src) for f in binaries) and any(f(dst) for f in binaries):
        return True
    if src in _INT_RANK and dst in _INT_RANK:
        return True  # narrowing is checked value by value (safe cast)
    if src in _UINT_RANK and dst in _UINT_RANK:
        return True
    if src in _UINT_RANK and dst in _INT_RANK:
        return True
    if pa.types.is_floating(src) and pa.types.is_floating(dst):
        return src.bit_width <= dst.bit_width
    if pa.types.is_timestamp(src) and pa.types.is_timestamp(dst):
        return (src.tz is None) == (dst.tz is None)  # naive vs aware would shift instants
    if pa.types.is_date(src) and pa.types.is_date(dst):
        return True
    if (pa.types.is_list(src) or pa.types.is_large_list(src)) and (pa.types.is_list(dst) or pa.types.is_large_list(dst)):
        return castable(src.value_type, dst.value_type)
    return False


@dataclass
class SchemaPlan:
    """What a write must do: columns to add to the table first, and the schema to write."""

    target: pa.Schema
    add_fields: list[pa.Field] = field(default_factory=list)

    def conformer(self, *, table: str) -> Callable[[pa.RecordBatch], pa.RecordBatch]:
        target = self.target

        def conform(batch: pa.RecordBatch) -> pa.RecordBatch:
            arrays = []
            for f in target:
                index = batch.schema.get_field_index(f.name)
                if index < 0:
                    arrays.append(pa.nulls(batch.num_rows, f.type))
                    continue
                array = batch.column(index)
                if not array.type.equals(f.type):
                    try:
                        array = array.cast(f.type, safe=True)
                    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                        raise SchemaMismatchError(
                            f"cannot store column {f.name!r} of type {array.type} as the table's {f.type}: {exc}",
                            table=table, column=f.name,
                        ) from None
                arrays.append(array)
            return pa.RecordBatch.from_arrays(arrays, schema=target)

        return conform


def plan_schema(
    table_schema: pa.Schema | None,
    data_schema: pa.Schema,
    mode: SchemaMode,
    *,
    full_overwrite: bool,
    table: str,
) -> SchemaPlan:
    """Reconcile the data's columns with the table's under ``mode``; raise on a refused change."""
    if table_schema is None:
        return SchemaPlan(target=data_schema)
    if full_overwrite and mode is SchemaMode.OVERWRITE:
        return SchemaPlan(target=data_schema)
    data_names = set(data_schema.names)
    missing = [f for f in table_schema if f.name not in data_names]
    extra = [f for f in data_schema if f.name not in table_schema.names]
    incompatible = [
        f"{f.name!r} ({data_schema.field(f.name).type} -> table {f.type})"
        for f in table_schema
        if f.name in data_names and not castable(data_schema.field(f.name).type, f.type)
    ]
    if incompatible:
        raise SchemaMismatchError(
            f"column type changes are not allowed (schema_mode={mode.value}): {', '.join(incompatible)}; "
            "overwrite the whole table with schema_mode='overwrite' to change types",
            table=table,
        )
    if not missing and not extra:
        return SchemaPlan(target=table_schema)
    if mode is SchemaMode.ERROR:
        problems = []
        if extra:
            problems.append(f"new columns {[f.name for f in extra]}")
        if missing:
            problems.append(f"missing columns {[f.name for f in missing]}")
        raise SchemaMismatchError(
            "data does not match the table schema: " + "; ".join(problems)
            + " (set schema_mode='add_columns' to add columns, or 'overwrite' with a full overwrite)",
            table=table,
        )
    if mode is SchemaMode.OVERWRITE:
        raise SchemaMismatchError(
            "schema_mode='overwrite' can only replace the schema on a full-table overwrite "
            "(write_mode='overwrite' without partitions); this write would drop or add columns "
            f"{[f.name for f in missing + extra]} for rows it does not rewrite",
            table=table,
        )
    required = [f.name for f in missing if not f.nullable]
    if required:
        raise SchemaMismatchError(
            f"data lacks non-nullable table columns {required}; they cannot be filled with nulls", table=table
        )
    added = [f.with_nullable(True) for f in extra]
    target = pa.schema(list(table_schema) + added, metadata=table_schema.metadata)
    return SchemaPlan(target=target, add_fields=[] if full_overwrite else added)
