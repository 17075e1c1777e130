"""NGRAM: a posting list per trigram token (``ngram_postings.lance``), as pylance 14.0.2 writes it.

Columns ``tokens`` (uint32, ascending; token 0 lists the rows whose value is null; see
:mod:`.ngram_text`) and ``posting_list`` (binary, field metadata
``lance-encoding:compression=none``): a roaring-rs ``RoaringTreemap`` of the rows' ``_rowid``s
(:mod:`.rowsets`). No schema metadata, no global buffers, index version 0.

``contains(col, s)`` and ``col LIKE 's%'`` answer a superset: the rows holding every trigram of
``s`` (case and accents folded away; the caller re-checks). A search string with fewer than three
characters, or no trigram, is left to the scan; one with a trigram no row has matches nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from lance_format.errors import ArgumentTypeError
from lance_format.index.scalar import queries as q
from lance_format.index.scalar.base import VALUE_COLUMN, ScalarIndex, ScalarIndexType, SearchResult, register
from lance_format.index.scalar.ngram_text import NULL_TOKEN, N, query_tokens, trigrams
from lance_format.index.scalar.rowsets import KeyedRowSets, deserialize_roaring_treemap
from lance_format.index.scalar.zones import write_segment_file
from lance_format.index.store import IndexStore

FILE = "ngram_postings.lance"
SCHEMA = pa.schema([
    pa.field("tokens", pa.uint32()),
    pa.field("posting_list", pa.binary(), nullable=False, metadata={"lance-encoding:compression": "none"}),
])
_PAIRS_PER_UPDATE = 2_000_000


def _is_string(data_type: pa.DataType) -> bool:
    return pa.types.is_string(data_type) or pa.types.is_large_string(data_type)


def _postings_table(sets: KeyedRowSets) -> pa.Table:
    by_token = sets.by_key()
    tokens = sorted(by_token)
    lists = [sets.roaring_treemap(token, by_token[token]) for token in tokens]
    return pa.table([pa.array(tokens, pa.uint32()), pa.array(lists, pa.binary())], schema=SCHEMA)


@register
class NGramIndexType(ScalarIndexType):
    name = "NGRAM"
    display_name = "NGram"
    type_url = "/lance.table.NGramIndexDetails"
    index_version = 0
    row_key = "_rowid"

    @classmethod
    def supports(cls, data_type: pa.DataType) -> bool:
        return _is_string(data_type)

    @classmethod
    def check_type(cls, column: str, data_type: pa.DataType) -> None:
        if not _is_string(data_type):
            raise ArgumentTypeError(f"NGRAM index column {column} must be a string")

    @classmethod
    def train(cls, store: IndexStore, batches: Iterable[pa.RecordBatch], value_type: pa.DataType,
              params: Mapping[str, Any]) -> None:
        cls.check_type("value", value_type)
        postings = KeyedRowSets()
        pending: list[tuple[np.ndarray, np.ndarray]] = []
        pending_size = 0
        for batch in batches:
            if batch.num_rows == 0:
                continue
            rows = batch.column(cls.row_key).to_numpy(zero_copy_only=False).astype(np.uint64, copy=False)
            tokens, positions = trigrams(batch.column(VALUE_COLUMN))
            pending.append((tokens, rows[positions]))
            pending_size += len(tokens)
            # bitmaps are updated per (token, fragment) group: gather a few batches first so
            # that each group is larger (bounded: about 2M pairs held at a time)
            if pending_size >= _PAIRS_PER_UPDATE:
                postings.add(np.concatenate([t for t, _ in pending]), np.concatenate([r for _, r in pending]))
                pending, pending_size = [], 0
        if pending:
            postings.add(np.concatenate([t for t, _ in pending]), np.concatenate([r for _, r in pending]))
        write_segment_file(store, FILE, _postings_table(postings), {})

    @classmethod
    def load(cls, store: IndexStore, details: bytes) -> NGramIndex:
        return NGramIndex(store)


class NGramIndex(ScalarIndex):
    """A loaded NGRAM segment: its tokens in memory, posting lists read when a query needs them."""

    index_type = NGramIndexType

    def __init__(self, store: IndexStore) -> None:
        self.store = store
        tokens = store.read_table(FILE, columns=["tokens"]).column("tokens")
        self.tokens = tokens.to_numpy().astype(np.int64) if len(tokens) else np.zeros(0, np.int64)
        self._lists: dict[int, np.ndarray] = {}

    def statistics(self) -> dict[str, Any]:
        return {"num_ngrams": len(self.tokens)}

    def prewarm(self) -> None:
        self._postings(np.arange(len(self.tokens)))

    def _postings(self, positions: np.ndarray) -> list[np.ndarray]:
        missing = sorted({int(p) for p in positions} - self._lists.keys())
        if missing:
            table = self.store.take(FILE, np.array(missing, dtype=np.int64), columns=["posting_list"])
            for position, data in zip(missing, table.column("posting_list").to_pylist()):
                self._lists[position] = deserialize_roaring_treemap(data, what=f"{FILE} posting list")
        return [self._lists[int(p)] for p in positions]

    def _rows_with_all(self, wanted: np.ndarray) -> SearchResult:
        positions = np.searchsorted(self.tokens, wanted)
        found = (positions < len(self.tokens)) & (self.tokens[np.minimum(positions, len(self.tokens) - 1)] == wanted) \
            if len(self.tokens) else np.zeros(len(wanted), bool)
        if not found.all():
            return SearchResult()  # a trigram no row has: nothing matches
        lists = sorted(self._postings(positions), key=len)
        result = lists[0]
        for rows in lists[1:]:
            result = np.intersect1d(result, rows, assume_unique=True)
        return SearchResult(np.asarray(result, dtype=np.uint64), exact=False)

    def _substring(self, text: str) -> SearchResult | None:
        if len(text) < N:
            return None
        wanted = query_tokens(text)
        wanted = wanted[wanted != NULL_TOKEN]
        if len(wanted) == 0:
            return None
        return self._rows_with_all(wanted.astype(np.int64))

    def search(self, query: q.ScalarQuery) -> SearchResult | None:
        if isinstance(query, q.StringContains):
            return self._substring(query.substring)
        if isinstance(query, q.StringPrefix):
            return self._substring(query.prefix)
        if isinstance(query, q.IsNull):
            position = np.searchsorted(self.tokens, NULL_TOKEN)
            if len(self.tokens) and self.tokens[0] == NULL_TOKEN:
                return SearchResult(self._postings(np.array([position]))[0])
            return SearchResult()
        return None
