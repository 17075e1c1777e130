"""Runs a :class:`~lance_format.dataset.scan.plan.ScanPlan`: the one executor behind
``LanceScanner``, ``LanceDataset.to_table``/``to_batches``/``count_rows``/``take`` and Spark's
split reads.

The stages, innermost first:

1. read: per fragment (or row range), the index step (if any) names the candidate rows, then
   ``batch_readahead`` batches decode at once on the decode pool (:mod:`lance_format.io.decode_pool`)
   across fragment edges, delivered in table order unless ``scan_in_order=False``;
2. filter, late-materialized: the filter's columns are read first, and the other columns only
   for the rows that pass (taken by physical offset, so pages decode just the chunks, and FSST
   strings just the values, those rows need), unless most rows of a batch pass
   (:meth:`ScanExecutor.rows`, what Spark's tasks consume);
3. ordering, then offset and limit;
4. projection (SQL expressions, blob bytes, extension types) and output batch shapes
   (:meth:`ScanExecutor.batches`).

Nothing holds more than ``batch_readahead`` batches of a fragment (plus the rows a filter keeps),
except ordering, which needs every matching row.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from lance_format.dataset.blob_reads import blob_bytes_columns
from lance_format.dataset.fragment import ROW_ADDRESS, LanceFragment
from lance_format.dataset.scan.plan import DENSE, ColumnSet, FragmentRange, ScanPlan
from lance_format.dataset.scan_options import (
    ROW_OFFSET,
    coalesced_batches,
    compact_slice,
    exact_batches,
    null_deleted_ids,
    row_offsets,
    sorted_table,
)
from lance_format.dataset.scan_stats import ScanCounts
from lance_format.dataset.sql.filter import matching_rows
from lance_format.errors import CorruptFileError
from lance_format.io.decode_pool import map_ordered
from lance_format.schema import LanceSchema
from lance_format.schema.extensions import as_extension_arrays, with_extension_types

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset

_T = TypeVar("_T")
_OFFSET_MASK = np.uint64(0xFFFFFFFF)
INLINE_CANDIDATES = 1024  # index candidates (in all) up to which a scan does not use the decode pool
_Task = tuple[FragmentRange, Callable[[], pa.RecordBatch]]


def _fragment_of(item: tuple[FragmentRange, Any]) -> int:
    return item[0].fragment.fragment_id


def _physical_offsets(batch: pa.RecordBatch | pa.Table) -> np.ndarray:
    """The physical offsets of a batch's rows, from their ``_rowaddr``."""
    return (np.asarray(batch.column(ROW_ADDRESS).to_numpy()) & _OFFSET_MASK).astype(np.uint64)


def _locked(lock: threading.Lock, work: Callable[[], pa.RecordBatch]) -> pa.RecordBatch:
    with lock:
        return work()


