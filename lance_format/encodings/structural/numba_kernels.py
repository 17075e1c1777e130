"""Kernels compiled with numba: the optional accelerator of :mod:`.encode_fsst`, :mod:`.decode_fsst` and
:mod:`.encode_miniblock` (the writer's other kernels are in :mod:`.numba_write_kernels`).

Imported only through :func:`lance_format.encodings.structural.accel.kernels`, which falls
back to the numpy code when numba is missing (``pip install lance-assets[fast]`` adds it). Each
kernel computes exactly what its numpy counterpart computes (the tests compare the bytes): the
greedy parse of ``encode_fsst._parse`` (same look-up tables, same cuts every ``unit`` bytes),
the decoding of ``fsst._decompress`` with its corruption checks and the greedy chunk walk of
``encode_miniblock._Chunker``, but in one pass instead of many passes over arrays (or a Python
loop over chunks).

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
def _load_u32(typingctx, array, index):  # type: ignore[no-untyped-def]
    """The 4 bytes at ``array[index]`` as one little-endian word, unaligned, without bounds tests."""
    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        data = context.make_array(signature.args[0])(context, builder, args[0])
        pointer = builder.bitcast(builder.gep(data.data, [args[1]]), ir.IntType(32).as_pointer())
        return builder.load(pointer, align=1)
    return types.uint32(array, types.intp), codegen


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
    The strings' codes are adjacent: one run for all (see :func:`_decode_run`); on any
    anomaly the string-by-string decoder names the first error.
    """
    nstrings = bounds.shape[0] - 1
    for i in range(nstrings):
        if bounds[i] < 0 or bounds[i + 1] < bounds[i] or bounds[i + 1] > codes.shape[0]:
            return BAD_OFFSETS, np.zeros(0, np.uint8), np.zeros(nstrings + 1, np.int64)
    # output positions fit 32 bits below 2 GiB of output (larger runs go string by string)
    if nstrings >= 0 and 8 * (bounds[nstrings] - bounds[0]) < 2**31:
        base = bounds[0]
        end = bounds[nstrings]
        out = np.empty(8 * (end - base) + 8, np.uint8)
        at_code = np.empty(end - base + 1, np.int32)
        o = _decode_run(codes, base, end, words, lengths, count, out, 0, at_code)
        if o >= 0:
            out_offsets = np.empty(nstrings + 1, np.int64)
            for i in range(nstrings + 1):
                position = at_code[bounds[i] - base]
                if position < 0:
                    o = -1
                    break
                out_offsets[i] = position
            if o >= 0:
                return OK, out[:o], out_offsets
    return _decode_ranges(codes, bounds[:-1], bounds[1:], words, lengths, count)


@_jit
def _read_offset(buf, at, width):  # type: ignore[no-untyped-def]
    if width == 4:
        return np.int64(_load_u32(buf, at))
    return np.int64(_load_u64(buf, at))


@_jit
def _fsst_chunks_exact(buf, starts, sizes, counts, width, words, lengths, count):  # type: ignore[no-untyped-def]
    """:func:`fsst_chunks` string by string: the reference that also names the first error
    (``VariableChunks.decode``'s checks in its order, then the decoder's). Returns (status,
    decoded bytes, their offsets)."""
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


_LOW_BITS = np.uint64(0x0101010101010101)
_HIGH_BITS = np.uint64(0x8080808080808080)


