"""External manifest stores: commits coordinated through a key-value store, for object stores
that have no atomic put-if-absent of their own (the table format's "External Manifest Store").

The store maps ``(base_uri, version)`` to the path of that version's manifest. A commit of
version N (:meth:`ExternalManifests.commit`):

1. writes the manifest under a staging name, ``_versions/<final name>-<uuid>``;
2. puts ``(base_uri, N) -> staged path`` into the store *if absent*: the version is committed
   the moment this succeeds, and a refused put means another writer took N;
3. copies the staged manifest to its final name in ``_versions/``;
4. points the store entry at the final path (a put *if present*), and deletes the staged file.

A writer can die between 2 and 4. Whoever then finds an entry still pointing at a staged path
(every reader and writer looks up the latest version through the store) finishes steps 3-4
(:meth:`ExternalManifests.finalize`); finishing twice is harmless. A table the store has no
entry for (not yet committed through it) is found by listing ``_versions/``, like Lance.

Stores register by URI scheme (:func:`register_manifest_store`): official Lance's
``s3+ddb://bucket/path?ddbTableName=<table>`` (DynamoDB, :mod:`lance_format.io.dynamodb`) is
built in; a factory turns such a URI and its ``storage_options`` into the object store URI of
the table's files, the store, and the table's key in it.
"""

from __future__ import annotations

import importlib
import logging
import posixpath
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from urllib.parse import urlparse

from lance_format.errors import CorruptFileError, InvalidInputError
from lance_format.io.backend import BACKENDS

if TYPE_CHECKING:
    from lance_format.io.object_store import ObjectStore

_LOG = logging.getLogger(__name__)
MANIFEST_SUFFIX = ".manifest"
_STAGED = re.compile(r"^(.*\.manifest)-[0-9a-fA-F-]{36}$")


@dataclass(frozen=True)
class ManifestLocation:
    """Where the store says one version's manifest is.

    ``path``: as the store records it, the object path of the manifest under the bucket (Lance's
    form, e.g. ``tables/t.lance/_versions/18446744073709551614.manifest``); a staged path ends in
    ``-<uuid>``. ``size``: the manifest's size in bytes when recorded.
    """

    version: int
    path: str
    size: int | None = None
    e_tag: str | None = None

    @property
    def staged(self) -> bool:
        """Whether ``path`` is a staged manifest (ends in ``-<uuid>``, not ``.manifest``), not yet final."""
        return not self.path.endswith(MANIFEST_SUFFIX)


@runtime_checkable
class ManifestStore(Protocol):
    """A key-value store of ``(base_uri, version) -> manifest location`` with conditional puts.

    Reads must be strongly consistent (a put is seen by every later get), and each put must be
    atomic with its condition: of two concurrent :meth:`put_if_not_exists` of one key, exactly
    one succeeds.
    """

    def get(self, base_uri: str, version: int) -> ManifestLocation | None:
        """The entry of ``version``, or None when there is none."""

    def get_latest(self, base_uri: str) -> ManifestLocation | None:
        """The entry with the highest version of ``base_uri``, or None when there is none."""

    def put_if_not_exists(self, base_uri: str, location: ManifestLocation) -> bool:
        """Create the entry of ``location.version``; False when it exists already (nothing written)."""

    def put_if_exists(self, base_uri: str, location: ManifestLocation) -> bool:
        """Replace the existing entry of ``location.version``; False when there is none."""

    def delete(self, base_uri: str) -> None:
        """Remove every entry of ``base_uri`` (the table was deleted)."""


@dataclass(frozen=True)
class ExternalManifestTarget:
    """What a manifest-store factory makes of a URI: where the table's files live
    (``object_uri`` and the ``storage_options`` for that object store), the store, and the
    table's key in it (``base_uri``)."""

    object_uri: str
    storage_options: dict[str, str]
    store: ManifestStore
    base_uri: str


# (uri, normalized storage options) -> target
ManifestStoreFactory = Callable[[str, dict[str, str]], ExternalManifestTarget]

# scheme -> factory, or "module:function" imported on first use (optional client libraries)
MANIFEST_STORES: dict[str, ManifestStoreFactory | str] = {
    "s3+ddb": "lance_format.io.dynamodb:open_s3_ddb",
}


