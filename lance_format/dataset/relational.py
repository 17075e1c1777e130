"""pyarrow ``Dataset``'s relational methods (``filter``, ``sort_by``, ``join``, ``join_asof``).

pylance's ``LanceDataset`` is a ``pyarrow.dataset.Dataset`` subclass, so it has these names, but
calling them there fails (``join`` raises NotImplementedError, the others fail inside pyarrow).
Here they run: the table is scanned once and pyarrow's Acero does the work, giving the in-memory
``pyarrow.dataset.Dataset`` pyarrow's own methods return.
"""

from __future__ import annotations

from typing import Any

import pyarrow.dataset as pads

from lance_format.dataset.mixin import DatasetMixin


def _as_pyarrow(data: Any) -> pads.Dataset:
    """A pyarrow dataset of ``data``: a Lance dataset is scanned, pyarrow's own pass through."""
    # Lance datasets (ours and pylance's) are pyarrow Dataset subclasses without a native
    # dataset behind them: pyarrow's methods cannot run on them
    if isinstance(data, pads.Dataset) and type(data).__module__.startswith("pyarrow."):
        return data
    if hasattr(data, "to_table"):
        return pads.dataset(data.to_table())
    return pads.dataset(data)


class RelationalMethods(DatasetMixin):
    """``pyarrow.dataset.Dataset``'s ``filter``/``sort_by``/``join``/``join_asof`` on a Lance table."""

    def filter(self, expression: Any) -> pads.Dataset:
        """The rows matching ``expression`` (a pyarrow expression or a SQL filter string)."""
        return pads.dataset(self._as_dataset().to_table(filter=expression))

    def sort_by(self, sorting: str | list[tuple[str, str]], **kwargs: Any) -> pads.Dataset:
        """The rows sorted by ``sorting`` (a column name, or ``[(column, "ascending"|"descending")]``)."""
        return _as_pyarrow(self._as_dataset()).sort_by(sorting, **kwargs)

    def join(self, right_dataset: Any, keys: str | list[str], right_keys: str | list[str] | None = None,
             join_type: str = "left outer", left_suffix: str | None = None, right_suffix: str | None = None,
             coalesce_keys: bool = True, use_threads: bool = True) -> pads.Dataset:
        """pyarrow's ``Dataset.join`` with this table on the left; ``right_dataset`` may be a Lance
        dataset, a pyarrow dataset or table."""
        return _as_pyarrow(self._as_dataset()).join(
            _as_pyarrow(right_dataset), keys, right_keys=right_keys, join_type=join_type,
            left_suffix=left_suffix, right_suffix=right_suffix, coalesce_keys=coalesce_keys, use_threads=use_threads)

    def join_asof(self, right_dataset: Any, on: str, by: str | list[str], tolerance: int,
                  right_on: str | None = None, right_by: str | list[str] | None = None) -> pads.Dataset:
        """pyarrow's ``Dataset.join_asof`` with this table on the left."""
        return _as_pyarrow(self._as_dataset()).join_asof(
            _as_pyarrow(right_dataset), on, by, tolerance, right_on=right_on, right_by=right_by)
