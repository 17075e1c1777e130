"""The commit protocol: publish version N+1 atomically, rebasing over concurrent writers.

1. Read the latest version. Check the transaction of every version committed since our read
   version against ours (:mod:`conflicts`): incompatible -> :class:`CommitConflictError`,
   retryable -> :class:`RetryableCommitConflictError` (the caller redoes the operation on the
   latest version), rebase -> a Delete/Update merges the concurrent deletions of a fragment
   into its own new deletion file (refusing if both deleted one same row).
2. Build the next manifest on top of the latest one, write the transaction file (unreferenced
   until a manifest points at it) and publish the manifest with put-if-not-exists (or, for a
   table with an external manifest store, a conditional put of the store's entry:
   :mod:`lance_format.io.manifest_store`). Losing that race means another writer took the
   version number: back off and go back to 1.

Nothing is ever overwritten, so a crash at any point leaves only unreferenced files behind and
the table stays readable at its last committed version; ``cleanup_old_versions`` removes them.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from lance_format.errors import (
    ArgumentTypeError,
    CommitConflictError,
    CommitLockError,
    DatasetNotFoundError,
    DuplicateCommitError,
    LanceError,
    RetryableCommitConflictError,
    UnsupportedCommitError,
    VersionNotFoundError,
)
from lance_format.io import ObjectStore
from lance_format.proto import table_pb2, transaction_pb2
from lance_format.table import feature_flags
from lance_format.table.auto_cleanup import clean_up_after_commit
from lance_format.table.base_paths import BaseStores
from lance_format.table.conflicts import (
    INCOMPATIBLE,
    REBASE,
    RETRYABLE,
    check,
    modified_fragment_ids,
)
from lance_format.table.deletion import deletion_file_path, read_deletion_file, write_deletion_file
from lance_format.table.legacy_dictionaries import carried_dictionaries
from lance_format.table.manifest import ManifestFile, encode_manifest, read_manifest
from lance_format.table.naming import LATEST_ONLY, VERSIONS_DIR, ManifestNaming, list_versions, manifest_path
from lance_format.table.transaction import (
    IDEMPOTENCY_KEY,
    TRANSACTIONS_DIR,
    BuildOptions,
    OperationKind,
    build_version,
    load_transaction,
    operation_name,
    transaction_file_name,
)

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


class _Commit:
    """State of one transaction's way to a new version."""

    def __init__(self, store: ObjectStore, txn: transaction_pb2.Transaction, options: BuildOptions,
                 affected_rows: Mapping[int, np.ndarray] | None, read_manifest_file: ManifestFile | None) -> None:
        self.store = store
        self.original = txn
        self.options = options
        self.affected = None if affected_rows is None else {
            int(k): np.asarray(v, dtype=np.uint32) for k, v in affected_rows.items()
        }
        self.op = operation_name(txn)
        self.rewrite: set[int] = set()  # fragments whose deletions must be merged (rebase)
        self._initial: dict[int, table_pb2.DataFragment] | None = None
        self._read_manifest_file = read_manifest_file
        self.written_txn: list[str] = []
        self.release_error: LanceError | None = None  # the commit lock failed after the version landed
        self.written_deletions: list[str] = []
        self._last_txn_bytes: bytes | None = None

    # -- conflict checks -------------------------------------------------------------------
    def initial_fragments(self, listing) -> dict[int, table_pb2.DataFragment] | None:
        """The fragments our Delete/Update modifies, as they were at its read version."""
        if self._initial is None and self.op in (OperationKind.DELETE, OperationKind.UPDATE):
            mf = self._read_manifest_file
            if mf is None or mf.manifest.version != self.original.read_version:
                path = listing.versions.get(self.original.read_version)
                if path is None:
                    return None
                mf = read_manifest(self.store, path)
            wanted = modified_fragment_ids(self.original)
            self._initial = {f.id: f for f in mf.manifest.fragments if f.id in wanted}
        return self._initial

    def check_versions(self, listing, first: int, last: int) -> None:
        for version in range(first, last + 1):
            path = listing.versions.get(version)
            if path is None and self.op == OperationKind.UPDATE_CONFIG:
                # a version cleaned up since our read version: a config change touches no data,
                # so (like pylance) it goes ahead without that version's transaction
                continue
            theirs = None
            if path is not None:
                try:
                    theirs = load_transaction(self.store, read_manifest(self.store, path))
                except LanceError:
                    theirs = None
            self._check_idempotency(theirs, version, path)
            verdict = check(
                self.original, theirs,
                initial_fragments=self.initial_fragments(listing),
                has_affected_rows=self.affected is not None,
            )
            message = f"commit built on version {self.original.read_version} conflicts with version {version}"
            if verdict.outcome == INCOMPATIBLE:
                raise CommitConflictError(f"{message}: {verdict.reason}", table=self.store.uri, version=version,
                                          path=path)
            if verdict.outcome == RETRYABLE:
                raise RetryableCommitConflictError(f"{message}: {verdict.reason}; retry the operation",
                                                   table=self.store.uri, version=version, path=path)
            if verdict.outcome == REBASE:
                self.rewrite |= verdict.rewrite

    def _check_idempotency(self, theirs: transaction_pb2.Transaction | None, version: int, path: str | None) -> None:
        key = self.original.transaction_properties.get(IDEMPOTENCY_KEY)
        if key is not None and theirs is not None and theirs.transaction_properties.get(IDEMPOTENCY_KEY) == key:
            raise DuplicateCommitError(f"version {version} already committed the write with idempotency key {key!r}",
                                       transaction=theirs, table=self.store.uri, version=version, path=path)

    # -- rebase --------------------------------------------------------------------------------
    def rebased(self, latest: ManifestFile | None) -> transaction_pb2.Transaction:
        """The transaction to commit on top of ``latest``."""
        if self.op not in (OperationKind.DELETE, OperationKind.UPDATE) or latest is None:
            return self.original
        txn = transaction_pb2.Transaction()
        txn.CopyFrom(self.original)
        # Like Lance, a Delete/Update is re-stamped with the version it is finally applied to.
        txn.read_version = latest.manifest.version
        if self.rewrite:
            self._merge_deletions(txn, latest)
        return txn

    def _merge_deletions(self, txn: transaction_pb2.Transaction, latest: ManifestFile) -> None:
        body = txn.delete if self.op == OperationKind.DELETE else txn.update
        removed = body.deleted_fragment_ids if self.op == OperationKind.DELETE else body.removed_fragment_ids
        current = {f.id: f for f in latest.manifest.fragments}
        new_files: dict[int, table_pb2.DeletionFile | None] = {}
        for fragment_id in sorted(self.rewrite):
            fragment = current.get(fragment_id)
            if fragment is None:
                raise RetryableCommitConflictError(
                    f"fragment {fragment_id} was removed concurrently; retry the operation",
                    table=self.store.uri, version=latest.manifest.version)
            holder = BaseStores(self.store, latest.manifest).deletion_store(fragment.deletion_file)
            existing = (read_deletion_file(holder, fragment_id, fragment.deletion_file)
                        if fragment.HasField("deletion_file") else np.zeros(0, dtype=np.uint32))
            # only a commit with affected rows gets a rebase verdict, so self.affected is set
            ours = self.affected.get(fragment_id, np.zeros(0, dtype=np.uint32))  # type: ignore[union-attr]
            both = np.intersect1d(existing, ours)
            if both.size:
                raise RetryableCommitConflictError(
                    f"a concurrent commit also removed rows {both[:5].tolist()} of fragment {fragment_id}; "
                    "retry the operation", table=self.store.uri, version=latest.manifest.version)
            merged = np.union1d(existing, ours)
            if merged.size >= fragment.physical_rows:
                new_files[fragment_id] = None
                continue
            pb = write_deletion_file(self.store, fragment_id, latest.manifest.version, merged)
            self.written_deletions.append(deletion_file_path(fragment_id, pb))
            new_files[fragment_id] = pb
        kept = []
        for fragment in body.updated_fragments:
            if fragment.id in new_files and new_files[fragment.id] is None:
                removed.append(fragment.id)
                continue
            copy = table_pb2.DataFragment()
            copy.CopyFrom(fragment)
            if fragment.id in new_files:
                copy.deletion_file.CopyFrom(new_files[fragment.id])
            kept.append(copy)
        del body.updated_fragments[:]
        body.updated_fragments.extend(kept)

    # -- transaction files -----------------------------------------------------------------------
    def write_transaction(self, txn: transaction_pb2.Transaction) -> None:
        raw = txn.SerializeToString()
        if raw == self._last_txn_bytes:
            return
        path = f"{TRANSACTIONS_DIR}/{transaction_file_name(txn)}"
        self.store.write_bytes(path, raw)
        self.written_txn.append(path)
        self._last_txn_bytes = raw

    def discard(self, keep: set[str]) -> None:
        """Remove files this commit wrote that no published manifest references."""
        for path in self.written_txn + self.written_deletions:
            if path not in keep:
                try:
                    self.store.delete(path)
                except OSError:
                    pass


