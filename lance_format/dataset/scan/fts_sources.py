"""One column's full-text documents, as pylance scores them: the rows its INVERTED index covers
(every segment of it, scored with the statistics of all of them) and the rows it does not (the
fragments added since, or a whole column without an index), tokenized here.

A term's hits are ``(row addresses, BM25 scores)`` (and, for phrases, each hit's positions).
Indexed rows are scored with the index's statistics; unindexed rows with them grown by the
unindexed rows that hold tokens (pylance's flat search). A column without an index is analyzed
as pylance's flat search does: words split on non-alphanumerics, nothing else
(:data:`RAW_WORDS`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.dataset.index_describe import catalog_of, field_paths
from lance_format.errors import InvalidInputError
from lance_format.index.catalog import SEGMENT_CACHE, row_id_lookup
from lance_format.index.metadata import user_segments
from lance_format.index.scalar.fts_tokenizer import RAW_WORDS, TokenizerParams, tokenize_with_positions
from lance_format.index.scalar.inverted import InvertedIndex, InvertedIndexType, doc_weights, idf

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset

EMPTY_U64 = np.zeros(0, np.uint64)
EMPTY_F32 = np.zeros(0, np.float32)
EMPTY_U32 = np.zeros(0, np.uint32)


@dataclass
class TermHits:
    """A term's rows: addresses, scores, frequencies (and, when asked for, the positions of
    each row's occurrences, ``freqs[i]`` of them per row, concatenated)."""

    addresses: np.ndarray
    scores: np.ndarray
    freqs: np.ndarray
    positions: np.ndarray | None = None


@dataclass
class _Unindexed:
    """The unindexed fragments' rows, tokenized: flat arrays of (row, token, position)."""

    addresses: np.ndarray
    lengths: np.ndarray  # tokens per row
    row_of: np.ndarray  # per token occurrence: the row's index
    tokens: np.ndarray  # per token occurrence: the token (object array)
    positions: np.ndarray

    @property
    def num_documents(self) -> int:
        return int(np.count_nonzero(self.lengths))  # rows with tokens: the ones pylance counts

    @property
    def total_tokens(self) -> int:
        return int(self.lengths.sum())

    def occurrences(self, token: str) -> np.ndarray:
        return np.flatnonzero(self.tokens == token)

    def token_docs(self, token: str) -> int:
        rows = self.row_of[self.occurrences(token)]  # ascending: occurrences come row by row
        return int(np.count_nonzero(np.diff(rows))) + 1 if len(rows) else 0


def _unindexed(ds: LanceDataset, column: str, fragment_ids: list[int], params: TokenizerParams,
               filter: Any = None) -> _Unindexed:
    if not fragment_ids:
        return _Unindexed(EMPTY_U64, EMPTY_U32, np.zeros(0, np.int64), np.zeros(0, object), EMPTY_U32)
    wanted = set(fragment_ids)
    fragments = [f for f in ds.get_fragments() if f.fragment_id in wanted]
    table = ds.scanner(columns=[column], with_row_address=True, fragments=fragments, filter=filter).to_table()
    lists, positions = tokenize_with_positions(_nested(table, column), params)
    lengths = np.diff(lists.offsets.to_numpy()).astype(np.uint32)
    return _Unindexed(table.column("_rowaddr").to_numpy().astype(np.uint64), lengths,
                      np.repeat(np.arange(len(lists)), lengths),
                      lists.flatten().to_numpy(zero_copy_only=False), positions)


