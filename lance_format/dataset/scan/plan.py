"""``plan_scan``: what a scan will read, filter, order and return, decided once, as a frozen
:class:`ScanPlan` (run by :mod:`lance_format.dataset.scan.executor`).

A plan names:

* the output: column names, the SQL expressions among them, and the output schema;
* the read: the table's data columns and system columns every row needs (:class:`ColumnSet`);
* the filter, its columns, and the late-materialization split (:class:`LateSplit`): the filter's
  columns (with ``_rowaddr``) are read first, the others for the passing rows only;
* ordering, offset and limit;
* the fragments, each whole or one physical row range (:class:`FragmentRange`; Spark's splits);
* how batches are cut and decoded (batch size, readahead, order of delivery).

Steps beyond a plain read:

* ``index`` (:class:`IndexStep`): asked per fragment, before the filter's columns are read, for
  the candidate physical row offsets (None: every row). The executor reads only those rows and
  still applies the filter to them, so an index may answer with a superset (a zone map, a
  bitmap of a coarser predicate) and results never depend on it.
* ``search`` (:class:`SearchStep`): a vector search (``nearest``, :mod:`.search`) or a
  full-text search (``full_text_query``, :mod:`.fts_search`), which ranks rows instead of
  selecting them: it runs its own candidate plan (the vector column, or the rows' addresses;
  with the filter when ``prefilter=True``), keeps the top k (``_distance`` ascending, ``_score``
  descending), takes their rows with this plan's columns (the filter runs on them when
  ``prefilter=False``) and adds its column; offset and limit apply after it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from lance_format.dataset.arguments import column_names
from lance_format.dataset.fragment import ROW_ADDRESS, SYSTEM_COLUMNS, LanceFragment
from lance_format.dataset.index_scan import IndexScanPlan
from lance_format.dataset.scan.fts_search import SCORE, full_text_search
from lance_format.dataset.scan.ivf import AnnSearch, vector_index
from lance_format.dataset.scan.search import DISTANCE, QUERY_INDEX, vector_search
from lance_format.dataset.scan.search_filter import search_filter_for, split_filter
from lance_format.dataset.scan_options import (
    ROW_OFFSET,
    ColumnOrdering,
    check_options,
    default_batch_size,
    orderings,
    readahead_of,
)
from lance_format.dataset.sql.filter import compile_filter, referenced_columns, to_expression, to_value_expression
from lance_format.errors import InvalidInputError
from lance_format.schema import LanceSchema
from lance_format.schema.blob import is_blob_field, read_arrow_schema

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset
    from lance_format.dataset.scan.executor import ScanExecutor

DEFAULT_BATCH_SIZE = 65536  # rows read at a time when the caller gives no batch_size
PYLANCE_BATCH_SIZE = 8192  # pylance's default: output batches are cut to it (without a batch_size)


@dataclass(frozen=True)
class ColumnSet:
    """The columns one read decodes: data columns (a projection of the table schema), then
    system columns (``_rowid``, ``_rowaddr``, ...)."""

    schema: LanceSchema
    system: tuple[str, ...]

    @property
    def names(self) -> list[str]:
        """The data columns' names, then the system columns'."""
        return self.schema.names() + list(self.system)


@dataclass(frozen=True)
class LateSplit:
    """Late materialization: ``first`` (the filter's columns and ``_rowaddr``) is read for every
    row; ``rest`` only for the rows that pass (taken by physical offset, or read for a batch's
    whole range when more than :data:`DENSE` of it passes)."""

    first: ColumnSet
    rest: ColumnSet


DENSE = 0.25  # above this fraction of a batch's rows passing, its other columns are read, not taken


@dataclass(frozen=True)
class FragmentRange:
    """One fragment to scan: all of it, or only physical rows ``[begin, end)`` (a Spark split)."""

    fragment: LanceFragment
    row_range: tuple[int, int] | None = None


class IndexStep(Protocol):
    """A scalar-index step: narrows each fragment to the rows that may match, before the
    filter's columns are read (the filter still runs on them)."""

    def candidates(self, fragment: LanceFragment) -> np.ndarray | None:
        """Sorted, distinct physical row offsets of ``fragment`` that may pass the filter; None
        when the index cannot narrow this fragment (every row is read)."""
        ...

    def describe(self) -> str:
        """One line for ``explain_plan``, e.g. ``ScalarIndexQuery: id = 42``."""
        ...


class SearchStep(Protocol):
    """A vector or full-text search step: ranks the candidate rows and adds a distance or score
    column; offset and limit apply after it."""

    @property
    def prefilter(self) -> bool:
        """Whether the plan's filter runs on the candidates (True) or on the ranked rows."""
        ...

    @property
    def candidates(self) -> ScanPlan | None:
        """The plan of the rows it ranks (set by :func:`plan_scan`)."""
        ...

    def describe(self) -> str:
        ...

    def explain_lines(self) -> list[str]:
        """Its steps for ``explain_plan``, outermost first (above the candidate plan's read)."""
        ...

    def run(self, executor: ScanExecutor) -> Iterator[pa.RecordBatch]:
        """The ranked rows with the plan's read columns and the score column, in rank order,
        the filter applied (before ranking or after it)."""
        ...


@dataclass(frozen=True, eq=False)  # eq=False: pyarrow expressions do not compare to a bool
class ScanPlan:
    """Everything a scan does, decided before a byte is read. Built by :func:`plan_scan`."""

    uri: str
    version: int
    output: tuple[str, ...]  # output column names, in order
    expressions: Mapping[str, tuple[pc.Expression, pa.DataType]]  # output name -> SQL expression, type
    output_schema: pa.Schema  # as stored (extension columns as their storage, see schema.extensions)
    read: ColumnSet  # every column a row needs: output, filter and ordering columns
    filter: pc.Expression | None
    filter_columns: tuple[str, ...]
    late: LateSplit | None  # None: the filter (if any) runs on batches of all of ``read``
    order_by: tuple[ColumnOrdering, ...]
    limit: int | None
    offset: int
    fragments: tuple[FragmentRange, ...]
    whole_table: bool  # the caller chose no fragments
    row_offsets: bool  # _rowoffset is asked for (computed from the row address)
    include_deleted: bool
    binary_blobs: tuple[str, ...]  # blob columns returned as their bytes (blob_handling="all_binary")
    batch_size: int  # rows per read
    output_rows: int  # rows per output batch (at most, unless ``regroup``)
    regroup: bool  # filtered rows are gathered into batches of ``output_rows`` (pylance's shape)
    strict_batch_size: bool
    readahead: int  # batches decoding at once (below 2: on the calling thread)
    fragment_readahead: int  # fragments those batches come from at once (0: any)
    io_buffer_size: int  # bytes of pages in flight (0: no limit)
    in_order: bool
    index: IndexStep | None = None
    search: SearchStep | None = None

    @property
    def physical_rows(self) -> int:
        """Rows stored in the scanned fragments (or ranges), deleted ones included."""
        total = 0
        for part in self.fragments:
            begin, end = part.row_range or (0, part.fragment.physical_rows)
            total += max(0, min(end, part.fragment.physical_rows) - max(begin, 0))
        return total


def _filter_schema(arrow_schema: pa.Schema) -> pa.Schema:
    """The table's columns and the system columns: what filters and expressions may name."""
    for name in SYSTEM_COLUMNS:
        arrow_schema = arrow_schema.append(pa.field(name, pa.uint64()))
    return arrow_schema


def _projection(columns: Any, table_schema: LanceSchema, known: pa.Schema, uri: str,
                ) -> tuple[list[str], dict[str, tuple[pc.Expression, pa.DataType]], list[str]]:
    """(output names, their SQL expressions, the columns they read) of ``columns``."""
    expressions: dict[str, tuple[pc.Expression, pa.DataType]] = {}
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
            expressions[str(name)] = (expr, dtype)
            needed += [r for r in reads if r not in needed]
        return column_names(columns, table=uri), expressions, needed
    requested = column_names(columns, table=uri) if columns is not None else table_schema.names()
    for name in requested:
        if name not in SYSTEM_COLUMNS and name != ROW_OFFSET and name not in table_schema.names():
            raise InvalidInputError(f"unknown column {name!r}; columns are {table_schema.names()}", table=uri)
    return requested, expressions, list(requested)


def _late_split(table_schema: LanceSchema, needed: list[str], used: set[str]) -> LateSplit | None:
    """How to split ``needed`` for a filter reading ``used``; None when every needed column is
    the filter's (nothing is left to read late)."""
    rest = [n for n in needed if n not in used]
    if not rest:
        return None
    first = [n for n in needed if n in used]
    first_system = [n for n in first if n in SYSTEM_COLUMNS]
    if ROW_ADDRESS not in first_system:
        first_system.append(ROW_ADDRESS)
    return LateSplit(
        ColumnSet(table_schema.project([n for n in first if n not in SYSTEM_COLUMNS]), tuple(first_system)),
        ColumnSet(table_schema.project([n for n in rest if n not in SYSTEM_COLUMNS]),
                  tuple(n for n in rest if n in SYSTEM_COLUMNS)),
    )


def _fragment_ranges(dataset: LanceDataset, fragments: Sequence[LanceFragment | FragmentRange] | None,
                     ) -> tuple[FragmentRange, ...]:
    chosen = dataset.get_fragments() if fragments is None else fragments
    return tuple(f if isinstance(f, FragmentRange) else FragmentRange(f) for f in chosen)


def _output_schema(table_schema: LanceSchema, output: list[str],
                   expressions: Mapping[str, tuple[pc.Expression, pa.DataType]], binary_blobs: bool) -> pa.Schema:
    full = _filter_schema(read_arrow_schema(table_schema, blobs_as_binary=binary_blobs))
    # a table may have columns of these names (a stored search result has ``_distance``): its own win
    for extra in (pa.field(ROW_OFFSET, pa.uint64()), pa.field(DISTANCE, pa.float32()),
                  pa.field(QUERY_INDEX, pa.int32(), nullable=False), pa.field(SCORE, pa.float32())):
        if full.get_field_index(extra.name) < 0:
            full = full.append(extra)
    fields = [pa.field(n, expressions[n][1]) if n in expressions else full.field(n) for n in output]
    return pa.schema(fields, metadata=table_schema.to_arrow().metadata)


def plan_scan(
    dataset: LanceDataset,
    *,
    columns: list[str] | Mapping[str, str] | None = None,
    filter: Any = None,  # SQL, a pyarrow expression, a full-text query or {"expr_filter", "search_filter"}
    limit: int | None = None,
    offset: int | None = None,
    with_row_id: bool = False,
    with_row_address: bool = False,
    batch_size: int | None = None,
    fragments: Sequence[LanceFragment | FragmentRange] | None = None,
    order_by: Iterable[ColumnOrdering | str] | None = None,
    strict_batch_size: bool = False,
    include_deleted_rows: bool = False,
    index: IndexStep | None = None,
    options: Mapping[str, Any] | None = None,
) -> ScanPlan:
    """Plan a scan of ``dataset`` (``LanceDataset.scanner``'s parameters; its other options,
    such as ``batch_readahead`` or ``blob_handling``, in ``options``).

    ``fragments`` may hold :class:`FragmentRange` items to scan physical row ranges only.
    ``index``: a step narrowing each fragment to candidate rows (see :class:`IndexStep`); kept
    only for a filtered scan of live rows (the filter still decides which rows pass). When None,
    the plan chooses the table's scalar indices for a SQL-text filter they can answer
    (:mod:`lance_format.dataset.index_scan`), unless ``options["use_scalar_index"]`` is False.

    Raises
    ------
    InvalidInputError
        An unknown column or option, an invalid filter or expression, a negative limit or offset.
    UnsupportedFeatureError
        An option asking for a feature this engine lacks (row-address lists, CombinedFieldsQuery).

    ``options["nearest"]`` (pylance's dict) plans a vector search (:mod:`.search`),
    ``options["full_text_query"]`` a full-text search (:mod:`.fts_search`), with
    ``options["prefilter"]`` deciding whether the filter runs before it or on its results.
    With ``nearest``, ``filter`` may also be a full-text query object or pylance's
    ``{"expr_filter": ..., "search_filter": <query>}`` (:mod:`.search_filter`).
    """
    uri = dataset.uri
    options = dict(options or {})
    nearest = options.pop("nearest", None)
    full_text = options.pop("full_text_query", None)
    if nearest is not None and full_text is not None:
        raise InvalidInputError("nearest and full_text_query cannot be combined in one scan", table=uri)
    filter, text_filter = split_filter(filter, uri)
    search_filter = (search_filter_for(text_filter, dataset, nearest=nearest is not None,
                                       full_text=full_text is not None) if text_filter is not None else None)
    readahead, fragment_readahead, io_buffer_size = readahead_of(options, table=uri)
    check_options(options, table=uri)
    table_schema = dataset.lance_schema
    known = _filter_schema(table_schema.to_arrow())
    search: Any = None  # a VectorSearch or a FullTextSearch (a SearchStep once planned)
    if nearest is not None:
        search = vector_search(nearest, table_schema, limit=limit, prefilter=options.get("prefilter") is True,
                               table=uri)
        columns, score_at = _without_scores(columns, uri)
    text_search = None
    if full_text is not None:
        if include_deleted_rows:
            raise InvalidInputError("Cannot include deleted rows in an FTS search", table=uri)
        text_search = full_text_search(full_text, dataset, limit=limit, offset=offset,
                                       prefilter=options.get("prefilter") is True)
        columns, text_score_at = _without_scores(columns, uri, SCORE)
    requested, expressions, needed = _projection(columns, table_schema, known, uri)
    if text_search is not None and (text_score_at is not None or columns is None
                                    or options.get("disable_scoring_autoprojection") is not True):
        # pylance's place: where the columns name ``_score``, else after them
        requested.insert(len(requested) if text_score_at is None else text_score_at, SCORE)
    if search is not None:
        # pylance's places: ``_distance`` where the columns name it, else after them (before the
        # system columns); a batch of queries puts ``query_index`` first
        if score_at is not None or columns is None or options.get("disable_scoring_autoprojection") is not True:
            # (disable_scoring_autoprojection: a projection without ``_distance`` leaves it out)
            requested.insert(len(requested) if score_at is None else score_at, DISTANCE)
        if search.batch:
            requested.insert(0, QUERY_INDEX)
    if with_row_id and "_rowid" not in requested:
        requested.append("_rowid")
    if with_row_address and "_rowaddr" not in requested:
        requested.append("_rowaddr")
    if include_deleted_rows and not with_row_id:
        raise InvalidInputError("include_deleted_rows is set but with_row_id is false", table=uri)
    # pylance's messages (its users match them); the limit is checked first
    if limit is not None and limit < 0:
        raise InvalidInputError(f"Limit must be non-negative, got {limit}", table=uri)
    if offset is not None and offset < 0:
        raise InvalidInputError(f"Offset must be non-negative, got {offset}", table=uri)
    keys = orderings(order_by, table=uri)
    if isinstance(filter, str):
        condition, found = compile_filter(filter, known)  # translated once per text and schema
        used = list(found)
    else:
        condition = to_expression(filter, known) if filter is not None else None
        used = referenced_columns(condition, known) if condition is not None else []
    needed += [n for n in used if n not in needed]
    for key in keys:
        if key.column_name not in known.names and key.column_name != ROW_OFFSET:
            raise InvalidInputError(f"cannot order by unknown column {key.column_name!r}", table=uri)
        if key.column_name not in needed:
            needed.append(key.column_name)
    needed += [n for n in requested if n not in needed and n in SYSTEM_COLUMNS]
    row_offsets = ROW_OFFSET in needed
    system = [n for n in needed if n in SYSTEM_COLUMNS]
    if row_offsets and ROW_ADDRESS not in system:
        system.append(ROW_ADDRESS)  # _rowoffset is computed from the address
    # blob_handling="all_binary": blob columns read as their bytes, found from their rows' addresses
    binary_blobs = [n for n in requested if n not in expressions and n in table_schema.names()
                    and is_blob_field(table_schema.field(n))] if options.get("blob_handling") == "all_binary" else []
    if binary_blobs and ROW_ADDRESS not in system:
        system.append(ROW_ADDRESS)
    # late materialization (not with row offsets or deleted rows, which need every row's address
    # on the first read)
    late = None
    if search is not None:
        # the candidate plan reads the vectors (with the filter when it comes first); this plan's
        # columns are taken for the k best rows only
        searched = fragments
        fast = options.get("fast_search") is True or (isinstance(nearest, Mapping) and nearest.get("fast_search") is True)
        if fast:
            searched = _indexed_fragments(dataset, search.column, fragments)
        chosen = list(dataset.get_fragments() if searched is None else searched)
        ranged = any(isinstance(f, FragmentRange) and f.row_range is not None for f in chosen)
        # a full-text prefilter makes pylance search its rows flat (exactly), not through an index
        flat = ranged or (search_filter is not None and search.prefilter)
        vector = (vector_index(dataset, search.column, search.metric if search.metric_given else None)
                 if search.use_index and not flat else None)
        if vector is not None:  # the index answers for its fragments, a flat search for the others
            ids = [(f.fragment if isinstance(f, FragmentRange) else f).fragment_id for f in chosen]
            indexed = tuple(fid for fid in ids if fid in vector.fragments)
            searched = [f for f, fid in zip(chosen, ids) if fid not in vector.fragments]
            mask = None
            if search.prefilter and condition is not None and indexed:
                mask = plan_scan(dataset, columns=[], filter=condition, with_row_address=True,
                                 fragments=[f for f, fid in zip(chosen, ids) if fid in vector.fragments],
                                 options={k: v for k, v in options.items() if k != "prefilter"})
            search = replace(search, metric=vector.metric, ann=AnnSearch(vector, search.params, vector.metric),
                             ann_fragments=indexed, mask=mask)
        candidates = plan_scan(dataset, columns=[search.column], filter=condition if search.prefilter else None,
                               with_row_id=True, with_row_address=True, batch_size=batch_size, fragments=searched,
                               options={k: v for k, v in options.items() if k != "prefilter"})
        search = replace(search, candidates=candidates, search_filter=search_filter)
    elif text_search is not None:
        # the candidate plan: the live rows searched (filtered first with prefilter); this plan's
        # columns are taken for the best rows only
        candidates = plan_scan(dataset, columns=[], filter=condition if text_search.prefilter else None,
                               with_row_id=True, with_row_address=True, batch_size=batch_size, fragments=fragments,
                               options={k: v for k, v in options.items() if k != "prefilter"})
        search = replace(text_search, candidates=candidates)
    elif condition is not None and not row_offsets and not include_deleted_rows:
        late = _late_split(table_schema, needed, set(used))
    # pylance regroups a filtered scan's rows into batches of batch_size when late
    # materialization is asked for (True or a column list) with a batch_size, not when left to
    # its heuristic (without a batch_size its batches are the filtered reads)
    asked_late = options.get("late_materialization")
    parts = _fragment_ranges(dataset, fragments)
    index_may_answer = condition is not None and not include_deleted_rows and search is None
    if index is None and index_may_answer and isinstance(filter, str) and options.get("use_scalar_index") is not False:
        # the table's own scalar indices, when one can answer (part of) the filter
        index = IndexScanPlan.build(dataset, filter, dataset.schema, [p.fragment for p in parts])
    return ScanPlan(
        uri=uri, version=dataset.version, output=tuple(requested), expressions=MappingProxyType(expressions),
        output_schema=_output_schema(table_schema, requested, expressions, bool(binary_blobs)),
        read=ColumnSet(table_schema.project([n for n in needed if n not in SYSTEM_COLUMNS and n != ROW_OFFSET]),
                       tuple(system)),
        filter=condition, filter_columns=tuple(used), late=late, order_by=tuple(keys), limit=limit,
        offset=offset or 0, fragments=parts, whole_table=fragments is None,
        row_offsets=row_offsets, include_deleted=bool(include_deleted_rows), binary_blobs=tuple(binary_blobs),
        batch_size=batch_size or default_batch_size(DEFAULT_BATCH_SIZE),
        # output batches hold at most this many rows: reads stay large (fewer, cheaper decodes)
        # while a plain scan yields pylance's batch shapes (8192-row slices of each fragment)
        output_rows=batch_size or default_batch_size(PYLANCE_BATCH_SIZE),
        regroup=bool(batch_size) and condition is not None and (
            asked_late is True or isinstance(asked_late, (list, tuple))),
        strict_batch_size=bool(strict_batch_size), readahead=readahead, fragment_readahead=fragment_readahead,
        io_buffer_size=io_buffer_size, in_order=options.get("scan_in_order") is not False,
        # an index narrows the rows a filter reads (the executor asks it per fragment); deleted
        # rows (include_deleted_rows) are read in full
        index=index if index_may_answer else None,
        search=search,
    )


def _indexed_fragments(dataset: LanceDataset, column: str, fragments: Sequence[LanceFragment | FragmentRange] | None,
                       ) -> list[LanceFragment | FragmentRange]:
    """The fragments (of ``fragments``, default all) a vector index of ``column`` covers:
    ``fast_search`` searches only those, as pylance."""
    section = dataset.manifest_file.index_section
    field_id = dataset.lance_schema.field(column).id
    covered: set[int] = set()
    for index in section.indices if section is not None else []:
        if field_id in index.fields and index.index_details.type_url.endswith("VectorIndexDetails"):
            covered.update(BitMap.deserialize(bytes(index.fragment_bitmap)) if index.fragment_bitmap
                           else (f.fragment_id for f in dataset.get_fragments()))
    chosen = list(dataset.get_fragments() if fragments is None else fragments)
    return [f for f in chosen if (f.fragment if isinstance(f, FragmentRange) else f).fragment_id in covered]


def _without_scores(columns: Any, uri: str, score: str = DISTANCE) -> tuple[Any, int | None]:
    """(``columns`` without the search's own columns, the position ``score`` had in them)."""
    if columns is None or isinstance(columns, Mapping):
        return columns, None
    listed = column_names(columns, table=uri)
    at = listed.index(score) if score in listed else None
    return [n for n in listed if n not in (score, QUERY_INDEX)], at


__all__ = ["DEFAULT_BATCH_SIZE", "PYLANCE_BATCH_SIZE", "DENSE", "ColumnSet", "LateSplit", "FragmentRange",
           "IndexStep", "SearchStep", "ScanPlan", "plan_scan"]
