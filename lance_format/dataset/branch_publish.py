"""Publish a branch onto main: main moves to the branch's latest version in one atomic commit.

Write-audit-publish writes a table's new data to a branch taken from main, checks it there, and
then *publishes* it. A branch of several commits is published as their net effect, in one commit
(:mod:`lance_format.dataset.branch_compose`). A branch of one data commit has it replayed (an Append, Overwrite,
Update, Delete or Merge) on main, at the version the branch was taken from: the files the branch
wrote are copied into main's ``data/`` and ``_deletions/`` (so the branch can be deleted
afterwards), the files it inherited from main are referenced where they already are, and the
transaction is committed with put-if-not-exists. Main's new version is therefore exactly what
the branch held (same rows, row ids and row versions), or nothing at all.

Publishing refuses (:class:`CommitConflictError`) when main has moved since the branch was taken,
even by a compatible commit: the audited data is the branch's whole table, and main's other
commit must never be silently superseded. With ``rebase=True`` (like Iceberg's cherry-pick) the
commit is instead rebased over main's newer commits when the commit protocol finds them
compatible (appends; updates and deletes of other fragments, e.g. other partitions), and refused
otherwise; an overwrite is never rebased, since it would replace them. Publishing the same branch version twice is a no-op
that returns the first publish's version (two consumers of one run may both try).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from lance_format.dataset.branch_compose import (
    PUBLISHED_BRANCH,
    PUBLISHED_BRANCH_VERSION,
    PUBLISHED_COMMITS,
    publish_commits,
    publishes_of,
    relocate_fragment,
)
from lance_format.errors import BranchError, CommitConflictError
from lance_format.io import ObjectStore
from lance_format.proto import table_pb2, transaction_pb2
from lance_format.table.commit import commit_transaction
from lance_format.table.transaction import BuildOptions, OperationKind, has_stable_row_ids, operation_name

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset

_REPLAYABLE = (OperationKind.APPEND, OperationKind.OVERWRITE, OperationKind.UPDATE, OperationKind.DELETE,
               OperationKind.MERGE)


def _fragments(txn: transaction_pb2.Transaction) -> Iterator[table_pb2.DataFragment]:
    op = operation_name(txn)
    if op is None:
        return
    body = getattr(txn, op)
    for name in ("fragments", "updated_fragments", "new_fragments"):
        if hasattr(body, name):
            yield from getattr(body, name)


def _relocate(txn: transaction_pb2.Transaction, branch: LanceDataset, main: ObjectStore) -> None:
    """Make ``txn``'s files reachable from main, in place (see :func:`relocate_fragment`)."""
    for fragment in _fragments(txn):
        relocate_fragment(fragment, fragment.id, branch, main)


def _already_published(main: LanceDataset, since: int, branch: str, branch_version: int) -> int | None:
    """The main version that published ``branch_version`` of ``branch`` after ``since``, if any."""
    for version in range(since + 1, main.version + 1):
        txn = main.read_transaction_message(version)
        props = dict(txn.transaction_properties) if txn is not None else {}
        if props.get(PUBLISHED_BRANCH) == branch and props.get(PUBLISHED_BRANCH_VERSION) == str(branch_version):
            return version
    return None


def publish_branch(main: LanceDataset, branch: str, *,
                   transaction_properties: Mapping[str, str] | None = None, rebase: bool = False) -> LanceDataset:
    """Move main to ``branch``'s latest version in one commit; main's new (or publishing) version.

    ``main`` is any version of the table's main branch. The branch must have been created from
    main; it may hold any number of commits since (none: nothing to publish, main is returned).
    One commit is replayed as it is; several are published as their net effect
    (:mod:`lance_format.dataset.branch_compose`), as are commits made after an earlier publish
    of the same branch.

    Raises
    ------
    BranchError
        The branch does not exist or was not created from main.
    CommitConflictError
        Main has moved since the branch was taken (without ``rebase``, or incompatibly); the
        branch is left as it is.
    UnsupportedFeatureError
        A commit of the branch is neither a data write nor a config change (an index build, ...).
    """
    info = main.branches.list().get(branch)
    if info is None:
        raise BranchError(f"branch {branch!r} does not exist", table=main.uri)
    if info["parent_branch"] is not None:
        raise BranchError(f"branch {branch!r} was created from {info['parent_branch']!r}, not from main",
                          table=main.uri)
    parent = int(info["parent_version"])
    latest = main.open_latest()
    latest_of_branch: Any = (branch, None)  # a (branch, version) reference, which checkout_version takes
    staged = main.checkout_version(latest_of_branch)
    if staged.version == parent:
        return latest  # nothing was written to the branch
    done = _already_published(latest, parent, branch, staged.version)
    if done is not None:
        return type(main)(main.uri, done, storage_options=main.object_store.storage_options)
    source = staged.read_transaction_message()
    if staged.version != parent + 1 or publishes_of(latest, parent, branch) or source is None or \
            operation_name(source) not in _REPLAYABLE:
        return publish_commits(main, branch, parent, staged, transaction_properties=transaction_properties or {},
                               rebase=rebase)
    moved = latest.version != parent
    if moved and (not rebase or operation_name(source) == OperationKind.OVERWRITE):
        why = "an overwrite is never rebased over them" if rebase else "publishing does not rebase"
        raise CommitConflictError(
            f"cannot publish branch {branch!r}: it was taken from main version {parent}, and main has moved to "
            f"version {latest.version} since ({why}); the branch is kept (re-run the write to audit it on the "
            "new main)", table=main.uri, version=latest.version,
        )
    txn = transaction_pb2.Transaction()
    txn.CopyFrom(source)
    txn.read_version = parent
    txn.uuid = str(uuid.uuid4())
    for key, value in (transaction_properties or {}).items():
        txn.transaction_properties[str(key)] = str(value)
    txn.transaction_properties[PUBLISHED_BRANCH] = branch
    txn.transaction_properties[PUBLISHED_BRANCH_VERSION] = str(staged.version)
    txn.transaction_properties[PUBLISHED_COMMITS] = "1"
    _relocate(txn, staged, latest.object_store)
    options = BuildOptions(enable_stable_row_ids=has_stable_row_ids(staged.manifest),
                           data_storage_version=staged.manifest.data_format.version or None)
    try:
        committed = commit_transaction(latest.object_store, txn, options=options, require_unchanged=not rebase)
    except CommitConflictError as exc:
        # a concurrent publish of this same branch version (another consumer of the run) won
        done = _already_published(main.open_latest(), parent, branch, staged.version)
        if done is not None:
            return type(main)(main.uri, done, storage_options=main.object_store.storage_options)
        raise CommitConflictError(
            f"cannot publish branch {branch!r} (taken from main version {parent}): {exc}; the branch is kept",
            table=main.uri, version=parent,
        ) from exc
    return type(main)(main.uri, committed.version, storage_options=main.object_store.storage_options)


__all__ = ["publish_branch", "PUBLISHED_BRANCH", "PUBLISHED_BRANCH_VERSION"]
