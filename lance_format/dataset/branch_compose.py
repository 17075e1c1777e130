"""Publishing a branch of several commits: their net effect becomes ONE commit on main.

A write-audit-publish branch often holds more than one commit: several partitions or assets of
one table written in a run, table config set after the rows, a schema change followed by data.
Main must still move to the audited state in one atomic commit. :func:`publish_commits`
compares the branch's latest version with the version it was taken from (or, after an earlier
publish of the same branch, with the branch version that publish brought to main) and commits
the difference as one transaction:

* the fragments the branch removed, changed (deletion or data files) and added, recorded as an
  ``Append`` (only added), a ``Delete`` (only deletions), an ``Update``, or a ``Merge`` (the full
  fragment list with the new schema) when the branch changed the schema;
* the config and table metadata keys the branch changed, in the same manifest (recorded as an
  ``UpdateConfig`` when nothing else changed, else listed in the transaction properties);
* the transaction properties of the branch's commits (later ones winning), then the publisher's;
* the branch's stable row ids and row versions, except that every version the branch made
  becomes the publishing version: rows the branch inserted or updated are inserted or updated
  *by the publish*, which is what main's change feed and pylance's lineage columns then report.

Main having moved since is refused; with ``rebase`` the composed commit is checked against each of
main's newer commits with Lance's conflict matrix (appends and changes of other fragments are
compatible; a config key both changed is not), the new rows' ids and new fragments' ids are moved
past main's, and it is committed on top. A branch holding an overwrite is never rebased.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from lance_format.errors import BranchError, CommitConflictError, UnsupportedFeatureError
from lance_format.io import ObjectStore
from lance_format.proto import table_pb2, transaction_pb2
from lance_format.table.base_paths import BaseStores, base_uri, contained_path
from lance_format.table.commit import commit_transaction
from lance_format.table.conflicts import COMPATIBLE, check
from lance_format.table.deletion import deletion_file_path
from lance_format.table.row_versions import decode_version_sequence, encode_version_sequence
from lance_format.table.rowids import decode_row_ids, encode_row_ids
from lance_format.table.transaction import (
    IDEMPOTENCY_KEY,
    BuildOptions,
    OperationKind,
    has_stable_row_ids,
    operation_name,
)

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset

PUBLISHED_BRANCH = "lance/published_branch"
PUBLISHED_BRANCH_VERSION = "lance/published_branch_version"
PUBLISHED_COMMITS = "lance/published_commits"  # how many branch commits the publish brought to main
PUBLISHED_CONFIG = "lance/published_config"  # config keys a data publish also changed (JSON)
_PUBLISHABLE = frozenset({
    OperationKind.APPEND, OperationKind.OVERWRITE, OperationKind.UPDATE, OperationKind.DELETE, OperationKind.MERGE,
    OperationKind.PROJECT, OperationKind.REWRITE, OperationKind.DATA_REPLACEMENT, OperationKind.UPDATE_CONFIG,
    OperationKind.RESERVE_FRAGMENTS,
})
_ATTEMPTS = 8  # rebased publishes racing other writers start over this many times


def copy_file(source: ObjectStore, source_path: str, target: ObjectStore, target_path: str) -> None:
    if not target.exists(target_path):  # a second attempt after a crash finds it there already
        target.write_bytes(target_path, source.read_bytes(source_path))


def relocate_fragment(fragment: table_pb2.DataFragment, source_id: int, branch: LanceDataset,
                      main: ObjectStore) -> None:
    """Make a branch fragment's files reachable from main, in place: files inherited from main
    lose the base id that pointed at main's root; files the branch wrote are copied into main
    (its deletion file under the fragment's id on main, ``source_id`` being its id on the branch)."""
    if fragment.HasField("external_row_ids") or fragment.HasField("external_created_at_versions") or \
            fragment.HasField("external_last_updated_at_versions"):
        raise UnsupportedFeatureError("publishing fragments with external row-id files is not supported",
                                      table=branch.uri)
    root_ids = {b.id for b in branch.manifest.base_paths if b.is_dataset_root and b.path == base_uri(main)}
    bases: BaseStores = branch.base_stores
    for data_file in fragment.files:
        if data_file.HasField("base_id"):
            if data_file.base_id in root_ids:
                data_file.ClearField("base_id")
            continue  # a base main has itself: the same id in main's manifest
        store, path = bases.data_file(data_file)
        copy_file(store, path, main, contained_path("data", data_file.path, table=main.uri))
    if fragment.HasField("deletion_file"):
        deletion = fragment.deletion_file
        if deletion.HasField("base_id"):
            if deletion.base_id in root_ids:
                deletion.ClearField("base_id")
            return
        copy_file(bases.deletion_store(deletion), deletion_file_path(source_id, deletion), main,
                  deletion_file_path(fragment.id, deletion))


def publishes_of(latest: LanceDataset, since: int, branch: str) -> list[tuple[int, int]]:
    """``(main version, branch version)`` of every publish of ``branch`` after main version ``since``."""
    found = []
    for version in range(since + 1, latest.version + 1):
        txn = latest.read_transaction_message(version)
        props = dict(txn.transaction_properties) if txn is not None else {}
        if props.get(PUBLISHED_BRANCH) == branch and PUBLISHED_BRANCH_VERSION in props:
            found.append((version, int(props[PUBLISHED_BRANCH_VERSION])))
    return found


def _copy(fragment: table_pb2.DataFragment) -> table_pb2.DataFragment:
    out = table_pb2.DataFragment()
    out.CopyFrom(fragment)
    return out


def _changes(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, str | None]:
    """Keys whose value differs: the new value, or None for a removed key."""
    return {k: after.get(k) for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)}


