"""Kernels compiled with numba: the optional accelerator of :mod:`.encode_fsst`, :mod:`.fsst`,
:mod:`.encode_miniblock`, :mod:`.encode_compression` and :mod:`.fastlanes_pack`.

Imported only through :func:`lance_format.encodings.structural.accel.kernels`, which falls
back to the numpy code when numba is missing (``pip install lance-assets[fast]`` adds it). Each
kernel computes exactly what its numpy counterpart computes (the tests compare the bytes): the
greedy parse of ``encode_fsst._parse`` (same look-up tables, same cuts every ``unit`` bytes),
the decoding of ``fsst._decompress`` with its corruption checks and the greedy chunk walk of
``encode_miniblock._Chunker``, FSST training's candidate counting, Arrow's dictionary encoding
of strings, FastLanes bit-packing and the ``variable`` chunk layout, but in one pass instead of
many passes over arrays (or a Python loop over chunks).

Compiled code is cached on disk (``cache=True``): next to this file when that is writable, else
in numba's per-user cache directory, else (both read-only) in the system's temporary directory.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

_config: Any = numba.config  # its settings are set at run time: no attributes for a type checker


def _cache_dir_fallback() -> None:
    """Point numba's cache at a writable place when neither its default locations are."""
    if _config.CACHE_DIR:
        return
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pycache__")
    user = os.path.join(os.path.expanduser("~"), ".cache")
    if os.access(os.path.dirname(here), os.W_OK) or os.access(user, os.W_OK):
        return
    _config.CACHE_DIR = os.path.join(tempfile.gettempdir(), f"lance-format-numba-{os.getuid()}")


_cache_dir_fallback()
_jit = numba.njit(cache=True, nogil=True)


@intrinsic
def _load_u64(typingctx, array, index):  # type: ignore[no-untyped-def]
    """The 8 bytes at ``array[index]`` as one little-endian word, unaligned, without bounds tests
    (callers make sure 8 bytes remain). One load instead of eight byte loads and shifts."""
    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        data = context.make_array(signature.args[0])(context, builder, args[0])
        pointer = builder.bitcast(builder.gep(data.data, [args[1]]), ir.IntType(64).as_pointer())
        return builder.load(pointer, align=1)
    return types.uint64(array, types.intp), codegen


@intrinsic
def _store_u64(typingctx, array, index, value):  # type: ignore[no-untyped-def]
    """Write a word as 8 little-endian bytes at ``array[index]``, unaligned, without bounds tests."""
    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        data = context.make_array(signature.args[0])(context, builder, args[0])
        pointer = builder.bitcast(builder.gep(data.data, [args[1]]), ir.IntType(64).as_pointer())
        builder.store(args[2], pointer, align=1)
        return context.get_dummy_value()
    return types.void(array, types.intp, types.uint64), codegen


# status codes of the decoder (the caller raises the matching typed error)
OK = 0
ENDS_WITH_ESCAPE = 1
UNKNOWN_CODE = 2
BAD_OFFSETS = 3
SHORT_BUFFER = 4
OUTSIDE = 5
NOT_INCREASING = 6


_MASKS = np.array([0] + [(1 << (8 * k)) - 1 for k in range(1, 8)] + [(1 << 64) - 1], np.uint64)


