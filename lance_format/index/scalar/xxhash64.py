"""xxHash64 (seed 0) of many byte strings at once, vectorized with numpy.

BLOOMFILTER hashes each value's bytes with xxHash64 (``twox_hash``, seed 0): integers, floats,
dates and times by their little-endian native bytes, strings and binaries by their bytes.
Values are grouped by byte length; each group is one 2-D ``uint8`` matrix run through the
algorithm's fixed steps with wrapping ``uint64`` arithmetic, so the Python work is per distinct
length and per 8-byte step, never per value.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

P1 = np.uint64(11400714785074694791)
P2 = np.uint64(14029467366897019727)
P3 = np.uint64(1609587929392839161)
P4 = np.uint64(9650029242287828579)
P5 = np.uint64(2870177450012600261)
_U64 = np.uint64


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << _U64(r)) | (x >> _U64(64 - r))


def _round(acc: np.ndarray, lane: np.ndarray) -> np.ndarray:
    acc = acc + lane * P2
    return _rotl(acc, 31) * P1


def _lanes64(matrix: np.ndarray, start: int) -> np.ndarray:
    return np.ascontiguousarray(matrix[:, start:start + 8]).view("<u8")[:, 0].astype(np.uint64)


def _lanes32(matrix: np.ndarray, start: int) -> np.ndarray:
    return np.ascontiguousarray(matrix[:, start:start + 4]).view("<u4")[:, 0].astype(np.uint64)


def hash_matrix(matrix: np.ndarray) -> np.ndarray:
    """xxHash64 of each row of a 2-D ``uint8`` matrix (every row ``matrix.shape[1]`` bytes long)."""
    with np.errstate(over="ignore"):
        rows, length = matrix.shape
        pos = 0
        if length >= 32:
            v1 = np.full(rows, P1 + P2, dtype=np.uint64)
            v2 = np.full(rows, P2, dtype=np.uint64)
            v3 = np.zeros(rows, dtype=np.uint64)
            v4 = np.full(rows, np.uint64(0) - P1, dtype=np.uint64)
            while pos + 32 <= length:
                v1 = _round(v1, _lanes64(matrix, pos))
                v2 = _round(v2, _lanes64(matrix, pos + 8))
                v3 = _round(v3, _lanes64(matrix, pos + 16))
                v4 = _round(v4, _lanes64(matrix, pos + 24))
                pos += 32
            h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
            for v in (v1, v2, v3, v4):
                h = (h ^ _round(np.zeros(rows, dtype=np.uint64), v)) * P1 + P4
        else:
            h = np.full(rows, P5, dtype=np.uint64)
        h = h + _U64(length)
        while pos + 8 <= length:
            h = h ^ _round(np.zeros(rows, dtype=np.uint64), _lanes64(matrix, pos))
            h = _rotl(h, 27) * P1 + P4
            pos += 8
        if pos + 4 <= length:
            h = h ^ (_lanes32(matrix, pos) * P1)
            h = _rotl(h, 23) * P2 + P3
            pos += 4
        while pos < length:
            h = h ^ (matrix[:, pos].astype(np.uint64) * P5)
            h = _rotl(h, 11) * P1
            pos += 1
        h = h ^ (h >> _U64(33))
        h = h * P2
        h = h ^ (h >> _U64(29))
        h = h * P3
        return h ^ (h >> _U64(32))


def hash_fixed(values: np.ndarray) -> np.ndarray:
    """xxHash64 of each element's native little-endian bytes."""
    values = np.ascontiguousarray(values)
    width = values.dtype.itemsize
    return hash_matrix(values.view(np.uint8).reshape(len(values), width))


def hash_binary(array: pa.Array) -> np.ndarray:
    """xxHash64 of each (non-null) string's or binary's bytes; nulls hash as empty (callers drop them)."""
    large = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
    offset_type: type[np.signedinteger] = np.int64 if large else np.int32
    buffers = array.buffers()
    offsets = np.frombuffer(buffers[1], dtype=offset_type)[array.offset:array.offset + len(array) + 1].astype(np.int64)
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    starts = offsets[:-1]
    lengths = offsets[1:] - starts
    out = np.empty(len(array), dtype=np.uint64)
    order = np.argsort(lengths, kind="stable")
    sorted_lengths = lengths[order]
    bounds = np.flatnonzero(np.diff(sorted_lengths)) + 1
    for group in np.split(order, bounds):
        if len(group) == 0:
            continue
        length = int(lengths[group[0]])
        index = starts[group][:, None] + np.arange(length, dtype=np.int64)[None, :]
        out[group] = hash_matrix(data[index] if length else np.zeros((len(group), 0), np.uint8))
    return out