def _only_deletions(before: table_pb2.DataFragment, after: table_pb2.DataFragment) -> bool:
    a, b = _copy(before), _copy(after)
    a.ClearField("deletion_file")
    b.ClearField("deletion_file")
    return a == b


def _apply_changes(target: Any, changes: Mapping[str, str | None]) -> None:
    for key, value in changes.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value


@dataclass
class _Plan:
    txn: transaction_pb2.Transaction
    options: BuildOptions


class _Composer:
    """The one transaction that brings main (at ``latest``) to the branch's state (``staged``)."""

    def __init__(self, main: LanceDataset, branch: str, parent: int, staged: LanceDataset,
                 latest: LanceDataset, done: list[tuple[int, int]]) -> None:
        self.branch, self.parent, self.staged, self.latest, self.done = branch, parent, staged, latest, done
        self.base_main, self.base_branch = done[-1] if done else (parent, parent)
        base = main.checkout_version((branch, self.base_branch) if done else parent)  # type: ignore[arg-type]
        self.P, self.F, self.L = base.manifest, staged.manifest, latest.manifest
        self.version = latest.version + 1
        self.moved = latest.version != self.base_main
        self.stable = has_stable_row_ids(self.F)
        self.properties: dict[str, str] = {}  # the branch commits' transaction properties (operations())
        if done and sorted(f.id for f in latest.checkout_version(self.base_main).manifest.fragments) != \
                sorted(f.id for f in self.P.fragments):
            raise BranchError(f"branch {branch!r} was last published by a rebase, which moved its fragments; "
                              "its later commits cannot be published on top (write them again)", table=main.uri)

    def operations(self) -> list[str]:
        """The operations of the commits to publish (refusing those that cannot be); their
        transaction properties are gathered in ``self.properties`` (later commits win)."""
        ops = []
        self.properties.clear()
        for version in range(self.base_branch + 1, self.staged.version + 1):
            txn = self.staged.checkout_version((self.branch, version)).read_transaction_message()  # type: ignore[arg-type]
            op = operation_name(txn) if txn is not None else None
            if txn is not None:
                self.properties.update(txn.transaction_properties)
            if op not in _PUBLISHABLE:
                raise UnsupportedFeatureError(
                    f"branch {self.branch!r}'s commit {version} is {op or 'an unrecorded operation'}; only data "
                    "writes and config changes can be published", table=self.staged.uri, version=version)
            ops.append(str(op))
        self.properties.pop(IDEMPOTENCY_KEY, None)  # a key of one branch write, not of the publish
        return ops

    def _versions(self, data: bytes, rows: int) -> bytes:
        """A version sequence with every branch version replaced by the main version publishing it."""
        values = decode_version_sequence(data, rows)
        bounds = np.array([b for _, b in self.done] + [self.staged.version], dtype=np.uint64)
        targets = np.array([m for m, _ in self.done] + [self.version], dtype=np.uint64)
        made = values > np.uint64(self.parent)
        if made.any():
            values = values.copy()
            values[made] = targets[np.searchsorted(bounds, values[made], side="left")]
        return encode_version_sequence(values)

    def _restamp(self, fragment: table_pb2.DataFragment, row_id_shift: int) -> None:
        rows = int(fragment.physical_rows)
        for field in ("inline_created_at_versions", "inline_last_updated_at_versions"):
            if fragment.HasField(field):
                setattr(fragment, field, self._versions(bytes(getattr(fragment, field)), rows))
        if row_id_shift and fragment.HasField("inline_row_ids"):
            ids = decode_row_ids(bytes(fragment.inline_row_ids), rows)
            ids = np.where(ids >= np.uint64(self.P.next_row_id), ids + np.uint64(row_id_shift), ids)
            fragment.inline_row_ids = encode_row_ids(ids)

    def plan(self, transaction_properties: Mapping[str, str], ops: list[str]) -> _Plan | None:
        P, F, L = self.P, self.F, self.L
        before = {f.id: f for f in P.fragments}
        after_ids = {f.id for f in F.fragments}
        removed = sorted(i for i in before if i not in after_ids)
        updated = [_copy(f) for f in F.fragments if f.id in before and f != before[f.id]]
        new = [_copy(f) for f in F.fragments if f.id not in before]
        sources = [f.id for f in new]
        high = L.max_fragment_id if L.HasField("max_fragment_id") else max((f.id for f in L.fragments), default=None)
        if high is not None and any(f.id <= high for f in new):  # main has used these ids meanwhile
            for offset, fragment in enumerate(sorted(new, key=lambda f: f.id)):
                fragment.id = high + 1 + offset
        shift = (L.next_row_id - P.next_row_id) if self.stable else 0
        for fragment in updated:
            self._restamp(fragment, 0)  # rows of main's fragments keep their ids
            relocate_fragment(fragment, fragment.id, self.staged, self.latest.object_store)
        for fragment, source in zip(new, sources):
            self._restamp(fragment, shift)
            relocate_fragment(fragment, source, self.staged, self.latest.object_store)
        config = _changes(dict(P.config), dict(F.config))
        metadata = _changes(dict(P.table_metadata), dict(F.table_metadata))
        schema_changed = list(P.fields) != list(F.fields) or dict(P.schema_metadata) != dict(F.schema_metadata)

        txn = transaction_pb2.Transaction(read_version=L.version, uuid=str(uuid.uuid4()))
        if schema_changed:
            gone = set(removed) | {f.id for f in updated}
            full = [_copy(f) for f in L.fragments if f.id not in gone] + updated + new
            txn.merge.fragments.extend(sorted(full, key=lambda f: f.id))
            txn.merge.schema.extend(F.fields)
            txn.merge.schema_metadata.update(F.schema_metadata)
        elif new and not updated and not removed:
            txn.append.fragments.extend(new)
        elif not new and (updated or removed) and all(_only_deletions(before[f.id], f) for f in updated):
            txn.delete.updated_fragments.extend(updated)
            txn.delete.deleted_fragment_ids.extend(removed)
        elif new or updated or removed:
            txn.update.removed_fragment_ids.extend(removed)
            txn.update.updated_fragments.extend(updated)
            txn.update.new_fragments.extend(new)
        elif config or metadata:
            for target, changes in ((txn.update_config.config_updates, config),
                                    (txn.update_config.table_metadata_updates, metadata)):
                for key, value in changes.items():
                    entry = target.update_entries.add(key=key)
                    if value is not None:
                        entry.value = value
        else:
            return None  # the branch's commits changed nothing main would see
        # what the branch's commits recorded (who wrote them, commit properties), then the publisher's
        for key, value in {**self.properties, **transaction_properties}.items():
            txn.transaction_properties[str(key)] = str(value)
        txn.transaction_properties[PUBLISHED_BRANCH] = self.branch
        txn.transaction_properties[PUBLISHED_BRANCH_VERSION] = str(self.staged.version)
        txn.transaction_properties[PUBLISHED_COMMITS] = str(len(ops))
        if config and operation_name(txn) != OperationKind.UPDATE_CONFIG:
            txn.transaction_properties[PUBLISHED_CONFIG] = json.dumps(config, sort_keys=True)
        if self.moved:
            self._check_rebase(txn, ops, before, config, metadata)

        stable, final_next_row_id = self.stable, L.next_row_id + (F.next_row_id - P.next_row_id)
        mine = {f.id: f for f in updated + new}
        data_format = F.data_format if F.data_format != P.data_format else None

        def complete(manifest: table_pb2.Manifest) -> None:
            for fragment in manifest.fragments:
                if fragment.id in mine:  # the branch's lineage, not what the operation would fill in
                    fragment.CopyFrom(mine[fragment.id])
            _apply_changes(manifest.config, config)
            _apply_changes(manifest.table_metadata, metadata)
            if stable:
                manifest.next_row_id = max(manifest.next_row_id, final_next_row_id)
            if data_format is not None:
                manifest.data_format.CopyFrom(data_format)

        options = BuildOptions(enable_stable_row_ids=stable, data_storage_version=F.data_format.version or None,
                               after_build=complete)
        return _Plan(txn, options)

    def _check_rebase(self, txn: transaction_pb2.Transaction, ops: list[str],
                      before: dict[int, table_pb2.DataFragment], config: dict[str, str | None],
                      metadata: dict[str, str | None]) -> None:
        """Refuse (CommitConflictError) unless the composed commit is compatible with every commit
        main made since the branch's base."""
        where = (f"cannot publish branch {self.branch!r}: it was taken from main version {self.base_main}, and "
                 f"main has moved to version {self.latest.version} since")
        if OperationKind.OVERWRITE in ops:
            raise CommitConflictError(f"{where} (an overwrite is never rebased over them); the branch is kept",
                                      table=self.latest.uri, version=self.latest.version)
        clashes = [k for k in config if self.L.config.get(k) != self.P.config.get(k)]
        clashes += [k for k in metadata if self.L.table_metadata.get(k) != self.P.table_metadata.get(k)]
        if clashes:
            raise CommitConflictError(f"{where}, changing {clashes} too; the branch is kept",
                                      table=self.latest.uri, version=self.latest.version)
        ours = transaction_pb2.Transaction()
        ours.CopyFrom(txn)
        ours.read_version = self.base_main
        for version in range(self.base_main + 1, self.latest.version + 1):
            theirs = self.latest.read_transaction_message(version)
            verdict = check(ours, theirs, initial_fragments=dict(before), has_affected_rows=False)
            if verdict.outcome != COMPATIBLE:
                raise CommitConflictError(f"{where} ({verdict.reason}); the branch is kept",
                                          table=self.latest.uri, version=version)


