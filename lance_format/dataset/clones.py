"""Shallow and deep clones of one table version, as official Lance writes them.

A *shallow* clone (also how a branch starts) is one manifest in the target's ``_versions/``,
numbered like the source version, whose files still live in the source: the source root is
registered as a base path and every file without a base gets its id. Its transaction is a
``Clone{is_shallow: true, ref_name, ref_version, ref_path, branch_name}``.

A *deep* clone copies the version's data, deletion and index files into the target and commits
a manifest without base paths (``Clone{is_shallow: false, ...}``).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from typing import TYPE_CHECKING, Any

from lance_format.errors import DatasetAlreadyExistsError
from lance_format.io import ObjectStore, object_store_for
from lance_format.proto import table_pb2, transaction_pb2
from lance_format.table import feature_flags
from lance_format.table.base_paths import (
    INDICES_DIR,
    add_base,
    base_uri,
    contained_path,
    rebase_files,
    rebase_indices,
)
from lance_format.table.commit import HINT_PATH, publish_manifest
from lance_format.table.deletion import deletion_file_path
from lance_format.table.manifest import encode_manifest
from lance_format.table.naming import ManifestNaming, list_versions, manifest_path
from lance_format.table.refs import Reference, manifest_branch, resolve_reference
from lance_format.table.transaction import (
    TRANSACTIONS_DIR,
    WRITER_LIBRARY,
    WRITER_VERSION,
    has_stable_row_ids,
    transaction_file_name,
)

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset


def source_version(ds: LanceDataset, reference: Reference) -> LanceDataset:
    """The version ``reference`` names (None: the version ``ds`` is at)."""

    if reference is None:
        return ds
    store, version = resolve_reference(ds.object_store, reference)
    return type(ds)(store, version)


def _clone_transaction(source: LanceDataset, *, shallow: bool, branch: str | None) -> transaction_pb2.Transaction:
    txn = transaction_pb2.Transaction(read_version=source.version, uuid=str(uuid.uuid4()))
    txn.clone.is_shallow = shallow
    source_branch = manifest_branch(source.manifest)
    if source_branch is not None:
        txn.clone.ref_name = source_branch
    txn.clone.ref_version = source.version
    txn.clone.ref_path = base_uri(source.object_store)
    if branch is not None:
        txn.clone.branch_name = branch
    return txn


def _publish(target: ObjectStore, manifest: table_pb2.Manifest, txn: transaction_pb2.Transaction,
             index_section: table_pb2.IndexSection | None) -> int:
    """Write the transaction and the manifest of the clone's first version; its manifest size."""
    now = time.time_ns()
    manifest.timestamp.seconds = now // 1_000_000_000
    manifest.timestamp.nanos = now % 1_000_000_000
    manifest.writer_version.library = WRITER_LIBRARY
    manifest.writer_version.version = WRITER_VERSION
    manifest.ClearField("tag")
    manifest.transaction_file = transaction_file_name(txn)
    reader, writer = feature_flags.compute_flags(manifest, stable_row_ids=has_stable_row_ids(manifest))
    manifest.reader_feature_flags = reader
    manifest.writer_feature_flags = writer
    target.write_bytes(f"{TRANSACTIONS_DIR}/{manifest.transaction_file}", txn.SerializeToString())
    data = encode_manifest(manifest, txn, index_section)
    if not publish_manifest(target, manifest.version, manifest_path(manifest.version, ManifestNaming.V2), data):
        raise DatasetAlreadyExistsError("a table already exists at the clone's target", table=target.uri)
    if target.writes_version_hint:  # like commits: the advisory hint only on local file systems
        target.replace_bytes(HINT_PATH, json.dumps({"version": manifest.version}, separators=(",", ":")).encode())
    return len(data)


def _check_empty(target: ObjectStore) -> None:
    if list_versions(target).latest is not None:
        raise DatasetAlreadyExistsError("cannot clone into an existing table", table=target.uri)


def write_shallow_copy(source: LanceDataset, target: ObjectStore, *, branch: str | None = None) -> int:
    """Make ``target``'s first version a shallow copy of ``source``; returns its manifest size."""
    _check_empty(target)
    manifest = table_pb2.Manifest()
    manifest.CopyFrom(source.manifest)
    index_section = None
    if source.manifest_file.index_section is not None:
        index_section = table_pb2.IndexSection()
        index_section.CopyFrom(source.manifest_file.index_section)
    base_id = add_base(manifest, base_uri(source.object_store), manifest_branch(source.manifest))
    rebase_files(manifest, base_id)
    rebase_indices(index_section, base_id)
    if branch is not None:
        manifest.branch = branch
    else:
        manifest.ClearField("branch")
    return _publish(target, manifest, _clone_transaction(source, shallow=True, branch=branch), index_section)


def shallow_clone(ds: LanceDataset, target_path: str | os.PathLike[str], reference: Reference,
                  storage_options: dict[str, str] | None = None) -> LanceDataset:
    """A new table at ``target_path`` whose first version is ``reference``, sharing its files."""

    source = source_version(ds, reference)
    target = object_store_for(os.fspath(target_path), storage_options or ds.object_store.storage_options)
    write_shallow_copy(source, target)
    return type(ds)(target)


def _copy(source: ObjectStore, source_path: str, target: ObjectStore, target_path: str) -> None:
    target.write_bytes(target_path, source.read_bytes(source_path))


def deep_clone(ds: LanceDataset, target_path: str | os.PathLike[str], reference: Reference,
               storage_options: dict[str, str] | None = None) -> LanceDataset:
    """A new, independent table at ``target_path`` holding copies of ``reference``'s files."""

    source = source_version(ds, reference)
    target = object_store_for(os.fspath(target_path), storage_options or ds.object_store.storage_options)
    _check_empty(target)
    bases = source.base_stores
    manifest = table_pb2.Manifest()
    manifest.CopyFrom(source.manifest)
    for fragment in manifest.fragments:
        for data_file in fragment.files:
            store, path = bases.data_file(data_file)
            _copy(store, path, target, contained_path("data", data_file.path, table=target.uri))
            data_file.ClearField("base_id")
        if fragment.HasField("deletion_file"):
            path = deletion_file_path(fragment.id, fragment.deletion_file)
            _copy(bases.deletion_store(fragment.deletion_file), path, target, path)
            fragment.deletion_file.ClearField("base_id")
    index_section = None
    if source.manifest_file.index_section is not None:
        index_section = table_pb2.IndexSection()
        index_section.CopyFrom(source.manifest_file.index_section)
        for index in index_section.indices:
            _copy_index(bases.index_store(index), index, target)
            index.ClearField("base_id")
    del manifest.base_paths[:]
    manifest.ClearField("branch")
    _publish(target, manifest, _clone_transaction(source, shallow=False, branch=None), index_section)
    return type(ds)(target)


def _copy_index(source: ObjectStore, index: Any, target: ObjectStore) -> None:
    folder = f"{INDICES_DIR}/{uuid.UUID(bytes=bytes(index.uuid.uuid))}"
    for info in source.list_files(folder):
        relative = source.relative_path(info)
        _copy(source, relative, target, relative)


__all__ = ["shallow_clone", "deep_clone", "write_shallow_copy", "source_version"]
