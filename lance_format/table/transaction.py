"""Transactions: what a commit does, and the manifest it builds (Lance's ``Transaction``).

A transaction records the version it was built on (``read_version``) and one operation; it is
stored in ``_transactions/`` and inline in its manifest. The commit loop
(:mod:`lance_format.table.commit`) uses the transactions of versions committed concurrently to
decide whether a commit can be rebased or must be refused, then builds the next manifest from
the latest one (Lance's ``Transaction::build_manifest``), the way pylance 14 does:

* fragment ids of new fragments are assigned at commit (``max_fragment_id + 1, ...``) and the
  final fragment list is sorted by id (so compacted fragments move to the end);
* with stable row ids, row ids and row-version sequences are completed (:mod:`lineage`);
* data files left without any live field (Project, Merge) or with only tombstoned fields (-2)
  are dropped; feature flags are recomputed; config, table metadata and ``next_row_id`` carry
  over; ``ReserveFragments`` bumps ``max_fragment_id``; ``Restore`` republishes an old
  manifest under the new version number (keeping the id high-water marks).
* the index section is carried forward with pylance's edits (:mod:`index_meta`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from google.protobuf.message import DecodeError

from lance_format.errors import CommitConflictError, CorruptFileError, InvalidInputError, UnsupportedFeatureError
from lance_format.io import ObjectStore
from lance_format.proto import table_pb2, transaction_pb2
from lance_format.table import feature_flags, index_meta, lineage
from lance_format.table.legacy_manifest import repair_legacy_storage_version
from lance_format.table.manifest import ManifestFile

TRANSACTIONS_DIR = "_transactions"
COMMIT_MESSAGE_KEY = "__lance_commit_message"
# A transaction property naming one logical write: the commit loop never publishes two
# transactions with the same key on top of each other (see table.commit).
IDEMPOTENCY_KEY = "idempotency_key"


class OperationKind(StrEnum):
    """The operations a transaction can carry: the field names of ``Transaction.operation`` (the
    protobuf oneof), which is what :func:`operation_name` returns; members equal those strings."""

    APPEND = "append"
    DELETE = "delete"
    OVERWRITE = "overwrite"
    CREATE_INDEX = "create_index"
    REWRITE = "rewrite"
    MERGE = "merge"
    RESTORE = "restore"
    RESERVE_FRAGMENTS = "reserve_fragments"
    UPDATE = "update"
    PROJECT = "project"
    UPDATE_CONFIG = "update_config"
    DATA_REPLACEMENT = "data_replacement"
    UPDATE_MEM_WAL_STATE = "update_mem_wal_state"
    CLONE = "clone"
    UPDATE_BASES = "update_bases"
    DATA_OVERLAY = "data_overlay"


def new_transaction(
    read_version: int,
    *,
    properties: Mapping[str, str] | None = None,
    commit_message: str | None = None,
) -> transaction_pb2.Transaction:
    """A transaction with a fresh uuid; the caller sets exactly one operation on it."""
    txn = transaction_pb2.Transaction(read_version=read_version, uuid=str(uuid.uuid4()))
    for key, value in (properties or {}).items():
        txn.transaction_properties[str(key)] = str(value)
    if commit_message is not None:
        txn.transaction_properties[COMMIT_MESSAGE_KEY] = commit_message
    return txn


def operation_name(txn: transaction_pb2.Transaction) -> str | None:
    """The transaction's operation (an :class:`OperationKind` value), or None if it has none."""
    return txn.WhichOneof("operation")


def transaction_file_name(txn: transaction_pb2.Transaction) -> str:
    return f"{txn.read_version}-{txn.uuid}.txn"


def load_transaction(store: ObjectStore, manifest_file: ManifestFile) -> transaction_pb2.Transaction | None:
    """The transaction that produced a version: inline if present, else its ``.txn`` file."""
    if manifest_file.transaction is not None:
        return manifest_file.transaction
    name = manifest_file.manifest.transaction_file
    if not name:
        return None
    path = f"{TRANSACTIONS_DIR}/{name}"
    if not store.exists(path):
        return None
    txn = transaction_pb2.Transaction()
    try:
        txn.ParseFromString(store.read_bytes(path))
    except DecodeError as exc:
        raise CorruptFileError(f"cannot decode transaction: {exc}", table=store.uri, path=path) from exc
    return txn