def commit_transaction(
    store: ObjectStore,
    txn: transaction_pb2.Transaction,
    *,
    options: BuildOptions = BuildOptions(),
    new_table_naming: ManifestNaming = ManifestNaming.V2,
    max_retries: int = DEFAULT_MAX_RETRIES,
    affected_rows: Mapping[int, np.ndarray] | None = None,
    read_manifest_file: ManifestFile | None = None,
    require_unchanged: bool = False,
) -> CommittedVersion:
    """Commit ``txn`` as the next version of the table at ``store``.

    ``require_unchanged``: refuse (:class:`CommitConflictError`) instead of rebasing when any
    version was committed after ``txn.read_version`` (publishing an audited branch must land
    exactly on the version that was audited).

    ``affected_rows`` (fragment id -> physical offsets a Delete/Update removed) lets a commit be
    rebased over a concurrent Delete/Update of the same fragments; without it such a commit is
    retryable. ``read_manifest_file`` spares re-reading the read version's manifest.
    """
    state = _Commit(store, txn, options, affected_rows, read_manifest_file)
    try:
        committed, final = _commit_loop(state, new_table_naming, max_retries, require_unchanged)
    except BaseException:
        state.discard(set())
        raise
    keep = {f"{TRANSACTIONS_DIR}/{transaction_file_name(final)}"}
    for fragment in committed.manifest_file.manifest.fragments:
        if fragment.HasField("deletion_file"):
            keep.add(deletion_file_path(fragment.id, fragment.deletion_file))
    state.discard(keep)  # superseded attempts only
    if state.rewrite:
        _discard_superseded_deletions(store, txn, keep)
    clean_up_after_commit(store, committed.manifest_file.manifest)  # official Lance's lance.auto_cleanup.*
    if state.release_error is not None:
        raise state.release_error
    return committed


