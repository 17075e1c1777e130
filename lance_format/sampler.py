"""pylance's ``lance.sampler``: sampling rows of a table (:func:`maybe_sample`, for training
e.g. IVF centroids) and splitting a table between the ranks of a distributed job (samplers).

- :class:`FullScanSampler` / :class:`ShardedFragmentSampler`: whole fragments (every
  ``world_size``-th from ``rank``, optionally shuffled by ``seed``);
- :class:`ShardedBatchSampler`: runs of ``batch_size`` rows (every ``world_size``-th run from
  ``rank``); with a filter, every ``world_size``-th matching row, re-batched;
- :class:`ShardedFixedBatchSampler`: consecutive index ranges per rank; iterating it gives the row
  indices of each batch (for a PyTorch ``batch_sampler``), calling it reads batches.

Shuffles use Python's ``random`` seeded as pylance seeds it, so a seed gives pylance's order.
"""

from __future__ import annotations

import heapq
import math
import os
import random
import warnings
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import UnsupportedFeatureError

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset
    from lance_format.dataset.fragment import LanceFragment

Columns = list[str] | dict[str, str] | None
T = TypeVar("T")


@dataclass(order=True)
class PrioritizedItem(Generic[T]):
    """A heap entry ordered by ``priority`` alone (pylance's ``lance.sampler.PrioritizedItem``)."""

    priority: int
    item: T = field(compare=False)


def _open(dataset: str | os.PathLike[str] | LanceDataset) -> LanceDataset:
    if isinstance(dataset, (str, os.PathLike)):
        from lance_format.dataset.dataset import dataset as open_dataset

        return open_dataset(dataset)
    return dataset


def _rebatch(batches: Iterable[pa.RecordBatch], batch_size: int) -> Iterator[pa.RecordBatch]:
    """``batches`` cut again into batches of ``batch_size`` rows (the last may be shorter)."""
    pending: list[pa.RecordBatch] = []
    rows = 0
    for batch in batches:
        pending.append(batch)
        rows += batch.num_rows
        if rows > batch_size:
            table = pa.Table.from_batches(pending).combine_chunks()
            full = (rows - 1) // batch_size * batch_size  # keep at least one row back
            for start in range(0, full, batch_size):
                yield table.slice(start, batch_size).to_batches()[0]
            rest = table.slice(full)
            pending, rows = ([rest.to_batches()[0]] if rest.num_rows else []), rest.num_rows
    if rows:
        yield pa.Table.from_batches(pending).combine_chunks().to_batches()[0]


def _taken(dataset: LanceDataset, rows: np.ndarray, columns: list[str] | None) -> pa.RecordBatch:
    return dataset.take(rows, columns=columns).combine_chunks().to_batches(max_chunksize=max(1, len(rows)))[0]


def maybe_sample(dataset: str | os.PathLike[str] | LanceDataset, n: int, columns: list[str] | str,
                 batch_size: int = 10240, max_takes: int = 2048, filt: str | None = None) -> Iterator[pa.RecordBatch]:
    """About ``n`` rows of ``columns`` sampled at random, in batches of ``batch_size``: the whole
    table when it has no more than ``n`` rows; else ``n`` random rows, read in at most
    ``max_takes`` contiguous runs when ``n > max_takes`` (few random reads). With ``filt``, only
    ``"<column> IS NOT NULL"`` on the one column is supported (as in pylance)."""
    ds = _open(dataset)
    columns = [columns] if isinstance(columns, str) else columns
    total = ds.count_rows()
    if n >= total:
        yield from ds.to_batches(columns=columns, batch_size=batch_size, filter=filt)
    elif filt is not None:
        yield from _filtered_sample(ds, n, columns, batch_size, max_takes, filt, total)
    elif n > max_takes:
        yield from _run_sample(ds, n, columns, batch_size, max_takes, total)
    else:
        chosen = np.random.choice(total, n, replace=False)
        for start in range(0, len(chosen), batch_size):
            yield _taken(ds, chosen[start:start + batch_size], columns)


def _run_sample(ds: LanceDataset, n: int, columns: list[str], batch_size: int, max_takes: int,
                total: int) -> Iterator[pa.RecordBatch]:
    """``n`` rows as ``max_takes`` contiguous runs, one at a random place in each of
    ``max_takes`` equal stretches of the table."""
    stretch, per_run = total // max_takes, n // max_takes
    starts = np.arange(0, total, stretch)
    lengths = np.minimum(stretch, total - starts)
    runs = np.minimum(per_run, lengths)
    # stop once n rows are planned (a division remainder adds a short last stretch)
    planned = np.cumsum(np.full(len(starts), per_run)) - per_run
    keep = planned < n
    starts, lengths, runs = starts[keep], lengths[keep], runs[keep]
    slack = lengths - runs
    # each run starts at a random place in its stretch (where there is room)
    offsets = starts + (np.random.random(len(slack)) * slack).astype(np.int64)
    ends = np.cumsum(runs)
    rows = np.arange(int(ends[-1]) if len(ends) else 0) - np.repeat(ends - runs, runs) + np.repeat(offsets, runs)
    for start in range(0, len(rows), batch_size):
        yield _taken(ds, rows[start:start + batch_size], columns)


