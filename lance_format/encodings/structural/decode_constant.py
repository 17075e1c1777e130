"""Constant pages (all values equal or all null) and blob pages (values out of line) of 2.1/2.2.

Constant layout (pylance 14): the value is ``inline_value`` (raw little-endian bytes, at most
32; a boolean is one byte) or, for other scalars, page buffer 0 holding the Arrow value buffers
of a one-element array: ``u32 count | count x u32 size | buffers``. Without either the page is
all null. The rep/def levels follow as two buffers (an empty buffer means "absent"), raw u16 or
block-compressed when ``rep_compression``/``def_compression`` is set.

Blob layout (2.1): the inner page holds one (position u64, size u64) description per entry; an
entry with size 0 and a non-zero position carries its rep level in bits 0-15 and its def level
in bits 16-31. Reading into a struct gives the descriptions, reading into binary fetches the
bytes at those absolute file positions.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.encodings.structural.decode_block_codecs import block_codec, decode_levels
from lance_format.encodings.structural.decode_pages import PageDecoder, PageIO
from lance_format.encodings.structural.decode_repdef import (
    ALL_VALID_ITEM,
    Layer,
    LeafData,
    check_layers,
    max_visible_def,
    slice_layers,
    take_layers,
    unravel,
)
from lance_format.encodings.structural.decoded_blocks import AllNull, Block, Fixed, Struct, Variable, gather, to_arrow
from lance_format.errors import UnsupportedFeatureError
from lance_format.proto import encodings_v2_1_pb2 as pb

DESCRIPTION_TYPE = pa.struct([pa.field("position", pa.uint64()), pa.field("size", pa.uint64())])


class ConstantPage(PageDecoder):
    def __init__(self, layout: pb.ConstantLayout, io: PageIO, rows: int) -> None:
        ctx = io.ctx
        self.io, self.rows, self.ctx, self.layout = io, rows, ctx, layout
        self.meanings = list(layout.layers)
        check_layers(self.meanings, ctx)
        self.inline = layout.inline_value if layout.HasField("inline_value") else None
        nbuf = len(io.buffers)
        if self.inline is not None:
            if nbuf not in (0, 2):
                raise ctx.corrupt(f"constant page with an inline value has {nbuf} buffers")
            self.value_buffer, self.level_buffers = None, (0, 1) if nbuf == 2 else None
        elif nbuf in (0, 2):
            self.value_buffer, self.level_buffers = None, (0, 1) if nbuf == 2 else None
        elif nbuf in (1, 3):
            self.value_buffer, self.level_buffers = 0, (1, 2) if nbuf == 3 else None
        else:
            raise ctx.corrupt(f"constant page has {nbuf} buffers")
        self._layers: tuple[list[Layer], int] | None = None

    def _levels(self, index: int, compressed: bool, enc: pb.CompressiveEncoding, count: int) -> np.ndarray | None:
        raw = self.io.buffer(index)
        if len(raw) == 0:
            return None
        if not compressed:
            if len(raw) % 2:
                raise self.ctx.corrupt("constant page levels have an odd number of bytes")
            return np.ascontiguousarray(raw).view("<u2")
        codec = block_codec(enc, self.ctx)
        return decode_levels(codec, raw, np.zeros(1, np.int64), np.array([len(raw)]), np.array([count]), self.ctx)

    def _load(self) -> tuple[list, int]:
        if self._layers is None:
            rep = defs = None
            lay = self.layout
            if self.level_buffers is not None:
                rep = self._levels(self.level_buffers[0], lay.HasField("rep_compression"), lay.rep_compression,
                                   int(lay.num_rep_values))
                defs = self._levels(self.level_buffers[1], lay.HasField("def_compression"), lay.def_compression,
                                    int(lay.num_def_values))
            if defs is not None:
                items = int(np.count_nonzero(defs <= max_visible_def(self.meanings)))
            elif rep is not None:
                items = len(rep)
            else:
                items = self.rows
            layers, rows = unravel(rep, defs, self.meanings, items, self.ctx)
            if rows != self.rows:
                raise self.ctx.corrupt(f"constant page levels describe {rows} rows, the page has {self.rows}")
            self._layers = (layers, items)
        return self._layers

    def _scalar(self, data_type: pa.DataType) -> Fixed | Variable | None:
        """The constant as a one-value block (None: all null)."""
        ctx = self.ctx
        if self.inline is not None:
            raw = np.frombuffer(self.inline, np.uint8)
            if pa.types.is_boolean(data_type):
                if len(raw) != 1:
                    raise ctx.corrupt("inline boolean constant is not one byte")
                return Fixed(np.array([bool(raw[0] & 1)]), 1)
            return Fixed(raw, 8 * len(raw))
        if self.value_buffer is None:
            return None
        raw = np.asarray(self.io.buffer(self.value_buffer))
        data = raw.tobytes()
        if len(data) < 4:
            raise ctx.corrupt("constant value buffer is too short")
        (count,) = struct.unpack_from("<I", data, 0)
        if len(data) < 4 + 4 * count:
            raise ctx.corrupt("constant value buffer is too short")
        sizes = struct.unpack_from(f"<{count}I", data, 4)
        if 4 + 4 * count + sum(sizes) != len(data):
            raise ctx.corrupt("constant value buffer sizes do not match its length")
        parts, at = [], 4 + 4 * count
        for size in sizes:
            parts.append(raw[at : at + size])
            at += size
        if count == 2:
            # variable width: offsets of a one-element array, then the bytes
            width = 8 if len(parts[0]) == 16 else 4
            offsets = np.ascontiguousarray(parts[0]).view(f"<i{width}").astype(np.int64)
            if len(offsets) != 2:
                raise ctx.corrupt("constant string offsets are not those of one value")
            return Variable(offsets, parts[1])
        if count == 1:
            if pa.types.is_boolean(data_type):
                return Fixed(np.array([bool(parts[0][0] & 1)]) if len(parts[0]) else np.zeros(0, np.bool_), 1)
            return Fixed(parts[0], 8 * len(parts[0]))
        raise UnsupportedFeatureError(f"constant values with {count} buffers are not supported",
                                      path=ctx.path, column=ctx.column)

    def _values(self, k: int, data_type: pa.DataType, valid: np.ndarray | None) -> pa.Array:
        scalar = self._scalar(data_type)
        if scalar is None:
            block: Block = AllNull(k)
        elif isinstance(scalar, Fixed):
            block = Fixed(np.tile(scalar.data, k), scalar.bits)
        else:
            size = int(scalar.offsets[1] - scalar.offsets[0])
            data = scalar.data[int(scalar.offsets[0]) : int(scalar.offsets[1])]
            block = Variable(np.arange(k + 1, dtype=np.int64) * size, np.tile(data, k))
        return to_arrow(block, data_type, valid, self.ctx)

    def read(self, start: int, stop: int, data_type: pa.DataType) -> LeafData:
        layers, _ = self._load()
        sliced, lo, hi = slice_layers(layers, start, stop)
        return LeafData(sliced, self._values(hi - lo, data_type, sliced[-1].validity), stop - start)

    def take(self, rows: np.ndarray, data_type: pa.DataType) -> LeafData:
        layers, _ = self._load()
        taken, index = take_layers(layers, rows)
        return LeafData(taken, self._values(len(index), data_type, taken[-1].validity), len(rows))


class BlobPage(PageDecoder):
    def __init__(self, layout: pb.BlobLayout, inner: PageDecoder, io: PageIO, rows: int,
                 read_file: Callable[[int, int], np.ndarray]) -> None:
        self.inner, self.io, self.rows, self.ctx = inner, io, rows, io.ctx
        self.meanings = list(layout.layers)
        check_layers(self.meanings, self.ctx)
        self.read_file = read_file

    def read(self, start: int, stop: int, data_type: pa.DataType) -> LeafData:
        return self._finish(self.inner.read(start, stop, DESCRIPTION_TYPE), data_type)

    def take(self, rows: np.ndarray, data_type: pa.DataType) -> LeafData:
        return self._finish(self.inner.take(rows, DESCRIPTION_TYPE), data_type)

    def _finish(self, described: LeafData, data_type: pa.DataType) -> LeafData:
        ctx = self.ctx
        desc = described.values
        if described.layers[-1].validity is not None or len(described.layers) != 1:
            raise ctx.corrupt("blob descriptions are nested or nullable")
        positions = desc.field(0).to_numpy(zero_copy_only=False).astype(np.uint64)
        sizes = desc.field(1).to_numpy(zero_copy_only=False).astype(np.uint64)
        special = (sizes == 0) & (positions != 0)
        levels = np.where(special, positions, 0)
        if bool(((levels & 0xFFFF) != 0).any()):
            raise UnsupportedFeatureError("lists of blobs are not supported", path=ctx.path, column=ctx.column)
        defs: np.ndarray | None = ((levels >> 16) & 0xFFFF).astype(np.uint16)
        if self.meanings == [ALL_VALID_ITEM]:
            defs = None
        layers, rows = unravel(None, defs, self.meanings, len(desc), ctx)
        valid = layers[-1].validity
        if pa.types.is_struct(data_type):
            if data_type != DESCRIPTION_TYPE:
                raise UnsupportedFeatureError(f"blob descriptions cannot be read as {data_type}",
                                              path=ctx.path, column=ctx.column)
            children: list[Block] = [Fixed(positions.view(np.uint8), 64), Fixed(sizes.view(np.uint8), 64)]
            array = to_arrow(Struct(children, len(desc)), data_type, valid, ctx)
            if valid is not None:
                # like Lance, the description fields of a null blob are null too
                mask = pa.array(~valid)
                array = pa.StructArray.from_arrays(
                    [pc.if_else(mask, pa.scalar(None, pa.uint64()), array.field(i)) for i in range(2)],
                    fields=list(data_type), mask=mask)
            return LeafData(layers, array, rows)
        live = ~special if valid is None else (~special & valid)
        size = np.where(live, sizes, 0).astype(np.int64)
        offsets = np.zeros(len(size) + 1, np.int64)
        np.cumsum(size, out=offsets[1:])
        data = self._fetch(positions.astype(np.int64)[live], size[live])
        return LeafData(layers, to_arrow(Variable(offsets, data), data_type, valid, ctx), rows)

    def _fetch(self, positions: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        if len(positions) == 0:
            return np.zeros(0, np.uint8)
        lo, hi = int(positions.min()), int((positions + sizes).max())
        if hi - lo <= 2 * int(sizes.sum()) + (1 << 20):
            span = self.read_file(lo, hi - lo)
            return gather(span, positions - lo, sizes)
        return np.concatenate([self.read_file(int(p), int(s)) for p, s in zip(positions, sizes)])
