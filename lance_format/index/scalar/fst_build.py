"""Writing a finite state transducer in the ``fst`` crate's format (version 2): the token
dictionary (``_token_fst_bytes``) of an INVERTED index partition, token -> token id.

The automaton is the trie of the keys (equal suffixes are not merged; every reader accepts a
trie), built with numpy over all nodes at once: nodes are the keys' distinct prefixes, numbered
in key order (the trie's pre-order); a node's parent is the closest earlier node one level up.
A transition's output is the smallest value under its target minus the smallest under its
source (the root counts 0), a final node's output its value minus the smallest under it, so
outputs add up to each key's value along its path. Nodes are written deepest level first (a
target always precedes its source), each as an "any transitions" node read backwards from its
last byte (see :mod:`.fst` for the layout), with one transition-address width and one output
width for the whole automaton. A final node without transitions or output is not written: its
address is 0, as in the crate.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from lance_format.errors import InvalidInputError
from lance_format.index.scalar.bitpack import join_pieces

VERSION = 2
_INDEX_THRESHOLD = 32


def _pack_size(value: int) -> int:
    return max(1, (int(value).bit_length() + 7) // 8)


def _le(values: np.ndarray, width: int) -> np.ndarray:
    """Each value as ``width`` little-endian bytes, concatenated."""
    v = values.astype(np.uint64)[:, None] >> (np.uint64(8) * np.arange(width, dtype=np.uint64))
    return (v & np.uint64(0xFF)).astype(np.uint8).reshape(-1)


def _key_matrix(keys: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter((len(k) for k in keys), np.int64, len(keys))
    width = int(lengths.max()) if len(keys) else 0
    matrix = np.zeros((len(keys), max(width, 1)), np.uint8)
    flat = np.frombuffer(b"".join(keys), np.uint8)
    rows = np.repeat(np.arange(len(keys)), lengths)
    cols = np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    matrix[rows, cols] = flat
    return matrix, lengths


def build_fst(items: Sequence[tuple[bytes, int]]) -> bytes:
    """The FST of ``items`` (keys strictly increasing, values non-negative)."""
    keys = [k for k, _ in items]
    if not keys:  # a root without transitions: sizes byte, transition count 0, state
        return struct.pack("<QQ", VERSION, 0) + b"\x00\x00\x00" + struct.pack("<QQ", 0, 18)
    values = np.fromiter((v for _, v in items), np.int64, len(items))
    matrix, lengths = _key_matrix(keys)
    n = len(keys)
    lcp = np.zeros(n, np.int64)
    if n > 1:
        shorter = np.minimum(lengths[1:], lengths[:-1])
        same = (matrix[1:] == matrix[:-1]) & (np.arange(matrix.shape[1]) < shorter[:, None])
        lcp[1:] = np.where(same.all(axis=1), shorter, same.argmin(axis=1))
        bad = (lcp[1:] == lengths[1:]) | ((lcp[1:] < shorter) & (
            matrix[np.arange(1, n), lcp[1:].clip(max=matrix.shape[1] - 1)]
            < matrix[np.arange(n - 1), lcp[1:].clip(max=matrix.shape[1] - 1)]))
        if bad.any():
            at = int(np.flatnonzero(bad)[0]) + 1
            raise InvalidInputError(f"FST keys must be strictly increasing: {keys[at]!r} after {keys[at - 1]!r}")
    # nodes: root (0), then each key's new prefixes in key order
    per_key = lengths - lcp
    key_of = np.concatenate([[-1], np.repeat(np.arange(n), per_key)])
    depth = np.concatenate([[0], lcp.repeat(per_key) + 1 + np.arange(int(per_key.sum()))
                            - np.repeat(np.cumsum(per_key) - per_key, per_key)])
    count = len(depth)
    label = np.zeros(count, np.uint8)
    label[1:] = matrix[key_of[1:], depth[1:] - 1]
    final = np.zeros(count, bool)
    final[1:] = depth[1:] == lengths[key_of[1:]]
    root_final = n > 0 and lengths[0] == 0  # the empty key (a raw tokenizer's empty text)
    final[0] = root_final
    big = np.int64(1) << np.int64(62)
    smallest = np.where(final, values[np.maximum(key_of, 0)], big)
    parent = np.full(count, -1, np.int64)
    levels = [np.flatnonzero(depth == d) for d in range(int(depth.max()) + 1)]
    for d in range(1, len(levels)):
        above = levels[d - 1]
        parent[levels[d]] = above[np.searchsorted(above, levels[d]) - 1]
    for d in range(len(levels) - 1, 0, -1):
        np.minimum.at(smallest, parent[levels[d]], smallest[levels[d]])
    base = smallest.copy()
    base[0] = 0  # the root has no incoming output
    out_in = np.zeros(count, np.int64)
    out_in[1:] = smallest[1:] - base[parent[1:]]
    final_out = np.where(final, values[np.maximum(key_of, 0)] - base, 0)
    ntrans = np.bincount(parent[1:], minlength=count)
    has_out = (final_out != 0) | (np.bincount(parent[1:], weights=out_in[1:] != 0, minlength=count) > 0)
    written = (ntrans > 0) | (final_out != 0)
    written[0] = True
    # write order: deepest level first (targets before sources), pre-order within a level
    order = np.lexsort((np.arange(count), -depth))
    order = order[written[order]]
    osize = _pack_size(int(max(out_in.max(initial=0), final_out.max(initial=0))))
    node_osize = np.where(has_out, osize, 0)
    extra = (ntrans > _INDEX_THRESHOLD) * 256 + 2 + ((ntrans == 0) | (ntrans >= 64))
    fixed = node_osize * (ntrans + final) + ntrans + extra
    tsize = 1
    while int(fixed[order].sum() + ntrans.sum() * tsize) + 16 >= 256 ** tsize:
        tsize += 1
    size = np.zeros(count, np.int64)
    size[order] = fixed[order] + tsize * ntrans[order]
    position = np.zeros(count, np.int64)
    position[order] = np.arange(len(order))
    start = np.zeros(count, np.int64)
    start[order] = 16 + np.cumsum(size[order]) - size[order]
    addr = np.where(written, start + size - 1, 0)
    # each written node's transitions, last first
    children = np.arange(1, count)
    children = children[np.lexsort((-label[children].astype(np.int64), position[parent[children]]))]
    source = parent[children]
    per_node = [
        (_le(final_out[order][final[order] & has_out[order]], osize), (node_osize * final)[order]),
        (_le(out_in[children][has_out[source]], osize), (node_osize * ntrans)[order]),
        (_le(np.where(addr[children] > 0, start[source] - addr[children], 0), tsize), tsize * ntrans[order]),
        (label[children], ntrans[order]),
    ]
    indexed = order[ntrans[order] > _INDEX_THRESHOLD]
    tables = np.full((len(indexed), 256), 255, np.uint8)
    for row, node in enumerate(indexed.tolist()):  # nodes with over 32 transitions: a lookup table
        mine = np.flatnonzero(parent == node)
        tables[row, label[mine]] = np.arange(len(mine))
    table_len = np.where(ntrans[order] > _INDEX_THRESHOLD, 256, 0)
    nt = ntrans[order]
    tail = [np.full(len(order), tsize << 4, np.uint8) | node_osize[order].astype(np.uint8)]
    ntrans_byte = (nt == 0) | (nt >= 64)
    state = (final[order] * 0x40 + np.where(ntrans_byte, 0, nt)).astype(np.uint8)
    per_node += [(tables.reshape(-1), table_len), (tail[0], np.ones(len(order), np.int64)),
                 (np.where(nt == 256, 1, nt)[ntrans_byte].astype(np.uint8), ntrans_byte.astype(np.int64)),
                 (state, np.ones(len(order), np.int64))]
    body, _ = join_pieces(per_node, len(order))
    root_addr = int(addr[0])
    return struct.pack("<QQ", VERSION, 0) + body.tobytes() + struct.pack("<QQ", n, root_addr)