def _filtered_sample(ds: LanceDataset, n: int, columns: list[str], batch_size: int, target_takes: int,
                     filt: str, total: int) -> Iterator[pa.RecordBatch]:
    if not (len(columns) == 1 and filt.lower() == f"{columns[0]} is not null".lower()):
        raise UnsupportedFeatureError(f"Can't yet run filter <{filt}> in-memory")
    shard = math.ceil(n / target_takes)
    order = list(range(math.ceil(total / shard)))
    random.shuffle(order)

    def pieces() -> Iterator[pa.RecordBatch]:
        remaining = n
        for index in order:
            start = index * shard
            table = pc.drop_null(ds.to_table(columns=columns, offset=start, limit=min(shard, total - start)))
            table = table.slice(0, remaining)
            if table.num_rows:
                remaining -= table.num_rows
                yield from table.to_batches()
            if remaining <= 0:
                return

    yield from _rebatch(pieces(), batch_size)


def reservoir_sampling(stream: Iterable[T], k: int) -> list[T]:
    """``k`` items of ``stream`` chosen at random while streaming it (at most ``k`` held)."""
    rng = np.random.default_rng()
    heap: list[tuple[int, int, T]] = []
    for index, item in enumerate(stream):
        entry = (int(rng.integers(0, k * 2)), index, item)
        if len(heap) < k:
            heapq.heappush(heap, entry)
        else:
            heapq.heappushpop(heap, entry)
    return [item for _, _, item in heap]


class Sampler(ABC):
    """Reads batches of a table for one consumer; subclasses implement ``__call__``."""

    @abstractmethod
    def __call__(self, dataset: LanceDataset, *args: Any, batch_size: int = 128, columns: Columns = None,
                 filter: str | None = None, batch_readahead: int = 16, with_row_id: bool | None = False,
                 **kwargs: Any) -> Iterator[pa.RecordBatch]:
        """The batches this sampler reads of ``dataset``."""


class FragmentSampler(Sampler):
    """Reads the fragments :meth:`iter_fragments` picks, in that order."""

    def __call__(self, dataset: LanceDataset, *args: Any, batch_size: int = 128, columns: Columns = None,
                 filter: str | None = None, batch_readahead: int = 16, with_row_id: bool | None = False,
                 **kwargs: Any) -> Iterator[pa.RecordBatch]:
        fragments = list(self.iter_fragments(dataset, *args, **kwargs))
        scanner = dataset.scanner(batch_size=batch_size, columns=columns, filter=filter, with_row_id=bool(with_row_id),
                                  batch_readahead=batch_readahead, fragments=fragments)
        yield from scanner.to_batches()

    @abstractmethod
    def iter_fragments(self, dataset: LanceDataset, *args: Any, **kwargs: Any) -> Iterator[LanceFragment]:
        """The fragments to read, in order."""


class FullScanSampler(FragmentSampler):
    """Every fragment, in the table's order."""

    def iter_fragments(self, dataset: LanceDataset, *args: Any, **kwargs: Any) -> Iterator[LanceFragment]:
        yield from dataset.get_fragments()