# -- the manifest a transaction builds ---------------------------------------------------------
WRITER_LIBRARY = "lance-assets"
WRITER_VERSION = "0.1.0"
TOMBSTONE_FIELD_ID = -2


@dataclass(frozen=True)
class BuildOptions:
    """Settings a commit applies when it creates or overwrites a table."""

    enable_stable_row_ids: bool = False
    data_storage_version: str | None = None  # None: keep the table's (or "2.0" for new tables)
    # Completes the built manifest (publishing a branch of several commits: their lineage, config
    # and row-id high-water mark, which no single operation carries); runs on every attempt.
    after_build: Callable[[table_pb2.Manifest], None] | None = None
    # the new version's number when it is not the next one (a detached commit's random number)
    version: int | None = None


@dataclass
class BuiltVersion:
    """The manifest of the next version and the index section that goes with it."""

    manifest: table_pb2.Manifest
    index_section: table_pb2.IndexSection | None


def has_stable_row_ids(manifest: table_pb2.Manifest) -> bool:
    return bool(manifest.reader_feature_flags & feature_flags.STABLE_ROW_IDS)


def _copies(fragments) -> list[table_pb2.DataFragment]:
    out = []
    for original in fragments:
        copy = table_pb2.DataFragment()
        copy.CopyFrom(original)
        out.append(copy)
    return out


def _assign_ids(fragments: list[table_pb2.DataFragment], first_id: int) -> int:
    next_id = first_id
    for fragment in fragments:
        if fragment.id == 0:
            fragment.id = next_id
            next_id += 1
    return next_id


def _replace_by_id(
    existing: list[table_pb2.DataFragment], removed: set[int], updated: list[table_pb2.DataFragment]
) -> list[table_pb2.DataFragment]:
    by_id = {f.id: f for f in updated}
    return [by_id.get(f.id, f) for f in existing if f.id not in removed]


def _drop_dead_files(fragments: list[table_pb2.DataFragment], field_ids: set[int] | None) -> None:
    """Remove data files whose fields are all tombstoned, or (``field_ids``) all out of the schema."""
    for fragment in fragments:
        keep = [
            f for f in fragment.files
            if any(i != TOMBSTONE_FIELD_ID and (field_ids is None or i in field_ids) for i in f.fields)
        ]
        if len(keep) != len(fragment.files):
            kept = [table_pb2.DataFile.FromString(f.SerializeToString()) for f in keep]
            del fragment.files[:]
            fragment.files.extend(kept)


def _set_schema(manifest: table_pb2.Manifest, fields, metadata=None) -> None:
    del manifest.fields[:]
    manifest.fields.extend(fields)
    if metadata is not None and len(metadata) > 0:
        manifest.schema_metadata.clear()
        manifest.schema_metadata.update(metadata)


def _apply_rewrite(
    fragments: list[table_pb2.DataFragment],
    groups: list[transaction_pb2.Transaction.Rewrite.RewriteGroup],
    first_id: int,
    version: int,
) -> list[table_pb2.DataFragment]:
    next_id = first_id
    for group in groups:
        old_ids = [f.id for f in group.old_fragments]
        positions = {f.id: i for i, f in enumerate(fragments)}
        missing = [i for i in old_ids if i not in positions]
        if missing:
            raise CommitConflictError(
                f"the table no longer has fragment(s) {missing} that the rewrite replaces", version=version
            )
        new = _copies(group.new_fragments)
        next_id = _assign_ids(new, next_id)
        start = positions[old_ids[0]]
        if [f.id for f in fragments[start : start + len(old_ids)]] == old_ids:
            fragments[start : start + len(old_ids)] = new
        else:
            gone = set(old_ids)
            fragments = [f for f in fragments if f.id not in gone] + new
    return fragments


def _apply_update_map(target, update_map: transaction_pb2.Transaction.UpdateMap, encode=None) -> None:
    convert = encode or (lambda v: v)
    if update_map.replace:
        target.clear()
    for entry in update_map.update_entries:
        if entry.HasField("value"):
            target[entry.key] = convert(entry.value)
        elif not update_map.replace:
            target.pop(entry.key, None)


