"""Cheap structural checks of the Arrow data the engine is handed, before any kernel touches it.

Arrays arrive from other libraries through the C data interface and from
``pa.Array.from_buffers``; nothing guarantees they are well formed, and pyarrow's kernels (casts,
takes, concatenation) trust them: offsets that go backwards make a cast abort the interpreter.
``Array.validate(full=True)`` would catch everything but reads every value (UTF-8 checks
included: about 80 ms per 1M realistic rows). These checks catch what crashes kernels, in O(1)
per buffer plus one vectorized pass over offsets and dictionary indices:

* ``Array.validate()``: buffer sizes against the length and offset, child lengths, the first and
  last offset of variable-width layouts against their data;
* offsets of strings, binaries, lists and maps never decrease;
* dictionary indices are within the dictionary;
* the children of structs, lists, fixed-size lists, maps and dictionaries, recursively;
* view, union and run-end-encoded layouts (rare) get pyarrow's full validation.

A malformed input raises :class:`~lance_format.errors.MalformedInputError` naming the column (its
path for nested fields), the chunk and what is wrong.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import MalformedInputError, SchemaMismatchError

_OFFSET_TYPES = {4: np.int32, 8: np.int64}


_BINARY_IDS = frozenset(t.id for t in (pa.string(), pa.binary(), pa.large_string(), pa.large_binary()))
_LARGE_IDS = frozenset(t.id for t in (pa.large_string(), pa.large_binary(), pa.large_list(pa.int8())))
_LIST_IDS = frozenset(t.id for t in (pa.list_(pa.int8()), pa.large_list(pa.int8()), pa.map_(pa.int8(), pa.int8())))
_FIXED_LIST_ID = pa.list_(pa.int8(), 1).id
_STRUCT_ID = pa.struct([]).id
_DICTIONARY_ID = pa.dictionary(pa.int8(), pa.string()).id
# layouts whose cheap validation leaves their views, type ids or run ends unchecked: fully validated
_FULL_IDS = frozenset(t.id for t in (
    pa.string_view(), pa.binary_view(), pa.run_end_encoded(pa.int32(), pa.int8()),
    pa.sparse_union([pa.field("a", pa.int8())]), pa.dense_union([pa.field("a", pa.int8())]),
    *[make(pa.int8()) for make in (getattr(pa, "list_view", None), getattr(pa, "large_list_view", None)) if make]))


def _problem(array: pa.Array) -> str | None:
    """What is structurally wrong with ``array`` (None when nothing is)."""
    try:
        array.validate()
    except (pa.ArrowInvalid, pa.ArrowException) as err:
        return str(err)
    dtype = array.type
    kind = dtype.id
    if kind in _BINARY_IDS:
        return _offsets_problem(array, _buffer_size(array, 2), kind in _LARGE_IDS)
    if kind in _LIST_IDS:
        values = array.values  # the whole child, also of a slice: check only the part it spans
        found = _offsets_problem(array, len(values), kind in _LARGE_IDS)
        if found is not None or len(array) == 0:
            return found
        first, last = _offset_bounds(array, kind in _LARGE_IDS)
        return _child_problem(values.slice(first, last - first), "item")
    if kind == _STRUCT_ID:
        for index in range(dtype.num_fields):
            found = _child_problem(array.field(index), dtype.field(index).name)
            if found is not None:
                return found
        return None
    if kind == _DICTIONARY_ID:
        return _indices_problem(array) or _child_problem(array.dictionary, "dictionary")
    if kind == _FIXED_LIST_ID:
        size = dtype.list_size
        return _child_problem(array.values.slice(array.offset * size, len(array) * size), "item")
    if isinstance(dtype, pa.ExtensionType):
        return _problem(array.storage)
    if kind in _FULL_IDS:
        try:
            array.validate(full=True)
        except (pa.ArrowInvalid, pa.ArrowException) as err:
            return str(err)
    return None  # fixed-width layouts: validate() checked their buffers against the length


def _child_problem(child: pa.Array, name: str) -> str | None:
    found = _problem(child)
    return None if found is None else f"in its child {name!r}: {found}"


def _buffer_size(array: pa.Array, index: int) -> int:
    buffer = array.buffers()[index]
    return 0 if buffer is None else buffer.size


def _offsets_problem(array: pa.Array, limit: int, large: bool) -> str | None:
    """Offsets that decrease, are negative or point past their data (``limit`` items/bytes)."""
    if len(array) == 0:
        return None
    buffer = array.buffers()[1]
    width = 8 if large else 4
    if buffer is None or buffer.size < (array.offset + len(array) + 1) * width:
        return "its offsets buffer is missing or too small"
    offsets = np.frombuffer(buffer, dtype=_OFFSET_TYPES[width], count=array.offset + len(array) + 1)
    offsets = offsets[array.offset:]
    if offsets[0] < 0:
        return f"its first offset is negative ({offsets[0]})"
    if offsets[-1] > limit:
        return f"its last offset ({offsets[-1]}) points past the end of its data ({limit})"
    decreasing = offsets[1:] < offsets[:-1]
    if decreasing.any():
        row = int(np.argmax(decreasing))
        return (f"non-monotonic offsets: row {row} ends at offset {offsets[row + 1]}, before it starts "
                f"({offsets[row]})")
    return None


def _offset_bounds(array: pa.Array, large: bool) -> tuple[int, int]:
    """The first and last offsets of a (non-empty, checked) list array."""
    offsets = np.frombuffer(array.buffers()[1], np.int64 if large else np.int32,
                            count=array.offset + len(array) + 1)
    return int(offsets[array.offset]), int(offsets[-1])


def _indices_problem(array: pa.DictionaryArray) -> str | None:
    indices = array.indices
    if len(indices) == 0 or indices.null_count == len(indices):
        return None
    found = _problem(indices)
    if found is not None:
        return f"in its indices: {found}"
    if indices.null_count == 0:  # straight from the buffer (null slots may hold any value)
        values = np.frombuffer(indices.buffers()[1], indices.type.to_pandas_dtype(),
                               count=indices.offset + len(indices))[indices.offset:]
        low, high = int(values.min()), int(values.max())
    else:
        low_scalar, high_scalar = pc.min_max(indices).values()
        low, high = low_scalar.as_py(), high_scalar.as_py()
    if low < 0 or high >= len(array.dictionary):
        return f"dictionary indices range over [{low}, {high}] but the dictionary has {len(array.dictionary)} values"
    return None


def check_array(array: pa.Array | pa.ChunkedArray, *, what: str, column: str | None = None,
                table: str | None = None) -> None:
    """Refuse a malformed array (each chunk of a chunked one) with :class:`MalformedInputError`."""
    chunked = isinstance(array, pa.ChunkedArray)
    chunks = array.chunks if isinstance(array, pa.ChunkedArray) else [array]
    for number, chunk in enumerate(chunks):
        if not isinstance(chunk, pa.Array):
            continue
        found = _problem(chunk)
        if found is None:
            continue
        if column is not None:
            message = f"invalid Arrow data in {what}: column {column!r}, chunk {number}: {found}"
        else:
            message = f"invalid Arrow data: {what} {f'chunk {number}' if chunked else 'array'}: {found}"
        raise MalformedInputError(message, table=table, column=column)


def check_batch(batch: pa.RecordBatch, *, what: str, table: str | None = None, chunk: int = 0) -> None:
    """Refuse a record batch with a malformed column (``chunk``: the batch's number in its stream)."""
    for name, column in zip(batch.schema.names, batch.columns):
        found = _problem(column)
        if found is not None:
            raise MalformedInputError(f"invalid Arrow data in {what}: column {name!r}, chunk {chunk}: {found}",
                                      table=table, column=name)


def check_table(data: pa.Table | pa.RecordBatch, *, what: str, table: str | None = None) -> None:
    """Refuse a table (or batch) with a malformed chunk in any column."""
    if isinstance(data, pa.RecordBatch):
        check_batch(data, what=what, table=table)
        return
    for name, column in zip(data.schema.names, data.columns):
        check_array(column, what=what, column=name, table=table)


def check_field_names(schema: pa.Schema, *, table: str | None = None) -> None:
    """Refuse names official Lance cannot read back: an empty column name (pylance writes it,
    then cannot project it), and a name twice among a table's columns or a struct's fields."""
    if "" in schema.names:
        raise SchemaMismatchError(f"column {schema.names.index('') + 1} of {len(schema.names)} has an empty name; "
                                  "give every column a name", table=table)
    pending: list[tuple[str, list[pa.Field]]] = [("", list(schema))]
    while pending:
        path, fields = pending.pop()
        names = [f.name for f in fields]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            where = f"struct column {path!r}" if path else "the columns"
            raise SchemaMismatchError(f"duplicate column names: {repeated} appear more than once among {where}",
                                      table=table, column=f"{path}.{repeated[0]}" if path else repeated[0])
        for field in fields:
            dtype = field.type
            while pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or pa.types.is_fixed_size_list(dtype):
                dtype = dtype.value_type
            if pa.types.is_struct(dtype):
                pending.append((f"{path}.{field.name}" if path else field.name,
                                [dtype.field(i) for i in range(dtype.num_fields)]))


def checked_batches(reader: pa.RecordBatchReader, *, what: str, table: str | None = None) -> pa.RecordBatchReader:
    """``reader`` with every batch checked as it streams past."""
    def batches() -> Iterator[pa.RecordBatch]:
        for number, batch in enumerate(reader):
            check_batch(batch, what=what, table=table, chunk=number)
            yield batch

    return pa.RecordBatchReader.from_batches(reader.schema, batches())


__all__ = ["check_field_names", "check_array", "check_batch", "check_table", "checked_batches"]
