"""Phase one of a distributed write with pylance's API: ``LanceFragment.create`` and
``write_fragments`` write data files and describe them as :class:`FragmentMetadata` (nothing is
visible until ``LanceDataset.commit``), and a fragment's own uncommitted changes
(``LanceFragment.delete``, ``merge_columns``) likewise return a new description.

The files are written by the engine's write path (:mod:`lance_format.dataset.writing.fragment_sink`),
so they are the same files ``write_dataset`` would have written.
"""

from __future__ import annotations

import os
import uuid
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lance_format.dataset.dataset import LanceDataset
from lance_format.dataset.evolution.base import new_column_file
from lance_format.dataset.evolution.columns import _new_schema, _sql_batches
from lance_format.dataset.evolution.udf_columns import udf_batches, udf_output_schema
from lance_format.dataset.fragment import ROW_ADDRESS, ROW_ID
from lance_format.dataset.fragment_metadata import DataFile, DeletionFile, FragmentMetadata, fragment_from_proto
from lance_format.dataset.mutations.base import Prepared, storage_version_of
from lance_format.dataset.sql.filter import to_value_expression, value_nullable
from lance_format.dataset.transactions_api import LanceOperation, Transaction
from lance_format.dataset.writing.arrow_input import as_reader
from lance_format.dataset.writing.fragment_sink import (
    DEFAULT_MAX_BYTES_PER_FILE,
    DEFAULT_MAX_ROWS_PER_FILE,
    resolve_storage_version,
    write_fragment_files,
    write_target,
)
from lance_format.dataset.writing.write_dataset import progress_hook, write_targets
from lance_format.errors import ArgumentTypeError, CorruptFileError, EmptyDataError, InvalidInputError
from lance_format.file.legacy_v0_1_writer import batches_like
from lance_format.file.reader import DataFileReader
from lance_format.file.writer import DataFileWriter
from lance_format.io import ObjectStore, object_store_for
from lance_format.proto import table_pb2
from lance_format.schema import LanceSchema
from lance_format.schema.extensions import storage_schema, to_storage
from lance_format.table import feature_flags
from lance_format.table.base_paths import DatasetBasePath, check_base_store_params, new_base_protos
from lance_format.table.commit import latest_manifest
from lance_format.table.deletion import write_deletion_file
from lance_format.table.legacy_manifest import fragment_batch_rows
from lance_format.table.transaction import TOMBSTONE_FIELD_ID, new_transaction

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset
    from lance_format.dataset.fragment import LanceFragment
    from lance_format.dataset.transactions_api import Transaction

WRITE_MODES = ("append", "create", "overwrite")


def _legacy_alias(data_storage_version: str | None, use_legacy_format: bool | None) -> str | None:
    if use_legacy_format is None:
        return data_storage_version
    warnings.warn("use_legacy_format is deprecated, use data_storage_version instead", DeprecationWarning,
                  stacklevel=3)
    return "legacy" if use_legacy_format else "stable"


def _store_of(dataset_uri: Any, storage_options: Mapping[str, str] | None) -> ObjectStore:
    if isinstance(dataset_uri, LanceDataset):
        return dataset_uri.object_store
    if not isinstance(dataset_uri, (str, os.PathLike, ObjectStore)):
        raise ArgumentTypeError(f"Unknown dataset_uri type {type(dataset_uri)}")
    return object_store_for(dataset_uri, storage_options)


