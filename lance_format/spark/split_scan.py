"""A filtered read of one split's row range, late-materialized: inside a Spark task, the
filter's columns are decoded first and the other columns only for the rows that pass.

The engine's scanner does the same for whole fragments; a split is a physical row range of a
fragment, which the scanner does not take. Passing rows of several batches are gathered (up to
a batch) and their other columns taken by physical offset, so a selective filter decodes only
the pages (2.2: the chunks, FSST strings: the values) those rows need; when most of a batch
passes, its other columns are read for its whole range instead (a sequential read beats a take).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.dataset.fragment import ROW_ADDRESS, SYSTEM_COLUMNS, LanceFragment
from lance_format.errors import CorruptFileError
from lance_format.schema import LanceSchema

DENSE = 0.25  # above this fraction of a batch's rows passing, its other columns are read, not taken
_POSITION = "__lance_split_position"
_OFFSET_MASK = np.uint64(0xFFFFFFFF)


@dataclass(frozen=True)
class LateColumns:
    """The filter's columns (read first, with the row address) and the others (read after)."""

    first: LanceSchema
    first_system: list[str]
    rest: LanceSchema
    rest_system: list[str]


def late_columns(table: LanceSchema, needed: list[str], used: set[str]) -> LateColumns | None:
    """How to split ``needed`` for a filter reading ``used``; None when nothing is left to read
    late (every needed column is the filter's)."""
    rest = [n for n in needed if n not in used]
    if not rest:
        return None
    first = [n for n in needed if n in used]
    first_system = [n for n in first if n in SYSTEM_COLUMNS]
    if ROW_ADDRESS not in first_system:
        first_system.append(ROW_ADDRESS)
    return LateColumns(
        table.project([n for n in first if n not in SYSTEM_COLUMNS]), first_system,
        table.project([n for n in rest if n not in SYSTEM_COLUMNS]), [n for n in rest if n in SYSTEM_COLUMNS],
    )


def late_filtered_batches(fragment: LanceFragment, expr: pc.Expression, columns: LateColumns, batch_size: int,
                          row_range: tuple[int, int]) -> Iterator[pa.RecordBatch]:
    """The rows of ``fragment``'s physical ``row_range`` that satisfy ``expr``: every column of
    ``columns`` (the filter's first, then the others, then the row address)."""
    pending: list[pa.RecordBatch] = []
    pending_rows = 0
    for batch in fragment.read_batches(columns.first, columns.first_system, batch_size, row_range=row_range):
        positions = pa.array(np.arange(batch.num_rows, dtype=np.int64))
        table = pa.Table.from_batches([batch]).append_column(_POSITION, positions)
        passing = table.filter(expr).column(_POSITION).combine_chunks()
        if not len(passing):
            continue
        dense = len(passing) > DENSE * batch.num_rows
        if pending and (dense or pending_rows + len(passing) > batch_size):
            yield _taken(fragment, pending, columns)
            pending, pending_rows = [], 0
        if dense:
            yield _read_range(fragment, batch, passing, columns)
            continue
        pending.append(batch.take(passing))
        pending_rows += len(passing)
    if pending:
        yield _taken(fragment, pending, columns)


def _offsets(batch: pa.RecordBatch | pa.Table) -> np.ndarray:
    return np.asarray(batch.column(ROW_ADDRESS).to_numpy()) & _OFFSET_MASK


def _joined(first: dict[str, pa.Array], rest: pa.RecordBatch | pa.Table) -> pa.RecordBatch:
    columns = dict(first)
    for name in rest.schema.names:
        column = rest.column(name)
        columns[name] = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    return pa.RecordBatch.from_pydict(columns)


def _taken(fragment: LanceFragment, parts: list[pa.RecordBatch], columns: LateColumns) -> pa.RecordBatch:
    """The gathered passing rows with their other columns taken by physical offset."""
    first = pa.Table.from_batches(parts).combine_chunks()
    rest = fragment.take_physical(columns.rest, columns.rest_system, _offsets(first).astype(np.uint64))
    return _joined({n: first.column(n).combine_chunks() for n in first.column_names}, rest)


def _read_range(fragment: LanceFragment, batch: pa.RecordBatch, passing: pa.Array,
                columns: LateColumns) -> pa.RecordBatch:
    """A batch's passing rows, the other columns read for the batch's whole row range."""
    offsets = _offsets(batch)
    span = (int(offsets[0]), int(offsets[-1]) + 1)
    rest = pa.Table.from_batches(list(fragment.read_batches(columns.rest, columns.rest_system, span[1] - span[0],
                                                            row_range=span)))
    if rest.num_rows != batch.num_rows:
        raise CorruptFileError(f"fragment {fragment.fragment_id} read {rest.num_rows} rows of a range holding "
                               f"{batch.num_rows}")
    return _joined({n: batch.column(n).take(passing) for n in batch.schema.names}, rest.take(passing))


__all__ = ["DENSE", "LateColumns", "late_columns", "late_filtered_batches"]
