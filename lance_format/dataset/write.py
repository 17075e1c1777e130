"""``write_dataset``: stream Arrow data into data files and commit them as one new version.

Data is consumed batch by batch; a file (one fragment) is rolled over after
``max_rows_per_file`` rows or ``max_bytes_per_file`` bytes. Nothing is visible until the
commit publishes the manifest; if anything fails first, the files written so far are removed.
"""

from __future__ import annotations

import os
import uuid
from typing import Iterable, Iterator, Mapping

import pyarrow as pa

from lance_format.dataset.dataset import LanceDataset
from lance_format.errors import (
    DatasetAlreadyExistsError,
    InvalidInputError,
    SchemaMismatchError,
    UnsupportedFeatureError,
)
from lance_format.file.writer import LanceFileWriter, WrittenFile
from lance_format.io import ObjectStore, object_store_for
from lance_format.proto import table_pb2, transaction_pb2
from lance_format.schema import LanceSchema, check_arrow_compatible
from lance_format.table import feature_flags
from lance_format.table.commit import commit_transaction, latest_manifest
from lance_format.table.naming import ManifestNaming
from lance_format.table.operations import BuildOptions
from lance_format.table.transaction import new_transaction

MODES = ("create", "append", "overwrite")
DEFAULT_MAX_ROWS_PER_FILE = 1024 * 1024
DEFAULT_MAX_BYTES_PER_FILE = 90 * 1024 * 1024 * 1024
# File versions this engine can write -> DataFile (major, minor). 2.3 ("next") and the legacy
# 0.1 format are refused.
_WRITABLE_VERSIONS = {"2.0": (2, 0), "2.1": (2, 1), "2.2": (2, 2)}
_VERSION_ALIASES = {"legacy": "0.1", "stable": "2.2", "next": "2.3"}
# What new tables get when no version is asked for (pylance 14's default is "stable" = 2.2).
DEFAULT_STORAGE_VERSION = "2.2"


def data_file_name() -> str:
    """A data file name in official Lance's style: 24 binary digits then 26 hex digits (a uuid4)."""
    raw = uuid.uuid4().bytes
    return "".join(f"{b:08b}" for b in raw[:3]) + raw[3:].hex() + ".lance"


def _resolve_storage_version(requested: str | None, existing: str | None, *, table: str) -> str:
    version = existing or _VERSION_ALIASES.get(requested or "", requested) or DEFAULT_STORAGE_VERSION
    if version not in _WRITABLE_VERSIONS:
        raise UnsupportedFeatureError(
            f"writing Lance file version {version} is not supported (supported: {sorted(_WRITABLE_VERSIONS)})",
            table=table,
        )
    return version


def _as_reader(data, schema: pa.Schema | None) -> pa.RecordBatchReader:
    """Turn any supported input into a RecordBatchReader without materializing it."""
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency
        pd = None
    if pd is not None and isinstance(data, pd.DataFrame):
        data = pa.Table.from_pandas(data, schema=schema)
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if isinstance(data, pa.Table):
        if schema is not None and not data.schema.equals(schema):
            data = data.cast(schema)
        return data.to_reader()
    if isinstance(data, pa.RecordBatchReader):
        return data
    if hasattr(data, "__arrow_c_stream__"):
        return pa.RecordBatchReader.from_stream(data, schema=schema)
    if isinstance(data, Iterable):
        iterator = iter(data)
        if schema is None:
            first = next(iterator, None)
            if first is None:
                raise InvalidInputError("cannot infer a schema from an empty iterable; pass schema=")
            schema = first.schema

            def chain(head=first, rest=iterator) -> Iterator[pa.RecordBatch]:
                yield head
                yield from rest

            iterator = chain()
        return pa.RecordBatchReader.from_batches(schema, iterator)
    raise InvalidInputError(f"cannot write data of type {type(data).__name__} to a Lance table")


def _conform(batch: pa.RecordBatch, target: pa.Schema, *, table: str) -> pa.RecordBatch:
    """Reorder columns to the table's order and refuse nulls in non-nullable columns."""
    if batch.schema.names != target.names:
        batch = pa.RecordBatch.from_arrays([batch.column(n) for n in target.names], schema=target)
    for index, field in enumerate(target):
        if not field.nullable and batch.column(index).null_count:
            raise SchemaMismatchError(
                f"column {field.name!r} is not nullable but the data has "
                f"{batch.column(index).null_count} null value(s)",
                table=table,
                column=field.name,
            )
    if batch.schema.metadata != target.metadata or not batch.schema.equals(target):
        batch = pa.RecordBatch.from_arrays(batch.columns, schema=target)
    return batch


