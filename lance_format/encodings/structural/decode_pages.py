"""Shared plumbing of the 2.1/2.2 page decoders.

A page decoder turns rows ``[start, stop)`` of its page (or a sorted set of rows) into
:class:`LeafData`. Decoders read file bytes through a :class:`PageIO` (which bounds-checks every
read against the data region and the page's buffers) and build their Arrow values with
:func:`build_leaf` from the levels and the decoded value block.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lance_format.encodings.buffers import DecodeContext
from lance_format.encodings.structural.decode_repdef import Layer, LeafData, is_list, unravel
from lance_format.encodings.structural.decoded_blocks import Block, to_arrow


@dataclass
class PageIO:
    """Byte access for one page: ``buffers`` are its (absolute offset, size) pairs."""

    read_at: Callable[[int, int], np.ndarray]
    buffers: list[tuple[int, int]]
    ctx: DecodeContext
    # many reads in one batch (coalesced and parallel on object stores); None: one by one
    read_many: Callable[[list[tuple[int, int]]], list[np.ndarray]] | None = None

    def buffer(self, index: int, start: int = 0, length: int | None = None) -> np.ndarray:
        """Bytes ``[start, start + length)`` of page buffer ``index``."""
        if index >= len(self.buffers):
            raise self.ctx.corrupt(f"page refers to buffer {index} but has {len(self.buffers)}")
        offset, size = self.buffers[index]
        if length is None:
            length = size - start
        if start < 0 or length < 0 or start + length > size:
            raise self.ctx.corrupt(f"read of bytes [{start}, {start + length}) of a {size}-byte page buffer")
        return self.read_at(offset + start, length)

    def buffer_ranges(self, index: int, starts: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
        """Bytes ``[start, start + length)`` of page buffer ``index`` for each pair, read as one batch."""
        if index >= len(self.buffers):
            raise self.ctx.corrupt(f"page refers to buffer {index} but has {len(self.buffers)}")
        offset, size = self.buffers[index]
        starts, lengths = np.asarray(starts, np.int64), np.asarray(lengths, np.int64)
        bad = (starts < 0) | (lengths < 0) | (starts + lengths > size)
        if bool(bad.any()):
            i = int(np.flatnonzero(bad)[0])
            raise self.ctx.corrupt(f"read of bytes [{int(starts[i])}, {int(starts[i] + lengths[i])}) of a "
                                   f"{size}-byte page buffer")
        ranges = list(zip((starts + offset).tolist(), lengths.tolist()))
        if self.read_many is None:
            return [self.read_at(start, length) for start, length in ranges]
        return self.read_many(ranges)

    def size(self, index: int) -> int:
        if index >= len(self.buffers):
            raise self.ctx.corrupt(f"page refers to buffer {index} but has {len(self.buffers)}")
        return self.buffers[index][1]


def empty_leaf(meanings: list[int], data_type: pa.DataType) -> LeafData:
    """Zero rows of a column with the given rep/def layers."""
    layers = [Layer(is_list(m), None, np.zeros(1, np.int64) if is_list(m) else None) for m in reversed(meanings)]
    return LeafData(layers, pa.array([], type=data_type), 0)


def build_leaf(rep: np.ndarray | None, defs: np.ndarray | None, values: Block, meanings: list[int],
               data_type: pa.DataType, ctx: DecodeContext) -> LeafData:
    """Unravel the levels and attach the leaf values (with the leaf's validity)."""
    layers, rows = unravel(rep, defs, meanings, values.n, ctx)
    array = to_arrow(values, data_type, layers[-1].validity, ctx)
    return LeafData(layers, array, rows)


class PageDecoder:
    rows: int

    def drop_cache(self) -> None:
        """Forget decoded data kept for the next read."""

    def read(self, start: int, stop: int, data_type: pa.DataType) -> LeafData:
        raise NotImplementedError

    def take(self, rows: np.ndarray, data_type: pa.DataType) -> LeafData:
        """Sorted, unique page-local rows."""
        raise NotImplementedError
