"""FSST string compression for 2.1/2.2 pages: symbol-table training and compression with numpy.

The byte layout is Lance's (``rust/compression/fsst``), so pylance decodes our pages and we
decode its pages: a 2312-byte symbol table (u64 LE header ``0x46535354 << 32 | 1 << 24 | n``,
then ``n`` 8-byte symbols, then ``n`` lengths, zero-padded), and per string a code stream where
a code ``c < 255`` stands for symbol ``c`` and ``255`` escapes the following literal byte.
Which symbols are chosen is the encoder's business: any table decodes with any decoder.

Compression is a greedy longest-match parse. It is sequential within a string, so it runs over
all strings at once: every step advances each unfinished string by one token, with the match
found by table look-ups (a dense table keyed by the next three bytes for symbols of 3 to 8
bytes, one by the next two bytes for 2-byte symbols, one by the next byte for single bytes).
Strings are cut into units of at most ``_UNIT`` bytes (symbols never straddle a cut), which
bounds the number of steps. Training follows FSST: a few rounds over a ~16 KiB sample, each
counting how often every symbol and every pair of consecutive symbols occurs in the parse with
the current table, then keeping the 255 candidates (symbols and concatenated pairs) with the
highest gain. At most one symbol of 3+ bytes per 3-byte prefix is kept, so that one look-up
finds it (FSST's hash table has the same limit).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lance_format.encodings.structural import accel

FSST_MAGIC = 0x46535354
SYMBOL_TABLE_SIZE = 8 + 256 * 8 + 256
MIN_INPUT_BYTES = 32 * 1024  # Lance compresses a page with FSST from this many bytes of strings...
MIN_MAX_LENGTH = 5  # ...when its longest string has at least this many bytes
ESCAPE = 255
MAX_SYMBOLS = 255
SAMPLE_TARGET = 1 << 14
_ROUNDS = 5
_UNIT = 256  # bytes per parse unit: bounds the parse steps of long strings
_NONE = 0xFF  # "no symbol" in the byte-keyed tables (symbol ids are 0..254)
_MASKS = np.array([0] + [(1 << (8 * k)) - 1 for k in range(1, 8)] + [(1 << 64) - 1], np.uint64)


@dataclass
class _Table:
    """Symbols (LE u64 values and lengths) with the look-up tables of the greedy parse."""

    values: np.ndarray  # (n,) uint64
    lengths: np.ndarray  # (n,) uint8, 1..8
    short_of: np.ndarray  # (1 << 16,) uint16: token for the next two bytes (2-byte symbol, else 1-byte)
    single_of: np.ndarray  # (256,) uint16: token for one byte (1-byte symbol, else its escape)
    # by token (escapes are 256 + the byte); _NONE is a zero-length symbol that never matches
    values256: np.ndarray
    lengths_of: np.ndarray
    # the symbol of >= 3 bytes starting with given 3 bytes, built on first use: for the numpy
    # parse a dense (1 << 24,) uint8 table, for the compiled one two small levels (_prefix_tables)
    dense_long_of: np.ndarray | None = None
    prefix_tables: tuple[np.ndarray, np.ndarray] | None = None
    packed: tuple[np.ndarray, ...] | None = None  # the compiled compression's look-ups

    @property
    def long_of(self) -> np.ndarray:
        if self.dense_long_of is None:
            self.dense_long_of = np.full(1 << 24, _NONE, np.uint8)
            is_long = self.lengths >= 3
            self.dense_long_of[(self.values[is_long] & np.uint64(0xFFFFFF)).astype(np.int64)] = (
                np.flatnonzero(is_long).astype(np.uint8))
        return self.dense_long_of


def _make_table(values: np.ndarray, lengths: np.ndarray) -> _Table:
    values = values.astype(np.uint64)
    lengths = lengths.astype(np.uint8)
    ids = np.arange(len(values), dtype=np.uint16)
    single_of = np.arange(256, 512, dtype=np.uint16)
    single_of[values[lengths == 1].astype(np.int64)] = ids[lengths == 1]
    # two bytes b0 b1 (key b0 | b1 << 8): the 2-byte symbol, else b0's token
    short_of = np.tile(single_of, 256)
    short_of[values[lengths == 2].astype(np.int64)] = ids[lengths == 2]
    values256 = np.ones(256, np.uint64)  # unused ids: 1 never equals a word masked to 0 bytes
    values256[: len(values)] = values
    lengths_of = np.zeros(512, np.uint8)
    lengths_of[: len(values)] = lengths
    lengths_of[256:512] = 1
    return _Table(values, lengths, short_of, single_of, values256, lengths_of)


def _lookups(table: _Table) -> tuple[np.ndarray, ...]:
    """The look-up tables in the order the compiled kernels take them."""
    if table.prefix_tables is None:
        table.prefix_tables = _prefix_tables(table)
    return (*table.prefix_tables, table.short_of, table.single_of, table.values256, table.lengths_of)


def _packed_lookups(table: _Table) -> tuple[np.ndarray, ...]:
    """The look-ups of the compiled compression (``numba_kernels.compress_strings``): those of
    :func:`_lookups` with each entry's token length in its top 4 bits (a 3+-byte slot:
    ``id | length << 12``; no symbol has length 0), and in place of ``values256`` and
    ``lengths_of`` the symbol value of every slot. An empty slot is given length 3 and a value
    with bit 63 set, which no 3 masked bytes equal."""
    if table.packed is None:
        buckets, slots, short_of, single_of, values256, lengths_of = _lookups(table)
        length_bits = lengths_of.astype(np.uint16) << 12
        slot_values = values256[slots]
        empty = lengths_of[slots] == 0
        slot_values[empty] = np.uint64(1 << 63)
        packed_slots = slots.astype(np.uint16) | length_bits[slots]
        packed_slots[empty] = np.uint16(_NONE | 3 << 12)
        table.packed = (buckets, packed_slots, short_of | length_bits[short_of], single_of | length_bits[single_of],
                        slot_values)
    return table.packed


def _prefix_tables(table: _Table) -> tuple[np.ndarray, np.ndarray]:
    """``long_of`` in two small levels for the compiled parse (the dense 16 MiB table costs a
    cache miss per token when parsing one string after another): ``buckets[b0 | b1 << 8]`` numbers
    the 2-byte prefixes of the long symbols from 1 (0: none), ``slots[bucket << 8 | b2]`` is the
    symbol (_NONE: none; bucket 0 is all _NONE)."""
    is_long = table.lengths >= 3
    prefixes = (table.values[is_long] & np.uint64(0xFFFFFF)).astype(np.int64)
    firsts = np.unique(prefixes & 0xFFFF)
    buckets = np.zeros(1 << 16, np.uint8)
    buckets[firsts] = np.arange(1, len(firsts) + 1)  # at most 255 long symbols: fits u8
    slots = np.full((len(firsts) + 1) << 8, _NONE, np.uint8)
    slots[(buckets[prefixes & 0xFFFF].astype(np.int64) << 8) | (prefixes >> 16)] = np.flatnonzero(is_long)
    return buckets, slots


def _units(offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Parse units: each non-empty string cut into pieces of at most _UNIT bytes.

    Returns their starts, ends and the string each belongs to.
    """
    lengths = np.diff(offsets)
    pieces = (lengths + _UNIT - 1) // _UNIT
    if int(pieces.max(initial=0)) <= 1:
        owner = np.flatnonzero(lengths > 0)
        return offsets[owner], offsets[owner + 1], owner
    total = int(pieces.sum())
    owner = np.repeat(np.arange(len(lengths)), pieces)
    k = np.arange(total) - np.repeat(np.cumsum(pieces) - pieces, pieces)
    starts = offsets[owner] + k * _UNIT
    return starts, np.minimum(starts + _UNIT, offsets[owner + 1]), owner


