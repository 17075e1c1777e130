"""``write_dataset``: stream Arrow data into data files and commit them as one new version.

Data is consumed batch by batch; a file (one fragment) is rolled over after
``max_rows_per_file`` rows or ``max_bytes_per_file`` bytes. Nothing is visible until the
commit publishes the manifest; if anything fails first, the files written so far are removed.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Iterator, Mapping

import pyarrow as pa

from lance_format.dataset.dataset import LanceDataset
from lance_format.dataset.fragment_sink import (
    DEFAULT_MAX_BYTES_PER_FILE,
    DEFAULT_MAX_ROWS_PER_FILE,
    FILE_VERSION_NUMBERS,
    FragmentSink,
    new_write_id,
    write_prefix,
)
from lance_format.errors import (
    DatasetAlreadyExistsError,
    InvalidInputError,
    SchemaMismatchError,
    UnsupportedFeatureError,
)
from lance_format.io import ObjectStore, object_store_for
from lance_format.proto import table_pb2, transaction_pb2
from lance_format.schema import LanceSchema, check_arrow_compatible
from lance_format.table import feature_flags
from lance_format.table.commit import commit_transaction, latest_manifest
from lance_format.table.naming import ManifestNaming
from lance_format.table.operations import BuildOptions
from lance_format.table.transaction import new_transaction

MODES = ("create", "append", "overwrite")
# File versions this engine can write (-> DataFile major/minor); 2.3 ("next") and the legacy
# 0.1 format are refused.
_WRITABLE_VERSIONS = FILE_VERSION_NUMBERS
_VERSION_ALIASES = {"legacy": "0.1", "stable": "2.2", "next": "2.3"}
# What new tables get when no version is asked for (pylance 14's default is "stable" = 2.2).
DEFAULT_STORAGE_VERSION = "2.2"


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
    if isinstance(data, (str, bytes)) or data is None:
        raise InvalidInputError(f"cannot write data of type {type(data).__name__} to a Lance table: pass a "
                                "pyarrow Table/RecordBatch/reader, a pandas DataFrame, a dict of columns or "
                                "a list of row dicts")
    if isinstance(data, dict):
        data = _arrow_from_python(pa.Table.from_pydict, data, schema)
    elif isinstance(data, list) and data and isinstance(data[0], dict):
        data = _arrow_from_python(pa.Table.from_pylist, data, schema)
    elif not isinstance(data, (pa.Table, pa.RecordBatch, pa.RecordBatchReader)) and callable(
        getattr(data, "scanner", None)
    ):
        # Datasets (pyarrow's, Lance's, ours): stream their batches.
        data = data.scanner().to_reader()
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
        iterator = _record_batches(iter(data))
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


def _arrow_from_python(build: Callable[..., pa.Table], data: Any, schema: pa.Schema | None) -> pa.Table:
    try:
        return build(data, schema=schema)
    except (pa.ArrowException, TypeError, ValueError) as err:
        raise InvalidInputError(f"cannot convert the {type(data).__name__} to Arrow: {err}") from None


def _record_batches(items: Iterator[Any]) -> Iterator[pa.RecordBatch]:
    """An iterable's batches (tables are split into theirs); anything else is refused by type."""
    for item in items:
        if isinstance(item, pa.RecordBatch):
            yield item
        elif isinstance(item, pa.Table):
            yield from item.to_batches()
        else:
            raise InvalidInputError(
                f"an iterable written to a Lance table must yield pyarrow RecordBatches, got {type(item).__name__}"
            )


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


def write_fragments(
    reader: pa.RecordBatchReader,
    store: ObjectStore,
    schema: LanceSchema,
    storage_version: str,
    *,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    max_bytes_per_file: int = DEFAULT_MAX_BYTES_PER_FILE,
) -> tuple[list[table_pb2.DataFragment], FragmentSink]:
    """Write all batches of ``reader`` as new fragments (uncommitted; ids 0).

    Returns the fragments and the sink, whose ``abort()`` removes the files again if the
    commit that should publish them fails.
    """
    target = schema.to_arrow()
    writer = FragmentSink(store, schema, storage_version, prefix=write_prefix(new_write_id()),
                          max_rows_per_file=max_rows_per_file, max_bytes_per_file=max_bytes_per_file)
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
    storage_options: Mapping[str, str] | None = None,
    **unsupported,
) -> LanceDataset:
    """Write ``data`` as a new version of the table at ``uri`` (pylance's ``write_dataset``).

    ``storage_options``: object-store settings with Lance's keys, for ``s3://`` URIs.
    """
    if unsupported:
        raise InvalidInputError(f"unsupported write_dataset arguments: {sorted(unsupported)}")
    if mode not in MODES:
        raise InvalidInputError(f"mode must be one of {MODES}, got {mode!r}")
    store = object_store_for(uri._store if isinstance(uri, LanceDataset) else uri, storage_options)  # its branch
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
