"""Full-text search (``full_text_query``): BM25 over a column's INVERTED index and its unindexed
fragments, as pylance 14.0.2 answers it.

Indexed fragments are scored from the index's posting lists with the index's statistics (every
partition's documents and tokens); fragments the index does not cover are tokenized here with
the index's analyzer and scored with the same statistics; deleted rows are dropped before the
top ``limit`` rows are taken (highest ``_score`` first). The rows' columns are then read by
address and ``_score`` (float32) appended.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lance_format.errors import InvalidInputError, UnsupportedFeatureError
from lance_format.index.catalog import SEGMENT_CACHE, IndexCatalog, NamedIndex, row_id_lookup
from lance_format.index.scalar.fts_tokenizer import query_tokens, tokenize
from lance_format.index.scalar.inverted import InvertedIndex, InvertedIndexType, doc_weights, idf

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset

SCORE = "_score"
_EMPTY_U64 = np.zeros(0, np.uint64)


@dataclass(frozen=True)
class FullTextQuery:
    """A parsed ``full_text_query``: the query text and the columns it searches."""

    text: str
    columns: tuple[str, ...] | None

    @staticmethod
    def of(value: Any, table: str) -> FullTextQuery:
        if isinstance(value, str):
            return FullTextQuery(value, None)
        if isinstance(value, Mapping) and isinstance(value.get("query"), str):
            columns = value.get("columns")
            return FullTextQuery(value["query"], tuple(columns) if columns else None)
        raise UnsupportedFeatureError(f"full_text_query {value!r}: only a query string (or "
                                      "{'query': str, 'columns': [...]}) is supported yet", table=table)


def _inverted_index(ds: LanceDataset, column: str | None) -> tuple[str, NamedIndex, IndexCatalog]:
    section = ds.manifest_file.index_section
    catalog = IndexCatalog(section, ds.base_stores.store, ds.data_storage_version)
    found: list[tuple[str, NamedIndex]] = []
    for index in catalog.indices.values():
        if index.type_url != InvertedIndexType.type_url or len(index.field_ids) != 1:
            continue
        name = ds.lance_schema.field_by_id(index.field_ids[0]).name if hasattr(
            ds.lance_schema, "field_by_id") else None
        if name is None:
            name = next(f.name for f in ds.lance_schema.fields if f.id == index.field_ids[0])
        if column is None or name == column:
            found.append((name, index))
    if not found and column is not None and column in ds.schema.names:
        # pylance searches an unindexed column flat, with an analyzer unlike an index's default
        # (no stemming, stop words or folding, other splitting): not reproduced yet
        raise UnsupportedFeatureError(f"full-text search of column {column!r} without an INVERTED index is not "
                                      "supported yet", table=ds.uri)
    if not found:
        what = f"column {column!r}" if column else "any column"
        raise InvalidInputError(f"full-text search needs an INVERTED index on {what}; indices are "
                                f"{catalog.names()}", table=ds.uri)
    if len(found) > 1:
        raise UnsupportedFeatureError("full-text search over several columns is not supported yet; name one "
                                      f"of {[n for n, _ in found]} in full_text_query's columns", table=ds.uri)
    return found[0][0], found[0][1], catalog


def _live_addresses(ds: LanceDataset, fragment_ids: list[int]) -> np.ndarray:
    if not fragment_ids:
        return _EMPTY_U64
    fragments = [f for f in ds.get_fragments() if f.fragment_id in set(fragment_ids)]
    table = ds.scanner(columns=[], with_row_address=True, fragments=fragments).to_table()
    return np.sort(table.column("_rowaddr").to_numpy().astype(np.uint64))


def search(ds: LanceDataset, query: FullTextQuery, limit: int | None, allowed: np.ndarray | None = None,
           ) -> tuple[np.ndarray, np.ndarray]:
    """(row addresses, float32 scores) of the best ``limit`` live rows (among the sorted
    addresses ``allowed``, when given), best first."""
    columns = query.columns
    if columns is not None and len(columns) != 1:
        raise UnsupportedFeatureError("full-text search over several columns is not supported yet", table=ds.uri)
    column, named, catalog = _inverted_index(ds, columns[0] if columns else None)
    if len(named.segments) != 1:
        raise UnsupportedFeatureError(f"index {named.name} has {len(named.segments)} segments; "
                                      "full-text search reads one-segment indices only", table=ds.uri)
    segment = named.segments[0]
    store = catalog.store(segment)
    # loaded once per process (index files never change), like the scalar indices' segments
    index = SEGMENT_CACHE.get((store.store.uri, segment.uuid), lambda: InvertedIndexType.load(store, b""))
    assert isinstance(index, InvertedIndex)
    # every occurrence of a query token adds its score, as in pylance ("fox fox" weighs fox twice)
    tokens = query_tokens(query.text, index.params)
    covered = set(int(f) for f in named.fragment_ids)
    all_ids = [f.fragment_id for f in ds.get_fragments()]
    flat = _FlatInput.read(ds, column, [i for i in all_ids if i not in covered], tokens, index)
    # pylance scores indexed rows with the index's statistics, and unindexed rows with them grown
    # by the unindexed rows that have tokens
    num_docs = index.num_docs
    token_docs = {t: index.token_docs(t) for t in tokens}
    avgdl = np.float32(np.float32(index.total_tokens) / np.float32(num_docs)) if num_docs else np.float32(1.0)
    addresses: list[np.ndarray] = []
    scores: list[np.ndarray] = []
    postings: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    for token in tokens:
        if not token_docs[token]:
            continue
        if token not in postings:
            weight = idf(token_docs[token], num_docs)
            postings[token] = [(part.row_ids[docs], weight * doc_weights(freqs, part.num_tokens[docs], avgdl))
                               for part, docs, freqs in index.postings(token)]
        for rows, part_scores in postings[token]:
            addresses.append(rows)
            scores.append(part_scores)
    row_ids = np.concatenate(addresses) if addresses else _EMPTY_U64
    if ds.has_stable_row_ids and len(row_ids):
        # the index's entries are stable row ids: each is found in the fragments the index covers
        # (an updated row's old copy there is deleted, and dropped below; its new copy is flat)
        indexed = [f.proto for f in ds.get_fragments() if f.fragment_id in covered]
        stamp = ds.manifest.timestamp
        lookup = row_id_lookup(ds.object_store, f"{ds.manifest_path}@{stamp.seconds}.{stamp.nanos}", indexed)
        row_ids = lookup.address_of(row_ids)
    score = np.concatenate(scores) if scores else np.zeros(0, np.float32)
    flat_docs = num_docs + flat.num_documents
    flat_avgdl = np.float32(np.float32(index.total_tokens + flat.total_tokens) / np.float32(flat_docs)) \
        if flat_docs else np.float32(1.0)
    flat_rows, flat_scores = flat.score(tokens, {t: token_docs[t] + flat.token_docs(t) for t in tokens},
                                        flat_docs, flat_avgdl)
    row_ids = np.concatenate([row_ids, flat_rows])
    score = np.concatenate([score, flat_scores])
    if len(row_ids):
        # sum per row (a row matched by several tokens), in the order tokens were scored
        unique, inverse = np.unique(row_ids, return_inverse=True)
        summed = np.zeros(len(unique), np.float32)
        np.add.at(summed, inverse, score)
        live = _live_addresses(ds, np.unique(unique >> np.uint64(32)).astype(int).tolist())
        keep = np.isin(unique, live if allowed is None else np.intersect1d(live, allowed))
        row_ids, score = unique[keep], summed[keep]
    order = np.lexsort((row_ids, -score))
    if limit is not None:
        order = order[:limit]
    return row_ids[order], score[order]


@dataclass
class _FlatInput:
    """The unindexed fragments' live rows, tokenized with the index's analyzer: per query
    token, each row's frequency."""

    addresses: np.ndarray
    lengths: np.ndarray  # tokens per row
    freqs: dict[str, np.ndarray]

    @property
    def num_rows(self) -> int:
        return len(self.addresses)

    @property
    def num_documents(self) -> int:
        """Rows with at least one token (the ones pylance counts)."""
        return int(np.count_nonzero(self.lengths))

    @property
    def total_tokens(self) -> int:
        return int(self.lengths.sum())

    def token_docs(self, token: str) -> int:
        return int(np.count_nonzero(self.freqs[token])) if token in self.freqs else 0

    @staticmethod
    def read(ds: LanceDataset, column: str, fragment_ids: list[int], tokens: list[str],
             index: InvertedIndex) -> _FlatInput:
        if not fragment_ids:
            return _FlatInput(_EMPTY_U64, np.zeros(0, np.uint32), {})
        wanted = set(fragment_ids)
        fragments = [f for f in ds.get_fragments() if f.fragment_id in wanted]
        table = ds.scanner(columns=[column], with_row_address=True, fragments=fragments).to_table()
        lists = tokenize(table.column(column), index.params)
        offsets = lists.offsets.to_numpy()
        lengths = np.diff(offsets).astype(np.uint32)
        flat = lists.flatten().to_numpy(zero_copy_only=False)
        doc = np.repeat(np.arange(len(lists)), lengths)
        freqs = {t: np.bincount(doc[flat == t], minlength=len(lists)).astype(np.uint32) for t in tokens}
        return _FlatInput(table.column("_rowaddr").to_numpy().astype(np.uint64), lengths, freqs)

    def score(self, tokens: list[str], token_docs: Mapping[str, int], num_docs: int,
              avgdl: np.float32) -> tuple[np.ndarray, np.ndarray]:
        """(addresses, per-token scores) of the rows holding a query token."""
        rows: list[np.ndarray] = []
        scores: list[np.ndarray] = []
        for token in tokens:
            freqs = self.freqs.get(token)
            if freqs is None or not token_docs[token]:
                continue
            hit = freqs > 0
            rows.append(self.addresses[hit])
            scores.append(idf(token_docs[token], num_docs) * doc_weights(freqs[hit], self.lengths[hit], avgdl))
        if not rows:
            return _EMPTY_U64, np.zeros(0, np.float32)
        return np.concatenate(rows), np.concatenate(scores)