@_jit
def parse(data, starts, ends, buckets, slots, short_of, single_of, values256, lengths_of):  # type: ignore[no-untyped-def]
    """``encode_fsst._parse``: the greedy parse of the units ``[starts, ends)``: the tokens (a
    symbol id, or 256 + an escaped byte) and their counts per unit.

    The token step is written out here rather than in a helper function: numba compiles such a
    helper into code several times slower.
    """
    n = data.shape[0]
    # the last bytes again, followed by zeros: the 8 bytes at any position are read with one
    # load, from the data where 8 remain, else from this tail (as if the data were zero-padded)
    tail_start = max(n - 8, 0)
    tail = np.zeros(16, np.uint8)
    tail[: n - tail_start] = data[tail_start:]
    total = 0
    for u in range(starts.shape[0]):
        total += ends[u] - starts[u]
    tokens = np.empty(total, np.uint16)
    counts = np.zeros(starts.shape[0], np.int64)
    t = 0
    for u in range(starts.shape[0]):
        p = starts[u]
        end = ends[u]
        first = t
        while p < end:
            room = min(end - p, 8)
            word = _load_u64(data, p) if p + 8 <= n else _load_u64(tail, p - tail_start)
            # the symbol of >= 3 bytes starting with the next 3 bytes (see encode_fsst._lookups)
            bucket = np.int64(buckets[np.int64(word & np.uint64(0xFFFF))])
            slot = np.int64(slots[(bucket << 8) | np.int64((word >> np.uint64(16)) & np.uint64(0xFF))])
            long_len = np.int64(lengths_of[slot])
            if long_len >= 3 and long_len <= room and (word & _MASKS[long_len]) == values256[slot]:
                code = slot
                length = long_len
            else:
                code = np.int64(short_of[np.int64(word & np.uint64(0xFFFF))])
                length = np.int64(lengths_of[code])
                if length == 2 and room == 1:  # a 2-byte symbol would run past the unit's end
                    code = np.int64(single_of[np.int64(word & np.uint64(0xFF))])
                    length = np.int64(lengths_of[code])
            tokens[t] = code
            t += 1
            p += length
        counts[u] = t - first
    return tokens[:t].copy(), counts


_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)


@_jit
def compress_strings(data, offsets, unit, buckets, slots, short_of, single_of, slot_values):  # type: ignore[no-untyped-def]
    """``encode_fsst.compress``: the code bytes of all strings and their offsets.

    The parse of :func:`parse`, each string cut into units of ``unit`` bytes, with the look-ups
    of ``encode_fsst._packed_lookups``: each entry carries its token's length, and the value
    of the 3+-byte symbol of each slot is read from ``slot_values`` at the slot's index, in
    parallel with the slot (no dependent look-up by symbol id); an empty slot holds a 3-byte
    "symbol" whose value has bit 63 set, which no 3 bytes match. The symbol's length mask is a
    shift, not a look-up.

    One string after another: measured faster than interleaving two halves of the strings (the
    cost is the mispredicted choice between a long and a short symbol, not the chain of loads).
    The strings that end at least 8 bytes before the data does are parsed first, with plain
    8-byte loads; the last few read their final bytes from a zero-padded copy.
    """
    n = data.shape[0]
    nstrings = offsets.shape[0] - 1
    tail_start = max(n - 8, 0)
    tail = np.zeros(16, np.uint8)
    tail[: n - tail_start] = data[tail_start:]
    out = np.empty(2 * (offsets[nstrings] - offsets[0]) + 1, np.uint8)
    new_offsets = np.zeros(nstrings + 1, np.int64)
    safe = nstrings  # strings [0, safe) end at least 8 bytes before the data does
    while safe > 0 and offsets[safe] + 8 > n:
        safe -= 1
    t = 0
    for i in range(nstrings):
        new_offsets[i] = t
        p = offsets[i]
        end = offsets[i + 1]
        while p < end:
            stop = min(p + unit, end)
            while p < stop:
                room = min(stop - p, 8)
                if i < safe:
                    word = _load_u64(data, p)
                else:
                    word = _load_u64(data, p) if p + 8 <= n else _load_u64(tail, p - tail_start)
                slot = (np.int64(buckets[np.int64(word & np.uint64(0xFFFF))]) << 8) | np.int64(
                    (word >> np.uint64(16)) & np.uint64(0xFF))
                entry = np.int64(slots[slot])
                short = np.int64(short_of[np.int64(word & np.uint64(0xFFFF))])
                long_len = entry >> 12
                if long_len <= room and (word & (_ONES >> np.uint64(64 - 8 * long_len))) == slot_values[slot]:
                    code = entry & 0xFF
                    length = long_len
                else:
                    code = short & 0x1FF
                    length = short >> 12
                    if length == 2 and room == 1:  # a 2-byte symbol would run past the unit's end
                        short = np.int64(single_of[np.int64(word & np.uint64(0xFF))])
                        code = short & 0x1FF
                        length = short >> 12
                if code >= 256:
                    out[t] = 255
                    out[t + 1] = code - 256
                    t += 2
                else:
                    out[t] = code
                    t += 1
                p += length
    new_offsets[nstrings] = t
    return out[:t], new_offsets


