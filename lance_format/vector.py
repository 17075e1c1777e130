"""pylance's ``lance.vector`` helpers that need no index: :func:`vec_to_table` builds a table of
float32 fixed-size-list vectors (this engine builds no vector indices; the accelerator trainers
of pylance's module are not offered)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from lance_format.errors import InvalidInputError


def _dimension(vectors: Any, ndim: int | None) -> int:
    """The common length of ``vectors`` (``ndim`` if given); refuses ragged input."""
    lengths = np.fromiter((len(v) for v in vectors), dtype=np.int64, count=len(vectors))
    expected = int(ndim) if ndim is not None else (int(lengths[0]) if lengths.size else 0)
    wrong = np.flatnonzero(lengths != expected)
    if wrong.size:
        raise InvalidInputError(f"Expected {expected} dimensions but got {int(lengths[wrong[0]])} "
                                f"for {vectors[int(wrong[0])]}")
    return expected


def _fixed_size_lists(vectors: Any, ndim: int | None) -> pa.FixedSizeListArray:
    values = np.asarray(vectors, dtype=np.float32)
    if ndim is None:
        ndim = int(values.shape[1]) if values.ndim > 1 else len(next(iter(vectors)))
    return pa.FixedSizeListArray.from_arrays(pa.array(values.ravel()), int(ndim))


def vec_to_table(data: dict | list | np.ndarray, names: str | list | None = None,
                 ndim: int | None = None, check_ndim: bool = True) -> pa.Table:
    """A table of float32 vectors (``fixed_size_list<float>[ndim]``), as pylance's ``vec_to_table``.

    ``data``: a dict (its keys become an ``id`` column, its values the vectors; ``names``
    defaults to ``["id", "vector"]``), or a list / 2-d ndarray of vectors (``names`` defaults to
    ``"vector"``). ``check_ndim`` refuses vectors of different lengths.
    """
    if isinstance(data, dict):
        names = ["id", "vector"] if names is None else names
        if not isinstance(names, (list, tuple)) or len(names) != 2:
            raise InvalidInputError("If data is a dict, names must be a list or tuple of 2 strings")
        vectors = list(data.values())
        if check_ndim:
            ndim = _dimension(vectors, ndim)
        return pa.Table.from_arrays([pa.array(list(data.keys())), _fixed_size_lists(vectors, ndim)],
                                    names=list(names))
    if isinstance(data, (list, np.ndarray)):
        names = ["vector"] if names is None else [names] if isinstance(names, str) else list(names)
        if len(names) != 1:
            raise InvalidInputError(f"names cannot be more than 1 got {len(names)}")
        if check_ndim:
            ndim = _dimension(data, ndim)
        return pa.Table.from_arrays([_fixed_size_lists(data, ndim)], names=names)
    raise NotImplementedError(f"data must be dict, list, or ndarray, got {type(data)} instead")


__all__ = ["vec_to_table"]
