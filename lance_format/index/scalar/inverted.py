"""Reading pylance's INVERTED (full-text) index and scoring a query on it with BM25.

A segment holds ``metadata.lance`` (partition ids, tokenizer params as JSON in the schema
metadata) and per partition ``part_N_tokens.lance`` (the token -> token id FST),
``part_N_docs.lance`` (doc id -> row id, token count) and ``part_N_invert.lance`` (one row per
token id: the posting list as blocks of 128 documents, each block a float32 block-max score then
either bit-packed doc-id deltas and frequencies (full blocks) or varint doc-id deltas and
varint frequencies (the tail block)). Scores are pylance's BM25 (k1 1.2, b 0.75, idf
``ln((N - n + 0.5) / (n + 0.5) + 1)``) over the statistics of every partition, in float32.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from lance_format.errors import CorruptFileError, UnsupportedFeatureError
from lance_format.index.scalar.base import ScalarIndex, ScalarIndexType, SearchResult, register
from lance_format.index.scalar.fst import fst_items
from lance_format.index.scalar.fts_tokenizer import TokenizerParams
from lance_format.index.scalar.queries import ScalarQuery
from lance_format.index.store import IndexStore

_DECODED_TOKENS = 256  # decoded posting lists (and position lists) kept per loaded segment
_DECODED_LOCK = threading.Lock()
K1 = np.float32(1.2)
B = np.float32(0.75)
BLOCK = 128


def _varints(buf: bytes, count: int, at: int) -> tuple[list[int], int]:
    values: list[int] = []
    for _ in range(count):
        value = shift = 0
        while True:
            byte = buf[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        values.append(value)
    return values, at


def varint_array(data: np.ndarray) -> np.ndarray:
    """Every LEB128 varint in ``data`` (uint8, ending on a varint's last byte), as uint64."""
    if not len(data):
        return np.zeros(0, np.uint64)
    ends = data < 0x80
    group = np.concatenate([[0], np.cumsum(ends[:-1])])
    starts = np.flatnonzero(np.concatenate([[True], ends[:-1]]))
    shift = (np.arange(len(data)) - starts[group]) * 7
    parts = (data & 0x7F).astype(np.uint64) << shift.astype(np.uint64)
    out = np.zeros(int(group[-1]) + 1, np.uint64)
    np.add.at(out, group, parts)  # the 7-bit parts do not overlap: adding is or-ing
    return out


def _unpack4x_many(words: np.ndarray, bits: int) -> np.ndarray:
    """Blocks of 128 values bit-packed by ``BitPacker4x``: ``words`` is (blocks, 4 * bits) uint32
    (4 interleaved 32-bit lanes: value ``4 j + lane`` is the ``j``-th ``bits``-bit field of
    lane ``lane``'s word stream, least significant bits first); (blocks, 128) uint32."""
    count = len(words)
    if bits == 0:
        return np.zeros((count, BLOCK), np.uint32)
    lanes = words.reshape(count, bits, 4).transpose(0, 2, 1)  # (blocks, lane, word)
    stream = np.unpackbits(np.ascontiguousarray(lanes).astype("<u4").view(np.uint8).reshape(count, 4, -1),
                           axis=2, bitorder="little")  # (blocks, lane, 32 * bits)
    fields = stream.reshape(count, 4, 32, bits).astype(np.uint64)
    values = fields @ (np.uint64(1) << np.arange(bits, dtype=np.uint64))  # (blocks, lane, 32)
    return values.transpose(0, 2, 1).reshape(count, BLOCK).astype(np.uint32)


def _full_blocks(blocks: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """(doc ids, frequencies) of full 128-document blocks: each a float32 block-max score, the
    first doc id (u32), the delta bit width and deltas, the frequency bit width and frequencies."""
    count = len(blocks)
    initial = np.empty(count, np.uint64)
    doc_bits = np.empty(count, np.int64)
    freq_bits = np.empty(count, np.int64)
    for i, block in enumerate(blocks):
        initial[i] = int.from_bytes(block[4:8], "little")
        doc_bits[i] = block[8]
        freq_bits[i] = block[9 + 16 * block[8]]
    deltas = np.empty((count, BLOCK), np.uint32)
    freqs = np.empty((count, BLOCK), np.uint32)
    for bits in np.unique(doc_bits).tolist():
        chosen = np.flatnonzero(doc_bits == bits)
        words = np.stack([np.frombuffer(blocks[i], "<u4", 4 * bits, 9) for i in chosen.tolist()]) \
            if bits else np.zeros((len(chosen), 0), np.uint32)
        deltas[chosen] = _unpack4x_many(words, bits)
    for bits in np.unique(freq_bits).tolist():
        chosen = np.flatnonzero(freq_bits == bits)
        words = np.stack([np.frombuffer(blocks[i], "<u4", 4 * bits, 10 + 16 * int(doc_bits[i]))
                          for i in chosen.tolist()]) if bits else np.zeros((len(chosen), 0), np.uint32)
        freqs[chosen] = _unpack4x_many(words, bits)
    docs = (np.cumsum(deltas, axis=1, dtype=np.uint64) + initial[:, None]).astype(np.uint32)
    return docs.reshape(-1), freqs.reshape(-1)


def decode_posting(blocks: list[bytes], length: int, tail_codec: str) -> tuple[np.ndarray, np.ndarray]:
    """(doc ids, frequencies) of one posting list of ``length`` documents."""
    docs: list[np.ndarray] = []
    freqs: list[np.ndarray] = []
    full = length // BLOCK
    if full:
        full_docs, full_freqs = _full_blocks(blocks[:full])
        docs.append(full_docs)
        freqs.append(full_freqs)
    rest = length % BLOCK
    if rest:
        block = blocks[full]
        if tail_codec == "varint_delta_v1":
            deltas_list, at = _varints(block, rest, 4)
            freq_list, _ = _varints(block, rest, at)
            docs.append(np.cumsum(np.asarray(deltas_list, np.uint64)).astype(np.uint32))
        else:  # fixed32
            docs.append(np.frombuffer(block, "<u4", rest, 4).astype(np.uint32))
            freq_list = np.frombuffer(block, "<u4", rest, 4 + 4 * rest).tolist()
        freqs.append(np.asarray(freq_list, np.uint32))
    if not docs:
        return np.zeros(0, np.uint32), np.zeros(0, np.uint32)
    return np.concatenate(docs), np.concatenate(freqs)


def position_deltas(stream: bytes, total: int, codec: str) -> np.ndarray:
    """One posting block's ``total`` position deltas: groups of 128 ``BitPacker4x`` deltas (a
    bit-width byte, then ``16 * bits`` bytes) and a varint tail (``packed_delta_v1``), or all
    varints (``varint_doc_delta_v2``)."""
    raw = np.frombuffer(stream, np.uint8)
    if codec != "packed_delta_v1":
        return varint_array(raw)[:total]
    groups, at = [], 0
    for _ in range(total // BLOCK):
        bits = stream[at]
        groups.append(_unpack4x_many(np.frombuffer(stream, "<u4", 4 * bits, at + 1).reshape(1, -1), bits)[0]
                      if bits else np.zeros(BLOCK, np.uint32))
        at += 1 + 16 * bits
    return np.concatenate(groups + [varint_array(raw[at:]).astype(np.uint32)])[:total]


def positions_from_deltas(deltas: np.ndarray, freqs: np.ndarray) -> np.ndarray:
    """Positions from per-document deltas (each document's first delta is its first position)."""
    if not len(deltas):
        return np.zeros(0, np.uint32)
    deltas = deltas.astype(np.int64)
    counts = freqs.astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    sums = np.cumsum(deltas)
    # running sums restarting at each document's first position
    return (sums - np.repeat(sums[starts] - deltas[starts], counts)).astype(np.uint32)


@dataclass
class Partition:
    """One partition: its tokens, documents, and posting-list file."""

    tokens: dict[str, int]
    row_ids: np.ndarray  # doc id -> row id
    num_tokens: np.ndarray  # doc id -> token count
    lengths: np.ndarray  # token id -> documents holding it
    invert: str
    tail_codec: str
    positions_codec: str | None  # None: built without positions

    def posting(self, store: IndexStore, token_id: int) -> tuple[np.ndarray, np.ndarray]:
        row = store.read_range(self.invert, token_id, token_id + 1, columns=["_posting"])
        blocks = row.column("_posting")[0].as_py()
        return decode_posting(blocks, int(self.lengths[token_id]), self.tail_codec)

    def positions(self, store: IndexStore, token_id: int, freqs: np.ndarray) -> np.ndarray:
        """The token's positions in each document of its posting list (``freqs`` of them each,
        in posting order), concatenated."""
        if self.positions_codec is None:
            raise UnsupportedFeatureError("the index was built without positions", path=store.path(self.invert))
        row = store.read_range(self.invert, token_id, token_id + 1,
                               columns=["_compressed_position", "_position_block_offset"])
        data = row.column("_compressed_position")[0].as_py()
        starts = [int(v) for v in row.column("_position_block_offset")[0].as_py()] + [len(data)]
        deltas = [position_deltas(data[start:starts[block + 1]], int(freqs[block * BLOCK:(block + 1) * BLOCK].sum()),
                                  self.positions_codec) for block, start in enumerate(starts[:-1])]
        return positions_from_deltas(np.concatenate(deltas) if deltas else np.zeros(0, np.uint32), freqs)


class InvertedIndex(ScalarIndex):
    """A loaded INVERTED segment: answers full-text searches (never scalar filters)."""

    index_type: ClassVar[type[ScalarIndexType]]

    def __init__(self, store: IndexStore) -> None:
        self.store = store
        meta = store.schema_metadata("metadata.lance")
        self.params = TokenizerParams.from_json(meta.get("params", "{}"))
        self.raw_params: dict[str, Any] = json.loads(meta.get("params", "{}") or "{}")
        token_format = meta.get("token_set_format", "arrow")
        self.partitions: list[Partition] = []
        for pid in json.loads(meta.get("partitions", "[]")):
            self.partitions.append(self._partition(int(pid), token_format))
        # decoded posting lists and positions of recent tokens (the index lives in the segment
        # cache: repeated queries skip reading and decoding them)
        self._decoded: OrderedDict[tuple[int, int, bool], tuple[np.ndarray, ...]] = OrderedDict()

    def _partition(self, pid: int, token_format: str) -> Partition:
        store = self.store
        tokens_file = f"part_{pid}_tokens.lance"
        tokens_table = store.read_table(tokens_file)
        if "_token_fst_bytes" in tokens_table.column_names:
            data = tokens_table.column("_token_fst_bytes")[0].as_py() if tokens_table.num_rows else b""
            tokens = {k.decode("utf-8"): v for k, v in fst_items(data, tokens_file)} if data else {}
        elif "_token" in tokens_table.column_names:
            tokens = dict(zip(tokens_table.column("_token").to_pylist(),
                              tokens_table.column("_token_id").to_pylist()))
        else:
            raise CorruptFileError(f"{tokens_file} has neither an FST nor token columns "
                                   f"({tokens_table.column_names})", path=store.path(tokens_file))
        docs = store.read_table(f"part_{pid}_docs.lance")
        invert = f"part_{pid}_invert.lance"
        lengths = store.read_table(invert, columns=["_length"]).column("_length").to_numpy()
        tail = store.schema_metadata(invert).get("posting_tail_codec", "fixed32")
        block_size = int(store.schema_metadata(invert).get("posting_block_size", "128"))
        if block_size != BLOCK:
            raise UnsupportedFeatureError(f"INVERTED posting blocks of {block_size} documents are not supported",
                                          path=store.path(invert))
        codec = store.schema_metadata(invert).get("positions_codec", "varint_doc_delta_v2") \
            if "_compressed_position" in store.schema(invert).names else None
        return Partition(tokens, docs.column("_rowid").to_numpy().astype(np.uint64),
                         docs.column("_num_tokens").to_numpy().astype(np.uint32), lengths, invert, tail, codec)

    @property
    def num_docs(self) -> int:
        return sum(len(p.row_ids) for p in self.partitions)

    @property
    def total_tokens(self) -> int:
        return sum(int(p.num_tokens.sum(dtype=np.uint64)) for p in self.partitions)

    def token_docs(self, token: str) -> int:
        """Documents (over every partition) holding ``token``."""
        return sum(int(p.lengths[p.tokens[token]]) for p in self.partitions if token in p.tokens)

    def postings(self, token: str) -> Iterable[tuple[Partition, np.ndarray, np.ndarray]]:
        """``(partition, doc ids, frequencies)`` of ``token`` in each partition holding it."""
        for at, part in enumerate(self.partitions):
            if token in part.tokens:
                docs, freqs = self._cached((at, part.tokens[token], False),
                                           partial(part.posting, self.store, part.tokens[token]))
                yield part, docs, freqs

    def positions(self, part: Partition, token: str, freqs: np.ndarray) -> np.ndarray:
        """The positions of ``token`` in ``part``'s documents holding it (see :meth:`Partition.positions`)."""
        key = (self.partitions.index(part), part.tokens[token], True)
        return self._cached(key, lambda: (part.positions(self.store, part.tokens[token], freqs),))[0]

    def _cached(self, key: tuple[int, int, bool], load: Callable[[], tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
        with _DECODED_LOCK:
            if key in self._decoded:
                self._decoded.move_to_end(key)
                return self._decoded[key]
        value = load()
        with _DECODED_LOCK:
            self._decoded[key] = value
            while len(self._decoded) > _DECODED_TOKENS:
                self._decoded.popitem(last=False)
        return value

    def search(self, query: ScalarQuery) -> SearchResult | None:
        return None  # full-text searches go through lance_format.dataset.scan.fts_search

    def statistics(self) -> dict[str, Any]:
        # pylance's: the build parameters as stored, the vocabulary's size and the documents
        return {"params": dict(self.raw_params), "num_tokens": len(set().union(*(p.tokens for p in self.partitions))),
                "num_docs": self.num_docs}


def idf(token_docs: int, num_docs: int) -> np.float32:
    n = np.float32(num_docs)
    t = np.float32(token_docs)
    return np.float32(np.log(np.float32((n - t + np.float32(0.5)) / (t + np.float32(0.5)) + np.float32(1.0))))


def doc_weights(freqs: np.ndarray, doc_tokens: np.ndarray, avgdl: np.float32) -> np.ndarray:
    """BM25's per-document factor ``(k1 + 1) f / (f + k1 (1 - b + b dl / avgdl))`` in float32."""
    f = freqs.astype(np.float32)
    norm = K1 * (np.float32(1.0) - B + B * doc_tokens.astype(np.float32) / avgdl)
    return (K1 + np.float32(1.0)) * f / (f + norm)


@register
class InvertedIndexType(ScalarIndexType):
    name = "INVERTED"
    display_name = "Inverted"
    type_url = "/lance.table.InvertedIndexDetails"
    index_version = 2  # pylance 14.0.2's: FST token sets, varint posting tails, shared position streams
    aliases = ("FTS",)
    answers_filters = False

    @classmethod
    def supports(cls, data_type: pa.DataType) -> bool:
        if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
            data_type = data_type.value_type
        return pa.types.is_string(data_type) or pa.types.is_large_string(data_type)

    @classmethod
    def check_params(cls, params: Mapping[str, Any]) -> None:
        from lance_format.index.scalar.inverted_train import normalize

        normalize(params)

    @classmethod
    def details(cls, params: Mapping[str, Any]) -> bytes:
        from lance_format.index.scalar.inverted_train import details, normalize

        return details(normalize(params))

    @classmethod
    def train(cls, store: IndexStore, batches: Iterable[pa.RecordBatch], value_type: pa.DataType,
              params: Mapping[str, Any]) -> None:
        from lance_format.index.scalar.inverted_train import train

        train(store, batches, params)

    @classmethod
    def load(cls, store: IndexStore, details: bytes) -> ScalarIndex:
        return InvertedIndex(store)


InvertedIndex.index_type = InvertedIndexType
