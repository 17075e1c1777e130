"""Where manifests live: the V1 (``{version}.manifest``) and V2 (``{u64::MAX - version:020}.manifest``) schemes.

New tables use V2 like official Lance; an existing table keeps the scheme it has. A table whose
``_versions/`` mixes both schemes is refused: official Lance would order it inconsistently.
V2 names sort newest first, which lets :func:`list_versions` find the latest versions without
listing the whole history.
"""

from __future__ import annotations

import enum
import posixpath
import re
from dataclasses import dataclass

from lance_format.errors import CorruptFileError, PathEscapeError, UnsupportedFeatureError
from lance_format.io import ObjectStore, check_relative_path

VERSIONS_DIR = "_versions"
DATA_DIR = "data"
U64_MAX = (1 << 64) - 1
_V2_NAME = re.compile(r"^(\d{20})\.manifest$")
_V1_NAME = re.compile(r"^(\d+)\.manifest$")


class ManifestNaming(enum.Enum):
    V1 = "v1"
    V2 = "v2"


def manifest_path(version: int, naming: ManifestNaming) -> str:
    if naming is ManifestNaming.V2:
        return f"{VERSIONS_DIR}/{U64_MAX - version:020d}.manifest"
    return f"{VERSIONS_DIR}/{version}.manifest"


def parse_manifest_name(name: str) -> tuple[int, ManifestNaming] | None:
    """(version, scheme) of a file name in ``_versions/``, or None for other files."""
    match = _V2_NAME.match(name)
    if match:
        return U64_MAX - int(match.group(1)), ManifestNaming.V2
    match = _V1_NAME.match(name)
    if match:
        return int(match.group(1)), ManifestNaming.V1
    return None  # hints, staging files and detached ("d…") versions


@dataclass(frozen=True)
class VersionListing:
    """The committed versions of a table, as found by listing ``_versions/``."""

    versions: dict[int, str]  # version -> table-relative manifest path
    naming: ManifestNaming | None

    @property
    def latest(self) -> int | None:
        return max(self.versions) if self.versions else None


LATEST_ONLY = U64_MAX  # ``since`` for listings that only need the latest version


def list_versions(store: ObjectStore, *, since: int | None = None) -> VersionListing:
    """The committed versions in ``_versions/``.

    ``since``: versions older than it may be left out. V2 names (``u64::MAX - version``) list
    newest first, so the listing stops at the first name older than ``since`` instead of
    paging through the whole history (S3 lists 1000 names per request: 100 requests at 100k
    versions); ``since=LATEST_ONLY`` reads one small page. Tables with V1 names are listed in
    full (their names do not sort by version).
    """
    # With an external manifest store, the store says which version is the latest (finishing
    # its commit if the writer stopped halfway) *before* the listing, so the listing holds it.
    latest = store.manifest_store.latest(store) if store.manifest_store is not None else None
    versions: dict[int, str] = {}
    schemes: set[ManifestNaming] = set()
    for info in store.list_sorted(VERSIONS_DIR) if since is not None else store.list_dir(VERSIONS_DIR):
        parsed = parse_manifest_name(info.base_name)
        if parsed is None:
            continue
        version, naming = parsed
        if latest is not None and version > latest[0]:
            continue  # not committed through the store: Lance ignores it too (and overwrites it)
        schemes.add(naming)
        versions[version] = f"{VERSIONS_DIR}/{info.base_name}"
        if since is not None and naming is ManifestNaming.V2 and version < since and len(schemes) == 1:
            break  # every later name is an older version
    if latest is not None and latest[0] not in versions:
        parsed = parse_manifest_name(posixpath.basename(latest[1]))
        if parsed is None or parsed[0] != latest[0]:
            raise CorruptFileError(f"the manifest store names {latest[1]!r} as version {latest[0]}", table=store.uri,
                                   path=latest[1])
        schemes.add(parsed[1])
        versions[latest[0]] = latest[1]
    if len(schemes) > 1:
        raise CorruptFileError(
            "the table mixes V1 and V2 manifest names in _versions/; refusing to guess the order",
            table=store.uri,
            path=VERSIONS_DIR,
        )
    return VersionListing(versions, schemes.pop() if schemes else None)


def migrate_to_v2_names(store: ObjectStore) -> int:
    """Rename every V1 manifest of ``store``'s ``_versions/`` to its V2 name (Lance's
    ``migrate_scheme_to_v2``); the number renamed. Idempotent: a run that stopped halfway is
    finished by the next. Like Lance's, it must not run alongside other writers.

    A rename is a copy then a delete (what object stores do anyway); a V2 copy that already
    exists is one an interrupted run made, so only the V1 name is removed.
    """
    if store.manifest_store is not None:
        raise UnsupportedFeatureError("migrating manifest names of a table whose commits go through an external "
                                      "manifest store is not supported (the store records the V1 paths)",
                                      table=store.uri)
    renamed = 0
    for info in store.list_dir(VERSIONS_DIR):
        parsed = parse_manifest_name(info.base_name)
        if parsed is None or parsed[1] is not ManifestNaming.V1:
            continue
        old = f"{VERSIONS_DIR}/{info.base_name}"
        store.put_if_not_exists(manifest_path(parsed[0], ManifestNaming.V2), store.read_bytes(old))
        store.delete(old)
        renamed += 1
    return renamed


def data_file_path(path: str, *, table: str) -> str:
    """Table-relative path of a data file named in a manifest, refusing paths that leave data/."""
    check_relative_path(path, table=table)  # absolute paths and the like
    relative = check_relative_path(f"{DATA_DIR}/{path}", table=table)
    if not relative.startswith(f"{DATA_DIR}/"):
        raise PathEscapeError("data file path escapes the data directory", table=table, path=path)
    return relative
