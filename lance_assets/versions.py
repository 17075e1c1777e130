"""Finding new versions of a table cheaply: cost proportional to the new versions, not the history.

Listing ``_versions/`` costs one entry per version ever kept (10,000 after 10,000 commits).
Instead, starting from a known version (a sensor's cursor), this probes the manifest names of
the following versions directly: ``{u64::MAX - v:020}.manifest`` (V2 naming) or ``{v}.manifest``
(V1), and uses ``latest_version_hint.json`` as a starting point that is always verified (the
hint is advisory and may be stale, garbage or missing). Versions are contiguous, except that
cleanup may remove old ones (a gap after the cursor is crossed with the hint's help). One full
listing is the fallback when the table's naming cannot be told from the probed names, or when
the version after the cursor is missing and there is no hint (writers that never write hints).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from lance_format.io import ObjectStore, object_store_for
from lance_format.proto import table_pb2
from lance_format.table.manifest import read_manifest
from lance_format.table.naming import ManifestNaming, list_versions, manifest_path

HINT = "_versions/latest_version_hint.json"


@dataclass(frozen=True)
class NewVersions:
    versions: list[int]  # ascending, all > the starting version
    naming: ManifestNaming | None
    listed: bool  # True when the fallback full listing was needed
    more: bool = False  # True when ``limit`` cut the list short

    def path(self, version: int) -> str:
        return manifest_path(version, self.naming or ManifestNaming.V2)


def _hint(store: ObjectStore) -> int | None:
    try:
        value = json.loads(store.read_bytes(HINT)).get("version")
    except (OSError, ValueError, AttributeError, Exception):  # missing or garbage: advisory only
        return None
    return value if isinstance(value, int) and value > 0 else None


def _exists(store: ObjectStore, version: int, naming: ManifestNaming) -> bool:
    return store.exists(manifest_path(version, naming))


def _detect_naming(store: ObjectStore, candidates: list[int]) -> ManifestNaming | None:
    for version in candidates:
        if version <= 0:
            continue
        for naming in (ManifestNaming.V2, ManifestNaming.V1):
            if _exists(store, version, naming):
                return naming
    return None


def new_versions(uri: str | ObjectStore, after: int, *, limit: int = 1000) -> NewVersions:
    """Committed versions greater than ``after`` (at most ``limit``), found without listing history."""
    store = object_store_for(uri)
    hint = _hint(store)
    naming = _detect_naming(store, [after + 1, after] + ([hint] if hint else []))
    if naming is None:
        listing = list_versions(store)
        found = sorted(v for v in listing.versions if v > after)
        return NewVersions(found[:limit], listing.naming, listed=True, more=len(found) > limit)
    found = []
    version = after + 1
    if hint is None and not _exists(store, version, naming):
        # Nothing right after the cursor and no hint to tell a gap from "no new versions".
        listing = list_versions(store)
        found = sorted(v for v in listing.versions if v > after)
        return NewVersions(found[:limit], listing.naming, listed=True, more=len(found) > limit)
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


def latest_version(uri: str | ObjectStore) -> int | None:
    """The latest version, starting from the (verified) hint; None when there is no table."""
    store = object_store_for(uri)
    hint = _hint(store)
    if hint is not None:
        result = new_versions(store, hint - 1, limit=1 << 62)
        if result.versions:
            return result.versions[-1]
    return list_versions(store).latest  # no usable hint: one listing


def read_version_manifest(uri: str | ObjectStore, version: int, naming: ManifestNaming | None) -> table_pb2.Manifest:
    """One version's manifest, read directly by name (no listing)."""
    store = object_store_for(uri)
    return read_manifest(store, manifest_path(version, naming or ManifestNaming.V2)).manifest
