"""``U64Segment`` and ``EncodedU64Array`` (``lance.table``), byte-compatible with pylance 14.

A segment stores a piece of a u64 sequence as ``Range``, ``RangeWithHoles``, ``RangeWithBitmap``
(LSB-first), ``SortedArray`` or ``Array`` (the arrays as u16/u32 offsets from a base, or raw
u64). This module decodes all of them with numpy, picks segment kinds exactly as Lance's
``U64Segment::from_slice`` does, and masks and re-chunks segment lists the way compaction does.
Row-id sequences (:mod:`lance_format.table.rowids`) are lists of segments; row-version
sequences (:mod:`lance_format.table.row_versions`) use them as run spans.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from lance_format.errors import CorruptFileError, InvalidInputError
from lance_format.proto import rowids_pb2

U64_MAX = (1 << 64) - 1

RANGE = "range"
RANGE_WITH_HOLES = "range_with_holes"
RANGE_WITH_BITMAP = "range_with_bitmap"
SORTED_ARRAY = "sorted_array"
ARRAY = "array"


# -- EncodedU64Array ---------------------------------------------------------------------------
@dataclass(frozen=True)
class EncodedU64:
    """u64 values stored as u16/u32 offsets from ``base`` or as raw u64 (``width`` 16/32/64)."""

    width: int
    base: int
    offsets: np.ndarray  # uint16 / uint32 offsets, or the uint64 values themselves for width 64

    def __len__(self) -> int:
        return int(self.offsets.size)

    def values(self) -> np.ndarray:
        if self.width == 64:
            return self.offsets.astype(np.uint64, copy=False)
        return self.offsets.astype(np.uint64) + np.uint64(self.base)

    @classmethod
    def from_values(cls, values: np.ndarray) -> EncodedU64:
        """Smallest width whose offsets from the minimum fit (``EncodedU64Array::from(Vec)``)."""
        values = np.asarray(values, dtype=np.uint64)
        if values.size == 0:
            return cls(64, 0, np.zeros(0, dtype=np.uint64))
        lo = int(values.min())
        spread = int(values.max()) - lo
        if spread <= 0xFFFF:
            return cls(16, lo, (values - np.uint64(lo)).astype(np.uint16))
        if spread <= 0xFFFFFFFF:
            return cls(32, lo, (values - np.uint64(lo)).astype(np.uint32))
        return cls(64, 0, values)

    @classmethod
    def from_proto(cls, msg: rowids_pb2.EncodedU64Array) -> EncodedU64:
        kind = msg.WhichOneof("array")
        if kind == "u16_array":
            base, raw, width, dtype = msg.u16_array.base, msg.u16_array.offsets, 16, "<u2"
        elif kind == "u32_array":
            base, raw, width, dtype = msg.u32_array.base, msg.u32_array.offsets, 32, "<u4"
        elif kind == "u64_array":
            base, raw, width, dtype = 0, msg.u64_array.values, 64, "<u8"
        else:
            raise CorruptFileError("EncodedU64Array has no array variant set")
        itemsize = width // 8
        if len(raw) % itemsize:
            raise CorruptFileError(
                f"EncodedU64Array u{width} buffer of {len(raw)} bytes is not a multiple of {itemsize}"
            )
        offsets = np.frombuffer(raw, dtype=dtype).astype(dtype[1:], copy=False)
        if width != 64 and offsets.size and base + int(offsets.max()) > U64_MAX:
            raise CorruptFileError("EncodedU64Array base + offset overflows u64")
        return cls(width, int(base), offsets)

    def to_proto(self, msg: rowids_pb2.EncodedU64Array) -> None:
        # SetInParent: an empty variant must still be written (prost writes `Some(..)` as tag+0).
        if self.width == 16:
            msg.u16_array.SetInParent()
            msg.u16_array.base = self.base
            msg.u16_array.offsets = self.offsets.astype("<u2").tobytes()
        elif self.width == 32:
            msg.u32_array.SetInParent()
            msg.u32_array.base = self.base
            msg.u32_array.offsets = self.offsets.astype("<u4").tobytes()
        else:
            msg.u64_array.SetInParent()
            msg.u64_array.values = self.offsets.astype("<u8").tobytes()

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, EncodedU64)
            and (self.width, self.base) == (other.width, other.base)
            and np.array_equal(self.offsets, other.offsets)
        )


# -- U64Segment --------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class U64Segment:
    """One segment of a row-id sequence (or the span of a version run)."""

    kind: str
    start: int = 0
    end: int = 0
    holes: EncodedU64 | None = None
    bitmap: bytes = b""
    array: EncodedU64 | None = None
    _len: int = field(default=-1, repr=False)

    # construction ---------------------------------------------------------------------------
    @classmethod
    def range(cls, start: int, end: int) -> U64Segment:
        return cls(RANGE, start, end, _len=end - start)

    @classmethod
    def from_values(cls, values: np.ndarray) -> U64Segment:
        """Pick the representation the way Lance's ``U64Segment::from_slice`` does.

        Sorted (non-decreasing) input: contiguous -> Range; otherwise the smallest of
        RangeWithHoles (24 + 4*holes bytes), RangeWithBitmap (24 + ceil(slots/8)) and SortedArray
        (24 + 2*n), ties going to that order. Unsorted input -> Array.
        """
        v = np.asarray(values, dtype=np.uint64)
        n = int(v.size)
        if n == 0:
            return cls.range(0, 0)
        if n == 1 or bool(np.all(v[1:] >= v[:-1])):
            lo, hi = int(v[0]), int(v[-1])
            slots = hi - lo + 1
            if slots < n:
                raise InvalidInputError("row ids must be unique (found duplicates)")
            n_holes = slots - n
            if n_holes == 0:
                return cls.range(lo, hi + 1)
            # Lance computes the bitmap size with an f64 ceil; mirror it for identical ties.
            sizes = (24 + 4 * n_holes, 24 + math.ceil(slots / 8.0), 24 + 2 * n)
            best = min(sizes)
            if best == sizes[0] or best == sizes[1]:
                present = np.zeros(slots, dtype=bool)
                present[(v - np.uint64(lo)).astype(np.int64)] = True
                if best == sizes[0]:
                    holes = np.flatnonzero(~present).astype(np.uint64) + np.uint64(lo)
                    return cls(RANGE_WITH_HOLES, lo, hi + 1, holes=EncodedU64.from_values(holes), _len=n)
                bitmap = np.packbits(present, bitorder="little").tobytes()
                return cls(RANGE_WITH_BITMAP, lo, hi + 1, bitmap=bitmap, _len=n)
            return cls(SORTED_ARRAY, array=EncodedU64.from_values(v), _len=n)
        return cls(ARRAY, array=EncodedU64.from_values(v), _len=n)

    @classmethod
    def from_proto(cls, msg: rowids_pb2.U64Segment) -> U64Segment:
        kind = msg.WhichOneof("segment")
        if kind == RANGE:
            start, end = msg.range.start, msg.range.end
            _check_range(start, end)
            return cls(RANGE, start, end, _len=end - start)
        if kind == RANGE_WITH_HOLES:
            r = msg.range_with_holes
            _check_range(r.start, r.end)
            if not r.HasField("holes"):
                raise CorruptFileError("RangeWithHoles segment is missing its holes")
            holes = EncodedU64.from_proto(r.holes)
            hv = holes.values()
            if hv.size and (int(hv.min()) < r.start or int(hv.max()) >= r.end):
                raise CorruptFileError(f"RangeWithHoles hole outside [{r.start}, {r.end})")
            if sorted_unique(hv).size != hv.size:
                raise CorruptFileError("RangeWithHoles has duplicate holes")
            return cls(RANGE_WITH_HOLES, r.start, r.end, holes=holes, _len=r.end - r.start - hv.size)
        if kind == RANGE_WITH_BITMAP:
            r = msg.range_with_bitmap
            _check_range(r.start, r.end)
            nbits = r.end - r.start
            if len(r.bitmap) * 8 < nbits:
                raise CorruptFileError(
                    f"RangeWithBitmap [{r.start}, {r.end}) needs {(nbits + 7) // 8} bitmap bytes, "
                    f"got {len(r.bitmap)}"
                )
            bits = _bits(bytes(r.bitmap), nbits)
            return cls(RANGE_WITH_BITMAP, r.start, r.end, bitmap=bytes(r.bitmap), _len=int(bits.sum()))
        if kind in (SORTED_ARRAY, ARRAY):
            arr = EncodedU64.from_proto(getattr(msg, kind))
            return cls(kind, array=arr, _len=len(arr))
        raise CorruptFileError("U64Segment has no segment variant set")

    def to_proto(self, msg: rowids_pb2.U64Segment) -> None:
        if self.kind == RANGE:
            msg.range.SetInParent()
            msg.range.start, msg.range.end = self.start, self.end
        elif self.kind == RANGE_WITH_HOLES:
            r = msg.range_with_holes
            r.start, r.end = self.start, self.end
            assert self.holes is not None
            self.holes.to_proto(r.holes)
        elif self.kind == RANGE_WITH_BITMAP:
            r = msg.range_with_bitmap
            r.SetInParent()
            r.start, r.end, r.bitmap = self.start, self.end, self.bitmap
        else:
            assert self.array is not None
            self.array.to_proto(getattr(msg, self.kind))

    # access ---------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._len

    def values(self) -> np.ndarray:
        """All values, in order, as uint64 (vectorized)."""
        if self.kind == RANGE:
            return _arange(self.start, self.end)
        if self.kind == RANGE_WITH_HOLES:
            assert self.holes is not None
            keep = np.ones(self.end - self.start, dtype=bool)
            keep[(self.holes.values() - np.uint64(self.start)).astype(np.int64)] = False
            return np.flatnonzero(keep).astype(np.uint64) + np.uint64(self.start)
        if self.kind == RANGE_WITH_BITMAP:
            bits = _bits(self.bitmap, self.end - self.start)
            return np.flatnonzero(bits).astype(np.uint64) + np.uint64(self.start)
        assert self.array is not None
        return self.array.values()

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, U64Segment)
            and (self.kind, self.start, self.end, self.bitmap) == (other.kind, other.start, other.end, other.bitmap)
            and self.holes == other.holes
            and self.array == other.array
        )


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values; sort + compare, as numpy 2's hash-based unique is far slower."""
    v = np.asarray(values)
    if v.size > 1 and not bool(np.all(v[1:] >= v[:-1])):
        v = np.sort(v)
    if v.size > 1:
        v = v[np.concatenate(([True], v[1:] != v[:-1]))]
    return v


