"""A namespace's table addressed by configuration: how Spark options and Dagster configs reach it.

Spark's ``namespace.*`` options and Dagster's ``namespace`` config name a namespace the way
official Lance's Spark connector configures its catalog (``impl`` plus the implementation's
properties: ``root`` for ``dir``, ``uri`` and ``headers.*`` for ``rest``, ``storage.*``) and a
table by a dotted id (``sales.orders``). :func:`locate_table` turns that into the table's
location and storage options, declaring a missing table (and its parent namespaces) when asked
to, as pylance's ``write_dataset(namespace_client=..., table_id=...)`` declares one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lance_format.errors import DatasetNotFoundError, InvalidInputError

IMPL_KEY = "impl"


@dataclass(frozen=True)
class TableLocation:
    """Where a namespace keeps a table: ``uri`` (a path for local tables), the storage options the
    namespace gave with it (merged over the configured ``storage.*`` ones), and whether this call
    declared it."""

    uri: str
    storage_options: dict[str, str] | None
    created: bool = False


def table_id_parts(table_id: str | Sequence[str], *, delimiter: str = ".") -> list[str]:
    """``"sales.orders"`` (or ``["sales", "orders"]``) as ``["sales", "orders"]``; empty parts refused."""
    if isinstance(table_id, str):
        parts = table_id.split(delimiter)
    elif isinstance(table_id, Sequence) and all(isinstance(p, str) for p in table_id):
        parts = list(table_id)
    else:
        raise InvalidInputError(f"a table id is a dotted string or a list of strings, got {table_id!r}")
    if not parts or any(not p.strip() for p in parts):
        raise InvalidInputError(f"table id {table_id!r} has an empty part (write it like 'sales.orders')")
    return parts


def dotted(table_id: Sequence[str]) -> str:
    """``["sales", "orders"]`` as ``"sales.orders"``."""
    return ".".join(table_id)


def namespace_properties(config: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
    """``(impl, properties)`` of a config ``{"impl": "dir", "root": ...}``. official Lance's Spark
    connector spells REST headers ``headers.<Name>``; pylance's client ``header.<Name>``: both work."""
    impl = config.get(IMPL_KEY)
    if not impl or not str(impl).strip():
        raise InvalidInputError(f"a namespace config needs '{IMPL_KEY}' ('dir', 'rest' or a class path), "
                                f"got keys {sorted(config)}")
    properties: dict[str, str] = {}
    for key, value in config.items():
        if key == IMPL_KEY or value is None:
            continue
        name = str(key)
        if name.startswith("headers."):
            name = "header." + name[len("headers."):]
        properties[name] = str(value)
    return str(impl).strip(), properties


def connect_namespace(config: Mapping[str, Any] | Any) -> Any:
    """A ``lance_namespace.LanceNamespace`` from a config mapping (``dir`` and ``rest`` are this
    engine's implementations), or ``config`` itself when it already is a namespace client."""
    from lance_namespace import LanceNamespace

    if isinstance(config, LanceNamespace):
        return config
    if not isinstance(config, Mapping):
        raise InvalidInputError(f"a namespace is a LanceNamespace or a config mapping with '{IMPL_KEY}', "
                                f"got {type(config).__name__}")
    from lance_format.namespace.adapter import connect

    impl, properties = namespace_properties(config)
    try:
        return connect(impl, properties)
    except Exception as exc:  # connect wraps every failure (unknown impl, missing root) in ValueError
        raise InvalidInputError(f"cannot connect to the {impl!r} namespace with properties "
                                f"{sorted(properties)}: {exc}") from exc


def describe(config: Mapping[str, Any] | Any) -> str:
    """A short name of a namespace for messages (``dir at /data/catalog``)."""
    if isinstance(config, Mapping):
        impl = config.get(IMPL_KEY)
        where = config.get("root") or config.get("uri")
        return f"{impl} namespace at {where}" if where else f"{impl} namespace"
    return type(config).__name__


def locate_table(namespace: Any, table_id: str | Sequence[str], *, create: bool = False,
                 storage_options: Mapping[str, str] | None = None) -> TableLocation:
    """The location of ``table_id`` in ``namespace`` (a client or a config mapping).

    With ``create`` a missing table is declared (its parent namespaces created first where the
    namespace has none), so the caller writes its first version there.

    Raises
    ------
    DatasetNotFoundError
        The table is not in the namespace (and ``create`` is false).
    InvalidInputError
        A bad table id or namespace config, or the namespace refusing the id.
    """
    from lance_namespace import DescribeTableRequest
    from lance_namespace.errors import LanceNamespaceError, TableAlreadyExistsError, TableNotFoundError

    parts = table_id_parts(table_id)
    client = connect_namespace(namespace)
    name = f"table {dotted(parts)!r} of the {describe(namespace)}"
    created = False
    try:
        try:
            response = client.describe_table(DescribeTableRequest(id=parts))
        except TableNotFoundError:
            if not create:
                raise DatasetNotFoundError(f"{name} does not exist") from None
            try:
                response, created = _declare(client, parts), True
            except TableAlreadyExistsError:  # a concurrent writer declared it first: use theirs
                response = client.describe_table(DescribeTableRequest(id=parts))
    except LanceNamespaceError as exc:
        raise InvalidInputError(f"{name}: the namespace refused it: {type(exc).__name__}: {exc}") from exc
    location = getattr(response, "location", None)
    if not location:
        raise InvalidInputError(f"{name}: the namespace gave no location")
    if location.startswith("file://"):
        location = location[len("file://"):]
    given = getattr(response, "storage_options", None) or {}
    merged = {**(storage_options or {}), **given}
    return TableLocation(location, merged or None, created)


def _declare(client: Any, parts: list[str]) -> Any:
    from lance_namespace import CreateNamespaceRequest, DeclareTableRequest, NamespaceExistsRequest
    from lance_namespace.errors import NamespaceAlreadyExistsError, NamespaceNotFoundError, UnsupportedOperationError

    for depth in range(1, len(parts)):
        parent = parts[:depth]
        try:
            client.namespace_exists(NamespaceExistsRequest(id=parent))
        except NamespaceNotFoundError:
            try:
                client.create_namespace(CreateNamespaceRequest(id=parent))
            except NamespaceAlreadyExistsError:
                pass  # created concurrently
        except UnsupportedOperationError:
            break  # a flat namespace (V1): declare_table says what it refuses
    return client.declare_table(DeclareTableRequest(id=parts))


__all__ = ["TableLocation", "connect_namespace", "describe", "dotted", "locate_table", "namespace_properties",
           "table_id_parts"]
