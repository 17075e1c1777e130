"""pylance 14's ``namespace_client=`` / ``table_id=`` arguments of ``dataset`` and ``write_dataset``.

A table addressed through a Lance Namespace client (any ``lance_namespace.LanceNamespace``: this
engine's, pylance's, a REST client) is opened or written at the location the namespace gives:
``describe_table`` for reads, appends and overwrites, ``declare_table`` for a new table, as
pylance does; the storage options the namespace returns take precedence over the caller's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from lance_format.errors import InvalidInputError


def resolve(uri: Any, namespace_client: Any, table_id: Sequence[str] | None, mode: str,
            storage_options: Mapping[str, str] | None) -> tuple[Any, Mapping[str, str] | None]:
    """The table's URI and storage options; ``uri`` unchanged when no namespace is given."""
    if uri is not None and (namespace_client is not None or table_id is not None):
        raise InvalidInputError("Cannot specify both 'uri' and 'namespace_client/table_id'. "
                                "Please provide either 'uri' or both 'namespace_client' and 'table_id'.")
    if namespace_client is None and table_id is None:
        if uri is None:
            raise InvalidInputError("Must specify either 'uri' or both 'namespace_client' and 'table_id'.")
        return uri, storage_options
    if namespace_client is None or table_id is None:
        raise InvalidInputError("Both 'namespace_client' and 'table_id' must be provided together.")
    if isinstance(table_id, (str, bytes, os.PathLike)):
        raise InvalidInputError(f"table_id must be a list of strings, got {table_id!r}")
    from lance_namespace import DeclareTableRequest, DescribeTableRequest

    table = list(table_id)
    if mode == "create":
        response = namespace_client.declare_table(DeclareTableRequest(id=table, location=None))
    elif mode in ("read", "append", "overwrite"):
        response = namespace_client.describe_table(DescribeTableRequest(id=table, version=None))
    else:
        raise InvalidInputError(f"Invalid mode: {mode}")
    location = response.location
    if not location:
        raise InvalidInputError(f"Namespace did not return a table location for {table!r} ({mode})")
    if location.startswith("file://"):
        location = location[len("file://"):]
    given = getattr(response, "storage_options", None)
    if given:
        storage_options = {**(storage_options or {}), **given}
    return location, storage_options
