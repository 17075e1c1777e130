"""Batched ranged reads: nearby ranges are merged into one request, requests run in parallel.

On an object store every ranged read is an HTTP request with a latency far above the cost of
a few extra bytes, so a batch of small reads (a take's chunks of many pages) is first
coalesced like the ``object_store`` crate does (``coalesce_ranges``): ranges whose gap is at
most ``gap`` bytes merge, as long as the merged request stays within ``max_size`` (a range
longer than that on its own is read on its own, never merged). The merged requests then run on
a bounded, process-wide thread pool (the SDKs release the GIL while they wait on the network),
and each requested range is sliced back out of its request without copying.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lance_format.errors import CorruptFileError

DEFAULT_COALESCE_GAP = 1 << 20  # object_store's OBJECT_STORE_COALESCE_DEFAULT
DEFAULT_MAX_COALESCED = 16 << 20  # one merged request reads at most this much (unless one range is larger)
DEFAULT_PARALLELISM = 16  # concurrent ranged requests per process


@dataclass(frozen=True)
class ReadPolicy:
    """How a backend batches ranged reads; ``parallelism`` 1 reads serially."""

    gap: int = DEFAULT_COALESCE_GAP
    max_size: int = DEFAULT_MAX_COALESCED
    parallelism: int = DEFAULT_PARALLELISM


@dataclass(frozen=True)
class MergedRange:
    """One request ``[start, end)`` and the indices (into the caller's list) of the ranges it serves."""

    start: int
    end: int
    members: tuple[int, ...]


def coalesce_ranges(ranges: Sequence[tuple[int, int]], *, gap: int = DEFAULT_COALESCE_GAP,
                    max_size: int = DEFAULT_MAX_COALESCED) -> list[MergedRange]:
    """Merge ``(offset, length)`` ranges closer than ``gap`` bytes into requests of at most
    ``max_size`` bytes (ranges may overlap or repeat; a longer range stays alone)."""
    if not ranges:
        return []
    table = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
    if bool((table < 0).any()):
        raise ValueError("ranges must have non-negative offsets and lengths")
    order = np.argsort(table[:, 0], kind="stable")
    starts = table[order, 0].tolist()
    ends = (table[order, 0] + table[order, 1]).tolist()
    merged: list[MergedRange] = []
    lo, hi, members = starts[0], ends[0], [int(order[0])]
    for index, start, end in zip(order[1:].tolist(), starts[1:], ends[1:]):
        if start - hi <= gap and max(hi, end) - lo <= max_size:
            hi = max(hi, end)
            members.append(index)
        else:
            merged.append(MergedRange(lo, hi, tuple(members)))
            lo, hi, members = start, end, [index]
    merged.append(MergedRange(lo, hi, tuple(members)))
    return merged


_POOL: ThreadPoolExecutor | None = None
_POOL_PID = 0
_POOL_LOCK = threading.Lock()


def io_pool() -> ThreadPoolExecutor:
    """The process-wide pool of ranged reads (re-made after a fork: a forked child has no threads)."""
    global _POOL, _POOL_PID
    with _POOL_LOCK:
        if _POOL is None or _POOL_PID != os.getpid():
            _POOL = ThreadPoolExecutor(max_workers=DEFAULT_PARALLELISM, thread_name_prefix="lance-io")
            _POOL_PID = os.getpid()
        return _POOL


def read_ranges(read_at: Callable[[int, int], bytes | pa.Buffer], ranges: Sequence[tuple[int, int]],
                policy: ReadPolicy = ReadPolicy(), *, path: str | None = None) -> list[pa.Buffer]:
    """The bytes of each ``(offset, length)`` range, in the given order, read through
    ``read_at(offset, length)`` in coalesced requests run in parallel. A short read (past the
    end of the file) raises :class:`CorruptFileError`."""
    merged = coalesce_ranges(ranges, gap=policy.gap, max_size=policy.max_size)

    def fetch(request: MergedRange) -> pa.Buffer:
        data = read_at(request.start, request.end - request.start)
        buffer = data if isinstance(data, pa.Buffer) else pa.py_buffer(data)
        if buffer.size != request.end - request.start:
            raise CorruptFileError(f"short read: wanted {request.end - request.start} bytes at {request.start}, "
                                   f"got {buffer.size}", path=path)
        return buffer

    if len(merged) <= 1 or policy.parallelism <= 1:
        fetched = [fetch(request) for request in merged]
    else:
        pool = io_pool()
        futures: list[Future[pa.Buffer]] = [pool.submit(fetch, request) for request in merged]
        try:
            fetched = [future.result() for future in futures]
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    out: list[pa.Buffer | None] = [None] * len(ranges)
    for request, buffer in zip(merged, fetched):
        for index in request.members:
            offset, length = ranges[index]
            out[index] = buffer.slice(int(offset) - request.start, int(length))
    return out  # type: ignore[return-value]  # every index belongs to exactly one request


__all__ = ["DEFAULT_COALESCE_GAP", "DEFAULT_MAX_COALESCED", "DEFAULT_PARALLELISM", "MergedRange", "ReadPolicy",
           "coalesce_ranges", "io_pool", "read_ranges"]
