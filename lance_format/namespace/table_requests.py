"""The data, version and tag operations of :class:`DirectoryNamespace` (a mixin).

Each finds the table's folder through the catalog, opens it with this engine and answers with
the ``lance_namespace`` response models.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from lance_namespace import (
    CountTableRowsRequest,
    CountTableRowsResponse,
    CreateTableBranchRequest,
    CreateTableBranchResponse,
    CreateTableTagRequest,
    CreateTableTagResponse,
    DeleteFromTableRequest,
    DeleteFromTableResponse,
    DeleteTableBranchRequest,
    DeleteTableBranchResponse,
    DeleteTableTagRequest,
    DeleteTableTagResponse,
    DescribeTableVersionRequest,
    DescribeTableVersionResponse,
    GetTableTagVersionRequest,
    GetTableTagVersionResponse,
    InsertIntoTableRequest,
    InsertIntoTableResponse,
    ListTableBranchesRequest,
    ListTableBranchesResponse,
    ListTableTagsRequest,
    ListTableTagsResponse,
    ListTableVersionsRequest,
    ListTableVersionsResponse,
    MergeInsertIntoTableRequest,
    MergeInsertIntoTableResponse,
    QueryTableRequest,
    QueryTableResponse,
    RestoreTableRequest,
    RestoreTableResponse,
    TableVersion,
    UpdateTableRequest,
    UpdateTableResponse,
    UpdateTableTagRequest,
    UpdateTableTagResponse,
)
from lance_namespace.errors import (
    TableBranchAlreadyExistsError,
    TableBranchNotFoundError,
    TableNotFoundError,
    TableTagAlreadyExistsError,
    TableTagNotFoundError,
    TableVersionNotFoundError,
)
from lance_namespace_urllib3_client.models import BranchContents, TagContents

from lance_format.dataset.dataset import LanceDataset
from lance_format.errors import BranchError, DatasetNotFoundError, TagError, VersionNotFoundError
from lance_format.namespace import table_ops
from lance_format.namespace.ids import object_id
from lance_format.table.naming import ManifestNaming, manifest_path, parse_manifest_name

if TYPE_CHECKING:
    from lance_format.namespace.catalog import Catalog


class TableRequests:
    """Operations on one table's rows, versions and tags."""

    _catalog: Catalog

    def _table_id(self, parts: Any) -> list[str]:
        raise NotImplementedError

    def _location(self, table: list[str], rows: Any = None) -> str:
        raise NotImplementedError

    def _storage_options(self) -> dict | None:
        raise NotImplementedError

    def _open(self, table: list[str], version: int | None = None) -> LanceDataset:
        full = self._catalog.full(self._location(table))
        try:
            return LanceDataset(full, version, storage_options=self._storage_options())
        except DatasetNotFoundError as exc:
            raise TableNotFoundError(f"Table not found: {object_id(table)!r} (declared, no data yet)") from exc
        except VersionNotFoundError as exc:
            raise TableVersionNotFoundError(f"Table {object_id(table)!r} has no version {version}") from exc

    def _latest(self, table: list[str]) -> LanceDataset:
        return self._open(table)

    # -- rows -------------------------------------------------------------------------------
    def count_table_rows(self, request: CountTableRowsRequest) -> CountTableRowsResponse:
        """The number of rows of table ``request.id`` (at ``request.version``) matching ``request.predicate``.

        Raises
        ------
        TableNotFoundError
            If there is no such table, or it is declared without data yet.
        TableVersionNotFoundError
            If the requested version does not exist.
        """
        ds = self._open(self._table_id(request.id), request.version)
        return CountTableRowsResponse(count=int(ds.count_rows(request.predicate)))

    def insert_into_table(self, request: InsertIntoTableRequest, request_data: bytes) -> InsertIntoTableResponse:
        """Append (or, with ``request.mode="overwrite"``, replace) rows from Arrow IPC stream bytes.

        Returns
        -------
        InsertIntoTableResponse
            The number of rows inserted and the table's new version.

        Raises
        ------
        TableNotFoundError
            If there is no such table.
        """
        table = self._table_id(request.id)
        full = self._catalog.full(self._location(table))
        rows = table_ops.read_ipc(request_data, object_id(table))
        ds = table_ops.insert(full, rows, request.mode, self._storage_options())
        return InsertIntoTableResponse(num_inserted_rows=rows.num_rows, version=ds.version)

    def merge_insert_into_table(self, request: MergeInsertIntoTableRequest,
                                request_data: bytes) -> MergeInsertIntoTableResponse:
        """Merge rows from Arrow IPC stream bytes into the table on ``request.on`` (upsert).

        ``request``'s ``when_matched_update_all``, ``when_not_matched_insert_all`` and related flags
        choose what happens to matched and unmatched rows, as in ``LanceDataset.merge_insert``.

        Returns
        -------
        MergeInsertIntoTableResponse
            The inserted, updated and deleted row counts and the table's new version.

        Raises
        ------
        TableNotFoundError
            If there is no such table, or it is declared without data yet.
        """
        table = self._table_id(request.id)
        stats = table_ops.merge_insert(self._open(table), table_ops.read_ipc(request_data, object_id(table)), request)
        return MergeInsertIntoTableResponse(num_inserted_rows=stats.get("num_inserted_rows", 0),
                                            num_updated_rows=stats.get("num_updated_rows", 0),
                                            num_deleted_rows=stats.get("num_deleted_rows", 0),
                                            version=self._latest(table).version)

    def update_table(self, request: UpdateTableRequest) -> UpdateTableResponse:
        """Set columns to SQL expressions (``request.updates``) in the rows matching ``request.predicate``.

        Returns
        -------
        UpdateTableResponse
            The number of rows updated and the table's new version.

        Raises
        ------
        TableNotFoundError
            If there is no such table, or it is declared without data yet.
        """
        table = self._table_id(request.id)
        updated = table_ops.update(self._open(table), request.predicate, request.updates)
        return UpdateTableResponse(updated_rows=updated, version=self._latest(table).version)

    def delete_from_table(self, request: DeleteFromTableRequest) -> DeleteFromTableResponse:
        """Delete the rows matching ``request.predicate``; the response names the new version.

        Raises
        ------
        TableNotFoundError
            If there is no such table, or it is declared without data yet.
        """
        table = self._table_id(request.id)
        table_ops.delete(self._open(table), request.predicate)
        return DeleteFromTableResponse(version=self._latest(table).version)

    def query_table(self, request: QueryTableRequest) -> QueryTableResponse:
        """The rows as an Arrow IPC file in ``data``."""
        if isinstance(request, dict):
            request = QueryTableRequest.from_dict(request)
        return QueryTableResponse(data=table_ops.query(self._open(self._table_id(request.id), request.version),
                                                       request))

    # -- versions ---------------------------------------------------------------------------
    def _version_entry(self, ds: LanceDataset, info: dict, naming: ManifestNaming) -> TableVersion:
        timestamp = info["timestamp"]
        return TableVersion(version=int(info["version"]),
                            manifest_path=f"{ds.uri.rstrip('/')}/{manifest_path(int(info['version']), naming)}",
                            timestamp_millis=int(timestamp.timestamp() * 1000),
                            metadata={k: str(v) for k, v in info.get("metadata", {}).items()} or None)

    @staticmethod
    def _naming(ds: LanceDataset) -> ManifestNaming:
        parsed = parse_manifest_name(os.path.basename(str(ds.manifest_path)))
        return parsed[1] if parsed else ManifestNaming.V2

    def list_table_versions(self, request: ListTableVersionsRequest) -> ListTableVersionsResponse:
        """The table's versions (number, manifest path, time, metadata), ascending unless ``request.descending``,
        at most ``request.limit``.

        Raises
        ------
        TableNotFoundError
            If there is no such table, or it is declared without data yet.
        """
        ds = self._open(self._table_id(request.id))
        naming = self._naming(ds)
        entries = [self._version_entry(ds, info, naming) for info in ds.versions()]
        entries.sort(key=lambda v: v.version, reverse=bool(request.descending))
        if request.limit:
            entries = entries[: request.limit]
        return ListTableVersionsResponse(versions=entries)

    def describe_table_version(self, request: Any) -> Any:
        """A version's entry; a dict request (pylance 14's form) gets a dict answer."""
        as_dict = isinstance(request, dict)
        if as_dict:
            request = DescribeTableVersionRequest.from_dict(request)
        table = self._table_id(request.id)
        ds = self._open(table, request.version)
        info = next(i for i in ds.versions() if i["version"] == ds.version)
        response = DescribeTableVersionResponse(version=self._version_entry(ds, info, self._naming(ds)))
        return response.to_dict() if as_dict else response

    def restore_table(self, request: RestoreTableRequest) -> RestoreTableResponse:
        """Make ``request.version`` the table's latest version again (a new commit).

        Raises
        ------
        TableNotFoundError
            If there is no such table, or it is declared without data yet.
        TableVersionNotFoundError
            If the requested version does not exist.
        """
        self._open(self._table_id(request.id), request.version).restore()
        return RestoreTableResponse()

    # -- tags -------------------------------------------------------------------------------
    def list_table_tags(self, request: ListTableTagsRequest) -> ListTableTagsResponse:
        """The table's tags, each with its branch, version and manifest size.

        Raises
        ------
        TableNotFoundError
            If there is no such table, or it is declared without data yet.
        """
        ds = self._open(self._table_id(request.id))
        tags = {name: TagContents(branch=info.get("branch"), version=int(info["version"]),
                                  manifestSize=int(info.get("manifest_size") or 0))
                for name, info in ds.tags.list().items()}
        return ListTableTagsResponse(tags=tags)

    def get_table_tag_version(self, request: GetTableTagVersionRequest) -> GetTableTagVersionResponse:
        """The version (and branch) tag ``request.tag`` points at.

        Raises
        ------
        TableTagNotFoundError
            If the table has no such tag.
        TableNotFoundError
            If there is no such table, or it is declared without data yet.
        """
        ds = self._open(self._table_id(request.id))
        info = ds.tags.list().get(request.tag)
        if info is None:
            raise TableTagNotFoundError(f"Tag not found: {request.tag!r} on table {object_id(request.id or [])!r}")
        return GetTableTagVersionResponse(version=int(info["version"]), branch=info.get("branch"))

    def create_table_tag(self, request: CreateTableTagRequest) -> CreateTableTagResponse:
        """Tag ``request.version`` of the table as ``request.tag``.

        Raises
        ------
        TableTagAlreadyExistsError
            If the tag exists.
        TableVersionNotFoundError
            If the version cannot be tagged (it does not exist).
        TableNotFoundError
            If there is no such table, or it is declared without data yet.
        """
        ds = self._open(self._table_id(request.id))
        if request.tag in ds.tags.list():
            raise TableTagAlreadyExistsError(f"Tag already exists: {request.tag!r}")
        try:
            ds.tags.create(request.tag, request.version)
        except (TagError, VersionNotFoundError) as exc:
            raise TableVersionNotFoundError(f"Cannot tag version {request.version}: {exc}") from exc
        return CreateTableTagResponse()

    def delete_table_tag(self, request: DeleteTableTagRequest) -> DeleteTableTagResponse:
        """Delete tag ``request.tag`` (the version it points at stays).

        Raises
        ------
        TableTagNotFoundError
            If the table has no such tag.
        TableNotFoundError
            If there is no such table, or it is declared without data yet.
        """
        ds = self._open(self._table_id(request.id))
        if request.tag not in ds.tags.list():
            raise TableTagNotFoundError(f"Tag not found: {request.tag!r}")
        ds.tags.delete(request.tag)
        return DeleteTableTagResponse()

    def update_table_tag(self, request: UpdateTableTagRequest) -> UpdateTableTagResponse:
        """Point existing tag ``request.tag`` at ``request.version``.

        Raises
        ------
        TableTagNotFoundError
            If the table has no such tag.
        TableNotFoundError
            If there is no such table, or it is declared without data yet.
        """
        ds = self._open(self._table_id(request.id))
        if request.tag not in ds.tags.list():
            raise TableTagNotFoundError(f"Tag not found: {request.tag!r}")
        ds.tags.update(request.tag, request.version)
        return UpdateTableTagResponse()

    # -- branches ---------------------------------------------------------------------------
    def create_table_branch(self, request: CreateTableBranchRequest) -> CreateTableBranchResponse:
        """Create branch ``request.name`` from ``request.from_version`` (of ``request.from_branch`` if given).

        Raises
        ------
        TableBranchAlreadyExistsError
            If the branch exists.
        TableVersionNotFoundError
            If the source version does not exist.
        TableBranchNotFoundError
            If the source branch cannot be branched from (for example it does not exist).
        TableNotFoundError
            If there is no such table, or it is declared without data yet.
        """
        table = self._table_id(request.id)
        ds = self._open(table)
        if request.name in ds.branches.list():
            raise TableBranchAlreadyExistsError(f"Branch already exists: {request.name!r} on {object_id(table)!r}")
        reference: Any = (request.from_branch, request.from_version) if request.from_branch else request.from_version
        try:
            ds.create_branch(request.name, reference)
        except VersionNotFoundError as exc:
            raise TableVersionNotFoundError(f"Cannot branch {object_id(table)!r}: {exc}") from exc
        except BranchError as exc:
            raise TableBranchNotFoundError(f"Cannot branch {object_id(table)!r}: {exc}") from exc
        return CreateTableBranchResponse()

    def list_table_branches(self, request: ListTableBranchesRequest) -> ListTableBranchesResponse:
        """The table's branches, each with its parent branch and version, creation time and metadata.

        Raises
        ------
        TableNotFoundError
            If there is no such table, or it is declared without data yet.
        """
        ds = self._open(self._table_id(request.id))
        branches = {name: BranchContents(parentBranch=info.get("parent_branch"),
                                         parentVersion=int(info["parent_version"]),
                                         createAt=int(info.get("create_at") or 0),
                                         manifestSize=int(info.get("manifest_size") or 0),
                                         metadata=info.get("metadata") or None)
                    for name, info in ds.branches.list().items()}
        return ListTableBranchesResponse(branches=branches)

    def delete_table_branch(self, request: DeleteTableBranchRequest) -> DeleteTableBranchResponse:
        """Delete branch ``request.name`` of the table.

        Raises
        ------
        TableBranchNotFoundError
            If the table has no such branch.
        TableNotFoundError
            If there is no such table, or it is declared without data yet.
        """
        table = self._table_id(request.id)
        ds = self._open(table)
        if request.name not in ds.branches.list():
            raise TableBranchNotFoundError(f"Branch not found: {request.name!r} on {object_id(table)!r}")
        ds.branches.delete(request.name)
        return DeleteTableBranchResponse()
