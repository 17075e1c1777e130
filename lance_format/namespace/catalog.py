"""Where a directory namespace's objects are: V1 (``<name>.lance`` folders) or V2 (``__manifest``).

pylance 14.0.2 chooses by its properties: ``manifest_enabled`` (default true) keeps the
``__manifest`` table (created on the first operation that needs it) and allows child namespaces
and multi-level table ids; ``dir_listing_enabled`` (default true) also finds root-level
``<name>.lance`` folders that the manifest does not list, so a V1 catalog keeps working after V2
is turned on. A root-level table is stored in ``<name>.lance`` either way; a nested one in V2
gets a folder ``<8 hex digits>_<object id>`` (the digits random, spreading prefixes on object
stores, as official Lance does).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.namespace import storage
from lance_format.namespace.ids import DELIMITER, object_id
from lance_format.namespace.manifest import ManifestTable

TABLE, NAMESPACE = "table", "namespace"
TABLE_SUFFIX = ".lance"


def _true(value: str | None, default: bool) -> bool:
    return default if value is None else str(value).strip().lower() in ("true", "1", "yes")


@dataclass(frozen=True)
class Settings:
    """The properties a DirectoryNamespace is opened with."""

    root: str
    manifest_enabled: bool
    dir_listing_enabled: bool
    storage_options: dict | None

    @classmethod
    def from_properties(cls, properties: dict) -> Settings:
        from lance_namespace.errors import InvalidInputError

        root = properties.get("root")
        if not root:
            raise InvalidInputError("DirectoryNamespace needs a 'root' property (a folder or an object-store URI)")
        options = {k[len("storage."):]: str(v) for k, v in properties.items() if k.startswith("storage.")}
        return cls(storage.normalize_root(str(root)), _true(properties.get("manifest_enabled"), True),
                   _true(properties.get("dir_listing_enabled"), True), options or None)


class Catalog:
    """Lookups of tables and namespaces under one root."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.root = settings.root
        self.manifest = ManifestTable(self.root, settings.storage_options)

    # -- paths ------------------------------------------------------------------------------
    def full(self, relative: str) -> str:
        return f"{self.root}/{relative}"

    def uri(self, relative: str) -> str:
        """A location as pylance's create/declare answers give it (``file://`` for local roots)."""
        full = self.full(relative)
        return full if "://" in full else f"file://{full}"

    @staticmethod
    def new_location(table: list[str]) -> str:
        if len(table) == 1:
            return table[0] + TABLE_SUFFIX
        return f"{secrets.randbits(32):08x}_{object_id(table)}"

    # -- manifest rows ----------------------------------------------------------------------
    def rows(self) -> pa.Table:
        return self.manifest.read()[1] if self.settings.manifest_enabled else ManifestTable.empty()

    @staticmethod
    def children(rows: pa.Table, parent: list[str], object_type: str) -> list[str]:
        """Names of the direct children of ``parent`` of one type."""
        typed = rows.filter(pc.equal(rows["object_type"], object_type))
        ids = typed["object_id"].to_pylist()
        prefix = object_id(parent) + DELIMITER if parent else ""
        return [i[len(prefix):] for i in ids if i.startswith(prefix) and DELIMITER not in i[len(prefix):]]

    def root_folders(self) -> list[str]:
        """Root-level tables found by listing ``<name>.lance`` folders."""
        names = storage.child_folders(self.root, self.settings.storage_options)
        return [n[: -len(TABLE_SUFFIX)] for n in names if n.endswith(TABLE_SUFFIX) and len(n) > len(TABLE_SUFFIX)]

    def table_location(self, table: list[str], rows: pa.Table | None = None) -> str | None:
        """The root-relative folder of a table, or None when there is no such table."""
        if self.settings.manifest_enabled:
            rows = self.rows() if rows is None else rows
            found = rows.filter(pc.and_(pc.equal(rows["object_id"], object_id(table)),
                                        pc.equal(rows["object_type"], TABLE)))
            if found.num_rows:
                return str(found["location"][0].as_py())
            if len(table) > 1 or not self.settings.dir_listing_enabled:
                return None
        folder = table[0] + TABLE_SUFFIX
        return folder if storage.folder_exists(self.full(folder), self.settings.storage_options) else None

    def namespace_row(self, namespace: list[str], rows: pa.Table | None = None) -> dict | None:
        if not self.settings.manifest_enabled:
            return None
        rows = self.rows() if rows is None else rows
        found = rows.filter(pc.and_(pc.equal(rows["object_id"], object_id(namespace)),
                                    pc.equal(rows["object_type"], NAMESPACE)))
        return found.to_pylist()[0] if found.num_rows else None
