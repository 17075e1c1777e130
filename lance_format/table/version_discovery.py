"""Finding a table's new versions cheaply, and summarizing one version from its manifest alone.

Listing ``_versions/`` costs one entry per version ever kept (10,000 after 10,000 commits).
Instead, starting from a known version (e.g. a sensor's cursor), :func:`new_versions` probes the
manifest names of the following versions directly (:func:`~lance_format.table.naming.manifest_path`
in the table's naming scheme) and uses ``latest_version_hint.json`` as a starting point that is
always verified (the hint is advisory and may be stale, garbage or missing). Versions are
contiguous, except that cleanup may remove old ones (a gap after the cursor is crossed with the
hint's help). One full listing is the fallback when the table's naming cannot be told from the
probed names, or when the version after the cursor is missing and there is no hint (writers
that never write hints).

:func:`summarize_version` reads what a version is (row count, schema, operation, transaction
properties, commit time) from its manifest and transaction, without opening any data file.
:class:`TableVersions` bundles both behind one opened store.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lance_format.io import ObjectStore, object_store_for
from lance_format.proto import table_pb2, transaction_pb2
from lance_format.schema import LanceSchema
from lance_format.table.commit import HINT_PATH
from lance_format.table.deletion import live_row_count
from lance_format.table.manifest import read_manifest
from lance_format.table.naming import LATEST_ONLY, ManifestNaming, list_versions, manifest_path
from lance_format.table.transaction import load_transaction, operation_name

TableLocation = str | os.PathLike[str] | ObjectStore


@dataclass(frozen=True)
class NewVersions:
    """Committed versions after a starting version, as found by :func:`new_versions`.

    ``versions``: ascending, all greater than the starting version. ``naming``: the table's
    manifest naming scheme (None when there is no table). ``listed``: the fallback full listing
    of ``_versions/`` was needed. ``more``: ``limit`` cut the list short.
    """

    versions: list[int]
    naming: ManifestNaming | None
    listed: bool
    more: bool = False

    def path(self, version: int) -> str:
        """Table-relative path of ``version``'s manifest."""
        return manifest_path(version, self.naming or ManifestNaming.V2)


@dataclass(frozen=True)
class VersionSummary:
    """What one version is, read from its manifest and transaction (no data file is opened).

    ``row_count``: live rows (physical rows minus recorded deletions). ``operation``: the
    transaction's operation (``"append"``, ``"overwrite"``, ``"update"``, ``"merge"``, ...),
    None when the version records no transaction. ``timestamp``: the commit time, in UTC.
    """

    version: int
    timestamp: dt.datetime
    row_count: int
    schema: pa.Schema
    operation: str | None
    transaction_properties: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_manifest(
        cls, manifest: table_pb2.Manifest, transaction: transaction_pb2.Transaction | None
    ) -> VersionSummary:
        """The summary of an already read manifest and its transaction."""
        ts = manifest.timestamp
        return cls(
            version=int(manifest.version),
            timestamp=dt.datetime.fromtimestamp(ts.seconds + ts.nanos / 1e9, tz=dt.UTC),
            row_count=int(sum(live_row_count(f) for f in manifest.fragments)),
            schema=LanceSchema.from_protos(list(manifest.fields), dict(manifest.schema_metadata)).to_arrow(),
            operation=operation_name(transaction) if transaction is not None else None,
            transaction_properties=dict(transaction.transaction_properties) if transaction is not None else {},
        )


def _hint(store: ObjectStore) -> int | None:
    try:
        value = json.loads(store.read_bytes(HINT_PATH)).get("version")
    except Exception:  # missing or garbage: the hint is advisory only
        return None
    return value if isinstance(value, int) and value > 0 else None


def _exists(store: ObjectStore, version: int, naming: ManifestNaming) -> bool:
    return store.exists(manifest_path(version, naming))


def detect_naming(store: ObjectStore, candidates: list[int]) -> ManifestNaming | None:
    """The naming scheme of the first candidate version whose manifest exists (V2 tried first)."""
    for version in candidates:
        if version <= 0:
            continue
        for naming in (ManifestNaming.V2, ManifestNaming.V1):
            if _exists(store, version, naming):
                return naming
    return None


