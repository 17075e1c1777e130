"""Blob columns: how official Lance (pylance 14) presents them to readers.

A blob column stores its values out of line and reads return *descriptions*, not bytes (unless a
scan asks for ``blob_handling="all_binary"``: :func:`binary_read_field`):

- blob v1 (file version 2.1 and earlier): a ``large_binary`` field with field metadata
  ``lance-encoding:blob`` = ``"true"``. The dataset schema shows ``large_binary``; scans and
  takes return ``struct<position: uint64, size: uint64>`` with the field's metadata (in 2.0 a
  null blob is described as ``(1, 0)``, not as a null).
- blob v2 (file version 2.2): a struct ``<data: large_binary, uri: string>`` with the Arrow
  extension name ``lance.blob.v2``. The dataset schema shows that extension type (pyarrow turns it
  into the registered extension class, if one is registered); scans and takes return the stored
  descriptor struct ``<kind, position, size, blob_id, blob_uri>`` (a packed struct column) with
  metadata ``lance-encoding:packed`` and ``lance-encoding:blob``.

In both, the children of a null blob are null too. A 2.2 table stores a ``lance-encoding:blob``
column as blob v2 (:func:`legacy_blobs_as_v2`, :func:`binary_as_blob_v2`), as pylance does. The
writers are :mod:`lance_format.file.blob_columns` (v1) and :mod:`lance_format.file.blob_v2_columns`;
the byte reads :mod:`lance_format.dataset.blob_reads`.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.schema.extensions import with_extension_types
from lance_format.schema.fields import LanceField, LanceSchema

BLOB_META_KEY = "lance-encoding:blob"
EXTENSION_NAME_KEY = "ARROW:extension:name"
BLOB_V2_EXTENSION = b"lance.blob.v2"

BLOB_V1_DESCRIPTION = pa.struct([pa.field("position", pa.uint64()), pa.field("size", pa.uint64())])
BLOB_V2_DESCRIPTION = pa.struct([
    pa.field("kind", pa.uint8(), False),
    pa.field("position", pa.uint64(), False),
    pa.field("size", pa.uint64(), False),
    pa.field("blob_id", pa.uint32(), False),
    pa.field("blob_uri", pa.string(), False),
])
# pylance returns this metadata, in this order, on a blob v2 description column
_BLOB_V2_READ_METADATA = {b"lance-encoding:packed": b"true", b"lance-encoding:blob": b"true"}


def _flag(value: bytes | str | None) -> bool:
    raw = value.encode() if isinstance(value, str) else (value or b"")
    return raw.lower() in (b"true", b"1")


def is_blob_v2(lance_field: LanceField) -> bool:
    value = lance_field.metadata.get(EXTENSION_NAME_KEY)
    raw = value.encode() if isinstance(value, str) else value
    return raw == BLOB_V2_EXTENSION


def is_blob_field(lance_field: LanceField) -> bool:
    """Whether the field is a blob column (v1 metadata flag or v2 extension)."""
    return _flag(lance_field.metadata.get(BLOB_META_KEY)) or is_blob_v2(lance_field)


def blob_read_field(lance_field: LanceField) -> pa.Field | None:
    """The Arrow field scans and takes return for a blob column (None: not a blob column)."""
    if is_blob_v2(lance_field):
        return pa.field(lance_field.name, BLOB_V2_DESCRIPTION, lance_field.nullable, metadata=_BLOB_V2_READ_METADATA)
    if _flag(lance_field.metadata.get(BLOB_META_KEY)):
        return lance_field.to_arrow().with_type(BLOB_V1_DESCRIPTION)
    return None


def read_arrow_field(lance_field: LanceField) -> pa.Field:
    """The Arrow field a read of ``lance_field`` produces (blob columns give descriptions)."""
    return blob_read_field(lance_field) or lance_field.to_arrow()


def binary_read_field(lance_field: LanceField) -> pa.Field:
    """A blob column read as its bytes (``blob_handling="all_binary"``): ``large_binary`` with the
    field's metadata, less an extension name, as pylance gives it."""
    metadata = {k: v for k, v in lance_field.metadata.items() if k != EXTENSION_NAME_KEY}
    return pa.field(lance_field.name, pa.large_binary(), lance_field.nullable,
                    metadata={k.encode(): v for k, v in metadata.items()} or None)