def _apply_update_config(manifest: table_pb2.Manifest, body: transaction_pb2.Transaction.UpdateConfig) -> None:
    # Deprecated forms first (older writers), then the UpdateMap forms pylance 14 writes.
    manifest.config.update(body.upsert_values)
    for key in body.delete_keys:
        manifest.config.pop(key, None)
    if len(body.schema_metadata):
        manifest.schema_metadata.clear()
        manifest.schema_metadata.update({k: v.encode() for k, v in body.schema_metadata.items()})
    fields_by_id = {f.id: f for f in manifest.fields}
    for field_id, update in body.field_metadata.items():
        if field_id in fields_by_id:
            fields_by_id[field_id].metadata.clear()
            fields_by_id[field_id].metadata.update({k: v.encode() for k, v in update.metadata.items()})
    if body.HasField("config_updates"):
        _apply_update_map(manifest.config, body.config_updates)
    if body.HasField("table_metadata_updates"):
        _apply_update_map(manifest.table_metadata, body.table_metadata_updates)
    if body.HasField("schema_metadata_updates"):
        _apply_update_map(manifest.schema_metadata, body.schema_metadata_updates, str.encode)
    for field_id, update in body.field_metadata_updates.items():
        if field_id not in fields_by_id:
            raise InvalidInputError(f"field with id {field_id} does not exist", version=manifest.version)
        _apply_update_map(fields_by_id[field_id].metadata, update, str.encode)


def _stable_row_ids(previous: table_pb2.Manifest | None, op: str | None, options: BuildOptions) -> bool:
    if previous is not None and has_stable_row_ids(previous):
        return True
    if previous is None or op == OperationKind.OVERWRITE:
        if previous is not None and options.enable_stable_row_ids:
            raise UnsupportedFeatureError("cannot enable stable row ids on an existing table")
        return options.enable_stable_row_ids
    return False


@dataclass
class _Build:
    """The next version while an operation is applied to it."""

    txn: transaction_pb2.Transaction
    options: BuildOptions
    store: Any  # reads external row-id sequences (an Update that preserves row lineage)
    previous: table_pb2.Manifest | None
    manifest: table_pb2.Manifest  # starts as a copy of the previous (or restored) manifest
    version: int
    stable: bool
    max_fragment_id: int | None  # the previous version's high-water mark
    first_id: int  # the id the first new fragment gets
    next_row_id: int
    existing: list[table_pb2.DataFragment]  # copies of the previous version's fragments
    fragments: list[table_pb2.DataFragment]  # the new version's fragments (before sorting)
    indices: table_pb2.IndexSection | None
    reserved_fragments: int | None = None  # ReserveFragments: ids to reserve past the high-water mark


def _overwrite(b: _Build) -> None:
    body = b.txn.overwrite
    _set_schema(b.manifest, body.schema)
    b.manifest.schema_metadata.clear()
    b.manifest.schema_metadata.update(body.schema_metadata)
    new = _copies(body.fragments)
    _assign_ids(new, b.first_id)
    if b.stable:
        b.next_row_id = lineage.assign_row_ids(new, b.next_row_id)
        lineage.fill_new_fragment_versions(new, b.version)
    b.fragments = new
    b.manifest.config.update(body.config_upsert_values)
    b.manifest.base_paths.extend(body.initial_bases)  # a new table's bases (pylance: create mode only)
    previous_storage = b.previous.data_format.version if b.previous is not None else "2.0"
    b.manifest.data_format.file_format = "lance"
    b.manifest.data_format.version = b.options.data_storage_version or previous_storage
    b.indices = None


def _append(b: _Build) -> None:
    new = _copies(b.txn.append.fragments)
    _assign_ids(new, b.first_id)
    if b.stable:
        b.next_row_id = lineage.assign_row_ids(new, b.next_row_id)
        lineage.fill_new_fragment_versions(new, b.version)
    b.fragments = b.existing + new


def _delete(b: _Build) -> None:
    body = b.txn.delete
    b.fragments = _replace_by_id(b.existing, set(body.deleted_fragment_ids), list(body.updated_fragments))


