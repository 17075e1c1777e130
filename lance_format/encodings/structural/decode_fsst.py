"""FSST string decompression of 2.1/2.2 pages (Lance's ``rust/compression/fsst``), vectorized with numpy.

Symbol table (2312 bytes): a u64 LE header ``0x46535354 << 32 | switch << 24 | suffix_lim << 16 |
terminator << 8 | n``, then ``n`` 8-byte symbols, then ``n`` symbol lengths. With the switch bit
clear the strings are stored raw. Otherwise each compressed byte ``c < 255`` emits
``symbol[c][:len[c]]`` and ``255`` (escape) emits the following byte literally.

Decoding is done for all strings of a block at once: escapes are found with run arithmetic (the
bytes of a run of 255s alternate escape/literal from the run's start), every input byte becomes
a (length, symbol bytes) pair, and Arrow's binary-view to binary cast concatenates them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lance_format.encodings.buffers import DecodeContext
from lance_format.encodings.structural import accel
from lance_format.encodings.structural.decoded_blocks import Variable, concat

FSST_MAGIC = 0x46535354
SYMBOL_TABLE_SIZE = 8 + 256 * 8 + 256
ESCAPE = 255


@dataclass(frozen=True)
class SymbolTable:
    enabled: bool
    # per effective code (0-255 symbols, 256 + b the literal byte b, 512 the escape itself):
    views: pa.FixedSizeBinaryArray  # 513 16-byte Arrow binary views (u32 length, inline bytes)
    lengths: np.ndarray  # (513,) uint8: output bytes (0 for unused codes and the escape)
    count: int
    words: np.ndarray  # (256,) uint64: symbols 0-255 as little-endian words, zero-padded


def parse_symbol_table(raw: bytes, ctx: DecodeContext) -> SymbolTable:
    if len(raw) < 8:
        raise ctx.corrupt(f"FSST symbol table is {len(raw)} bytes long")
    (header,) = struct.unpack_from("<Q", raw, 0)
    if header >> 32 != FSST_MAGIC:
        raise ctx.corrupt("FSST symbol table has a bad magic number")
    count = header & 0xFF
    enabled = bool((header >> 24) & 1)
    if len(raw) < 8 + 9 * count:
        raise ctx.corrupt(f"FSST symbol table of {len(raw)} bytes cannot hold {count} symbols")
    symbols = np.zeros((513, 8), np.uint8)
    lengths = np.zeros(513, np.uint8)
    if count:
        symbols[:count] = np.frombuffer(raw, np.uint8, 8 * count, 8).reshape(count, 8)
        lengths[:count] = np.frombuffer(raw, np.uint8, count, 8 + 8 * count)
        if int(lengths[:count].max()) > 8 or int(lengths[:count].min()) < 1:
            raise ctx.corrupt("FSST symbol lengths must be between 1 and 8")
    symbols[256:512, 0] = np.arange(256)
    lengths[256:512] = 1
    views = np.zeros((513, 16), np.uint8)
    views[:, :4] = lengths.astype("<u4").view(np.uint8).reshape(513, 4)
    views[:, 4:12] = symbols
    view_array = pa.Array.from_buffers(pa.binary(16), 513, [None, pa.py_buffer(views)])
    return SymbolTable(enabled, view_array, lengths, count, symbols[:256].copy().view("<u8").reshape(256))


# Codes decoded per pass: bounds the 16-byte-per-code temporaries to 16 MiB (a scan batch of
# strings is usually one pass, so its output needs no concatenation).
_PASS_CODES = 1 << 20


def decompress(block: Variable, table: SymbolTable, ctx: DecodeContext) -> Variable:
    """Decode every string of ``block`` (its offsets index the compressed bytes)."""
    if not table.enabled:
        return block
    compiled = accel.kernels(int(block.offsets[-1] - block.offsets[0]))
    if compiled is not None:
        return _decompress_compiled(compiled, block, table, ctx)
    offsets = block.offsets
    if int(offsets[-1] - offsets[0]) > 2 * _PASS_CODES and len(offsets) > 2:
        # split at string boundaries into passes of about _PASS_CODES codes
        marks = np.searchsorted(offsets, offsets[0] + np.arange(1, (offsets[-1] - offsets[0]) // _PASS_CODES + 1)
                                * _PASS_CODES)
        cuts = np.unique(np.concatenate([[0], np.clip(marks, 1, len(offsets) - 1), [len(offsets) - 1]]))
        parts = [_decompress(Variable(offsets[a : b + 1], block.data), table, ctx)
                 for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist())]
        joined = concat(parts)
        assert isinstance(joined, Variable)  # concat keeps the kind of its blocks
        return joined
    return _decompress(block, table, ctx)


def _decompress_compiled(compiled, block: Variable, table: SymbolTable,  # type: ignore[no-untyped-def]
                         ctx: DecodeContext) -> Variable:
    offsets = block.offsets
    lo = int(offsets[0])
    codes = np.ascontiguousarray(block.data[lo: int(offsets[-1])], np.uint8)
    result = compiled.decompress(codes, (offsets - lo).astype(np.int64), table.words, table.lengths, table.count)
    return compiled_result(compiled, result, ctx)


def compiled_result(compiled, result: tuple, ctx: DecodeContext) -> Variable:  # type: ignore[no-untyped-def]
    """The block a compiled FSST decoder returned, or the typed error its status stands for."""
    status, data, new_offsets = result
    if status == compiled.ENDS_WITH_ESCAPE:
        raise ctx.corrupt("FSST data ends a string with an escape byte")
    if status == compiled.UNKNOWN_CODE:
        raise ctx.corrupt("FSST data uses a code that is not in the symbol table")
    if status == compiled.SHORT_BUFFER:
        raise ctx.corrupt("a mini-block string buffer is shorter than its offsets")
    if status == compiled.OUTSIDE:
        raise ctx.corrupt("mini-block string offsets point outside their buffer")
    if status == compiled.NOT_INCREASING:
        raise ctx.corrupt("mini-block string offsets are not increasing")
    if status != compiled.OK:
        raise ctx.corrupt("FSST string offsets decrease or run past the data")
    return Variable(new_offsets, data)


def _decompress(block: Variable, table: SymbolTable, ctx: DecodeContext) -> Variable:
    offsets = block.offsets
    lo, hi = int(offsets[0]), int(offsets[-1])
    codes = block.data[lo:hi]
    m = len(codes)
    if m == 0:
        return Variable(np.zeros(len(offsets), np.int64), np.zeros(0, np.uint8))
    top = int(codes.max())
    if top == ESCAPE:
        escapes, literals = _resolve_escapes(codes, codes == ESCAPE, offsets - lo, ctx)
        # a code missing from the table is an error unless it is an escaped literal byte
        # (with all 255 codes in use, every byte is a symbol, the escape or a literal)
        if table.count < ESCAPE:
            unknown = (codes >= table.count) & (codes != ESCAPE)
            if np.count_nonzero(unknown) != np.count_nonzero(unknown[literals]):
                raise ctx.corrupt("FSST data uses a code that is not in the symbol table")
        effective = codes.astype(np.uint16)
        effective[literals] += 256
        effective[escapes] = 512
    else:
        if top >= table.count:
            raise ctx.corrupt("FSST data uses a code that is not in the symbol table")
        effective = codes
    # One Arrow binary *view* per code: a 16-byte struct holding the length and up to 12 inline
    # bytes (our <= 8 symbol bytes), gathered by Arrow's take (about twice numpy's speed here).
    # Casting the views to binary concatenates the symbols in C++ and its offsets are the
    # running output position of every code.
    views = table.views.take(pa.array(effective))
    viewed = pa.Array.from_buffers(pa.binary_view(), m, [None, views.buffers()[1].slice(views.offset * 16, m * 16)])
    large = m * 8 >= 2**31  # a code emits at most 8 bytes
    joined = viewed.cast(pa.large_binary() if large else pa.binary())
    width = 8 if large else 4
    cum = np.frombuffer(joined.buffers()[1], f"<i{width}", m + 1, joined.offset * width)
    base = int(cum[0])
    data = np.frombuffer(joined.buffers()[2], np.uint8, int(cum[-1]) - base, base)
    # only the string boundaries are needed: widen those, not every code's running position
    return Variable(cum[offsets - lo].astype(np.int64) - base, data)


def _resolve_escapes(codes: np.ndarray, is_escape_byte: np.ndarray, bounds: np.ndarray,
                     ctx: DecodeContext) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the escape codes and of the literal bytes they escape.

    The bytes of a run of 255s alternate escape/literal from the run's start (a run always
    starts at a code position). Escapes are rare, so the work is done on the positions of
    255 bytes only, not on every code.
    """
    m = len(codes)
    positions = np.flatnonzero(is_escape_byte)
    starts = np.ones(positions.size, np.bool_)
    starts[1:] = positions[1:] != positions[:-1] + 1
    first = np.flatnonzero(starts)
    run_of = np.cumsum(starts) - 1
    within = np.arange(positions.size) - first[run_of]
    escapes = positions[within % 2 == 0]
    ends = bounds[1:-1]
    ends = ends[(ends > 0) & (ends <= m)]
    if escapes.size:
        # a string's last code must not be an escape (both arrays are sorted: no set operation)
        at = np.minimum(np.searchsorted(escapes, ends - 1), escapes.size - 1)
        if int(escapes[-1]) == m - 1 or bool((escapes[at] == ends - 1).any()):
            raise ctx.corrupt("FSST data ends a string with an escape byte")
    return escapes, escapes + 1
