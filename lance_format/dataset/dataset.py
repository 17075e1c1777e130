"""``LanceDataset``: one version of a Lance table, with pylance's reading API."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.dataset.fragment import LanceFragment
from lance_format.dataset.scanner import LanceScanner
from lance_format.dataset.arguments import row_positions, version_number
from lance_format.errors import (
    DatasetNotFoundError,
    InvalidInputError,
    LanceError,
    VersionNotFoundError,
)
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
from lance_format.table.refs import resolve_reference
from lance_format.table.tags import Tags
from lance_format.table.transaction import load_transaction


def _open_listing(store: ObjectStore) -> VersionListing:
    listing = list_versions(store)
    if listing.latest is None:
        raise DatasetNotFoundError("no Lance table here (no manifests in _versions/)", table=store.uri)
    return listing


class LanceDataset:
    """A Lance table pinned at one version."""

    def __init__(self, uri: str | os.PathLike[str] | ObjectStore, version: int | str | None = None, *,
                 storage_options: dict[str, str] | None = None) -> None:
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
        return self._store.uri

    @property
    def version(self) -> int:
        return self._manifest_file.manifest.version

    @property
    def latest_version(self) -> int:
        return _open_listing(self._store).latest  # type: ignore[return-value]

    @property
    def manifest(self) -> table_pb2.Manifest:
        return self._manifest_file.manifest

    @property
    def manifest_file(self) -> ManifestFile:
        return self._manifest_file

    @cached_property
    def _base_stores(self) -> BaseStores:
        return BaseStores(self._store, self.manifest)

    @cached_property
    def lance_schema(self) -> LanceSchema:
        m = self.manifest
        return LanceSchema.from_protos(list(m.fields), dict(m.schema_metadata))

    @cached_property
    def schema(self) -> pa.Schema:
        return dataset_arrow_schema(self.lance_schema)

    @property
    def data_storage_version(self) -> str:
        return self.manifest.data_format.version or "2.0"

    @property
    def has_stable_row_ids(self) -> bool:
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
        return {k: v.decode(errors="replace") for k, v in self.manifest.schema_metadata.items()}

    @property
    def tags(self) -> Tags:
        from lance_format.dataset.branches import dataset_tags

        return dataset_tags(self)

    # -- branches and clones (lance_format.dataset.branches / clones) ---------------------------
    @property
    def branches(self) -> "Branches":  # noqa: F821
        from lance_format.dataset.branches import Branches, table_root

        return Branches(table_root(self))

    def create_branch(self, branch: str, reference=None, storage_options=None) -> "LanceDataset":
        from lance_format.dataset.branches import create_branch

        return create_branch(self, branch, reference, storage_options)

    def shallow_clone(self, target_path, reference, storage_options=None, **kwargs) -> "LanceDataset":
        from lance_format.dataset.clones import shallow_clone

        return shallow_clone(self, target_path, reference, storage_options)

    def deep_clone(self, target_path, reference, storage_options=None, **kwargs) -> "LanceDataset":
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
        """
        listing = _open_listing(self._store)
        result = []
        for version in sorted(listing.versions):
            m = read_manifest(self._store, listing.versions[version]).manifest
            nanos = m.timestamp.seconds * 1_000_000_000 + m.timestamp.nanos
            # Same float arithmetic as pylance, so both report the identical microsecond.
            stamp = datetime.fromtimestamp(nanos // 1e9) + timedelta(microseconds=(nanos % 1e9) // 1e3)
            result.append({"version": version, "timestamp": stamp, "metadata": _summary(m)})
        return result

    def checkout_version(self, version: int | str) -> "LanceDataset":
        return LanceDataset(self._store, version)

    def read_transaction(self, version: int | None = None) -> transaction_pb2.Transaction | None:
        """The transaction that produced ``version`` (default: this version), or None if unrecorded."""
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
    ) -> "DatasetDelta":  # noqa: F821
        """Changes between versions (pylance's ``delta``): ``compared_against`` compares with
        this version, or give ``begin_version`` (exclusive) and ``end_version`` (inclusive).
        See :class:`lance_format.dataset.delta.DatasetDelta` (adds ``get_changes()``)."""
        from lance_format.dataset.delta import build_delta  # delta imports this module

        return build_delta(self, compared_against, begin_version=begin_version, end_version=end_version)

    # -- mutations (each commits a new version and moves this object to it, like pylance) ------
    def _replace_version(self, version: int) -> None:
        """Point this object at ``version`` of the same table, dropping every cached view."""
        fresh = LanceDataset(self._store, version)
        self.__dict__.clear()
        self.__dict__.update(fresh.__dict__)

    def delete(self, predicate, **kwargs) -> dict[str, int]:
        """Delete rows matching a SQL predicate or pyarrow expression: ``{"num_deleted_rows": n}``."""
        from lance_format.dataset.mutations import delete

        return delete(self, predicate, **kwargs)

    def update(self, updates: dict[str, Any], where=None, conflict_retries: int = 10, retry_timeout=None,
               data_storage_version: str | None = None, **kwargs) -> dict[str, int]:
        """Set columns (SQL expressions or literals) on rows matching ``where``: ``{"num_rows_updated": n}``."""
        from lance_format.dataset.mutations import update

        if retry_timeout is not None:
            kwargs["retry_timeout"] = retry_timeout
        return update(self, updates, where, conflict_retries=conflict_retries,
                      data_storage_version=data_storage_version, **kwargs)

    def merge_insert(self, on):
        """A :class:`~lance_format.dataset.merge_insert.MergeInsertBuilder` keyed on ``on``."""
        from lance_format.dataset.mutations import merge_insert

        return merge_insert(self, on)

    def add_columns(self, transforms, read_columns=None, reader_schema=None, batch_size=None, **kwargs) -> None:
        from lance_format.dataset.schema_evolution import add_columns

        add_columns(self, transforms, read_columns, reader_schema, batch_size, **kwargs)

    def drop_columns(self, columns: list[str], **kwargs) -> None:
        from lance_format.dataset.schema_evolution import drop_columns

        drop_columns(self, columns, **kwargs)

    def alter_columns(self, *alterations, **kwargs) -> None:
        from lance_format.dataset.schema_evolution import alter_columns

        alter_columns(self, *alterations, **kwargs)

    def restore(self, **kwargs) -> None:
        """Commit the checked-out version as the newest version."""
        from lance_format.dataset.maintenance import restore

        restore(self, **kwargs)

    @property
    def optimize(self):
        from lance_format.dataset.compaction import DatasetOptimizer

        return DatasetOptimizer(self)

    def cleanup_old_versions(self, older_than=None, retain_versions=None, **kwargs):
        from lance_format.dataset.maintenance import cleanup_old_versions

        return cleanup_old_versions(self, older_than, retain_versions, **kwargs)

    def update_config(self, values: dict[str, str | None], **kwargs) -> dict[str, str]:
        from lance_format.dataset.maintenance import update_config

        return update_config(self, values, **kwargs)

    def delete_config_keys(self, keys: list[str], **kwargs) -> None:
        from lance_format.dataset.maintenance import delete_config_keys

        delete_config_keys(self, keys, **kwargs)

    def update_metadata(self, values: dict[str, str | None], **kwargs) -> dict[str, str]:
        from lance_format.dataset.maintenance import update_metadata

        return update_metadata(self, values, **kwargs)

    def update_schema_metadata(self, values: dict[str, str | None], **kwargs) -> dict[str, str]:
        from lance_format.dataset.maintenance import update_schema_metadata

        return update_schema_metadata(self, values, **kwargs)

    def update_field_metadata(self, field_updates: dict[str, dict[str, str | None]], **kwargs) -> None:
        from lance_format.dataset.maintenance import update_field_metadata

        update_field_metadata(self, field_updates, **kwargs)

    # -- fragments ---------------------------------------------------------------------------
    def get_fragments(self) -> list[LanceFragment]:
        fragments = self.__dict__.get("_fragments")
        if fragments is None:
            made = self.__dict__.get("_fragments_made", {})
            fragments = [made.get(i) or LanceFragment(self, f) for i, f in enumerate(self.manifest.fragments)]
            self.__dict__["_fragments"] = fragments
        return fragments

    def fragment_at(self, index: int) -> LanceFragment:
        """The fragment at ``index`` of this version's fragment list, without wrapping the
        others (metadata-only planners touch a few fragments of large tables); the same object
        :meth:`get_fragments` returns, so per-fragment caches are shared."""
        fragments = self.__dict__.get("_fragments")
        if fragments is not None:
            return fragments[index]
        made = self.__dict__.setdefault("_fragments_made", {})
        fragment = made.get(index)
        if fragment is None:
            fragment = made[index] = LanceFragment(self, self.manifest.fragments[index])
        return fragment

    def get_fragment(self, fragment_id: int) -> LanceFragment | None:
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
        with_row_id: bool = False,
        with_row_address: bool = False,
        batch_size: int | None = None,
        fragments: list[LanceFragment] | None = None,
    ) -> LanceScanner:
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

    def to_table(self, columns=None, filter=None, limit=None, offset=None, with_row_id=False,
                 with_row_address=False, batch_size=None) -> pa.Table:
        return self.scanner(columns, filter, limit, offset, with_row_id, with_row_address, batch_size).to_table()

    def to_batches(self, columns=None, filter=None, limit=None, offset=None, with_row_id=False,
                   with_row_address=False, batch_size=None) -> Iterator[pa.RecordBatch]:
        return self.scanner(columns, filter, limit, offset, with_row_id, with_row_address, batch_size).to_batches()

    def count_rows(self, filter: str | pc.Expression | None = None, *, fragments=None) -> int:
        return self.scanner(columns=[] if filter is not None else None, filter=filter, fragments=fragments).count_rows()

    def take(self, indices, columns: list[str] | None = None) -> pa.Table:
        """Rows at the given logical positions (0 .. count_rows()-1), in the given order."""
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
            pieces.append(fragment.take_physical(scanner._read_schema, scanner._read_system, physical))
            order.append(where)
        schema = scanner.projected_schema
        if not pieces:
            return schema.empty_table()
        table = pa.Table.from_batches([scanner._project(p) for p in pieces], schema=schema)
        inverse = np.empty(len(positions), dtype=np.int64)
        inverse[np.concatenate(order)] = np.arange(len(positions))
        return table.take(pa.array(inverse))


class _ConfigDict(dict):
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
            storage_options: dict[str, str] | None = None) -> LanceDataset:
    """Open a Lance table at its latest version, or at ``version`` (a number or a tag name).

    ``storage_options``: object-store settings with Lance's keys (``aws_access_key_id``,
    ``aws_endpoint``, ``allow_http``, ...) for ``s3://`` URIs; see the README.
    """
    return LanceDataset(uri, version, storage_options=storage_options)
