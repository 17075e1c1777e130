"""``DirectoryNamespace``: official Lance's directory namespace (V1 and V2) on this engine.

The catalog side (namespaces; creating, declaring, registering, dropping and finding tables) is
here; the data, version and tag operations are in :mod:`lance_format.namespace.table_requests`.
Errors are the ``lance_namespace`` package's typed errors, as pylance raises them.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from lance_namespace import (
    CreateNamespaceRequest,
    CreateNamespaceResponse,
    CreateTableRequest,
    CreateTableResponse,
    DeclareTableRequest,
    DeclareTableResponse,
    DeregisterTableRequest,
    DeregisterTableResponse,
    DescribeNamespaceRequest,
    DescribeNamespaceResponse,
    DescribeTableRequest,
    DescribeTableResponse,
    DropNamespaceRequest,
    DropNamespaceResponse,
    DropTableRequest,
    DropTableResponse,
    LanceNamespace,
    ListNamespacesRequest,
    ListNamespacesResponse,
    ListTablesRequest,
    ListTablesResponse,
    NamespaceExistsRequest,
    NamespaceExistsResponse,
    RegisterTableRequest,
    RegisterTableResponse,
    TableExistsRequest,
    TableExistsResponse,
)
from lance_namespace.errors import (
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NamespaceNotFoundError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedOperationError,
)

from lance_format.errors import CommitConflictError, DatasetAlreadyExistsError
from lance_format.namespace import manifest, storage, table_ops
from lance_format.namespace.catalog import NAMESPACE, TABLE, Catalog, Settings
from lance_format.namespace.ids import DELIMITER, check_id, check_location, invalid_input, object_id
from lance_format.namespace.table_requests import TableRequests


def _page(names: list[str], page_token: str | None, limit: int | None) -> tuple[list[str], str | None]:
    """Sorted names after ``page_token``; the next token when ``limit`` cut the list."""
    names = sorted(set(names))
    if page_token:
        names = [n for n in names if n > page_token]
    if limit is not None and limit > 0 and len(names) > limit:
        return names[:limit], names[limit - 1]
    return names, None


class DirectoryNamespace(TableRequests, LanceNamespace):
    """Tables in a folder (local or object store), as pylance's ``lance.namespace.DirectoryNamespace``.

    Parameters
    ----------
    root
        The catalog's folder or object-store URI.
    manifest_enabled
        ``"true"`` (default): keep the V2 ``__manifest`` table (child namespaces, multi-level ids,
        registered tables); ``"false"``: V1, one ``<name>.lance`` folder per table.
    dir_listing_enabled
        ``"true"`` (default): in V2, root-level ``<name>.lance`` folders the manifest does not list
        are tables too.
    storage.*
        Object-store options (``storage.aws_region=...``).
    """

    def __init__(self, session: Any = None, context_provider: Any = None, **properties: Any) -> None:
        self._settings = Settings.from_properties({str(k): v for k, v in properties.items()})
        self._catalog = Catalog(self._settings)

    def namespace_id(self) -> str:
        """A description of this namespace naming its root folder (pylance's text)."""
        return f'DirectoryNamespace {{ root: "{self._settings.root}" }}'

    def __repr__(self) -> str:
        return f"DirectoryNamespace({self.namespace_id()})"

    # -- helpers ----------------------------------------------------------------------------
    def _need_manifest(self, what: str) -> None:
        if not self._settings.manifest_enabled:
            raise UnsupportedOperationError(f"{what} is only supported when manifest mode is enabled "
                                            f"(root {self._settings.root})")

    def _table_id(self, parts: Any) -> list[str]:
        table = check_id(parts, "table")
        if len(table) > 1:
            self._need_manifest(f"Multi-level table id {table!r}")
        return table

    def _location(self, table: list[str], rows: pa.Table | None = None) -> str:
        location = self._catalog.table_location(table, rows)
        if location is None:
            raise TableNotFoundError(f"Table not found: {object_id(table)!r} under {self._settings.root}")
        return location

    def _storage_options(self) -> dict | None:
        return self._settings.storage_options

    def _check_namespace(self, namespace: list[str], rows: pa.Table | None = None) -> None:
        if namespace and self._catalog.namespace_row(namespace, rows) is None:
            raise NamespaceNotFoundError(f"Namespace not found: {object_id(namespace)!r}")

    # -- namespaces -------------------------------------------------------------------------
    def list_namespaces(self, request: ListNamespacesRequest) -> ListNamespacesResponse:
        """The child namespaces of ``request.id`` (the root if empty), paged by ``page_token``/``limit``.

        Raises
        ------
        NamespaceNotFoundError
            If the parent namespace does not exist.
        UnsupportedOperationError
            If the parent is not the root and manifest mode is off (V1 has no child namespaces).
        """
        parent = check_id(request.id, "namespace", allow_root=True)
        if not self._settings.manifest_enabled:
            if parent:
                raise UnsupportedOperationError("Child namespaces are only supported when manifest mode is enabled")
            return ListNamespacesResponse(namespaces=[])
        rows = self._catalog.rows()
        self._check_namespace(parent, rows)
        names, token = _page(Catalog.children(rows, parent, NAMESPACE), request.page_token, request.limit)
        return ListNamespacesResponse(namespaces=names, page_token=token)

    def describe_namespace(self, request: DescribeNamespaceRequest) -> DescribeNamespaceResponse:
        """The properties of namespace ``request.id`` (the root has none).

        Raises
        ------
        NamespaceNotFoundError
            If there is no such namespace.
        """
        namespace = check_id(request.id, "namespace", allow_root=True)
        if not namespace:
            return DescribeNamespaceResponse(properties={})
        found = self._catalog.namespace_row(namespace)
        if found is None:
            raise NamespaceNotFoundError(f"Namespace not found: {object_id(namespace)!r}")
        return DescribeNamespaceResponse(properties=manifest.decode_metadata(found["metadata"]) or {})

    def namespace_exists(self, request: NamespaceExistsRequest) -> NamespaceExistsResponse:
        """Raises NamespaceNotFoundError when there is no such namespace (as pylance does)."""
        self.describe_namespace(DescribeNamespaceRequest(id=request.id))
        return NamespaceExistsResponse()

    def create_namespace(self, request: CreateNamespaceRequest) -> CreateNamespaceResponse:
        """Create child namespace ``request.id`` with ``request.properties``.

        ``request.mode``: ``"create"`` (default) refuses an existing namespace, ``"exist_ok"`` keeps it,
        ``"overwrite"`` replaces its properties.

        Raises
        ------
        NamespaceAlreadyExistsError
            If the id exists (as a table, or as a namespace in ``"create"`` mode).
        NamespaceNotFoundError
            If its parent namespace does not exist.
        UnsupportedOperationError
            If manifest mode is off.
        """
        namespace = check_id(request.id, "namespace")
        self._need_manifest("Child namespaces")
        mode = (request.mode or "create").lower()
        key = object_id(namespace)
        metadata = manifest.encode_metadata(request.properties)

        def change(rows: pa.Table) -> pa.Table:
            self._check_namespace(namespace[:-1], rows)
            existing = manifest.lookup(rows, key)
            if existing is not None:
                if existing["object_type"] != NAMESPACE or mode == "create":
                    raise NamespaceAlreadyExistsError(f"Namespace already exists: {key!r}")
                if mode == "exist_ok":
                    return rows
                rows = manifest.without(rows, key)  # overwrite: new properties
            return pa.concat_tables([rows, manifest.row(key, NAMESPACE, None, metadata)])

        self._catalog.manifest.mutate(change)
        return CreateNamespaceResponse(properties=request.properties)

    def drop_namespace(self, request: DropNamespaceRequest) -> DropNamespaceResponse:
        """Drop empty namespace ``request.id`` (``request.mode="skip"``: a missing one is no error).

        Raises
        ------
        NamespaceNotFoundError
            If there is no such namespace (and the mode is not ``"skip"``).
        NamespaceNotEmptyError
            If it still holds namespaces or tables (drops never cascade).
        UnsupportedOperationError
            If manifest mode is off.
        """
        namespace = check_id(request.id, "namespace")
        self._need_manifest("Child namespaces")
        key = object_id(namespace)
        skip = (request.mode or "").lower() == "skip"

        def change(rows: pa.Table) -> pa.Table:
            if self._catalog.namespace_row(namespace, rows) is None:
                if skip:
                    return rows
                raise NamespaceNotFoundError(f"Namespace not found: {key!r}")
            # no cascading drop: official Lance refuses it too, and it would delete tables' data
            inside = pc.sum(pc.starts_with(rows["object_id"], key + DELIMITER)).as_py() or 0
            if inside:
                raise NamespaceNotEmptyError(f"Namespace not empty: {key!r} (contains {inside} child objects)")
            return manifest.without(rows, key)

        self._catalog.manifest.mutate(change)
        return DropNamespaceResponse()

    # -- finding tables ---------------------------------------------------------------------
    def list_tables(self, request: ListTablesRequest) -> ListTablesResponse:
        """The tables directly in namespace ``request.id`` (the root if empty), paged.

        At the root, unlisted ``<name>.lance`` folders count too when directory listing is on (or in V1);
        ``request.include_declared=False`` leaves out tables declared but not yet written.

        Raises
        ------
        NamespaceNotFoundError
            If the namespace does not exist.
        UnsupportedOperationError
            If the namespace is not the root and manifest mode is off.
        """
        namespace = check_id(request.id, "namespace", allow_root=True)
        names: list[str] = []
        if self._settings.manifest_enabled:
            rows = self._catalog.rows()
            self._check_namespace(namespace, rows)
            names = Catalog.children(rows, namespace, TABLE)
        elif namespace:
            raise UnsupportedOperationError("Child namespaces are only supported when manifest mode is enabled")
        if not namespace and (self._settings.dir_listing_enabled or not self._settings.manifest_enabled):
            names += self._catalog.root_folders()
        if request.include_declared is False:  # only tables with data (the default lists declared ones too)
            names = [n for n in set(names) if not storage.is_only_declared(
                self._catalog.full(self._location(namespace + [n])), self._storage_options())]
        page, token = _page(names, request.page_token, request.limit)
        return ListTablesResponse(tables=page, page_token=token)

    def describe_table(self, request: DescribeTableRequest) -> DescribeTableResponse:
        """Where table ``request.id`` lives; with ``load_detailed_metadata`` its version and metadata too.

        Raises
        ------
        TableNotFoundError
            If there is no such table.
        UnsupportedOperationError
            If the id has several levels and manifest mode is off.
        """
        table = self._table_id(request.id)
        full = self._catalog.full(self._location(table))
        response = DescribeTableResponse(table=table[-1], namespace=table[:-1], location=full, table_uri=full)
        if request.load_detailed_metadata or request.check_declared:
            declared = storage.is_only_declared(full, self._storage_options())
            response.is_only_declared = declared
            if request.load_detailed_metadata and not declared:
                ds = self._open(table, request.version)
                response.version = ds.version
                response.metadata = {k: str(v) for k, v in ds.versions()[-1].get("metadata", {}).items()} or None
        return response

    def table_exists(self, request: TableExistsRequest) -> TableExistsResponse:
        """Raises TableNotFoundError when there is no such table (as pylance does)."""
        self._location(self._table_id(request.id))
        return TableExistsResponse()

    # -- creating and dropping tables -------------------------------------------------------
    def _add_table(self, table: list[str], location: str, metadata: str | None = None) -> None:
        """Add a table's manifest row (V2), refusing when another writer added the id first."""
        key = object_id(table)

        def change(rows: pa.Table) -> pa.Table:
            if manifest.lookup(rows, key) is not None:
                raise TableAlreadyExistsError(f"Table already exists: {key!r}")
            return pa.concat_tables([rows, manifest.row(key, TABLE, location, metadata)])

        self._catalog.manifest.mutate(change)

    def create_table(self, request: CreateTableRequest, request_data: bytes) -> CreateTableResponse:
        """Create table ``request.id`` from Arrow IPC stream bytes ``request_data``.

        ``request.mode``: ``"create"`` (default) refuses a table with data; any other mode overwrites
        it. A declared (empty) table is written in place.

        Returns
        -------
        CreateTableResponse
            The table's location and its first (or new) version.

        Raises
        ------
        TableAlreadyExistsError
            If the table has data in ``"create"`` mode, or a concurrent writer created it first.
        UnsupportedOperationError
            If the id has several levels and manifest mode is off.
        """
        table = self._table_id(request.id)
        rows = table_ops.read_ipc(request_data, object_id(table))
        mode = (request.mode or "create").lower()
        existing = self._catalog.table_location(table)
        if existing is not None and not storage.is_only_declared(self._catalog.full(existing),
                                                                  self._storage_options()):
            if mode == "create":
                raise TableAlreadyExistsError(f"Table already exists: {object_id(table)!r}")
            ds = table_ops.insert(self._catalog.full(existing), rows, "overwrite", self._storage_options())
            return CreateTableResponse(location=self._catalog.uri(existing), version=ds.version)
        location = existing or self._catalog.new_location(table)
        try:
            ds = table_ops.create(self._catalog.full(location), rows, self._storage_options())
        except (DatasetAlreadyExistsError, CommitConflictError) as exc:  # a concurrent creator committed first
            raise TableAlreadyExistsError(f"Table already exists: {object_id(table)!r}") from exc
        if self._settings.manifest_enabled and existing is None:
            try:
                self._add_table(table, location)
            except TableAlreadyExistsError:
                if location != existing and len(table) > 1:  # our own hashed folder lost the race
                    storage.delete_folder(self._catalog.full(location), self._storage_options())
                raise
        return CreateTableResponse(location=self._catalog.uri(location), version=ds.version)

    def declare_table(self, request: DeclareTableRequest) -> DeclareTableResponse:
        """Reserve table ``request.id`` (at ``request.location`` if given) without writing data.

        Raises
        ------
        TableAlreadyExistsError
            If the table exists or its folder is already taken.
        InvalidInputError
            (``lance_namespace``'s) If the location would leave the root.
        """
        table = self._table_id(request.id)
        if self._catalog.table_location(table) is not None:
            raise TableAlreadyExistsError(f"Table already exists: {object_id(table)!r}")
        location = self._catalog.new_location(table)
        if request.location:
            full_root = self._catalog.full("")
            given = request.location[len("file://"):] if request.location.startswith("file://") else request.location
            location = check_location(given[len(full_root):] if given.startswith(full_root) else given, table)
        if not storage.reserve(self._catalog.full(location), self._storage_options()):
            raise TableAlreadyExistsError(f"Table already exists: {object_id(table)!r}")
        if self._settings.manifest_enabled:
            self._add_table(table, location)
        return DeclareTableResponse(location=self._catalog.uri(location), properties=request.properties)

    def create_empty_table(self, request: Any) -> Any:
        """Deprecated name of :meth:`declare_table`."""
        return self.declare_table(DeclareTableRequest(id=request.id, location=getattr(request, "location", None)))

    def register_table(self, request: RegisterTableRequest) -> RegisterTableResponse:
        """Add an existing table at ``request.location`` (relative to the root) to the catalog.

        Raises
        ------
        InvalidInputError
            (``lance_namespace``'s) If the location is missing, or would leave the root.
        TableAlreadyExistsError
            If the id is already taken.
        UnsupportedOperationError
            If manifest mode is off.
        """
        table = self._table_id(request.id)
        self._need_manifest("register_table")
        if not request.location:
            raise invalid_input(f"register_table {object_id(table)!r} needs a location")
        location = check_location(request.location, table)
        self._add_table(table, location, manifest.encode_metadata(request.properties))
        return RegisterTableResponse(location=location, properties=request.properties)

    def deregister_table(self, request: DeregisterTableRequest) -> DeregisterTableResponse:
        """Remove table ``request.id`` from the catalog, leaving its data in place.

        Raises
        ------
        TableNotFoundError
            If no such table is registered (always so with manifest mode off).
        """
        table = self._table_id(request.id)
        key = object_id(table)
        if not self._settings.manifest_enabled:
            raise TableNotFoundError(f"Table not found: {key!r} (V1 catalogs register no tables)")
        removed: dict = {}

        def change(rows: pa.Table) -> pa.Table:
            found = manifest.lookup(rows, key)
            if found is None or found["object_type"] != TABLE:
                raise TableNotFoundError(f"Table not found: {key!r}")
            removed["location"] = found["location"]
            return manifest.without(rows, key)

        self._catalog.manifest.mutate(change)
        return DeregisterTableResponse(id=table, location=self._catalog.uri(removed["location"]))

    def drop_table(self, request: DropTableRequest) -> DropTableResponse:
        """Remove table ``request.id`` from the catalog and delete its folder.

        Raises
        ------
        TableNotFoundError
            If there is no such table.
        """
        table = self._table_id(request.id)
        key = object_id(table)
        location = self._location(table)
        if self._settings.manifest_enabled:
            def change(rows: pa.Table) -> pa.Table:
                return manifest.without(rows, key)

            if manifest.lookup(self._catalog.rows(), key) is not None:
                self._catalog.manifest.mutate(change)
        storage.delete_folder(self._catalog.full(location), self._storage_options())
        return DropTableResponse(id=table, location=self._catalog.uri(location))
