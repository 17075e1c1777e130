"""``cleanup_old_versions`` with pylance's API and semantics, at the table layer.

It deletes the manifests of old versions and every file that no kept version (newer than
``older_than``, among the last ``retain_versions``, tagged, or at or after the checked-out
version) references. Unreferenced files that no manifest ever referenced may belong to a commit
in progress: they go only when at least 7 days old or with ``delete_unverified=True``. Old
manifests are removed before the files they point to, so a cleanup that dies half-way never
leaves a listed version with missing files.

It works on any :class:`TableVersion` (a ``LanceDataset`` is one), so the commit loop can run
official Lance's automatic cleanup (:mod:`lance_format.table.auto_cleanup`) without calling up
into the dataset layer.
"""

from __future__ import annotations

import os
import posixpath
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

from lance_format.errors import CommitOptionError, InvalidInputError, TaggedVersionsError
from lance_format.io import ObjectStore
from lance_format.proto import table_pb2
from lance_format.table.deletion import deletion_file_path
from lance_format.table.manifest import ManifestFile, read_manifest
from lance_format.table.naming import VERSIONS_DIR, list_versions
from lance_format.table.refs import branch_names, branch_store, manifest_branch, normalize_branch, read_branch, root_of
from lance_format.table.tags import TableTags
from lance_format.table.transaction import TRANSACTIONS_DIR


class TableVersion(Protocol):
    """The version a cleanup runs from: a ``LanceDataset``, or :class:`VersionAt` below it."""

    @property
    def uri(self) -> str: ...
    @property
    def object_store(self) -> ObjectStore: ...
    @property
    def version(self) -> int: ...
    @property
    def manifest(self) -> table_pb2.Manifest: ...


@dataclass(frozen=True)
class VersionAt:
    """One committed version of the table at ``object_store`` (what the commit loop has at hand)."""

    object_store: ObjectStore
    manifest: table_pb2.Manifest

    @property
    def uri(self) -> str:
        return self.object_store.uri

    @property
    def version(self) -> int:
        return self.manifest.version


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
    def empty(cls) -> _Refs:
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


@dataclass(frozen=True)
class CleanupCandidateFile:
    """A file cleanup would remove (pylance's ``CleanupCandidateFile``).

    ``kind`` is ``manifest``, ``data``, ``deletion``, ``transaction``, ``index`` or ``staging``
    (an interrupted writer's temporary file); ``unverified`` marks files that no removed
    version referenced (they may belong to a write still in progress).
    """

    path: str
    kind: str
    unverified: bool
    size_bytes: int


@dataclass(frozen=True)
class CleanupReferencedBranch:
    """A branch whose base version keeps old files alive (pylance's ``CleanupReferencedBranch``)."""

    name: str
    referenced_version: int
    cleanup_candidate: bool


@dataclass
class CleanupExplanation:
    """What ``cleanup_old_versions`` would do (pylance's ``CleanupExplanation``)."""

    read_version: int
    stats: CleanupStats
    candidate_files: list[CleanupCandidateFile] = field(default_factory=list)
    candidate_files_truncated: bool = False
    candidate_file_limit: int = 1000
    referenced_branches: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


_COUNTERS = {"data": "data_files_removed", "deletion": "deletion_files_removed",
             "transaction": "transaction_files_removed", "index": "index_files_removed"}


@dataclass
class _Plan:
    """The files a cleanup removes: old manifests first, then everything only they referenced."""

    old_manifests: list[tuple[str, int]]
    files: list[CleanupCandidateFile]  # path relative to the table root
    referenced_branches: list[str]


# -- what cleanup must keep --------------------------------------------------------------------
def cleanup_references(ds: TableVersion) -> tuple[dict[int, str], set[int], list[ManifestFile]]:
    """For cleaning ``ds``'s branch: (tagged versions -> tag, versions other branches were created
    from, every manifest of every other branch, whose files may live in this branch)."""
    root = root_of(ds.object_store, ds.manifest)
    current = manifest_branch(ds.manifest)
    tagged = {int(t["version"]): name for name, t in TableTags(root).list().items()
              if normalize_branch(t.get("branch")) == current}
    kept: set[int] = set()
    manifests: list[ManifestFile] = []
    for name in branch_names(root):
        info = read_branch(root, name)
        if normalize_branch(info.get("parentBranch")) == current:
            kept.add(int(info["parentVersion"]))
        if name == current:
            continue
        store = branch_store(root, name)
        listing = list_versions(store)
        manifests.extend(read_manifest(store, path) for path in listing.versions.values())
    return tagged, kept, manifests


