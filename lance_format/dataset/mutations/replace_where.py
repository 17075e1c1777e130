"""``replace_where``: replace the rows matching a predicate with new data, in ONE commit.

This is what a partitioned writer needs ("materializing partition P replaces exactly P's
rows"): the rows of the current version that match ``predicate`` are deleted (new deletion
files holding the union of old and new deletions; fully deleted fragments are removed) and
``data`` is written as new fragments. Both land in a single ``Update`` transaction shaped like
the one pylance's ``merge_insert`` commits (``update_mode`` REWRITE_ROWS, every field listed in
``fields_for_preserving_frag_bitmap``), so readers see either the old partition or the new one,
never both or neither. If no row matches, the commit is a plain ``Append``. It runs on the
shared mutation machinery (:mod:`lance_format.dataset.mutations.base`): deletion files, rebase
over concurrent deletes, retries of retryable conflicts, clean-up of failed attempts.

By default every new row must satisfy ``predicate`` too; otherwise a later replace of another
partition could not find (and would duplicate) rows written here. Nothing becomes visible when
any step fails: new data and deletion files are removed again.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.dataset.dataset import LanceDataset
from lance_format.dataset.mutations.base import (
    DEFAULT_CONFLICT_RETRIES,
    Prepared,
    apply_deletions,
    checked_reader,
    matching_offsets,
    run_mutation,
    storage_version_of,
    transaction_for,
)
from lance_format.dataset.sql.filter import to_expression
from lance_format.dataset.writing.arrow_input import as_reader
from lance_format.dataset.writing.fragment_sink import (
    DEFAULT_MAX_BYTES_PER_FILE,
    DEFAULT_MAX_ROWS_PER_FILE,
    write_fragment_files,
)
from lance_format.dataset.writing.write_dataset import write_dataset
from lance_format.errors import CommitConflictError, DatasetNotFoundError, InvalidInputError
from lance_format.io import object_store_for
from lance_format.proto import transaction_pb2
from lance_format.schema import check_arrow_compatible
from lance_format.table import feature_flags
from lance_format.table.commit import commit_landed

__all__ = ["replace_where"]


def replace_where(
    dataset_or_uri: LanceDataset | str | os.PathLike[str],
    predicate: str | pc.Expression,
    data,
    *,
    schema: pa.Schema | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    commit_message: str | None = None,
    check_data: bool = True,
    create_if_missing: bool = True,
    enable_stable_row_ids: bool = False,
    data_storage_version: str | None = None,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    max_bytes_per_file: int = DEFAULT_MAX_BYTES_PER_FILE,
    conflict_retries: int = DEFAULT_CONFLICT_RETRIES,
    storage_options: Mapping[str, str] | None = None,
) -> LanceDataset:
    """Delete the rows matching ``predicate`` and add ``data``, as one new version.

    ``dataset_or_uri``: an open dataset (its version is the read version, so a concurrent
    incompatible commit is detected) or a URI (its latest version). ``predicate``: a SQL filter
    or a ``pyarrow.compute`` expression. ``data``: anything ``write_dataset`` accepts; its columns
    must match the table's (names in any order, identical types). ``check_data``: refuse new rows
    that do not satisfy ``predicate``. A missing table is created from ``data`` when
    ``create_if_missing`` (``enable_stable_row_ids`` / ``data_storage_version`` apply then only).

    The new data files are written once; the deletions are recomputed against the latest
    version when a concurrent commit makes the first attempt retryable (a concurrent delete of
    other rows of the same fragments is merged by the commit itself). Returns the new version.
    """
    if predicate is None or (isinstance(predicate, str) and not predicate.strip()):
        raise InvalidInputError("replace_where needs a predicate; use write_dataset(mode='overwrite') for all rows")
    if isinstance(dataset_or_uri, LanceDataset):
        ds: LanceDataset | None = dataset_or_uri
        store = dataset_or_uri.object_store
    else:
        store = object_store_for(dataset_or_uri, storage_options)
        try:
            ds = LanceDataset(store)
        except DatasetNotFoundError:
            ds = None
    reader = as_reader(data, schema)
    if ds is None:
        if not create_if_missing:
            raise DatasetNotFoundError("cannot replace rows of a table that does not exist", table=store.uri)
        if check_data:
            reader = checked_reader(reader, predicate, table=store.uri)
        return write_dataset(
            reader, store, mode="create", transaction_properties=transaction_properties,
            commit_message=commit_message, enable_stable_row_ids=enable_stable_row_ids,
            data_storage_version=data_storage_version, max_rows_per_file=max_rows_per_file,
            max_bytes_per_file=max_bytes_per_file,
        )

    feature_flags.check_writable(ds.manifest, table=store.uri, path=ds.manifest_path)
    table_schema = ds.lance_schema
    check_arrow_compatible(table_schema.to_arrow(), reader.schema, table=store.uri)
    to_expression(predicate, table_schema.to_arrow())  # refuse a bad predicate before writing
    if check_data:
        reader = checked_reader(reader, predicate, table=store.uri)
    storage_version = storage_version_of(ds)
    fragments, writer = write_fragment_files(
        reader, store, table_schema, storage_version,
        max_rows_per_file=max_rows_per_file, max_bytes_per_file=max_bytes_per_file,
    )

    def prepare(current: LanceDataset) -> Prepared:
        if current.lance_schema.field_ids() != table_schema.field_ids():
            raise CommitConflictError(
                "the table's schema changed while the replacement was being written", table=store.uri,
                version=current.version,
            )
        prepared = Prepared(transaction_for(current, transaction_properties, commit_message), None,
                            storage_version=storage_version)
        offsets = matching_offsets(current, predicate)
        txn = prepared.txn
        if not offsets:
            txn.append.fragments.extend(fragments)
            return prepared
        updated, removed = apply_deletions(current, offsets, prepared)
        update: transaction_pb2.Transaction.Update = txn.update
        update.removed_fragment_ids.extend(removed)
        update.updated_fragments.extend(updated)
        update.new_fragments.extend(fragments)
        # Like pylance's merge_insert: update_mode stays REWRITE_ROWS (0, omitted on the wire).
        update.fields_for_preserving_frag_bitmap.extend(table_schema.field_ids())
        prepared.affected_rows = offsets
        return prepared

    try:
        run_mutation(ds, prepare, conflict_retries=conflict_retries)  # moves ds to the new version
    except BaseException as error:
        if not commit_landed(error):
            writer.abort()
        raise
    return LanceDataset(store, ds.version)
