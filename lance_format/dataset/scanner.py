"""Scans: projection, filters, system columns, limit and offset over a version's fragments.

Batches stream fragment by fragment; within a fragment, ``batch_readahead`` batches (and their
columns) decode at once on the decode pool (:mod:`lance_format.io.threads`) and arrive in table
order, so nothing holds more than that many batches of a fragment (plus the rows a filter keeps).

Filters are late-materialized: the filter's columns are read first, and the other columns only
for the rows that pass (taken by physical offset, so pages decode just the chunks, and FSST
strings just the values, those rows need), unless most rows of a batch pass.
"""

from __future__ import annotations

import time
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from lance_format.dataset.fragment import ROW_ADDRESS, SYSTEM_COLUMNS, LanceFragment
from lance_format.dataset.index_scan import IndexScanPlan
from lance_format.dataset.scan_stats import ScanCounts, reporting
from lance_format.io.counters import bytes_read_counter, iops_counter
from lance_format.dataset.scan_options import (
    ROW_OFFSET,
    ColumnOrdering,
    check_options,
    coalesced_batches,
    compact_slice,
    default_batch_size,
    describe_ordering,
    exact_batches,
    orderings,
    readahead_of,
    null_deleted_ids,
    row_offsets,
    sorted_table,
)
from lance_format.dataset.arguments import column_names
from lance_format.dataset.sql.filter import matching_rows, referenced_columns, to_expression, to_value_expression
from lance_format.errors import CorruptFileError, InvalidInputError, UnsupportedFeatureError
from lance_format.io.threads import map_ordered
from lance_format.schema import LanceSchema
from lance_format.dataset.blob_reads import blob_bytes_columns
from lance_format.schema.blob import is_blob_field, read_arrow_schema
from lance_format.schema.extensions import as_extension_arrays, with_extension_types

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset

_T = TypeVar("_T")

DEFAULT_BATCH_SIZE = 65536  # rows read at a time when the caller gives no batch_size
PYLANCE_BATCH_SIZE = 8192  # pylance's default: output batches are cut to it (without a batch_size)
_DENSE = 0.25  # above this fraction of a batch's rows passing, its other columns are read, not taken
# above this fraction of a fragment's rows being an index's candidates, the fragment is scanned:
# taking scattered rows decodes most pages anyway, and the scan's late materialization is cheaper
_INDEX_DENSE = 0.1


def _filter_schema(arrow_schema: pa.Schema) -> pa.Schema:
    for name in SYSTEM_COLUMNS:
        arrow_schema = arrow_schema.append(pa.field(name, pa.uint64()))
    return arrow_schema


def _fragment_of(item: tuple[LanceFragment, Any]) -> int:
    return item[0].fragment_id