def _write(
    data: Any, dataset_uri: Any, schema: pa.Schema | None, *, mode: str, max_rows_per_file: int,
    max_bytes_per_file: int, progress: Any, data_storage_version: str | None,
    storage_options: Mapping[str, str] | None, fragment_id: int | None = None,
    initial_bases: Any = None, target_bases: Any = None,
) -> tuple[list[FragmentMetadata], LanceSchema, int, list[Any]]:
    """Write ``data`` as uncommitted fragments; returns them, the schema they follow and the
    version they were written against (0: no table yet). ``fragment_id`` (``LanceFragment.create``)
    numbers the one fragment, also in what ``progress`` is told as its file opens and closes."""
    if mode not in WRITE_MODES:
        raise InvalidInputError(f"mode must be one of {WRITE_MODES}, got {mode!r}")
    store = _store_of(dataset_uri, storage_options)
    reader = as_reader(data, schema)
    if not len(reader.schema):
        raise EmptyDataError("Cannot write with an empty schema.", table=store.uri)
    existing = latest_manifest(store)
    read_version = 0
    if existing is not None:
        path, manifest_file = existing
        feature_flags.check_writable(manifest_file.manifest, table=store.uri, path=path)
        read_version = manifest_file.manifest.version
    append_to = existing[1].manifest if existing is not None and mode == "append" else None
    table_schema, storage_version = write_target(append_to, reader.schema, data_storage_version, None,
                                                 table=store.uri)
    if initial_bases is not None and mode != "create":
        raise InvalidInputError(f"Cannot register new bases in {mode.capitalize()} mode. Only CREATE mode can "
                                "register new bases", table=store.uri)
    # the bases the new files may go to: the ones a new table registers, or the table's own
    bases = new_base_protos(initial_bases, [], table=store.uri) if initial_bases is not None else \
        list(existing[1].manifest.base_paths) if existing is not None else []
    targets = write_targets(store, bases, target_bases, None) if target_bases is not None else None
    protos, _sink = write_fragment_files(reader, store, table_schema, storage_version,
                                          max_rows_per_file=max_rows_per_file, max_bytes_per_file=max_bytes_per_file,
                                          targets=targets, on_file=progress_hook(progress, fragment_id),
                                          begin_with_file=fragment_id is not None)
    fragments = [fragment_from_proto(p) for p in protos]
    registered = [DatasetBasePath.from_proto(b) for b in bases] if initial_bases is not None else []
    return fragments, table_schema, read_version, registered


def create_fragment(
    dataset_uri: str | os.PathLike[str] | LanceDataset,
    data: Any,
    fragment_id: int | None = None,
    schema: pa.Schema | None = None,
    max_rows_per_group: int | None = 1024,
    progress: Any = None,
    mode: str = "append",
    *,
    data_storage_version: str | None = None,
    use_legacy_format: bool | None = None,
    storage_options: Mapping[str, str] | None = None,
    **unsupported: Any,
) -> FragmentMetadata:
    """pylance's ``LanceFragment.create``: write ``data`` as ONE uncommitted fragment.

    ``max_rows_per_group`` is accepted for compatibility; this engine's writer sizes pages itself.

    Raises
    ------
    InvalidInputError
        Unknown ``mode`` or arguments.
    SchemaMismatchError
        ``mode="append"`` and the data does not fit the existing table's schema.
    """
    if any(v is not None for v in unsupported.values()):
        raise InvalidInputError(f"unsupported LanceFragment.create arguments: {sorted(unsupported)}")
    version = _legacy_alias(data_storage_version, use_legacy_format)
    fragments, _schema, _read, _bases = _write(data, dataset_uri, schema, mode=mode, max_rows_per_file=2**63 - 1,
                                       max_bytes_per_file=2**63 - 1, progress=progress, data_storage_version=version,
                                       storage_options=storage_options,
                                       fragment_id=0 if fragment_id is None else int(fragment_id))
    if not fragments:
        raise EmptyDataError("Input data was empty.", table=_store_of(dataset_uri, storage_options).uri)
    fragment = fragments[0]
    if fragment_id is not None:
        fragment.id = int(fragment_id)
    return fragment


