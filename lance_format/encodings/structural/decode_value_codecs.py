"""Per-value decompressors of 2.1/2.2 full-zip pages (each value compressed on its own).

Fixed-width: ``flat{bits}``, or ``fixed_size_list`` whose per-value bytes are, for every layer
with validity, a ``ceil(items/8)``-byte bitmap, then the items. Variable-width: ``variable``
(the bytes as they are), ``fsst`` (FSST over the inner bytes), ``general`` (every value is a
complete lz4/zstd buffer, empty values stay empty) and ``variable_packed_struct`` (a row of
fields: fixed ones as raw bytes, variable ones as a u32/u64 length and bytes).
"""

from __future__ import annotations

import numpy as np

from lance_format.encodings.buffers import DecodeContext
from lance_format.encodings.structural import decode_fsst as fsst
from lance_format.encodings.structural.decode_block_codecs import decompress_bytes
from lance_format.encodings.structural.decoded_blocks import Block, Fixed, Fsl, Struct, Variable, gather, read_uint
from lance_format.errors import UnsupportedFeatureError
from lance_format.proto import encodings_v2_1_pb2 as pb


class FixedValues:
    """Decodes ``n`` values of ``bytes_per_value`` bytes each (a flat byte array)."""

    def __init__(self, enc: pb.CompressiveEncoding, ctx: DecodeContext) -> None:
        kind = enc.WhichOneof("compression")
        self.layers: list[tuple[int, bool]] = []
        if kind == "flat":
            self.item_bits = enc.flat.bits_per_value
        elif kind == "fixed_size_list":
            fsl = enc.fixed_size_list
            while True:
                self.layers.append((fsl.items_per_value, fsl.has_validity))
                inner = fsl.values
                if inner.WhichOneof("compression") == "fixed_size_list":
                    fsl = inner.fixed_size_list
                    continue
                if inner.WhichOneof("compression") != "flat":
                    raise UnsupportedFeatureError("fixed-size lists of compressed values are not supported",
                                                  path=ctx.path, column=ctx.column)
                self.item_bits = inner.flat.bits_per_value
                break
        else:
            raise UnsupportedFeatureError(f"{kind} full-zip fixed-width compression is not supported",
                                          path=ctx.path, column=ctx.column)
        if self.item_bits % 8 and self.item_bits != 1:
            raise UnsupportedFeatureError(f"{self.item_bits}-bit full-zip values are not supported",
                                          path=ctx.path, column=ctx.column)
        cum, size = 1, 0
        self.bitmaps: list[tuple[int, int] | None] = []  # per level: (byte offset, items), None: no validity
        for dim, has_validity in self.layers:
            cum *= dim
            if has_validity:
                self.bitmaps.append((size, cum))
                size += (cum + 7) // 8
            else:
                self.bitmaps.append(None)
        self.items = cum
        self.data_at = size
        self.bytes_per_value = size + (self.item_bits * cum + 7) // 8

    def decode(self, data: np.ndarray, n: int, ctx: DecodeContext) -> Block:
        if len(data) != n * self.bytes_per_value:
            raise ctx.corrupt(f"{len(data)} bytes of full-zip values for {n} values of {self.bytes_per_value}")
        rows = data.reshape(n, self.bytes_per_value) if self.bytes_per_value else data.reshape(n, 0)
        payload = np.ascontiguousarray(rows[:, self.data_at :]).reshape(-1)
        if self.item_bits == 1:
            bits = np.unpackbits(rows[:, self.data_at :], axis=1, bitorder="little")[:, : self.items]
            block: Block = Fixed(bits.reshape(-1).view(np.bool_), 1)
        else:
            block = Fixed(payload, self.item_bits)
        if not self.layers:
            return block
        validities: list[np.ndarray | None] = []
        for spec in self.bitmaps:
            if spec is None:
                validities.append(None)
                continue
            at, count = spec
            raw = rows[:, at : at + (count + 7) // 8]
            validities.append(np.unpackbits(raw, axis=1, bitorder="little")[:, :count].reshape(-1).view(np.bool_))
        for (dim, _), validity in zip(reversed(self.layers), reversed(validities)):
            block = Fsl(block, dim, validity)
        return block


class VariableValues:
    """Decodes values whose (compressed) bytes are given as a :class:`Variable`."""

    def __init__(self, enc: pb.CompressiveEncoding, ctx: DecodeContext) -> None:
        kind = enc.WhichOneof("compression")
        self.kind = kind
        if kind == "variable":
            pass
        elif kind == "fsst":
            self.table = fsst.parse_symbol_table(enc.fsst.symbol_table, ctx)
        elif kind == "general":
            self.compression = enc.general.compression
        elif kind == "variable_packed_struct":
            self.fields: list[tuple[str, FixedValues | VariableValues, int]] = []
            for field in enc.variable_packed_struct.fields:
                layout = field.WhichOneof("layout")
                if layout == "bits_per_value":
                    self.fields.append(("fixed", FixedValues(field.value, ctx), field.bits_per_value))
                elif layout == "bits_per_length":
                    if field.bits_per_length not in (32, 64):
                        raise ctx.corrupt(f"packed struct field has {field.bits_per_length}-bit lengths")
                    self.fields.append(("variable", VariableValues(field.value, ctx), field.bits_per_length))
                else:
                    raise ctx.corrupt("packed struct field has no layout")
        else:
            raise UnsupportedFeatureError(f"{kind} full-zip compression is not supported",
                                          path=ctx.path, column=ctx.column)

    def decode(self, block: Variable, ctx: DecodeContext) -> Block:
        if self.kind == "variable":
            return block
        if self.kind == "fsst":
            return fsst.decompress(block, self.table, ctx)
        if self.kind == "general":
            pieces = [
                decompress_bytes(block.data[a:b], self.compression, ctx)
                for a, b in zip(block.offsets[:-1].tolist(), block.offsets[1:].tolist())
            ]
            offsets = np.zeros(len(pieces) + 1, np.int64)
            np.cumsum([len(p) for p in pieces], out=offsets[1:])
            data = np.concatenate(pieces) if pieces else np.zeros(0, np.uint8)
            return Variable(offsets, data)
        return self._packed(block, ctx)

    def _packed(self, block: Variable, ctx: DecodeContext) -> Struct:
        """Parse every row's fields at once, advancing one cursor per row field by field.

        Null rows have no bytes at all; their fields decode as zeros / empty values.
        """
        n = block.n
        cursor = block.offsets[:-1].astype(np.int64).copy()
        row_end = block.offsets[1:]
        live = np.flatnonzero(row_end > cursor)
        children: list[Block] = []
        for kind, codec, bits in self.fields:
            at = cursor[live]
            if kind == "fixed":
                assert isinstance(codec, FixedValues)  # "fixed" fields hold a FixedValues
                width = codec.bytes_per_value
                if bool((at + width > row_end[live]).any()):
                    raise ctx.corrupt("packed struct field runs past its row")
                rows = np.zeros((n, width), np.uint8)
                rows[live] = gather(block.data, at, np.full(len(live), width)).reshape(len(live), width)
                children.append(codec.decode(rows.reshape(-1), n, ctx))
                cursor[live] = at + width
            else:
                lw = bits // 8
                if bool((at + lw > row_end[live]).any()):
                    raise ctx.corrupt("packed struct field runs past its row")
                lengths = np.zeros(n, np.int64)
                lengths[live] = read_uint(block.data, at, lw) if len(live) else 0
                begin = np.zeros(n, np.int64)
                begin[live] = at + lw
                if bool((begin[live] + lengths[live] > row_end[live]).any()):
                    raise ctx.corrupt("packed struct field runs past its row")
                offsets = np.zeros(n + 1, np.int64)
                np.cumsum(lengths, out=offsets[1:])
                assert isinstance(codec, VariableValues)  # "variable" fields hold a VariableValues
                children.append(codec.decode(Variable(offsets, gather(block.data, begin, lengths)), ctx))
                cursor[live] = begin[live] + lengths[live]
        if bool((cursor[live] != row_end[live]).any()):
            raise ctx.corrupt("packed struct rows have trailing bytes")
        return Struct(children, n)


__all__ = ["FixedValues", "VariableValues"]
