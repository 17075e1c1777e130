"""pylance's ``ShardedBatchIterator``: the batches of one shard (``rank`` of ``world_size``) of a
table, sharded by fragment (every ``world_size``-th fragment from ``rank``) or by batch (every
``world_size``-th run of ``batch_size`` rows). Deprecated in pylance (in favour of its samplers);
kept for code that still uses it."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from typing import Any, Literal

import numpy as np
import pyarrow as pa

from lance_format.dataset.dataset import LanceDataset
from lance_format.dataset.dataset import dataset as open_dataset
from lance_format.errors import InvalidInputError


class ShardedBatchIterator:
    """Iterates the record batches of shard ``rank`` of ``world_size``.

    ``granularity="fragment"`` (the default) reads every ``world_size``-th fragment starting at
    ``rank``; ``"batch"`` reads rows ``[k * batch_size, (k + 1) * batch_size)`` for every
    ``k ≡ rank (mod world_size)`` (the last run may be shorter). ``columns`` is a list of names or
    a ``{name: SQL expression}`` mapping; ``with_row_id`` adds ``_rowid`` (fragment sharding only).
    """

    def __init__(self, data: str | os.PathLike[str] | LanceDataset, rank: int, world_size: int, *,
                 columns: list[str] | dict[str, str] | None = None, batch_size: int = 1024 * 10,
                 granularity: Literal["fragment", "batch"] = "fragment", batch_readahead: int = 8,
                 with_row_id: bool = False) -> None:
        warnings.warn("ShardedBatchIterator is deprecated, use :class:`Sampler` instead", stacklevel=2)
        if world_size < 1 or not 0 <= rank < world_size:
            raise InvalidInputError(f"rank must be in [0, world_size), got rank={rank}, world_size={world_size}")
        self._rank, self._world_size = int(rank), int(world_size)
        self._batch_size = int(batch_size)
        self._granularity = granularity
        self._columns = columns
        self._with_row_id = with_row_id
        self._batch_readahead = batch_readahead
        self._ds = data if isinstance(data, LanceDataset) else open_dataset(data)

    def _iter_over_fragments(self) -> Iterator[pa.RecordBatch]:
        fragments = self._ds.get_fragments()
        for fragment in fragments[self._rank::self._world_size]:
            yield from fragment.to_batches(columns=self._columns, batch_size=self._batch_size,
                                           with_row_id=self._with_row_id, batch_readahead=self._batch_readahead)

    def _iter_over_batches(self) -> Iterator[pa.RecordBatch]:
        if self._with_row_id:
            raise NotImplementedError("with_row_id is not supported for batch sharding yet")
        total = self._ds.count_rows()
        for start in range(self._rank * self._batch_size, total, self._world_size * self._batch_size):
            stop = min(start + self._batch_size, total)
            if isinstance(self._columns, dict):  # SQL projections: a scan of the run
                table = self._ds.to_table(columns=self._columns, offset=start, limit=stop - start)
            else:
                table = self._ds.take(np.arange(start, stop, dtype=np.int64), columns=self._columns)
            yield from table.combine_chunks().to_batches(max_chunksize=max(1, stop - start))

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        if self._granularity == "fragment":
            return self._iter_over_fragments()
        if self._granularity == "batch":
            return self._iter_over_batches()
        raise InvalidInputError(f"Unrecognized granularity: {self._granularity}")

    @staticmethod
    def from_torch(data: Any, **kwargs: Any) -> ShardedBatchIterator:
        """Rank and world size from ``torch.distributed`` (pylance's ``from_torch``)."""
        import torch.distributed as dist  # type: ignore[import-not-found]

        return ShardedBatchIterator(data, dist.get_rank(), dist.get_world_size(), **kwargs)


__all__ = ["ShardedBatchIterator"]
