"""``LanceDataset``: one version of a Lance table, with pylance's reading API."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lance_format.dataset.arguments import version_number
from lance_format.dataset.arrow_interop import ArrowDatasetBase
from lance_format.dataset.blob_reads import BlobMethods
from lance_format.dataset.changes.feed import build_delta
from lance_format.dataset.committing import CommittingMethods
from lance_format.dataset.evolution.base import next_field_id_of
from lance_format.dataset.file_session import LanceFileSession
from lance_format.dataset.fragment import LanceFragment
from lance_format.dataset.indices import IndexMethods
from lance_format.dataset.inspection import InspectionMethods, version_entry
from lance_format.dataset.namespace_target import resolve as resolve_namespace
from lance_format.dataset.open_options import as_local_datetime, refuse_unsupported
from lance_format.dataset.reading import ReadingMethods
from lance_format.dataset.reference_methods import ReferenceMethods
from lance_format.dataset.session import Session
from lance_format.dataset.table_writes import TableWriteMethods
from lance_format.dataset.transactions_api import TransactionMethods
from lance_format.errors import (
    ArgumentTypeError,
    DatasetNotFoundError,
    InvalidInputError,
    LanceError,
    VersionNotFoundError,
)
from lance_format.file.legacy_v0_1 import manifest_dictionaries
from lance_format.io import ObjectStore, object_store_for
from lance_format.proto import table_pb2, transaction_pb2
from lance_format.schema import LanceSchema
from lance_format.schema.blob import dataset_arrow_schema
from lance_format.table import feature_flags
from lance_format.table.base_paths import BaseStores, check_base_store_params
from lance_format.table.commit import (
    DETACHED_VERSION_BIT,
    detached_manifest_path,
)
from lance_format.table.manifest import ManifestFile, read_manifest
from lance_format.table.naming import LATEST_ONLY, VersionListing, list_versions
from lance_format.table.refs import resolve_reference
from lance_format.table.transaction import has_stable_row_ids, load_transaction

if TYPE_CHECKING:
    from lance_format.dataset.changes.feed import DatasetDelta
    from lance_format.dataset.file_session import LanceFileSession


def _open_listing(store: ObjectStore, since: int | None = None) -> VersionListing:
    """The versions of the table (at least those from ``since`` on, see :func:`list_versions`)."""
    listing = list_versions(store, since=since)
    if listing.latest is None:
        raise DatasetNotFoundError("no Lance table here (no manifests in _versions/)", table=store.uri)
    return listing


class LanceDataset(ReadingMethods, CommittingMethods, TransactionMethods, TableWriteMethods, InspectionMethods,
                   ReferenceMethods, BlobMethods, IndexMethods, ArrowDatasetBase):
    """A Lance table pinned at one version.

    A ``pyarrow.dataset.Dataset`` (as pylance's is; the base comes last, so the methods here
    come first): DuckDB and Polars query it with projection and filter pushdown, see
    :mod:`lance_format.dataset.arrow_interop`.

    Parameters
    ----------
    uri
        The table's root: a local path, a ``file://`` or ``s3://`` URI, or an open
        :class:`~lance_format.io.ObjectStore`.
    version
        The version number or tag name to open; the latest version if None.
    storage_options
        Object-store settings with Lance's keys (for ``s3://`` URIs).

    Raises
    ------
    DatasetNotFoundError
        No Lance table exists at ``uri``.
    VersionNotFoundError
        ``version`` does not exist.
    TagError
        ``version`` names a tag that does not exist.
    UnsupportedFeatureError
        The table uses a feature flag this engine cannot read.
    CorruptFileError
        The manifest is malformed.
    """

    _UNPICKLED = ("_fragments", "_fragments_made")  # fragment objects hold open readers

    def __init__(self, uri: str | os.PathLike[str] | ObjectStore, version: int | str | None = None,
                 block_size: int | None = None, index_cache_size: int | None = None,
                 metadata_cache_size: int | None = None, commit_lock: Any = None,
                 storage_options: Mapping[str, str] | None = None, serialized_manifest: bytes | None = None,
                 default_scan_options: Mapping[str, Any] | None = None,
                 metadata_cache_size_bytes: int | None = None, index_cache_size_bytes: int | None = None,
                 read_params: Mapping[str, Any] | None = None, session: Session | None = None,
                 namespace_client: Any = None, table_id: Sequence[str] | None = None,
                 namespace_client_managed_versioning: bool = False,
                 base_store_params: Mapping[str, Mapping[str, str]] | None = None) -> None:
        # pylance's constructor arguments, in its order; cache and decoder sizes have no effect here
        refuse_unsupported(uri, read_params, serialized_manifest=serialized_manifest,
                            namespace_client=namespace_client, table_id=table_id,
                            namespace_client_managed_versioning=namespace_client_managed_versioning or None)
        check_base_store_params(base_store_params, table=uri.uri if isinstance(uri, ObjectStore) else os.fspath(uri))
        self._default_scan_options = dict(default_scan_options or {})
        if session is not None and not isinstance(session, Session):
            raise InvalidInputError(f"session must be a lance_format.Session, got {type(session).__name__}")
        # a dataset opened without a session gets its own, which caches nothing: the parsed
        # manifest is kept anyway, and keeping its bytes too would double that memory
        self._session = session if session is not None else Session.private()
        self._store = object_store_for(uri, storage_options)
        # what ``uri`` reports: the location opened, also when a reference moved to a branch
        self._uri = self._store.uri
        listing = _open_listing(self._store, LATEST_ONLY)  # one small listing on V2-named object stores
        if isinstance(version, tuple) or (isinstance(version, str) and not version.isdigit()):
            self._store, version = resolve_reference(self._store, version)  # a tag or (branch, version)
            listing = _open_listing(self._store, LATEST_ONLY)
        elif isinstance(version, str):
            version = int(version)
        elif version is not None:
            version = version_number(version, table=self._store.uri)
        if version is None:
            version = listing.latest
        elif version not in listing.versions and isinstance(version, int) and 0 < version < (listing.latest or 0):
            listing = _open_listing(self._store, version)  # an older version: list back to it
        if isinstance(version, int) and version & DETACHED_VERSION_BIT and self._store.exists(
                detached_manifest_path(version)):
            self._manifest_path = detached_manifest_path(version)  # a detached commit's version
        elif version not in listing.versions:
            raise VersionNotFoundError(
                f"version {version} does not exist (latest is {listing.latest})", table=self._store.uri
            )
        else:
            self._manifest_path = listing.versions[version]
        self._manifest_file: ManifestFile = read_manifest(self._store, self._manifest_path,
                                                          read_bytes=self._session.read_manifest_bytes)
        manifest = self._manifest_file.manifest
        if manifest.version != version:
            raise LanceError(
                f"manifest says version {manifest.version}, its file name says {version}",
                table=self._store.uri,
                path=self._manifest_path,
            )
        feature_flags.check_readable(manifest, table=self._store.uri, path=self._manifest_path)
        if session is None:
            self._session.hold_parsed_manifest(self._manifest_file.size, metadata_cache_size_bytes)
        if commit_lock is not None:
            if not callable(commit_lock):
                raise ArgumentTypeError(f"commit_lock must be a function, got {type(commit_lock)}", table=self._uri)
            self._store.commit_lock = commit_lock

    @classmethod
    def _just_committed(cls, store: ObjectStore, path: str, manifest_file: ManifestFile) -> LanceDataset:
        """The version a commit just wrote, from the manifest it wrote (no listing, no read back)."""
        ds = cls.__new__(cls)
        ds._store, ds._manifest_path, ds._manifest_file = store, path, manifest_file
        ds._uri = store.uri
        ds._session = Session.private()
        ds._session.hold_parsed_manifest(manifest_file.size, None)
        feature_flags.check_readable(manifest_file.manifest, table=store.uri, path=path)
        return ds

    # -- identity ----------------------------------------------------------------------------
    def new_file_session(self) -> LanceFileSession:
        """A :class:`~lance_format.dataset.file_session.LanceFileSession` at the table's root,
        with its storage options (pylance's ``new_file_session``)."""

        return LanceFileSession(self._store.uri, self._store.storage_options)

    def session(self) -> Session:
        """The cache this dataset shares with the others opened with it (pylance's ``session``)."""
        return self._session

    @property
    def _ds(self) -> LanceDataset:
        """pylance's handle on its native dataset, which user code (and pylance's own tests) reach
        into for methods such as ``base_paths()``; here the dataset itself answers them."""
        return self

    @property
    def _storage_options(self) -> dict[str, str]:
        """pylance's attribute: the object-store options this dataset was opened with."""
        return dict(self._store.storage_options or {})

    @property
    def uri(self) -> str:
        """The location this dataset was opened at (pylance's ``uri``): a branch checked out by
        reference reports the table's root; :attr:`object_store` is the branch's own store."""
        return self._uri

    @property
    def object_store(self) -> ObjectStore:
        """The table's store (operations write and read the table's files through it)."""
        return self._store

    @property
    def version(self) -> int:
        """The version this object is pinned at."""
        return self._manifest_file.manifest.version

    @property
    def latest_version(self) -> int:
        """The newest committed version of the table (listed again on every call).

        Raises
        ------
        DatasetNotFoundError
            The table has been removed since it was opened.
        """
        return _open_listing(self._store, LATEST_ONLY).latest  # type: ignore[return-value]

    @property
    def manifest(self) -> table_pb2.Manifest:
        """The decoded manifest of this version."""
        return self._manifest_file.manifest

    @property
    def manifest_file(self) -> ManifestFile:
        """The manifest of this version with its file's layout details (index offset, size)."""
        return self._manifest_file

    @property
    def manifest_path(self) -> str:
        """Table-relative path of this version's manifest."""
        return self._manifest_path

    @cached_property
    def base_stores(self) -> BaseStores:
        return BaseStores(self._store, self.manifest)

    @cached_property
    def lance_schema(self) -> LanceSchema:
        """The table schema as Lance fields (field ids, logical types, encodings)."""
        m = self.manifest
        return LanceSchema.from_protos(list(m.fields), dict(m.schema_metadata))

    @cached_property
    def legacy_dictionaries(self) -> dict[int, pa.Array]:
        """Dictionary values of a legacy (0.1) table's dictionary fields, kept in the manifest file."""
        return manifest_dictionaries(self._store, self._manifest_path, self.manifest.fields)

    @cached_property
    def schema(self) -> pa.Schema:
        """The table schema as pylance reports it (blob columns as their descriptions), with
        ``_rowid``/``_rowaddr`` when the default scan options add them."""
        schema = dataset_arrow_schema(self.lance_schema)
        for flag, name in (("with_row_id", "_rowid"), ("with_row_address", "_rowaddr")):
            if self.default_scan_options.get(flag):
                schema = schema.append(pa.field(name, pa.uint64()))
        return schema

    @property
    def default_scan_options(self) -> dict[str, Any]:
        """Options every scan of this object starts from (``dataset(default_scan_options=...)``)."""
        return self.__dict__.get("_default_scan_options") or {}

    @property
    def data_storage_version(self) -> str:
        """The Lance file version of the table's data files (``"2.0"``, ``"2.1"``, ...)."""
        return self.manifest.data_format.version or "2.0"

    @property
    def has_stable_row_ids(self) -> bool:
        """Whether the table keeps stable row ids (``enable_stable_row_ids=True`` at creation)."""
        return has_stable_row_ids(self.manifest)

    @property
    def metadata(self) -> dict[str, str]:
        """The table metadata (pylance's ``metadata``)."""
        return dict(self.manifest.table_metadata)

    @property
    def schema_metadata(self) -> dict[str, str]:
        """The Arrow schema metadata, values decoded as UTF-8."""
        return {k: v.decode(errors="replace") for k, v in self.manifest.schema_metadata.items()}

    def __repr__(self) -> str:
        return f"LanceDataset(uri={self.uri!r}, version={self.version})"

    # -- versions ----------------------------------------------------------------------------
    def versions(self) -> list[dict[str, Any]]:
        """Every committed version: ``{"version", "timestamp", "metadata"}`` exactly like pylance.

        ``timestamp`` is a naive local datetime; ``metadata`` holds the version's summary
        statistics (pylance's keys, string values).

        Returns
        -------
        list of dict
            One entry per version, oldest first.

        Raises
        ------
        DatasetNotFoundError
            The table has been removed since it was opened.
        """
        listing = _open_listing(self._store)
        result = []
        for version in sorted(listing.versions):
            # the summary reports the manifest as written, like pylance
            result.append(version_entry(read_manifest(self._store, listing.versions[version], repair=False).manifest))
        return result

    def checkout_version(self, version: int | str) -> LanceDataset:
        """Open another version of the same table.

        Parameters
        ----------
        version
            A version number or a tag name.

        Returns
        -------
        LanceDataset
            A new object pinned at ``version``; this one is unchanged.

        Raises
        ------
        VersionNotFoundError
            The version does not exist.
        TagError
            The tag does not exist.
        """
        checked_out = LanceDataset(self._store, version, default_scan_options=self.default_scan_options,
                                   session=self.session())
        checked_out._uri = self._uri
        return checked_out

    def open_latest(self) -> LanceDataset:
        """A new object at the table's latest version (this one stays where it is)."""
        return LanceDataset(self._store, default_scan_options=self.default_scan_options, session=self.session())

    def checkout_latest(self) -> None:
        """Move this object to the latest version of its branch (pylance's ``checkout_latest``)."""
        self._replace_version(self.latest_version)

    @property
    def max_field_id(self) -> int:
        """The highest field id in use: of the schema, or of a data file still holding a dropped
        column (pylance's ``max_field_id``; new columns get ids above it)."""

        return next_field_id_of(self.manifest) - 1

    def read_transaction_message(self, version: int | None = None) -> transaction_pb2.Transaction | None:
        """The transaction message that produced a version, or None if none was recorded
        (``read_transaction`` gives pylance's view of it).

        Parameters
        ----------
        version
            The version to look up; this object's version if None.

        Returns
        -------
        transaction_pb2.Transaction or None
            The decoded transaction.

        Raises
        ------
        VersionNotFoundError
            The version does not exist.
        """
        if version is None or version == self.version:
            return load_transaction(self._store, self._manifest_file)
        listing = _open_listing(self._store, version if isinstance(version, int) and version > 0 else None)
        if version not in listing.versions:
            raise VersionNotFoundError(f"version {version} does not exist", table=self.uri)
        return load_transaction(self._store, read_manifest(self._store, listing.versions[version]))

    def delta(
        self,
        compared_against: int | None = None,
        *,
        begin_version: int | None = None,
        end_version: int | None = None,
    ) -> DatasetDelta:
        """The changes between two versions (pylance's ``delta``).

        Parameters
        ----------
        compared_against
            Compare this version with that one (the older is the begin); overrides the others.
        begin_version
            The exclusive start of the range (with ``end_version``).
        end_version
            The inclusive end of the range (with ``begin_version``).

        Returns
        -------
        DatasetDelta
            Lists inserted/updated/deleted rows; ``get_changes()`` reads them as one stream.

        Raises
        ------
        InvalidInputError
            Neither ``compared_against`` nor both range ends are given, or they are not versions.
        VersionNotFoundError
            A version of the range does not exist.

        Examples
        --------
        >>> import tempfile, pyarrow as pa, lance_format as lance
        >>> uri = tempfile.mkdtemp() + "/events.lance"
        >>> ds = lance.write_dataset(pa.table({"id": [1, 2], "kind": ["view", "buy"]}), uri,
        ...                          enable_stable_row_ids=True)
        >>> _ = ds.update({"kind": "'refund'"}, where="id = 2")
        >>> ds = lance.write_dataset(pa.table({"id": [3], "kind": ["view"]}), uri, mode="append")
        >>> delta = ds.delta(compared_against=1)
        >>> delta.get_inserted_rows().read_all().select(["id", "kind"]).to_pydict()
        {'id': [3], 'kind': ['view']}
        >>> delta.get_updated_rows().read_all().select(["id", "kind"]).to_pydict()
        {'id': [2], 'kind': ['refund']}
        """

        return build_delta(self, compared_against, begin_version=begin_version, end_version=end_version)

    # -- mutations (each commits a new version and moves this object to it, like pylance) ------
    def _replace_version(self, version: int) -> None:
        """Point this object at ``version`` of the same table, dropping every cached view."""
        fresh = LanceDataset(self._store, version, default_scan_options=self.default_scan_options,
                             session=self.session())
        fresh._uri = self._uri
        self.__dict__.clear()
        self.__dict__.update(fresh.__dict__)

    # -- fragments ---------------------------------------------------------------------------
    def get_fragments(self, filter: Any = None) -> list[LanceFragment]:
        """Every fragment of this version, in manifest order.

        Returns
        -------
        list of LanceFragment
            The same objects on every call, so per-fragment caches are shared.

        Raises
        ------
        InvalidInputError
            A ``filter`` was given (pylance does not support one either).
        """
        if filter is not None:
            raise InvalidInputError("get_fragments() does not support filter yet", table=self.uri)
        fragments: list[LanceFragment] | None = self.__dict__.get("_fragments")
        if fragments is None:
            made = self.__dict__.get("_fragments_made", {})
            fragments = [made.get(i) or LanceFragment(self, f) for i, f in enumerate(self.manifest.fragments)]
            self.__dict__["_fragments"] = fragments
        return list(fragments)  # a new list (callers shuffle it, as pylance's samplers do)

    def fragment_at(self, index: int) -> LanceFragment:
        """The fragment at ``index`` of this version's fragment list, without wrapping the others.

        Metadata-only planners touch a few fragments of large tables; this is the same object
        :meth:`get_fragments` returns, so per-fragment caches are shared.

        Parameters
        ----------
        index
            The position in the manifest's fragment list (not the fragment id).

        Returns
        -------
        LanceFragment
            The fragment.

        Raises
        ------
        IndexError
            ``index`` is out of range.
        """
        fragments: list[LanceFragment] | None = self.__dict__.get("_fragments")
        if fragments is not None:
            return fragments[index]
        made: dict[int, LanceFragment] = self.__dict__.setdefault("_fragments_made", {})
        fragment = made.get(index)
        if fragment is None:
            fragment = made[index] = LanceFragment(self, self.manifest.fragments[index])
        return fragment

    def get_fragment(self, fragment_id: int) -> LanceFragment | None:
        """The fragment with the given id.

        Parameters
        ----------
        fragment_id
            The fragment's id (as stored in the manifest).

        Returns
        -------
        LanceFragment or None
            The fragment, or None if this version has no fragment with that id.
        """
        for fragment in self.get_fragments():
            if fragment.fragment_id == fragment_id:
                return fragment
        return None


# dataset() options that size official Lance's caches and I/O: no effect here
_CACHE_OPTIONS = ("block_size", "index_cache_size", "metadata_cache_size_bytes", "index_cache_size_bytes")
# read_params keys official Lance documents (decoder caching and validation)
def dataset(
    uri: str | os.PathLike[str] | None = None,
    version: int | str | None = None,
    asof: datetime | str | Any = None,
    block_size: int | None = None,
    commit_lock: Any = None,
    index_cache_size: int | None = None,
    storage_options: Mapping[str, str] | None = None,
    default_scan_options: Mapping[str, Any] | None = None,
    metadata_cache_size_bytes: int | None = None,
    index_cache_size_bytes: int | None = None,
    read_params: Mapping[str, Any] | None = None,
    session: Any = None,
    namespace_client: Any = None,
    table_id: Sequence[str] | None = None,
    base_store_params: Mapping[str, Mapping[str, str]] | None = None,
) -> LanceDataset:
    """Open a Lance table (pylance's ``dataset``, same parameters in the same order).

    Parameters
    ----------
    uri
        The table's root: a local path or an object-store URI.
    version
        A version number or tag name; the latest version if None.
    asof
        A point in time (``datetime``, ``pandas.Timestamp`` or ``"YYYY-MM-DD HH:MM:SS"``): open
        the latest version committed before it (ignored when ``version`` is given).
    storage_options
        Object-store settings with Lance's keys (``aws_access_key_id``, ``aws_endpoint``, ...).
    default_scan_options
        :meth:`LanceDataset.scanner` arguments every scan of the dataset starts from.
    block_size, index_cache_size, metadata_cache_size_bytes, index_cache_size_bytes, read_params
        Official Lance's cache and decoder settings; accepted, with no effect here.
    session
        A :class:`Session` whose cache the dataset shares (a new one if None).
    commit_lock
        pylance's custom commit lock: called with the number of each version this dataset (and
        the datasets it leads to) commits; the context manager it returns is held while that
        version's manifest is published.
    namespace_client, table_id
        A Lance Namespace client (``lance_namespace.LanceNamespace``) and the table's id in it
        (``["sales", "orders"]``), instead of ``uri``: the table the namespace's
        ``describe_table`` locates, with the storage options it returns.
    base_store_params
        Not supported: refused unless None.

    Raises
    ------
    DatasetNotFoundError
        No table at ``uri``.
    VersionNotFoundError
        ``version`` does not exist, or ``asof`` is before the first version.
    InvalidInputError
        An unsupported option, an unknown ``read_params`` key, or an ``asof`` that is not a time.

    Examples
    --------
    >>> import tempfile, pyarrow as pa, lance_format as lance
    >>> uri = tempfile.mkdtemp() + "/people.lance"
    >>> _ = lance.write_dataset(pa.table({"id": [1, 2, 3], "name": ["ann", "bo", "cy"]}), uri)
    >>> ds = lance.dataset(uri)
    >>> ds.count_rows(), ds.version
    (3, 1)
    """
    uri, storage_options = resolve_namespace(uri, namespace_client, table_id, "read", storage_options)
    refuse_unsupported(uri, read_params, base_store_params=base_store_params)
    ds = LanceDataset(uri, version, storage_options=storage_options, default_scan_options=default_scan_options,
                      session=session, commit_lock=commit_lock, metadata_cache_size_bytes=metadata_cache_size_bytes)
    if version is not None or asof is None:
        return ds
    cutoff = as_local_datetime(asof, table=ds.uri)
    earlier = [v["version"] for v in ds.versions() if v["timestamp"] < cutoff]
    if not earlier:
        raise VersionNotFoundError(f"{cutoff} is earlier than the first version of this dataset", table=ds.uri)
    return ds.checkout_version(max(earlier))
