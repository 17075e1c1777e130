"""The ``_impacts`` column of an INVERTED partition: per posting list, one entry per block of
128 documents, then one per group of 32 blocks. An entry is the last doc id it covers and the
frontier of (frequency, quantized document length) pairs that bound its BM25 scores: for each
frequency the shortest document, kept only if shorter than every document of a higher
frequency; quantized lengths that coincide keep the highest frequency. Pairs are encoded as
varint ``(frequency delta - 1) << 1 | explicit norm`` plus, when explicit, the norm delta byte.

A group's frontier is the frontier of its blocks' frontiers (a pair beaten inside its block is
beaten in the group), so groups cost little on top of blocks.
"""

from __future__ import annotations

import numpy as np

from lance_format.index.scalar.bitpack import BLOCK, bit_widths, join_pieces, varints

LEVEL1_BLOCKS = 32


def _quantize(lengths: np.ndarray) -> np.ndarray:
    """Document lengths as 4-significant-bit codes (0-7 exact), the impacts' norms."""
    bits = bit_widths(lengths)
    shift = np.maximum(bits - 4, 0)
    coded = ((lengths.astype(np.int64) >> shift) & 0x07) | ((shift + 1) << 3)
    return np.where(bits < 4, lengths, coded).astype(np.int64)


def _sorted(entry: np.ndarray, freq: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, ...]:
    """The items sorted by entry, frequency descending, length (one packed int64 sort when the
    three fit in 62 bits)."""
    e, f, dl = entry.astype(np.int64), freq.astype(np.int64), length.astype(np.int64)
    if not len(e):
        return e, f, dl
    fmax = int(f.max())
    eb, fb, db = int(e.max()).bit_length(), fmax.bit_length(), int(dl.max()).bit_length()
    if eb + fb + db <= 62:
        key = np.sort((e << (fb + db)) | ((fmax - f) << db) | dl)
        return key >> (fb + db), fmax - ((key >> db) & ((1 << fb) - 1)), key & ((1 << db) - 1)
    order = np.lexsort((dl, -f, e))
    return e[order], f[order], dl[order]


def frontier(entry: np.ndarray, freq: np.ndarray, length: np.ndarray, count: int) -> tuple[np.ndarray, ...]:
    """Each entry's raw frontier pairs (entry, frequency, length), by entry then frequency."""
    e, f, dl = _sorted(entry, freq, length)
    first = np.ones(len(e), bool)
    first[1:] = (e[1:] != e[:-1]) | (f[1:] != f[:-1])
    e, f, dl = e[first], f[first], dl[first]
    # from the highest frequency down, a running minimum of lengths that restarts per entry: later
    # entries are offset below every earlier one
    big = int(dl.max()) + 1 if len(dl) else 1
    keyed = dl + (count - e) * big
    running = np.minimum.accumulate(keyed)
    keep = np.ones(len(e), bool)
    keep[1:] = keyed[1:] < running[:-1]
    e, f, dl = e[keep], f[keep], dl[keep]
    # reverse within each entry: frequencies ascending
    starts = np.searchsorted(e, e, side="left")
    ends = np.searchsorted(e, e, side="right")
    back = starts + ends - 1 - np.arange(len(e))
    return e[back], f[back], dl[back]


def encode(e: np.ndarray, f: np.ndarray, dl: np.ndarray, up_to: np.ndarray, count: int
           ) -> tuple[np.ndarray, np.ndarray]:
    """The entries' binaries from their raw frontiers and last doc ids."""
    norm = _quantize(dl)
    last = np.ones(len(e), bool)
    last[:-1] = (e[:-1] != e[1:]) | (norm[:-1] != norm[1:])
    e, f, norm = e[last], f[last], norm[last]
    pairs = np.bincount(e, minlength=count)
    group_first = np.ones(len(e), bool)
    group_first[1:] = e[1:] != e[:-1]
    prev_f = np.where(group_first, 0, np.concatenate([[0], f[:-1]]))
    prev_n = np.where(group_first, 0, np.concatenate([[0], norm[:-1]]))
    norm_delta = norm - prev_n
    explicit = norm_delta != 1
    packed_bytes, packed_len = varints(((f - prev_f - 1) << 1) | explicit)
    norm_bytes = norm_delta[explicit].astype(np.uint8)
    pair_len = packed_len + explicit
    pair_data, _ = join_pieces([(packed_bytes, packed_len), (norm_bytes, explicit.astype(np.int64))], len(e))
    up_bytes, up_len = varints(up_to)
    count_bytes, count_len = varints(pairs)
    per_entry = np.bincount(e, weights=pair_len, minlength=count).astype(np.int64)
    return join_pieces([(up_bytes, up_len), (count_bytes, count_len), (pair_data, per_entry)], count)


def impacts(post_tok: np.ndarray, rank: np.ndarray, freq: np.ndarray, doc_len: np.ndarray, post_doc: np.ndarray,
            blocks_per_tok: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(buffer, offsets, entries per token) of the postings (sorted by token then doc; ``rank``
    each posting's index in its list)."""
    groups_per_tok = (blocks_per_tok + LEVEL1_BLOCKS - 1) // LEVEL1_BLOCKS
    entries_per_tok = blocks_per_tok + groups_per_tok
    entry_start = np.cumsum(entries_per_tok) - entries_per_tok
    count = int(entries_per_tok.sum())
    block_in_tok = rank // BLOCK
    level0 = entry_start[post_tok] + block_in_tok
    to_level1 = np.zeros(count, np.int64)
    to_level1[level0] = entry_start[post_tok] + blocks_per_tok[post_tok] + block_in_tok // LEVEL1_BLOCKS
    up_to = np.zeros(count, np.int64)
    up_to[level0] = post_doc  # postings ascend: the last write per entry is its last doc
    up_to[to_level1[level0]] = post_doc
    e0, f0, dl0 = frontier(level0, freq, doc_len, count)
    e1, f1, dl1 = frontier(to_level1[e0], f0, dl0, count)
    e = np.concatenate([e0, e1])
    order = np.argsort(e, kind="stable")
    buffer, offsets = encode(e[order], np.concatenate([f0, f1])[order], np.concatenate([dl0, dl1])[order],
                             up_to, count)
    return buffer, offsets, entries_per_tok
