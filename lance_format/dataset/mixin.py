"""The base of ``LanceDataset``'s mixins (reading, committing, inspection, convenience writes)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset


class DatasetMixin:
    """Gives a mixin of ``LanceDataset`` its dataset, typed (it is only ever mixed into that)."""

    def _as_dataset(self) -> LanceDataset:
        return cast("LanceDataset", self)


__all__ = ["DatasetMixin"]