def read_arrow_schema(schema: LanceSchema, *, blobs_as_binary: bool = False) -> pa.Schema:
    """The schema of rows read with ``schema`` (blob columns give descriptions, or their bytes
    with ``blobs_as_binary``)."""
    arrow = schema.to_arrow()
    return pa.schema([binary_read_field(f) if blobs_as_binary and is_blob_field(f) else read_arrow_field(f)
                      for f in schema.fields], metadata=arrow.metadata)


def dataset_arrow_schema(schema: LanceSchema) -> pa.Schema:
    """The dataset schema as pylance shows it: blob v2 fields carry the ``lance.blob.v2`` extension.

    pylance hands its schema to pyarrow through the C data interface, which turns a field with
    ``ARROW:extension:name`` into the registered extension type if there is one. An IPC round trip
    does the same here without this package knowing (or importing) the extension class.
    """
    arrow = schema.to_arrow()
    if not any(is_blob_v2(f) for f in schema.fields):
        return with_extension_types(arrow)
    return pa.ipc.read_schema(arrow.serialize())


def null_children_of_null_blobs(array: pa.StructArray) -> pa.StructArray:
    """Make every child null where the blob is null, as Lance returns descriptions."""
    if array.null_count == 0:
        return array
    mask = array.is_null()
    children = [pc.if_else(mask, pa.scalar(None, f.type), array.field(i)) for i, f in enumerate(array.type)]
    return pa.StructArray.from_arrays(children, fields=list(array.type), mask=mask)


_V2_STORAGE = pa.struct([pa.field("data", pa.large_binary()), pa.field("uri", pa.string())])


def _is_legacy_blob(field: pa.Field) -> bool:
    return _flag((field.metadata or {}).get(BLOB_META_KEY.encode())) and (
        pa.types.is_large_binary(field.type) or pa.types.is_binary(field.type))


def legacy_blobs_as_v2(schema: pa.Schema) -> pa.Schema:
    """``schema`` for a file version 2.2 table: pylance 14 stores a ``lance-encoding:blob`` binary
    column there as a blob v2 column, ``struct<data: large_binary, uri: string>`` named
    ``lance.blob.v2`` (the blob flag dropped from its metadata)."""
    if not any(_is_legacy_blob(f) for f in schema):
        return schema
    fields = []
    for field in schema:
        if _is_legacy_blob(field):
            metadata = {k: v for k, v in (field.metadata or {}).items() if k != BLOB_META_KEY.encode()}
            metadata[EXTENSION_NAME_KEY.encode()] = BLOB_V2_EXTENSION
            field = pa.field(field.name, _V2_STORAGE, field.nullable, metadata=metadata)
        fields.append(field)
    return pa.schema(fields, metadata=schema.metadata)


def bytes_as_blob_v2_storage(column: pa.Array, storage_type: pa.DataType) -> pa.StructArray:
    """Blob bytes (a binary column) as blob v2 values of ``storage_type`` (``struct<data, uri[,
    position, size]>``): the bytes as ``data``, everything else null."""
    data = column.cast(pa.large_binary())
    children = [data if f.name == "data" else pa.nulls(len(data), f.type) for f in storage_type]
    mask = data.is_null() if data.null_count else None
    return pa.StructArray.from_arrays(children, fields=list(storage_type), mask=mask)


def binary_as_blob_v2(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """``batch`` with binary columns given for blob v2 columns of ``target`` as blob v2 storage
    (the bytes as ``data``, no ``uri``), as pylance takes ``lance-encoding:blob`` data in 2.2."""
    columns = list(batch.columns)
    changed = False
    for index, field in enumerate(batch.schema):
        if field.name not in target.names:
            continue
        wanted = target.field(field.name)
        column = columns[index]
        if (wanted.metadata or {}).get(EXTENSION_NAME_KEY.encode()) != BLOB_V2_EXTENSION or not (
                pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type)):
            continue
        columns[index] = bytes_as_blob_v2_storage(column, wanted.type)
        changed = True
    if not changed:
        return batch
    fields = [pa.field(f.name, c.type, f.nullable, f.metadata) for f, c in zip(batch.schema, columns)]
    return pa.RecordBatch.from_arrays(columns, schema=pa.schema(fields, metadata=batch.schema.metadata))