@dataclass
class ColumnSource:
    """Everything a query needs to score one column (see the module docstring)."""

    column: str
    params: TokenizerParams  # the analyzer of the column's documents (and queries)
    indices: list[InvertedIndex]  # one per segment; empty without an index
    index_name: str | None
    unindexed: _Unindexed
    ds: LanceDataset
    covered: set[int]
    _stable_lookup: object = field(default=None, repr=False)

    @property
    def indexed(self) -> bool:
        return bool(self.indices)

    @property
    def has_positions(self) -> bool:
        return all(p.positions_codec is not None for ix in self.indices for p in ix.partitions)

    def vocabulary(self) -> list[str]:
        """The tokens fuzzy matches expand to: the index's, or the unindexed rows' without one."""
        if self.indices:
            return sorted({t for ix in self.indices for p in ix.partitions for t in p.tokens})
        return sorted(set(self.unindexed.tokens.tolist()))

    # -- statistics: every segment's, grown by the unindexed rows for those rows ---------------
    def _index_stats(self, token: str) -> tuple[int, int, int]:
        num_docs = sum(ix.num_docs for ix in self.indices)
        total = sum(ix.total_tokens for ix in self.indices)
        return num_docs, total, sum(ix.token_docs(token) for ix in self.indices)

    def term(self, token: str, with_positions: bool = False, indexed: bool = True, unindexed: bool = True,
             ) -> TermHits:
        """The term's hits over the whole column (deleted rows included: dropped later), or
        over its indexed or unindexed rows only."""
        num_docs, total, docs = self._index_stats(token)
        parts: list[TermHits] = []
        if docs and indexed:
            weight = idf(docs, num_docs)
            avgdl = np.float32(np.float32(total) / np.float32(num_docs))
            for index in self.indices:
                for part, ids, freqs in index.postings(token):
                    rows = self._addresses(part.row_ids[ids])
                    scores = weight * doc_weights(freqs, part.num_tokens[ids], avgdl)
                    positions = index.positions(part, token, freqs) if with_positions else None
                    parts.append(TermHits(rows, scores, freqs, positions))
        flat = self.unindexed
        at = flat.occurrences(token) if unindexed else np.zeros(0, np.int64)
        if len(at):
            flat_docs = num_docs + flat.num_documents
            avgdl = np.float32(np.float32(total + flat.total_tokens) / np.float32(flat_docs))
            weight = idf(docs + flat.token_docs(token), flat_docs)
            # occurrences come row by row, positions ascending within a row
            occurrence_rows = flat.row_of[at]
            starts = np.flatnonzero(np.concatenate([[True], occurrence_rows[1:] != occurrence_rows[:-1]]))
            rows = occurrence_rows[starts]
            freqs = np.diff(np.concatenate([starts, [len(occurrence_rows)]]))
            scores = weight * doc_weights(freqs.astype(np.uint32), flat.lengths[rows], avgdl)
            parts.append(TermHits(flat.addresses[rows], scores, freqs.astype(np.uint32),
                                  flat.positions[at] if with_positions else None))
        if not parts:
            return TermHits(EMPTY_U64, EMPTY_F32, EMPTY_U32, EMPTY_U32 if with_positions else None)
        return TermHits(np.concatenate([p.addresses for p in parts]), np.concatenate([p.scores for p in parts]),
                        np.concatenate([p.freqs for p in parts]),
                        np.concatenate([p.positions for p in parts]) if with_positions else None)  # type: ignore[misc]

    def _addresses(self, row_ids: np.ndarray) -> np.ndarray:
        """The index's row ids as addresses (stable row ids are looked up in the covered
        fragments: an updated row's old copy there is deleted; its new copy is unindexed)."""
        ds = self.ds
        if not ds.has_stable_row_ids or not len(row_ids):
            return row_ids
        if self._stable_lookup is None:
            indexed = [f.proto for f in ds.get_fragments() if f.fragment_id in self.covered]
            stamp = ds.manifest.timestamp
            self._stable_lookup = row_id_lookup(ds.object_store, f"{ds.manifest_path}@{stamp.seconds}.{stamp.nanos}",
                                                indexed)
        return self._stable_lookup.address_of(row_ids)  # type: ignore[attr-defined]


