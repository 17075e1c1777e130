"""Scans: projection, filters, system columns, limit and offset over a version's fragments.

Batches stream fragment by fragment; nothing holds more than one batch of a fragment at a time
(plus the rows a filter keeps from it).

Filters are late-materialized: the filter's columns are read first, and the other columns only
for the rows that pass (taken by physical offset, so pages decode just the chunks, and FSST
strings just the values, those rows need), unless most rows of a batch pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.dataset.fragment import ROW_ADDRESS, SYSTEM_COLUMNS, LanceFragment
from lance_format.dataset.arguments import column_names
from lance_format.dataset.sql.filter import referenced_columns, to_expression
from lance_format.errors import CorruptFileError, InvalidInputError
from lance_format.schema import LanceSchema
from lance_format.schema.blob import read_arrow_schema

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset

DEFAULT_BATCH_SIZE = 65536
_POSITION = "__lance_format_position"  # a batch's row positions, carried through the filter
_DENSE = 0.25  # above this fraction of a batch's rows passing, its other columns are read, not taken


def _filter_schema(arrow_schema: pa.Schema) -> pa.Schema:
    for name in SYSTEM_COLUMNS:
        arrow_schema = arrow_schema.append(pa.field(name, pa.uint64()))
    return arrow_schema


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
        columns: list[str] | None = None,
        filter: str | pc.Expression | None = None,
        limit: int | None = None,
        offset: int | None = None,
        with_row_id: bool = False,
        with_row_address: bool = False,
        batch_size: int | None = None,
        fragments: list[LanceFragment] | None = None,
    ) -> None:
        self._dataset = dataset
        table_schema = dataset.lance_schema
        if isinstance(columns, dict):
            raise InvalidInputError("column expressions are not supported; pass a list of column names")
        requested = column_names(columns, table=dataset.uri) if columns is not None else table_schema.names()
        for name in requested:
            if name not in SYSTEM_COLUMNS and name not in table_schema.names():
                raise InvalidInputError(
                    f"unknown column {name!r}; columns are {table_schema.names()}", table=dataset.uri
                )
        if with_row_id and "_rowid" not in requested:
            requested.append("_rowid")
        if with_row_address and "_rowaddr" not in requested:
            requested.append("_rowaddr")
        self._output = requested
        if limit is not None and limit < 0 or offset is not None and offset < 0:
            raise InvalidInputError("limit and offset must be non-negative")
        self._limit = limit
        self._offset = offset or 0
        self._batch_size = batch_size or DEFAULT_BATCH_SIZE
        self._fragments = fragments if fragments is not None else dataset.get_fragments()

        self._filter = to_expression(filter, _filter_schema(table_schema.to_arrow())) if filter is not None else None
        needed = list(requested)
        if self._filter is not None:
            for name in referenced_columns(self._filter, _filter_schema(table_schema.to_arrow())):
                if name not in needed:
                    needed.append(name)
        data_names = [n for n in needed if n not in SYSTEM_COLUMNS]
        self._read_schema = table_schema.project(data_names)
        self._read_system = [n for n in needed if n in SYSTEM_COLUMNS]
        # late materialization: the filter's columns first (with the row address to find the
        # passing rows again), then the rest for the passing rows only
        self._late: tuple[LanceSchema, list[str], LanceSchema, list[str]] | None = None
        if self._filter is not None:
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
        """The schema of the scan's output: the requested columns, then any system columns."""
        full = _filter_schema(read_arrow_schema(self._dataset.lance_schema))
        return pa.schema([full.field(n) for n in self._output], metadata=self._dataset.schema.metadata)

    def _project(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        schema = self.projected_schema
        return pa.RecordBatch.from_arrays([batch.column(n) for n in self._output], schema=schema)

    def take_physical(self, fragment: LanceFragment, offsets: np.ndarray) -> pa.RecordBatch:
        """This scan's columns of ``fragment``'s rows at physical ``offsets``, in that order
        (``LanceDataset.take``; the filter, limit and offset do not apply)."""
        return self._project(fragment.take_physical(self._read_schema, self._read_system, offsets))

    def _filtered_batches(self) -> Iterator[pa.RecordBatch]:
        if self._late is not None:
            for fragment in self._fragments:
                yield from self._late_batches(fragment)
            return
        for fragment in self._fragments:
            for batch in fragment.read_batches(self._read_schema, self._read_system, self._batch_size):
                if self._filter is not None:
                    batch = pa.Table.from_batches([batch]).filter(self._filter).combine_chunks()
                    batches = batch.to_batches()
                    if not batches:
                        continue
                    batch = batches[0]
                if batch.num_rows:
                    yield batch

    def _late_batches(self, fragment: LanceFragment) -> Iterator[pa.RecordBatch]:
        """A filtered scan of one fragment, reading the non-filter columns of passing rows only.

        Passing rows of several batches are gathered (up to a batch) before their other columns
        are taken, so a selective filter costs one take per output batch, not per input batch.
        """
        assert self._filter is not None and self._late is not None  # set together in __init__
        first_schema, first_system, rest_schema, rest_system = self._late
        pending: list[pa.RecordBatch] = []  # passing rows' filter columns, not yet completed
        pending_rows = 0
        for batch in fragment.read_batches(first_schema, first_system, self._batch_size):
            table = pa.Table.from_batches([batch])
            positions = pa.array(np.arange(batch.num_rows, dtype=np.int64))
            passing = table.append_column(_POSITION, positions).filter(self._filter).column(_POSITION).combine_chunks()
            if not len(passing):
                continue
            if pending and (pending_rows + len(passing) > self._batch_size or len(passing) > _DENSE * batch.num_rows):
                yield self._complete(fragment, pending, rest_schema, rest_system)
                pending, pending_rows = [], 0
            if len(passing) > _DENSE * batch.num_rows:
                # most rows pass: reading the batch's rows in order beats taking them
                yield self._complete_range(fragment, batch, passing, rest_schema, rest_system)
                continue
            pending.append(batch.take(passing))
            pending_rows += len(passing)
        if pending:
            yield self._complete(fragment, pending, rest_schema, rest_system)

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
        for batch in self._limited_batches():
            yield self._project(batch)

    def _limited_batches(self) -> Iterator[pa.RecordBatch]:
        skip = self._offset
        remaining = self._limit
        if remaining == 0:
            return
        for batch in self._filtered_batches():
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
        if self._filter is None and self._limit is None and not self._offset:
            return sum(f.count_rows() for f in self._fragments)
        return sum(b.num_rows for b in self._limited_batches())
