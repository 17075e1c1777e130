"""``LanceDataset``: one version of a Lance table, with pylance's reading API."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.dataset.arguments import row_positions, version_number
from lance_format.dataset.committing import CommittingMethods
from lance_format.dataset.fragment import LanceFragment
from lance_format.dataset.scanner import LanceScanner
from lance_format.dataset.transactions_api import TransactionMethods
from lance_format.errors import (
    DatasetNotFoundError,
    InvalidInputError,
    LanceError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)
from lance_format.file.legacy_v0_1 import manifest_dictionaries
from lance_format.io import ObjectStore, object_store_for
from lance_format.proto import table_pb2, transaction_pb2
from lance_format.schema import LanceSchema
from lance_format.schema.blob import dataset_arrow_schema
from lance_format.table import feature_flags
from lance_format.table.deletion import deleted_row_count
from lance_format.table.base_paths import BaseStores
from lance_format.table.manifest import ManifestFile, read_manifest
from lance_format.table.naming import VersionListing, list_versions
from lance_format.table.operations import has_stable_row_ids
from lance_format.table.refs import Reference, resolve_reference
from lance_format.table.tags import Tags
from lance_format.table.transaction import load_transaction

if TYPE_CHECKING:
    from lance_format.dataset.branches import Branches
    from lance_format.dataset.changes.feed import DatasetDelta


def _open_listing(store: ObjectStore) -> VersionListing:
    listing = list_versions(store)
    if listing.latest is None:
        raise DatasetNotFoundError("no Lance table here (no manifests in _versions/)", table=store.uri)
    return listing


class LanceDataset(CommittingMethods, TransactionMethods):
    """A Lance table pinned at one version.

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

    def __init__(self, uri: str | os.PathLike[str] | ObjectStore, version: int | str | None = None, *,
                 storage_options: Mapping[str, str] | None = None) -> None:
        self._store = object_store_for(uri, storage_options)
        listing = _open_listing(self._store)
        if isinstance(version, tuple) or (isinstance(version, str) and not version.isdigit()):
            self._store, version = resolve_reference(self._store, version)  # a tag or (branch, version)
            listing = _open_listing(self._store)
        elif isinstance(version, str):
            version = int(version)
        elif version is not None:
            version = version_number(version, table=self._store.uri)
        if version is None:
            version = listing.latest
        if version not in listing.versions:
            raise VersionNotFoundError(
                f"version {version} does not exist (latest is {listing.latest})", table=self._store.uri
            )
        self._manifest_path = listing.versions[version]
        self._manifest_file: ManifestFile = read_manifest(self._store, self._manifest_path)
        manifest = self._manifest_file.manifest
        if manifest.version != version:
            raise LanceError(
                f"manifest says version {manifest.version}, its file name says {version}",
                table=self._store.uri,
                path=self._manifest_path,
            )
        feature_flags.check_readable(manifest, table=self._store.uri, path=self._manifest_path)

    # -- identity ----------------------------------------------------------------------------
    @property
    def uri(self) -> str:
        """The table's root URI."""
        return self._store.uri

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
        return _open_listing(self._store).latest  # type: ignore[return-value]

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
        """The table schema as pylance reports it (blob columns as their descriptions)."""
        return dataset_arrow_schema(self.lance_schema)

    @property
    def data_storage_version(self) -> str:
        """The Lance file version of the table's data files (``"2.0"``, ``"2.1"``, ...)."""
        return self.manifest.data_format.version or "2.0"

    @property
    def has_stable_row_ids(self) -> bool:
        """Whether the table keeps stable row ids (``enable_stable_row_ids=True`` at creation)."""
        return has_stable_row_ids(self.manifest)

    @property
    def config(self) -> "_ConfigDict":
        """The table config; also callable (``ds.config()``) like pylance's method."""
        return _ConfigDict(self.manifest.config)

    @property
    def metadata(self) -> dict[str, str]:
        """The table metadata (pylance's ``metadata``)."""
        return dict(self.manifest.table_metadata)

    @property
    def schema_metadata(self) -> dict[str, str]:
        """The Arrow schema metadata, values decoded as UTF-8."""
        return {k: v.decode(errors="replace") for k, v in self.manifest.schema_metadata.items()}

    @property
    def tags(self) -> Tags:
        """The table's tags (named versions): ``create``, ``delete``, ``list``, ``get_version``."""
        from lance_format.dataset.branches import dataset_tags

        return dataset_tags(self)

    # -- branches and clones (lance_format.dataset.branches / clones) ---------------------------
    @property
    def branches(self) -> Branches:
        from lance_format.dataset.branches import Branches, table_root

        return Branches(table_root(self))

    def create_branch(self, branch: str, reference: Reference = None,
                      storage_options: dict[str, str] | None = None) -> LanceDataset:
        """Create ``branch`` from ``reference`` (a version, tag or ``(branch, version)``; None: this
        version) and return the branch's dataset (pylance's ``create_branch``).

        Raises
        ------
        BranchError
            The branch exists already or its name is invalid.
        """
        from lance_format.dataset.branches import create_branch

        return create_branch(self, branch, reference, storage_options)

    def shallow_clone(self, target_path: str | os.PathLike[str], reference: Reference,
                      storage_options: dict[str, str] | None = None, **kwargs: Any) -> LanceDataset:
        """A new table at ``target_path`` whose first version references this table's files at
        ``reference`` (pylance's ``shallow_clone``; nothing is copied)."""
        from lance_format.dataset.clones import shallow_clone

        return shallow_clone(self, target_path, reference, storage_options)

    def deep_clone(self, target_path: str | os.PathLike[str], reference: Reference,
                   storage_options: dict[str, str] | None = None, **kwargs: Any) -> LanceDataset:
        """A new table at ``target_path`` with copies of this table's files at ``reference``
        (pylance's ``deep_clone``)."""
        from lance_format.dataset.clones import deep_clone

        return deep_clone(self, target_path, reference, storage_options)

    def base_paths(self) -> dict[int, table_pb2.BasePath]:
        """The base paths of this version, by id (pylance's ``base_paths()``)."""
        return {b.id: b for b in self.manifest.base_paths}

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
            m = read_manifest(self._store, listing.versions[version], repair=False).manifest
            nanos = m.timestamp.seconds * 1_000_000_000 + m.timestamp.nanos
            # Same float arithmetic as pylance, so both report the identical microsecond.
            stamp = datetime.fromtimestamp(nanos // 1e9) + timedelta(microseconds=(nanos % 1e9) // 1e3)
            result.append({"version": version, "timestamp": stamp, "metadata": _summary(m)})
        return result

    def checkout_version(self, version: int | str) -> "LanceDataset":
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
        return LanceDataset(self._store, version)

    def open_latest(self) -> "LanceDataset":
        """A new object at the table's latest version (this one stays where it is)."""
        return LanceDataset(self._store)

    def checkout_latest(self) -> None:
        """Move this object to the latest version of its branch (pylance's ``checkout_latest``)."""
        self._replace_version(self.latest_version)

    @property
    def max_field_id(self) -> int:
        """The highest field id in use: of the schema, or of a data file still holding a dropped
        column (pylance's ``max_field_id``; new columns get ids above it)."""
        from lance_format.dataset.evolution.base import next_field_id_of

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
        listing = _open_listing(self._store)
        if version not in listing.versions:
            raise VersionNotFoundError(f"version {version} does not exist", table=self.uri)
        return load_transaction(self._store, read_manifest(self._store, listing.versions[version]))

    def delta(
        self,
        compared_against: int | None = None,
        *,
        begin_version: int | None = None,
        end_version: int | None = None,
    ) -> "DatasetDelta":
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
        """
        from lance_format.dataset.changes.feed import build_delta

        return build_delta(self, compared_against, begin_version=begin_version, end_version=end_version)

    # -- mutations (each commits a new version and moves this object to it, like pylance) ------
    def _replace_version(self, version: int) -> None:
        """Point this object at ``version`` of the same table, dropping every cached view."""
        fresh = LanceDataset(self._store, version)
        self.__dict__.clear()
        self.__dict__.update(fresh.__dict__)

    # -- fragments ---------------------------------------------------------------------------
    def get_fragments(self) -> list[LanceFragment]:
        """Every fragment of this version, in manifest order.

        Returns
        -------
        list of LanceFragment
            The same objects on every call, so per-fragment caches are shared.
        """
        fragments: list[LanceFragment] | None = self.__dict__.get("_fragments")
        if fragments is None:
            made = self.__dict__.get("_fragments_made", {})
            fragments = [made.get(i) or LanceFragment(self, f) for i, f in enumerate(self.manifest.fragments)]
            self.__dict__["_fragments"] = fragments
        return fragments

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

    # -- reading -----------------------------------------------------------------------------
    def scanner(
        self,
        columns: list[str] | None = None,
        filter: str | pc.Expression | None = None,
        limit: int | None = None,
        offset: int | None = None,
        *,
        batch_size: int | None = None,
        fragments: list[LanceFragment] | None = None,
        with_row_id: bool = False,
        with_row_address: bool = False,
    ) -> LanceScanner:
        """Plan a scan of this version.

        Parameters
        ----------
        columns
            The top-level columns to read, system columns (``_rowid``, ``_rowaddr``, ...)
            allowed; all columns if None.
        filter
            A SQL predicate or a pyarrow expression the rows must satisfy.
        limit
            Return at most this many rows (after ``offset``).
        offset
            Skip this many (matching) rows first.
        batch_size
            The maximum number of rows per batch read from a fragment (default 65536).
        fragments
            Scan only these fragments of this version (in this order).
        with_row_id
            Add the ``_rowid`` column.
        with_row_address
            Add the ``_rowaddr`` column.

        Returns
        -------
        LanceScanner
            The planned scan; nothing is read until it is consumed.

        Raises
        ------
        InvalidInputError
            An unknown column, an invalid filter, a negative limit or offset, or a dict of
            column expressions.
        """
        return LanceScanner(
            self,
            columns=columns,
            filter=filter,
            limit=limit,
            offset=offset,
            with_row_id=with_row_id,
            with_row_address=with_row_address,
            batch_size=batch_size,
            fragments=fragments,
        )

    def to_table(
        self,
        columns: list[str] | None = None,
        filter: str | pc.Expression | None = None,
        limit: int | None = None,
        offset: int | None = None,
        *,
        batch_size: int | None = None,
        with_row_id: bool = False,
        with_row_address: bool = False,
    ) -> pa.Table:
        """Read this version (or the rows and columns asked for) into one table.

        Parameters
        ----------
        columns
            The top-level columns to read, system columns (``_rowid``, ``_rowaddr``, ...)
            allowed; all columns if None.
        filter
            A SQL predicate or a pyarrow expression the rows must satisfy.
        limit
            Return at most this many rows (after ``offset``).
        offset
            Skip this many (matching) rows first.
        batch_size
            The maximum number of rows per batch read from a fragment (default 65536).
        with_row_id
            Add the ``_rowid`` column.
        with_row_address
            Add the ``_rowaddr`` column.

        Returns
        -------
        pa.Table
            The rows in table order.

        Raises
        ------
        InvalidInputError
            An unknown column, an invalid filter, a negative limit or offset, or a dict of
            column expressions.
        """
        return self.scanner(columns, filter, limit, offset, batch_size=batch_size, with_row_id=with_row_id,
                            with_row_address=with_row_address).to_table()

    def to_batches(
        self,
        columns: list[str] | None = None,
        filter: str | pc.Expression | None = None,
        limit: int | None = None,
        offset: int | None = None,
        *,
        batch_size: int | None = None,
        with_row_id: bool = False,
        with_row_address: bool = False,
    ) -> Iterator[pa.RecordBatch]:
        """Stream this version (or the rows and columns asked for) batch by batch.

        Parameters
        ----------
        columns
            The top-level columns to read, system columns (``_rowid``, ``_rowaddr``, ...)
            allowed; all columns if None.
        filter
            A SQL predicate or a pyarrow expression the rows must satisfy.
        limit
            Return at most this many rows (after ``offset``).
        offset
            Skip this many (matching) rows first.
        batch_size
            The maximum number of rows per batch read from a fragment (default 65536).
        with_row_id
            Add the ``_rowid`` column.
        with_row_address
            Add the ``_rowaddr`` column.

        Returns
        -------
        Iterator of pa.RecordBatch
            The batches in table order; the iterator reads lazily.

        Raises
        ------
        InvalidInputError
            An unknown column, an invalid filter, a negative limit or offset, or a dict of
            column expressions.
        """
        return self.scanner(columns, filter, limit, offset, batch_size=batch_size, with_row_id=with_row_id,
                            with_row_address=with_row_address).to_batches()

    def to_pandas(
        self,
        columns: list[str] | None = None,
        filter: str | pc.Expression | None = None,
        limit: int | None = None,
        offset: int | None = None,
        nearest: None = None,
        batch_size: int | None = None,
        *,
        with_row_id: bool = False,
        with_row_address: bool = False,
    ) -> Any:
        """Read this version (or the rows and columns asked for) into a pandas DataFrame.

        Takes :meth:`to_table`'s arguments; ``nearest`` (vector search) is not supported.

        Raises
        ------
        UnsupportedFeatureError
            ``nearest`` was given.
        InvalidInputError
            An unknown column or an invalid filter.
        """
        if nearest is not None:
            raise UnsupportedFeatureError("vector search (nearest=) is not supported", table=self.uri)
        return self.to_table(columns, filter, limit, offset, batch_size=batch_size, with_row_id=with_row_id,
                             with_row_address=with_row_address).to_pandas()

    def head(self, num_rows: int, **scan_options: Any) -> pa.Table:
        """The first ``num_rows`` rows in table order (pylance's ``head``).

        ``scan_options`` are :meth:`scanner`'s (``columns``, ``filter``, ``with_row_id``, ...).

        Raises
        ------
        InvalidInputError
            ``num_rows`` is negative, or a scan option is invalid.
        """
        return self.scanner(limit=num_rows, **scan_options).to_table()

    def count_rows(
        self,
        filter: str | pc.Expression | None = None,
        *,
        fragments: list[LanceFragment] | None = None,
    ) -> int:
        """The number of live rows, or of the rows matching ``filter``.

        Without a filter the count comes from the manifest, without reading data.

        Parameters
        ----------
        filter
            A SQL predicate or a pyarrow expression.
        fragments
            Count only these fragments of this version.

        Returns
        -------
        int
            The row count.

        Raises
        ------
        InvalidInputError
            The filter is not valid for the table.
        """
        return self.scanner(columns=[] if filter is not None else None, filter=filter, fragments=fragments).count_rows()

    def take(
        self,
        indices: Sequence[int] | np.ndarray | pa.Array,
        columns: list[str] | None = None,
    ) -> pa.Table:
        """Rows at the given logical positions (0 .. count_rows()-1), in the given order.

        Parameters
        ----------
        indices
            Row positions among the live rows; repeats are allowed.
        columns
            The columns to read; all columns if None.

        Returns
        -------
        pa.Table
            One row per index, in the order of ``indices``.

        Raises
        ------
        InvalidInputError
            An index is not an integer or out of range, or a column is unknown.
        """
        positions = row_positions(indices, table=self.uri)
        scanner = self.scanner(columns=columns)
        fragments = self.get_fragments()
        counts = np.array([f.count_rows() for f in fragments], dtype=np.int64)
        total = int(counts.sum())
        if len(positions) and (positions.min() < 0 or positions.max() >= total):
            bad = int(positions[(positions < 0) | (positions >= total)][0])
            raise InvalidInputError(f"take index {bad} is out of range for {total} rows", table=self.uri)
        starts = np.concatenate([[0], np.cumsum(counts)])
        owner = np.searchsorted(starts, positions, side="right") - 1
        pieces: list[pa.RecordBatch] = []
        order: list[np.ndarray] = []
        for index in np.unique(owner):
            fragment = fragments[int(index)]
            where = np.flatnonzero(owner == index)
            live = fragment.live_offsets()
            physical = live[positions[where] - starts[index]]
            pieces.append(scanner.take_physical(fragment, physical))
            order.append(where)
        schema = scanner.projected_schema
        if not pieces:
            return schema.empty_table()
        table = pa.Table.from_batches(pieces, schema=schema)
        inverse = np.empty(len(positions), dtype=np.int64)
        inverse[np.concatenate(order)] = np.arange(len(positions))
        return table.take(pa.array(inverse))


class _ConfigDict(dict[str, str]):
    """A config dict that can also be called, since pylance's ``config`` is a method."""

    def __call__(self) -> dict[str, str]:
        return dict(self)


def _summary(manifest: table_pb2.Manifest) -> dict[str, str]:
    fragments = manifest.fragments
    physical = sum(f.physical_rows for f in fragments)
    deleted = sum(deleted_row_count(f) for f in fragments)
    stats = {
        "total_data_file_rows": physical,
        "total_data_files": sum(len(f.files) for f in fragments),
        "total_deletion_file_rows": deleted,
        "total_deletion_files": sum(1 for f in fragments if f.HasField("deletion_file")),
        "total_files_size": sum(d.file_size_bytes for f in fragments for d in f.files),
        "total_fragments": len(fragments),
        "total_rows": physical - deleted,
    }
    return {key: str(value) for key, value in stats.items()}


def dataset(uri: str | os.PathLike[str], version: int | str | None = None, *,
            storage_options: Mapping[str, str] | None = None) -> LanceDataset:
    """Open a Lance table at its latest version, or at ``version`` (a number or a tag name).

    ``storage_options``: object-store settings with Lance's keys (``aws_access_key_id``,
    ``aws_endpoint``, ``allow_http``, ...) for ``s3://`` URIs; see the README.
    """
    return LanceDataset(uri, version, storage_options=storage_options)
