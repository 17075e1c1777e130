"""``cleanup_old_versions`` with pylance's API and semantics.

It deletes the manifests of old versions and every file that no kept version (newer than
``older_than``, among the last ``retain_versions``, tagged, or at or after the checked-out
version) references. Unreferenced files that no manifest ever referenced may belong to a commit
in progress: they go only when at least 7 days old or with ``delete_unverified=True``. Old
manifests are removed before the files they point to, so a cleanup that dies half-way never
leaves a listed version with missing files.
"""

from __future__ import annotations

import os
import posixpath
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from lance_format.dataset.arguments import age
from lance_format.errors import InvalidInputError, TagError
from lance_format.table.deletion import deletion_file_path
from lance_format.table.manifest import read_manifest
from lance_format.table.naming import VERSIONS_DIR, list_versions
from lance_format.dataset.branches import cleanup_references
from lance_format.table.transaction import TRANSACTIONS_DIR

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset

UNVERIFIED_THRESHOLD = timedelta(days=7)
DEFAULT_OLDER_THAN = timedelta(days=14)


@dataclass
class CleanupStats:
    """What ``cleanup_old_versions`` removed (pylance's ``CleanupStats``)."""

    bytes_removed: int = 0
    old_versions: int = 0
    data_files_removed: int = 0
    transaction_files_removed: int = 0
    index_files_removed: int = 0
    deletion_files_removed: int = 0
    failed_deletes: int = 0


@dataclass
class _Refs:
    data: set
    deletions: set
    transactions: set
    indices: set

    @classmethod
    def empty(cls) -> "_Refs":
        return cls(set(), set(), set(), set())

    def add(self, mf) -> None:
        manifest = mf.manifest
        for fragment in manifest.fragments:
            for data_file in fragment.files:
                self.data.add(posixpath.normpath(f"data/{data_file.path}"))
            if fragment.HasField("deletion_file"):
                self.deletions.add(deletion_file_path(fragment.id, fragment.deletion_file))
        if manifest.transaction_file:
            self.transactions.add(f"{TRANSACTIONS_DIR}/{manifest.transaction_file}")
        if mf.index_section is not None:
            for index in mf.index_section.indices:
                self.indices.add(_uuid_text(index.uuid.uuid))


def _uuid_text(raw: bytes) -> str:
    import uuid

    return str(uuid.UUID(bytes=bytes(raw))) if len(raw) == 16 else raw.hex()