def _field_names(ds: LanceDataset, field_id: int) -> str | None:
    return field_paths(ds).get(field_id)  # a nested field by its dotted path ("data.text")


def _nested(root: Any, path: str) -> Any:
    """The field (of a schema) or column (of a table) at ``path``: a top-level name, or a dotted
    path through struct fields; None when there is none."""
    names = root.schema.names if isinstance(root, pa.Table) else root.names
    if path in names:
        return root.column(path) if isinstance(root, pa.Table) else root.field(path)
    head, _, rest = path.partition(".")
    if not rest or head not in names:
        return None
    if isinstance(root, pa.Table):
        column = root.column(head).combine_chunks()
        for name in rest.split("."):
            if not pa.types.is_struct(column.type) or column.type.get_field_index(name) < 0:
                return None
            column = column.field(name) if column.null_count == 0 else pc.struct_field(column, name)
        return column
    field = root.field(head)
    for name in rest.split("."):
        if not pa.types.is_struct(field.type) or field.type.get_field_index(name) < 0:
            return None
        field = field.type.field(name)
    return field


def inverted_columns(ds: LanceDataset) -> dict[str, object]:
    """The columns with an INVERTED index, in the manifest's order: their named index."""
    section = ds.manifest_file.index_section
    catalog = catalog_of(ds)
    found: dict[str, object] = {}
    # the manifest's order: pylance searches a column's first index when it has several
    order = list(dict.fromkeys(segment.name for segment in user_segments(section)))
    for index in sorted(catalog.indices.values(), key=lambda i: order.index(i.name)):
        if index.type_url != InvertedIndexType.type_url or len(index.field_ids) != 1:
            continue
        name = _field_names(ds, index.field_ids[0])
        if name is not None and name not in found:
            found[name] = index
    return found


def column_source(ds: LanceDataset, column: str, filter: Any = None) -> ColumnSource:
    """The source of ``column``: its index (if any) and its unindexed rows (those passing
    ``filter``, a prefilter: pylance's flat search counts only them in its statistics).

    Raises
    ------
    InvalidInputError
        ``column`` is not in the table, or is not a string column.
    """
    found = _nested(ds.schema, column)
    if found is None:
        raise InvalidInputError(f"FTS field path '{column}' does not exist in the dataset schema", table=ds.uri,
                                column=column)
    arrow_type = found.type
    named = inverted_columns(ds).get(column)
    # a list<string> column is searchable through its INVERTED index (a row's elements are one
    # document); without one pylance has no flat search of it either
    text_list = ((pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type))
                 and (pa.types.is_string(arrow_type.value_type) or pa.types.is_large_string(arrow_type.value_type)))
    if not (pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)
            or pa.types.is_string_view(arrow_type) or (text_list and named is not None)):
        raise InvalidInputError(f"FTS field '{column}' must resolve to Utf8, LargeUtf8, Utf8View, or JSON, got "
                                f"{arrow_type}", table=ds.uri, column=column)
    catalog = catalog_of(ds)
    indices: list[InvertedIndex] = []
    covered: set[int] = set()
    if named is not None:
        for segment in named.segments:  # type: ignore[attr-defined]
            store = catalog.store(segment)
            # loaded once per process (index files never change), like the scalar indices' segments
            loaded = SEGMENT_CACHE.get((store.store.uri, segment.uuid), partial(InvertedIndexType.load, store, b""))
            assert isinstance(loaded, InvertedIndex)
            indices.append(loaded)
        covered = {int(f) for f in named.fragment_ids}  # type: ignore[attr-defined]
    params = indices[0].params if indices else RAW_WORDS
    rest = [f.fragment_id for f in ds.get_fragments() if f.fragment_id not in covered]
    return ColumnSource(column, params, indices, getattr(named, "name", None),
                        _unindexed(ds, column, rest, params, filter), ds, covered)


__all__ = ["ColumnSource", "TermHits", "column_source", "inverted_columns"]