class ScanExecutor:
    """Runs one plan over ``dataset`` (the version it was planned on). ``counts`` collects
    what the run read (``scan_stats_callback``, ``analyze_plan``)."""

    def __init__(self, dataset: LanceDataset, plan: ScanPlan, counts: ScanCounts | None = None) -> None:
        self.dataset = dataset
        self.plan = plan
        self.counts = counts if counts is not None else ScanCounts()
        self._narrowed: set[int] = set()  # id() of the parts read at an index step's candidate rows
        self._asked: dict[int, np.ndarray | None] = {}  # the index step's answer per fragment id

    # -- 1. read ---------------------------------------------------------------------------------
    def _read_tasks(self, part: FragmentRange, columns: ColumnSet, threaded: bool,
                    narrowed_columns: ColumnSet | None = None, **read: Any) -> Iterator[_Task]:
        """One task per batch of ``part``'s rows (the index step's candidates, when it has some:
        then ``narrowed_columns`` are read, when given, instead of ``columns``)."""
        fragment = part.fragment
        plan = self.plan
        candidates = self._candidates(fragment)
        if candidates is None:
            for task in fragment.batch_tasks(columns.schema, list(columns.system), plan.batch_size,
                                             row_range=part.row_range, threads=threaded, **read):
                yield part, task
            return
        # candidate rows: the live ones (in the range) are taken by offset, a batch at a time
        self._narrowed.add(id(part))
        columns = narrowed_columns or columns
        offsets = np.asarray(candidates, dtype=np.uint64)
        offsets = offsets[offsets < fragment.physical_rows]
        keep = fragment._keep_mask  # None: no deleted rows (intersecting with every live offset
        if keep is not None:        # costs seconds on a large fragment; a mask lookup does not)
            offsets = offsets[keep[offsets]]
        if part.row_range is not None:
            offsets = offsets[(offsets >= part.row_range[0]) & (offsets < part.row_range[1])]
        lock = threading.Lock()  # takes share the fragment's readers, which older files do not lock
        for start in range(0, len(offsets), plan.batch_size):
            take = partial(fragment.take_physical, columns.schema, list(columns.system),
                           offsets[start:start + plan.batch_size])
            yield part, partial(_locked, lock, take)

    def _decoded(self, columns: ColumnSet, finish: Callable[[FragmentRange, pa.RecordBatch], _T],
                 narrowed_columns: ColumnSet | None = None, **read: Any) -> Iterator[tuple[FragmentRange, _T]]:
        """``finish(part, batch)`` for every batch of every fragment, ``batch_readahead`` of them
        decoded (and finished) at once across fragment edges (from ``fragment_readahead``
        fragments at most, when given), in table order unless ``scan_in_order=False``."""
        plan = self.plan
        depth = plan.readahead
        if plan.io_buffer_size and depth > 1 and plan.fragments:
            # io_buffer_size: the pages of the batches in flight stay within it (one batch at least)
            batch_bytes = plan.fragments[0].fragment.stored_bytes_per_row(columns.schema) * plan.batch_size
            if batch_bytes > 0:
                depth = max(1, min(depth, int(plan.io_buffer_size // batch_bytes)))
        if depth > 1 and self._few_candidates():
            depth = 1  # a handful of rows: handing them to the decode pool costs more than taking them
        threaded = depth > 1

        def tasks() -> Iterator[_Task]:
            for part in plan.fragments:
                self.counts.fragments += 1
                yield from self._read_tasks(part, columns, threaded, narrowed_columns, **read)

        def run(item: _Task) -> tuple[FragmentRange, _T]:
            part, task = item
            return part, finish(part, task())

        return map_ordered(run, tasks(), depth, ordered=plan.in_order, group=_fragment_of,
                           max_groups=plan.fragment_readahead)

    def _candidates(self, fragment: LanceFragment) -> np.ndarray | None:
        """The index step's answer for ``fragment`` (asked once per fragment and run)."""
        index = self.plan.index
        if index is None:
            return None
        key = fragment.fragment_id
        if key not in self._asked:
            self._asked[key] = index.candidates(fragment)
        return self._asked[key]

    def _few_candidates(self) -> bool:
        """Whether the index step narrows every fragment to at most :data:`INLINE_CANDIDATES`
        rows in all (then the scan runs on the calling thread)."""
        if self.plan.index is None:
            return False
        total = 0
        for part in self.plan.fragments:
            candidates = self._candidates(part.fragment)
            if candidates is None:
                return False
            total += len(candidates)
            if total > INLINE_CANDIDATES:
                return False
        return True

    # -- 2. filter -------------------------------------------------------------------------------
    def rows(self) -> Iterator[pa.RecordBatch]:
        """The rows passing the filter, with every column of ``plan.read`` (in no set order; the
        late path's have ``_rowaddr`` too), unordered, unlimited and unprojected; no empty batch."""
        batches = self._late_rows() if self.plan.late is not None else self._plain_rows()
        for batch in batches:
            self.counts.matched_rows += batch.num_rows
            self.counts.matched_batches += 1
            yield batch

    def _fragment_bases(self) -> dict[int, int]:
        """Live rows before each fragment of the table (for ``_rowoffset``)."""
        bases, total = {}, 0
        for fragment in self.dataset.get_fragments():
            bases[fragment.fragment_id] = total
            total += fragment.count_rows()
        return bases

    def _plain_rows(self) -> Iterator[pa.RecordBatch]:
        plan = self.plan
        bases = self._fragment_bases() if plan.row_offsets else {}

        def finish(part: FragmentRange, batch: pa.RecordBatch) -> tuple[int, pa.RecordBatch]:
            rows = batch.num_rows
            fragment = part.fragment
            if plan.row_offsets:
                offsets = row_offsets(batch.column(ROW_ADDRESS), fragment.live_offsets(),
                                      bases.get(fragment.fragment_id, 0))
                if plan.include_deleted:  # now that offsets are known, deleted rows lose their ids
                    batch = null_deleted_ids(batch, fragment.deleted_offsets)
                batch = batch.append_column(pa.field(ROW_OFFSET, pa.uint64()), offsets)
            if plan.filter is not None:
                matching = matching_rows(batch, plan.filter)
                if len(matching) < rows:
                    batch = batch.take(matching)
            return rows, batch

        for _, (rows, batch) in self._decoded(plan.read, finish, include_deleted=plan.include_deleted,
                                              keep_addresses=plan.row_offsets):
            self.counts.rows += rows
            if batch.num_rows:
                yield batch

    def _late_rows(self) -> Iterator[pa.RecordBatch]:
        """A filtered scan reading the non-filter columns of passing rows only.

        The filter columns are read and filtered ``batch_readahead`` batches at once. Passing
        rows of several batches of a fragment are gathered (up to a batch) before their other
        columns are taken, so a selective filter costs one take per output batch, not per
        input batch. The few candidate rows an index step names are taken with every column at
        once (one take instead of two; the filter then runs on them).
        """
        plan = self.plan
        assert plan.filter is not None and plan.late is not None  # planned together
        condition, rest = plan.filter, plan.late.rest

        def passing_rows(part: FragmentRange, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, pa.Array]:
            return batch, matching_rows(batch, condition)

        pending: list[pa.RecordBatch] = []  # passing rows' filter columns, not yet completed
        pending_rows = 0
        pending_part: FragmentRange | None = None
        first, rest_columns = plan.late.first, plan.late.rest
        together = ColumnSet(LanceSchema([*first.schema.fields, *rest_columns.schema.fields], first.schema.metadata),
                             tuple(dict.fromkeys(first.system + rest_columns.system)))
        order = list(dict.fromkeys(first.names + rest_columns.names))  # the columns of _taken's batches
        for part, (batch, passing) in self._decoded(first, passing_rows, narrowed_columns=together):
            self.counts.rows += batch.num_rows
            if not len(passing):
                continue
            if id(part) in self._narrowed:  # index candidates, read with every column
                if pending:
                    assert pending_part is not None  # set with pending
                    yield self._taken(pending_part.fragment, pending, rest)
                    pending, pending_rows = [], 0
                kept = batch if len(passing) == batch.num_rows else batch.take(passing)
                yield pa.RecordBatch.from_pydict({name: kept.column(name) for name in order})
                continue
            # most rows pass: reading the batch's range in order beats taking its rows (not when
            # an index chose the rows: they are not a range)
            whole_range = (len(passing) > DENSE * batch.num_rows or plan.regroup) and id(part) not in self._narrowed
            if pending and (part is not pending_part or pending_rows + len(passing) > plan.batch_size
                            or len(passing) > DENSE * batch.num_rows):
                assert pending_part is not None  # set with pending
                yield self._taken(pending_part.fragment, pending, rest)
                pending, pending_rows = [], 0
            if whole_range:
                yield self._read_range(part.fragment, batch, passing, rest)
                continue
            pending.append(batch.take(passing))
            pending_rows += len(passing)
            pending_part = part
        if pending:
            assert pending_part is not None  # set with pending
            yield self._taken(pending_part.fragment, pending, rest)

    def _read_range(self, fragment: LanceFragment, batch: pa.RecordBatch, passing: pa.Array,
                    rest: ColumnSet) -> pa.RecordBatch:
        """A batch's passing rows, the other columns read for the batch's whole row range."""
        offsets = _physical_offsets(batch)
        span = (int(offsets[0]), int(offsets[-1]) + 1)
        others = pa.Table.from_batches(list(fragment.read_batches(rest.schema, list(rest.system), span[1] - span[0],
                                                                  row_range=span)))
        if others.num_rows != batch.num_rows:
            raise CorruptFileError(f"fragment {fragment.fragment_id} read {others.num_rows} rows of a range holding "
                                   f"{batch.num_rows}", table=self.plan.uri)
        columns = {name: batch.column(name).take(passing) for name in batch.schema.names}
        columns.update({name: others.column(name).combine_chunks().take(passing) for name in others.column_names})
        return pa.RecordBatch.from_pydict(columns)

    @staticmethod
    def _taken(fragment: LanceFragment, parts: list[pa.RecordBatch], rest: ColumnSet) -> pa.RecordBatch:
        """The filter columns of ``parts`` joined with the other columns of the same rows."""
        first = pa.Table.from_batches(parts).combine_chunks()
        others = fragment.take_physical(rest.schema, list(rest.system), _physical_offsets(first))
        columns = {name: first.column(name).combine_chunks() for name in first.column_names}
        columns.update({name: others.column(name) for name in others.schema.names})
        return pa.RecordBatch.from_pydict(columns)

    # -- 3. ordering, offset and limit -----------------------------------------------------------
    def _ordered(self) -> Iterator[pa.RecordBatch]:
        """The filtered rows, sorted when ``order_by`` asks for it (which needs all of them)."""
        plan = self.plan
        if plan.search is not None:  # ranked rows, in rank order unless order_by sorts them after
            ranked = list(plan.search.run(self))  # k rows per query at most
            if plan.order_by and ranked:
                ranked = sorted_table(pa.Table.from_batches(ranked), list(plan.order_by), uri=plan.uri).to_batches()
            yield from ranked
            return
        if not plan.order_by:
            yield from coalesced_batches(self.rows(), plan.output_rows) if plan.regroup else self.rows()
            return
        matching = list(self.rows())
        if not matching:
            return
        ordered = sorted_table(pa.Table.from_batches(matching), list(plan.order_by), uri=plan.uri)
        yield from ordered.combine_chunks().to_batches(max_chunksize=plan.output_rows)

    def limited(self) -> Iterator[pa.RecordBatch]:
        """The ordered rows after ``offset``, at most ``limit`` of them (unprojected)."""
        skip = self.plan.offset
        remaining = self.plan.limit
        if remaining == 0:
            return
        for batch in self._ordered():
            if skip:
                if batch.num_rows <= skip:
                    skip -= batch.num_rows
                    continue
                batch = batch.slice(skip)
                skip = 0
            if remaining is not None:
                if batch.num_rows >= remaining:
                    yield batch.slice(0, remaining)
                    return
                remaining -= batch.num_rows
            yield batch

    def count(self) -> int:
        """The number of rows the scan returns; from fragment metadata when nothing but
        deletions decides it (no filter, limit, offset, deleted rows or row ranges)."""
        plan = self.plan
        if (plan.search is None and plan.filter is None and plan.limit is None and not plan.offset and not plan.include_deleted
                and all(part.row_range is None for part in plan.fragments)):
            return sum(part.fragment.count_rows() for part in plan.fragments)
        return sum(b.num_rows for b in self.limited())

    # -- 4. projection and output batches --------------------------------------------------------
    @property
    def projected_schema(self) -> pa.Schema:
        """The output schema, extension-typed columns with their extension types."""
        return with_extension_types(self.plan.output_schema)

    def project(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """A batch of read columns as the output: the plan's columns and expressions, in order."""
        plan = self.plan
        schema = plan.output_schema
        if plan.expressions:
            table = pads.dataset(pa.Table.from_batches([batch])).to_table(
                columns={n: plan.expressions[n][0] if n in plan.expressions else pc.field(n) for n in plan.output})
            arrays = [table.column(i).combine_chunks().cast(f.type) for i, f in enumerate(schema)]
            stored = pa.RecordBatch.from_arrays(arrays, schema=schema)
        elif not plan.output:  # no columns: keep the row count
            return batch.select([])
        else:
            batch = blob_bytes_columns(self.dataset, batch, list(plan.binary_blobs))
            stored = pa.RecordBatch.from_arrays([batch.column(n) for n in plan.output], schema=schema)
        return as_extension_arrays(stored, self.projected_schema)

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The scan's output: projected batches of at most ``output_rows`` rows (exactly that
        many with ``strict_batch_size``; regrouped batches may hold more)."""
        plan = self.plan
        projected = (self.project(batch) for batch in self.limited())
        if plan.search is not None and not plan.strict_batch_size:  # pylance: the results in one batch
            yield from projected
            return
        if plan.strict_batch_size:
            yield from exact_batches(projected, plan.output_rows)
            return
        for batch in projected:
            if batch.num_rows <= plan.output_rows or plan.regroup:
                yield batch
                continue
            for start in range(0, batch.num_rows, plan.output_rows):  # slices; list offsets rebased
                yield compact_slice(batch, start, plan.output_rows)

    def take(self, fragment: LanceFragment, offsets: np.ndarray) -> pa.RecordBatch:
        """The output columns of ``fragment``'s rows at physical ``offsets``, in that order
        (``LanceDataset.take``; the filter, limit and offset do not apply)."""
        read = self.plan.read
        return self.project(fragment.take_physical(read.schema, list(read.system), offsets))


__all__ = ["ScanExecutor"]
