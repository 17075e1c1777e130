"""Row sets as pylance's index files frame them (vectorized over numpy ``uint64`` arrays).

- ``RowAddrTreeMap`` (``lance-select``'s ``mask.rs``), used by BITMAP/LABEL_LIST bitmaps and the
  ZONEMAP/BLOOMFILTER/LABEL_LIST null-row global buffers: a u32 entry count, then per fragment
  (ascending) its u32 id, the u32 byte size of its bitmap and a portable 32-bit roaring bitmap of
  the row offsets. A size of 0 means "the whole fragment", which no index file written by
  pylance 14.0.2 holds for these (it inserts rows one by one); reading one is refused.
- ``RoaringTreemap`` (roaring-rs), used by NGRAM posting lists: a u64 entry count, then per high
  32-bit key its u32 key and a portable roaring bitmap of the low halves (no size prefix).

Bitmaps are written without run containers, as roaring-rs writes them, so bytes equal pylance's.
"""

from __future__ import annotations

import array
import struct

import numpy as np
from pyroaring import BitMap

from lance_format.errors import CorruptFileError, UnsupportedFeatureError

_U32 = np.uint64(0xFFFFFFFF)
_SHIFT = np.uint64(32)


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """Sorted distinct uint64 ``values`` (a sort and a neighbour compare: faster than
    ``np.unique`` for the already nearly sorted row identifiers indices hold)."""
    values = np.sort(np.asarray(values, dtype=np.uint64), kind="stable")
    if len(values) > 1:
        keep = np.empty(len(values), dtype=bool)
        keep[0] = True
        np.not_equal(values[1:], values[:-1], out=keep[1:])
        values = values[keep]
    return values


def _split(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Sorted unique ``values`` split into high keys, low halves and each key's slice bounds."""
    values = sorted_unique(values)
    highs = (values >> _SHIFT).astype(np.uint32)
    lows = (values & _U32).astype(np.uint32)
    starts = np.flatnonzero(np.diff(highs)) + 1
    bounds = [0, *starts.tolist(), len(values)] if len(values) else [0]
    keys = highs[bounds[:-1]] if len(values) else np.zeros(0, np.uint32)
    return keys, lows, bounds


def _bitmap_bytes(lows: np.ndarray) -> bytes:
    return BitMap(lows, optimize=False).serialize()


def serialize_addr_treemap(values: np.ndarray) -> bytes:
    """``RowAddrTreeMap`` bytes of the row addresses (or ids) ``values``."""
    keys, lows, bounds = _split(values)
    parts = [struct.pack("<I", len(keys))]
    for i, key in enumerate(keys.tolist()):
        bitmap = _bitmap_bytes(lows[bounds[i]:bounds[i + 1]])
        parts.append(struct.pack("<II", key, len(bitmap)))
        parts.append(bitmap)
    return b"".join(parts)


def _bitmap_values(data: bytes | memoryview, key: int) -> np.ndarray:
    lows = np.frombuffer(BitMap.deserialize(bytes(data)).to_array(), dtype=np.uint32)
    return (np.uint64(key) << _SHIFT) | lows.astype(np.uint64)


def deserialize_addr_treemap(data: bytes | memoryview, *, what: str = "row set") -> np.ndarray:
    """The sorted uint64 values of ``RowAddrTreeMap`` bytes."""
    view = memoryview(data)
    if len(view) < 4:
        raise CorruptFileError(f"{what} is truncated ({len(view)} bytes)")
    (count,), pos = struct.unpack_from("<I", view, 0), 4
    pieces = []
    for _ in range(count):
        if pos + 8 > len(view):
            raise CorruptFileError(f"{what} is truncated at byte {pos}")
        fragment, size = struct.unpack_from("<II", view, pos)
        pos += 8
        if size == 0:
            raise UnsupportedFeatureError(f"{what} selects the whole of fragment {fragment}, which this "
                                          "engine does not read in index files")
        if pos + size > len(view):
            raise CorruptFileError(f"{what}: fragment {fragment}'s bitmap runs past the end")
        pieces.append(_bitmap_values(view[pos:pos + size], fragment))
        pos += size
    return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.uint64)


def serialize_roaring_treemap(values: np.ndarray) -> bytes:
    """roaring-rs ``RoaringTreemap`` bytes of ``values``."""
    keys, lows, bounds = _split(values)
    parts = [struct.pack("<Q", len(keys))]
    for i, key in enumerate(keys.tolist()):
        parts.append(struct.pack("<I", key))
        parts.append(_bitmap_bytes(lows[bounds[i]:bounds[i + 1]]))
    return b"".join(parts)


