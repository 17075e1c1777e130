"""Writer of legacy Lance data files (file version 0.1, footer 0.2), for legacy tables.

Official Lance keeps writing legacy files into a table whose ``data_format`` is 0.1, so
appends, updates and compactions here do too. The layout is the one
:mod:`lance_format.file.legacy_v0_1` reads: rows in batches of at most 1024 (pylance's
``max_rows_per_group``), each field's page per batch, then the page table, the dictionary
values, the file's own schema (a manifest), the metadata and the footer. No page statistics
are written (they are optional; readers then prune nothing).

Dictionary keys index the table's dictionary (kept in its manifest): appended values are
mapped onto it, and values it does not hold are refused (as official Lance refuses them). A new
table (``define_dictionaries``) gets its dictionary from the data: the first batch's dictionary,
as official Lance writes it, extended by the values later batches bring (official Lance writes
those batches' keys against the first dictionary: other values than were written), and by a
null value when rows are null (legacy keys have no validity: official Lance writes a null row as
key 0, the first value). Appends extend a table's dictionary by a null value when they need one.
The values are written into the file, where the commit takes them from.

All legacy files of one fragment must have the same batches (official Lance refuses a fragment
whose files differ). A file that adds columns to an existing fragment is therefore written
inside :func:`batches_like`, which makes writers follow that fragment's batch lengths.
"""

from __future__ import annotations

import contextlib
import contextvars
import struct
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.encodings.legacy_v0_1.encode import encode_binary, encode_fixed, encode_values, list_offsets
from lance_format.encodings.legacy_v0_1.pages import fixed_stride_bits
from lance_format.errors import LanceError, SchemaMismatchError, UnsupportedFeatureError
from lance_format.file.container import MAGIC
from lance_format.file.writer import WrittenFile
from lance_format.io.object_store import ObjectStore
from lance_format.proto import file_pb2, table_pb2
from lance_format.schema import LanceField, LanceSchema

ROWS_PER_BATCH = 1024
FOOTER_VERSION = (0, 2)
_LAYOUT: contextvars.ContextVar[Sequence[int] | None] = contextvars.ContextVar("legacy_batch_layout", default=None)
# rows per batch (pylance's ``max_rows_per_group``) of legacy files opened in this context
_ROWS_PER_GROUP: contextvars.ContextVar[int] = contextvars.ContextVar("legacy_rows_per_group", default=ROWS_PER_BATCH)


@contextlib.contextmanager
def rows_per_group(rows: int) -> Iterator[None]:
    """Legacy files opened inside this block write batches of ``rows`` rows (``write_dataset``'s
    ``max_rows_per_group``); a fragment's existing layout (:func:`batches_like`) still comes first."""
    token = _ROWS_PER_GROUP.set(int(rows))
    try:
        yield
    finally:
        _ROWS_PER_GROUP.reset(token)


@contextlib.contextmanager
def batches_like(batch_rows: Sequence[int] | None) -> Iterator[None]:
    """Legacy files opened inside this block cut their rows into batches of ``batch_rows``
    (then of ``ROWS_PER_BATCH``); None keeps the default."""
    token = _LAYOUT.set(list(batch_rows) if batch_rows is not None else None)
    try:
        yield
    finally:
        _LAYOUT.reset(token)


def _is_binary(data_type: pa.DataType) -> bool:
    return (pa.types.is_string(data_type) or pa.types.is_large_string(data_type)
            or pa.types.is_binary(data_type) or pa.types.is_large_binary(data_type))


def _check_type(lance_field: LanceField, name: str) -> None:
    data_type = lance_field.data_type
    if pa.types.is_struct(data_type) or pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        for child in lance_field.children:
            _check_type(child, f"{name}.{child.name}")
        return
    if pa.types.is_dictionary(data_type):
        if not (_is_binary(data_type.value_type) or pa.types.is_integer(data_type.value_type)):
            raise UnsupportedFeatureError(f"legacy files cannot hold dictionaries of {data_type.value_type}",
                                          column=name)
        return
    if _is_binary(data_type) or pa.types.is_null(data_type) or fixed_stride_bits(data_type) is not None:
        return
    raise UnsupportedFeatureError(f"legacy (0.1) files cannot hold {data_type} values", column=name)


