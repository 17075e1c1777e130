"""Automatic cleanup after commits, as official Lance does it (``lance.auto_cleanup.*`` config).

A commit of a version divisible by ``lance.auto_cleanup.interval`` runs ``cleanup_old_versions``
with the configured ``older_than``/``retain_versions`` (see :mod:`lance_format.table.auto_cleanup`).
Like official Lance, the cleanup sees the table as the committing writer read it (the version
before the new one), never fails the commit (errors are logged), and neither removes tagged
versions nor raises for them.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING

from lance_format.dataset.maintenance.cleanup import cleanup_old_versions
from lance_format.table.auto_cleanup import OLDER_THAN_KEY, RETAIN_VERSIONS_KEY, parse_duration

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset
    from lance_format.proto import table_pb2

log = logging.getLogger(__name__)


def run_auto_cleanup(read_version: LanceDataset, manifest: table_pb2.Manifest) -> None:
    """Clean up after the commit of ``manifest``, seeing the table at ``read_version``; logs errors."""

    try:
        older = manifest.config.get(OLDER_THAN_KEY)
        retain = manifest.config.get(RETAIN_VERSIONS_KEY)
        older_than = parse_duration(older) if older is not None else None
        retain_versions = int(retain) if retain is not None else None
        if older_than is None and retain_versions is None:
            older_than = timedelta(0)  # official Lance's empty policy: every version before the read one
        stats = cleanup_old_versions(read_version, older_than, retain_versions, error_if_tagged_old_versions=False)
        log.info("automatic cleanup after version %d of %s: %s", manifest.version, read_version.uri, stats)
    except Exception as exc:  # the commit has landed; a failed cleanup must not fail it
        log.error("automatic cleanup after version %d of %s failed: %s", manifest.version, read_version.uri, exc)
