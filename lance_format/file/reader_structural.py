"""Reading Lance file versions 2.1 and 2.2: one column per leaf field, structural page layouts.

Parents (structs, lists, maps) have no column; their plans carry ``column == -1`` (see
:func:`~lance_format.file.plans.structural_plans_for_schema`) and their validity and offsets come
from the rep/def levels of the leaves below. Each leaf column is a
:class:`~lance_format.encodings.structural.decode_column.StructuralColumn`, which locates rows by page
priority and decodes only the pages (and mini-block chunks) holding them;
:func:`~lance_format.encodings.structural.decode_column.assemble` builds the nested arrays. This module
only opens the leaf columns and dispatches to :mod:`lance_format.encodings.structural`.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from lance_format.encodings.buffers import DecodeContext
from lance_format.encodings.structural.decode_column import StructuralColumn, assemble
from lance_format.encodings.structural.decode_repdef import LeafData
from lance_format.errors import CorruptFileError, InvalidInputError, UnsupportedFeatureError
from lance_format.file.plans import ColumnPlan
from lance_format.io.decode_pool import run_all
from lance_format.proto import encodings_v2_1_pb2

if TYPE_CHECKING:
    from lance_format.file.reader import DataFileReader

_COLUMN_THREADS = 8  # leaf columns of one remote file fetched at once
_COLUMN_POOL: ThreadPoolExecutor | None = None
_COLUMN_POOL_PID = 0
_COLUMN_POOL_LOCK = threading.Lock()


def column_pool() -> ThreadPoolExecutor:
    """The process-wide pool that fetches the leaf columns of remote files side by side (not the
    I/O pool: its tasks wait on ranged reads, which run there; re-made after a fork)."""
    global _COLUMN_POOL, _COLUMN_POOL_PID
    with _COLUMN_POOL_LOCK:
        if _COLUMN_POOL is None or _COLUMN_POOL_PID != os.getpid():
            _COLUMN_POOL = ThreadPoolExecutor(max_workers=_COLUMN_THREADS, thread_name_prefix="lance-columns")
            _COLUMN_POOL_PID = os.getpid()
        return _COLUMN_POOL


_RANGE_TAKE_ROWS = 1024  # contiguous takes at least this long use the sequential read path
_SMALL_FILE_ROWS = 16384  # ... and so do all contiguous takes from files this small


class StructuralReader:
    """Range reads and takes of planned fields from the leaf columns of one 2.1/2.2 file.

    :class:`~lance_format.file.reader.DataFileReader` validates the requests and owns the file;
    a leaf column is checked against the file's row count when it is first opened.
    """

    def __init__(self, reader: DataFileReader) -> None:
        self.reader = reader
        self.path = reader.path
        self.num_rows = reader.num_rows
        self.num_columns = reader.num_columns
        self._leaf_columns: dict[int, StructuralColumn] = {}
        self._opening = threading.Lock()

    def read_range(self, plans: list[ColumnPlan], start: int, stop: int) -> list[pa.Array]:
        """Rows ``[start, stop)`` (already validated) of each planned field."""
        return self._structural(plans, lambda col, t: col.read(start, stop, t))

    def take(self, plans: list[ColumnPlan], rows: np.ndarray) -> list[pa.Array]:
        """The rows at ``rows`` (sorted, unique, already validated) of each planned field."""
        # A long contiguous run reads like a scan; a short one (a point lookup) in a large
        # file must not trigger the scan's read-ahead, so it takes just the chunks holding
        # its rows. Small files are read whole either way, and the read path caches them.
        sequential = len(rows) >= _RANGE_TAKE_ROWS or self.num_rows <= _SMALL_FILE_ROWS
        if sequential and len(rows) and int(rows[-1]) - int(rows[0]) + 1 == len(rows):
            first, last = int(rows[0]), int(rows[-1]) + 1
            return self._structural(plans, lambda col, t: col.read(first, last, t))
        return self._structural(plans, lambda col, t: col.take(rows, t))

    def _structural(self, plans: list[ColumnPlan], fetch) -> list[pa.Array]:
        """Decode each plan's leaves with ``fetch(column, type)`` and assemble the fields."""
        named_of = [self._named_leaves(plan, "") for plan in plans]
        if self.num_rows == 0:
            return [pa.array([], type=plan.field.type) for plan in plans]
        fetched: dict[int, LeafData] = {}
        if self.reader.remote:
            # On an object store each page read is a request: the leaf columns (each decoded by
            # its own decoders) go side by side, so their requests overlap.
            todo = {lp.column: (self._leaf_column(lp, name), lp.field.type) for named in named_of
                    for lp, name in named}
            if len(todo) > 1:
                pool = column_pool()
                futures = {column: pool.submit(fetch, col, data_type) for column, (col, data_type) in todo.items()}
                fetched = {column: future.result() for column, future in futures.items()}
            return [self._assembled(plan, named, fetch, fetched) for plan, named in zip(plans, named_of)]
        # Local files: decoding is CPU work that mostly releases the GIL (numpy, pyarrow, the
        # nogil kernels), so the fields decode side by side on the decode pool.
        for named in named_of:
            for lp, name in named:
                self._leaf_column(lp, name)  # opened (and checked) here, not racing in the tasks
        return run_all([partial(self._assembled, plan, named, fetch, fetched)
                        for plan, named in zip(plans, named_of)])

    def _assembled(self, plan: ColumnPlan, named: list[tuple[ColumnPlan, str]], fetch,
                   fetched: dict[int, LeafData]) -> pa.Array:
        leaves = {lp.column: fetched[lp.column] if lp.column in fetched
                  else fetch(self._leaf_column(lp, name), lp.field.type) for lp, name in named}
        names = {lp.field.name: name for lp, name in named}
        return assemble(plan, leaves, lambda n: DecodeContext(self.path, names.get(n, n)))

    def _named_leaves(self, plan: ColumnPlan, prefix: str) -> list[tuple[ColumnPlan, str]]:
        name = f"{prefix}{plan.field.name}"
        if (plan.field.metadata or {}).get(b"ARROW:extension:name") == b"lance.blob.v2":
            raise UnsupportedFeatureError("blob v2 columns (lance.blob.v2) are not supported yet",
                                          path=self.path, column=name)
        if plan.column >= 0:
            if plan.column >= self.num_columns:
                raise CorruptFileError(
                    f"field refers to column {plan.column} but the file has {self.num_columns} columns",
                    path=self.path, column=name,
                )
            return [(plan, name)]
        if not plan.children:
            raise InvalidInputError(f"plan for {name!r} has neither a column nor children")
        return [leaf for child in plan.children for leaf in self._named_leaves(child, name + ".")]

    def _leaf_column(self, plan: ColumnPlan, name: str) -> StructuralColumn:
        col = self._leaf_columns.get(plan.column)
        if col is not None:
            return col
        with self._opening:  # batches on several threads share one column object (and its cache)
            return self._open_leaf_column(plan, name)

    def _open_leaf_column(self, plan: ColumnPlan, name: str) -> StructuralColumn:
        col = self._leaf_columns.get(plan.column)
        if col is None:
            ctx = DecodeContext(self.path, name)
            pages = list(self.reader.metadata.columns[plan.column].pages)

            def layout_of(page: int) -> encodings_v2_1_pb2.PageLayout:
                return self.reader.page_encoding(pages[page], encodings_v2_1_pb2.PageLayout, name)

            def read_at(offset: int, length: int) -> np.ndarray:
                return np.frombuffer(self.reader.read_bytes(offset, length, ctx), np.uint8)

            def read_many(ranges: list[tuple[int, int]]) -> list[np.ndarray]:
                return [np.frombuffer(b, np.uint8) for b in self.reader.read_many(ranges, ctx)]

            col = StructuralColumn(pages, ctx, layout_of, read_at, self.reader.metadata.footer.column_meta_start,
                                   read_many=read_many)
            if col.total != self.num_rows:
                raise ctx.corrupt(f"column has {col.total} rows, the file has {self.num_rows}")
            self._leaf_columns[plan.column] = col
        return col