def cleanup_old_versions(
    ds: "LanceDataset",
    older_than: timedelta | None = None,
    retain_versions: int | None = None,
    *,
    delete_unverified: bool = False,
    error_if_tagged_old_versions: bool = True,
    delete_rate_limit: int | None = None,
    versions: list[int] | None = None,
    delete_concurrency: int | None = None,
) -> CleanupStats:
    """Remove old versions and the files only they reference (pylance's semantics)."""
    store = ds.object_store
    older_than = age(older_than, name="older_than", table=ds.uri)
    if retain_versions is not None and retain_versions <= 0:
        raise InvalidInputError(f"retain_versions must be greater than 0, got {retain_versions}", table=ds.uri)
    if older_than is None and retain_versions is None and versions is None:
        older_than = DEFAULT_OLDER_THAN
    listing = list_versions(store)
    ordered = sorted(listing.versions)
    now_ns = time.time_ns()
    before_ns = now_ns - int(older_than.total_seconds() * 1e9) if older_than is not None else None
    before_version = None
    if retain_versions is not None:
        before_version = ordered[0] if len(ordered) <= retain_versions else ordered[len(ordered) - retain_versions]
    chosen = set(versions) if versions is not None else None
    tagged, kept_for_branches, branch_manifests = cleanup_references(ds)

    referenced, verified = _Refs.empty(), _Refs.empty()
    old_manifests: list[tuple[str, int]] = []
    tagged_old: dict[str, int] = {}
    for version in ordered:
        path = listing.versions[version]
        mf = read_manifest(store, path)
        m = mf.manifest
        stamp = m.timestamp.seconds * 1_000_000_000 + m.timestamp.nanos
        should_clean = True
        if before_ns is not None:
            should_clean &= stamp < before_ns
        if before_version is not None:
            should_clean &= version < before_version
        if chosen is not None:
            should_clean &= version in chosen
        is_latest = version >= ds.version
        if version in tagged and not is_latest and should_clean:
            tagged_old[tagged[version]] = version
        if is_latest or not should_clean or version in tagged or version in kept_for_branches:
            referenced.add(mf)
        else:
            verified.add(mf)
            old_manifests.append((path, mf.size))
    for mf in branch_manifests:  # files a branch shares with this one stay
        referenced.add(mf)
    if tagged_old and error_if_tagged_old_versions:
        raise TagError(
            f"{len(tagged_old)} tagged version(s) have been marked for cleanup. Either set "
            f"error_if_tagged_old_versions=False or delete the following tag(s) to enable cleanup: {tagged_old}",
            table=ds.uri,
        )

    stats = CleanupStats(old_versions=len(old_manifests))
    threshold = time.time() - UNVERIFIED_THRESHOLD.total_seconds()

    inside = _ResolvesInside(store)

    doomed: list[tuple[str, int, str | None]] = []

    def remove(relative: str, size: int, counter: str | None) -> None:
        doomed.append((relative, size, counter))

    def flush() -> None:
        """Delete the collected files in batches (S3: 1000 keys per DeleteObjects request)."""
        batch = [item for item in doomed if inside(item[0])]
        stats.failed_deletes += len(doomed) - len(batch)  # reached through a link leaving the table: kept
        doomed.clear()
        try:
            failed = set(store.delete_many([relative for relative, _, _ in batch]))
        except OSError:
            stats.failed_deletes += len(batch)
            return
        for relative, size, counter in batch:
            if relative in failed:
                stats.failed_deletes += 1
                continue
            stats.bytes_removed += size
            if counter:
                setattr(stats, counter, getattr(stats, counter) + 1)

    for path, size in old_manifests:  # first: no listed version may point at removed files
        remove(path, size, None)
    flush()

    for directory in ("data", "_deletions", TRANSACTIONS_DIR, "_indices", VERSIONS_DIR):
        for info in store.list_files(directory):  # a prefix listing on object stores
            relative = store.relative_path(info)
            in_progress = not delete_unverified and (info.mtime is None or info.mtime.timestamp() >= threshold)
            name = posixpath.basename(relative)
            if directory == VERSIONS_DIR:
                if name.startswith(".tmp") and not in_progress:
                    remove(relative, info.size, None)
                continue
            if directory == "_indices":
                parts = relative.split("/")
                uuid_part = parts[1] if len(parts) > 2 else None
                if uuid_part is None or uuid_part in referenced.indices:
                    continue
                if not in_progress or uuid_part in verified.indices:
                    remove(relative, info.size, "index_files_removed")
                continue
            kind = {"data": ("data", "data_files_removed"), "_deletions": ("deletions", "deletion_files_removed"),
                    TRANSACTIONS_DIR: ("transactions", "transaction_files_removed")}[directory]
            if directory == "data" and name.startswith(".tmp") and not in_progress:
                # an interrupted writer's staging file (official Lance stages data files as
                # `data/.tmpXXXXXX`): never part of a version once it is this old
                remove(relative, info.size, None)
                continue
            if directory == "data" and not name.endswith(".lance"):
                continue
            if directory == "_deletions" and not name.endswith((".arrow", ".bin")):
                continue
            if directory == TRANSACTIONS_DIR and not name.endswith(".txn"):
                continue
            if relative in getattr(referenced, kind[0]):
                continue
            if not in_progress or relative in getattr(verified, kind[0]):
                remove(relative, info.size, kind[1])
    flush()
    return stats


class _ResolvesInside:
    """Whether a listed file, links resolved, lies inside the table's root directory.

    A local listing follows a symlinked directory inside ``data/``; cleanup must not delete what it
    finds behind such a link. Object stores have no links, so everything listed is inside.
    """

    def __init__(self, store: Any) -> None:
        local_root = store.backend.local_path(store.root)
        self._root = os.path.realpath(local_root) if local_root is not None else None
        self._store = store

    def __call__(self, relative: str) -> bool:
        path = self._store.local_path(relative)
        if self._root is None or path is None:
            return True
        resolved = os.path.realpath(path)
        return resolved.startswith(self._root.rstrip(os.sep) + os.sep)


__all__ = ["cleanup_old_versions", "CleanupStats"]
