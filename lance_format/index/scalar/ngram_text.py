"""NGRAM's text analysis, vectorized: pylance 14.0.2's trigram tokens of a string column.

pylance (tantivy) lowercases the whole value, folds it to ASCII (``AsciiFoldingFilter``), cuts
it into every run of three characters and keeps only runs of three ASCII letters or digits.
Each trigram is the token ``37**2 * c0 + 37 * c1 + c2`` with ``c`` = 1..10 for ``0``-``9`` and
11..36 for ``a``-``z``; token 0 marks a null value.

Here: ``ascii_lower``, then, for the non-ASCII values only, the per-character table of
:mod:`.ngram_folds` (lowercasing and folding together, derived from pylance's own indices); then
the trigrams of every value at once over the UTF-8 bytes (a multi-byte character is never
alphanumeric, so byte runs equal character runs).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.index.scalar.ngram_folds import fold_table

NULL_TOKEN = 0
N = 3
_FOLDS = fold_table()

# byte -> code: digits 1..10, lowercase letters 11..36. An uppercase letter can survive (a character
# whose ASCII fold is uppercase, like U+2102 -> "C"): pylance's u8 arithmetic wraps for it,
# giving (byte + 170) mod 256, and it still counts as alphanumeric.
_CODE = np.zeros(256, dtype=np.uint32)
_CODE[ord("0"):ord("9") + 1] = np.arange(1, 11)
_CODE[ord("a"):ord("z") + 1] = np.arange(11, 37)
_CODE[ord("A"):ord("Z") + 1] = (np.arange(ord("A"), ord("Z") + 1) + 170) % 256
_ALNUM = np.zeros(256, dtype=bool)
_ALNUM[[*range(ord("0"), ord("9") + 1), *range(ord("a"), ord("z") + 1), *range(ord("A"), ord("Z") + 1)]] = True


def _fold(strings: pa.Array) -> pa.Array:
    """Apply the fold table to non-null ``strings`` in one ``str.translate`` over the whole batch:
    each value gets a NUL terminator (NULs inside values become spaces first: both only separate
    trigrams), the buffer is decoded once, translated, and split back into values."""
    strings = pc.replace_substring(strings, pattern="\0", replacement=" ")
    terminated = pc.binary_join_element_wise(strings, pa.scalar("", strings.type), "\0")
    buffers = terminated.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int32)[terminated.offset:terminated.offset + len(terminated) + 1]
    text = bytes(memoryview(buffers[2])[offsets[0]:offsets[-1]]).decode("utf-8")
    parts = text.translate(_FOLDS).split("\0")
    return pa.array(parts[:-1], pa.string())


def prepare(strings: pa.Array) -> pa.Array:
    """Lowercased, ASCII-folded text (nulls stay null)."""
    if isinstance(strings, pa.ChunkedArray):
        strings = strings.combine_chunks()
    if not pa.types.is_string(strings.type):
        strings = strings.cast(pa.string())
    lower = pc.ascii_lower(strings)
    ascii_mask = pc.string_is_ascii(lower).fill_null(True)
    if pc.all(ascii_mask).as_py():
        return lower
    others = pc.invert(ascii_mask)
    return pc.replace_with_mask(lower, others, _fold(lower.filter(others)))


def trigrams(prepared: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """``(tokens, positions)``: every trigram token of every value and the position of its value
    (duplicates within a value included; null values yield :data:`NULL_TOKEN`)."""
    n = len(prepared)
    offset_type = np.int64 if pa.types.is_large_string(prepared.type) else np.int32
    buffers = prepared.buffers()
    offsets = np.frombuffer(buffers[1], dtype=offset_type)[prepared.offset:prepared.offset + n + 1].astype(np.int64)
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    base, end = int(offsets[0]), int(offsets[-1])
    raw = data[base:end]
    codes = _CODE[raw]
    alnum = _ALNUM[raw]
    lengths = np.diff(offsets)
    valid = prepared.is_valid().to_numpy(zero_copy_only=False)
    null_positions = np.flatnonzero(~valid)
    if len(raw) < N:
        return (np.zeros(len(null_positions), np.uint32), null_positions)
    starts = np.arange(len(codes) - N + 1, dtype=np.int64)
    ok = alnum[:-2] & alnum[1:-1] & alnum[2:]
    # a trigram must end inside its own value
    owner = np.repeat(np.arange(n, dtype=np.int64), lengths)[: len(starts)]
    value_end = (offsets[1:] - base)[owner]
    ok &= starts + (N - 1) < value_end
    chosen = starts[ok]
    tokens = codes[chosen] * 1369 + codes[chosen + 1] * 37 + codes[chosen + 2]
    positions = owner[ok]
    if len(null_positions):
        tokens = np.concatenate([tokens, np.zeros(len(null_positions), np.uint32)])
        positions = np.concatenate([positions, null_positions])
    return tokens.astype(np.uint32), positions


def query_tokens(text: str) -> np.ndarray:
    """The distinct trigram tokens of a search string."""
    tokens, _ = trigrams(prepare(pa.array([text], pa.string())))
    return np.unique(tokens)