def _parse(data: np.ndarray, starts: np.ndarray, ends: np.ndarray, table: _Table) -> tuple[np.ndarray, np.ndarray]:
    """Greedy longest-match parse of the units ``[starts, ends)`` of ``data``.

    Returns the tokens of all units in order (a symbol id, or 256 + the byte of an escaped
    literal) and the number of tokens of each unit.

    All units step together; finished ones idle in place until more than half of them are
    finished, then the step results are transposed into unit order and the rest go on.
    """
    compiled = accel.kernels()
    if compiled is not None:
        return compiled.parse(np.ascontiguousarray(data, np.uint8), starts.astype(np.int64), ends.astype(np.int64),
                              *_lookups(table))
    n = len(data)
    padded = np.empty(n + 16, np.uint8)
    padded[:n] = data
    padded[n:] = 0
    # the 8 bytes at each position, little-endian (an unaligned strided view, gathered per step)
    words = np.ndarray((n + 1,), "<u8", padded, 0, (1,))
    pos = starts.astype(np.int64)
    end = ends.astype(np.int64)
    unit = np.arange(len(pos))
    low3, low2 = np.uint64(0xFFFFFF), np.uint64(0xFFFF)
    epochs: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (units, their token counts, tokens)
    while len(pos):
        step_codes = []
        alive = pos < end
        taken = alive.astype(np.int64)
        while 2 * int(np.count_nonzero(alive)) > len(pos):
            word = words[pos]
            room = np.minimum(end - pos, 8).astype(np.uint8)  # bytes left in the unit (0 when finished)
            slot = table.long_of[(word & low3).view(np.int64)]
            long_len = table.lengths_of[slot]
            # _NONE's value never equals a masked word: no separate "is there a symbol" test
            hit_long = ((word & _MASKS[long_len]) == table.values256[slot]) & (long_len <= room)
            code = table.short_of[(word & low2).view(np.int64)]
            short_len = table.lengths_of[code]
            cut = (short_len == 2) & (room == 1)  # a 2-byte symbol would run past the unit's end
            if cut.any():
                code[cut] = table.single_of[(word[cut] & np.uint64(0xFF)).view(np.int64)]
                short_len = table.lengths_of[code]
            step_codes.append(np.where(hit_long, slot, code))
            pos += np.where(hit_long, long_len, short_len) * alive
            alive = pos < end
            taken += alive
        if step_codes:
            # unit u took a token at steps 0 .. counts[u]-1 of this epoch
            counts_now = taken - alive
            matrix = np.stack(step_codes, axis=1)
            mask = np.arange(len(step_codes))[None, :] < counts_now[:, None]
            epochs.append((unit, counts_now, matrix[mask]))
        pos, end, unit = pos[alive], end[alive], unit[alive]
    # the first epoch ran every unit, in order: its tokens are the bulk, already in unit order
    units0, counts0, tokens0 = epochs[0]
    assert len(units0) == len(starts)  # every unit is non-empty, so the first epoch ran them all
    if len(epochs) == 1:
        return tokens0, counts0
    extra_counts = np.zeros(len(starts), np.int64)
    for units, unit_counts, _ in epochs[1:]:
        extra_counts[units] += unit_counts
    # later epochs continue units of earlier ones: order their (few) tokens by unit, then insert
    # each unit's after its first-epoch tokens
    done = np.cumsum(extra_counts) - extra_counts
    extra = np.empty(int(extra_counts.sum()), np.uint16)
    for units, unit_counts, tokens in epochs[1:]:
        first = np.cumsum(unit_counts) - unit_counts
        extra[np.repeat(done[units] - first, unit_counts) + np.arange(len(tokens))] = tokens
        done[units] += unit_counts
    ids = np.insert(tokens0, np.repeat(np.cumsum(counts0), extra_counts), extra)
    return ids, counts0 + extra_counts