class LegacyFileWriter:
    """Streams record batches into one legacy data file (interface of ``DataFileWriter``)."""

    def __init__(self, store: ObjectStore, path: str, schema: LanceSchema, *,
                 load_dictionaries: Callable[[], dict[int, pa.Array]] | None = None,
                 define_dictionaries: set[int] | None = None) -> None:
        # load_dictionaries: the table's dictionary values (by field id), loaded on first need;
        # dictionary columns of a legacy table index into them. With define_dictionaries, fields
        # without values get them from the data, in that same dict, and join that set (both shared
        # by the files of one write).
        self._load_dictionaries = load_dictionaries
        self._define = define_dictionaries is not None
        self._defined: set[int] = define_dictionaries if define_dictionaries is not None else set()
        self.store = store
        self.path = path
        self.schema = schema
        try:
            for f in schema.fields:
                _check_type(f, f.name)
        except LanceError as exc:
            raise exc.with_context(table=store.uri, path=path)
        self._arrow_schema = schema.to_arrow()
        self._ids = sorted(f.id for f in schema.walk())
        self._pages: dict[tuple[int, int], tuple[int, int]] = {}
        self._batch_offsets = [0]
        self._table_dictionaries: dict[int, pa.Array] | None = None
        self._layout = list(_LAYOUT.get() or [])
        self._rows_per_batch = _ROWS_PER_GROUP.get()
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._pos = 0
        self._closed = False
        self._out = store.open_output(path)

    # -- writing ---------------------------------------------------------------------------------
    def _write(self, data: bytes) -> int:
        start = self._pos
        if data:
            self._out.write(data)
            self._pos += len(data)
        return start

    def write_batch(self, batch: pa.RecordBatch) -> None:
        """Append a batch whose columns follow the schema (order and types)."""
        if self._closed:
            raise LanceError("the file writer is already closed", path=self.path)
        if batch.num_columns != len(self.schema.fields):
            raise SchemaMismatchError(
                f"batch has {batch.num_columns} columns, the file schema has {len(self.schema.fields)}", path=self.path)
        for array, expected in zip(batch.columns, self._arrow_schema):
            if not array.type.equals(expected.type):
                raise SchemaMismatchError(f"column has type {array.type}, the file schema says {expected.type}",
                                          path=self.path, column=expected.name)
            if not expected.nullable and array.null_count:
                raise SchemaMismatchError("non-nullable column contains nulls", path=self.path, column=expected.name)
        if batch.num_rows:
            self._pending.append(batch)
            self._pending_rows += batch.num_rows
        self._drain(final=False)

    def tell(self) -> int:
        """Bytes written to the file so far (pending rows not included)."""
        return self._pos

    def room_in_batch(self) -> int:
        """Rows that complete the batch (row group) being collected: pylance's writers hand a
        legacy file one whole group at a time and look at the file's size after each."""
        return max(1, self._next_batch_rows() - self._pending_rows)

    def _next_batch_rows(self) -> int:
        index = len(self._batch_offsets) - 1
        return self._layout[index] if index < len(self._layout) else self._rows_per_batch

    def _drain(self, *, final: bool) -> None:
        """Write the pending rows as whole batches (and, when ``final``, the rest as the last)."""
        if not self._pending_rows or not (final or self._pending_rows >= self._next_batch_rows()):
            return
        pending = pa.Table.from_batches(self._pending)
        offset = 0
        try:
            while offset < pending.num_rows and (final or pending.num_rows - offset >= self._next_batch_rows()):
                size = min(self._next_batch_rows(), pending.num_rows - offset)
                piece = pending.slice(offset, size)
                index = len(self._batch_offsets) - 1
                for lance_field, column in zip(self.schema.fields, piece.columns):
                    self._write_field(lance_field, column.combine_chunks(), index, lance_field.name)
                self._batch_offsets.append(self._batch_offsets[-1] + size)
                offset += size
        except LanceError as exc:
            raise exc.with_context(table=self.store.uri, path=self.path)
        except OverflowError as exc:
            raise UnsupportedFeatureError(str(exc), table=self.store.uri, path=self.path) from exc
        rest = pending.slice(offset)
        self._pending = rest.to_batches() if rest.num_rows else []
        self._pending_rows = rest.num_rows

    def _write_field(self, lance_field: LanceField, array: pa.Array, batch: int, name: str) -> None:
        data_type = array.type
        n = len(array)
        if pa.types.is_struct(data_type):
            for i, child in enumerate(lance_field.children):
                self._write_field(child, array.field(i), batch, f"{name}.{child.name}")
            return
        if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
            offsets, items = list_offsets(array)
            self._pages[(lance_field.id, batch)] = (self._write(offsets), n + 1)
            child = lance_field.children[0]
            self._write_field(child, items, batch, f"{name}.{child.name}")
            return
        if pa.types.is_dictionary(data_type):
            keys = self._table_keys(lance_field, array, name)
            self._pages[(lance_field.id, batch)] = (self._write(encode_fixed(keys)), n)
            return
        if _is_binary(data_type):
            positions, data = encode_binary(array, self._pos)
            self._write(data)
            self._pages[(lance_field.id, batch)] = (self._pos - len(data) + positions, n)
            return
        if pa.types.is_null(data_type):
            self._pages[(lance_field.id, batch)] = (self._pos, n)
            return
        self._pages[(lance_field.id, batch)] = (self._write(encode_fixed(array)), n)

    def _table_keys(self, lance_field: LanceField, array: pa.Array, name: str) -> pa.Array:
        """The keys of ``array`` as indices into the table's dictionary for this field."""
        if self._table_dictionaries is None:
            self._table_dictionaries = self._load_dictionaries() if self._load_dictionaries else {}
        table_values = self._table_dictionaries.get(lance_field.id)
        if table_values is None and self._define:
            self._defined.add(lance_field.id)
            table_values = self._table_dictionaries[lance_field.id] = array.dictionary
        if table_values is None:
            raise UnsupportedFeatureError(
                "a legacy table keeps dictionary values in its manifest; this column has none to write against",
                column=name)
        if lance_field.id in self._defined:
            table_values = self._extend_dictionary(lance_field.id, table_values, array)
        elif array.null_count and _is_binary(table_values.type) and _null_value_index(table_values) is None:
            # an append's null rows: the table's dictionary gains a null value (the commit takes
            # the longer dictionary from this file); other new values are refused below
            table_values = pa.concat_arrays([table_values, pa.nulls(1, table_values.type)])
            self._table_dictionaries[lance_field.id] = table_values
        values = array.dictionary
        if _is_binary(values.type):
            # the table's values read empty ones as null: compare them as empty
            empty = b"" if pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type) else ""
            values, table_values = pc.fill_null(values, empty), pc.fill_null(table_values, empty)
        mapping = pc.index_in(values, value_set=table_values.cast(values.type))
        keys = pc.fill_null(array.indices, 0)
        new_keys = mapping.take(keys)
        used_missing = pc.and_(pc.is_null(new_keys), array.is_valid())
        if pc.any(used_missing).as_py():
            raise UnsupportedFeatureError(
                "appending dictionary values a legacy table's dictionary does not hold is not supported", column=name)
        if array.null_count:
            # a null row's key must name a value that reads as null (legacy keys have no validity)
            null_at = _null_value_index(table_values)
            if null_at is None:
                raise UnsupportedFeatureError(
                    "the column has null rows but the legacy table's dictionary holds no null value to "
                    "point them at", column=name)
            new_keys = pc.if_else(array.is_valid(), new_keys, pa.scalar(null_at, new_keys.type))
        return pc.fill_null(new_keys, 0).cast(array.type.index_type)

    def _extend_dictionary(self, field_id: int, table_values: pa.Array, array: pa.Array) -> pa.Array:
        """The dictionary of a field this write defines, extended by what ``array`` uses that it
        lacks (values only ever appended: keys already written stay valid)."""
        assert self._table_dictionaries is not None
        used = pc.unique(array.indices.filter(array.is_valid()))
        used_values = array.dictionary.take(used)
        missing = used_values.filter(pc.invert(pc.is_in(used_values, value_set=table_values)))
        if _is_binary(table_values.type):  # empty values read as null: the same value here
            empty = b"" if pa.types.is_binary(table_values.type) or pa.types.is_large_binary(table_values.type) else ""
            missing = missing.filter(pc.invert(pc.is_in(pc.fill_null(missing, empty),
                                                        value_set=pc.fill_null(table_values, empty))))
        pieces = [table_values]
        if len(missing):
            pieces.append(pc.unique(missing))
        if array.null_count and _is_binary(table_values.type) and _null_value_index(table_values) is None:
            pieces.append(pa.nulls(1, table_values.type))  # integer values have no null: refused later
        if len(pieces) > 1:
            table_values = pa.concat_arrays(pieces)
            self._table_dictionaries[field_id] = table_values
        return table_values

    # -- finishing -------------------------------------------------------------------------------
    def finish(self) -> WrittenFile:
        """Write the page table, dictionaries, schema, metadata and footer; close the file."""
        if self._closed:
            raise LanceError("the file writer is already closed", path=self.path)
        try:
            self._drain(final=True)
            num_batches = len(self._batch_offsets) - 1
            first, last = self._ids[0], self._ids[-1]
            table = np.zeros((last - first + 1, num_batches, 2), "<i8")
            for (field_id, batch), (position, length) in self._pages.items():
                table[field_id - first, batch] = (position, length)
            page_table_position = self._write(table.tobytes())
            fields = self.schema.to_protos()
            self._write_dictionaries(fields)
            described = table_pb2.Manifest(fields=fields, version=1)
            described.data_format.file_format = "lance"
            described.data_format.version = "0.1"
            for key, value in self.schema.metadata.items():
                described.schema_metadata[key] = value if isinstance(value, bytes) else str(value).encode()
            manifest_position = self._write_chunk(described.SerializeToString())
            metadata = file_pb2.Metadata(batch_offsets=self._batch_offsets, page_table_position=page_table_position,
                                         manifest_position=manifest_position)
            metadata_position = self._write_chunk(metadata.SerializeToString())
            self._write(struct.pack("<QHH4s", metadata_position, *FOOTER_VERSION, MAGIC))
            self._out.close()
            self.store.io_counters.count_write(self._pos)  # one streamed upload
        except LanceError as exc:
            self.abort()
            raise exc.with_context(path=self.path)
        except BaseException:
            self.abort()
            raise
        self._closed = True
        return WrittenFile(path=self.path, num_rows=self._batch_offsets[-1], size_bytes=self._pos,
                           field_ids=list(self._ids), column_indices=[])

    def _write_chunk(self, data: bytes) -> int:
        return self._write(struct.pack("<I", len(data)) + data)

    def _write_dictionaries(self, fields: list[file_pb2.Field]) -> None:
        for field in fields:
            values = (self._table_dictionaries or {}).get(field.id)
            if not field.logical_type.startswith("dict:") or values is None:
                continue
            offset, data = encode_values(values, self._pos)
            self._write(data)
            field.dictionary.offset = offset
            field.dictionary.length = len(values)

    def abort(self) -> None:
        """Close and delete the partial file."""
        if self._closed:
            return
        self._closed = True
        try:
            self._out.close()
        finally:
            self.store.delete(self.path, missing_ok=True)

    def __enter__(self) -> LegacyFileWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()
        elif not self._closed:
            self.finish()


def _null_value_index(values: pa.Array) -> int | None:
    """The first dictionary value that reads back as null (a null, or an empty string or binary)."""
    reads_null = pc.is_null(values)
    if _is_binary(values.type):
        reads_null = pc.or_kleene(reads_null, pc.equal(pc.binary_length(values), 0))
    found = pc.index(reads_null, True).as_py()
    return None if found < 0 else found