def _plan_cleanup(
    ds: TableVersion,
    older_than: timedelta | None,
    retain_versions: int | None,
    *,
    delete_unverified: bool,
    error_if_tagged_old_versions: bool,
    versions: list[int] | None,
) -> _Plan:
    store = ds.object_store
    if older_than is not None and not isinstance(older_than, timedelta):
        raise InvalidInputError(f"older_than must be a datetime.timedelta, got {type(older_than).__name__} "
                                f"{older_than!r}", table=ds.uri)
    if retain_versions is not None and retain_versions <= 0:
        # pylance 14 raises OSError here
        raise CommitOptionError(f"retain_versions must be greater than 0, got {retain_versions}", table=ds.uri)
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
        raise TaggedVersionsError(
            f"{len(tagged_old)} tagged version(s) have been marked for cleanup. Either set "
            f"error_if_tagged_old_versions=False or delete the following tag(s) to enable cleanup: {tagged_old}",
            table=ds.uri,
        )

    threshold = time.time() - UNVERIFIED_THRESHOLD.total_seconds()
    files: list[CleanupCandidateFile] = []
    for directory in ("data", "_deletions", TRANSACTIONS_DIR, "_indices", VERSIONS_DIR):
        for info in store.list_files(directory):  # a prefix listing on object stores
            relative = store.relative_path(info)
            in_progress = not delete_unverified and (info.mtime is None or info.mtime.timestamp() >= threshold)
            name = posixpath.basename(relative)
            if directory == VERSIONS_DIR:
                if name.startswith(".tmp") and not in_progress:
                    files.append(CleanupCandidateFile(relative, "staging", True, info.size))
                continue
            if directory == "_indices":
                parts = relative.split("/")
                uuid_part = parts[1] if len(parts) > 2 else None
                if uuid_part is None or uuid_part in referenced.indices:
                    continue
                if not in_progress or uuid_part in verified.indices:
                    files.append(CleanupCandidateFile(relative, "index", uuid_part not in verified.indices,
                                                      info.size))
                continue
            kind, refs = {"data": ("data", "data"), "_deletions": ("deletion", "deletions"),
                          TRANSACTIONS_DIR: ("transaction", "transactions")}[directory]
            if directory == "data" and name.startswith(".tmp") and not in_progress:
                # an interrupted writer's staging file (official Lance stages data files as
                # `data/.tmpXXXXXX`): never part of a version once it is this old
                files.append(CleanupCandidateFile(relative, "staging", True, info.size))
                continue
            owner = relative
            if directory == "data" and name.endswith(".blob") and posixpath.dirname(relative) != "data":
                # a blob sidecar (data/<data file stem>/<blob id>.blob) goes with its data file
                owner = posixpath.dirname(relative) + ".lance"
            elif directory == "data" and not name.endswith(".lance"):
                continue
            if directory == "_deletions" and not name.endswith((".arrow", ".bin")):
                continue
            if directory == TRANSACTIONS_DIR and not name.endswith(".txn"):
                continue
            if owner in getattr(referenced, refs):
                continue
            known = owner in getattr(verified, refs)
            if not in_progress or known:
                files.append(CleanupCandidateFile(relative, kind, not known, info.size))
    return _Plan(old_manifests, files, sorted(_branch_names(ds, kept_for_branches, branch_manifests)))


def _branch_names(ds: TableVersion, kept_for_branches: Any, branch_manifests: Any) -> set[str]:
    if not kept_for_branches and not branch_manifests:
        return set()
    try:
        return set(branch_names(root_of(ds.object_store, ds.manifest)))
    except Exception:  # the names are informative only; the kept files were decided above
        return set()