def _listed(store: ObjectStore, after: int, limit: int) -> NewVersions:
    listing = list_versions(store, since=after + 1)
    found = sorted(v for v in listing.versions if v > after)
    return NewVersions(found[:limit], listing.naming, listed=True, more=len(found) > limit)


def new_versions(table: TableLocation, after: int, *, limit: int = 1000,
                 storage_options: Mapping[str, Any] | None = None) -> NewVersions:
    """Committed versions greater than ``after`` (at most ``limit``), found without listing history."""
    store = object_store_for(table, storage_options)
    if store.manifest_store is not None:
        # Probing final manifest names would miss a version whose commit is still staged.
        return _listed(store, after, limit)
    hint = _hint(store)
    naming = detect_naming(store, [after + 1, after] + ([hint] if hint else []))
    if naming is None:
        return _listed(store, after, limit)
    found: list[int] = []
    version = after + 1
    if hint is None and not _exists(store, version, naming):
        # Nothing right after the cursor and no hint to tell a gap from "no new versions".
        return _listed(store, after, limit)
    if hint is not None and hint > after and not _exists(store, version, naming):
        # The next version is gone (cleaned up): visit the gap up to the hint, then walk on.
        for candidate in range(after + 2, hint + 1):
            if len(found) >= limit:
                return NewVersions(found, naming, listed=False, more=True)
            if _exists(store, candidate, naming):
                found.append(candidate)
        version = hint + 1
    while _exists(store, version, naming):
        if len(found) >= limit:
            return NewVersions(found, naming, listed=False, more=True)
        found.append(version)
        version += 1
    return NewVersions(found, naming, listed=False)


def latest_version(table: TableLocation, *, storage_options: Mapping[str, Any] | None = None) -> int | None:
    """The latest version, starting from the (verified) hint; None when there is no table."""
    store = object_store_for(table, storage_options)
    hint = _hint(store) if store.manifest_store is None else None
    if hint is not None:
        result = new_versions(store, hint - 1, limit=1 << 62)
        if result.versions:
            return result.versions[-1]
    return list_versions(store, since=LATEST_ONLY).latest  # no usable hint: one listing (one page with V2 names)


def summarize_version(table: TableLocation, version: int, naming: ManifestNaming | None = None, *,
                      storage_options: Mapping[str, Any] | None = None) -> VersionSummary:
    """One version's summary, its manifest read directly by name (no listing).

    ``naming``: the table's scheme when known (e.g. from :attr:`NewVersions.naming`); else it is
    probed from ``version``'s manifest name.
    """
    store = object_store_for(table, storage_options)
    if naming is None:
        naming = detect_naming(store, [version]) or ManifestNaming.V2
    manifest_file = read_manifest(store, manifest_path(version, naming))
    return VersionSummary.from_manifest(manifest_file.manifest, load_transaction(store, manifest_file))


class TableVersions:
    """The committed versions of the table at ``uri``, found and summarized through one opened store.

    Cheap to keep: nothing is read until a method is called, and every method costs in proportion
    to the versions it looks at, not to the table's history.
    """

    def __init__(self, uri: TableLocation, *, storage_options: Mapping[str, Any] | None = None) -> None:
        self._store = object_store_for(uri, storage_options)
        self._naming: ManifestNaming | None = None

    @property
    def uri(self) -> str:
        """The table's URI, as its object store resolved it."""
        return self._store.uri

    def after(self, version: int, *, limit: int = 1000) -> NewVersions:
        """Versions greater than ``version`` (at most ``limit``); see :func:`new_versions`."""
        found = new_versions(self._store, version, limit=limit)
        self._naming = found.naming or self._naming
        return found

    def latest(self) -> int | None:
        """The latest version, or None when there is no table."""
        return latest_version(self._store)

    def exists(self, version: int) -> bool:
        """Whether ``version``'s manifest is (still) there."""
        return self.after(version - 1, limit=1).versions[:1] == [version]

    def summary(self, version: int) -> VersionSummary:
        """Row count, schema, operation and properties of ``version``, from its manifest alone."""
        return summarize_version(self._store, version, self._naming)


__all__ = [
    "NewVersions", "VersionSummary", "TableVersions", "new_versions", "latest_version", "summarize_version",
    "detect_naming",
]
