"""More kernels of the reader compiled with numba (see :mod:`.numba_kernels`, whose cache settings
and helpers they share): the parsing of mini-block chunk headers, the unpacking of out-of-line
bit-packed 16-bit levels, and the list layers of rep/def levels (with and without definition
levels).

Imported only through :func:`lance_format.encodings.structural.accel.read_kernels`. Each kernel
computes exactly what its numpy counterpart in :mod:`.decode_miniblock` computes, with the same checks
in the same order.
"""

from __future__ import annotations

import numpy as np

from lance_format.encodings.structural.numba_kernels import _jit, _load_u32, fastlanes_unpack

# statuses of chunk_headers (the caller raises the matching typed error)
HEADERS_OK = 0
SHORTER_THAN_HEADER = 1
BUFFERS_PAST_END = 2
# statuses of unpack_u16 (the caller raises the matching typed error)
UNPACK_OK = 0
UNPACK_SIZE_MISMATCH = 1
UNPACK_PAST_END = 2


@_jit
def _u16(buf, at):  # type: ignore[no-untyped-def]
    return np.int64(buf[at]) | (np.int64(buf[at + 1]) << 8)


@_jit
def chunk_headers(buf, starts, ends, has_rep, has_def, size_bytes, num_buffers):  # type: ignore[no-untyped-def]
    """``MiniBlockPage._decode_raw``'s header parsing of the chunks ``buf[starts[i]:ends[i]]``:
    ``u16 num_levels | [u16 rep bytes] | [u16 def bytes] | num_buffers x (u16|u32) sizes``,
    padded to 8, then the rep levels, def levels and value buffers, each padded to 8.

    Returns (status, num_levels, rep sizes, def sizes, rep starts, def starts, buffer sizes
    (n, num_buffers), buffer starts (n, num_buffers)); sizes and starts of absent levels are 0.
    """
    n = starts.shape[0]
    header = 2 + 2 * has_rep + 2 * has_def + size_bytes * num_buffers
    padded_header = (header + 7) // 8 * 8
    num_levels = np.zeros(n, np.int64)
    rep_size = np.zeros(n, np.int64)
    def_size = np.zeros(n, np.int64)
    rep_at = np.zeros(n, np.int64)
    def_at = np.zeros(n, np.int64)
    sizes = np.zeros((n, num_buffers), np.int64)
    buf_starts = np.zeros((n, num_buffers), np.int64)
    for c in range(n):
        if ends[c] - starts[c] < header:
            return SHORTER_THAN_HEADER, num_levels, rep_size, def_size, rep_at, def_at, sizes, buf_starts
    past_end = False
    for c in range(n):
        s = starts[c]
        num_levels[c] = _u16(buf, s)
        pos = s + 2
        if has_rep:
            rep_size[c] = _u16(buf, pos)
            pos += 2
        if has_def:
            def_size[c] = _u16(buf, pos)
            pos += 2
        for k in range(num_buffers):
            sizes[c, k] = np.int64(_load_u32(buf, pos)) if size_bytes == 4 else _u16(buf, pos)
            pos += size_bytes
        at = s + padded_header
        if has_rep:
            rep_at[c] = at
            at += (rep_size[c] + 7) // 8 * 8
        if has_def:
            def_at[c] = at
            at += (def_size[c] + 7) // 8 * 8
        for k in range(num_buffers):
            buf_starts[c, k] = at
            at += (sizes[c, k] + 7) // 8 * 8
        if at > ends[c]:
            past_end = True
    status = BUFFERS_PAST_END if past_end else HEADERS_OK
    return status, num_levels, rep_size, def_size, rep_at, def_at, sizes, buf_starts


