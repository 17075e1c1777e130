"""Building one partition of an INVERTED index, as pylance 14.0.2 lays it out.

Input: the partition's analyzed tokens (token, document index, position). Documents without a
token are left out; the rest are numbered in order (doc id). Token ids are given in order of
first appearance. Posting lists are sorted by doc id and cut into blocks of 128 documents: a
full block is a float32 block-max BM25 score, the first doc id, the bit-packed doc-id deltas and
the bit-packed frequencies; the last, partial block is the score then varint doc-id deltas (the
first absolute) and varint frequencies. ``_impacts`` holds, per block then per group of 32
blocks, the last doc id and the (frequency, quantized length) frontier that bounds its scores.
With positions, each block's position deltas form a stream (128 at a time bit-packed, the rest
varints) and ``_position_block_offset`` says where each block's stream starts.

Everything is computed with numpy over all postings of the partition at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.index.scalar.bitpack import BLOCK, bit_widths, fixed_bytes, join_pieces, pack4x, varints
from lance_format.index.scalar.fst_build import build_fst
from lance_format.index.scalar.inverted import K1, B
from lance_format.index.scalar.inverted_impacts import impacts

TOKENS_SCHEMA = pa.schema([pa.field("_token_fst_bytes", pa.large_binary(), False),
                           pa.field("_token_next_id", pa.uint32(), False),
                           pa.field("_token_total_length", pa.uint64(), False)])
DOCS_SCHEMA = pa.schema([pa.field("_rowid", pa.uint64(), False), pa.field("_num_tokens", pa.uint32(), False)])
_BLOBS = pa.list_(pa.field("item", pa.large_binary()))
INVERT_FIELDS = [pa.field("_posting", _BLOBS, False), pa.field("_max_score", pa.float32(), False),
                 pa.field("_length", pa.uint32(), False), pa.field("_impacts", _BLOBS, False)]
POSITION_FIELDS = [pa.field("_compressed_position", pa.large_binary(), False),
                   pa.field("_position_block_offset", pa.list_(pa.field("item", pa.uint32())), False)]


@dataclass
class PartitionTables:
    """The three files of a partition (tokens, docs, invert) as tables."""

    tokens: pa.Table
    docs: pa.Table
    invert: pa.Table
    total_tokens: int


def _binary(buffer: np.ndarray, offsets: np.ndarray) -> pa.Array:
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(offsets) - 1,
                                            [None, pa.py_buffer(offsets.astype(np.int64)), pa.py_buffer(buffer)])


def _lists(values: pa.Array, counts: np.ndarray, value_type: pa.DataType) -> pa.Array:
    offsets = np.zeros(len(counts) + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values,
                                    type=pa.list_(pa.field("item", value_type)))


def _starts(counts: np.ndarray) -> np.ndarray:
    return np.cumsum(counts) - counts


def _idfs(token_docs: np.ndarray, num_docs: int) -> np.ndarray:
    """pylance's idf ``ln((N - n + 0.5) / (n + 0.5) + 1)`` per token, in float32."""
    n = np.float32(num_docs)
    t = token_docs.astype(np.float32)
    half = np.float32(0.5)
    ratio = (n - t + half) / (t + half) + np.float32(1.0)
    # Rust's f32 ln is correctly rounded; numpy's float32 log may be one unit off
    return np.log(ratio.astype(np.float64)).astype(np.float32)


