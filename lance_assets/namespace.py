"""Assets as tables of a Lance Namespace (a catalog): ``LanceIOManager(namespace={"impl": "dir", ...})``.

The IO manager's ``namespace`` is either a path prefix under ``base_uri`` (``"prod/sales"``) or a
Lance Namespace config: ``impl`` (``dir``, ``rest`` or a class path) and the implementation's
properties (``root``, ``uri``, ``headers.<Name>``, ``storage.<key>``, ..., flat or under
``properties``). With a config, the asset key ``["sales", "orders"]`` is the table id
``sales.orders`` of that catalog (``lance/table`` metadata names another id, ``lance/uri`` a
location outside it); the first write declares the table (and creates its namespaces), and
every read asks the namespace where the table is. ``dagster/table_name`` is the dotted id,
``dagster/uri`` the table's location. A version sensor watches such a table through
:meth:`lance_assets.sensors.LanceTableWatch.in_namespace`, resolved at each tick.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import dagster as dg

from lance_assets import engine
from lance_assets.config import TABLE_NAME, TABLE_URI, NamespaceMode
from lance_assets.metadata import table_name_of
from lance_assets.resources import table_uri
from lance_format.errors import DatasetNotFoundError, InvalidInputError

IMPL = "impl"
PROPERTIES = "properties"


def catalog_config(namespace: Any) -> dict[str, str] | None:
    """The Lance Namespace config when ``namespace`` is one (a mapping with ``impl``); None when
    it is a path prefix (a string) or unset."""
    if namespace is None or isinstance(namespace, str):
        return None
    if not isinstance(namespace, Mapping):
        raise InvalidInputError(f"namespace must be a path prefix ('prod/sales') or a Lance Namespace config "
                                f"({{'impl': 'dir', 'root': ...}}), got {type(namespace).__name__}")
    if not namespace.get(IMPL):
        raise InvalidInputError(f"a Lance Namespace config needs '{IMPL}' ('dir', 'rest' or a class path), "
                                f"got keys {sorted(namespace)}")
    flat = {str(k): v for k, v in namespace.items() if k != PROPERTIES}
    nested = namespace.get(PROPERTIES) or {}
    if not isinstance(nested, Mapping):
        raise InvalidInputError(f"namespace '{PROPERTIES}' must be a mapping, got {nested!r}")
    flat.update({str(k): v for k, v in nested.items()})
    return {k: str(v) for k, v in flat.items() if v is not None}


def dotted(table_id: Sequence[str]) -> str:
    """``["sales", "orders"]`` as ``sales.orders``."""
    return ".".join(table_id)


def resolve_table(uri: str, namespace: Mapping[str, Any] | None, *,
                  storage_options: Mapping[str, str] | None = None) -> str | None:
    """A watched table's location: ``uri`` itself, or for a namespace table (``uri`` its dotted
    id) where the namespace keeps it, None while the namespace has no such table."""
    if namespace is None:
        return uri
    try:
        return engine.locate_namespace_table(namespace, uri.split("."), create=False,
                                             storage_options=storage_options)[0]
    except DatasetNotFoundError:
        return None


class NamespaceTables:
    """The naming half of :class:`lance_assets.io_manager.LanceIOManager`: where an asset key's
    table is, under ``base_uri`` or in a Lance Namespace."""

    if TYPE_CHECKING:  # fields of the IO manager this mixes into
        base_uri: str
        namespace: Any
        namespace_mode: NamespaceMode

        @property
        def table_storage_options(self) -> dict[str, str] | None: ...

    @property
    def catalog(self) -> dict[str, str] | None:
        """The Lance Namespace config, or None when tables are paths under ``base_uri``."""
        return catalog_config(self.namespace)

    def table_id(self, asset_key: dg.AssetKey | Sequence[str],
                 definition_metadata: Mapping[str, Any] | None = None) -> list[str] | None:
        """A key's table id in the Lance Namespace (``lance/table`` metadata, dotted, names
        another), or None when the table is not a namespace table."""
        meta = {k: getattr(v, "value", v) for k, v in (definition_metadata or {}).items()}
        if self.catalog is None or meta.get(TABLE_URI):
            return None
        if meta.get(TABLE_NAME):
            return [p for p in str(meta[TABLE_NAME]).replace("/", ".").split(".") if p]
        return list(asset_key.path if isinstance(asset_key, dg.AssetKey) else asset_key)

    def uri_for(self, asset_key: dg.AssetKey | Sequence[str],
                definition_metadata: Mapping[str, Any] | None = None, *, create: bool = False) -> str:
        """The table of an asset key (or of an op output's path): ``lance/uri``, else in a Lance
        Namespace the location of its table id (declared first when ``create``; a missing table
        raises DatasetNotFoundError otherwise), else ``lance/table`` or the namespaced key path
        under ``base_uri``."""
        meta = {k: getattr(v, "value", v) for k, v in (definition_metadata or {}).items()}
        table_id = self.table_id(asset_key, meta)
        if table_id is not None:
            assert self.catalog is not None  # a table id is only given with a catalog
            return engine.locate_namespace_table(self.catalog, table_id, create=create,
                                                 storage_options=self.table_storage_options)[0]
        if meta.get(TABLE_URI):
            return str(meta[TABLE_URI])
        if not self.base_uri:
            raise InvalidInputError("LanceIOManager needs base_uri (or a Lance Namespace config as namespace)")
        if meta.get(TABLE_NAME):
            return table_uri(self.base_uri, str(meta[TABLE_NAME]))
        return table_uri(self.base_uri, self.table_path(asset_key))

    def table_path(self, asset_key: dg.AssetKey | Sequence[str]) -> list[str]:
        """A key's table path under ``base_uri``, with a path-prefix ``namespace`` applied."""
        path = list(asset_key.path if isinstance(asset_key, dg.AssetKey) else asset_key)
        if not self.namespace or self.catalog is not None:
            return path
        prefix = [part for part in str(self.namespace).split("/") if part]
        if NamespaceMode(self.namespace_mode) is NamespaceMode.REPLACE:
            return prefix + path[-1:]
        return prefix + path

    def table_name(self, asset_key: dg.AssetKey | Sequence[str],
                   definition_metadata: Mapping[str, Any] | None = None) -> str:
        """``dagster/table_name`` of a key's table: its dotted id in a Lance Namespace, else its
        location (unique across lakes)."""
        table_id = self.table_id(asset_key, definition_metadata)
        if table_id is not None:
            return dotted(table_id)
        return table_name_of(self.uri_for(asset_key, definition_metadata))

    def table_name_at(self, path: Sequence[str], definition_metadata: Mapping[str, Any] | None, uri: str) -> str:
        """``dagster/table_name`` of the table at ``uri`` that ``path`` (a key path) resolved to."""
        table_id = self.table_id(path, definition_metadata)
        return dotted(table_id) if table_id is not None else table_name_of(uri)


__all__ = ["NamespaceTables", "catalog_config", "dotted", "resolve_table"]