def publish_commits(main: LanceDataset, branch: str, parent: int, staged: LanceDataset, *,
                    transaction_properties: Mapping[str, str], rebase: bool) -> LanceDataset:
    """Publish the commits of ``branch`` (taken from main version ``parent``, at ``staged`` now)
    that main has not got yet as one commit; main's publishing version (see the module doc)."""
    for _ in range(_ATTEMPTS):
        latest = main.open_latest()
        done = publishes_of(latest, parent, branch)
        if done and done[-1][1] == staged.version:
            return type(main)(main.uri, done[-1][0], storage_options=main.object_store.storage_options)
        composer = _Composer(main, branch, parent, staged, latest, done)
        ops = composer.operations()
        if composer.moved and not rebase:
            raise CommitConflictError(
                f"cannot publish branch {branch!r}: it was taken from main version {composer.base_main}, and main "
                f"has moved to version {latest.version} since (publishing does not rebase); the branch is kept "
                "(re-run the write to audit it on the new main)", table=main.uri, version=latest.version)
        plan = composer.plan(transaction_properties, ops)
        if plan is None:
            return latest
        try:
            committed = commit_transaction(latest.object_store, plan.txn, options=plan.options, require_unchanged=True)
        except CommitConflictError:
            continue  # another writer committed first: look again (a concurrent publish of this branch wins)
        return type(main)(main.uri, committed.version, storage_options=main.object_store.storage_options)
    raise CommitConflictError(f"cannot publish branch {branch!r}: other writers kept committing first",
                              table=main.uri, version=parent)


__all__ = ["publish_commits", "publishes_of", "relocate_fragment", "PUBLISHED_BRANCH", "PUBLISHED_BRANCH_VERSION",
           "PUBLISHED_COMMITS", "PUBLISHED_CONFIG"]
