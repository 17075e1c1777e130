"""Writer of Lance data files, file versions 2.0, 2.1 and 2.2: the public :class:`DataFileWriter`.

The writer owns the output file: it validates the schema for the requested version, feeds each
top-level column to the writer of that version's layout, places the pages those emit (each
buffer padded to 64 bytes) and finally writes the container tail (:mod:`lance_format.file.container`).

- File version 2.0 (footer (0, 3)): the column writers of :mod:`lance_format.file.writer_v2_0`,
  one column per field, parents included; pages have priority 0.
- File versions 2.1/2.2 (footers (2, 1) / (2, 2)): one column per *leaf* field (a fixed-size list
  of primitives is a leaf); struct and list structure lives in each leaf's rep/def levels (a map
  is a list of its entries struct; maps need 2.2, as in pylance, and are refused naming the table
  and column otherwise). Each top-level field is a
  :class:`~lance_format.encodings.structural.encode_page.StructuralFieldWriter`, which buffers
  about one page of rows and then writes a page to each of its leaf columns, whose priority is
  the page's first row.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from lance_format.encodings.array_v2_0.encode import EncodedPage
from lance_format.encodings.structural.encode_page import (
    StructuralFieldWriter,
    check_structural_field,
    column_leaves,
)
from lance_format.errors import LanceError, SchemaMismatchError, UnsupportedFeatureError
from lance_format.file.blob_columns import (
    BLOB_COLUMN_ENCODING_V2_0,
    BlobColumnWriterV2_0,
    BlobFieldWriterV2_1,
    check_blob_v1_field,
    out_of_line,
)
from lance_format.file.blob_v2_columns import (
    BlobSidecars,
    blob_v2_descriptors,
    check_blob_v2_field,
    descriptor_protos,
    descriptor_writer,
)
from lance_format.file.container import (
    PAD_BYTE,
    build_tail,
    direct_encoding,
    pack_any,
    pad_len,
)
from lance_format.file.writer_v2_0 import ColumnWriter, make_column_writer
from lance_format.io.object_store import ObjectStore
from lance_format.proto import encodings_v2_0_pb2, file2_pb2, file_pb2
from lance_format.schema import LanceField, LanceSchema
from lance_format.schema.blob import is_blob_field, is_blob_v2

DEFAULT_MAX_PAGE_BYTES = 8 * 1024 * 1024
_PADDING = bytes([PAD_BYTE]) * 64
_COLUMN_ENCODING = pack_any(encodings_v2_0_pb2.ColumnEncoding(values={}))
# accepted version spellings -> (footer major, footer minor)
_FILE_VERSIONS = {
    "2.0": (0, 3), "2": (0, 3), "v2.0": (0, 3),
    "2.1": (2, 1), "v2.1": (2, 1),
    "2.2": (2, 2), "v2.2": (2, 2),
}


@dataclass
class WrittenFile:
    """What the table layer records about a finished data file."""

    path: str
    num_rows: int
    size_bytes: int
    field_ids: list[int] = field(default_factory=list)
    column_indices: list[int] = field(default_factory=list)


def _check_blob_fields(schema: LanceSchema, footer_version: tuple[int, int], path: str | None) -> list[str | None]:
    """Per top-level field, its blob column kind: "v1" (``lance-encoding:blob``, files 2.0/2.1,
    :mod:`lance_format.file.blob_columns`), "v2" (``lance.blob.v2``, file 2.2,
    :mod:`lance_format.file.blob_v2_columns`) or None; refuse the blob columns this writer cannot store."""
    top_level = {id(f) for f in schema.fields}
    for lance_field in schema.walk():
        if not is_blob_field(lance_field):
            continue
        on_top = id(lance_field) in top_level
        if is_blob_v2(lance_field):
            if footer_version != (2, 2):
                raise UnsupportedFeatureError(
                    f"blob v2 column {lance_field.name!r} (lance.blob.v2) requires file version 2.2",
                    path=path, column=lance_field.name)
            check_blob_v2_field(lance_field, path, top_level=on_top)
        elif footer_version == (2, 2):
            raise UnsupportedFeatureError(
                f"writing blob column {lance_field.name!r} with lance-encoding:blob in file version 2.2 is not "
                "supported; use a blob v2 column (lance_format.blob_field / blob_array) or file version 2.0/2.1",
                path=path, column=lance_field.name)
        else:
            check_blob_v1_field(lance_field, path, top_level=on_top)
    return [None if not is_blob_field(f) else "v2" if is_blob_v2(f) else "v1" for f in schema.fields]


class DataFileWriter:
    """Streams record batches into one Lance data file (file version 2.0, 2.1 or 2.2)."""

    split_page_bytes: int | None = None

    def __init__(
        self,
        store: ObjectStore,
        path: str,
        schema: LanceSchema,
        *,
        version: str = "2.0",
        max_page_bytes: int = DEFAULT_MAX_PAGE_BYTES,
        split_page_bytes: int | None = None,
    ) -> None:
        self.store = store
        # 2.0: one buffered array is split into pages once its memory passes this (pylance's
        # max_page_bytes, while max_page_bytes here is the bytes buffered before a flush); None:
        # once its rows' bytes pass max_page_bytes
        self.split_page_bytes = split_page_bytes
        self._prepare(schema, version, max_page_bytes, path, table=store.uri)
        self._columns = [file2_pb2.ColumnMetadata() for _ in self._field_ids]
        self._num_rows = 0
        self._pos = 0
        self._closed = False
        self._global_buffers: list[tuple[int, int]] = []
        self._out = store.open_output(path)

    @classmethod
    def check_schema(cls, schema: LanceSchema, version: str, *, table: str | None = None) -> None:
        """Refuse a schema the writer of file ``version`` cannot store, without opening a file:
        lets a distributed write fail at planning time rather than in its first task."""
        cls.__new__(cls)._prepare(schema, version, DEFAULT_MAX_PAGE_BYTES, None, table=table)

    @classmethod
    def column_layout(cls, schema: LanceSchema, version: str) -> tuple[list[int], list[int]]:
        """The ``(fields, column_indices)`` a data file of ``version`` holding ``schema`` records in
        the manifest, without writing anything (to describe a file written elsewhere)."""
        writer = cls.__new__(cls)
        writer._prepare(schema, version, DEFAULT_MAX_PAGE_BYTES, None, table=None)
        return list(writer._field_ids), list(range(len(writer._field_ids)))

    # -- construction --------------------------------------------------------------------------
    def _prepare(self, schema: LanceSchema, version: str, max_page_bytes: int, path: str | None, *,
                 table: str | None) -> None:
        """Validate the schema for ``version`` and build the column writers (no I/O)."""
        if version not in _FILE_VERSIONS:
            raise UnsupportedFeatureError(
                f"writing file version {version} is not supported (supported: 2.0, 2.1, 2.2)", path=path, table=table
            )
        if max_page_bytes < 1:
            raise ValueError("max_page_bytes must be positive")
        self._footer_version = _FILE_VERSIONS[version]
        try:
            self._blob_fields = _check_blob_fields(schema, self._footer_version, path)
        except LanceError as exc:
            raise exc.with_context(table=table)
        self._blob_columns: set[int] = set()
        self.path = path
        self.schema = schema
        self.max_page_bytes = int(max_page_bytes)
        self._arrow_schema = schema.to_arrow()
        self._field_ids: list[int] = []
        self._writers: list[ColumnWriter | StructuralFieldWriter | BlobFieldWriterV2_1]
        self._sidecars: BlobSidecars | None = None
        if "v2" in self._blob_fields and path is not None:
            self._sidecars = BlobSidecars(self.store, path)
        try:
            if self._footer_version == (0, 3):
                self._writers = [self._make_v2_0_writer(f) for f in schema.fields]
            else:
                self._writers = [self._make_structural_writer(f) for f in schema.fields]
        except LanceError as exc:
            # the store is the table's root (the table layer opens one per table)
            raise exc.with_context(table=table, path=path)

    def _make_v2_0_writer(self, lance_field: LanceField) -> ColumnWriter:
        if is_blob_field(lance_field):
            self._blob_columns.add(len(self._field_ids))
            self._field_ids.append(lance_field.id)
            return BlobColumnWriterV2_0(len(self._field_ids) - 1, lance_field.name,
                                        self.max_page_bytes, self._emit)
        return make_column_writer(lance_field, lance_field.name, self._field_ids, self.max_page_bytes, self._emit, self.path,
                                  self.split_page_bytes)

    def _make_structural_writer(self, lance_field: LanceField) -> StructuralFieldWriter | BlobFieldWriterV2_1:
        if is_blob_v2(lance_field):
            self._field_ids.append(lance_field.id)
            return descriptor_writer(lance_field, len(self._field_ids) - 1, self.max_page_bytes, self._emit_structural)
        if is_blob_field(lance_field):
            self._field_ids.append(lance_field.id)
            return BlobFieldWriterV2_1(lance_field, len(self._field_ids) - 1, self.max_page_bytes,
                                       self._emit_structural)
        try:
            check_structural_field(lance_field, lance_field.name, self._footer_version[1])
        except LanceError as exc:
            raise exc.with_context(path=self.path)
        first = len(self._field_ids)
        self._field_ids.extend(leaf.id for leaf in column_leaves(lance_field))
        return StructuralFieldWriter(
            lance_field, first, self._footer_version[1], self.max_page_bytes, self._emit_structural
        )

    # -- writing ---------------------------------------------------------------------------------
    def _emit(self, column: int, page: EncodedPage) -> None:
        self._write_page(column, page.buffers, page.encoding, page.length, 0)

    def _emit_structural(self, column: int, buffers: list, layout, length: int, first_row: int) -> None:
        # 2.1+ pages carry their first row number as priority (pylance does the same).
        self._write_page(column, buffers, layout, length, first_row)

    def _write_page(self, column: int, buffers: list, encoding, length: int, priority: int) -> None:
        offsets, sizes = [], []
        for buf in buffers:
            view = memoryview(buf).cast("B") if not isinstance(buf, pa.Buffer) else buf
            size = view.nbytes if isinstance(view, memoryview) else view.size
            offsets.append(self._pos)
            sizes.append(size)
            if size:
                self._out.write(view)
            padding = pad_len(size)
            if padding:
                self._out.write(_PADDING[:padding])
            self._pos += size + padding
        self._columns[column].pages.append(
            file2_pb2.ColumnMetadata.Page(
                buffer_offsets=offsets,
                buffer_sizes=sizes,
                length=length,
                encoding=direct_encoding(pack_any(encoding)),
                priority=priority,
            )
        )

    def write_batch(self, batch: pa.RecordBatch) -> None:
        """Append a batch whose columns follow the schema (order and types)."""
        if self._closed:
            raise LanceError("the file writer is already closed", path=self.path)
        if batch.num_columns != len(self._writers):
            raise SchemaMismatchError(
                f"batch has {batch.num_columns} columns, the file schema has {len(self._writers)}", path=self.path
            )
        for i, expected in enumerate(self._arrow_schema):
            array = batch.column(i)
            if not array.type.equals(expected.type):
                raise SchemaMismatchError(
                    f"column has type {array.type}, the file schema says {expected.type}",
                    path=self.path,
                    column=expected.name,
                )
            if not expected.nullable and array.null_count:
                raise SchemaMismatchError("non-nullable column contains nulls", path=self.path, column=expected.name)
        try:
            # like pylance, the batch's blob bytes go first (in field order), then its pages
            minor = None if self._footer_version == (0, 3) else self._footer_version[1]
            columns = list(batch.columns)
            nulls = [False] * len(columns)
            for i, blob_kind in enumerate(self._blob_fields):
                if blob_kind is None or not batch.num_rows:
                    continue
                nulls[i] = columns[i].null_count > 0
                if blob_kind == "v2":
                    assert self._sidecars is not None  # a writer with a path has them
                    columns[i], payload = blob_v2_descriptors(columns[i], self._pos, self.schema.fields[i],
                                                              self._sidecars)
                else:
                    columns[i], payload = out_of_line(columns[i], self._pos, minor)
                self._write_buffer(payload.data)
            for writer, array, has_nulls in zip(self._writers, columns, nulls):
                if isinstance(writer, BlobFieldWriterV2_1):
                    writer.append(array, has_nulls)
                else:
                    writer.append(array)
        except LanceError as exc:
            raise exc.with_context(path=self.path)
        self._num_rows += batch.num_rows

    def add_global_buffer(self, data: bytes) -> int:
        """Write ``data`` as a global buffer at the current position (padded like a page
        buffer); its index in the file's global buffer table (0 is the FileDescriptor)."""
        if self._closed:
            raise LanceError("the file writer is already closed", path=self.path)
        self._global_buffers.append((self._pos, len(data)))
        self._write_buffer(data)
        return len(self._global_buffers)

    def _write_buffer(self, data: bytes | memoryview) -> None:
        if len(data):
            self._out.write(data)
        padding = pad_len(len(data))
        if padding:
            self._out.write(_PADDING[:padding])
        self._pos += len(data) + padding

    def tell(self) -> int:
        """Bytes written to the file so far (buffered pages not included), like pylance's
        ``FileWriter::tell``, which its writers compare with ``max_bytes_per_file``."""
        return self._pos

    def finish(self) -> WrittenFile:
        """Flush every column, write the metadata and footer, close the file."""
        if self._closed:
            raise LanceError("the file writer is already closed", path=self.path)
        try:
            for writer in self._writers:
                writer.flush()
            for writer in self._writers:
                writer.finish()
            if self._sidecars is not None:
                self._sidecars.close_pack()
            column_encoding = direct_encoding(_COLUMN_ENCODING)
            blob_encoding = direct_encoding(pack_any(BLOB_COLUMN_ENCODING_V2_0))
            for index, column in enumerate(self._columns):
                column.encoding.CopyFrom(blob_encoding if index in self._blob_columns else column_encoding)
            descriptor = file_pb2.FileDescriptor(length=self._num_rows)
            for lance_field, blob_kind in zip(self.schema.fields, self._blob_fields):
                # a blob v2 column is stored as its descriptors; the file's schema says so
                descriptor.schema.fields.extend(
                    descriptor_protos(lance_field) if blob_kind == "v2" else lance_field.to_protos())
            for key, value in self.schema.metadata.items():
                descriptor.schema.metadata[key] = value if isinstance(value, bytes) else str(value).encode()
            tail = build_tail(self._pos, descriptor, self._columns, self._global_buffers,
                              version=self._footer_version)
            self._out.write(tail)
            self._pos += len(tail)
            self._out.close()
            self.store.io_counters.count_write(self._pos)  # one streamed upload
        except LanceError as exc:
            self.abort()
            raise exc.with_context(path=self.path)
        except BaseException:
            self.abort()
            raise
        self._closed = True
        assert self.path is not None  # only check_schema's instance, which writes nothing, has no path
        return WrittenFile(
            path=self.path,
            num_rows=self._num_rows,
            size_bytes=self._pos,
            field_ids=list(self._field_ids),
            column_indices=list(range(len(self._field_ids))),
        )

    def abort(self) -> None:
        """Close and delete the partial file."""
        if self._closed:
            return
        self._closed = True
        assert self.path is not None  # only check_schema's instance, which writes nothing, has no path
        try:
            self._out.close()
        finally:
            self.store.delete(self.path, missing_ok=True)
            if self._sidecars is not None:
                self._sidecars.abort()

    def __enter__(self) -> DataFileWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()
        elif not self._closed:
            self.finish()