class _FragmentWriter:
    """Writes batches into one or more data files, one fragment per file."""

    def __init__(self, store: ObjectStore, schema: LanceSchema, storage_version: str,
                 max_rows_per_file: int, max_bytes_per_file: int) -> None:
        self._store = store
        self._schema = schema
        self._storage_version = storage_version
        self._max_rows = max_rows_per_file
        self._max_bytes = max_bytes_per_file
        self._current: LanceFileWriter | None = None
        self._current_rows = 0
        self._current_bytes = 0
        self.written: list[WrittenFile] = []
        self.paths: list[str] = []

    def _open(self) -> LanceFileWriter:
        path = f"data/{data_file_name()}"
        self.paths.append(path)
        self._current = LanceFileWriter(self._store, path, self._schema, version=self._storage_version)
        self._current_rows = 0
        self._current_bytes = 0
        return self._current

    def _close(self) -> None:
        if self._current is not None:
            self.written.append(self._current.finish())
            self._current = None

    def write(self, batch: pa.RecordBatch) -> None:
        offset = 0
        while offset < batch.num_rows:
            writer = self._current or self._open()
            take = min(batch.num_rows - offset, self._max_rows - self._current_rows)
            piece = batch.slice(offset, take)
            writer.write_batch(piece)
            self._current_rows += take
            self._current_bytes += piece.nbytes
            offset += take
            if self._current_rows >= self._max_rows or self._current_bytes >= self._max_bytes:
                self._close()

    def finish(self) -> list[table_pb2.DataFragment]:
        self._close()
        major, minor = _WRITABLE_VERSIONS[self._storage_version]
        fragments = []
        for written in self.written:
            fragment = table_pb2.DataFragment(physical_rows=written.num_rows)
            data_file = fragment.files.add()
            data_file.path = written.path.split("/", 1)[1]
            data_file.fields.extend(written.field_ids)
            data_file.column_indices.extend(written.column_indices)
            data_file.file_major_version = major
            data_file.file_minor_version = minor
            data_file.file_size_bytes = written.size_bytes
            fragments.append(fragment)
        return fragments

    def abort(self) -> None:
        if self._current is not None:
            try:
                self._current.abort()
            except Exception:
                pass
            self._current = None
        for path in self.paths:
            self._store.delete(path)


def write_fragments(
    reader: pa.RecordBatchReader,
    store: ObjectStore,
    schema: LanceSchema,
    storage_version: str,
    *,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    max_bytes_per_file: int = DEFAULT_MAX_BYTES_PER_FILE,
) -> tuple[list[table_pb2.DataFragment], "_FragmentWriter"]:
    """Write all batches of ``reader`` as new fragments (uncommitted; ids 0)."""
    if max_rows_per_file <= 0:
        raise InvalidInputError("max_rows_per_file must be positive")
    target = schema.to_arrow()
    writer = _FragmentWriter(store, schema, storage_version, max_rows_per_file, max_bytes_per_file)
    try:
        for batch in reader:
            if batch.num_rows:
                writer.write(_conform(batch, target, table=store.uri))
        return writer.finish(), writer
    except BaseException:
        writer.abort()
        raise


def write_dataset(
    data,
    uri: str | os.PathLike[str],
    schema: pa.Schema | None = None,
    mode: str = "create",
    *,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    max_bytes_per_file: int = DEFAULT_MAX_BYTES_PER_FILE,
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    enable_stable_row_ids: bool = False,
    data_storage_version: str | None = None,
    enable_v2_manifest_paths: bool = True,
    **unsupported,
) -> LanceDataset:
    """Write ``data`` as a new version of the table at ``uri`` (pylance's ``write_dataset``)."""
    if unsupported:
        raise InvalidInputError(f"unsupported write_dataset arguments: {sorted(unsupported)}")
    if mode not in MODES:
        raise InvalidInputError(f"mode must be one of {MODES}, got {mode!r}")
    store = object_store_for(uri)
    existing = latest_manifest(store)
    if existing is not None:
        path, manifest_file = existing
        feature_flags.check_writable(manifest_file.manifest, table=store.uri, path=path)
        if mode == "create":
            raise DatasetAlreadyExistsError(
                "a table already exists here; use mode='append' or 'overwrite'",
                table=store.uri,
                version=manifest_file.manifest.version,
            )

    reader = _as_reader(data, schema)
    if existing is not None and mode == "append":
        manifest = existing[1].manifest
        table_schema = LanceSchema.from_protos(list(manifest.fields), dict(manifest.schema_metadata))
        check_arrow_compatible(table_schema.to_arrow(), reader.schema, table=store.uri)
        storage_version = _resolve_storage_version(None, manifest.data_format.version or "2.0", table=store.uri)
    else:
        table_schema = LanceSchema.from_arrow(reader.schema)
        previous = existing[1].manifest.data_format.version if existing is not None else None
        storage_version = _resolve_storage_version(data_storage_version, None if data_storage_version else previous,
                                                   table=store.uri)

    fragments, writer = write_fragments(
        reader, store, table_schema, storage_version,
        max_rows_per_file=max_rows_per_file, max_bytes_per_file=max_bytes_per_file,
    )
    read_version = existing[1].manifest.version if existing is not None else 0
    txn = new_transaction(read_version, properties=transaction_properties, commit_message=commit_message)
    if existing is not None and mode == "append":
        txn.append.fragments.extend(fragments)
    else:
        overwrite: transaction_pb2.Overwrite = txn.overwrite
        overwrite.fragments.extend(fragments)
        overwrite.schema.extend(table_schema.to_protos())
        overwrite.schema_metadata.update(table_schema.metadata)
    options = BuildOptions(enable_stable_row_ids=enable_stable_row_ids, data_storage_version=storage_version)
    naming = ManifestNaming.V2 if enable_v2_manifest_paths else ManifestNaming.V1
    try:
        committed = commit_transaction(store, txn, options=options, new_table_naming=naming)
    except BaseException:
        writer.abort()
        raise
    return LanceDataset(store, committed.version)
