"""Tables addressed through a Lance Namespace in the ``lance`` data source and the Python API.

``spark.read.format("lance").option("namespace.impl", "dir").option("namespace.root", ...)
.option("table_id", "sales.orders").load()``: every ``namespace.<key>`` option is the property
``<key>`` of the namespace, named as official Lance's Spark connector names its catalog
properties (``impl``, ``root``, ``uri``, ``headers.<Name>``, ``storage.<key>``, ...). The options
are resolved once, on the driver, into the table's ``path`` (and its storage options) before any
planning: reads ``describe_table``, writes also declare a missing table (creating its parent
namespaces), so the executors never talk to the catalog.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lance_format.errors import InvalidInputError

if TYPE_CHECKING:
    from lance_format.distributed import TableLocation

NAMESPACE_PREFIX = "namespace."
TABLE_ID = "table_id"
STORAGE_PREFIX = "storage."


def uses_namespace(options: Mapping[str, Any]) -> bool:
    """Whether the options address a namespace table (any ``namespace.*`` or ``table_id``)."""
    return any(str(k).lower().startswith(NAMESPACE_PREFIX) or str(k).lower() == TABLE_ID for k in options)


def namespace_config(options: Mapping[str, Any]) -> dict[str, str]:
    """The ``namespace.*`` options as a namespace config (``{"impl": ..., "root": ...}``)."""
    return {str(k)[len(NAMESPACE_PREFIX):]: str(v) for k, v in options.items()
            if str(k).lower().startswith(NAMESPACE_PREFIX)}


def resolve_options(options: Any, *, create: bool) -> Any:
    """``options`` with the namespace table's ``path`` and storage options in place of the
    ``namespace.*`` and ``table_id`` options (the same object when there are none). The
    namespace's ``storage.*`` properties serve the table too, under the ``storage.*`` options given.

    Raises
    ------
    InvalidInputError
        ``table_id`` without ``namespace.impl`` (or the other way round), a ``path`` as well, or
        a bad table id or namespace.
    DatasetNotFoundError
        A read of a table the namespace does not have.
    """
    if not uses_namespace(options):
        return options
    config = namespace_config(options)
    table_id = options.get(TABLE_ID)
    if not config.get("impl"):
        raise InvalidInputError(f"option 'table_id' ({table_id!r}) needs option 'namespace.impl' ('dir' or "
                                f"'rest') and its properties, e.g. 'namespace.root'")
    if not table_id:
        raise InvalidInputError("the namespace options need option 'table_id' (a dotted id like 'sales.orders')")
    if options.get("path"):
        raise InvalidInputError(f"give either a path ({options.get('path')!r}) or 'table_id' with 'namespace.*' "
                                f"options, not both")
    given = {str(k)[len(STORAGE_PREFIX):]: str(v) for k, v in options.items()
             if str(k).lower().startswith(STORAGE_PREFIX)}
    defaults = {k[len(STORAGE_PREFIX):]: v for k, v in config.items() if k.lower().startswith(STORAGE_PREFIX)}
    # imported here: the namespace package needs the ``namespace`` extra, plain path reads do not
    from lance_format.distributed import locate_table

    located = locate_table(config, str(table_id), create=create, storage_options={**defaults, **given})
    return with_location(options, located)


def with_location(options: Any, located: TableLocation) -> Any:
    """A copy of ``options`` that reads or writes ``located`` by path."""
    resolved = options.copy() if hasattr(options, "copy") else dict(options)
    for key in [k for k in resolved if str(k).lower().startswith(NAMESPACE_PREFIX) or str(k).lower() == TABLE_ID]:
        del resolved[key]
    resolved["path"] = located.uri
    for key, value in (located.storage_options or {}).items():
        resolved[STORAGE_PREFIX + key] = value
    return resolved


def located_table(uri: Any, namespace: Any, table_id: str | Sequence[str] | None, *, create: bool,
                  storage_options: Mapping[str, str] | None) -> tuple[Any, Mapping[str, str] | None]:
    """``(uri, storage_options)`` of :func:`read_dataframe` / :func:`write_dataframe` calls that
    name a ``namespace`` (a client or a config mapping) and a ``table_id`` instead of a ``uri``."""
    if namespace is None and table_id is None:
        if uri is None:
            raise InvalidInputError("give the table's uri, or namespace= and table_id=")
        return uri, storage_options
    if uri is not None:
        raise InvalidInputError(f"give either uri ({uri!r}) or namespace= and table_id=, not both")
    if namespace is None or table_id is None:
        raise InvalidInputError("namespace= and table_id= go together")
    from lance_format.distributed import locate_table

    located = locate_table(namespace, table_id, create=create, storage_options=storage_options)
    return located.uri, located.storage_options


__all__ = ["NAMESPACE_PREFIX", "TABLE_ID", "located_table", "namespace_config", "resolve_options",
           "uses_namespace", "with_location"]