@_jit
def _decode_ranges(buf, lo, hi, words, lengths, count):  # type: ignore[no-untyped-def]
    """FSST-decode the strings whose codes are ``buf[lo[i]:hi[i]]`` (ranges already checked):
    (status, decoded bytes, their offsets).

    One pass: the output is allocated for the worst case (8 bytes per code, plus 8 for the
    last 8-byte store) and only the written part is returned. The rest is never touched, so
    the operating system never backs it with memory.
    """
    nstrings = lo.shape[0]
    out_offsets = np.zeros(nstrings + 1, np.int64)
    codes = 0
    for i in range(nstrings):
        codes += hi[i] - lo[i]
    out = np.empty(8 * codes + 8, np.uint8)
    o = 0
    for i in range(nstrings):
        j = lo[i]
        stop = hi[i]
        while j < stop:
            c = buf[j]
            if c == 255:
                if j + 1 >= stop:
                    return ENDS_WITH_ESCAPE, np.zeros(0, np.uint8), out_offsets
                out[o] = buf[j + 1]
                o += 1
                j += 2
            elif c >= count:
                return UNKNOWN_CODE, np.zeros(0, np.uint8), out_offsets
            else:
                _store_u64(out, o, words[c])
                o += lengths[c]
                j += 1
        out_offsets[i + 1] = o
    return OK, out[:o], out_offsets


@_jit
def decompress(codes, bounds, words, lengths, count):  # type: ignore[no-untyped-def]
    """``fsst._decompress``: (status, decoded bytes, their offsets) for codes cut at ``bounds``.

    ``words`` are the symbols as little-endian u64 (zero-padded), ``lengths`` their lengths.
    """
    nstrings = bounds.shape[0] - 1
    for i in range(nstrings):
        if bounds[i] < 0 or bounds[i + 1] < bounds[i] or bounds[i + 1] > codes.shape[0]:
            return BAD_OFFSETS, np.zeros(0, np.uint8), np.zeros(nstrings + 1, np.int64)
    return _decode_ranges(codes, bounds[:-1], bounds[1:], words, lengths, count)


@_jit
def _read_offset(buf, at, width):  # type: ignore[no-untyped-def]
    if width == 4:
        return (np.int64(buf[at]) | (np.int64(buf[at + 1]) << 8) | (np.int64(buf[at + 2]) << 16)
                | (np.int64(buf[at + 3]) << 24))
    return np.int64(_load_u64(buf, at))


@_jit
def fsst_chunks(buf, starts, sizes, counts, width, words, lengths, count):  # type: ignore[no-untyped-def]
    """``chunk_codecs.FsstChunks`` over ``VariableChunks``: the mini-block chunks' string offsets
    checked as ``VariableChunks.decode`` checks them (same order, same errors), then the codes
    decoded straight from the chunks (no gathered copy of codes and offsets).
    Returns (status, decoded bytes, their offsets)."""
    n = starts.shape[0]
    nstrings = 0
    for c in range(n):
        if sizes[c] < (counts[c] + 1) * width or starts[c] < 0 or starts[c] + sizes[c] > buf.shape[0]:
            return SHORT_BUFFER, np.zeros(0, np.uint8), np.zeros(1, np.int64)
        nstrings += counts[c]
    for c in range(n):
        first = _read_offset(buf, starts[c], width)
        last = _read_offset(buf, starts[c] + counts[c] * width, width)
        if first < (counts[c] + 1) * width or last > sizes[c]:
            return OUTSIDE, np.zeros(0, np.uint8), np.zeros(1, np.int64)
    lo = np.empty(nstrings, np.int64)
    hi = np.empty(nstrings, np.int64)
    i = 0
    for c in range(n):
        s = starts[c]
        previous = s + _read_offset(buf, s, width)
        for k in range(1, counts[c] + 1):
            current = s + _read_offset(buf, s + k * width, width)
            if current < previous:
                return NOT_INCREASING, np.zeros(0, np.uint8), np.zeros(1, np.int64)
            lo[i] = previous
            hi[i] = current
            i += 1
            previous = current
    return _decode_ranges(buf, lo, hi, words, lengths, count)


