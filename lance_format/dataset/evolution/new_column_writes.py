"""Writes that bring new columns (``schema_mode="add_columns"``) committed as ONE ``Merge``.

Official Lance evolves a schema with a ``Merge`` transaction that carries the complete new
fragment list and the complete new schema. A write that adds columns does the same here, so
the new columns and the rows that fill them appear in one version (never the columns alone):

* the new fields get ids above every id in the schema *and* in the data files (a dropped
  column's id is never reused while its data is on disk), depth-first like ``add_columns``;
* existing fragments are kept as they are (or with their new deletion files, for a
  replace-where); their data files lack the new fields, which therefore read as nulls;
* new fragments get their ids here (``max_fragment_id + 1, ...``; a Merge carries final ids,
  as in Lance) and, with stable row ids, row ids and version sequences at commit exactly as
  an Append's (:mod:`lance_format.table.transaction`).

A Merge conflicts (retryably) with every concurrent commit that changes fragments, so a
concurrent write is never lost; the caller's files are removed when the commit fails.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.dataset.evolution.base import next_field_id_of
from lance_format.dataset.mutations.base import (
    Prepared,
    apply_deletions,
    checked_reader,
    matching_offsets,
    storage_version_of,
)
from lance_format.dataset.sql.filter import to_expression
from lance_format.dataset.writing.fragment_sink import write_fragment_files
from lance_format.errors import InvalidInputError
from lance_format.io import ObjectStore, object_store_for
from lance_format.proto import table_pb2, transaction_pb2
from lance_format.schema import LanceSchema
from lance_format.table.commit import CommittedVersion, commit_landed, commit_transaction
from lance_format.table.manifest import ManifestFile, read_manifest
from lance_format.table.naming import list_versions
from lance_format.table.transaction import new_transaction

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset


def widened_schema(manifest: table_pb2.Manifest, new_fields: pa.Schema | Sequence[pa.Field]) -> LanceSchema:
    """The table's schema plus ``new_fields`` (nullable: existing rows read as null), new ids."""
    table = LanceSchema.from_protos(list(manifest.fields), dict(manifest.schema_metadata))
    arrow = pa.schema([f.with_nullable(True) for f in new_fields])
    for name in arrow.names:
        if name in table.to_arrow().names:
            raise InvalidInputError(f"Column {name} already exists in the dataset", column=name)
    added = LanceSchema.from_arrow(arrow, first_id=next_field_id_of(manifest))
    return LanceSchema(table.fields + added.fields, dict(table.metadata))


def build_merge(
    read_manifest_: table_pb2.Manifest,
    schema: LanceSchema,
    *,
    new_fragments: Sequence[table_pb2.DataFragment] = (),
    removed_fragment_ids: Iterable[int] = (),
    updated_fragments: Sequence[table_pb2.DataFragment] = (),
    properties: Mapping[str, str] | None = None,
    commit_message: str | None = None,
) -> transaction_pb2.Transaction:
    """A Merge over the read version's fragments (minus removed, with updates) plus new ones."""
    removed = {int(i) for i in removed_fragment_ids}
    updated = {f.id: f for f in updated_fragments}
    known = {f.id for f in read_manifest_.fragments}
    unknown = sorted((removed | set(updated)) - known)
    if unknown:
        raise InvalidInputError(f"fragments {unknown} are not in version {read_manifest_.version}",
                                version=read_manifest_.version)
    if read_manifest_.HasField("max_fragment_id"):
        next_id = read_manifest_.max_fragment_id + 1
    else:
        next_id = max(known, default=-1) + 1
    txn = new_transaction(read_manifest_.version, properties=properties, commit_message=commit_message)
    body = txn.merge
    body.SetInParent()
    body.fragments.extend(updated.get(f.id, f) for f in read_manifest_.fragments if f.id not in removed)
    for fragment in new_fragments:
        copy = body.fragments.add()
        copy.CopyFrom(fragment)
        copy.id = next_id  # a Merge carries final ids (Lance assigns none at commit)
        next_id += 1
    body.schema.extend(schema.to_protos())
    body.schema_metadata.update(schema.metadata)
    return txn


def _read_manifest_file(store: ObjectStore, read_version: int) -> ManifestFile:
    path = list_versions(store).versions.get(read_version)
    if path is None:
        raise InvalidInputError(f"version {read_version} does not exist", table=store.uri)
    return read_manifest(store, path)


def commit_with_new_columns(
    uri: str | os.PathLike[str] | ObjectStore,
    *,
    read_version: int,
    schema: LanceSchema,
    new_fragments: Sequence[table_pb2.DataFragment] = (),
    removed_fragment_ids: Iterable[int] = (),
    updated_fragments: Sequence[table_pb2.DataFragment] = (),
    properties: Mapping[str, str] | None = None,
    commit_message: str | None = None,
    read_manifest_file: ManifestFile | None = None,
) -> CommittedVersion:
    """Commit new columns (``schema``: the whole new schema) and a write's fragments as ONE Merge.

    ``new_fragments`` must hold data for ``schema``'s fields; ``removed_fragment_ids`` /
    ``updated_fragments`` (new deletion files) apply to the fragments of ``read_version``.
    A concurrent commit that changed fragments raises ``RetryableCommitConflictError``.
    """
    store = object_store_for(uri)
    manifest_file = read_manifest_file or _read_manifest_file(store, read_version)
    if manifest_file.manifest.version != read_version:
        raise InvalidInputError("read_manifest_file is not the read version", table=store.uri, version=read_version)
    txn = build_merge(manifest_file.manifest, schema, new_fragments=new_fragments,
                      removed_fragment_ids=removed_fragment_ids, updated_fragments=updated_fragments,
                      properties=properties, commit_message=commit_message)
    return commit_transaction(store, txn, read_manifest_file=manifest_file)


def write_with_new_columns(
    ds: LanceDataset,
    data: pa.RecordBatchReader,
    new_fields: pa.Schema | Sequence[pa.Field],
    *,
    predicate: str | pc.Expression | None = None,
    check_data: bool = True,
    transaction_properties: Mapping[str, str] | None = None,
    commit_message: str | None = None,
) -> LanceDataset:
    """Append ``data`` (or, with ``predicate``, replace the matching rows by it) adding
    ``new_fields`` to the schema, all in one new version. ``data`` has the table's columns
    and the new ones (any order). Nothing stays behind when the commit fails."""
    store = ds.object_store
    schema = widened_schema(ds.manifest, new_fields)
    if predicate is not None:
        to_expression(predicate, ds.lance_schema.to_arrow())  # refuse a bad predicate before writing
        if check_data:
            data = checked_reader(data, predicate, table=store.uri)
    fragments, writer = write_fragment_files(data, store, schema, storage_version_of(ds))
    prepared: Prepared | None = None
    try:
        removed: list[int] = []
        updated: list[table_pb2.DataFragment] = []
        if predicate is not None:
            offsets = matching_offsets(ds, predicate)
            if offsets:
                prepared = Prepared(new_transaction(ds.version), None)
                updated, removed = apply_deletions(ds, offsets, prepared)
        committed = commit_with_new_columns(
            store, read_version=ds.version, schema=schema, new_fragments=fragments,
            removed_fragment_ids=removed, updated_fragments=updated, properties=transaction_properties,
            commit_message=commit_message, read_manifest_file=ds.manifest_file,
        )
    except BaseException as error:
        if not commit_landed(error):
            writer.abort()
            if prepared is not None:
                prepared.discard(store)
        raise
    return ds.checkout_version(committed.version)


__all__ = ["widened_schema", "build_merge", "commit_with_new_columns", "write_with_new_columns"]