def _check_range(start: int, end: int) -> None:
    if end < start:
        raise CorruptFileError(f"segment range end {end} < start {start}")


def _arange(start: int, end: int) -> np.ndarray:
    # Offset from an int64 arange: np.arange with huge uint64 bounds goes through float.
    return np.arange(end - start, dtype=np.uint64) + np.uint64(start)


def _bits(bitmap: bytes, nbits: int) -> np.ndarray:
    """LSB-first bits of ``bitmap`` (Lance's rowids/bitmap.rs order), first ``nbits`` only."""
    raw = np.frombuffer(bitmap, dtype=np.uint8)
    return np.unpackbits(raw, count=nbits, bitorder="little").astype(bool)


# -- compaction: mask deleted rows, concatenate, re-chunk --------------------------------------
def masked_pieces(
    sequences: Sequence[Sequence[U64Segment]], deletions: Sequence[np.ndarray | None]
) -> Iterator[tuple[int, int, np.ndarray]]:
    """Yield (sequence index, segment index, surviving values) for every non-empty segment.

    ``deletions[i]`` holds physical offsets deleted from sequence i (positions over the whole
    sequence), as Lance's ``RowIdSequence::mask`` / ``RowDatasetVersionSequence::mask`` take them.
    """
    if len(deletions) != len(sequences):
        raise InvalidInputError("one deletion array (or None) is needed per sequence")
    for si, (segments, deleted) in enumerate(zip(sequences, deletions)):
        lengths = np.array([len(s) for s in segments], dtype=np.int64)
        bounds = np.concatenate([[0], np.cumsum(lengths)])
        positions = np.zeros(0, dtype=np.int64)
        if deleted is not None and len(deleted):
            positions = sorted_unique(np.asarray(deleted, dtype=np.int64))
            if positions[0] < 0 or positions[-1] >= bounds[-1]:
                raise InvalidInputError(
                    f"deleted offset out of range for sequence {si} of {int(bounds[-1])} rows"
                )
        cuts = np.searchsorted(positions, bounds)
        for gi, seg in enumerate(segments):
            vals = seg.values()
            local = positions[cuts[gi] : cuts[gi + 1]] - bounds[gi]
            if local.size:
                vals = np.delete(vals, local)
            if vals.size:
                yield si, gi, vals