@_jit
def chunk_starts(cost, end_of, has_levels, total_levels, n, max_chunk, min_chunk, target_bytes,  # type: ignore[no-untyped-def]
                 chunk_overhead, header, level_streams, num_buffers, hard, max_levels):
    """``encode_miniblock._Chunker.chunks`` for a cost prefix: the chunk starts, or None when an
    item cannot fit."""
    starts = np.empty(n + 1, np.int64)
    count = 0
    fixed = header + 7 + 8 * level_streams + 8 * num_buffers
    p = 0
    while p < n:
        starts[count] = p
        count += 1
        if n - p <= max_chunk:  # the rest as the final chunk?
            smallest = n - p <= min_chunk
            value_bytes = np.float64(cost[n] - cost[p]) + chunk_overhead
            levels = total_levels - end_of[p] if has_levels else 0
            if ((value_bytes <= target_bytes or smallest) and levels <= max_levels
                    and fixed + 2 * levels * level_streams + value_bytes <= hard):
                break
        k = max_chunk
        budget = cost[p] + (target_bytes - chunk_overhead)
        within = np.searchsorted(cost, budget, side="right") - 1 - p
        while k > min_chunk and k > within:
            k //= 2
        step = 0
        while k >= min_chunk:
            if p + k < n:
                smallest = k <= min_chunk
                value_bytes = np.float64(cost[p + k] - cost[p]) + chunk_overhead
                levels = end_of[p + k] - end_of[p] if has_levels else 0
                if ((value_bytes <= target_bytes or smallest) and levels <= max_levels
                        and fixed + 2 * levels * level_streams + value_bytes <= hard):
                    step = k
                    break
            k //= 2
        if step == 0:
            return None
        p += step
    return starts[:count].copy()


@_jit
def copy_ranges(out, dst, data, src, sizes):  # type: ignore[no-untyped-def]
    """``out[dst[i]:dst[i] + sizes[i]] = data[src[i]:src[i] + sizes[i]]`` for every i."""
    for i in range(dst.shape[0]):
        d = dst[i]
        s = src[i]
        out[d : d + sizes[i]] = data[s : s + sizes[i]]


