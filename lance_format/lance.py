"""The names of pylance's native module ``lance.lance`` that its Python code and users import:
the distributed-compaction classes (see :mod:`lance_format.optimize`), file helpers
(:func:`stable_version`) and :func:`manifest_needs_migration`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lance_format.file.api import stable_version
from lance_format.optimize import (
    Compaction,
    CompactionMetrics,
    CompactionOptions,
    CompactionPlan,
    CompactionTask,
    RewriteResult,
)

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset


def manifest_needs_migration(dataset: LanceDataset) -> bool:
    """Whether the dataset's manifest lacks what old writers left out and newer ones record:
    a writer version, each fragment's physical row count, each deletion file's deleted-row count
    (official Lance fills these in on its next commit)."""
    manifest = dataset.manifest
    if not manifest.HasField("writer_version"):
        return True
    return any(
        (fragment.physical_rows == 0 and len(fragment.files) > 0)
        or (fragment.HasField("deletion_file") and fragment.deletion_file.num_deleted_rows == 0)
        for fragment in manifest.fragments
    )


__all__ = ["Compaction", "CompactionMetrics", "CompactionOptions", "CompactionPlan", "CompactionTask",
           "RewriteResult", "manifest_needs_migration", "stable_version"]
