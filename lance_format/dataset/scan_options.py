"""The parts of a scan beyond reading rows: ordering, exact batch sizes, row offsets, and the
options of pylance's scanner that only tune its own execution.

``ColumnOrdering`` is pylance's sort key. Ordering needs every matching row before the first
one is returned (as in any engine); the other steps stream.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.dataset.sql.floats import is_float, total_order_keys
from lance_format.errors import InvalidInputError, UnsupportedFeatureError
from lance_format.io.decode_pool import cpu_threads

ROW_OFFSET = "_rowoffset"

# pylance's scanner options that steer its execution (threads, readahead, I/O sizes, index use,
# when filters run). Results never depend on them. ``batch_readahead`` (batches decoded at once),
# ``fragment_readahead`` (fragments those batches come from), ``io_buffer_size`` (their stored
# bytes) and ``scan_in_order=False`` (batches as they finish) steer this engine's decode threads; the others are accepted and have no effect
# (no indices here).
EXECUTION_HINTS = (
    "batch_size_bytes", "batch_readahead", "fragment_readahead", "scan_in_order", "prefilter", "use_stats",
    "fast_search", "io_buffer_size", "late_materialization", "use_scalar_index", "disable_scoring_autoprojection",
)
# Options that ask for something this engine cannot do (row-address lists in Rust's serialized
# treemap format): refused when set. (``full_text_query`` and ``nearest`` are plan_scan's.)
UNSUPPORTED_OPTIONS = ("index_segments", "row_addr_allowlist", "row_addr_blocklist")


@dataclass(frozen=True)
class ColumnOrdering:
    """One sort key of ``order_by`` (pylance's ``ColumnOrdering``): a column, its direction, and
    where its nulls go."""

    column_name: str
    ascending: bool = True
    nulls_first: bool = False


def check_options(options: Mapping[str, Any], *, table: str) -> None:
    """Refuse unknown options and options asking for features this engine lacks."""
    for name, value in options.items():
        if name in EXECUTION_HINTS:
            continue
        if name in UNSUPPORTED_OPTIONS:
            if value is not None:
                raise UnsupportedFeatureError(f"scan option {name!r} is not supported by this engine "
                                              "(no full-text or row-address-list scans)", table=table)
            continue
        if name == "blob_handling":
            # "all_descriptions" reads like "blobs_descriptions" (pylance: plain binary columns stay bytes)
            if value not in (None, "blobs_descriptions", "all_descriptions", "all_binary"):
                raise UnsupportedFeatureError(f"blob_handling={value!r} is not supported; blob columns read as "
                                              "their descriptions or, with \"all_binary\", their bytes", table=table)
            continue
        raise InvalidInputError(f"unknown scan option {name!r}", table=table)


MAX_DEFAULT_READAHEAD = 16  # pylance's default batch_readahead


def readahead_of(options: Mapping[str, Any], *, table: str) -> tuple[int, int, int]:
    """(batches a scan decodes at once, fragments they may come from at once, bytes their pages
    may hold; 0: any), from
    pylance's ``batch_readahead`` (default two per decode thread, ``LANCE_CPU_THREADS``, at most
    pylance's default of 16; memory stays within that many batches) and ``fragment_readahead`` (default: no limit beyond the
    batches)."""
    counts = []
    for name, default in (("batch_readahead", min(2 * cpu_threads(), MAX_DEFAULT_READAHEAD)), ("fragment_readahead", 0),
                          ("io_buffer_size", 0)):
        value = options.get(name)
        if value is None:
            value = default
        elif isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidInputError(f"{name} must be a non-negative integer, got {value!r}", table=table)
        counts.append(value)
    return counts[0], counts[1], counts[2]


def orderings(order_by: Iterable[ColumnOrdering | str] | None, *, table: str) -> list[ColumnOrdering]:
    """``order_by`` as ColumnOrderings (a plain name sorts ascending, nulls last)."""
    if order_by is None:
        return []
    if isinstance(order_by, (str, ColumnOrdering)):
        order_by = [order_by]
    result = []
    for item in order_by:
        if isinstance(item, str):
            item = ColumnOrdering(item)
        if not isinstance(item, ColumnOrdering):
            raise InvalidInputError(f"order_by takes column names or ColumnOrdering, got {item!r}", table=table)
        result.append(item)
    return result


def float_sort_keys(values: pa.ChunkedArray | pa.Array) -> pa.Array:
    """int64 keys ordering a float column by IEEE totalOrder (nulls keep key 0; placed separately)."""
    combined = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    numbers = np.asarray(combined.fill_null(0).to_numpy(zero_copy_only=False))
    return pa.array(total_order_keys(numbers, zeros_equal=False), pa.int64())


def sorted_table(table: pa.Table, keys: list[ColumnOrdering], *, uri: str) -> pa.Table:
    """``table`` sorted by ``keys``, each with its own null placement (stable for ties)."""
    columns: dict[str, pa.ChunkedArray] = {}
    sort_keys = []
    for i, key in enumerate(keys):
        values = table.column(key.column_name)
        # nulls are placed by a leading is-null key, so every column can put them either way
        columns[f"n{i}"] = pc.is_null(values, nan_is_null=False)
        # floats sort by totalOrder like pylance (-NaN, -inf, ..., -0.0, 0.0, ..., inf, NaN)
        columns[f"v{i}"] = float_sort_keys(values) if is_float(values.type) else values
        sort_keys += [(f"n{i}", "descending" if key.nulls_first else "ascending"),
                      (f"v{i}", "ascending" if key.ascending else "descending")]
    try:
        indices = pc.sort_indices(pa.table(columns), sort_keys=sort_keys)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid) as exc:
        raise InvalidInputError(f"cannot order by {[k.column_name for k in keys]}: {exc}", table=uri) from None
    return table.take(indices)


def exact_batches(batches: Iterable[pa.RecordBatch], size: int) -> Iterator[pa.RecordBatch]:
    """Re-cut a stream into batches of exactly ``size`` rows (the last may be shorter)."""
    pending: list[pa.RecordBatch] = []
    held = 0
    for batch in batches:
        while batch.num_rows:
            take = min(size - held, batch.num_rows)
            pending.append(batch.slice(0, take))
            held += take
            batch = batch.slice(take)
            if held == size:
                yield pa.Table.from_batches(pending).combine_chunks().to_batches()[0]
                pending, held = [], 0
    if held:
        yield pa.Table.from_batches(pending).combine_chunks().to_batches()[0]


def coalesced_batches(batches: Iterable[pa.RecordBatch], size: int) -> Iterator[pa.RecordBatch]:
    """Gather a filtered stream until at least ``size`` rows are held, then emit them as one batch
    (the shape of pylance's output when late materialization is asked for explicitly)."""
    pending: list[pa.RecordBatch] = []
    held = 0
    for batch in batches:
        pending.append(batch)
        held += batch.num_rows
        if held >= size:
            yield pa.Table.from_batches(pending).combine_chunks().to_batches()[0]
            pending, held = [], 0
    if held:
        yield pa.Table.from_batches(pending).combine_chunks().to_batches()[0]


def default_batch_size(fallback: int) -> int:
    """pylance's ``LANCE_DEFAULT_BATCH_SIZE`` environment variable, else ``fallback``."""
    value = os.environ.get("LANCE_DEFAULT_BATCH_SIZE")
    if not value:
        return fallback
    try:
        size = int(value)
    except ValueError:
        raise InvalidInputError(f"LANCE_DEFAULT_BATCH_SIZE must be a positive integer, got {value!r}") from None
    if size <= 0:
        raise InvalidInputError(f"LANCE_DEFAULT_BATCH_SIZE must be a positive integer, got {value!r}")
    return size


def row_offsets(addresses: pa.Array, live_offsets: np.ndarray, base: int) -> pa.Array:
    """``_rowoffset``: each row's position among the table's live rows, from its ``_rowaddr``.

    ``live_offsets`` are the fragment's live physical offsets and ``base`` the live rows of the
    fragments before it. A deleted row (``include_deleted_rows``) gets the next live row's offset,
    as pylance reports it.
    """
    physical = _physical(addresses)
    return pa.array(np.searchsorted(live_offsets, physical).astype(np.uint64) + np.uint64(base), pa.uint64())


def _physical(addresses: pa.Array) -> np.ndarray:
    return np.asarray(addresses.to_numpy(zero_copy_only=False), dtype=np.uint64) & np.uint64(0xFFFFFFFF)


def null_deleted_ids(batch: pa.RecordBatch, deleted_offsets: np.ndarray) -> pa.RecordBatch:
    """``_rowid`` and ``_rowaddr`` set to null on deleted rows (``include_deleted_rows``)."""
    deleted = pa.array(np.isin(_physical(batch.column("_rowaddr")), deleted_offsets))
    for name in ("_rowid", "_rowaddr"):
        if name in batch.schema.names:
            i = batch.schema.get_field_index(name)
            batch = batch.set_column(i, batch.schema.field(i),
                                     pc.if_else(deleted, pa.scalar(None, pa.uint64()), batch.column(i)))
    return batch


def describe_ordering(keys: list[ColumnOrdering]) -> str:
    return ", ".join(f"{k.column_name} {'ASC' if k.ascending else 'DESC'} NULLS {'FIRST' if k.nulls_first else 'LAST'}"
                     for k in keys)


def compact_slice(batch: pa.RecordBatch, start: int, length: int) -> pa.RecordBatch:
    """``batch.slice(start, length)`` whose top-level list columns hold only their own items.

    A plain slice of a list array keeps the whole child (and offsets that start mid-child), so
    consumers that read ``.values`` (as pylance's batches invite: theirs start at 0) would walk
    every batch's items once per slice. Here the offsets are rebased (a copy of ``length + 1``
    integers) and the child is a zero-copy slice of the items the rows reference.
    """
    sliced = batch.slice(start, length)
    columns = sliced.columns
    changed = False
    for i, column in enumerate(columns):
        if not (pa.types.is_list(column.type) or pa.types.is_large_list(column.type)) or len(column) == 0:
            continue
        offsets = column.offsets.to_numpy()
        first, last = int(offsets[0]), int(offsets[-1])
        if first == 0 and last == len(column.values):
            continue
        validity = None
        if column.null_count:
            validity = pc.is_valid(column).buffers()[1]
        rebased = pa.py_buffer((offsets - first).astype(offsets.dtype))
        columns[i] = pa.Array.from_buffers(column.type, len(column), [validity, rebased], column.null_count,
                                           children=[column.values.slice(first, last - first)])
        changed = True
    return pa.RecordBatch.from_arrays(columns, schema=sliced.schema) if changed else sliced
