"""``LanceDataset``'s reading API: ``scanner``, ``to_table``, ``to_batches``, ``to_pandas``,
``head``, ``count_rows``, ``take`` and ``_take_rows`` (by row id), with pylance's parameters in
pylance's order.

A mixin of ``LanceDataset`` (kept apart so that neither module grows past a few pages); every
method plans a :class:`~lance_format.dataset.scanner.LanceScanner` and runs it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.dataset.arguments import row_positions
from lance_format.dataset.blob_reads import blob_frame
from lance_format.dataset.fragment import SYSTEM_COLUMNS, LanceFragment
from lance_format.dataset.relational import RelationalMethods
from lance_format.dataset.scan_options import ROW_OFFSET, ColumnOrdering
from lance_format.dataset.scanner import LanceScanner
from lance_format.dataset.sql_query import SqlQueryBuilder, SqlStatement
from lance_format.errors import InvalidInputError, InvalidRowSelectionError
from lance_format.schema.blob import is_blob_field

if TYPE_CHECKING:
    from lance_format.dataset.sql_query import SqlQueryBuilder


class ReadingMethods(RelationalMethods):
    """Mixed into ``LanceDataset``: the scans and takes of one version."""

    def scanner(
        self,
        columns: list[str] | Mapping[str, str] | None = None,
        filter: str | pc.Expression | None = None,
        limit: int | None = None,
        offset: int | None = None,
        nearest: Any = None,
        batch_size: int | None = None,
        batch_size_bytes: int | None = None,
        batch_readahead: int | None = None,
        fragment_readahead: int | None = None,
        scan_in_order: bool | None = None,
        fragments: Sequence[LanceFragment] | None = None,
        index_segments: Any = None,
        full_text_query: Any = None,
        *,
        with_row_id: bool | None = None,
        with_row_address: bool | None = None,
        order_by: Sequence[ColumnOrdering | str] | None = None,
        strict_batch_size: bool | None = None,
        include_deleted_rows: bool | None = None,
        **options: Any,
    ) -> LanceScanner:
        """Plan a scan of this version (pylance's ``scanner``, same parameters in the same order).

        Parameters
        ----------
        columns
            The columns to read, system columns (``_rowid``, ``_rowaddr``, ``_rowoffset``,
            ``_row_created_at_version``, ``_row_last_updated_at_version``) allowed; or a dict of
            output name -> SQL expression over the columns. All columns if None.
        filter
            A SQL predicate or a pyarrow expression the rows must satisfy.
        limit
            Return at most this many rows (after ``offset``).
        offset
            Skip this many (matching) rows first.
        batch_size
            The maximum number of rows per batch read from a fragment (default 65536).
        fragments
            Scan only these fragments of this version (in this order).
        with_row_id
            Add the ``_rowid`` column.
        with_row_address
            Add the ``_rowaddr`` column.
        order_by
            Sort the result by these columns (names, or ``ColumnOrdering`` for direction and
            null placement) before ``offset`` and ``limit`` apply.
        strict_batch_size
            Return batches of exactly ``batch_size`` rows (the last may be shorter).
        include_deleted_rows
            Also return deleted rows, with a null ``_rowid`` (needs ``with_row_id``).
        batch_readahead
            How many batches of 2.1/2.2 files decode at once on the decode pool (default two
            per thread; ``LANCE_CPU_THREADS`` sets the threads, 1 decodes serially); memory
            stays within that many batches. Results do not depend on it.
        fragment_readahead
            The batches decoding at once come from at most this many fragments (default: any).
        io_buffer_size (in ``**options``)
            The pages of the batches decoding at once hold at most about this many bytes (at
            least one batch decodes; default: no limit beyond ``batch_readahead``).
        scan_in_order
            False: batches come as they finish decoding rather than in table order (the same
            rows; with ``limit``, any ``limit`` matching rows).
        batch_size_bytes, **options
            pylance's other execution options (I/O sizes, index use, ``late_materialization``,
            ``prefilter``, ...). They cannot change a result and have no effect here.
        nearest
            pylance's vector search dict: ``{"column", "q" (a vector, or a 2-D batch: adds an int32
            ``query_index`` first), "k" (default the limit, else 10), "metric" (l2, cosine, dot;
            hamming for uint8), "nprobes", "minimum_nprobes", "maximum_nprobes",
            "refine_factor", "use_index", "ef", "distance_range"}``. An exact (flat) search: each
            query's k nearest live rows by ``(_distance, _rowid)``, with a float32 ``_distance``
            column. ``prefilter=True`` filters before the search, else the filter runs on the k
            rows (fewer may return); offset and limit apply after it. A pylance IVF_FLAT (l2)
            index is probed with an explicit ``nprobes``; otherwise the search is exact even
            where pylance would use an index (``fast_search`` keeps to the fragments an index
            covers).
        index_segments, full_text_query
            Full-text search and index segments are not supported: refused when given.

        Returns
        -------
        LanceScanner
            The planned scan; nothing is read until it is consumed.

        Raises
        ------
        InvalidInputError
            An unknown column or option, an invalid filter or expression, a negative limit
            or offset.
        UnsupportedFeatureError
            A full-text search option.

        Examples
        --------
        >>> import tempfile, pyarrow as pa, lance_format as lance
        >>> uri = tempfile.mkdtemp() + "/people.lance"
        >>> ds = lance.write_dataset(pa.table({"id": [1, 2, 3], "name": ["ann", "bo", "cy"]}), uri)
        >>> ds.scanner(columns=["name"], filter="id > 1").to_table().to_pydict()
        {'name': ['bo', 'cy']}
        """
        given: dict[str, Any] = dict(
            columns=columns, filter=filter, limit=limit, offset=offset, nearest=nearest, batch_size=batch_size,
            batch_size_bytes=batch_size_bytes, batch_readahead=batch_readahead,
            fragment_readahead=fragment_readahead, scan_in_order=scan_in_order, fragments=fragments,
            index_segments=index_segments, full_text_query=full_text_query, with_row_id=with_row_id,
            with_row_address=with_row_address, order_by=order_by, strict_batch_size=strict_batch_size,
            include_deleted_rows=include_deleted_rows, **options)
        for name, value in self._as_dataset().default_scan_options.items():  # dataset(default_scan_options=...)
            if given.get(name) is None:
                given[name] = value
        for flag in ("with_row_id", "with_row_address", "strict_batch_size", "include_deleted_rows"):
            given[flag] = bool(given[flag])
        if given["fragments"] is not None:
            given["fragments"] = list(given["fragments"])
        return LanceScanner(self._as_dataset(), **given)

    def to_table(
        self,
        columns: list[str] | Mapping[str, str] | None = None,
        filter: str | pc.Expression | None = None,
        limit: int | None = None,
        offset: int | None = None,
        nearest: Any = None,
        batch_size: int | None = None,
        batch_size_bytes: int | None = None,
        batch_readahead: int | None = None,
        fragment_readahead: int | None = None,
        scan_in_order: bool | None = None,
        **scan_options: Any,
    ) -> pa.Table:
        """Read this version (or the rows and columns asked for) into one table.

        Takes :meth:`scanner`'s parameters, positional ones in pylance's order.

        Returns
        -------
        pa.Table
            The rows in table order (or ``order_by``'s).

        Raises
        ------
        InvalidInputError
            An unknown column or option, an invalid filter, a negative limit or offset.

        Examples
        --------
        >>> import tempfile, pyarrow as pa, lance_format as lance
        >>> uri = tempfile.mkdtemp() + "/people.lance"
        >>> ds = lance.write_dataset(pa.table({"id": [1, 2, 3], "name": ["ann", "bo", "cy"]}), uri)
        >>> ds.to_table(filter="name LIKE 'b%'").to_pydict()
        {'id': [2], 'name': ['bo']}
        """
        return self.scanner(columns, filter, limit, offset, nearest, batch_size, batch_size_bytes, batch_readahead,
                            fragment_readahead, scan_in_order, **scan_options).to_table()

    def to_batches(
        self,
        columns: list[str] | Mapping[str, str] | None = None,
        filter: str | pc.Expression | None = None,
        limit: int | None = None,
        offset: int | None = None,
        nearest: Any = None,
        batch_size: int | None = None,
        batch_size_bytes: int | None = None,
        batch_readahead: int | None = None,
        fragment_readahead: int | None = None,
        scan_in_order: bool | None = None,
        **scan_options: Any,
    ) -> Iterator[pa.RecordBatch]:
        """Stream this version (or the rows and columns asked for) batch by batch.

        Takes :meth:`scanner`'s parameters, positional ones in pylance's order.

        Returns
        -------
        Iterator of pa.RecordBatch
            The batches in table order; the iterator reads lazily.

        Raises
        ------
        InvalidInputError
            An unknown column or option, an invalid filter, a negative limit or offset.
        """
        return self.scanner(columns, filter, limit, offset, nearest, batch_size, batch_size_bytes, batch_readahead,
                            fragment_readahead, scan_in_order, **scan_options).to_batches()

    def to_pandas(
        self,
        columns: list[str] | Mapping[str, str] | None = None,
        filter: str | pc.Expression | None = None,
        limit: int | None = None,
        offset: int | None = None,
        nearest: Any = None,
        batch_size: int | None = None,
        batch_readahead: int | None = None,
        fragment_readahead: int | None = None,
        scan_in_order: bool | None = None,
        **scan_options: Any,
    ) -> Any:
        """Read this version (or the rows and columns asked for) into a pandas DataFrame.

        Takes :meth:`scanner`'s parameters (positional ones in pylance's ``to_pandas`` order).
        ``blob_mode``, as in pylance: blob columns as ``BlobFile`` objects (``"lazy"``, the
        default), their bytes (``"bytes"``) or their descriptions (``"descriptions"``).
        """

        blob_mode = scan_options.pop("blob_mode", "lazy")
        keep_address = bool(scan_options.get("with_row_address"))
        if blob_mode != "descriptions" and any(is_blob_field(f) for f in self._as_dataset().lance_schema.fields):
            scan_options["with_row_address"] = True
        scanner = self.scanner(columns, filter, limit, offset, nearest, batch_size, None, batch_readahead,
                               fragment_readahead, scan_in_order, **scan_options)
        return blob_frame(self._as_dataset(), scanner, blob_mode, keep_address)

    def head(self, num_rows: int, **scan_options: Any) -> pa.Table:
        """The first ``num_rows`` rows in table order (pylance's ``head``).

        ``scan_options`` are :meth:`scanner`'s (``columns``, ``filter``, ``with_row_id``, ...).

        Raises
        ------
        InvalidInputError
            ``num_rows`` is negative, or a scan option is invalid.
        """
        return self.scanner(limit=num_rows, **scan_options).to_table()

    def count_rows(
        self,
        filter: str | pc.Expression | None = None,
        *,
        fragments: list[LanceFragment] | None = None,
    ) -> int:
        """The number of live rows, or of the rows matching ``filter``.

        Without a filter the count comes from the manifest, without reading data.

        Parameters
        ----------
        filter
            A SQL predicate or a pyarrow expression.
        fragments
            Count only these fragments of this version.

        Returns
        -------
        int
            The row count.

        Raises
        ------
        InvalidInputError
            The filter is not valid for the table.
        """
        return self.scanner(columns=[] if filter is not None else None, filter=filter, fragments=fragments).count_rows()

    def sql(self, sql: str) -> SqlQueryBuilder:
        """A SQL query over this table (pylance's ``sql``), for what one scan can answer: see
        :mod:`lance_format.dataset.sql_query`."""

        return SqlQueryBuilder(SqlStatement(self._as_dataset(), sql))

    def __len__(self) -> int:
        """The number of live rows (pylance's ``len(dataset)``)."""
        return self.count_rows()

    def take(
        self,
        indices: Sequence[int] | np.ndarray | pa.Array,
        columns: list[str] | None = None,
    ) -> pa.Table:
        """Rows at the given logical positions (0 .. count_rows()-1), in the given order.

        Parameters
        ----------
        indices
            Row positions among the live rows; repeats are allowed.
        columns
            The columns to read; all columns if None.

        Returns
        -------
        pa.Table
            One row per index, in the order of ``indices``.

        Raises
        ------
        InvalidInputError
            An index is not an integer or out of range, or a column is unknown.
        """
        ds = self._as_dataset()
        positions = row_positions(indices, table=ds.uri)
        repeated = _repeated_system_columns(columns)
        if repeated is not None:
            distinct = list(dict.fromkeys(repeated))
            return self.take(positions, columns=distinct).select([distinct.index(c) for c in repeated])
        if columns is not None and not isinstance(columns, Mapping) and ROW_OFFSET in columns:
            # a row's offset is its position among the live rows: the index it was asked for
            rest = [c for c in columns if c != ROW_OFFSET]
            table = self.take(positions, columns=rest or ["_rowaddr"])
            offsets = pa.array(positions.astype(np.uint64), pa.uint64())
            table = table.add_column(columns.index(ROW_OFFSET), pa.field(ROW_OFFSET, pa.uint64(), False), offsets)
            return table if rest else table.select([ROW_OFFSET])
        scanner = self.scanner(columns=_without_repeats(columns))
        fragments = ds.get_fragments()
        counts = np.array([f.count_rows() for f in fragments], dtype=np.int64)
        total = int(counts.sum())
        if len(positions) and (positions.min() < 0 or positions.max() >= total):
            bad = int(positions[(positions < 0) | (positions >= total)][0])
            raise InvalidInputError(f"take index {bad} is out of range for {total} rows", table=ds.uri)
        starts = np.concatenate([[0], np.cumsum(counts)])
        owner = np.searchsorted(starts, positions, side="right") - 1
        pieces: list[pa.RecordBatch] = []
        order: list[np.ndarray] = []
        for index in np.unique(owner):
            fragment = fragments[int(index)]
            where = np.flatnonzero(owner == index)
            live = fragment.live_offsets()
            physical = live[positions[where] - starts[index]]
            pieces.append(scanner.take_physical(fragment, physical))
            order.append(where)
        schema = scanner.projected_schema
        if not pieces:
            return pa.Table.from_batches([], schema=schema)  # empty_table() fails on nested extension types
        table = pa.Table.from_batches(pieces, schema=schema)
        inverse = np.empty(len(positions), dtype=np.int64)
        inverse[np.concatenate(order)] = np.arange(len(positions))
        return table.take(pa.array(inverse))

    def _take_rows(self, row_ids: Sequence[int] | np.ndarray | pa.Array,
                   columns: list[str] | Mapping[str, str] | None = None, *, ignore_deletions: bool = False,
                   _addresses: bool = False, **scan_options: Any) -> pa.Table:
        """Rows by row id, in the order given (pylance's ``_take_rows``).

        Without stable row ids a row id is the row address (fragment id << 32 | offset): one that
        points outside the table is refused. With stable row ids, ids no row has are skipped.
        Deleted rows are left out unless ``ignore_deletions``. ``_addresses``: the values are row
        addresses even in a table with stable row ids.

        Raises
        ------
        InvalidRowSelectionError
            A row address outside the table (also an ``OSError``, as in pylance).
        """
        ds = self._as_dataset()
        ids = np.asarray(row_ids.to_numpy(zero_copy_only=False) if isinstance(row_ids, (pa.Array, pa.ChunkedArray))
                         else list(row_ids), dtype=np.uint64)
        scanner = self.scanner(columns=columns, **scan_options)
        fragments = {f.fragment_id: f for f in ds.get_fragments()}
        if ds.has_stable_row_ids and not _addresses:
            owners, offsets = _stable_row_locations(fragments, ids)
        else:
            owners = (ids >> np.uint64(32)).astype(np.int64)
            offsets = ids & np.uint64(0xFFFFFFFF)
            for owner in np.unique(owners):
                fragment = fragments.get(int(owner))
                beyond = offsets[owners == owner] >= (fragment.physical_rows if fragment is not None else 0)
                if beyond.any():
                    raise InvalidRowSelectionError(f"row id {int(ids[owners == owner][beyond][0])} is not a row of "
                                                   "this table", table=ds.uri)
        pieces: list[pa.RecordBatch] = []
        order: list[np.ndarray] = []
        for owner in np.unique(owners[owners >= 0]):
            fragment = fragments[int(owner)]
            where = np.flatnonzero(owners == owner)
            wanted = offsets[where]
            if not ignore_deletions:
                live = np.isin(wanted, fragment.live_offsets())
                where, wanted = where[live], wanted[live]
            if len(where):
                pieces.append(scanner.take_physical(fragment, wanted))
                order.append(where)
        if not pieces:
            return pa.Table.from_batches([], schema=scanner.projected_schema)
        table = pa.Table.from_batches(pieces, schema=scanner.projected_schema)
        # back to the order of row_ids (skipped ids leave no row)
        return table.take(pa.array(np.argsort(np.concatenate(order), kind="stable")))


def _stable_row_locations(fragments: Mapping[int, LanceFragment], ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(fragment id, physical offset) of each stable row id; fragment -1 for ids no row has."""
    known_ids, known_owner, known_offset = [], [], []
    for fragment in fragments.values():
        physical = np.arange(fragment.physical_rows, dtype=np.uint64)
        known_ids.append(np.asarray(fragment.system_column("_rowid", physical).to_numpy(zero_copy_only=False),
                                    dtype=np.uint64))
        known_owner.append(np.full(fragment.physical_rows, fragment.fragment_id, dtype=np.int64))
        known_offset.append(physical)
    if not known_ids:
        return np.full(len(ids), -1, dtype=np.int64), np.zeros(len(ids), dtype=np.uint64)
    all_ids = np.concatenate(known_ids)
    by_id = np.argsort(all_ids, kind="stable")
    sorted_ids = all_ids[by_id]
    at = np.minimum(np.searchsorted(sorted_ids, ids), len(sorted_ids) - 1)
    found = sorted_ids[at] == ids if len(sorted_ids) else np.zeros(len(ids), dtype=bool)
    owners = np.where(found, np.concatenate(known_owner)[by_id][at], -1)
    offsets = np.concatenate(known_offset)[by_id][at]
    return owners, offsets


def _repeated_system_columns(columns: Any) -> list[str] | None:
    """The output columns of a take whose ``columns`` repeat a name (else None): like pylance,
    a data column once, where first named, and system columns as often as named."""
    if not isinstance(columns, (list, tuple)) or len(set(columns)) == len(columns):
        return None
    return [c for i, c in enumerate(columns) if c in SYSTEM_COLUMNS or c == ROW_OFFSET or c not in columns[:i]]


def _without_repeats(columns: Any) -> Any:
    """A column list with repeats dropped (pylance's take keeps the first of each)."""
    return list(dict.fromkeys(columns)) if isinstance(columns, (list, tuple)) else columns