@_jit
def list_layer(rep, defs, max_level, valid_level, null_level, empty_level, upper_null,  # type: ignore[no-untyped-def]
               outermost):
    """One list layer of ``repdef.unravel`` with definition levels, in one pass instead of a
    dozen array passes: an entry with a nonzero repetition level starts a list; a start whose
    level is above ``max_level`` is invisible (a null or empty ancestor), one at ``null_level``
    or above ``upper_null`` (but visible) is a null list, one at ``empty_level`` an empty list.

    Returns (offsets of the visible lists (n + 1, int64), their validity (~null), the
    repetition levels of the starts minus one, the definition levels of the starts (both empty
    when ``outermost``: the top layer, no layer above needs them), the number of items: entries that are not
    item-less starts).

    Branch-free: every entry writes its slot and only starts (visible starts) advance the
    output positions, because lists of one or two items make "is this a start" a coin flip
    for the branch predictor. The outputs are allocated for the worst case (every entry a
    start) and cut: memory never written is never touched."""
    n = rep.shape[0]
    offsets = np.empty(n + 1, np.int64)
    valid = np.empty(n + 1, np.bool_)
    next_size = 1 if outermost else n + 1
    next_rep = np.empty(next_size, rep.dtype)
    next_def = np.empty(next_size, defs.dtype)
    skipped = np.int64(0)  # item-less starts so far
    j = np.int64(0)
    k = np.int64(0)
    for i in range(n):
        r = rep[i]
        d = np.int64(defs[i])
        start = np.int64(r != 0)
        if not outermost:
            next_rep[j] = r - start
            next_def[j] = defs[i]
        j += start
        visible = start & np.int64(d <= max_level)
        null = np.int64(d > valid_level) & (np.int64(d == null_level) | np.int64(d > upper_null))
        offsets[k] = i - skipped
        valid[k] = null == 0
        k += visible
        skipped += start & ((1 - visible) | null | np.int64(d == empty_level))
    total = n - skipped
    offsets[k] = total
    starts = 0 if outermost else j
    return offsets[: k + 1].copy(), valid[:k].copy(), next_rep[:starts], next_def[:starts], total


@_jit
def list_starts(rep, outermost):  # type: ignore[no-untyped-def]
    """One list layer of ``repdef.unravel`` without definition levels (every list valid and
    non-empty): an entry with a nonzero repetition level starts a list. One pass instead of
    ``flatnonzero``, an append and a gather.

    Returns (the starts followed by ``len(rep)`` (int64), the repetition levels of the starts
    minus one (empty when ``outermost``)). Branch-free as :func:`list_layer`."""
    n = rep.shape[0]
    offsets = np.empty(n + 1, np.int64)
    next_rep = np.empty(1 if outermost else n, rep.dtype)
    k = np.int64(0)
    for i in range(n):
        r = rep[i]
        start = np.int64(r != 0)
        offsets[k] = i
        if not outermost:
            next_rep[k] = r - start
        k += start
    offsets[k] = n
    return offsets[: k + 1].copy(), next_rep[: 0 if outermost else k].copy()


@_jit
def unpack_u16(buf, starts, sizes, counts, bits):  # type: ignore[no-untyped-def]
    """``OutOfLineBitpackedBlock(16, bits).decode_many`` for ``0 < bits < 16``: each chunk
    ``buf[starts[c]:starts[c] + sizes[c]]`` holds ``counts[c]`` values as FastLanes blocks of
    ``bits`` bits, the last partial block either packed (zero-padded) or stored raw as ``u16``
    words when that is exactly what the size says. One pass over the chunks instead of a dozen
    numpy passes over them (pages of lists have many chunks of short level runs).

    Returns (status, the values); the values are valid only with ``UNPACK_OK``."""
    n = starts.shape[0]
    per_block = 1024 * bits // 16
    total = 0
    for c in range(n):
        total += counts[c]
    out = np.empty(total, np.uint16)
    block = np.empty((1, 1024), np.uint16)
    mask = np.uint64((1 << bits) - 1)
    at = 0
    for c in range(n):
        count, start, size = counts[c], starts[c], sizes[c]
        whole, tail = count // 1024, count % 1024
        words = size // 2
        raw_tail = tail > 0 and words == whole * per_block + tail
        nblocks = whole + (1 if tail > 0 and not raw_tail else 0)
        if size % 2 != 0 or words != nblocks * per_block + (tail if raw_tail else 0):
            return UNPACK_SIZE_MISMATCH, out
        if start < 0 or start + size > buf.shape[0]:
            return UNPACK_PAST_END, out
        for b in range(nblocks):
            src = start + b * per_block * 2
            keep = min(count - b * 1024, 1024)
            packed = buf[src: src + per_block * 2].view(np.uint16).reshape(1, per_block)
            if keep == 1024:  # a whole block: straight into the output
                fastlanes_unpack(packed, bits, 16, mask, out[at: at + 1024].reshape(1, 1024))
            else:
                fastlanes_unpack(packed, bits, 16, mask, block)
                for k in range(keep):
                    out[at + k] = block[0, k]
            at += keep
        if raw_tail:
            src = start + whole * per_block * 2
            for k in range(tail):
                out[at + k] = np.uint16(buf[src + 2 * k]) | (np.uint16(buf[src + 2 * k + 1]) << np.uint16(8))
            at += tail
    return UNPACK_OK, out