def register_manifest_store(scheme: str, factory: ManifestStoreFactory) -> None:
    """Commit tables at ``<scheme>://...`` URIs through the manifest store ``factory`` makes.

    ``factory(uri, storage_options)`` returns an :class:`ExternalManifestTarget`; the options
    arrive normalized (lower-case keys, string values) and the factory passes on those meant
    for the object store. A store with a ``use_credential_provider(provider)`` method is handed
    the ``credential_provider`` storage option, if any, after the factory made it.
    """

    scheme = scheme.lower()
    if not re.fullmatch(r"[a-z][a-z0-9+.-]*", scheme) or scheme in BACKENDS:
        # an object store's own scheme keeps committing with that store's conditional put
        raise InvalidInputError(f"{scheme!r} cannot name a manifest store URI scheme")
    MANIFEST_STORES[scheme] = factory


def open_external_manifests(
    uri: str, options: dict[str, str], credential_provider: Callable[[], Mapping[str, Any]] | None = None,
) -> ExternalManifests | None:
    """The external manifests of ``uri`` when its scheme names a manifest store, else None.

    A ``credential_provider`` (the storage option) goes to the store too when it has a
    ``use_credential_provider(provider)`` method (the DynamoDB store does): the store's own
    requests then sign with the same refreshing credentials as the object store's."""
    if "://" not in uri:
        return None
    scheme = urlparse(uri).scheme.lower()
    factory = MANIFEST_STORES.get(scheme)
    if factory is None:
        return None
    if isinstance(factory, str):
        module, _, name = factory.partition(":")
        factory = getattr(importlib.import_module(module), name)
        MANIFEST_STORES[scheme] = factory
    target = factory(uri, dict(options))
    use_provider = getattr(target.store, "use_credential_provider", None)
    if credential_provider is not None and callable(use_provider):
        use_provider(credential_provider)
    return ExternalManifests(target)


def split_uri_query(uri: str) -> tuple[str, str]:
    """(the URI up to its query, ``?query`` or ""): a table below a manifest-store URI such as
    ``s3+ddb://b/t?ddbTableName=x`` (a branch's tree) keeps the query at the end."""
    if "://" not in uri or "?" not in uri:
        return uri, ""
    head, _, query = uri.partition("?")
    return head, "?" + query


def staged_path(final_path: str) -> str:
    """A fresh staging name for a manifest (Lance's form: ``<final>-<uuid4>``)."""
    return f"{final_path}-{uuid.uuid4()}"


def final_path_of(staged: str) -> str:
    """The final manifest path a staging path stands for."""
    match = _STAGED.match(staged)
    if match is None:
        raise CorruptFileError("the manifest store points at a path that is neither a manifest nor a staged one",
                               path=staged)
    return match.group(1)