@numba.njit(cache=True, nogil=True, inline="always")
def _decode_run(buf, base, end, words, lengths, count, out, o, at_code):  # type: ignore[no-untyped-def]
    """Decode the adjacent codes ``buf[base:end]`` of whole strings into ``out`` from ``o``:
    the end position, or -1 on an unknown code or an escape ending the run. The output
    position before every code goes to ``at_code[j - base]`` (-1 for an escaped literal:
    no string may end before it) and the end position to ``at_code[end - base]``.

    8 codes per step when the next 8 bytes hold no escape (inlined into its callers: a
    called numba function measured several times slower in these loops).
    """
    limit = np.uint64(count)
    j = base
    while j < end:
        if j + 8 <= end:
            w = _load_u64(buf, j)
            x = ~w
            if ((x - _LOW_BITS) & w & _HIGH_BITS) == 0:  # no 255 byte among the 8
                c0 = w & np.uint64(0xFF)
                c1 = (w >> np.uint64(8)) & np.uint64(0xFF)
                c2 = (w >> np.uint64(16)) & np.uint64(0xFF)
                c3 = (w >> np.uint64(24)) & np.uint64(0xFF)
                c4 = (w >> np.uint64(32)) & np.uint64(0xFF)
                c5 = (w >> np.uint64(40)) & np.uint64(0xFF)
                c6 = (w >> np.uint64(48)) & np.uint64(0xFF)
                c7 = w >> np.uint64(56)
                if max(max(max(c0, c1), max(c2, c3)), max(max(c4, c5), max(c6, c7))) >= limit:
                    return -1
                p = np.uint64(j - base)
                at_code[p] = o
                _store_u64(out, o, words[c0])
                o += lengths[c0]
                at_code[p + np.uint64(1)] = o
                _store_u64(out, o, words[c1])
                o += lengths[c1]
                at_code[p + np.uint64(2)] = o
                _store_u64(out, o, words[c2])
                o += lengths[c2]
                at_code[p + np.uint64(3)] = o
                _store_u64(out, o, words[c3])
                o += lengths[c3]
                at_code[p + np.uint64(4)] = o
                _store_u64(out, o, words[c4])
                o += lengths[c4]
                at_code[p + np.uint64(5)] = o
                _store_u64(out, o, words[c5])
                o += lengths[c5]
                at_code[p + np.uint64(6)] = o
                _store_u64(out, o, words[c6])
                o += lengths[c6]
                at_code[p + np.uint64(7)] = o
                _store_u64(out, o, words[c7])
                o += lengths[c7]
                j += 8
                continue
        code = buf[j]
        if code == 255:
            if j + 1 >= end:
                return -1
            at_code[j - base] = o
            at_code[j + 1 - base] = -1  # the escaped literal: no string ends before it
            out[o] = buf[j + 1]
            o += 1
            j += 2
        elif code >= count:
            return -1
        else:
            at_code[j - base] = o
            _store_u64(out, o, words[code])
            o += lengths[code]
            j += 1
    at_code[end - base] = o
    return o


def fsst_chunks(buf, starts, sizes, counts, width, words, lengths, count):  # type: ignore[no-untyped-def]
    """``chunk_codecs.FsstChunks`` over ``VariableChunks``: the strings of the mini-block chunks
    decoded straight from the chunks (no gathered copy of codes and offsets), as
    :func:`_fsst_chunks_exact` decodes them. Returns (status, decoded bytes, their offsets).

    The decoded bytes get the worst case, 8 per code: pages never written are never backed.
    (Arrow's memory pool was tried for these outputs: mimalloc returns freed pages to the
    system within milliseconds, and faulting them back, as transparent huge pages, cost more
    system time than glibc's malloc, which keeps them.)
    """
    strings, codes, widest = _fsst_extent(buf, starts, sizes, counts, width)
    if strings >= 0:
        out = np.empty(8 * codes + 8, np.uint8)
        out_offsets = np.empty(strings + 1, np.int64)
        status, end = _fsst_chunks_into(buf, starts, counts, width, words, lengths, count, widest, out, out_offsets)
        if status == OK:
            return OK, out[:end], out_offsets
    # corrupt data: the exact kernel names the first error
    return _fsst_chunks_exact(buf, starts, sizes, counts, width, words, lengths, count)


_ANOMALY = -1


@_jit
def _fsst_extent(buf, starts, sizes, counts, width):  # type: ignore[no-untyped-def]
    """(strings, codes, the most codes in a chunk) of the chunks, or strings = -1 when their
    buffers or outer offsets are out of bounds."""
    n = starts.shape[0]
    strings = 0
    widest = 0
    codes = 0
    for c in range(n):
        if sizes[c] < (counts[c] + 1) * width or starts[c] < 0 or starts[c] + sizes[c] > buf.shape[0]:
            return -1, 0, 0
        first = _read_offset(buf, starts[c], width)
        last = _read_offset(buf, starts[c] + counts[c] * width, width)
        if first < (counts[c] + 1) * width or last > sizes[c] or last < first:
            return -1, 0, 0
        strings += counts[c]
        codes += last - first
        widest = max(widest, last - first)
    return strings, codes, widest