@_jit
def unpack_inline_blocks(buf, positions, wb, out):  # type: ignore[no-untyped-def]
    """``InlineBitpackedBlock._unpack``: block ``i`` starts at byte ``positions[i]`` of ``buf``
    with its bit width (``wb`` bytes, little-endian), followed by its FastLanes words; it is
    unpacked into row ``i`` of ``out`` ((n, 1024) words of ``wb`` bytes). Straight from the
    buffer, each block at its own width: no gathers of equal-width groups and no scatter back.

    Returns False when a width exceeds the words or a block runs past the buffer."""
    width = wb * 8
    flat = out.reshape(-1)
    for i in range(positions.shape[0]):
        p = positions[i]
        if p < 0 or p + wb > buf.shape[0]:
            return False
        bits = np.int64(0)
        for b in range(wb):
            bits |= np.int64(buf[p + b]) << (8 * b)
        if bits > width:
            return False
        per_block = 1024 * bits // width
        if p + wb + per_block * wb > buf.shape[0]:
            return False
        row = flat[i * 1024: (i + 1) * 1024]
        if bits == 0:
            row[:] = 0
            continue
        mask = np.uint64(0xFFFFFFFFFFFFFFFF) >> np.uint64(64 - bits)
        packed = buf[p + wb: p + wb + per_block * wb].view(out.dtype).reshape(1, per_block)
        fastlanes_unpack(packed, bits, width, mask, row.reshape(1, 1024))
    return True


# statuses of row_levels (the caller raises the matching typed error)
ROWS_OK = 0
ROW_MISSING = 1


@_jit
def row_levels(rep, defs, has_def, max_rep, max_visible, level_from, value_from, row_in, limit):  # type: ignore[no-untyped-def]
    """``MiniBlockPage._rows_of_levels`` in one pass per row: the levels of the rows a take asks
    for, and the indices of their visible values. Row ``i`` is the ``row_in[i]``-th row start
    (``rep == max_rep``) from level ``level_from[i]`` on (the first level of its chunk, whose
    first value is value ``value_from[i]``); it ends at the next row start or at ``limit[i]`` (the
    end of the chunks decoded with it). Each row walks only its own chunk's levels (from where
    the row before it ended, when that was in the same chunk), counting the visible ones
    (``defs <= max_visible``, or every level without ``defs``).

    Returns (status, level indices, value indices); valid only with ``ROWS_OK``."""
    total = 0
    for i in range(row_in.shape[0]):
        total += limit[i] - level_from[i]
    n = min(rep.shape[0], max(total, 0))
    levels = np.empty(n, np.int64)
    picks = np.empty(n, np.int64)
    nl = 0
    npk = 0
    pos = np.int64(0)
    vis = np.int64(0)
    seen = np.int64(-1)
    for i in range(row_in.shape[0]):
        end = min(limit[i], rep.shape[0])
        target = row_in[i]
        if i == 0 or level_from[i] != level_from[i - 1] or target <= row_in[i - 1]:
            pos = level_from[i]
            vis = value_from[i]
            seen = np.int64(-1)
        # else: a later row of the same chunk, found from where the last one ended
        while True:
            if pos >= end:
                return ROW_MISSING, levels[:0], picks[:0]
            is_start = np.int64(rep[pos] == max_rep)
            if is_start and seen + 1 == target:
                seen = target
                break
            seen += is_start
            if has_def:
                vis += np.int64(defs[pos] <= max_visible)
            else:
                vis += 1
            pos += 1
        # the row: its start, then every level up to the next row start or the limit
        while True:
            if nl >= n:
                return ROW_MISSING, levels[:0], picks[:0]
            levels[nl] = pos
            nl += 1
            if not has_def or defs[pos] <= max_visible:
                picks[npk] = vis
                npk += 1
                vis += 1
            pos += 1
            if pos >= end or rep[pos] == max_rep:
                break
    return ROWS_OK, levels[:nl].copy(), picks[:npk].copy()