class ExternalManifests:
    """One table's entries in a manifest store, and the commit protocol over them.

    Paths handed in and out are table-relative (``_versions/...``); the store records them under
    the bucket (``<base_uri>/_versions/...``), like Lance.
    """

    def __init__(self, target: ExternalManifestTarget) -> None:
        self.target = target
        self.store = target.store
        self.base_uri = target.base_uri.strip("/")

    def _stored(self, relative: str) -> str:
        return posixpath.join(self.base_uri, relative) if self.base_uri else relative

    def _relative(self, stored: str, objects: ObjectStore) -> str:
        prefix = self.base_uri + "/" if self.base_uri else ""
        if not stored.startswith(prefix):
            raise CorruptFileError(f"the manifest store points outside the table ({stored!r})", table=objects.uri,
                                   path=stored)
        return stored[len(prefix):]

    # -- lookups (finishing interrupted commits) ------------------------------------------------
    def latest(self, objects: ObjectStore) -> tuple[int, str] | None:
        """(version, table-relative manifest path) of the latest committed version, or None when
        the store has no entry for the table."""
        location = self.store.get_latest(self.base_uri)
        if location is None:
            return None
        return location.version, self.finalize(objects, location)

    def version(self, objects: ObjectStore, version: int) -> str | None:
        """The table-relative manifest path of ``version``, or None when the store has no entry."""
        location = self.store.get(self.base_uri, version)
        return None if location is None else self.finalize(objects, location)

    def finalize(self, objects: ObjectStore, location: ManifestLocation) -> str:
        """Finish the commit of ``location`` if its manifest is still staged; the final path."""
        relative = self._relative(location.path, objects)
        if not location.staged:
            return relative
        final = final_path_of(relative)
        try:
            data = objects.read_bytes(relative)
        except (CorruptFileError, FileNotFoundError):
            # Another finisher copied it and then deleted the staged file.
            if not objects.exists(final):
                raise CorruptFileError("the manifest store points at a staged manifest that is gone, and the "
                                       "final manifest is missing", table=objects.uri, path=relative) from None
            return final
        self._finish(objects, location.version, relative, final, data)
        return final

    # -- commits -----------------------------------------------------------------------------
    def commit(self, objects: ObjectStore, version: int, final: str, data: bytes) -> bool:
        """Commit ``data`` as ``version``'s manifest at the table-relative path ``final``; False
        when another writer committed ``version`` first."""
        staged = staged_path(final)
        objects.write_bytes(staged, data)
        location = ManifestLocation(version, self._stored(staged), len(data))
        try:
            won = self.store.put_if_not_exists(self.base_uri, location)
        except Exception:
            # The put may have landed before the connection failed: the store knows.
            try:
                entry = self.store.get(self.base_uri, version)
            except Exception:
                entry = None
            if entry is None:
                raise  # no entry (yet): the staged file stays, unreferenced, for cleanup
            won = entry.path == location.path
        if not won:
            objects.delete(staged)
            return False
        # Committed. A failure from here on must not fail the commit (the caller would remove
        # the data files of a committed version): the staged entry is finished by the next reader.
        try:
            self._finish(objects, version, staged, final, data)
        except Exception as exc:
            _LOG.warning("version %d of %s is committed but not finalized yet (%s); the next reader or writer "
                         "finishes it", version, objects.uri, exc)
        return True

    def _finish(self, objects: ObjectStore, version: int, staged: str, final: str, data: bytes) -> None:
        # Copy (a plain PUT: every finisher writes the same bytes), then flip the entry, then
        # drop the staged file, in that order: the entry must never name a missing manifest.
        objects.write_bytes(final, data)
        if not self.store.put_if_exists(self.base_uri, ManifestLocation(version, self._stored(final), len(data))):
            raise CorruptFileError(f"the manifest store lost the entry of version {version} while it was being "
                                   "finalized (was the table deleted?)", table=objects.uri, version=version, path=final)
        objects.delete(staged)

    def delete(self) -> None:
        self.store.delete(self.base_uri)


class InMemoryManifestStore:
    """A :class:`ManifestStore` in this process's memory (tests, and a reference for others)."""

    def __init__(self) -> None:
        import threading

        self._lock = threading.Lock()
        self.entries: dict[tuple[str, int], ManifestLocation] = {}

    def get(self, base_uri: str, version: int) -> ManifestLocation | None:
        with self._lock:
            return self.entries.get((base_uri, version))

    def get_latest(self, base_uri: str) -> ManifestLocation | None:
        with self._lock:
            versions = [v for (b, v) in self.entries if b == base_uri]
            return self.entries[(base_uri, max(versions))] if versions else None

    def put_if_not_exists(self, base_uri: str, location: ManifestLocation) -> bool:
        with self._lock:
            if (base_uri, location.version) in self.entries:
                return False
            self.entries[(base_uri, location.version)] = location
            return True

    def put_if_exists(self, base_uri: str, location: ManifestLocation) -> bool:
        with self._lock:
            if (base_uri, location.version) not in self.entries:
                return False
            self.entries[(base_uri, location.version)] = location
            return True

    def delete(self, base_uri: str) -> None:
        with self._lock:
            for key in [k for k in self.entries if k[0] == base_uri]:
                del self.entries[key]


__all__ = [
    "ExternalManifestTarget", "ExternalManifests", "InMemoryManifestStore", "MANIFEST_STORES", "ManifestLocation",
    "ManifestStore", "ManifestStoreFactory", "final_path_of", "open_external_manifests", "register_manifest_store",
    "split_uri_query", "staged_path",
]
