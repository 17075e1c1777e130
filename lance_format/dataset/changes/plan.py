"""Change-feed planning: which physical rows changed between two versions, from metadata only.

Nothing here opens a data file. Decisions come from the manifests (fragment ids, data-file
paths, deletion-file descriptors, row-id and row-version sequences), the transactions and the
deletion files:

* a fragment present in both versions with the same rows (same id, same row count, same row-id
  sequence, no data file removed) and the same deletion file and last-updated sequence is
  skipped without any I/O;
* for such a fragment with a new deletion file only the *newly* deleted offsets (and, after a
  restore, revived ones) are considered;
* every other fragment's live rows are "gone" (older version) or "new" (newer version); rows
  are matched across versions by stable row id: matched rows whose
  ``_row_last_updated_at_version`` differs were updated, matched rows with the same value only
  moved (compaction), unmatched rows were deleted or inserted.

Positions are ``(fragment index in the version's fragment list, physical offset)``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from lance_format.dataset.changes.lineage_lookup import (
    CREATED_AT,
    LAST_UPDATED_AT,
    any_version_in,
    latest_versions,
    row_ids_at,
    versions_at,
    versions_mask,
)
from lance_format.errors import InvalidInputError
from lance_format.proto import table_pb2
from lance_format.table.transaction import OperationKind

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset
    from lance_format.dataset.fragment import LanceFragment

# Operations that never change a row's values or membership: compaction moves rows but keeps
# their ids and lineage; the others touch only indices, config or the schema's column set.
NO_CHANGE_OPERATIONS = frozenset({
    OperationKind.RESERVE_FRAGMENTS, OperationKind.REWRITE, OperationKind.CREATE_INDEX, OperationKind.UPDATE_CONFIG,
    OperationKind.PROJECT,
})


@dataclass
class RowRefs:
    """Physical rows of one version, with their stable row id and last-updated version."""

    frag: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    offset: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    row_id: np.ndarray = field(default_factory=lambda: np.empty(0, np.uint64))
    last_updated: np.ndarray = field(default_factory=lambda: np.empty(0, np.uint64))

    def __len__(self) -> int:
        return int(self.offset.size)

    @staticmethod
    def concat(parts: Iterable[RowRefs]) -> RowRefs:
        parts = [p for p in parts if len(p)]
        if not parts:
            return RowRefs()
        return RowRefs(*(np.concatenate([getattr(p, n) for p in parts]) for n in _COLUMNS))

    def select(self, index: np.ndarray | slice) -> RowRefs:
        return RowRefs(*(getattr(self, n)[index] for n in _COLUMNS))

    def sorted_by_position(self) -> RowRefs:
        return self.select(np.lexsort((self.offset, self.frag)))


_COLUMNS = ("frag", "offset", "row_id", "last_updated")


@dataclass
class VersionChanges:
    """What one commit did, as positions in the previous (``deleted``, ``updated_pre``) and the
    committed (``inserted``, ``updated_post``) version. ``*_whole`` list fragment indices whose
    live rows all changed (an overwrite), kept as fragments so they are never materialized as
    position arrays."""

    deleted: RowRefs = field(default_factory=RowRefs)
    inserted: RowRefs = field(default_factory=RowRefs)
    updated_pre: RowRefs = field(default_factory=RowRefs)
    updated_post: RowRefs = field(default_factory=RowRefs)
    deleted_whole: list[int] = field(default_factory=list)
    inserted_whole: list[int] = field(default_factory=list)

    def is_empty(self) -> bool:
        rows = len(self.deleted) + len(self.inserted) + len(self.updated_pre)
        return rows == 0 and not self.deleted_whole and not self.inserted_whole


# -- fragment metadata -------------------------------------------------------------------------
def _same_oneof(a: table_pb2.DataFragment, b: table_pb2.DataFragment, oneof: str) -> bool:
    kind = a.WhichOneof(oneof)
    return kind == b.WhichOneof(oneof) and (kind is None or getattr(a, kind) == getattr(b, kind))


def same_rows(a: table_pb2.DataFragment, b: table_pb2.DataFragment) -> bool:
    """Whether two fragment descriptors hold the same physical rows (possibly with columns added)."""
    if a.id != b.id or a.physical_rows != b.physical_rows:
        return False
    if not {f.path for f in a.files} <= {f.path for f in b.files}:
        return False  # a data file was replaced or removed: treat as different rows
    return _same_oneof(a, b, "row_id_sequence")


def same_deletions(a: table_pb2.DataFragment, b: table_pb2.DataFragment) -> bool:
    if a.HasField("deletion_file") != b.HasField("deletion_file"):
        return False
    return not a.HasField("deletion_file") or a.deletion_file == b.deletion_file


def same_last_updated(a: table_pb2.DataFragment, b: table_pb2.DataFragment) -> bool:
    return _same_oneof(a, b, "last_updated_at_version_sequence")


def require_stable_row_ids(dataset: LanceDataset, what: str) -> None:
    if not dataset.has_stable_row_ids:
        raise InvalidInputError(
            f"{what} stable row ids, version {dataset.version} does not use them "
            "(create the table with enable_stable_row_ids=True)",
            table=dataset.uri,
            version=dataset.version,
        )


def _rows(index: int, fragment: LanceFragment, offsets: np.ndarray | None = None, lineage: bool = True) -> RowRefs:
    """Rows at ``offsets`` (default: every live row); ``lineage=False`` leaves last_updated at 0."""
    if offsets is None:
        offsets = fragment.live_offsets()
    offsets = offsets.astype(np.int64, copy=False)
    return RowRefs(
        np.full(offsets.size, index, np.int64),
        offsets,
        row_ids_at(fragment, offsets),
        versions_at(fragment, LAST_UPDATED_AT, offsets) if lineage else np.zeros(offsets.size, np.uint64),
    )


# -- diffing two versions ----------------------------------------------------------------------
@dataclass
class _Diff:
    gone: list[RowRefs] = field(default_factory=list)  # rows of the older version that left their place
    new: list[RowRefs] = field(default_factory=list)  # rows of the newer version that took a new place
    pre: list[RowRefs] = field(default_factory=list)  # rows rewritten in place (lineage changed)
    post: list[RowRefs] = field(default_factory=list)


def _diff(old: LanceDataset | None, new: LanceDataset, track_in_place: bool) -> _Diff:
    # Compare descriptors first: only fragments whose descriptor changed are wrapped and read.
    old_meta = old.manifest.fragments if old is not None else []
    by_id = {f.id: i for i, f in enumerate(old_meta)}
    matched: set[int] = set()
    diff = _Diff()
    for j, new_pb in enumerate(new.manifest.fragments):
        i = by_id.get(new_pb.id)
        if i is not None and old_meta[i] == new_pb:
            matched.add(i)
            continue  # identical descriptor: untouched, decided without reading anything
        nf = new.fragment_at(j)
        if i is None or not same_rows(old_meta[i], new_pb):
            diff.new.append(_rows(j, nf, lineage=track_in_place))
            continue
        matched.add(i)
        same_del = same_deletions(old_meta[i], new_pb)
        same_lu = not track_in_place or same_last_updated(old_meta[i], new_pb)
        if same_del and same_lu:
            continue  # untouched fragment: decided without reading anything
        of = old.fragment_at(i)  # type: ignore[union-attr]  # old_meta is empty without old
        old_del, new_del = of.deleted_offsets, nf.deleted_offsets
        if not same_del:
            diff.gone.append(_rows(i, of, np.setdiff1d(new_del, old_del, assume_unique=True), track_in_place))
            diff.new.append(_rows(j, nf, np.setdiff1d(old_del, new_del, assume_unique=True), track_in_place))
        if not same_lu:
            live = np.ones(nf.physical_rows, bool)
            live[old_del] = False
            live[new_del] = False
            both = np.flatnonzero(live)
            changed = both[versions_at(of, LAST_UPDATED_AT, both) != versions_at(nf, LAST_UPDATED_AT, both)]
            diff.pre.append(_rows(i, of, changed))
            diff.post.append(_rows(j, nf, changed))
    for i in range(len(old_meta)):
        if i not in matched:
            # old_meta is empty without old.
            diff.gone.append(_rows(i, old.fragment_at(i), lineage=track_in_place))  # type: ignore[union-attr]
    return diff


def plan_version(old: LanceDataset | None, new: LanceDataset, operation: str | None) -> VersionChanges:
    """The rows one commit (``old`` -> ``new``, consecutive versions) deleted, updated, inserted."""
    if operation in NO_CHANGE_OPERATIONS:
        return VersionChanges()
    if operation == OperationKind.OVERWRITE:
        # Documented semantics: an overwrite replaces every row, even if ids or values coincide.
        old_count = len(old.get_fragments()) if old is not None else 0
        new_count = len(new.get_fragments())
        return VersionChanges(deleted_whole=list(range(old_count)), inserted_whole=list(range(new_count)))
    diff = _diff(old, new, track_in_place=True)
    gone, arrived = RowRefs.concat(diff.gone), RowRefs.concat(diff.new)
    _, gi, ni = np.intersect1d(gone.row_id, arrived.row_id, return_indices=True)
    updated = gone.last_updated[gi] != arrived.last_updated[ni]
    pre = RowRefs.concat([*diff.pre, gone.select(gi[updated])])
    post = RowRefs.concat([*diff.post, arrived.select(ni[updated])])
    order = np.lexsort((post.offset, post.frag))
    deleted_mask = np.ones(len(gone), bool)
    deleted_mask[gi] = False
    inserted_mask = np.ones(len(arrived), bool)
    inserted_mask[ni] = False
    return VersionChanges(
        deleted=gone.select(np.flatnonzero(deleted_mask)).sorted_by_position(),
        inserted=arrived.select(np.flatnonzero(inserted_mask)).sorted_by_position(),
        updated_pre=pre.select(order),
        updated_post=post.select(order),
    )


def deleted_row_ids(begin: LanceDataset | None, end: LanceDataset) -> np.ndarray:
    """Sorted row ids live at ``begin`` and not live at ``end`` (``begin=None`` is version 0)."""
    if begin is None:
        return np.empty(0, np.uint64)
    diff = _diff(begin, end, track_in_place=False)
    gone = RowRefs.concat(diff.gone).row_id
    if gone.size == 0:
        return gone
    # Rows that moved (compaction, update, restore) are still live at the end.
    return np.setdiff1d(gone, RowRefs.concat(diff.new).row_id)


def lineage_candidates(dataset: LanceDataset, begin: int) -> list[int]:
    """Indices of the fragments that may hold rows inserted or updated after ``begin``.

    A row is never created after its last update, so only fragments with some
    ``last_updated > begin`` qualify. The highest last-updated version of every fragment is
    worked out once per dataset object (from the run-length sequences in the manifest; no file
    is read) and shared by ``get_inserted_rows`` and ``get_updated_rows``.
    """
    latest = dataset.__dict__.get("_delta_latest_updates")
    if latest is None:
        metas = dataset.manifest.fragments
        latest = np.fromiter((max(latest_versions(dataset, m, LAST_UPDATED_AT)) for m in metas), np.uint64, len(metas))
        dataset.__dict__["_delta_latest_updates"] = latest
    return np.flatnonzero(latest > np.uint64(begin)).tolist()


def lineage_offsets(fragment: LanceFragment, begin: int, end: int, updated: bool) -> np.ndarray | None:
    """Live physical offsets of ``fragment`` that pylance's delta reports as inserted
    (``begin < created <= end``) or updated (``created <= begin < last_updated <= end``), or
    None when the run-length lineage proves there are none (no data or deletion file is read)."""
    # A row is never created after its last update, so last_updated <= begin everywhere rules
    # out both kinds; get_inserted_rows and get_updated_rows then share one parsed sequence.
    if not any_version_in(fragment, LAST_UPDATED_AT, begin, None):
        return None
    if updated:
        mask = versions_mask(fragment, LAST_UPDATED_AT, begin, end)
        if mask is None:
            return None
        created = versions_mask(fragment, CREATED_AT, begin, None)
        if created is not None:
            mask &= ~created  # keep rows created at or before begin
    else:
        mask = versions_mask(fragment, CREATED_AT, begin, end)
        if mask is None:
            return None
    if fragment.num_deletions:
        mask[fragment.deleted_offsets] = False
    offsets = np.flatnonzero(mask)
    return offsets if offsets.size else None