def write_fragments(
    data: Any,
    dataset_uri: str | os.PathLike[str] | LanceDataset,
    schema: pa.Schema | None = None,
    *,
    return_transaction: bool = False,
    mode: str = "append",
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    max_rows_per_group: int | None = 1024,
    max_bytes_per_file: int = DEFAULT_MAX_BYTES_PER_FILE,
    data_cache_bytes: int | None = None,
    max_page_bytes: int | None = None,
    progress: Any = None,
    data_storage_version: str | None = None,
    use_legacy_format: bool | None = None,
    storage_options: Mapping[str, str] | None = None,
    enable_stable_row_ids: bool = False,
    target_bases: list[str] | None = None,
    initial_bases: list[DatasetBasePath] | None = None,
    base_store_params: Mapping[str, Mapping[str, str]] | None = None,
    **unsupported: Any,
) -> list[FragmentMetadata] | Transaction:
    """pylance's ``write_fragments``: uncommitted fragments (ids 0), or with
    ``return_transaction=True`` the Append/Overwrite :class:`Transaction` that commits them.

    ``max_rows_per_group``, ``data_cache_bytes``, ``max_page_bytes`` and ``enable_stable_row_ids``
    (which has no effect in pylance either: ids are assigned at commit) are accepted for
    compatibility. ``target_bases``: names or paths of bases the files go to (registered ones, or
    with ``mode="create"`` the ``initial_bases`` the new table registers, which the returned
    transaction carries); ``base_store_params`` as in :func:`write_dataset`.
    """
    if any(v not in (None, False, "reference") for v in unsupported.values()):
        raise InvalidInputError(f"unsupported write_fragments arguments: {sorted(unsupported)}")
    check_base_store_params(base_store_params, table=str(getattr(dataset_uri, "uri", dataset_uri)))
    version = _legacy_alias(data_storage_version, use_legacy_format)
    fragments, table_schema, read_version, bases = _write(
        data, dataset_uri, schema, mode=mode, max_rows_per_file=max_rows_per_file,
        max_bytes_per_file=max_bytes_per_file, progress=progress, data_storage_version=version,
        storage_options=storage_options, initial_bases=initial_bases, target_bases=target_bases)
    if not return_transaction:
        return fragments

    operation: Any
    if mode == "append" and read_version:
        operation = LanceOperation.Append(fragments)
    else:
        operation = LanceOperation.Overwrite(table_schema, fragments, initial_bases=bases or None)
    return Transaction(read_version=read_version, operation=operation, uuid=str(uuid.uuid4()))


# -- changes to one existing fragment ----------------------------------------------------------
def delete_from_fragment(fragment: LanceFragment, predicate: str) -> FragmentMetadata | None:
    """pylance's ``LanceFragment.delete``: a new deletion file with the rows matching ``predicate``
    added; None when no row would be left. Nothing is committed."""

    ds = fragment._dataset
    scanner = ds.scanner(columns=[], filter=predicate, with_row_address=True, fragments=[fragment])
    pieces = [b.column(0).to_numpy(zero_copy_only=False) for b in scanner.to_batches()]
    new = (np.concatenate(pieces).astype(np.uint64) & np.uint64(0xFFFFFFFF)) if pieces else np.empty(0, np.uint64)
    updated = fragment.metadata
    if new.size == 0:
        return updated
    union = np.union1d(fragment.deleted_offsets.astype(np.uint64), new)
    if union.size >= fragment.physical_rows:
        return None
    pb = write_deletion_file(ds.object_store, fragment.fragment_id, ds.version, union.astype(np.uint32))
    updated.deletion_file = DeletionFile.from_proto(pb)
    return updated


def merge_fragment_columns(
    fragment: LanceFragment, value_func: Any, columns: list[str] | None = None, batch_size: int | None = None,
    reader_schema: pa.Schema | None = None,
) -> tuple[FragmentMetadata, LanceSchema]:
    """pylance's ``LanceFragment.merge_columns``: a new data file with new columns for this
    fragment, and the table schema with them; commit with ``LanceOperation.Merge``."""

    ds = fragment._dataset
    prepared = Prepared(new_transaction(ds.version), None, storage_version=storage_version_of(ds))
    batches: Any
    if isinstance(value_func, Mapping):
        if not value_func:
            raise InvalidInputError("merge_columns needs at least one column", table=ds.uri)
        exprs: dict[str, Any] = {}
        reads: list[str] = []
        fields = []
        for name, sql in value_func.items():
            expr, dtype, cols = to_value_expression(sql, ds.schema)
            exprs[name] = expr
            fields.append(pa.field(name, dtype, nullable=value_nullable(sql, ds.schema)))
            reads += [c for c in cols if c not in reads]
        arrow = pa.schema(fields)
        batches = _sql_batches(ds, fragment, exprs, reads, arrow, batch_size)
    elif callable(value_func):
        if getattr(value_func, "cache", None) is not None:
            raise InvalidInputError("A checkpoint file cannot be used when applying a UDF with "
                                    "LanceFragment.merge_columns.  You must apply your own "
                                    "checkpointing for fragment-level operations.", table=ds.uri)
        try:
            arrow = udf_output_schema(fragment, value_func, columns)
        except InvalidInputError as exc:
            raise exc.with_context(table=ds.uri) from None
        batches = udf_batches(ds, fragment, value_func, columns, batch_size, arrow)
    else:
        reader = as_reader(value_func, reader_schema)
        arrow = reader.schema
        batches = iter(reader)
    new = _new_schema(ds, arrow)
    proto = new_column_file(ds, fragment, new, batches, prepared)
    schema = LanceSchema.from_protos(list(ds.manifest.fields) + new.to_protos(), dict(ds.manifest.schema_metadata))
    return fragment_from_proto(proto), schema