def _sample(data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """About SAMPLE_TARGET bytes of whole strings picked at random (seeded: output is reproducible)."""
    if len(data) <= SAMPLE_TARGET:
        return data, offsets
    n = len(offsets) - 1
    picks = np.random.default_rng(len(data)).integers(0, n, min(n, SAMPLE_TARGET))
    lengths = offsets[picks + 1] - offsets[picks]
    cum = np.cumsum(lengths)
    take = picks[: int(np.searchsorted(cum, SAMPLE_TARGET)) + 1]
    lengths = offsets[take + 1] - offsets[take]
    new_offsets = np.concatenate(([0], np.cumsum(lengths)))
    src = np.repeat(offsets[take] - new_offsets[:-1], lengths) + np.arange(int(new_offsets[-1]))
    return data[src], new_offsets


def _candidates(ids: np.ndarray, counts: np.ndarray, table: _Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Candidate symbols (values, lengths) and their gains, from the tokens of one parse."""
    compiled = accel.write_kernels()
    if compiled is not None and len(ids):
        return compiled.fsst_candidates(np.ascontiguousarray(ids, np.uint16), np.ascontiguousarray(counts, np.int64),
                                        table.lengths_of, table.values256)
    lengths = table.lengths_of[ids].astype(np.int64)
    sym_values = np.where(ids >= 256, (ids.astype(np.int64) - 256).astype(np.uint64),
                          table.values256[np.minimum(ids, 255)])
    # the first byte of each multi-byte token is a candidate too (as in FSST); single bytes
    # weigh 8 times their count, as an escaped byte costs two
    multi = lengths > 1
    values = [sym_values, sym_values[multi] & np.uint64(0xFF)]
    lens = [lengths, np.ones(int(multi.sum()), np.int64)]
    weights = [np.where(lengths == 1, 8, lengths), np.full(len(lens[1]), 8, np.int64)]
    # consecutive tokens of one unit form a pair candidate (truncated to 8 bytes)
    follows = np.ones(len(ids), np.bool_)
    follows[(np.cumsum(counts) - counts)[counts > 0]] = False
    second = np.flatnonzero(follows)
    prev = second - 1
    room = lengths[prev] < 8
    prev, second = prev[room], second[room]
    shift = (8 * lengths[prev]).astype(np.uint64)
    joined_len = np.minimum(lengths[prev] + lengths[second], 8)
    joined = (sym_values[prev] | (sym_values[second] << shift)) & _MASKS[joined_len]
    values.append(joined)
    lens.append(joined_len)
    weights.append(joined_len)
    all_values = np.concatenate(values)
    all_lens = np.concatenate(lens).astype(np.uint64)
    all_gain = np.concatenate(weights).astype(np.int64)
    # merge duplicates: the key is the value with its length (values are at most 8 bytes).
    # Sorted by (length, value) with one-word sorts (several times faster than a lexsort): a
    # value of under 8 bytes fits below its length in the top byte; 8-byte values sort last.
    # Equal keys are summed, so the sort need not be stable.
    is_full = all_lens == 8
    short = np.flatnonzero(~is_full)
    full = np.flatnonzero(is_full)
    order = np.concatenate((short[np.argsort((all_lens[short] << np.uint64(56)) | all_values[short])],
                            full[np.argsort(all_values[full])]))
    v, ln, g = all_values[order], all_lens[order], all_gain[order]
    new = np.ones(len(v), np.bool_)
    new[1:] = (v[1:] != v[:-1]) | (ln[1:] != ln[:-1])
    group_starts = np.flatnonzero(new)
    gains = np.add.reduceat(g, group_starts) if len(g) else g
    return v[group_starts], ln[group_starts].astype(np.uint8), gains


def _select(values: np.ndarray, lengths: np.ndarray, gains: np.ndarray) -> _Table:
    """The MAX_SYMBOLS candidates of highest gain, at most one 3+-byte symbol per 3-byte prefix."""
    order = np.argsort(-gains, kind="stable")
    values, lengths = values[order], lengths[order]
    keep = np.ones(len(values), np.bool_)
    long_index = np.flatnonzero(lengths >= 3)
    _, first = np.unique(values[long_index] & np.uint64(0xFFFFFF), return_index=True)
    keep[long_index] = False
    keep[long_index[first]] = True
    chosen = np.flatnonzero(keep)[:MAX_SYMBOLS]
    return _make_table(values[chosen], lengths[chosen])


def _compressed_size(ids: np.ndarray) -> int:
    return len(ids) + int((ids >= 256).sum())


def train(data: np.ndarray, offsets: np.ndarray) -> _Table:
    """Build a symbol table for the strings ``data[offsets[i]:offsets[i+1]]``."""
    sample, sample_offsets = _sample(data, offsets)
    starts, ends, _ = _units(sample_offsets)
    table = _make_table(np.zeros(0, np.uint64), np.zeros(0, np.uint8))
    best, best_size = table, 2 * len(sample) + 1
    for _ in range(_ROUNDS):
        ids, counts = _parse(sample, starts, ends, table)
        size = _compressed_size(ids)
        if size < best_size:
            best, best_size = table, size
        if not len(ids):
            break
        table = _select(*_candidates(ids, counts, table))
    ids, _ = _parse(sample, starts, ends, table)
    if _compressed_size(ids) < best_size:
        best = table
    return best


def symbol_table_bytes(table: _Table) -> bytes:
    """The 2312-byte serialized table (switch bit set: the strings are compressed)."""
    n = len(table.values)
    out = np.zeros(SYMBOL_TABLE_SIZE, np.uint8)
    header = (FSST_MAGIC << 32) | (1 << 24) | n
    out[:8] = np.frombuffer(header.to_bytes(8, "little"), np.uint8)
    out[8 : 8 + 8 * n] = table.values.astype("<u8").view(np.uint8)
    out[8 + 8 * n : 8 + 9 * n] = table.lengths
    return out.tobytes()


def compress(data: np.ndarray, offsets: np.ndarray, table: _Table) -> tuple[np.ndarray, np.ndarray]:
    """FSST-compress every string: (compressed bytes, int64 offsets into them)."""
    nstrings = len(offsets) - 1
    if not len(data):
        return np.zeros(0, np.uint8), np.zeros(nstrings + 1, np.int64)
    compiled = accel.kernels(len(data))
    if compiled is not None:
        out, new_offsets = compiled.compress_strings(np.ascontiguousarray(data, np.uint8), np.ascontiguousarray(offsets, np.int64), _UNIT,
                                             *_packed_lookups(table))
        return out, new_offsets
    starts, ends, owner = _units(offsets)
    ids, counts = _parse(data, starts, ends, table)
    escaped = ids >= 256
    out_sizes = 1 + escaped.astype(np.int64)
    out_end = np.cumsum(out_sizes)
    out = np.empty(int(out_end[-1]), np.uint8)
    at = out_end - out_sizes
    out[at] = np.where(escaped, ESCAPE, ids).astype(np.uint8)
    out[at[escaped] + 1] = (ids[escaped] - 256).astype(np.uint8)
    # output bytes per unit (every unit has at least one token), then per string
    unit_bytes = np.diff(np.concatenate(([0], out_end[np.cumsum(counts) - 1])))
    per_string = np.bincount(owner, unit_bytes, nstrings).astype(np.int64)
    new_offsets = np.zeros(nstrings + 1, np.int64)
    np.cumsum(per_string, out=new_offsets[1:])
    return out, new_offsets
