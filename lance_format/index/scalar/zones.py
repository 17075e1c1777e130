"""Zones of physical rows, shared by ZONEMAP and BLOOMFILTER, and their segment files.

A zone holds at most ``rows_per_zone`` consecutive (non-deleted) rows of one fragment: zones
never span fragments. Its bound is the fragment id, the offset of its first row
(``zone_start``) and the span of offsets it covers (``zone_length`` = last - first + 1, more
than its row count when rows were deleted inside it). A zone that may match is answered as every
address in ``[fragment << 32 | start, + length)``; deleted ones are dropped by the caller.

:func:`iter_zones` cuts a stream of ``(value, _rowaddr)`` batches into zones, holding one zone's
rows at a time. :func:`write_segment_file` / :func:`read_global_buffer` add what
:class:`~lance_format.index.store.IndexStore` does not do itself: the global buffers (null-row
bitmaps) these files carry.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa

from lance_format.file.api import LanceFileReader, LanceFileWriter
from lance_format.index.scalar.base import VALUE_COLUMN
from lance_format.index.scalar.rowsets import sorted_unique
from lance_format.index.store import IndexStore

ROWADDR = "_rowaddr"
_SHIFT = np.uint64(32)
_LOW = np.uint64(0xFFFFFFFF)


def iter_zones(batches: Iterable[pa.RecordBatch], rows_per_zone: int) -> Iterator[tuple[pa.Array, np.ndarray]]:
    """``(values, row addresses)`` of each zone, in row-address order."""
    open_values: list[pa.Array] = []
    open_addrs: list[np.ndarray] = []
    open_rows = 0
    open_fragment = -1

    def flush() -> tuple[pa.Array, np.ndarray]:
        nonlocal open_values, open_addrs, open_rows
        values = pa.concat_arrays(open_values) if len(open_values) > 1 else open_values[0]
        addrs = np.concatenate(open_addrs) if len(open_addrs) > 1 else open_addrs[0]
        open_values, open_addrs, open_rows = [], [], 0
        return values, addrs

    for batch in batches:
        if batch.num_rows == 0:
            continue
        values = batch.column(VALUE_COLUMN)
        addrs = batch.column(ROWADDR).to_numpy(zero_copy_only=False).astype(np.uint64, copy=False)
        fragments = addrs >> _SHIFT
        # runs of one fragment inside the batch (few: loop over runs and zones, not rows)
        run_starts = [0, *(np.flatnonzero(np.diff(fragments)) + 1).tolist(), len(addrs)]
        for run in range(len(run_starts) - 1):
            pos, stop = run_starts[run], run_starts[run + 1]
            fragment = int(fragments[pos])
            if open_rows and fragment != open_fragment:
                yield flush()
            open_fragment = fragment
            while pos < stop:
                take = min(stop - pos, rows_per_zone - open_rows)
                open_values.append(values.slice(pos, take))
                open_addrs.append(addrs[pos:pos + take])
                open_rows += take
                pos += take
                if open_rows == rows_per_zone:
                    yield flush()
    if open_rows:
        yield flush()


def zone_bound(addrs: np.ndarray) -> tuple[int, int, int]:
    """``(fragment_id, zone_start, zone_length)`` of a zone's (sorted) row addresses."""
    first, last = int(addrs[0]), int(addrs[-1])
    start = first & 0xFFFFFFFF
    return first >> 32, start, (last & 0xFFFFFFFF) - start + 1


def zone_addresses(fragment_ids: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Every row address the zones cover (sorted when the zones are)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    if len(lengths) == 0 or lengths.sum() == 0:
        return np.zeros(0, dtype=np.uint64)
    firsts = (np.asarray(fragment_ids, dtype=np.uint64) << _SHIFT) | np.asarray(starts, dtype=np.uint64)
    # a ramp per zone: repeat each zone's first address, add 0..length-1 within it
    total = int(lengths.sum())
    zone_of_row = np.repeat(np.arange(len(lengths)), lengths)
    ends = np.cumsum(lengths)
    within = np.arange(total, dtype=np.int64) - (ends - lengths)[zone_of_row]
    addresses = firsts[zone_of_row] + within.astype(np.uint64)
    # zones of a segment never overlap: in address order they are already sorted and distinct
    if len(addresses) > 1 and not (addresses[1:] > addresses[:-1]).all():
        addresses = sorted_unique(addresses)
    return addresses


def write_segment_file(store: IndexStore, name: str, table: pa.Table, metadata: Mapping[str, str],
                       buffers: Sequence[tuple[str, bytes]] = ()) -> int:
    """Write ``table`` as index file ``name`` with schema ``metadata`` and global ``buffers``
    (each recorded in the metadata under its key with its buffer index, as pylance does); the
    file's size. Mirrors :meth:`IndexStore.write_table`, which takes no global buffers."""
    writer = LanceFileWriter(store.path(name), table.schema.remove_metadata(), version=store.file_version,
                             _store=store.store)
    for key, data in buffers:
        writer.add_schema_metadata(key, str(writer.add_global_buffer(data)))
    for key, value in metadata.items():
        writer.add_schema_metadata(key, value)
    for batch in table.to_batches():
        if batch.num_rows:
            writer.write_batch(batch)
    writer.close()
    size = int(writer.size_bytes or 0)
    # record the file like write_table does, so the segment's file list names it
    store._written[name] = size  # noqa: SLF001
    return size


def read_global_buffer(store: IndexStore, name: str, index: int) -> bytes:
    """Global buffer ``index`` of index file ``name``."""
    return LanceFileReader(store.path(name), _store=store.store).read_global_buffer(int(index))