# statuses of chunk_table (the caller raises the matching typed error)
TABLE_OK = 0
TABLE_ITEMS_MISMATCH = 1
TABLE_INDEX_INCONSISTENT = 2


@_jit
def chunk_table(words, num_items, index, has_index):  # type: ignore[no-untyped-def]
    """``MiniBlockPage._load``'s chunk table from the metadata words (``((bytes / 8 - 1) << 4) |
    log2(values)``) and, with ``has_index``, the repetition index ((chunks, depth + 1) rows of
    rows ending in the chunk and items of a row left unfinished at its end).

    Returns (status, values per chunk, byte offsets (chunks + 1), first row of each chunk, rows
    of each chunk, whether a chunk ends inside a row, the chunk where that row ends)."""
    n = words.shape[0]
    counts = np.empty(n, np.int64)
    offsets = np.zeros(n + 1, np.int64)
    first = np.zeros(n, np.int64)
    nrows = np.empty(n, np.int64)
    trailer = np.zeros(n, np.bool_)
    trailer_end = np.arange(n)
    total = 0
    for c in range(n):
        w = words[c]
        log = w & 0xF
        offsets[c + 1] = offsets[c] + ((w >> 4) + 1) * 8
        if c < n - 1:
            if log == 0:
                return TABLE_ITEMS_MISMATCH, counts, offsets, first, nrows, trailer, trailer_end
            counts[c] = np.int64(1) << log
            total += counts[c]
    if n:
        last = num_items - total
        counts[n - 1] = last
        log = words[n - 1] & 0xF
        if last < 0 or (log != 0 and last != (np.int64(1) << log)):
            return TABLE_ITEMS_MISMATCH, counts, offsets, first, nrows, trailer, trailer_end
    rows = 0
    for c in range(n):
        if has_index:
            trailer[c] = index[c, 1] > 0
            preamble = c > 0 and trailer[c - 1]
            nrows[c] = index[c, 0] + np.int64(trailer[c]) - np.int64(preamble)
            if nrows[c] < 0:
                return TABLE_INDEX_INCONSISTENT, counts, offsets, first, nrows, trailer, trailer_end
        else:
            nrows[c] = counts[c]
        first[c] = rows
        rows += nrows[c]
    # the chunk where a row left unfinished by chunk c ends: the first later chunk that is not
    # entirely a continuation (or the last such chunk)
    stop = -1
    for c in range(n):
        if not (nrows[c] == 0 and trailer[c]):
            stop = c
    if stop < 0:
        return TABLE_OK, counts, offsets, first, nrows, trailer, trailer_end
    for c in range(n - 1, -1, -1):
        if trailer[c]:
            trailer_end[c] = stop
        if not (nrows[c] == 0 and trailer[c]):
            stop = c
    return TABLE_OK, counts, offsets, first, nrows, trailer, trailer_end
