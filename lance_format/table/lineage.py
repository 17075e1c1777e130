"""Row ids and row-version sequences filled in at commit time, the way pylance 14 does it.

* New fragments of ``Append`` / ``Overwrite`` get fresh row ids from ``next_row_id`` and uniform
  version sequences (created = last updated = the commit's version).
* ``Update`` fragments arrive with the row ids they preserve (possibly only a prefix: merge-insert
  puts the updated rows first and leaves the inserted ones to the commit). The missing ids are
  appended from ``next_row_id`` (the whole sequence is then re-encoded with ``from_slice``),
  ``created_at`` is looked up by row id in the current fragments (rows not found were inserted
  by this commit) and ``last_updated_at`` is the commit's version for every row.
* ``Merge`` (new columns) marks every row of a fragment whose data files changed as updated at
  the commit's version; created_at is untouched. Fragments a Merge adds (a write that brings
  new columns) are treated as an Append's new fragments.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from lance_format.errors import CorruptFileError
from lance_format.proto import table_pb2
from lance_format.table.row_versions import encode_version_sequence, read_created_at, uniform_version_sequence
from lance_format.table.rowids import decode_row_ids, encode_row_ids, read_row_ids

_ROW_ID_FIELDS = ("inline_row_ids", "external_row_ids")


def _has(fragment: table_pb2.DataFragment, names: Sequence[str]) -> bool:
    return any(fragment.HasField(n) for n in names)


def assign_row_ids(fragments: Iterable[table_pb2.DataFragment], next_row_id: int) -> int:
    """Give every row without an id one from ``next_row_id``; return the new ``next_row_id``.

    A fragment with no sequence gets ``Range[next, next+rows)``; a fragment with a shorter
    (inline) sequence keeps its ids and gets the rest appended (Lance ``assign_row_ids``).
    """
    for fragment in fragments:
        rows = int(fragment.physical_rows)
        if fragment.HasField("external_row_ids"):
            continue  # external sequences are complete by construction
        if not fragment.HasField("inline_row_ids"):
            fragment.inline_row_ids = encode_row_ids(np.arange(next_row_id, next_row_id + rows, dtype=np.uint64))
            next_row_id += rows
            continue
        existing = decode_row_ids(bytes(fragment.inline_row_ids))
        if existing.size == rows:
            continue
        if existing.size > rows:
            raise CorruptFileError(
                f"fragment {fragment.id} carries {existing.size} row ids for {rows} rows"
            )
        extra = np.arange(next_row_id, next_row_id + rows - existing.size, dtype=np.uint64)
        fragment.inline_row_ids = encode_row_ids(np.concatenate([existing, extra]))
        next_row_id += int(extra.size)
    return next_row_id


def carries_all_row_ids(store: Any, fragment: table_pb2.DataFragment) -> bool:
    """Whether a new fragment already has a row id for every row (it holds only moved rows;
    pylance counts an inline sequence only)."""
    if not fragment.HasField("inline_row_ids"):
        return False
    return decode_row_ids(bytes(fragment.inline_row_ids)).size == int(fragment.physical_rows)


def set_uniform_versions(fragment: table_pb2.DataFragment, version: int, *, created: bool = True) -> None:
    """One run ``(Range[0, rows), version)`` for last_updated (and created, if asked)."""
    seq = uniform_version_sequence(int(fragment.physical_rows), version)
    fragment.ClearField("external_last_updated_at_versions")
    fragment.inline_last_updated_at_versions = seq
    if created:
        fragment.ClearField("external_created_at_versions")
        fragment.inline_created_at_versions = seq


def fill_new_fragment_versions(fragments: Iterable[table_pb2.DataFragment], version: int) -> None:
    """Append/Overwrite: sequences that are still missing become uniform at ``version``."""
    for fragment in fragments:
        seq = uniform_version_sequence(int(fragment.physical_rows), version)
        if not _has(fragment, ("inline_created_at_versions", "external_created_at_versions")):
            fragment.inline_created_at_versions = seq
        if not _has(fragment, ("inline_last_updated_at_versions", "external_last_updated_at_versions")):
            fragment.inline_last_updated_at_versions = seq


def created_at_of(store: Any, fragments: Iterable[table_pb2.DataFragment], row_ids: np.ndarray,
                  default: int) -> np.ndarray:
    """``_row_created_at_version`` of ``row_ids`` looked up in ``fragments`` (deleted rows count:
    an updated row's old copy is deleted by the same commit); ``default`` where not found.

    Works fragment by fragment, so memory stays bounded by the largest fragment's sequence.
    """
    row_ids = np.asarray(row_ids, dtype=np.uint64)
    wanted = np.unique(row_ids)
    result = np.full(wanted.size, default, dtype=np.uint64)
    if wanted.size == 0:
        return result
    for fragment in fragments:
        ids = read_row_ids(store, fragment)
        if ids is None:
            continue
        pos = np.searchsorted(wanted, ids)
        hit = (pos < wanted.size) & (wanted[np.minimum(pos, wanted.size - 1)] == ids)
        if not hit.any():
            continue
        created = read_created_at(store, fragment, int(fragment.physical_rows))
        values = created[hit] if created is not None else np.ones(int(hit.sum()), dtype=np.uint64)  # pylance: 1
        result[pos[hit]] = values
    return result[np.searchsorted(wanted, row_ids)]


def fill_update_versions(
    store: Any, fragments: Iterable[table_pb2.DataFragment], existing: Iterable[table_pb2.DataFragment], version: int
) -> None:
    """Update's new fragments: created_at preserved by row id, last_updated = ``version``."""
    existing = list(existing)
    for fragment in fragments:
        rows = int(fragment.physical_rows)
        if not fragment.HasField("inline_row_ids"):
            set_uniform_versions(fragment, version)
            continue
        row_ids = decode_row_ids(bytes(fragment.inline_row_ids), rows)
        created = created_at_of(store, existing, row_ids, version)
        fragment.ClearField("external_created_at_versions")
        fragment.inline_created_at_versions = encode_version_sequence(created)
        set_uniform_versions(fragment, version, created=False)


def mark_changed_fragments_updated(
    fragments: Iterable[table_pb2.DataFragment],
    previous: dict[int, table_pb2.DataFragment],
    version: int,
) -> None:
    """Merge: fragments whose data files changed get last_updated = ``version`` for every row."""
    for fragment in fragments:
        before = previous.get(fragment.id)
        if before is not None and list(before.files) == list(fragment.files):
            continue
        set_uniform_versions(fragment, version, created=False)
        if not _has(fragment, ("inline_created_at_versions", "external_created_at_versions")):
            fragment.inline_created_at_versions = uniform_version_sequence(int(fragment.physical_rows), 1)


__all__ = [
    "assign_row_ids",
    "set_uniform_versions",
    "fill_new_fragment_versions",
    "created_at_of",
    "fill_update_versions",
    "mark_changed_fragments_updated",
]