@_jit
def _fsst_chunks_into(buf, starts, counts, width, words, lengths, count, widest,  # type: ignore[no-untyped-def]
                      out, out_offsets):
    """The decoding of :func:`fsst_chunks` into ``out`` (8 bytes per code + 8) and
    ``out_offsets``: (OK, bytes written), or (_ANOMALY, 0) on anything the exact kernel
    must look at.

    The codes of a chunk's strings are adjacent, so each chunk is decoded as one run (no loop
    per string, whose exit mispredicts on short strings), 8 codes per step when the next 8
    bytes hold no escape; the output position before every code goes to a scratch array, from
    which the strings' offsets are read afterwards. A string may not end after an escape byte
    (its literal is marked -1 there).
    """
    n = starts.shape[0]
    out_offsets[0] = 0
    at_code = np.empty(widest + 1, np.int64)
    o = 0
    i = 0
    for c in range(n):
        s = starts[c]
        previous = _read_offset(buf, s, width)
        for k in range(1, counts[c] + 1):  # offsets index at_code below: check them first
            current = _read_offset(buf, s + k * width, width)
            if current < previous:
                return _ANOMALY, 0
            previous = current
        base = s + _read_offset(buf, s, width)
        o = _decode_run(buf, base, s + previous, words, lengths, count, out, o, at_code)
        if o < 0:
            return _ANOMALY, 0
        for k in range(1, counts[c] + 1):
            position = at_code[s + _read_offset(buf, s + k * width, width) - base]
            if position < 0:
                return _ANOMALY, 0
            i += 1
            out_offsets[i] = position
    return OK, o


@_jit
def take_strings_size(lengths, indices):  # type: ignore[no-untyped-def]
    """The bytes of the dictionary values at ``indices``, or -1 when an index is out of range."""
    size = lengths.shape[0]
    total = 0
    for i in range(indices.shape[0]):
        k = indices[i]
        if k < 0 or k >= size:
            return -1
        total += lengths[k]
    return total


@_jit
def take_strings(padded, starts, lengths, indices, out, out_offsets):  # type: ignore[no-untyped-def]
    """The dictionary values at ``indices`` (checked by :func:`take_strings_size`) into ``out``
    and ``out_offsets``, 8 bytes a step: ``padded`` (the values' bytes) has 8 spare bytes at
    its end and ``out`` 8 beyond the total, so a value's last step may run over. Dictionary
    values are short: one step each instead of Arrow's memcpy call per value."""
    o = 0
    out_offsets[0] = 0
    for i in range(indices.shape[0]):
        k = indices[i]
        start = starts[k]
        length = lengths[k]
        step = 0
        while step < length:
            _store_u64(out, o + step, _load_u64(padded, start + step))
            step += 8
        o += length
        out_offsets[i + 1] = o


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
    """``out[dst[i]:dst[i] + sizes[i]] = data[src[i]:src[i] + sizes[i]]`` for every i.

    A byte loop over unsigned indices, which LLVM turns into a vectorized copy (numba's slice
    assignment, or signed indices with their negative-index tests, measured 10x slower)."""
    for i in range(dst.shape[0]):
        d = np.uint64(dst[i])
        s = np.uint64(src[i])
        for k in range(sizes[i]):
            out[d + np.uint64(k)] = data[s + np.uint64(k)]



_FL_ORDER = np.array([0, 4, 2, 6, 1, 5, 3, 7], np.int64)


@_jit
def fastlanes_unpack(packed, bits, width, mask, out):  # type: ignore[no-untyped-def]
    """``fastlanes.unpack`` into ``out`` ((n, 1024) words, C-contiguous like ``packed``): value
    ``r`` of lane ``l`` is bits ``[r*bits, r*bits + bits)`` of the lane's words
    ``k * lanes + l``, stored at ``FL_ORDER[r // 8] * 16 + (r % 8) * 128 + l``. One pass, in
    64-bit arithmetic (``mask`` clears what a narrower word's shift leaves above ``bits``).

    The lanes are indexed with unsigned integers through flat views: with signed indices
    numba adds a negative-index test to every access, which keeps LLVM from vectorizing the
    lane loops (measured 3-5x slower)."""
    lanes = 1024 // width
    w = np.uint64(width)
    per_block = packed.shape[1]
    words = packed.reshape(-1)
    values = out.reshape(-1)
    for i in range(packed.shape[0]):
        for r in range(width):
            bit = r * bits
            k = bit // width
            shift = np.uint64(bit % width)
            dst = np.uint64(i * 1024 + _FL_ORDER[r >> 3] * 16 + (r & 7) * 128)
            src = np.uint64(i * per_block + k * lanes)
            if bit % width + bits > width:  # the value spills into the lane's next word
                above = src + np.uint64(lanes)
                up = w - shift
                for lane in range(lanes):
                    at = np.uint64(lane)
                    values[dst + at] = ((np.uint64(words[src + at]) >> shift)
                                        | (np.uint64(words[above + at]) << up)) & mask
            else:
                for lane in range(lanes):
                    at = np.uint64(lane)
                    values[dst + at] = (np.uint64(words[src + at]) >> shift) & mask
    return out