def rechunk_pieces(
    pieces: Iterable[tuple[int, int, np.ndarray]], chunk_sizes: Sequence[int]
) -> list[list[tuple[int, int, np.ndarray]]]:
    """Split the piece stream into chunks of exactly ``chunk_sizes`` values (Lance's rechunk)."""
    it = iter(pieces)
    current: tuple[int, int, np.ndarray] | None = None
    out: list[list[tuple[int, int, np.ndarray]]] = []
    for ci, size in enumerate(chunk_sizes):
        chunk: list[tuple[int, int, np.ndarray]] = []
        remaining = int(size)
        while remaining > 0:
            if current is None:
                current = next(it, None)
                if current is None:
                    raise InvalidInputError(f"too few rows for chunk {ci} (still need {remaining})")
            si, gi, vals = current
            take = min(remaining, vals.size)
            chunk.append((si, gi, vals[:take]))
            remaining -= take
            current = (si, gi, vals[take:]) if take < vals.size else None
        out.append(chunk)
    if current is not None or next(it, None) is not None:
        raise InvalidInputError("more rows than the chunk sizes account for")
    return out


__all__ = [
    "RANGE", "RANGE_WITH_HOLES", "RANGE_WITH_BITMAP", "SORTED_ARRAY", "ARRAY", "EncodedU64", "U64Segment",
    "sorted_unique", "masked_pieces", "rechunk_pieces",
]