def _full_block_bytes(doc_rows: np.ndarray, freq_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Full blocks (rows of 128 doc ids / frequencies): first doc id, delta width, packed
    deltas, frequency width, packed frequencies."""
    count = len(doc_rows)
    deltas = np.zeros_like(doc_rows)
    deltas[:, 1:] = doc_rows[:, 1:] - doc_rows[:, :-1]
    dbits = bit_widths(deltas.max(axis=1)) if count else np.zeros(0, np.int64)
    fbits = bit_widths(freq_rows.max(axis=1)) if count else np.zeros(0, np.int64)
    lengths = 4 + 1 + 16 * dbits + 1 + 16 * fbits
    offsets = np.zeros(count + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    out = np.empty(int(offsets[-1]), np.uint8)
    base = offsets[:-1]
    out[base[:, None] + np.arange(4)] = doc_rows[:, :1].astype("<u4").view(np.uint8)
    out[base + 4] = dbits
    for bits in np.unique(dbits).tolist():
        chosen = np.flatnonzero(dbits == bits)
        out[(base[chosen] + 5)[:, None] + np.arange(16 * bits)] = pack4x(deltas[chosen], bits)
    fbase = base + 5 + 16 * dbits
    out[fbase] = fbits
    for bits in np.unique(fbits).tolist():
        chosen = np.flatnonzero(fbits == bits)
        out[(fbase[chosen] + 1)[:, None] + np.arange(16 * bits)] = pack4x(freq_rows[chosen], bits)
    return out, lengths


def _position_streams(pos_delta: np.ndarray, occ_block: np.ndarray, nblocks: int) -> tuple[np.ndarray, np.ndarray]:
    """Each block's position stream: its deltas 128 at a time bit-packed (width byte, packed
    words), the rest as varints."""
    per_block = np.bincount(occ_block, minlength=nblocks)
    rank = np.arange(len(occ_block)) - _starts(per_block)[occ_block]
    full_chunks = per_block // BLOCK
    in_full = rank < (full_chunks * BLOCK)[occ_block]
    chunk_values = pos_delta[in_full].reshape(-1, BLOCK)
    chunk_bits = bit_widths(chunk_values.max(axis=1)) if len(chunk_values) else np.zeros(0, np.int64)
    chunk_len = 1 + 16 * chunk_bits
    offsets = np.zeros(len(chunk_values) + 1, np.int64)
    np.cumsum(chunk_len, out=offsets[1:])
    packed = np.empty(int(offsets[-1]), np.uint8)
    packed[offsets[:-1]] = chunk_bits
    for bits in np.unique(chunk_bits).tolist():
        chosen = np.flatnonzero(chunk_bits == bits)
        packed[(offsets[chosen] + 1)[:, None] + np.arange(16 * bits)] = pack4x(chunk_values[chosen], bits)
    chunk_block = occ_block[in_full][::BLOCK]
    packed_per_block = np.bincount(chunk_block, weights=chunk_len, minlength=nblocks).astype(np.int64)
    tail_bytes, tail_len = varints(pos_delta[~in_full])
    tail_per_block = np.bincount(occ_block[~in_full], weights=tail_len, minlength=nblocks).astype(np.int64)
    return join_pieces([(packed, packed_per_block), (tail_bytes, tail_per_block)], nblocks)


def build_partition(tokens: pa.Array, doc: np.ndarray, positions: np.ndarray | None, row_ids: np.ndarray
                    ) -> PartitionTables:
    """A partition's tables from its documents' analyzed tokens (``doc``: each token's index
    into ``row_ids``, non-decreasing)."""
    counts = np.bincount(doc, minlength=len(row_ids)) if len(doc) else np.zeros(len(row_ids), np.int64)
    has = counts > 0
    doc_id = np.cumsum(has) - 1
    doc = doc_id[doc] if len(doc) else doc
    num_tokens = counts[has].astype(np.uint32)
    docs = pa.table([pa.array(row_ids[has].astype(np.uint64)), pa.array(num_tokens)], schema=DOCS_SCHEMA)
    total = int(num_tokens.sum(dtype=np.uint64))
    encoded = pc.dictionary_encode(tokens) if len(tokens) else pa.DictionaryArray.from_arrays(
        pa.array([], pa.int32()), pa.array([], pa.large_string()))
    tid = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    vocab = encoded.dictionary
    ntok = len(vocab)
    # the token dictionary: sorted by bytes for the FST, each with its id
    token_bytes = vocab.cast(pa.large_binary()).to_pylist()
    order_tokens = sorted(range(ntok), key=token_bytes.__getitem__)
    fst = build_fst([(token_bytes[i], i) for i in order_tokens])
    lengths_bytes = int(pc.sum(pc.binary_length(vocab)).as_py() or 0) if ntok else 0
    tokens_table = pa.table([pa.array([fst], pa.large_binary()), pa.array([ntok], pa.uint32()),
                             pa.array([lengths_bytes], pa.uint64())], schema=TOKENS_SCHEMA)

    order = np.argsort(tid, kind="stable")
    t_s, d_s = tid[order], doc[order]
    new = np.ones(len(t_s), bool)
    new[1:] = (t_s[1:] != t_s[:-1]) | (d_s[1:] != d_s[:-1])
    first_occ = np.flatnonzero(new)
    post_tok, post_doc = t_s[first_occ], d_s[first_occ]
    freq = np.diff(np.append(first_occ, len(t_s))).astype(np.uint32)
    length = np.bincount(post_tok, minlength=ntok).astype(np.int64)

    ndocs = len(num_tokens)
    avgdl = np.float32(np.float32(total) / np.float32(ndocs)) if ndocs else np.float32(1.0)
    # pylance's block score: max f / (f + norm) over the block, times idf (k1 + 1), in float32
    idf_scale = _idfs(length, ndocs) * (K1 + np.float32(1.0))
    f32 = freq.astype(np.float32)
    norm = K1 * (np.float32(1.0) - B + B * num_tokens[post_doc].astype(np.float32) / avgdl)
    score = f32 / (f32 + norm)

    blocks_per_tok = (length + BLOCK - 1) // BLOCK
    nblocks = int(blocks_per_tok.sum())
    rank = np.arange(len(post_tok)) - _starts(length)[post_tok]
    blk = _starts(blocks_per_tok)[post_tok] + rank // BLOCK
    block_size = np.bincount(blk, minlength=nblocks)
    block_first = _starts(block_size)
    block_max = np.maximum.reduceat(score, block_first) if nblocks else np.zeros(0, np.float32)
    block_max = (block_max * idf_scale[np.repeat(np.arange(ntok), blocks_per_tok)]).astype(np.float32)
    full = block_size == BLOCK
    full_rows = block_first[full][:, None] + np.arange(BLOCK)
    full_data, full_len_f = _full_block_bytes(post_doc[full_rows].astype(np.uint32), freq[full_rows])
    full_len = np.zeros(nblocks, np.int64)
    full_len[full] = full_len_f
    in_tail = ~full[blk]
    tail_docs = post_doc[in_tail]
    tail_blk = blk[in_tail]
    tail_first = np.ones(len(tail_docs), bool)
    tail_first[1:] = tail_blk[1:] != tail_blk[:-1]
    tail_delta = np.where(tail_first, tail_docs, tail_docs - np.concatenate([[0], tail_docs[:-1]]))
    delta_bytes, delta_len = varints(tail_delta)
    freq_bytes, freq_len = varints(freq[in_tail])
    score_bytes, score_len = fixed_bytes(block_max, "<f4")
    posting_buffer, posting_offsets = join_pieces([
        (score_bytes, score_len), (full_data, full_len),
        (delta_bytes, np.bincount(tail_blk, weights=delta_len, minlength=nblocks).astype(np.int64)),
        (freq_bytes, np.bincount(tail_blk, weights=freq_len, minlength=nblocks).astype(np.int64))], nblocks)
    postings = _lists(_binary(posting_buffer, posting_offsets), blocks_per_tok, pa.large_binary())
    max_score = np.zeros(ntok, np.float32)
    if nblocks:
        max_score = np.maximum.reduceat(block_max, _starts(blocks_per_tok)).astype(np.float32)

    impact_buffer, impact_offsets, entries_per_tok = impacts(post_tok, rank, freq, num_tokens[post_doc], post_doc,
                                                             blocks_per_tok)
    impact_lists = _lists(_binary(impact_buffer, impact_offsets), entries_per_tok, pa.large_binary())

    columns = [postings, pa.array(max_score, pa.float32()), pa.array(length.astype(np.uint32)), impact_lists]
    fields = list(INVERT_FIELDS)
    if positions is not None:
        p_s = positions[order].astype(np.int64)
        posting_of = np.cumsum(new) - 1
        pos_delta = np.where(new, p_s, p_s - np.concatenate([[0], p_s[:-1]]))
        stream, stream_offsets = _position_streams(pos_delta.astype(np.uint32), blk[posting_of], nblocks)
        tok_block_start = _starts(blocks_per_tok)
        per_tok_bytes = np.add.reduceat(np.diff(stream_offsets), tok_block_start) if nblocks else np.zeros(0)
        tok_offsets = np.zeros(ntok + 1, np.int64)
        np.cumsum(per_tok_bytes, out=tok_offsets[1:])
        block_tok = np.repeat(np.arange(ntok), blocks_per_tok)
        relative = (stream_offsets[:-1] - tok_offsets[block_tok]).astype(np.uint32)
        columns += [_binary(stream, tok_offsets), _lists(pa.array(relative, pa.uint32()), blocks_per_tok, pa.uint32())]
        fields += POSITION_FIELDS
    invert = pa.Table.from_arrays(columns, schema=pa.schema(fields))
    return PartitionTables(tokens_table, docs, invert, total)