def delete_fragment_rows(fragment: LanceFragment, offsets: Any) -> FragmentMetadata | None:
    """pylance's ``LanceFragment.delete_rows``: delete physical ``offsets`` of this fragment
    (added to its deletion file); None when no row would be left. Nothing is committed."""

    new = np.asarray([int(o) for o in offsets], dtype=np.int64)
    if new.size and (new.min() < 0 or new.max() >= fragment.physical_rows):
        bad = int(new.min()) if new.min() < 0 else int(new.max())
        raise InvalidInputError(f"delete_rows offset {bad} is out of range for fragment {fragment.fragment_id} "
                                f"with {fragment.physical_rows} rows", **fragment.error_context())
    updated = fragment.metadata
    union = np.union1d(fragment.deleted_offsets.astype(np.int64), new)
    if union.size == len(fragment.deleted_offsets):
        return updated
    if union.size >= fragment.physical_rows:
        return None
    ds = fragment._dataset
    pb = write_deletion_file(ds.object_store, fragment.fragment_id, ds.version, union.astype(np.uint32))
    updated.deletion_file = DeletionFile.from_proto(pb)
    return updated


_JOIN_BATCH_ROWS = 65536


def _joined_batches(fragment: LanceFragment, right: pa.Table, left_on: str, right_on: str, target: pa.Schema, *,
                    keep_unmatched: bool, matched: list[np.ndarray]) -> Any:
    """Batches of ``target``'s columns for every physical row of ``fragment``, taken from the
    ``right`` row whose ``right_on`` equals the fragment's ``left_on`` (of several, the last);
    rows without a match keep their value (``keep_unmatched``) or get nulls. The physical
    offsets that matched are appended to ``matched``."""
    import pyarrow.compute as pc


    ds = fragment._dataset
    positions = pa.array(np.arange(right.num_rows, dtype=np.int64))
    winners = right.select([right_on]).append_column("__row", positions).group_by(right_on).aggregate(
        [("__row", "max")])
    keys = winners.column(right_on).combine_chunks()
    chosen = right.take(winners.column("__row_max")).combine_chunks()
    values = [chosen.column(f.name).combine_chunks().cast(f.type) for f in target]
    left_columns = [] if left_on in (ROW_ID, ROW_ADDRESS) else [left_on]
    kept = [f.name for f in target] if keep_unmatched else []
    read_schema = ds.lance_schema.project(list(dict.fromkeys(left_columns + kept)))
    system = [] if left_columns else [left_on]
    for start in range(0, fragment.physical_rows, _JOIN_BATCH_ROWS):
        offsets = np.arange(start, min(start + _JOIN_BATCH_ROWS, fragment.physical_rows), dtype=np.uint64)
        old = fragment.take_physical(read_schema, system, offsets)
        left_keys = old.column(old.schema.get_field_index(left_on)).cast(keys.type)
        where = pc.index_in(left_keys, value_set=keys)
        hit = pc.is_valid(where)
        matched.append(offsets[np.asarray(hit.to_numpy(zero_copy_only=False), dtype=bool)])
        if keep_unmatched:
            safe = pc.fill_null(where, 0)
            columns = [pc.if_else(hit, column.take(safe), old.column(old.schema.get_field_index(f.name)))
                       for f, column in zip(target, values)]
        else:
            columns = [column.take(where) for column in values]  # a null index takes a null
        yield pa.RecordBatch.from_arrays(columns, schema=target)