def _update(b: _Build) -> None:
    body = b.txn.update
    kept = _replace_by_id(b.existing, set(body.removed_fragment_ids), list(body.updated_fragments))
    new = _copies(body.new_fragments)
    _assign_ids(new, b.first_id)
    # new fragments holding only moved rows (each already has its row id): pylance's "pure" rewrites
    pure = [f.id for f in new if b.stable and f.physical_rows and lineage.carries_all_row_ids(b.store, f)]
    b.indices = index_meta.apply_update(b.indices, body, pure, b.stable)
    if b.stable:
        b.next_row_id = lineage.assign_row_ids(new, b.next_row_id)
        # only an overwrite applies without a previous version (checked in _start)
        lineage.fill_update_versions(b.store, new, b.previous.fragments, b.version)  # type: ignore[union-attr]
    b.fragments = kept + new


def _merge(b: _Build) -> None:
    body = b.txn.merge
    _set_schema(b.manifest, body.schema, body.schema_metadata)
    fragments = _copies(body.fragments)
    before = {f.id: f for f in b.existing}
    # Fragments new to the table (a write that adds columns) carry final ids; ids at or
    # below the high-water mark may have been reserved meanwhile, so refuse to reuse them.
    fresh = [f for f in fragments if f.id not in before]
    if fresh and b.max_fragment_id is not None and min(f.id for f in fresh) <= b.max_fragment_id:
        raise CommitConflictError(
            f"the merge's new fragment ids {sorted(f.id for f in fresh)} are no longer free", version=b.version
        )
    if b.stable:
        # New fragments get row ids and version sequences exactly as an Append's.
        b.next_row_id = lineage.assign_row_ids(fresh, b.next_row_id)
        lineage.fill_new_fragment_versions(fresh, b.version)
        lineage.mark_changed_fragments_updated([f for f in fragments if f.id in before], before, b.version)
    schema_ids = {f.id for f in b.manifest.fields}
    _drop_dead_files(fragments, schema_ids)
    b.fragments = fragments
    b.indices = index_meta.retain_relevant(b.indices, schema_ids)


def _project(b: _Build) -> None:
    _set_schema(b.manifest, b.txn.project.schema)
    schema_ids = {f.id for f in b.manifest.fields}
    _drop_dead_files(b.fragments, schema_ids)
    b.indices = index_meta.retain_relevant(b.indices, schema_ids)


def _rewrite(b: _Build) -> None:
    groups = list(b.txn.rewrite.groups)
    if not groups and len(b.txn.rewrite.old_fragments):
        raise UnsupportedFeatureError("legacy ungrouped Rewrite transactions are not supported")
    b.fragments = _apply_rewrite(b.existing, groups, b.first_id, b.version)
    b.indices = index_meta.apply_rewrite(b.indices, b.txn.rewrite, has_stable_row_ids(b.manifest))


def _restore(b: _Build) -> None:
    b.fragments = _copies(b.manifest.fragments)  # the restored version's


def _data_replacement(b: _Build) -> None:
    """Swap a fragment's data file for a new one holding the same fields; a file replacing only
    some fields of existing files is added, and those files' copies of the fields tombstoned
    (pylance's ``DataReplacement``)."""
    by_id = {f.id: f for f in b.existing}
    for group in b.txn.data_replacement.replacements:
        fragment = by_id.get(group.fragment_id)
        if fragment is None:
            raise CommitConflictError(f"fragment {group.fragment_id} of a data replacement no longer exists",
                                      version=b.version)
        new_fields = set(group.new_file.fields)
        same = [f for f in fragment.files if set(f.fields) == new_fields]
        if same:
            same[0].CopyFrom(group.new_file)
            continue
        for data_file in fragment.files:
            data_file.fields[:] = [TOMBSTONE_FIELD_ID if i in new_fields else i for i in data_file.fields]
        fragment.files.add().CopyFrom(group.new_file)
    b.fragments = b.existing