class LanceScanner:
    """A planned scan of one table version (mirrors pylance's ``LanceScanner``).

    Made by :meth:`LanceDataset.scanner`, whose parameters it takes.

    Raises
    ------
    InvalidInputError
        An unknown column, an invalid filter, a negative limit or offset, or a dict of column
        expressions.
    """

    def __init__(
        self,
        dataset: "LanceDataset",
        *,
        columns: list[str] | Mapping[str, str] | None = None,
        filter: str | pc.Expression | None = None,
        limit: int | None = None,
        offset: int | None = None,
        with_row_id: bool = False,
        with_row_address: bool = False,
        batch_size: int | None = None,
        fragments: list[LanceFragment] | None = None,
        order_by: Iterable[ColumnOrdering | str] | None = None,
        strict_batch_size: bool = False,
        include_deleted_rows: bool = False,
        **options: Any,
    ) -> None:
        self._dataset = dataset
        uri = dataset.uri
        self._stats_callback = options.pop("scan_stats_callback", None)
        if self._stats_callback is not None and not callable(self._stats_callback):
            raise InvalidInputError("scan_stats_callback must be callable", table=uri)
        self._counts = ScanCounts()
        self._readahead, self._fragment_readahead, self._io_buffer_size = readahead_of(options, table=uri)
        self._in_order = options.get("scan_in_order") is not False
        check_options(options, table=uri)
        table_schema = dataset.lance_schema
        known = _filter_schema(table_schema.to_arrow())
        # output name -> (expression, type) for columns given as SQL expressions
        self._expressions: dict[str, tuple[pc.Expression, pa.DataType]] = {}
        needed: list[str] = []
        if columns is not None and not isinstance(columns, Mapping):
            listed = column_names(columns, table=uri)
            if any("." in name and name not in table_schema.names() for name in listed):
                # pylance's nested projection: "struct.x" is the field x of struct, in a column
                # named "struct.x" (top-level names cannot hold a dot)
                columns = {name: name for name in listed}
        if isinstance(columns, Mapping):
            for name, sql in columns.items():
                expr, dtype, reads = to_value_expression(sql, known)
                self._expressions[str(name)] = (expr, dtype)
                needed += [r for r in reads if r not in needed]
            requested = column_names(columns, table=uri)
        else:
            requested = column_names(columns, table=uri) if columns is not None else table_schema.names()
            for name in requested:
                if name not in SYSTEM_COLUMNS and name != ROW_OFFSET and name not in table_schema.names():
                    raise InvalidInputError(f"unknown column {name!r}; columns are {table_schema.names()}", table=uri)
            needed += requested
        if with_row_id and "_rowid" not in requested:
            requested.append("_rowid")
        if with_row_address and "_rowaddr" not in requested:
            requested.append("_rowaddr")
        if include_deleted_rows and not with_row_id:
            raise InvalidInputError("include_deleted_rows is set but with_row_id is false", table=uri)
        self._output = requested
        # pylance's messages (its users match them); the limit is checked first
        if limit is not None and limit < 0:
            raise InvalidInputError(f"Limit must be non-negative, got {limit}", table=uri)
        if offset is not None and offset < 0:
            raise InvalidInputError(f"Offset must be non-negative, got {offset}", table=uri)
        self._limit = limit
        self._offset = offset or 0
        self._batch_size = batch_size or default_batch_size(DEFAULT_BATCH_SIZE)
        # output batches hold at most this many rows: reads stay large (fewer, cheaper decodes)
        # while a plain scan yields pylance's batch shapes (8192-row slices of each fragment)
        self._output_rows = batch_size or default_batch_size(PYLANCE_BATCH_SIZE)
        # pylance regroups a filtered scan's rows into batches of batch_size when late
        # materialization is asked for (True or a column list), not when left to its heuristic
        late = options.get("late_materialization")
        # (with a batch_size given; without one its batches are the filtered reads)
        self._regroup = bool(batch_size) and filter is not None and (late is True or isinstance(late, (list, tuple)))
        self._strict_batch_size = bool(strict_batch_size)
        self._include_deleted = bool(include_deleted_rows)
        self._scans_whole_table = fragments is None
        self._fragments = fragments if fragments is not None else dataset.get_fragments()
        self._order_by = orderings(order_by, table=uri)

        self._filter = to_expression(filter, known) if filter is not None else None
        # the index step needs the SQL text (an expression filter is never answered from indices)
        self._filter_text = filter if isinstance(filter, str) else None
        self._filter_schema = known
        self._use_scalar_index = options.get("use_scalar_index") is not False
        if self._filter is not None:
            needed += [n for n in referenced_columns(self._filter, known) if n not in needed]
        for key in self._order_by:
            if key.column_name not in known.names and key.column_name != ROW_OFFSET:
                raise InvalidInputError(f"cannot order by unknown column {key.column_name!r}", table=uri)
            if key.column_name not in needed:
                needed.append(key.column_name)
        needed += [n for n in requested if n not in needed and n in SYSTEM_COLUMNS]
        self._row_offsets = ROW_OFFSET in needed
        data_names = [n for n in needed if n not in SYSTEM_COLUMNS and n != ROW_OFFSET]
        self._read_schema = table_schema.project(data_names)
        self._read_system = [n for n in needed if n in SYSTEM_COLUMNS]
        if self._row_offsets and ROW_ADDRESS not in self._read_system:
            self._read_system.append(ROW_ADDRESS)  # _rowoffset is computed from the address
        # blob_handling="all_binary": blob columns read as their bytes, found from their rows' addresses
        self._binary_blobs = [n for n in self._output if n not in self._expressions and n in table_schema.names()
                              and is_blob_field(table_schema.field(n))] if options.get("blob_handling") == "all_binary" else []
        if self._binary_blobs and ROW_ADDRESS not in self._read_system:
            self._read_system.append(ROW_ADDRESS)
        # late materialization: the filter's columns first (with the row address to find the
        # passing rows again), then the rest for the passing rows only
        self._late: tuple[LanceSchema, list[str], LanceSchema, list[str]] | None = None
        # (not with row offsets or deleted rows, which need every row's address on the first read)
        if self._filter is not None and not self._row_offsets and not self._include_deleted:
            used = set(referenced_columns(self._filter, _filter_schema(table_schema.to_arrow())))
            rest = [n for n in needed if n not in used]
            if rest:
                first = [n for n in needed if n in used]
                first_system = [n for n in first if n in SYSTEM_COLUMNS]
                if ROW_ADDRESS not in first_system:
                    first_system.append(ROW_ADDRESS)
                self._late = (
                    table_schema.project([n for n in first if n not in SYSTEM_COLUMNS]), first_system,
                    table_schema.project([n for n in rest if n not in SYSTEM_COLUMNS]),
                    [n for n in rest if n in SYSTEM_COLUMNS],
                )

    @property
    def projected_schema(self) -> pa.Schema:
        """The schema of the scan's output: the requested columns, then any system columns
        (extension-typed columns with their extension types, see ``schema.extensions``)."""
        return with_extension_types(self._stored_schema)

    @cached_property
    def _stored_schema(self) -> pa.Schema:
        """The output schema as stored: extension columns as storage plus metadata."""
        full = _filter_schema(read_arrow_schema(self._dataset.lance_schema, blobs_as_binary=bool(self._binary_blobs)))
        full = full.append(pa.field(ROW_OFFSET, pa.uint64()))
        fields = [pa.field(n, self._expressions[n][1]) if n in self._expressions else full.field(n)
                  for n in self._output]
        return pa.schema(fields, metadata=self._dataset.lance_schema.to_arrow().metadata)

    def _project(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        schema = self._stored_schema
        if self._expressions:
            table = pads.dataset(pa.Table.from_batches([batch])).to_table(
                columns={n: self._expressions[n][0] if n in self._expressions else pc.field(n) for n in self._output})
            arrays = [table.column(i).combine_chunks().cast(f.type) for i, f in enumerate(schema)]
            stored = pa.RecordBatch.from_arrays(arrays, schema=schema)
        elif not self._output:  # no columns: keep the row count
            return batch.select([])
        else:
            batch = blob_bytes_columns(self._dataset, batch, self._binary_blobs)
            stored = pa.RecordBatch.from_arrays([batch.column(n) for n in self._output], schema=schema)
        return as_extension_arrays(stored, self.projected_schema)

    def take_physical(self, fragment: LanceFragment, offsets: np.ndarray) -> pa.RecordBatch:
        """This scan's columns of ``fragment``'s rows at physical ``offsets``, in that order
        (``LanceDataset.take``; the filter, limit and offset do not apply)."""
        return self._project(fragment.take_physical(self._read_schema, self._read_system, offsets))

    def _fragment_bases(self) -> dict[int, int]:
        """Live rows before each fragment of the table (for ``_rowoffset``)."""
        bases, total = {}, 0
        for fragment in self._dataset.get_fragments():
            bases[fragment.fragment_id] = total
            total += fragment.count_rows()
        return bases

    def _decoded(self, schema: LanceSchema, system: list[str],
                 finish: Callable[[LanceFragment, pa.RecordBatch], _T], fragments: list[LanceFragment] | None = None,
                 **read: Any) -> Iterator[tuple[LanceFragment, _T]]:
        """``finish(fragment, batch)`` for every batch of every fragment, ``batch_readahead`` of
        them decoded (and finished) at once across fragment edges (from ``fragment_readahead``
        fragments at most, when given), in table order unless ``scan_in_order=False``."""
        depth = self._readahead
        fragments = self._fragments if fragments is None else fragments
        if self._io_buffer_size and depth > 1 and fragments:
            # io_buffer_size: the pages of the batches in flight stay within it (one batch at least)
            batch_bytes = fragments[0].stored_bytes_per_row(schema) * self._batch_size
            if batch_bytes > 0:
                depth = max(1, min(depth, int(self._io_buffer_size // batch_bytes)))
        threaded = depth > 1

        def tasks() -> Iterator[tuple[LanceFragment, Callable[[], pa.RecordBatch]]]:
            for fragment in fragments:
                self._counts.fragments += 1
                for task in fragment.batch_tasks(schema, system, self._batch_size, threads=threaded, **read):
                    yield fragment, task

        def run(item: tuple[LanceFragment, Callable[[], pa.RecordBatch]]) -> tuple[LanceFragment, _T]:
            fragment, task = item
            return fragment, finish(fragment, task())

        return map_ordered(run, tasks(), depth, ordered=self._in_order, group=_fragment_of,
                           max_groups=self._fragment_readahead)

    @cached_property
    def _index_plan(self) -> IndexScanPlan | None:
        """The index step of this scan (None: no index helps, or the scan must see every row)."""
        if (self._filter_text is None or not self._use_scalar_index or self._row_offsets
                or self._include_deleted):
            return None
        return IndexScanPlan.build(self._dataset, self._filter_text, self._filter_schema, self._fragments)

    def _filtered_batches(self) -> Iterator[pa.RecordBatch]:
        plan = self._index_plan
        if plan is None or not plan.answers():
            yield from self._scanned_batches(self._fragments)
            return
        # fragments in table order: runs of uncovered ones scanned, covered ones read at their candidates
        run: list[LanceFragment] = []
        for fragment in self._fragments:
            offsets = plan.offsets(fragment) if plan.covers(fragment.fragment_id) else None
            if offsets is None or len(offsets) > _INDEX_DENSE * fragment.physical_rows:
                run.append(fragment)  # not covered, or so many candidates that a scan reads less
                continue
            if run:
                yield from self._scanned_batches(run)
                run = []
            yield from self._candidate_batches(fragment, offsets)
        if run:
            yield from self._scanned_batches(run)

    def _candidate_batches(self, fragment: LanceFragment, offsets: np.ndarray) -> Iterator[pa.RecordBatch]:
        """The rows at ``offsets`` (an index's candidates) that pass the filter."""
        assert self._filter is not None  # an index step exists only for a filter
        self._counts.fragments += 1
        for start in range(0, len(offsets), self._batch_size):
            chunk = offsets[start:start + self._batch_size]
            batch = fragment.take_physical(self._read_schema, self._read_system, chunk)
            self._counts.rows += batch.num_rows
            matching = matching_rows(batch, self._filter)
            if len(matching) < batch.num_rows:
                batch = batch.take(matching)
            if batch.num_rows:
                yield batch

    def _scanned_batches(self, fragments: list[LanceFragment]) -> Iterator[pa.RecordBatch]:
        if self._late is not None:
            yield from self._late_batches(fragments)
            return
        bases = self._fragment_bases() if self._row_offsets else {}

        def finish(fragment: LanceFragment, batch: pa.RecordBatch) -> tuple[int, pa.RecordBatch]:
            rows = batch.num_rows
            if self._row_offsets:
                offsets = row_offsets(batch.column(ROW_ADDRESS), fragment.live_offsets(),
                                      bases.get(fragment.fragment_id, 0))
                if self._include_deleted:  # now that offsets are known, deleted rows lose their ids
                    batch = null_deleted_ids(batch, fragment.deleted_offsets)
                batch = batch.append_column(pa.field(ROW_OFFSET, pa.uint64()), offsets)
            if self._filter is not None:
                matching = matching_rows(batch, self._filter)
                if len(matching) < rows:
                    batch = batch.take(matching)
            return rows, batch

        for _, (rows, batch) in self._decoded(self._read_schema, self._read_system, finish, fragments,
                                              include_deleted=self._include_deleted, keep_addresses=self._row_offsets):
            self._counts.rows += rows
            if batch.num_rows:
                yield batch

    def _ordered_batches(self) -> Iterator[pa.RecordBatch]:
        """The filtered rows, sorted when ``order_by`` asks for it (which needs all of them)."""
        if not self._order_by:
            if self._regroup:
                yield from coalesced_batches(self._filtered_batches(), self._output_rows)
            else:
                yield from self._filtered_batches()
            return
        matching = list(self._filtered_batches())
        if not matching:
            return
        ordered = sorted_table(pa.Table.from_batches(matching), self._order_by, uri=self._dataset.uri)
        yield from ordered.combine_chunks().to_batches(max_chunksize=self._output_rows)

    def _late_batches(self, fragments: list[LanceFragment]) -> Iterator[pa.RecordBatch]:
        """A filtered scan reading the non-filter columns of passing rows only.

        The filter columns are read and filtered ``batch_readahead`` batches at once. Passing
        rows of several batches of a fragment are gathered (up to a batch) before their other
        columns are taken, so a selective filter costs one take per output batch, not per
        input batch.
        """
        assert self._filter is not None and self._late is not None  # set together in __init__
        first_schema, first_system, rest_schema, rest_system = self._late
        condition = self._filter

        def passing_rows(fragment: LanceFragment, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, pa.Array]:
            return batch, matching_rows(batch, condition)

        pending: list[pa.RecordBatch] = []  # passing rows' filter columns, not yet completed
        pending_rows = 0
        pending_fragment: LanceFragment | None = None
        for fragment, (batch, passing) in self._decoded(first_schema, first_system, passing_rows, fragments):
            self._counts.rows += batch.num_rows
            if not len(passing):
                continue
            if pending and (fragment is not pending_fragment or pending_rows + len(passing) > self._batch_size
                            or len(passing) > _DENSE * batch.num_rows):
                assert pending_fragment is not None  # set with pending
                yield self._complete(pending_fragment, pending, rest_schema, rest_system)
                pending, pending_rows = [], 0
            if len(passing) > _DENSE * batch.num_rows or self._regroup:
                # most rows pass: reading the batch's rows in order beats taking them
                yield self._complete_range(fragment, batch, passing, rest_schema, rest_system)
                continue
            pending.append(batch.take(passing))
            pending_rows += len(passing)
            pending_fragment = fragment
        if pending:
            assert pending_fragment is not None  # set with pending
            yield self._complete(pending_fragment, pending, rest_schema, rest_system)

    def _complete_range(self, fragment: LanceFragment, batch: pa.RecordBatch, passing: pa.Array,
                        rest_schema: LanceSchema, rest_system: list[str]) -> pa.RecordBatch:
        """A batch's passing rows, the other columns read for the batch's whole row range."""
        offsets = np.asarray(batch.column(ROW_ADDRESS).to_numpy()) & np.uint64(0xFFFFFFFF)
        span = (int(offsets[0]), int(offsets[-1]) + 1)
        rest = pa.Table.from_batches(list(fragment.read_batches(rest_schema, rest_system, span[1] - span[0],
                                                                row_range=span)))
        if rest.num_rows != batch.num_rows:
            raise CorruptFileError(f"fragment {fragment.fragment_id} read {rest.num_rows} rows of a range holding "
                                   f"{batch.num_rows}", table=self._dataset.uri)
        columns = {name: batch.column(name).take(passing) for name in batch.schema.names}
        columns.update({name: rest.column(name).combine_chunks().take(passing) for name in rest.column_names})
        return pa.RecordBatch.from_pydict(columns)

    def _complete(self, fragment: LanceFragment, parts: list[pa.RecordBatch], rest_schema: LanceSchema,
                  rest_system: list[str]) -> pa.RecordBatch:
        """The filter columns of ``parts`` joined with the other columns of the same rows."""
        first = pa.Table.from_batches(parts).combine_chunks()
        offsets = (np.asarray(first.column(ROW_ADDRESS).to_numpy()) & np.uint64(0xFFFFFFFF)).astype(np.uint64)
        rest = fragment.take_physical(rest_schema, rest_system, offsets)
        columns = {name: first.column(name).combine_chunks() for name in first.column_names}
        columns.update({name: rest.column(name) for name in rest.schema.names})
        return pa.RecordBatch.from_pydict(columns)

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """Run the scan lazily, fragment by fragment.

        Returns
        -------
        Iterator of pa.RecordBatch
            Non-empty batches of :attr:`projected_schema`, in table order.

        Raises
        ------
        CorruptFileError
            A data, deletion or row-id file is malformed.
        """
        batches: Iterator[pa.RecordBatch] = (self._project(batch) for batch in self._limited_batches())
        if self._stats_callback is not None:
            self._counts = ScanCounts()
            batches = reporting(batches, self._counts, self._stats_callback)
        if self._strict_batch_size:
            yield from exact_batches(batches, self._output_rows)
            return
        for batch in batches:
            if batch.num_rows <= self._output_rows or self._regroup:  # regrouped batches may exceed it
                yield batch
                continue
            for start in range(0, batch.num_rows, self._output_rows):  # slices; list offsets rebased
                yield compact_slice(batch, start, self._output_rows)

    def _limited_batches(self) -> Iterator[pa.RecordBatch]:
        skip = self._offset
        remaining = self._limit
        if remaining == 0:
            return
        for batch in self._ordered_batches():
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

    def to_reader(self) -> pa.RecordBatchReader:
        """Run the scan lazily as an Arrow stream.

        Returns
        -------
        pa.RecordBatchReader
            A reader over :meth:`to_batches`.
        """
        return pa.RecordBatchReader.from_batches(self.projected_schema, self.to_batches())

    def to_table(self) -> pa.Table:
        """Run the scan and collect its rows.

        Returns
        -------
        pa.Table
            All rows, of :attr:`projected_schema`.

        Raises
        ------
        CorruptFileError
            A data, deletion or row-id file is malformed.
        """
        return pa.Table.from_batches(list(self.to_batches()), schema=self.projected_schema)

    def head(self, num_rows: int) -> pa.Table:
        """The scan's first ``num_rows`` rows; reading stops once they are in.

        Raises
        ------
        InvalidInputError
            ``num_rows`` is negative.
        """
        if num_rows < 0:
            raise InvalidInputError(f"num_rows must not be negative, got {num_rows}", table=self._dataset.uri)
        batches: list[pa.RecordBatch] = []
        remaining = num_rows
        for batch in self.to_batches() if remaining else ():
            batches.append(batch.slice(0, remaining))
            remaining -= min(remaining, batch.num_rows)
            if not remaining:
                break
        return pa.Table.from_batches(batches, schema=self.projected_schema)

    def to_pandas(self, **arrow_options: Any) -> Any:
        """Run the scan into a pandas DataFrame (``arrow_options`` go to ``pa.Table.to_pandas``)."""
        return self.to_table().to_pandas(**arrow_options)

    @property
    def dataset_schema(self) -> pa.Schema:
        """The schema of the whole table this scan reads from (before projection)."""
        return self._dataset.schema

    def explain_plan(self, verbose: bool = False) -> str:
        """A readable description of what this scan will do (this engine's plan, not DataFusion's).

        Each line is one step, outermost first: projection, limit/offset, ordering, filter, and
        the read of the fragments. The read line names its columns ``projection=[a, b]`` and
        carries ``num_fragments``, ``row_id``, ``row_addr`` and ``full_filter`` as pylance's
        ``LanceRead`` does. ``verbose`` adds the fragment ids and the output schema.
        """
        return self._plan(verbose)

    def _plan(self, verbose: bool, read_metrics: str = "") -> str:
        ds = self._dataset
        lines = [f"Projection: {self._output}" + (
            " with expressions " + ", ".join(f"{n}={e}" for n, (e, _) in self._expressions.items())
            if self._expressions else "")]
        if self._strict_batch_size:
            lines.append(f"ExactBatches: rows={self._output_rows}")
        if self._limit is not None or self._offset:
            lines.append(f"Limit: offset={self._offset}, limit={self._limit}")
        if self._order_by:
            lines.append(f"Sort: {describe_ordering(self._order_by)} (reads every matching row first)")
        if self._filter is not None:
            lines.append(f"Filter: {self._filter} (per batch, on the decoded columns)")
        physical = sum(f.physical_rows for f in self._fragments)
        deleted = "with deleted rows" if self._include_deleted else "skipping deleted rows"
        projection = ", ".join(self._read_schema.names())
        lines.append(
            f"LanceRead: uri={ds.uri}, projection=[{projection}], num_fragments={len(self._fragments)}"
            f"{'' if self._scans_whole_table else ' (chosen)'}, "
            f"row_id={str('_rowid' in self._read_system).lower()}, "
            f"row_addr={str(ROW_ADDRESS in self._read_system).lower()}, "
            f"full_filter={self._filter if self._filter is not None else '--'}, version={ds.version}, "
            f"physical_rows={physical}, {deleted}, system_columns={self._read_system}, "
            f"batch_size={self._batch_size}, batch_readahead={self._readahead}"
            f"{'' if self._in_order else ', out of order'}" + (f", metrics=[{read_metrics}]" if read_metrics else ""))
        plan = self._index_plan
        if plan is not None:
            lines.append(plan.describe())  # pylance's ScalarIndexQuery, under the read it feeds
        text = "\n".join("  " * i + line for i, line in enumerate(lines)) + "\n"
        if verbose:
            indent = "  " * len(lines)
            text += f"{indent}fragment_ids={[f.fragment_id for f in self._fragments]}\n"
            text += f"{indent}output_schema={self.projected_schema.to_string(show_schema_metadata=False)!r}\n"
        return text

    def analyze_plan(self, count_rows: bool = False) -> str:
        """Run the scan and report what it did: :meth:`explain_plan` with the read line's
        metrics (pylance's names: ``output_rows`` after the filter, ``rows_scanned`` before it,
        ``fragments_scanned``, ``bytes_read``, ``iops``, ``requests``; reads made by other threads
        meanwhile count too), then a line of the whole scan's output rows, batches and time.
        ``count_rows`` runs a count instead of materializing the output batches."""
        started = time.perf_counter()
        read = {"rows": 0, "batches": 0}
        original = self._filtered_batches
        self._counts = ScanCounts()
        start_iops, start_bytes = iops_counter(), bytes_read_counter()

        def counting() -> Iterator[pa.RecordBatch]:
            for batch in original():
                read["rows"] += batch.num_rows
                read["batches"] += 1
                yield batch

        self._filtered_batches = counting  # type: ignore[method-assign]
        try:
            if count_rows:
                output_rows, output_batches = self.count_rows(), 0
            else:
                output_rows = output_batches = 0
                for batch in self.to_batches():
                    output_rows += batch.num_rows
                    output_batches += 1
        finally:
            del self._filtered_batches
        elapsed = time.perf_counter() - started
        iops = iops_counter() - start_iops
        read_metrics = (f"output_rows={read['rows']}, output_batches={read['batches']}, "
                        f"fragments_scanned={self._counts.fragments}, rows_scanned={self._counts.rows}, "
                        f"bytes_read={bytes_read_counter() - start_bytes}, iops={iops}, requests={iops}")
        metrics = (f"Metrics: elapsed={elapsed * 1000:.3f}ms, output_rows={output_rows}, "
                   f"output_batches={output_batches}, rows_after_filter={read['rows']}, "
                   f"batches_after_filter={read['batches']}, fragments={self._counts.fragments}")
        return self._plan(False, read_metrics) + metrics + "\n"

    def count_rows(self) -> int:
        """The number of rows the scan returns.

        Without a filter, limit or offset the count comes from fragment metadata (no data read).

        Returns
        -------
        int
            The row count.

        Raises
        ------
        CorruptFileError
            A data or deletion file is malformed.
        """
        if self._filter is None and self._limit is None and not self._offset and not self._include_deleted:
            return sum(f.count_rows() for f in self._fragments)
        return sum(b.num_rows for b in self._limited_batches())

    # pyarrow Scanner's interface, as pylance's LanceScanner has it
    @staticmethod
    def from_dataset(*args: Any, **kwargs: Any) -> "LanceScanner":
        """Not available, as in pylance: use ``LanceDataset.scanner``."""
        raise UnsupportedFeatureError("from dataset")

    @staticmethod
    def from_fragment(*args: Any, **kwargs: Any) -> "LanceScanner":
        """Not available, as in pylance: use ``LanceFragment.scanner``."""
        raise UnsupportedFeatureError("from fragment")

    @staticmethod
    def from_batches(*args: Any, **kwargs: Any) -> "LanceScanner":
        """Not available, as in pylance: a Lance scan reads a dataset."""
        raise UnsupportedFeatureError("from batches")

    def scan_batches(self) -> list[pa.RecordBatch]:
        """All the scan's record batches, as a list (what pylance's ``scan_batches`` returns)."""
        return list(self.to_batches())

    def take(self, indices: Any) -> pa.Table:
        """Not available, as in pylance: use ``LanceDataset.take``."""
        raise UnsupportedFeatureError("take")