def _discard_superseded_deletions(store: ObjectStore, original: transaction_pb2.Transaction, keep: set[str]) -> None:
    body = original.delete if operation_name(original) == OperationKind.DELETE else original.update
    for fragment in body.updated_fragments:
        if fragment.HasField("deletion_file") and fragment.deletion_file.read_version == original.read_version:
            path = deletion_file_path(fragment.id, fragment.deletion_file)
            if path not in keep:
                try:
                    store.delete(path)
                except OSError:
                    pass


def _commit_loop(state: _Commit, new_table_naming: ManifestNaming, max_retries: int,
                 require_unchanged: bool = False):
    store = state.store
    checked_up_to = state.original.read_version
    # versions before our read version matter only to a restore (V2 names: the listing stops there)
    since = None if state.op == OperationKind.RESTORE else state.original.read_version
    for attempt in range(max_retries + 1):
        listing = list_versions(store, since=since)
        if max_retries == 0 and (listing.latest or 0) > state.original.read_version:
            # Like Lance: a commit first tries the version after its read version; building on
            # the versions committed since is a retry, and none is allowed.
            raise CommitConflictError(
                f"Commit conflict for version {state.original.read_version + 1}: version {listing.latest} was "
                "committed since the read version and max_retries is 0", table=store.uri,
                version=state.original.read_version + 1)
        if require_unchanged and listing.latest != state.original.read_version:
            raise CommitConflictError(
                f"the table moved from version {state.original.read_version} to {listing.latest} "
                "since this commit was prepared", table=store.uri, version=state.original.read_version,
            )
        previous: ManifestFile | None = None
        if listing.latest is not None:
            previous = read_manifest(store, listing.versions[listing.latest])
            feature_flags.check_writable(previous.manifest, table=store.uri, path=listing.versions[listing.latest])
            state.check_versions(listing, checked_up_to + 1, listing.latest)
            checked_up_to = max(checked_up_to, listing.latest)
        if previous is None and state.op != OperationKind.OVERWRITE:
            raise DatasetNotFoundError(f"cannot commit a {state.op}: there is no table here (it may have been "
                                       "deleted)", table=store.uri)
        txn = state.rebased(previous)
        restored = None
        if state.op == OperationKind.RESTORE:
            path = listing.versions.get(txn.restore.version)
            if path is None:
                raise VersionNotFoundError(f"cannot restore version {txn.restore.version}: it does not exist",
                                           table=store.uri, version=txn.restore.version)
            restored = read_manifest(store, path)
        built = build_version(previous, txn, state.options, store=store, restored=restored)
        state.write_transaction(txn)
        sources: list[tuple[str, table_pb2.Manifest]] = []
        if previous is not None and listing.latest is not None:
            sources.append((listing.versions[listing.latest], previous.manifest))
        if restored is not None and path is not None:
            sources.insert(0, (path, restored.manifest))
        # legacy tables only; an overwrite's files hold the dictionaries they were written against
        dictionaries = carried_dictionaries(store, [] if state.op == OperationKind.OVERWRITE else sources,
                                            built.manifest)
        data = encode_manifest(built.manifest, txn, built.index_section, dictionaries)
        naming = listing.naming or new_table_naming
        path = manifest_path(built.manifest.version, naming)
        if _publish_under_lock(state, built.manifest.version, path, data):
            _write_hint(store, built.manifest.version)
            mf = ManifestFile(built.manifest, txn, built.index_section, len(data))
            return CommittedVersion(built.manifest.version, path, mf, attempt), txn
        _backoff(attempt)
    raise CommitConflictError(
        f"gave up after {max_retries} retries: other writers kept committing first",
        table=store.uri,
        version=state.original.read_version,
    )