def _data_overlay(b: _Build) -> None:
    """Append overlay files to fragments' overlays, stamped with the new version (pylance's
    ``DataOverlay``); overlays committed concurrently stay (they come with the fragments)."""
    by_id = {f.id: f for f in b.existing}
    for group in b.txn.data_overlay.groups:
        fragment = by_id.get(group.fragment_id)
        if fragment is None:
            raise InvalidInputError(f"fragment {group.fragment_id} of a data overlay does not exist",
                                    version=b.version)
        for overlay in group.overlays:
            added = fragment.overlays.add()
            added.CopyFrom(overlay)
            added.committed_version = b.version
    b.fragments = b.existing


def _reserve_fragments(b: _Build) -> None:
    b.reserved_fragments = b.txn.reserve_fragments.num_fragments


def _create_index(b: _Build) -> None:
    """Publish new index segments and drop removed ones (by uuid); a new segment whose uuid is
    already listed replaces it, as in pylance. Fragments and schema are unchanged."""
    b.indices = index_meta.apply_create_index(b.indices, b.txn.create_index)


def _update_config(b: _Build) -> None:
    _apply_update_config(b.manifest, b.txn.update_config)


def _update_bases(b: _Build) -> None:
    """Register new base paths; unset ids (0) get the smallest free ones from 1, like pylance."""
    used = {base.id for base in b.manifest.base_paths} | {base.id for base in b.txn.update_bases.new_bases}
    next_id = 1
    for new in b.txn.update_bases.new_bases:
        for old in b.manifest.base_paths:
            same_name = new.HasField("name") and old.HasField("name") and new.name == old.name
            if same_name or new.path == old.path or (new.id and new.id == old.id):
                raise InvalidInputError(
                    f"base path {new.path!r} (name {new.name or None!r}) conflicts with the registered base "
                    f"{old.path!r} (name {old.name or None!r}, id {old.id})", version=b.version)
        added = b.manifest.base_paths.add()
        added.CopyFrom(new)
        if not added.id:
            while next_id in used:
                next_id += 1
            added.id = next_id
            used.add(next_id)


# The operations this engine commits; the others are refused.
_APPLY = {
    OperationKind.OVERWRITE: _overwrite,
    OperationKind.APPEND: _append,
    OperationKind.DELETE: _delete,
    OperationKind.UPDATE: _update,
    OperationKind.MERGE: _merge,
    OperationKind.PROJECT: _project,
    OperationKind.REWRITE: _rewrite,
    OperationKind.RESTORE: _restore,
    OperationKind.RESERVE_FRAGMENTS: _reserve_fragments,
    OperationKind.DATA_REPLACEMENT: _data_replacement,
    OperationKind.UPDATE_CONFIG: _update_config,
    OperationKind.UPDATE_BASES: _update_bases,
    OperationKind.DATA_OVERLAY: _data_overlay,
    OperationKind.CREATE_INDEX: _create_index,
}


def _start(
    previous_file: ManifestFile | None,
    txn: transaction_pb2.Transaction,
    options: BuildOptions,
    store: Any,
    restored: ManifestFile | None,
) -> _Build:
    """The next version as a copy of the previous one (or of the restored one, for a Restore)."""
    op = operation_name(txn)
    previous = previous_file.manifest if previous_file is not None else None
    indices = previous_file.index_section if previous_file is not None else None
    version = previous.version + 1 if previous is not None else 1
    if options.version is not None:
        version = options.version
    if previous is None and op != OperationKind.OVERWRITE:
        raise InvalidInputError(f"cannot apply a {op} operation to a table that does not exist")
    stable = _stable_row_ids(previous, op, options)

    manifest = table_pb2.Manifest()
    if op == OperationKind.RESTORE:
        if restored is None:
            raise InvalidInputError("a restore needs the manifest of the version it restores")
        manifest.CopyFrom(restored.manifest)
        indices = restored.index_section
        stable = has_stable_row_ids(restored.manifest)
    elif previous is not None:
        manifest.CopyFrom(previous)  # keeps config, table metadata, next_row_id, unknown fields
    for name in ("index_section", "transaction_section", "transaction_section_deprecated", "tag"):
        manifest.ClearField(name)

    # High-water marks never go back (a restore keeps the latest ones so ids are not reused).
    # Manifests of old releases lack max_fragment_id: official Lance then uses the highest fragment id.
    max_fragment_id = None if previous is None else (
        previous.max_fragment_id if previous.HasField("max_fragment_id")
        else max((f.id for f in previous.fragments), default=None))
    existing = _copies(previous.fragments) if previous is not None else []
    return _Build(
        txn=txn, options=options, store=store, previous=previous, manifest=manifest, version=version, stable=stable,
        max_fragment_id=max_fragment_id,
        first_id=max_fragment_id + 1 if max_fragment_id is not None else 0,
        next_row_id=max(previous.next_row_id if previous is not None else 0, manifest.next_row_id),
        existing=existing, fragments=existing, indices=indices,
    )


