"""NGRAM's text analysis, vectorized: pylance 14.0.2's trigram tokens of a string column.

pylance (tantivy) lowercases the whole value, folds it to ASCII (``AsciiFoldingFilter``), cuts
it into every run of three characters and keeps only runs of three ASCII letters or digits.
Each trigram is the token ``37**2 * c0 + 37 * c1 + c2`` with ``c`` = 1..10 for ``0``-``9`` and
11..36 for ``a``-``z``; token 0 marks a null value.

Here, for a whole batch at once with numpy: ASCII bytes are lowercased; where there are
non-ASCII characters, the UTF-8 is decoded to code points and each is replaced by its entry in
:mod:`.ngram_folds` (lowercasing and folding together, derived from pylance's own indices) or,
when it has none, by a separator; then every value's trigrams are read off the folded bytes.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_format.index.scalar.ngram_folds import fold_table

NULL_TOKEN = 0
N = 3

# byte -> code: digits 1..10, lowercase letters 11..36. An uppercase letter can survive (a character
# whose ASCII fold is uppercase, like U+2102 -> "C"): pylance's u8 arithmetic wraps for it,
# giving (byte + 170) mod 256, and it still counts as alphanumeric.
_CODE = np.zeros(256, dtype=np.uint32)
_CODE[ord("0"):ord("9") + 1] = np.arange(1, 11)
_CODE[ord("a"):ord("z") + 1] = np.arange(11, 37)
_CODE[ord("A"):ord("Z") + 1] = (np.arange(ord("A"), ord("Z") + 1) + 170) % 256
_ALNUM = np.zeros(256, dtype=bool)
_ALNUM[[*range(ord("0"), ord("9") + 1), *range(ord("a"), ord("z") + 1), *range(ord("A"), ord("Z") + 1)]] = True


def _fold_arrays() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The fold table as arrays: sorted code points, each one's replacement start and length in
    a flat array of replacement bytes."""
    table = sorted(fold_table().items())
    keys = np.array([code for code, _ in table], dtype=np.uint32)
    texts = [text.encode("ascii") for _, text in table]
    lengths = np.array([len(t) for t in texts], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    flat = np.frombuffer(b"".join(texts), dtype=np.uint8)
    return keys, starts, lengths, flat


_FOLD_KEYS, _FOLD_STARTS, _FOLD_LENGTHS, _FOLD_BYTES = _fold_arrays()
_LOWER = np.arange(256, dtype=np.uint8)
_LOWER[ord("A"):ord("Z") + 1] += 32
_BREAKER = np.uint8(ord("-"))


def _lead_points(data: np.ndarray, leads: np.ndarray) -> np.ndarray:
    """Code points of the multi-byte UTF-8 characters whose lead bytes are at ``leads``."""
    first = data[leads].astype(np.uint32)
    width = np.where(first < 0xE0, 2, np.where(first < 0xF0, 3, 4))
    points = first & np.where(width == 2, 0x1F, np.where(width == 3, 0x0F, 0x07)).astype(np.uint32)
    padded = np.concatenate([data, np.zeros(3, np.uint8)])
    for k in (1, 2, 3):
        more = width > k
        points = np.where(more, (points << 6) | (padded[leads + k] & 0x3F).astype(np.uint32), points)
    return points


def _folded_bytes(data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The lowercased, folded ASCII text of every value at once: its bytes and the value offsets.
    Only the multi-byte characters are decoded: each becomes its fold-table text, or a separator."""
    lower = _LOWER[data]
    leads = np.flatnonzero(data >= 0xC0)
    if not len(leads):
        return lower, offsets
    points = _lead_points(data, leads)
    where = np.minimum(np.searchsorted(_FOLD_KEYS, points), len(_FOLD_KEYS) - 1)
    folded = _FOLD_KEYS[where] == points
    # output bytes per input byte: ASCII 1, continuation 0, a lead its replacement's length
    out_len = np.ones(len(data), dtype=np.int64)
    out_len[(data & 0xC0) == 0x80] = 0
    out_len[leads] = np.where(folded, _FOLD_LENGTHS[where], 1)
    prefix = np.concatenate([[0], np.cumsum(out_len)])
    replacement = np.where(folded, _FOLD_BYTES[np.minimum(_FOLD_STARTS[where], len(_FOLD_BYTES) - 1)], _BREAKER)
    if (out_len[leads] == 1).all():
        lower[leads] = replacement.astype(np.uint8)
        out = lower[out_len == 1]
    else:
        source = np.repeat(np.arange(len(data), dtype=np.int64), out_len)
        out = lower[source]
        lead_of = np.full(len(data), -1, dtype=np.int64)
        lead_of[leads] = np.arange(len(leads))
        which = lead_of[source]
        at_lead = which >= 0
        which = which[at_lead]
        within = np.arange(len(source), dtype=np.int64)[at_lead] - prefix[source[at_lead]]
        out[at_lead] = np.where(folded[which], _FOLD_BYTES[np.minimum(_FOLD_STARTS[where[which]] + within,
                                                                     len(_FOLD_BYTES) - 1)], _BREAKER)
    return out.astype(np.uint8), prefix[offsets].astype(np.int64)


def trigrams(strings: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """``(tokens, positions)``: every trigram token of every value of a string array and the
    position of its value (duplicates within a value included; nulls yield :data:`NULL_TOKEN`)."""
    if isinstance(strings, pa.ChunkedArray):
        strings = strings.combine_chunks()
    n = len(strings)
    offset_type = np.int64 if pa.types.is_large_string(strings.type) else np.int32
    buffers = strings.buffers()
    offsets = np.frombuffer(buffers[1], dtype=offset_type)[strings.offset:strings.offset + n + 1].astype(np.int64)
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    raw, offsets = _folded_bytes(data[offsets[0]:offsets[-1]], offsets - offsets[0])
    valid = np.asarray(strings.is_valid())
    null_positions = np.flatnonzero(~valid)
    if len(raw) < N:
        return np.zeros(len(null_positions), np.uint32), null_positions
    codes = _CODE[raw]
    alnum = _ALNUM[raw]
    starts = np.arange(len(raw) - N + 1, dtype=np.int64)
    ok = alnum[:-2] & alnum[1:-1] & alnum[2:]
    # a trigram must end inside its own value
    owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))[: len(starts)]
    ok &= (starts + (N - 1) < offsets[1:][owner]) & valid[owner]  # (bytes under a null are not text)
    chosen = starts[ok]
    tokens = codes[chosen] * 1369 + codes[chosen + 1] * 37 + codes[chosen + 2]
    positions = owner[ok]
    if len(null_positions):
        tokens = np.concatenate([tokens, np.zeros(len(null_positions), np.uint32)])
        positions = np.concatenate([positions, null_positions])
    return tokens.astype(np.uint32), positions


def query_tokens(text: str) -> np.ndarray:
    """The distinct trigram tokens of a search string."""
    tokens, _ = trigrams(pa.array([text], pa.string()))
    return np.unique(tokens)