DETACHED_VERSION_BIT = 1 << 63  # set in every detached version number, as in Lance


def detached_manifest_path(version: int) -> str:
    """Where a detached version's manifest lives (``_versions/d{version}.manifest``): outside
    both naming schemes, so listings never see it."""
    return f"{VERSIONS_DIR}/d{version}.manifest"


def commit_detached(store: ObjectStore, txn: transaction_pb2.Transaction, *,
                    options: BuildOptions = BuildOptions()) -> CommittedVersion:
    """Commit ``txn`` as a detached version (pylance's ``commit(..., detached=True)``).

    The version is built on ``txn.read_version`` (attached or detached) and gets a random
    number with the top bit set; its manifest is written beside the others under a name no
    listing reads, so the table's latest version does not move. Only opening that number
    (``checkout_version``) reaches it.
    """
    read = txn.read_version
    if read & DETACHED_VERSION_BIT:
        read_path = detached_manifest_path(read)
        if not store.exists(read_path):
            raise VersionNotFoundError(f"detached version {read} does not exist", table=store.uri, version=read)
    else:
        listing = list_versions(store, since=read)
        if listing.naming == ManifestNaming.V1:
            raise UnsupportedCommitError("Not supported: detached commits cannot be used with v1 manifest paths",
                                         table=store.uri)
        found = listing.versions.get(read)
        if found is None:
            raise VersionNotFoundError(f"version {read} does not exist (latest is {listing.latest})",
                                       table=store.uri, version=read)
        read_path = found
    previous = read_manifest(store, read_path)
    feature_flags.check_writable(previous.manifest, table=store.uri, path=read_path)
    state = _Commit(store, txn, options, None, previous)
    try:
        for attempt in range(8):  # a clash of 63 random bits is next to impossible; retry anyway
            version = random.SystemRandom().getrandbits(63) | DETACHED_VERSION_BIT
            built = build_version(previous, txn, replace(options, version=version), store=store)
            state.write_transaction(txn)
            dictionaries = carried_dictionaries(store, [(read_path, previous.manifest)], built.manifest)
            data = encode_manifest(built.manifest, txn, built.index_section, dictionaries)
            path = detached_manifest_path(version)
            if store.put_if_not_exists(path, data):
                mf = ManifestFile(built.manifest, txn, built.index_section, len(data))
                return CommittedVersion(version, path, mf, attempt)
    except BaseException:
        state.discard(set())
        raise
    raise CommitConflictError("could not find a free detached version number", table=store.uri)


