"""Spark <-> Arrow <-> Lance schemas, and the per-batch conversions at both borders.

Reading, a Lance column becomes the Spark type that holds its values without loss of meaning:
unsigned integers widen (uint64 into long, checked), float16 widens to float, large and view
strings/binaries become string/binary, every tz-aware timestamp becomes ``TimestampType``
(UTC instants) and every naive one ``TimestampNTZType`` (so wall-clock values never shift
with the session time zone), lists of any kind become arrays, maps maps (Lance stores them in
file version 2.2 only), dictionaries their values.
Types Spark cannot hold (decimal256 beyond 38 digits, unions, extension types) are refused
with an error naming the column.

Writing a new table, a Spark column becomes the natural Arrow type, refined by field-metadata
markers that survive a ``read -> transform -> write`` round trip (lance-spark's keys):
``arrow.fixed-size-list.size`` (an array becomes a fixed-size-list vector), ``arrow.large_var_char``
(large_string), ``arrow.large_binary``, ``arrow.large_list``, ``arrow.float16``. Appending, the
table's own Arrow types are the target and each batch is cast to them.

Batches are converted column by column with Arrow casts (vectorized; nothing per row).
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T

from lance_format.errors import SchemaMismatchError, UnsupportedFeatureError

FSL_SIZE_KEY = "arrow.fixed-size-list.size"
LARGE_STRING_KEY = "arrow.large_var_char"
LARGE_BINARY_KEY = "arrow.large_binary"
LARGE_LIST_KEY = "arrow.large_list"
FLOAT16_KEY = "arrow.float16"
_MARKERS = (FSL_SIZE_KEY, LARGE_STRING_KEY, LARGE_BINARY_KEY, LARGE_LIST_KEY, FLOAT16_KEY)


# -- Lance (Arrow) -> Spark ------------------------------------------------------------------------
def _unsupported(column: str, data_type: pa.DataType, why: str = "Spark has no type for it") -> UnsupportedFeatureError:
    return UnsupportedFeatureError(f"column {column!r} has Arrow type {data_type}: {why}", column=column)


def spark_field(field: pa.Field, column: str | None = None) -> T.StructField:
    """The Spark field for a Lance/Arrow field (markers in the metadata keep the Arrow type)."""
    name = column or field.name
    data_type, metadata = _spark_type(field.type, name)
    return T.StructField(field.name, data_type, nullable=field.nullable, metadata=metadata)


def _spark_type(t: pa.DataType, column: str) -> tuple[T.DataType, dict]:
    meta: dict = {}
    if pa.types.is_boolean(t):
        return T.BooleanType(), meta
    if pa.types.is_int8(t):
        return T.ByteType(), meta
    if pa.types.is_int16(t) or pa.types.is_uint8(t):
        return T.ShortType(), meta
    if pa.types.is_int32(t) or pa.types.is_uint16(t):
        return T.IntegerType(), meta
    if pa.types.is_int64(t) or pa.types.is_uint32(t) or pa.types.is_uint64(t):
        return T.LongType(), meta
    if pa.types.is_float16(t):
        return T.FloatType(), {FLOAT16_KEY: "true"}
    if pa.types.is_float32(t):
        return T.FloatType(), meta
    if pa.types.is_float64(t):
        return T.DoubleType(), meta
    if pa.types.is_decimal(t):
        if t.precision > 38:
            raise _unsupported(column, t, "Spark decimals hold at most 38 digits")
        return T.DecimalType(t.precision, t.scale), meta
    if pa.types.is_string(t) or pa.types.is_string_view(t):
        return T.StringType(), meta
    if pa.types.is_large_string(t):
        return T.StringType(), {LARGE_STRING_KEY: "true"}
    if pa.types.is_binary(t) or pa.types.is_fixed_size_binary(t) or pa.types.is_binary_view(t):
        return T.BinaryType(), meta
    if pa.types.is_large_binary(t):
        return T.BinaryType(), {LARGE_BINARY_KEY: "true"}
    if pa.types.is_date(t):
        return T.DateType(), meta
    if pa.types.is_timestamp(t):
        return (T.TimestampType() if t.tz else T.TimestampNTZType()), meta
    if pa.types.is_time(t):
        return T.TimeType(), meta
    if pa.types.is_duration(t):
        return T.DayTimeIntervalType(), meta
    if pa.types.is_null(t):
        return T.NullType(), meta
    if pa.types.is_dictionary(t):
        return _spark_type(t.value_type, column)
    if pa.types.is_fixed_size_list(t) or pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        element, _ = _spark_type(t.value_type, column)
        if pa.types.is_fixed_size_list(t):
            meta = {FSL_SIZE_KEY: t.list_size}
        elif pa.types.is_large_list(t):
            meta = {LARGE_LIST_KEY: "true"}
        return T.ArrayType(element, containsNull=t.value_field.nullable), meta
    if pa.types.is_map(t):
        key, _ = _spark_type(t.key_type, column)
        value, _ = _spark_type(t.item_type, column)
        return T.MapType(key, value, valueContainsNull=t.item_field.nullable), meta
    if pa.types.is_struct(t):
        return T.StructType([spark_field(t.field(i), f"{column}.{t.field(i).name}") for i in range(t.num_fields)]), meta
    raise _unsupported(column, t)


def spark_schema(arrow_schema: pa.Schema) -> T.StructType:
    """The Spark schema of a Lance table (or of a projection of it)."""
    return T.StructType([spark_field(f) for f in arrow_schema])


def spark_arrow_type(dt: T.DataType) -> pa.DataType:
    """Exactly the Arrow type Spark exchanges for ``dt`` (timestamps labelled UTC)."""
    if isinstance(dt, T.TimestampType):
        return pa.timestamp("us", tz="UTC")
    if isinstance(dt, T.ArrayType):
        return pa.list_(pa.field("element", spark_arrow_type(dt.elementType), nullable=dt.containsNull))
    if isinstance(dt, T.MapType):
        return pa.map_(
            pa.field("key", spark_arrow_type(dt.keyType), nullable=False),
            pa.field("value", spark_arrow_type(dt.valueType), nullable=dt.valueContainsNull),
        )
    if isinstance(dt, T.StructType):
        return pa.struct([pa.field(f.name, spark_arrow_type(f.dataType), nullable=f.nullable) for f in dt])
    from pyspark.sql.pandas.types import to_arrow_type

    return to_arrow_type(dt, timezone="UTC")


def spark_arrow_schema(schema: T.StructType) -> pa.Schema:
    return pa.schema([pa.field(f.name, spark_arrow_type(f.dataType), nullable=f.nullable) for f in schema])


# -- Spark -> Arrow for new tables -------------------------------------------------------------------
def _marker(metadata: Mapping, key: str) -> bool:
    return str(metadata.get(key, "")).lower() == "true"


def lance_arrow_type(
    dt: T.DataType, metadata: Mapping, column: str, *, large_types: bool = False
) -> pa.DataType:
    """The Arrow type a new Lance table stores for a Spark type (see the module docstring)."""
    if isinstance(dt, T.TimestampType):
        return pa.timestamp("us", tz="UTC")
    if isinstance(dt, T.TimestampNTZType):
        return pa.timestamp("us")
    if isinstance(dt, T.StringType):
        return pa.large_string() if large_types or _marker(metadata, LARGE_STRING_KEY) else pa.string()
    if isinstance(dt, T.BinaryType):
        return pa.large_binary() if large_types or _marker(metadata, LARGE_BINARY_KEY) else pa.binary()
    if isinstance(dt, T.FloatType) and _marker(metadata, FLOAT16_KEY):
        return pa.float16()
    if isinstance(dt, T.ArrayType):
        element = pa.field(
            "item", lance_arrow_type(dt.elementType, {}, column, large_types=large_types), nullable=dt.containsNull
        )
        size = metadata.get(FSL_SIZE_KEY)
        if size is not None:
            try:
                size = int(size)
            except (TypeError, ValueError):
                size = 0
            if size <= 0:
                raise SchemaMismatchError(f"{FSL_SIZE_KEY} of column {column!r} must be a positive integer",
                                          column=column)
            return pa.list_(element, size)
        return pa.large_list(element) if _marker(metadata, LARGE_LIST_KEY) else pa.list_(element)
    if isinstance(dt, T.MapType):
        return pa.map_(
            pa.field("key", lance_arrow_type(dt.keyType, {}, column, large_types=large_types), nullable=False),
            pa.field("value", lance_arrow_type(dt.valueType, {}, column, large_types=large_types),
                     nullable=dt.valueContainsNull),
        )
    if isinstance(dt, T.StructType):
        return pa.struct([lance_arrow_field(f, f"{column}.{f.name}", large_types=large_types) for f in dt])
    if isinstance(dt, (T.VariantType, T.UserDefinedType)) or type(dt).__name__ in ("GeometryType", "GeographyType"):
        raise UnsupportedFeatureError(f"column {column!r} has Spark type {dt.simpleString()}, which Lance "
                                      "tables cannot store", column=column)
    return spark_arrow_type(dt)


def lance_arrow_field(field: T.StructField, column: str | None = None, *, large_types: bool = False) -> pa.Field:
    name = column or field.name
    return pa.field(field.name, lance_arrow_type(field.dataType, field.metadata or {}, name, large_types=large_types),
                    nullable=field.nullable)


def lance_arrow_schema(
    schema: T.StructType,
    *,
    fixed_size_lists: Mapping[str, int] | None = None,
    large_types: bool = False,
) -> pa.Schema:
    """The Arrow schema of a new table written from a DataFrame with ``schema``.

    ``fixed_size_lists`` (column -> size) asks for vector columns without field metadata.
    """
    fields = []
    for field in schema:
        if fixed_size_lists and field.name in fixed_size_lists:
            if not isinstance(field.dataType, T.ArrayType):
                raise SchemaMismatchError(f"column {field.name!r} is {field.dataType.simpleString()}, "
                                          "not an array: it cannot become a fixed-size list", column=field.name)
            field = T.StructField(field.name, field.dataType, field.nullable,
                                  {**(field.metadata or {}), FSL_SIZE_KEY: int(fixed_size_lists[field.name])})
        fields.append(lance_arrow_field(field, large_types=large_types))
    unknown = set(fixed_size_lists or ()) - {f.name for f in schema}
    if unknown:
        raise SchemaMismatchError(f"fixed_size_lists names unknown columns {sorted(unknown)}")
    return pa.schema(fields)


def same_spark_type(a: T.DataType, b: T.DataType) -> bool:
    """Equal Spark types, ignoring nullability and metadata."""
    return a.simpleString() == b.simpleString()


# -- batch conversions -------------------------------------------------------------------------------
def _check_nulls(array: pa.Array, field: pa.Field, column: str, table: str | None) -> None:
    """Refuse nulls where ``field`` (or a nested child) is non-nullable."""
    if not field.nullable and array.null_count:
        raise SchemaMismatchError(
            f"column {column!r} is not nullable but the data has {array.null_count} null value(s)",
            table=table, column=column,
        )
    t = field.type
    if pa.types.is_struct(t):
        valid = array.is_valid() if array.null_count else None
        for i in range(t.num_fields):
            child_field = t.field(i)
            child = array.field(i)
            if not child_field.nullable and child.null_count:
                bad = child.is_null() if valid is None else pc.and_(valid, child.is_null())
                if pc.any(bad).as_py():
                    raise SchemaMismatchError(
                        f"column {column + '.' + child_field.name!r} is not nullable but the data has null value(s)",
                        table=table, column=f"{column}.{child_field.name}",
                    )
            if pa.types.is_nested(child_field.type):
                _check_nulls(child, pa.field(child_field.name, child_field.type, True), f"{column}.{child_field.name}",
                             table)
    elif pa.types.is_map(t):
        # keys are never null in Arrow; values of maps declared valueContainsNull=false must not be
        # (only the entries of valid maps count, not garbage under null ones)
        entries = array.view(pa.list_(t.field(0))).flatten()  # list_flatten has no map kernel
        _check_nulls(entries.field(1), t.item_field, f"{column}.{t.item_field.name}", table)
        if pa.types.is_nested(t.key_type):
            _check_nulls(entries.field(0), t.key_field, f"{column}.{t.key_field.name}", table)
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        values = array.flatten()
        _check_nulls(values, t.value_field, f"{column}.{t.value_field.name}", table)


def _cast(array: pa.Array, target: pa.DataType, column: str, table: str | None, *, safe: bool) -> pa.Array:
    if pa.types.is_temporal(array.type) and pa.types.is_temporal(target):
        safe = False  # Spark keeps microseconds: nanoseconds are truncated, never the time zone
    try:
        return array.cast(target, safe=safe)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        if pa.types.is_fixed_size_list(target):
            why = f"every value must be an array of exactly {target.list_size} elements ({exc})"
        else:
            why = str(exc)
        raise SchemaMismatchError(f"column {column!r} cannot be converted from {array.type} to {target}: {why}",
                                  table=table, column=column) from exc


class BatchConverter:
    """Converts batches to one target Arrow schema: selects columns by name, casts types,
    checks nullability. Built once per task, applied to every batch."""

    def __init__(self, target: pa.Schema, *, table: str | None = None, check_nulls: bool = True,
                 safe: bool = True) -> None:
        self.target = target
        self._table = table
        self._check = check_nulls and any(not f.nullable or pa.types.is_nested(f.type) for f in target)
        self._safe = safe

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        target = self.target
        if batch.schema.equals(target) and not self._check:
            return batch
        names = batch.schema.names
        arrays = []
        for field in target:
            try:
                array = batch.column(names.index(field.name))
            except ValueError:
                raise SchemaMismatchError(f"column {field.name!r} is missing from the data", table=self._table,
                                          column=field.name) from None
            if not array.type.equals(field.type):
                array = _cast(array, field.type, field.name, self._table, safe=self._safe)
            if self._check:
                _check_nulls(array, field, field.name, self._table)
            arrays.append(array)
        return pa.RecordBatch.from_arrays(arrays, schema=target)


__all__ = [
    "FSL_SIZE_KEY", "LARGE_STRING_KEY", "LARGE_BINARY_KEY", "LARGE_LIST_KEY", "FLOAT16_KEY",
    "spark_field", "spark_schema", "spark_arrow_type", "spark_arrow_schema", "lance_arrow_type",
    "lance_arrow_field", "lance_arrow_schema", "same_spark_type", "BatchConverter",
]
