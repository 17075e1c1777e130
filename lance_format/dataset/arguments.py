"""Checks of user-supplied arguments, so that bad input raises a typed error naming what is wrong.

Python's own conversions are too forgiving for a table API: ``int(1.5)`` is 1, ``np.asarray``
flattens nested lists and turns ``2**64`` into an object array. These helpers accept exactly what
pylance accepts and raise :class:`InvalidInputError` (a ``ValueError``) for the rest.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import numpy as np
import pyarrow as pa

from lance_format.errors import InvalidInputError

_INT64_MAX = np.iinfo(np.int64).max


def row_positions(indices: Any, *, table: str | None = None) -> np.ndarray:
    """``take()``'s indices as a flat int64 array; non-integers, nesting and None are refused."""
    if indices is None or isinstance(indices, (str, bytes)):
        raise InvalidInputError(
            f"take indices must be a sequence of integers, got {type(indices).__name__}", table=table,
        )
    if isinstance(indices, (pa.Array, pa.ChunkedArray)):
        if not pa.types.is_integer(indices.type):
            raise InvalidInputError(f"take indices must be integers, got Arrow type {indices.type}", table=table)
        if indices.null_count:
            raise InvalidInputError("take indices must not be null", table=table)
        indices = indices.to_numpy()
    array = np.asarray(indices)
    if array.ndim != 1:
        if array.ndim == 0:
            raise InvalidInputError(
                f"take indices must be a sequence of integers, got {type(indices).__name__}", table=table,
            )
        raise InvalidInputError(f"take indices must be a flat sequence of integers, got shape {array.shape}",
                                table=table)
    if array.size == 0:
        return np.empty(0, dtype=np.int64)
    if array.dtype.kind == "i":
        return array.astype(np.int64, copy=False)
    if array.dtype.kind == "u":
        if int(array.max()) > _INT64_MAX:
            raise InvalidInputError(f"take index {int(array.max())} is out of range", table=table)
        return array.astype(np.int64)
    if array.dtype == object and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in array):
        # Python ints numpy could not hold: beyond any table's row count.
        biggest = max(array, key=abs)
        raise InvalidInputError(f"take index {biggest} is out of range", table=table)
    example = next((v for v in array.tolist() if not isinstance(v, int) or isinstance(v, bool)), array[0])
    raise InvalidInputError(
        f"take indices must be integers, got {type(example).__name__} {example!r}", table=table,
    )


def version_number(version: Any, *, table: str | None = None) -> int:
    """A version given as an int (or a numpy integer), refusing floats and bools."""
    if isinstance(version, bool) or not isinstance(version, numbers.Integral):
        raise InvalidInputError(
            f"version must be an integer or a tag name, got {type(version).__name__} {version!r}", table=table,
        )
    if version < 0:
        raise InvalidInputError(f"version must not be negative, got {version}", table=table)
    return int(version)


def column_names(columns: Iterable[Any], *, table: str | None = None) -> list[str]:
    """A projection's column names: strings, each at most once."""
    names = list(columns)
    for name in names:
        if not isinstance(name, str):
            raise InvalidInputError(f"column names must be strings, got {type(name).__name__} {name!r}",
                                    table=table)
    if len(set(names)) != len(names):
        repeated = sorted({n for n in names if names.count(n) > 1})
        raise InvalidInputError(f"duplicate column names in the projection: {repeated}", table=table)
    return names


def age(value: Any, *, name: str, table: str | None = None) -> timedelta | None:
    """A duration argument (``older_than``): a ``timedelta`` or None."""
    if value is None or isinstance(value, timedelta):
        return value
    raise InvalidInputError(
        f"{name} must be a datetime.timedelta, got {type(value).__name__} {value!r}", table=table,
    )