def deserialize_roaring_treemap(data: bytes | memoryview, *, what: str = "posting list") -> np.ndarray:
    """The sorted uint64 values of ``RoaringTreemap`` bytes."""
    view = memoryview(data)
    if len(view) < 8:
        raise CorruptFileError(f"{what} is truncated ({len(view)} bytes)")
    (count,), pos = struct.unpack_from("<Q", view, 0), 8
    pieces = []
    for _ in range(count):
        if pos + 4 > len(view):
            raise CorruptFileError(f"{what} is truncated at byte {pos}")
        (key,) = struct.unpack_from("<I", view, pos)
        pos += 4
        # a portable roaring bitmap carries no length prefix: parse it, then step over its size
        bitmap = BitMap.deserialize(bytes(view[pos:]))
        pieces.append((np.uint64(key) << _SHIFT) | np.frombuffer(bitmap.to_array(), dtype=np.uint32).astype(np.uint64))
        pos += _portable_size(view, pos, what)
    return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.uint64)


def _portable_size(view: memoryview, pos: int, what: str) -> int:
    """Byte size of the portable roaring bitmap at ``pos`` (array and bitmap containers, and run
    containers in case a writer used them)."""
    (cookie,) = struct.unpack_from("<I", view, pos)
    if cookie & 0xFFFF == 12347:  # run containers present
        n = (cookie >> 16) + 1
        run_flags = view[pos + 4:pos + 4 + (n + 7) // 8]
        head = 4 + (n + 7) // 8
        is_run = [(run_flags[i // 8] >> (i % 8)) & 1 for i in range(n)]
        descriptors = np.frombuffer(view[pos + head:pos + head + 4 * n], dtype="<u2").reshape(n, 2)
        head += 4 * n
        if n >= 4:
            head += 4 * n  # offsets
        size = head
        for i in range(n):
            card = int(descriptors[i, 1]) + 1
            if is_run[i]:
                (runs,) = struct.unpack_from("<H", view, pos + size)
                size += 2 + 4 * runs
            else:
                size += 8192 if card > 4096 else 2 * card
        return size
    if cookie != 12346:
        raise CorruptFileError(f"{what}: not a roaring bitmap (cookie {cookie})")
    (n,) = struct.unpack_from("<I", view, pos + 4)
    cards = np.frombuffer(view[pos + 8:pos + 8 + 4 * n], dtype="<u2").reshape(n, 2)[:, 1].astype(np.int64) + 1
    body = np.where(cards > 4096, 8192, 2 * cards).sum()
    return int(8 + 4 * n + 4 * n + body)


class KeyedRowSets:
    """Row sets being built for many integer keys (NGRAM tokens, LABEL_LIST label numbers): one
    32-bit roaring bitmap per (key, fragment), so memory holds compressed sets, not row pairs."""

    def __init__(self) -> None:
        self.bitmaps: dict[tuple[int, int], BitMap] = {}

    def add(self, keys: np.ndarray, rows: np.ndarray) -> None:
        """Add ``rows[i]`` to the set of ``keys[i]`` (keys below 2**32)."""
        if len(keys) == 0:
            return
        rows = np.asarray(rows, dtype=np.uint64)
        fragments = rows >> _SHIFT
        if int(keys.max()) < 1 << 16 and (fragments == fragments[0]).all():
            order = np.argsort(keys.astype(np.uint16), kind="stable")  # a radix sort
        else:
            order = np.argsort((keys.astype(np.uint64) << _SHIFT) | fragments)
        groups = (keys[order].astype(np.uint64) << _SHIFT) | fragments[order]
        lows = (rows[order] & _U32).astype(np.uint32)
        bounds = [0, *(np.flatnonzero(np.diff(groups)) + 1).tolist(), len(groups)]
        # one update per (key, fragment) group, not per row
        for i in range(len(bounds) - 1):
            group = int(groups[bounds[i]])
            slot = (group >> 32, group & 0xFFFFFFFF)
            bitmap = self.bitmaps.get(slot)
            if bitmap is None:
                bitmap = self.bitmaps[slot] = BitMap()
            bitmap.update(array.array("I", lows[bounds[i]:bounds[i + 1]].tobytes()))

    def by_key(self) -> dict[int, list[int]]:
        """Each key's fragments, ascending."""
        found: dict[int, list[int]] = {}
        for key, fragment in sorted(self.bitmaps):
            found.setdefault(key, []).append(fragment)
        return found

    def roaring_treemap(self, key: int, fragments: list[int]) -> bytes:
        """``RoaringTreemap`` bytes of ``key``'s rows."""
        parts = [struct.pack("<Q", len(fragments))]
        for fragment in fragments:
            parts.append(struct.pack("<I", fragment))
            parts.append(self.bitmaps[(key, fragment)].serialize())
        return b"".join(parts)

    def addr_treemap(self, key: int, fragments: list[int]) -> bytes:
        """``RowAddrTreeMap`` bytes of ``key``'s rows."""
        parts = [struct.pack("<I", len(fragments))]
        for fragment in fragments:
            data = self.bitmaps[(key, fragment)].serialize()
            parts.append(struct.pack("<II", fragment, len(data)))
            parts.append(data)
        return b"".join(parts)
