"""More kernels of the writer compiled with numba (see :mod:`.numba_kernels`, whose cache
settings and helpers they share): FSST training's candidate counting, Arrow's dictionary encoding
of strings, FastLanes bit-packing, the ``variable`` mini-block chunk layout and where such chunks are cut.

Imported only through :func:`lance_format.encodings.structural.accel.write_kernels`. Each kernel
computes exactly what its numpy (or Arrow) counterpart computes; the tests compare the bytes.
"""

from __future__ import annotations

import numpy as np

from lance_format.encodings.structural.numba_kernels import _MASKS, _jit, _load_u64, _store_u64

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


@_jit
def variable_chunk_counts(cost, aim, width):  # type: ignore[no-untyped-def]
    """``variable_chunks.variable_chunk_counts`` over the cost prefix ``cost`` (offsets plus
    ``width`` per value): the same walk, chunk by chunk, with the bisection inlined."""
    n = cost.shape[0] - 1
    counts = np.empty(max(n, 1), np.int64)
    k = 0
    last = 0
    while last < n:
        remaining = n - last
        limit = cost[last] + aim - width
        lo = last
        hi = n + 1
        while lo < hi:  # bisect_right(cost, limit, last)
            mid = (lo + hi) // 2
            if cost[mid] <= limit:
                lo = mid + 1
            else:
                hi = mid
        most = min(lo - 1 - last, remaining)
        if most >= 2:
            power = 1
            while power * 2 <= most:
                power *= 2
            if 2 * power > remaining:
                count = remaining if cost[n] - cost[last] + width <= aim else power
            else:
                count = power
        else:
            count = remaining if remaining < 2 else 2
        counts[k] = count
        k += 1
        last += count
    return counts[:k]
