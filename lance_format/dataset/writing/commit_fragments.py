"""Committing fragments that other processes wrote, and the bookkeeping around it.

Phase two of a distributed write (phase one: :mod:`lance_format.dataset.writing.fragment_sink`): one
process turns the fragment descriptions its workers returned into ONE transaction (Append,
Overwrite, or an Update that also carries new deletion files) and runs the engine's commit
loop (:func:`lance_format.table.commit.commit_transaction`), so concurrent writers go through
the same conflict rules as any other commit.

Also here:

* idempotency: a write may carry ``IDEMPOTENCY_KEY`` in its transaction properties; a re-run
  finds the earlier version by that key (:func:`find_committed_version`) and skips the work;
* cleanup: :func:`discard_uncommitted` removes the data and deletion files of a write that
  did not commit, and only those that no manifest references (a commit may have landed before
  an error was reported);
* deletion vectors for an Update: :func:`delete_rows` writes a fragment's new deletion file
  with a name derived from the write id, so a failed write's deletion files can be found.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from lance_format.dataset.writing.fragment_sink import STAGED_MARK
from lance_format.errors import InvalidInputError, LanceError
from lance_format.io import ObjectStore, object_store_for
from lance_format.proto import table_pb2, transaction_pb2
from lance_format.schema import LanceSchema
from lance_format.table.commit import CommittedVersion, commit_transaction
from lance_format.table.deletion import (
    BITMAP_THRESHOLD,
    DELETIONS_DIR,
    deletion_file_path,
    encode_arrow_deletions,
    encode_bitmap_deletions,
    read_deletion_file,
)
from lance_format.table.manifest import ManifestFile, read_manifest
from lance_format.table.naming import ManifestNaming, list_versions
from lance_format.table.transaction import (
    IDEMPOTENCY_KEY,
    BuildOptions,
    OperationKind,
    load_transaction,
    new_transaction,
    operation_name,
)

WRITE_ID_KEY = "lance_format.write_id"
DEFAULT_IDEMPOTENCY_WINDOW = 256  # how many recent versions a re-run searches for its key

OPERATIONS = (OperationKind.APPEND.value, OperationKind.OVERWRITE.value, OperationKind.UPDATE.value)


@dataclass(frozen=True)
class PriorCommit:
    """A version committed earlier by a write with the same idempotency key."""

    version: int
    transaction: transaction_pb2.Transaction

    @property
    def new_fragments(self) -> list[table_pb2.DataFragment]:
        op = operation_name(self.transaction)
        if op == OperationKind.APPEND:
            return list(self.transaction.append.fragments)
        if op == OperationKind.OVERWRITE:
            return list(self.transaction.overwrite.fragments)
        if op == OperationKind.UPDATE:
            return list(self.transaction.update.new_fragments)
        return []


def find_committed_version(
    uri: str | os.PathLike[str] | ObjectStore,
    key: str,
    *,
    window: int = DEFAULT_IDEMPOTENCY_WINDOW,
    property_name: str = IDEMPOTENCY_KEY,
) -> PriorCommit | None:
    """The newest of the last ``window`` versions whose transaction has ``property_name == key``."""
    store = object_store_for(uri)
    listing = list_versions(store)
    if listing.latest is None:
        return None
    for version in sorted(listing.versions, reverse=True)[: max(int(window), 0)]:
        try:
            txn = load_transaction(store, read_manifest(store, listing.versions[version]))
        except LanceError:
            continue  # an unreadable old transaction cannot hold our key
        if txn is not None and txn.transaction_properties.get(property_name) == key:
            return PriorCommit(version, txn)
    return None


def deletion_file_id(write_id: str, fragment_id: int) -> int:
    """The DeletionFile.id a write uses for a fragment: unique per (write, fragment), findable."""
    digest = hashlib.blake2b(f"{write_id}:{fragment_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") or 1


def delete_rows(
    store: ObjectStore,
    fragment: table_pb2.DataFragment,
    offsets: np.ndarray,
    *,
    read_version: int,
    write_id: str,
    deletion_store: ObjectStore | None = None,
) -> tuple[table_pb2.DataFragment | None, int]:
    """Mark physical ``offsets`` of ``fragment`` deleted, on top of its existing deletions
    (read from ``deletion_store`` when they live in another base path).

    Returns ``(updated fragment, newly deleted count)``; the fragment is ``None`` when no live
    row remains (the commit removes it). Nothing is written when nothing new is deleted.
    """
    new = np.unique(np.asarray(offsets, dtype=np.int64))
    if new.size and (new[0] < 0 or new[-1] >= fragment.physical_rows):
        raise InvalidInputError(
            f"row offsets outside fragment {fragment.id} ({fragment.physical_rows} rows)", table=store.uri
        )
    old = (
        read_deletion_file(deletion_store or store, fragment.id, fragment.deletion_file)
        if fragment.HasField("deletion_file")
        else np.empty(0, np.uint32)
    )
    union = np.union1d(old.astype(np.int64), new)
    added = int(union.size - old.size)
    if added == 0:
        return fragment, 0
    if union.size >= fragment.physical_rows:
        return None, added
    bitmap = union.size > BITMAP_THRESHOLD
    pb = table_pb2.DeletionFile(
        file_type=table_pb2.DeletionFile.BITMAP if bitmap else table_pb2.DeletionFile.ARROW_ARRAY,
        read_version=read_version,
        id=deletion_file_id(write_id, fragment.id),
        num_deleted_rows=int(union.size),
    )
    data = encode_bitmap_deletions(union) if bitmap else encode_arrow_deletions(union)
    store.write_bytes(deletion_file_path(fragment.id, pb), data)
    updated = table_pb2.DataFragment()
    updated.CopyFrom(fragment)
    updated.deletion_file.CopyFrom(pb)
    return updated, added


def _referenced(store: ObjectStore, after_version: int) -> set[str]:
    """Table-relative data and deletion file paths of every version newer than ``after_version``."""
    listing = list_versions(store)
    paths: set[str] = set()
    for version, path in listing.versions.items():
        if version <= after_version:
            continue
        for fragment in read_manifest(store, path).manifest.fragments:
            paths.update(f"data/{f.path}" for f in fragment.files)
            if fragment.HasField("deletion_file"):
                paths.add(deletion_file_path(fragment.id, fragment.deletion_file))
    return paths


def discard_uncommitted(
    uri: str | os.PathLike[str] | ObjectStore,
    prefix: str,
    *,
    read_version: int,
    write_id: str | None = None,
    fragment_ids: Iterable[int] = (),
) -> list[str]:
    """Remove a write's files that no manifest after ``read_version`` references.

    Data files (and the write's staged outputs, :func:`fragment_sink.staged_file_name`) are
    found by ``prefix`` (see :func:`fragment_sink.write_prefix`); deletion files
    by the ids :func:`deletion_file_id` derives for ``write_id`` and ``fragment_ids``. Files are
    listed before manifests are read, so a file of a commit that lands meanwhile is kept.
    Returns the removed paths.
    """
    store = object_store_for(uri)
    names = (prefix, STAGED_MARK + prefix)
    candidates = [f"data/{info.base_name}" for info in store.list_dir("data") if info.base_name.startswith(names)]
    if write_id is not None:
        wanted = {f"{fid}-{read_version}-{deletion_file_id(write_id, fid)}" for fid in fragment_ids}
        for info in store.list_dir(DELETIONS_DIR):
            if info.base_name.rsplit(".", 1)[0] in wanted:
                candidates.append(f"{DELETIONS_DIR}/{info.base_name}")
    if not candidates:
        return []
    keep = _referenced(store, read_version)
    removed = []
    for path in candidates:
        if path not in keep:
            try:
                store.delete(path)
                removed.append(path)
            except OSError:
                pass  # best effort: an orphan is harmless and cleanup_old_versions removes it
    return removed


def build_transaction(
    operation: str,
    *,
    read_version: int,
    new_fragments: Sequence[table_pb2.DataFragment] = (),
    schema: LanceSchema | None = None,
    removed_fragment_ids: Iterable[int] = (),
    updated_fragments: Sequence[table_pb2.DataFragment] = (),
    properties: Mapping[str, str] | None = None,
    commit_message: str | None = None,
) -> transaction_pb2.Transaction:
    """An Append, Overwrite (needs ``schema``) or Update transaction over given fragments."""
    if operation not in OPERATIONS:
        raise InvalidInputError(f"operation must be one of {OPERATIONS}, got {operation!r}")
    txn = new_transaction(read_version, properties=properties, commit_message=commit_message)
    if operation == OperationKind.APPEND:
        txn.append.fragments.extend(new_fragments)
    elif operation == OperationKind.OVERWRITE:
        if schema is None:
            raise InvalidInputError("an overwrite needs the new table schema")
        body = txn.overwrite
        body.fragments.extend(new_fragments)
        body.schema.extend(schema.to_protos())
        body.schema_metadata.update(schema.metadata)
    else:
        if schema is None:
            raise InvalidInputError("an update needs the table schema")
        body = txn.update
        body.removed_fragment_ids.extend(sorted(set(int(i) for i in removed_fragment_ids)))
        body.updated_fragments.extend(updated_fragments)
        body.new_fragments.extend(new_fragments)
        # Like pylance's merge_insert: whole rows are rewritten, update_mode stays REWRITE_ROWS.
        body.fields_for_preserving_frag_bitmap.extend(schema.field_ids())
    return txn


def commit_fragments(
    uri: str | os.PathLike[str] | ObjectStore,
    operation: str,
    *,
    read_version: int,
    new_fragments: Sequence[table_pb2.DataFragment] = (),
    schema: LanceSchema | None = None,
    removed_fragment_ids: Iterable[int] = (),
    updated_fragments: Sequence[table_pb2.DataFragment] = (),
    affected_rows: Mapping[int, np.ndarray] | None = None,
    properties: Mapping[str, str] | None = None,
    commit_message: str | None = None,
    enable_stable_row_ids: bool = False,
    storage_version: str | None = None,
    enable_v2_manifest_paths: bool = True,
    read_manifest_file: ManifestFile | None = None,
) -> CommittedVersion:
    """Commit fragments written elsewhere as one new version (see :func:`build_transaction`).

    ``affected_rows`` (fragment id -> offsets this update deleted) lets the commit loop rebase
    the update over a concurrent delete/update of the same fragments instead of refusing it.
    """
    store = object_store_for(uri)
    txn = build_transaction(
        operation, read_version=read_version, new_fragments=new_fragments, schema=schema,
        removed_fragment_ids=removed_fragment_ids, updated_fragments=updated_fragments,
        properties=properties, commit_message=commit_message,
    )
    options = BuildOptions(enable_stable_row_ids=enable_stable_row_ids, data_storage_version=storage_version)
    naming = ManifestNaming.V2 if enable_v2_manifest_paths else ManifestNaming.V1
    return commit_transaction(
        store, txn, options=options, new_table_naming=naming,
        affected_rows=affected_rows if operation == OperationKind.UPDATE else None,
        read_manifest_file=read_manifest_file,
    )


__all__ = [
    "IDEMPOTENCY_KEY", "WRITE_ID_KEY", "DEFAULT_IDEMPOTENCY_WINDOW", "PriorCommit", "find_committed_version",
    "deletion_file_id", "delete_rows", "discard_uncommitted", "build_transaction", "commit_fragments",
]
