"""More kernels of the reader compiled with numba (see :mod:`.numba_kernels`, whose cache settings
and helpers they share): the parsing of mini-block chunk headers.

Imported only through :func:`lance_format.encodings.structural.accel.read_kernels`. Each kernel
computes exactly what its numpy counterpart in :mod:`.miniblock` computes, with the same checks
in the same order.
"""

from __future__ import annotations

import numpy as np

from lance_format.encodings.structural.numba_kernels import _jit, _load_u32

# statuses of chunk_headers (the caller raises the matching typed error)
HEADERS_OK = 0
SHORTER_THAN_HEADER = 1
BUFFERS_PAST_END = 2


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
def list_layer(rep, defs, max_level, valid_level, null_level, empty_level, upper_null):  # type: ignore[no-untyped-def]
    """One list layer of ``repdef.unravel`` with definition levels, in two passes instead of a
    dozen array passes: an entry with a nonzero repetition level starts a list; a start whose
    level is above ``max_level`` is invisible (a null or empty ancestor), one at ``null_level``
    or above ``upper_null`` (but visible) is a null list, one at ``empty_level`` an empty list.

    Returns (offsets of the visible lists (n + 1, int64), their validity (~null), the
    repetition levels of the starts minus one, the definition levels of the starts, the number
    of items: entries that are not item-less starts)."""
    n = rep.shape[0]
    starts = 0
    for i in range(n):
        if rep[i] != 0:
            starts += 1
    created = 0
    for i in range(n):
        if rep[i] != 0 and defs[i] <= max_level:
            created += 1
    offsets = np.empty(created + 1, np.int64)
    valid = np.empty(created, np.bool_)
    next_rep = np.empty(starts, rep.dtype)
    next_def = np.empty(starts, defs.dtype)
    skipped = 0  # item-less starts so far
    j = 0
    k = 0
    for i in range(n):
        if rep[i] == 0:
            continue
        d = defs[i]
        next_rep[j] = rep[i] - 1
        next_def[j] = d
        j += 1
        if d > max_level:
            skipped += 1
            continue
        null = d > valid_level and (d == null_level or d > upper_null)
        offsets[k] = i - skipped
        valid[k] = not null
        k += 1
        if null or d == empty_level:
            skipped += 1
    total = n - skipped
    offsets[created] = total
    return offsets, valid, next_rep, next_def, total
