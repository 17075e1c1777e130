"""The options of opening a table (``dataset()`` / ``LanceDataset(...)``) that need checking:
pylance's arguments this engine refuses, ``read_params`` keys, and ``asof`` times."""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from lance_format.errors import InvalidInputError
from lance_format.io import ObjectStore

# pylance's decoder settings, accepted with no effect
READ_PARAMS = ("cache_repetition_index", "validate_on_decode")


def refuse_unsupported(uri: Any, read_params: Mapping[str, Any] | None, **unsupported: Any) -> None:
    """Refuse options this engine cannot honour (set to anything but None) and unknown read_params."""
    where = uri.uri if isinstance(uri, ObjectStore) else os.fspath(uri)
    for name, value in unsupported.items():
        if value is not None:
            raise InvalidInputError(f"dataset({name}=...) is not supported by this engine", table=where)
    for key in read_params or {}:
        if key not in READ_PARAMS:
            raise InvalidInputError(f"unknown read_params key {key!r} (known: {list(READ_PARAMS)})", table=where)


def as_local_datetime(value: Any, *, table: str) -> datetime:
    """``asof`` as a naive local datetime, the form ``versions()`` reports timestamps in."""
    if isinstance(value, str):
        try:
            value = datetime.strptime(value, "%Y-%m-%d %H:%M:%S")
        except ValueError:
            try:
                value = datetime.fromisoformat(value)
            except ValueError:
                raise InvalidInputError(f"cannot read {value!r} as a time", table=table) from None
    elif hasattr(value, "to_pydatetime"):  # pandas.Timestamp
        value = value.to_pydatetime()
    if not isinstance(value, datetime):
        raise InvalidInputError(f"asof must be a datetime or a time string, got {type(value).__name__}", table=table)
    return value.astimezone().replace(tzinfo=None) if value.tzinfo is not None else value


__all__ = ["READ_PARAMS", "refuse_unsupported", "as_local_datetime"]