def _passing(ds: LanceDataset, filter: Any) -> np.ndarray:
    """The sorted addresses of the live rows passing ``filter``."""
    table = ds.scanner(columns=[], filter=filter, with_row_address=True).to_table()
    return np.sort(table.column("_rowaddr").to_numpy().astype(np.uint64))


def run(ds: LanceDataset, query: Any, columns: Any, limit: int | None, *, offset: int = 0,
        filter: Any = None, prefilter: bool = False, with_row_id: bool = False,
        with_row_address: bool = False) -> pa.Table:
    """The rows ``full_text_query`` returns: ``columns`` (all by default), ``_score``, then the
    asked-for system columns. A filter restricts the rows searched (``prefilter``) or, as
    pylance's default, the best ``limit`` rows after the search."""
    found = FullTextQuery.of(query, ds.uri)
    if isinstance(columns, Mapping):
        raise UnsupportedFeatureError("full_text_query with column expressions is not supported yet", table=ds.uri)
    passing = _passing(ds, filter) if filter is not None else None
    wanted = None if limit is None else limit + offset
    addresses, scores = search(ds, found, wanted, passing if prefilter else None)
    if passing is not None and not prefilter:
        keep = np.isin(addresses, passing)
        addresses, scores = addresses[keep], scores[keep]
    addresses, scores = addresses[offset:], scores[offset:]
    names = [n for n in (list(columns) if columns is not None else ds.schema.names) if n not in ("_rowid", "_rowaddr")]
    system = [n for n, asked in (("_rowid", with_row_id or "_rowid" in (columns or [])),
                                 ("_rowaddr", with_row_address or "_rowaddr" in (columns or []))) if asked]
    read = names + [n for n in system if n != "_rowaddr"]
    parts = []
    for fid in np.unique(addresses >> np.uint64(32)).astype(int).tolist():
        fragment = ds.get_fragment(fid)
        if fragment is None:  # the rows were read from this version: its fragments exist
            raise InvalidInputError(f"fragment {fid} vanished during a full-text search", table=ds.uri)
        mine = addresses[(addresses >> np.uint64(32)) == np.uint64(fid)]
        offsets = np.sort((mine & np.uint64(0xFFFFFFFF)).astype(np.int64))
        taken = ds.scanner(columns=read, with_row_address=True, fragments=[fragment]).take_physical(
            fragment, offsets)
        parts.append(pa.Table.from_batches([taken]))
    schema = ds.scanner(columns=read, with_row_address=True, limit=0).projected_schema
    rows = pa.concat_tables(parts) if parts else schema.empty_table()
    # the rows came fragment by fragment in address order: each address's position by search
    got = rows.column("_rowaddr").to_numpy().astype(np.uint64)
    rows = rows.take(np.searchsorted(got, addresses).astype(np.int64))
    out = rows.select(names).append_column(pa.field(SCORE, pa.float32()), pa.array(scores, pa.float32()))
    for name in system:
        out = out.append_column(rows.schema.field(name), rows.column(name))
    return out