def merge_fragment(fragment: LanceFragment, data_obj: Any, left_on: str, right_on: str | None = None,
                   schema: pa.Schema | None = None) -> tuple[FragmentMetadata, LanceSchema]:
    """pylance's ``LanceFragment.merge``: new columns from ``data_obj`` joined on ``left_on`` =
    ``right_on`` (a left join: rows without a match get nulls), as a new data file of this
    fragment; returns it and the widened schema. Commit with ``LanceOperation.Merge``."""

    ds = fragment._dataset
    right_on = right_on or left_on
    right = as_reader(data_obj, schema).read_all()
    if left_on not in ds.schema.names and left_on not in (ROW_ID, ROW_ADDRESS):
        raise InvalidInputError(f"Column {left_on} does not exist in the left side fragment", table=ds.uri,
                                column=left_on)
    if right_on not in right.column_names:
        raise InvalidInputError(f"Column {right_on} does not exist in the right side data", table=ds.uri,
                                column=right_on)
    added = right.select([n for n in right.column_names if n != right_on])
    if not added.num_columns:
        raise InvalidInputError("merge needs columns besides the join column", table=ds.uri)
    new = _new_schema(ds, added.schema)
    target_arrow = new.to_arrow()
    batches = _joined_batches(fragment, right, left_on, right_on, target_arrow, keep_unmatched=False, matched=[])
    version = resolve_storage_version(None, ds.data_storage_version, table=ds.uri)
    reader = pa.RecordBatchReader.from_batches(target_arrow, batches)
    with batches_like(fragment_batch_rows(ds.object_store, fragment.proto)):
        written, _sink = write_fragment_files(reader, ds.object_store, new, version,
                                               max_rows_per_file=max(1, fragment.physical_rows))
    proto = table_pb2.DataFragment()
    proto.CopyFrom(fragment.proto)
    proto.files.add().CopyFrom(written[0].files[0])
    widened = LanceSchema.from_protos(list(ds.manifest.fields) + new.to_protos(), dict(ds.manifest.schema_metadata))
    return fragment_from_proto(proto), widened


def update_fragment_columns(
    fragment: LanceFragment, data_obj: Any, left_on: str = "_rowid", right_on: str | None = None,
    schema: pa.Schema | None = None, *, with_offsets: bool = False,
) -> tuple[FragmentMetadata, list[int]] | tuple[FragmentMetadata, list[int], bytes]:
    """pylance's ``LanceFragment.update_columns``: new values for existing columns, joined on
    ``left_on`` (a column or ``_rowid``/``_rowaddr``) = ``right_on``.

    The new values go to one new data file covering every physical row (rows without a match
    keep their value; of several matches the last wins); the old files' copies of those fields
    are tombstoned. Commit with ``LanceOperation.Update(updated_fragments=..., fields_modified=...)``.
    Returns ``(fragment, fields_modified)``, plus the matched physical offsets as a portable
    roaring bitmap with ``with_offsets``.
    """
    from pyroaring import BitMap


    ds = fragment._dataset
    right_on = right_on or left_on
    reader = as_reader(data_obj, schema)
    # extension columns (arrow.json text) in their stored form (JSONB), as the table holds them
    right = pa.Table.from_batches([to_storage(b) for b in reader], schema=storage_schema(reader.schema))
    names = ds.schema.names
    if left_on not in names and left_on not in (ROW_ID, ROW_ADDRESS):
        raise InvalidInputError(f"Column {left_on} does not exist in the left side fragment", table=ds.uri,
                                column=left_on)
    if right_on not in right.column_names:
        raise InvalidInputError(f"Column {right_on} does not exist in the right side data", table=ds.uri,
                                column=right_on)
    updated_names = [n for n in right.column_names if n != right_on]
    for name in updated_names:
        if name in (ROW_ID, ROW_ADDRESS):
            raise InvalidInputError(f"Column {name} is a reserved metadata column and cannot be updated",
                                    table=ds.uri, column=name)
        if name not in names:
            raise InvalidInputError(f"Column {name} in right side fragment does not exist in left side fragment",
                                    table=ds.uri, column=name)
    if not updated_names or left_on in updated_names:
        raise InvalidInputError("update_columns needs columns to update other than the join column", table=ds.uri)
    target = ds.lance_schema.project(updated_names)
    target_arrow = target.to_arrow()
    matched: list[np.ndarray] = []
    batches = _joined_batches(fragment, right, left_on, right_on, target_arrow, keep_unmatched=True,
                              matched=matched)
    store = ds.object_store
    version = resolve_storage_version(None, ds.data_storage_version, table=ds.uri)
    reader = pa.RecordBatchReader.from_batches(target_arrow, batches)
    with batches_like(fragment_batch_rows(store, fragment.proto)):
        written, _sink = write_fragment_files(reader, store, target, version,
                                               max_rows_per_file=max(1, fragment.physical_rows))
    replaced = set(target.field_ids())
    proto = table_pb2.DataFragment()
    proto.CopyFrom(fragment.proto)
    for data_file in proto.files:
        data_file.fields[:] = [TOMBSTONE_FIELD_ID if i in replaced else i for i in data_file.fields]
    proto.files.add().CopyFrom(written[0].files[0])
    fields_modified = list(written[0].files[0].fields)
    result = fragment_from_proto(proto)
    if not with_offsets:
        return result, fields_modified
    offsets = np.concatenate(matched) if matched else np.empty(0, np.uint64)
    return result, fields_modified, BitMap(offsets.astype(np.uint32).tolist()).serialize()