def _would_remove(plan: _Plan, inside: _ResolvesInside) -> CleanupStats:
    stats = CleanupStats(old_versions=len(plan.old_manifests))
    stats.bytes_removed = sum(size for _, size in plan.old_manifests)
    for candidate in plan.files:
        if not inside(candidate.path):
            stats.failed_deletes += 1
            continue
        stats.bytes_removed += candidate.size_bytes
        counter = _COUNTERS.get(candidate.kind)
        if counter:
            setattr(stats, counter, getattr(stats, counter) + 1)
    return stats


class _Pace:
    """Spaces deletions ``1 / per_second`` seconds apart (the first goes at once)."""

    def __init__(self, per_second: int) -> None:
        self._interval = 1.0 / per_second
        self._next: float | None = None

    def wait(self) -> None:
        now = time.monotonic()
        if self._next is not None and now < self._next:
            time.sleep(self._next - now)
            now = self._next
        self._next = now + self._interval


def cleanup_old_versions(
    ds: TableVersion,
    older_than: timedelta | None = None,
    retain_versions: int | None = None,
    *,
    delete_unverified: bool = False,
    error_if_tagged_old_versions: bool = True,
    delete_rate_limit: int | None = None,
    versions: list[int] | None = None,
    delete_concurrency: int | None = None,
) -> CleanupStats:
    """Remove old versions and the files only they reference (pylance's semantics).

    ``delete_rate_limit``: at most this many files deleted per second (one request per file,
    spaced ``1 / delete_rate_limit`` seconds apart, as pylance paces them).
    """
    if delete_rate_limit is not None and (isinstance(delete_rate_limit, bool) or int(delete_rate_limit) <= 0):
        raise CommitOptionError(f"Cleanup error: delete_rate_limit must be greater than 0, got {delete_rate_limit}",
                                table=ds.uri)
    pace = _Pace(int(delete_rate_limit)) if delete_rate_limit is not None else None
    plan = _plan_cleanup(ds, older_than, retain_versions, delete_unverified=delete_unverified,
                         error_if_tagged_old_versions=error_if_tagged_old_versions, versions=versions)
    store = ds.object_store
    stats = CleanupStats(old_versions=len(plan.old_manifests))
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
            if pace is None:
                failed = set(store.delete_many([relative for relative, _, _ in batch]))
            else:
                failed = set()
                for relative, _, _ in batch:
                    pace.wait()
                    failed.update(store.delete_many([relative]))
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

    for path, size in plan.old_manifests:  # first: no listed version may point at removed files
        remove(path, size, None)
    flush()
    for candidate in plan.files:
        remove(candidate.path, candidate.size_bytes, _COUNTERS.get(candidate.kind))
    flush()
    return stats


def explain_cleanup(
    ds: TableVersion,
    older_than: timedelta | None = None,
    retain_versions: int | None = None,
    *,
    delete_unverified: bool = False,
    error_if_tagged_old_versions: bool = True,
    versions: list[int] | None = None,
    include_files: bool = False,
    max_files: int = 1000,
) -> CleanupExplanation:
    """What :func:`cleanup_old_versions` would remove, computed by the same plan; deletes nothing."""
    plan = _plan_cleanup(ds, older_than, retain_versions, delete_unverified=delete_unverified,
                         error_if_tagged_old_versions=error_if_tagged_old_versions, versions=versions)
    store = ds.object_store
    explanation = CleanupExplanation(ds.version, _would_remove(plan, _ResolvesInside(store)),
                                     candidate_file_limit=max_files, referenced_branches=plan.referenced_branches)
    if include_files:
        everything = plan.files + [CleanupCandidateFile(path, "manifest", False, size)
                                   for path, size in plan.old_manifests]
        explanation.candidate_files = [
            CleanupCandidateFile(_display_path(store, c.path), c.kind, c.unverified, c.size_bytes)
            for c in everything[:max_files]
        ]
        if len(everything) > max_files:
            explanation.candidate_files_truncated = True
            explanation.warnings.append(f"candidate_files truncated to {max_files} entries")
    return explanation


def _display_path(store: Any, relative: str) -> str:
    """The object-store path of a file, as pylance prints it (no scheme, no leading slash)."""
    full = store.full_path(relative)
    return full.split("://", 1)[-1].lstrip("/")


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


__all__ = ["cleanup_old_versions", "explain_cleanup", "CleanupStats", "CleanupExplanation", "CleanupCandidateFile"]