class _Sharded:
    def __init__(self, rank: int, world_size: int, randomize: bool = False, seed: int = 0) -> None:
        self._rank, self._world_size = int(rank), int(world_size)
        self._randomize, self._seed = randomize, seed
        self._epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose order a randomized sampler gives (where the order depends on it)."""
        self._epoch = epoch


def _torch_rank() -> tuple[int, int]:
    import torch.distributed as dist  # type: ignore[import-not-found]

    return dist.get_rank(), dist.get_world_size()


class ShardedFragmentSampler(_Sharded, FragmentSampler):
    """Fragments ``rank, rank + world_size, ...`` (of the fragments shuffled by ``seed`` when
    ``randomize``)."""

    @staticmethod
    def from_torch(randomize: bool = False, seed: int = 0) -> ShardedFragmentSampler:
        """Rank and world size from ``torch.distributed``."""
        return ShardedFragmentSampler(*_torch_rank(), randomize=randomize, seed=seed)

    def iter_fragments(self, dataset: LanceDataset, *args: Any, **kwargs: Any) -> Iterator[LanceFragment]:
        fragments = dataset.get_fragments()
        if self._randomize:
            random.seed(self._seed)
            random.shuffle(fragments)
        yield from fragments[self._rank::self._world_size]


class ShardedBatchSampler(_Sharded, Sampler):
    """Runs of ``batch_size`` rows ``rank, rank + world_size, ...`` (in an order shuffled by
    ``seed`` when ``randomize``). With a filter, every ``world_size``-th matching row from
    ``rank``, re-batched to ``batch_size`` (shuffled through a bounded reservoir when
    ``randomize``)."""

    _len = 0

    def __len__(self) -> int:
        return self._len

    @staticmethod
    def from_torch(randomize: bool = False, seed: int = 0) -> ShardedBatchSampler:
        """Rank and world size from ``torch.distributed``."""
        return ShardedBatchSampler(*_torch_rank(), randomize=randomize, seed=seed)

    def _shard_scan(self, dataset: LanceDataset, batch_size: int, columns: Columns, batch_readahead: int,
                    filter: str) -> Iterator[pa.RecordBatch]:
        def mine() -> Iterator[pa.RecordBatch]:
            seen = 0
            for batch in dataset.scanner(columns=columns, batch_readahead=batch_readahead, filter=filter,
                                         scan_in_order=True).to_batches():
                first = (self._rank - seen) % self._world_size
                seen += batch.num_rows
                yield batch.take(pa.array(np.arange(first, batch.num_rows, self._world_size)))

        yield from _rebatch(mine(), batch_size)

    def _sample_filtered(self, dataset: LanceDataset, batch_size: int, columns: Columns, batch_readahead: int,
                         filter: str) -> Iterator[pa.RecordBatch]:
        batches = self._shard_scan(dataset, batch_size, columns, batch_readahead, filter)
        if not self._randomize:
            yield from batches
            return
        random.seed(self._seed + self._epoch)
        reservoir = 256  # batches held back to shuffle the stream without buffering it whole
        heap: list[tuple[int, int, pa.RecordBatch]] = []
        for index, batch in enumerate(batches):
            entry = (random.randint(0, reservoir * 2 - 1), index, batch)
            if len(heap) < reservoir:
                heapq.heappush(heap, entry)
            else:
                yield heapq.heappushpop(heap, entry)[2]
        yield from (batch for _, _, batch in heap)

    def _sample_all(self, dataset: LanceDataset, batch_size: int, columns: Columns,
                    batch_readahead: int) -> Iterator[pa.RecordBatch]:
        total = dataset.count_rows()
        starts = list(range(self._rank * batch_size, total, self._world_size * batch_size))
        if self._randomize:
            random.seed(self._seed)
            random.shuffle(starts)
        for start in starts:
            stop = min(start + batch_size, total)
            if isinstance(columns, dict):
                yield from dataset.to_table(columns=columns, offset=start, limit=stop - start).to_batches()
            else:
                yield _taken(dataset, np.arange(start, stop, dtype=np.int64), columns)

    def __call__(self, dataset: LanceDataset, *args: Any, batch_size: int = 128, columns: Columns = None,
                 filter: str | None = None, batch_readahead: int = 16, with_row_id: bool | None = None,
                 **kwargs: Any) -> Iterator[pa.RecordBatch]:
        if filter is None:
            if with_row_id is not None:
                warnings.warn("with_row_id is not supported for ShardedBatchSampler", stacklevel=2)
            return self._sample_all(dataset, batch_size, columns, batch_readahead)
        return self._sample_filtered(dataset, batch_size, columns, batch_readahead, filter)


class ShardedFixedBatchSampler(ShardedBatchSampler):
    """Consecutive index ranges per rank for a table of ``total_num_rows`` rows: rank ``r`` gets
    rows ``[r * ceil(total / world_size), (r + 1) * ceil(total / world_size))`` in batches of
    ``batch_size`` (their order shuffled per epoch when ``randomize``). Iterating gives each
    batch's row indices; calling it on a table reads batches as :class:`ShardedBatchSampler`."""

    def __init__(self, rank: int, world_size: int, randomize: bool = False, seed: int = 0, batch_size: int = 0,
                 total_num_rows: int = 0) -> None:
        super().__init__(rank, world_size, randomize, seed)
        self._total_num_rows, self._batch_size = int(total_num_rows), int(batch_size)
        if self._batch_size == 0 and self._total_num_rows == 0:
            self._len = 0
        else:
            self._len = math.ceil(math.ceil(self._total_num_rows / self._world_size) / self._batch_size)

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[list[int]]:
        per_rank = math.ceil(self._total_num_rows / self._world_size)
        start = self._rank * per_rank
        end = min(start + per_rank, self._total_num_rows)
        batches = [list(range(lo, min(lo + self._batch_size, end))) for lo in range(start, end, self._batch_size)] \
            if self._batch_size > 0 else []
        if self._randomize:
            random.seed(self._seed + self._epoch)
            random.shuffle(batches)
        yield from batches

    @staticmethod
    def from_torch(batch_size: int, total_num_rows: int, randomize: bool = False,  # type: ignore[override]
                   seed: int = 0) -> ShardedFixedBatchSampler:
        """Rank and world size from ``torch.distributed``."""
        rank, world_size = _torch_rank()
        return ShardedFixedBatchSampler(rank, world_size, randomize, seed, batch_size, total_num_rows)


__all__ = ["PrioritizedItem", "maybe_sample", "reservoir_sampling", "Sampler", "FragmentSampler", "FullScanSampler",
           "ShardedFragmentSampler", "ShardedBatchSampler", "ShardedFixedBatchSampler"]