def describe_data_file(ds: LanceDataset, path: str, *, base_id: int | None = None) -> tuple[Any, int]:
    """pylance's ``DataFile.create``: the ``DataFile`` of a Lance file already under the table's
    ``data/`` (written by another tool), its columns matched to the table's fields by name, and
    its row count.

    Raises :class:`InvalidInputError` for a column the table does not have.
    """

    with DataFileReader(ds.object_store, f"data/{path}") as reader:
        names = [f.name for f in reader.lance_schema().fields]
        major, minor = reader.version
        rows = reader.num_rows
    size = ds.object_store.size(f"data/{path}")
    unknown = [n for n in names if n not in ds.schema.names]
    if unknown:
        raise InvalidInputError(f"the file's columns {unknown} are not in the table", table=ds.uri, path=path)
    if (major, minor) == (0, 3):
        major, minor = 2, 0  # a 2.0 file's footer says 0.3; manifests record 2.0
    version = f"{major}.{minor}"
    fields, columns = DataFileWriter.column_layout(ds.lance_schema.project(names), version)
    return DataFile(path, fields, columns, major, minor, size or None, base_id), rows


def fragment_from_file(filename: str, dataset: LanceDataset, fragment_id: int) -> FragmentMetadata:
    """pylance's ``LanceFragment.create_from_file``: a fragment of one existing data file."""
    data_file, rows = describe_data_file(dataset, filename)
    return FragmentMetadata(id=int(fragment_id), files=[data_file], physical_rows=rows)


def validate_fragment(fragment: LanceFragment) -> None:
    """Check that the fragment's files exist, have its row count, and its deletions fit it.

    Raises :class:`CorruptFileError` (or ``FileNotFoundError`` for a missing file).
    """

    for data_file in fragment.proto.files:
        if not any(fid >= 0 for fid in data_file.fields):
            continue
        store, path = fragment._dataset.base_stores.data_file(data_file)
        if not store.exists(path):
            raise CorruptFileError(f"data file {data_file.path} of fragment {fragment.fragment_id} does not exist",
                                   path=path, **fragment.error_context())
    fields = fragment._dataset.lance_schema.fields
    for plan in fragment._file_plans(fields):
        if plan.plans:
            fragment._reader(plan)  # checks the file's row count against the fragment's
    _ = fragment.deleted_offsets  # checks the deletion file against the row count


__all__ = ["create_fragment", "write_fragments", "delete_from_fragment", "delete_fragment_rows",
           "merge_fragment", "merge_fragment_columns", "update_fragment_columns", "validate_fragment",
           "describe_data_file", "fragment_from_file"]