# FastLanes transposition: value r of a lane is block element _FL_ROW[r] + lane (r < 64), as in
# fastlanes_pack (FL_ORDER[r // 8] * 16 + (r % 8) * 128)
_FL_ROW = np.array([(0, 4, 2, 6, 1, 5, 3, 7)[r // 8] * 16 + (r % 8) * 128 for r in range(64)], np.int64)


@_jit
def pack_blocks_into(out, dest, values, starts, counts, bits):  # type: ignore[no-untyped-def]
    """``fastlanes_pack.pack_blocks`` of the zero-padded blocks ``values[starts[i]:starts[i] +
    counts[i]]`` (each at most 1024 values) at ``bits[i]`` bits, written to ``out`` (the values'
    word type) from word ``dest[i]``: one pass, no padded copy of the blocks."""
    width = out.itemsize * 8
    lanes = 1024 // width
    full = np.uint64(0xFFFFFFFFFFFFFFFF) >> np.uint64(64 - width)
    for i in range(starts.shape[0]):
        b = bits[i]
        if b == 0:
            continue
        s = starts[i]
        count = counts[i]
        base = dest[i]
        for lane in range(lanes):
            acc = np.uint64(0)
            used = 0  # bits of acc already holding values
            word = 0
            for r in range(width):
                e = _FL_ROW[r] + lane
                v = np.uint64(values[s + e]) if e < count else np.uint64(0)
                acc |= v << np.uint64(used)
                used += b
                if used >= width:
                    out[base + word * lanes + lane] = acc & full
                    word += 1
                    used -= width
                    acc = v >> np.uint64(b - used) if used > 0 else np.uint64(0)


@_jit
def dictionary_encode(data, offsets, limit):  # type: ignore[no-untyped-def]
    """``pyarrow.Array.dictionary_encode`` of the strings ``data[offsets[i]:offsets[i+1]]``: (each
    string's index as uint32, the first occurrence of each distinct string in order of first
    occurrence), the order Arrow gives. Gives up as soon as more than ``limit`` distinct strings
    are seen: then the indices are empty.

    An open-addressing hash table of the strings' hashes, grown at half full. A match is
    confirmed by the hash, the length and the first 8 bytes (kept per distinct string), then
    the rest of the bytes, 8 at a time (written out: a helper taking the arrays compiles into
    much slower code).
    """
    n = offsets.shape[0] - 1
    size = data.shape[0]
    tail_start = max(size - 8, 0)
    tail = np.zeros(16, np.uint8)
    tail[: size - tail_start] = data[tail_start:]
    indices = np.empty(n, np.uint32)
    room = min(n, limit + 1)
    firsts = np.empty(room, np.int64)
    hashes = np.empty(room, np.uint64)
    heads = np.empty(room, np.uint64)
    lengths = np.empty(room, np.int64)
    capacity = 1024
    table = np.zeros(capacity, np.int64)  # distinct id + 1, 0: empty
    count = 0
    multiplier = np.uint64(0x9E3779B97F4A7C15)
    for i in range(n):
        start = offsets[i]
        length = offsets[i + 1] - start
        take = min(length, 8)
        head = (_load_u64(data, start) if start + 8 <= size else _load_u64(tail, start - tail_start)) & _MASKS[take]
        h = (np.uint64(length) * multiplier ^ head) * multiplier
        at = start + take
        left = length - take
        while left > 0:
            take = min(left, 8)
            word = _load_u64(data, at) if at + 8 <= size else _load_u64(tail, at - tail_start)
            h = (h ^ (word & _MASKS[take])) * multiplier
            at += take
            left -= take
        h ^= h >> np.uint64(29)
        slot = np.int64(h & np.uint64(capacity - 1))
        while True:
            entry = table[slot]
            if entry == 0:
                if count == limit:
                    return np.zeros(0, np.uint32), firsts
                firsts[count] = i
                hashes[count] = h
                heads[count] = head
                lengths[count] = length
                count += 1
                table[slot] = count
                indices[i] = count - 1
                if 2 * count > capacity:  # grow: re-insert every distinct string by its hash
                    capacity *= 4
                    table = np.zeros(capacity, np.int64)
                    for d in range(count):
                        s = np.int64(hashes[d] & np.uint64(capacity - 1))
                        while table[s] != 0:
                            s = (s + 1) & (capacity - 1)
                        table[s] = d + 1
                break
            d = entry - 1
            if hashes[d] == h and lengths[d] == length and heads[d] == head:
                same = True
                other = offsets[firsts[d]]
                k = 8
                while k < length:
                    take = min(length - k, 8)
                    a = start + k
                    b = other + k
                    word_a = _load_u64(data, a) if a + 8 <= size else _load_u64(tail, a - tail_start)
                    word_b = _load_u64(data, b) if b + 8 <= size else _load_u64(tail, b - tail_start)
                    if (word_a ^ word_b) & _MASKS[take]:
                        same = False
                        break
                    k += take
                if same:
                    indices[i] = d
                    break
            slot = (slot + 1) & (capacity - 1)
    return indices, firsts[:count].copy()


@_jit
def fsst_candidates(ids, counts, lengths_of, values256):  # type: ignore[no-untyped-def]
    """``encode_fsst._candidates``: the candidate symbols of one parse's tokens (each token; the
    first byte of each multi-byte token; each pair of consecutive tokens of a unit, cut to 8
    bytes) with their gains summed, as (values, lengths, gains) sorted by (length, value).

    The candidates are summed in an open-addressing hash table keyed by (value, length); only
    the distinct ones are sorted.
    """
    m = ids.shape[0]
    size = 3 * m
    cand_values = np.empty(size, np.uint64)
    cand_lengths = np.empty(size, np.int64)
    cand_gains = np.empty(size, np.int64)
    c = 0
    unit = 0
    left = counts[0] if counts.shape[0] else 0  # tokens left in the current unit
    previous_value = np.uint64(0)
    previous_length = 8  # no pair with the first token of a unit
    for k in range(m):
        while left == 0:
            unit += 1
            left = counts[unit]
            previous_length = 8
        left -= 1
        token = np.int64(ids[k])
        length = np.int64(lengths_of[token])
        value = np.uint64(token - 256) if token >= 256 else values256[token]
        cand_values[c] = value
        cand_lengths[c] = length
        cand_gains[c] = 8 if length == 1 else length
        c += 1
        if length > 1:
            cand_values[c] = value & np.uint64(0xFF)
            cand_lengths[c] = 1
            cand_gains[c] = 8
            c += 1
        if previous_length < 8:
            joined_length = min(previous_length + length, 8)
            cand_values[c] = (previous_value | (value << np.uint64(8 * previous_length))) & _MASKS[joined_length]
            cand_lengths[c] = joined_length
            cand_gains[c] = joined_length
            c += 1
        previous_value = value
        previous_length = length
    capacity = 1024
    while capacity < 2 * c:
        capacity *= 2
    table = np.zeros(capacity, np.int64)  # distinct candidate + 1, 0: empty
    distinct_values = np.empty(c, np.uint64)
    distinct_lengths = np.empty(c, np.int64)
    distinct_gains = np.zeros(c, np.int64)
    distinct = 0
    for j in range(c):
        value = cand_values[j]
        length = cand_lengths[j]
        h = (value ^ np.uint64(length)) * np.uint64(0x9E3779B97F4A7C15)
        slot = np.int64((h >> np.uint64(32)) & np.uint64(capacity - 1))
        while True:
            entry = table[slot]
            if entry == 0:
                distinct_values[distinct] = value
                distinct_lengths[distinct] = length
                distinct_gains[distinct] = cand_gains[j]
                distinct += 1
                table[slot] = distinct
                break
            d = entry - 1
            if distinct_values[d] == value and distinct_lengths[d] == length:
                distinct_gains[d] += cand_gains[j]
                break
            slot = (slot + 1) & (capacity - 1)
    # sort by (length, value): under 8 bytes the length fits above the value; 8-byte values last
    short = 0
    for d in range(distinct):
        if distinct_lengths[d] < 8:
            short += 1
    short_keys = np.empty(short, np.uint64)
    short_index = np.empty(short, np.int64)
    full_keys = np.empty(distinct - short, np.uint64)
    full_index = np.empty(distinct - short, np.int64)
    a = 0
    b = 0
    for d in range(distinct):
        if distinct_lengths[d] < 8:
            short_keys[a] = (np.uint64(distinct_lengths[d]) << np.uint64(56)) | distinct_values[d]
            short_index[a] = d
            a += 1
        else:
            full_keys[b] = distinct_values[d]
            full_index[b] = d
            b += 1
    order = np.concatenate((short_index[np.argsort(short_keys)], full_index[np.argsort(full_keys)]))
    return distinct_values[order], distinct_lengths[order].astype(np.uint8), distinct_gains[order]


@_jit
def write_variable_chunks(out, positions, offsets, data, starts, counts, width, pad):  # type: ignore[no-untyped-def]
    """``encode_compression.VariablePlan.encode`` written straight into its final place: chunk
    ``c`` (items ``starts[c]`` .. ``+ counts[c]``) at ``out[positions[c]:]``: its ``counts[c] + 1``
    offsets (``width`` bytes each, little-endian, relative to the chunk's start), its bytes,
    then ``pad`` up to a multiple of ``width``."""
    for c in range(starts.shape[0]):
        at = positions[c]
        s = starts[c]
        n = counts[c]
        head = (n + 1) * width
        base = offsets[s] - head
        # 8-byte stores: with 4-byte offsets each store's upper half is overwritten by the next
        # offset; the last offset is stored byte by byte so nothing spills past the chunk's head
        for k in range(n):
            _store_u64(out, at + k * width, np.uint64(offsets[s + k] - base))
        last = offsets[s + n] - base
        for byte in range(width):
            out[at + n * width + byte] = (last >> (8 * byte)) & 0xFF
        size = offsets[s + n] - offsets[s]
        body = at + head
        out[body : body + size] = data[offsets[s] : offsets[s] + size]
        for k in range((-(head + size)) % width):
            out[body + size + k] = pad
