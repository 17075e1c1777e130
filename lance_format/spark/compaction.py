"""Compaction of small fragments after a Spark write commits (opt-in, like Delta's auto compaction).

Every write task leaves at least one file, so many small writes (micro-batches, merges of a
few rows, DataFrames of many partitions) leave many small fragments that slow every scan.
With ``compact_small_fragments`` (``.option("compactSmallFragments", "true")`` on the data
source and the streaming sink), once a write has committed and the table holds at least
``min_small_fragments`` small fragments (default 50, Delta's ``autoCompact.minNumFiles``), the
small fragments are rewritten into files near the target size in a second commit: a
``Rewrite`` (pylance's ``compact_files``, restricted to the small files), so readers see the
same rows, stable row ids and row versions do not change, and the change feed shows no change.

Like Delta's auto compaction it is off by default and runs synchronously, in the process that
commits (the driver; for ``df.write.format("lance")`` and the streaming sink, Spark's commit
worker on the driver host): it reads and writes only files below 1/8 of the target size, but
a backlog of many such files takes a while. A compaction that fails (e.g. a conflicting
concurrent commit) leaves the write committed and is reported by a warning.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from typing import Any

from lance_format.distributed import LanceDataset, ObjectStore, compact_files
from lance_format.errors import InvalidInputError
from lance_format.spark.common import (
    DEFAULT_TARGET_BYTES_PER_FILE,
    DEFAULT_TARGET_ROWS_PER_FILE,
    CommitResult,
    is_small_fragment,
)

DEFAULT_MIN_SMALL_FRAGMENTS = 50  # Delta's spark.databricks.delta.autoCompact.minNumFiles


@dataclass(frozen=True)
class AutoCompaction:
    """When and to what size small fragments are compacted after a write."""

    min_small_fragments: int = DEFAULT_MIN_SMALL_FRAGMENTS
    target_rows: int = DEFAULT_TARGET_ROWS_PER_FILE
    target_bytes: int = DEFAULT_TARGET_BYTES_PER_FILE


def auto_compaction(setting: bool | int | str | None, target_rows: int, target_bytes: int,
                    min_small_fragments: int | str | None = None) -> AutoCompaction | None:
    """The policy for a ``compact_small_fragments`` setting: ``False``/``None``/``"false"`` (off),
    ``True``/``"true"`` (on), or a number (on, compacting once that many small fragments exist)."""
    if setting is None or setting is False:
        return None
    minimum = DEFAULT_MIN_SMALL_FRAGMENTS
    if setting is not True:
        text = str(setting).strip().lower()
        if text in ("false", ""):
            return None
        if text != "true":
            try:
                minimum = int(text)
            except ValueError:
                raise InvalidInputError(f"compact_small_fragments must be true, false or a fragment count, "
                                        f"got {setting!r}") from None
    if min_small_fragments is not None and str(min_small_fragments).strip():
        try:
            minimum = int(str(min_small_fragments).strip())
        except ValueError:
            raise InvalidInputError(f"the minimum number of small fragments must be an integer, "
                                    f"got {min_small_fragments!r}") from None
    if minimum < 1:
        raise InvalidInputError(f"the minimum number of small fragments must be positive, got {minimum}")
    return AutoCompaction(minimum, int(target_rows), int(target_bytes))


def _rows_per_file(fragments: list, policy: AutoCompaction) -> int:
    """The target rows of a compacted file: ``target_rows``, or fewer when the rows are wide
    enough that that many would exceed ``target_bytes`` (measured on the small files)."""
    rows = sum(f.physical_rows for f in fragments)
    size = sum(d.file_size_bytes for f in fragments for d in f.files)
    if rows <= 0 or size <= 0:
        return policy.target_rows
    return max(1, min(policy.target_rows, policy.target_bytes * rows // size))


def compact_after_write(store: ObjectStore, result: CommitResult, policy: AutoCompaction | None) -> CommitResult:
    """``result`` after compacting the table's small fragments, if ``policy`` asks for it and the
    table holds enough of them; ``table_fragments`` is the table's fragment count afterwards."""
    if policy is None or result.skipped:
        return result
    ds = LanceDataset(store)
    fragments = list(ds.manifest.fragments)
    small = [f for f in fragments if is_small_fragment(f, policy.target_rows, policy.target_bytes)]
    if len(small) < policy.min_small_fragments:
        return replace(result, table_fragments=len(fragments))
    try:
        metrics = compact_files(ds, target_rows_per_fragment=_rows_per_file(small, policy),
                                materialize_deletions=False, fragment_ids=[f.id for f in small])
    except Exception as exc:  # the write itself is committed: keep it, say why nothing was compacted
        warnings.warn(f"compacting the small fragments after version {result.version} failed: {exc}",
                      RuntimeWarning, stacklevel=2)
        return replace(result, table_fragments=len(fragments))
    if not metrics.fragments_removed:
        return replace(result, table_fragments=len(fragments))
    return replace(result, compaction_version=ds.version, fragments_compacted=metrics.fragments_removed,
                   fragments_from_compaction=metrics.fragments_added, table_fragments=len(ds.manifest.fragments))


def compaction_from_options(options: Any, plan: Any) -> AutoCompaction | None:
    """The policy of data source / streaming sink options (``compactSmallFragments``,
    ``compactMinSmallFragments``; the targets are ``target_rows_per_file`` / ``target_bytes_per_file``)."""
    return auto_compaction(options.get("compactSmallFragments"), plan.target_rows_per_file,
                           plan.target_bytes_per_file, options.get("compactMinSmallFragments"))


__all__ = ["AutoCompaction", "DEFAULT_MIN_SMALL_FRAGMENTS", "auto_compaction", "compact_after_write",
           "compaction_from_options"]