def _publish_under_lock(state: _Commit, version: int, path: str, data: bytes) -> bool:
    """:func:`publish_manifest`, inside the store's custom commit lock when it has one.

    Like pylance, the lock is called with the version being committed and held while its
    manifest is published. A lock that fails to acquire fails the commit; one that fails to
    release after the version landed is reported once the commit is complete.
    """
    lock = state.store.commit_lock
    if lock is None:
        return publish_manifest(state.store, version, path, data)
    try:
        context = lock(version)
        release = type(context).__exit__
        type(context).__enter__(context)
    except Exception as error:
        raise _lock_error(error, state.store, version) from error
    try:
        published = publish_manifest(state.store, version, path, data)
    except BaseException as error:
        release(context, type(error), error, error.__traceback__)
        raise
    try:
        release(context, None, None, None)
    except Exception as error:
        if not published:
            raise _lock_error(error, state.store, version) from error
        state.release_error = _lock_error(error, state.store, version)
        state.release_error.__cause__ = error
        vars(state.release_error)["version_landed"] = True
    return published


@contextmanager
def commit_lock_held_by(store: ObjectStore, lock: Callable[[int], Any] | None) -> Iterator[None]:
    """Commits to ``store`` inside this block go through ``lock`` (pylance's ``commit_lock``)."""
    if lock is None:
        yield
        return
    if not callable(lock):
        raise ArgumentTypeError(f"commit_lock must be a function, got {type(lock)}", table=store.uri)
    previous, store.commit_lock = store.commit_lock, lock
    try:
        yield
    finally:
        store.commit_lock = previous


def commit_landed(error: BaseException) -> bool:
    """Whether ``error`` was raised after its commit's version landed (a commit lock failing to
    release): the files that version references must then be kept."""
    return getattr(error, "version_landed", False) is True


def _lock_error(error: Exception, store: ObjectStore, version: int) -> LanceError:
    """pylance's message for a failing commit handler; a conflict it reports stays a conflict."""
    message = f"Error from commit handler: {type(error).__name__}: {error}"
    if isinstance(error, CommitConflictError) or type(error).__name__ == "CommitConflictError":
        return CommitConflictError(message, table=store.uri, version=version)
    return CommitLockError(message, table=store.uri, version=version)


def publish_manifest(store: ObjectStore, version: int, path: str, data: bytes) -> bool:
    """Publish the manifest of ``version`` at ``path``; False when another writer took ``version``.

    Through the table's external manifest store when it has one (stage, conditional put of the
    store entry, copy to ``path``, flip the entry: :mod:`lance_format.io.manifest_store`), else
    with the object store's own atomic put-if-not-exists.
    """
    if store.manifest_store is not None:
        return store.manifest_store.commit(store, version, path, data)
    return store.put_if_not_exists(path, data)


def _write_hint(store: ObjectStore, version: int) -> None:
    # Advisory only: readers always list _versions/. A failure here must not fail the commit.
    # pylance 14 writes it only on local filesystems (not on object stores), and so do we.
    if not store.writes_version_hint:
        return
    try:
        store.replace_bytes(HINT_PATH, json.dumps({"version": version}, separators=(",", ":")).encode())
    except OSError:
        pass


def latest_manifest(store: ObjectStore) -> tuple[str, ManifestFile] | None:
    if store.manifest_store is not None:
        found = store.manifest_store.latest(store)  # the store knows the latest: no listing
        if found is not None:
            return found[1], read_manifest(store, found[1])
    listing = list_versions(store, since=LATEST_ONLY)
    if listing.latest is None:
        return None
    path = listing.versions[listing.latest]
    return path, read_manifest(store, path)


__all__ = [
    "commit_transaction", "commit_detached", "detached_manifest_path", "DETACHED_VERSION_BIT", "commit_lock_held_by", "commit_landed", "CommittedVersion", "latest_manifest", "publish_manifest", "HINT_PATH",
    "RetryableCommitConflictError",
]
