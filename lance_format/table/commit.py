"""The commit protocol: publish version N+1 atomically, or detect the concurrent writer.

1. Write the transaction file (unreferenced until a manifest points at it).
2. Read the latest version. If other writers committed since our read version, check each of
   their transactions against ours; an incompatible one raises :class:`CommitConflictError`.
3. Build the next manifest on top of the latest one and publish it with put-if-not-exists.
   Losing that race means another writer took the version number: go back to 2.

A crash at any point leaves only unreferenced files behind; the table stays readable at its
last committed version.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass

from lance_format.errors import CommitConflictError, LanceError
from lance_format.io import ObjectStore
from lance_format.proto import transaction_pb2
from lance_format.table import feature_flags
from lance_format.table.conflicts import conflict_reason
from lance_format.table.manifest import ManifestFile, encode_manifest, read_manifest
from lance_format.table.naming import VERSIONS_DIR, ManifestNaming, list_versions, manifest_path
from lance_format.table.operations import BuildOptions, build_manifest, keeps_indices
from lance_format.table.transaction import TRANSACTIONS_DIR, load_transaction, write_transaction_file

HINT_PATH = f"{VERSIONS_DIR}/latest_version_hint.json"
DEFAULT_MAX_RETRIES = 20


@dataclass(frozen=True)
class CommittedVersion:
    version: int
    path: str
    manifest_file: ManifestFile
    retries: int


def _backoff(attempt: int) -> None:
    time.sleep(min(0.5, 0.005 * (2**attempt)) * (0.5 + random.random()))


def commit_transaction(
    store: ObjectStore,
    txn: transaction_pb2.Transaction,
    *,
    options: BuildOptions = BuildOptions(),
    new_table_naming: ManifestNaming = ManifestNaming.V2,
    max_retries: int = DEFAULT_MAX_RETRIES,
) -> CommittedVersion:
    """Commit ``txn`` as the next version of the table at ``store``."""
    txn_path = f"{TRANSACTIONS_DIR}/{write_transaction_file(store, txn)}"
    try:
        return _commit_loop(store, txn, options, new_table_naming, max_retries)
    except BaseException:
        store.delete(txn_path)  # unreferenced: no manifest of ours points at it
        raise


def _commit_loop(
    store: ObjectStore,
    txn: transaction_pb2.Transaction,
    options: BuildOptions,
    new_table_naming: ManifestNaming,
    max_retries: int,
) -> CommittedVersion:
    checked_up_to = txn.read_version
    for attempt in range(max_retries + 1):
        listing = list_versions(store)
        previous: ManifestFile | None = None
        if listing.latest is not None:
            previous = read_manifest(store, listing.versions[listing.latest])
            feature_flags.check_writable(
                previous.manifest, table=store.uri, path=listing.versions[listing.latest]
            )
            for version in range(checked_up_to + 1, listing.latest + 1):
                _check_concurrent(store, txn, listing.versions.get(version), version)
            checked_up_to = listing.latest
        manifest = build_manifest(previous.manifest if previous else None, txn, options)
        index_section = previous.index_section if previous and keeps_indices(txn) else None
        data = encode_manifest(manifest, txn, index_section)
        naming = listing.naming or new_table_naming
        path = manifest_path(manifest.version, naming)
        if store.put_if_not_exists(path, data):
            _write_hint(store, manifest.version)
            return CommittedVersion(manifest.version, path, ManifestFile(manifest, txn, index_section, len(data)), attempt)
        _backoff(attempt)
    raise CommitConflictError(
        f"gave up after {max_retries} retries: other writers kept committing first",
        table=store.uri,
        version=txn.read_version,
    )


def _check_concurrent(store: ObjectStore, txn: transaction_pb2.Transaction, path: str | None, version: int) -> None:
    theirs = None
    if path is not None:
        try:
            theirs = load_transaction(store, read_manifest(store, path))
        except LanceError:
            theirs = None
    reason = conflict_reason(txn, theirs)
    if reason is not None:
        raise CommitConflictError(
            f"commit built on version {txn.read_version} conflicts with version {version}: {reason}",
            table=store.uri,
            version=version,
            path=path,
        )


def _write_hint(store: ObjectStore, version: int) -> None:
    # Advisory only: readers always list _versions/. A failure here must not fail the commit.
    try:
        store.replace_bytes(HINT_PATH, json.dumps({"version": version}, separators=(",", ":")).encode())
    except OSError:
        pass


def latest_manifest(store: ObjectStore) -> tuple[str, ManifestFile] | None:
    listing = list_versions(store)
    if listing.latest is None:
        return None
    path = listing.versions[listing.latest]
    return path, read_manifest(store, path)


__all__ = ["commit_transaction", "CommittedVersion", "latest_manifest", "HINT_PATH"]