def _finish(b: _Build) -> BuiltVersion:
    """Fragments, version, timestamp, writer, high-water marks and feature flags of the new manifest."""
    manifest, txn = b.manifest, b.txn
    b.fragments.sort(key=lambda f: f.id)
    _drop_dead_files(b.fragments, None)
    del manifest.fragments[:]
    manifest.fragments.extend(b.fragments)

    manifest.version = b.version
    now = time.time_ns()
    manifest.timestamp.seconds = now // 1_000_000_000
    manifest.timestamp.nanos = now % 1_000_000_000
    manifest.writer_version.library = WRITER_LIBRARY
    manifest.writer_version.version = WRITER_VERSION
    manifest.transaction_file = transaction_file_name(txn)
    if txn.tag:
        manifest.tag = txn.tag
    highest = max((f.id for f in manifest.fragments), default=None)
    candidates = [x for x in (b.max_fragment_id, highest) if x is not None]
    if candidates:
        manifest.max_fragment_id = max(candidates)
    else:
        manifest.ClearField("max_fragment_id")
    if b.reserved_fragments is not None:
        manifest.max_fragment_id = (b.max_fragment_id or 0) + b.reserved_fragments
    if b.stable:
        manifest.next_row_id = b.next_row_id
    else:
        manifest.ClearField("next_row_id")
    repair_legacy_storage_version(manifest)
    reader, writer = feature_flags.compute_flags(manifest, stable_row_ids=b.stable)
    manifest.reader_feature_flags = reader
    manifest.writer_feature_flags = writer
    indices = b.indices
    return BuiltVersion(manifest, indices if indices is not None and len(indices.indices) else None)


def build_version(
    previous_file: ManifestFile | None,
    txn: transaction_pb2.Transaction,
    options: BuildOptions = BuildOptions(),
    *,
    store: Any = None,
    restored: ManifestFile | None = None,
) -> BuiltVersion:
    """The manifest (and index section) of the version after ``previous_file`` applying ``txn``.

    ``restored`` is the manifest file of the version a ``Restore`` brings back; ``store`` is
    needed to read external row-id sequences when an ``Update`` preserves row lineage.
    """
    build = _start(previous_file, txn, options, store, restored)
    op = operation_name(txn)
    apply = _APPLY[OperationKind(op)] if op in _APPLY else None
    if apply is None:
        raise UnsupportedFeatureError(f"operation {op!r} is not supported by this engine's commits")
    apply(build)
    built = _finish(build)
    if options.after_build is not None:
        options.after_build(built.manifest)
    return built


def build_manifest(
    previous: table_pb2.Manifest | None,
    txn: transaction_pb2.Transaction,
    options: BuildOptions = BuildOptions(),
) -> table_pb2.Manifest:
    """The manifest of version ``previous.version + 1`` (or 1) after applying ``txn``."""
    previous_file = ManifestFile(previous, None, None, 0) if previous is not None else None
    return build_version(previous_file, txn, options).manifest


def keeps_indices(txn: transaction_pb2.Transaction) -> bool:
    """Whether the previous version's index section carries over to the new version."""
    return operation_name(txn) not in (OperationKind.OVERWRITE, OperationKind.RESTORE)


__all__ = [
    "TRANSACTIONS_DIR", "COMMIT_MESSAGE_KEY", "IDEMPOTENCY_KEY", "OperationKind", "new_transaction", "operation_name",
    "transaction_file_name", "load_transaction",
    "BuildOptions", "BuiltVersion", "build_version", "build_manifest", "has_stable_row_ids", "keeps_indices"]
