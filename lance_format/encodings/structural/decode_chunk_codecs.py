"""Mini-block value decompressors of 2.1/2.2 pages, decoding the chunks of a page together.

Each mini-block chunk stores ``num_buffers`` value buffers. A codec receives the chunk bytes
(``buf``), the position and size of every buffer of every chunk (``starts``/``sizes``, shape
(chunks, buffers)) and the number of values of each chunk, and returns one block holding the
values of all chunks in order; ``take`` returns just the values at given positions (flat,
bit-packed and string values read only those, other codecs decode all and select). Formats (pylance 14):

- ``flat{bits}``: raw values (1 bit = LSB-first bitmap);
- ``inline_bitpacking{W}``: one FastLanes block per chunk: ``[bit width][packed words]``;
- ``variable{offsets: flat{32|64}}``: ``count + 1`` offsets relative to the buffer, then bytes;
- ``fsst{symbol_table, values}``: the inner (variable) strings FSST-compressed;
- ``rle{values, run_lengths}``: two buffers, run values and u8 run lengths;
- ``byte_stream_split{values: flat{W}}``: the W/8 byte streams of the chunk one after another;
- ``general{compression, values}``: the chunk's first buffer lz4/zstd-compressed;
- ``fixed_size_list{dim, values, has_validity}``: a bitmap buffer per layer with validity, then
  the flattened items;  ``packed_struct{bits_per_value[], values: flat}``: row-major structs.
"""

from __future__ import annotations

import numpy as np

from lance_format.encodings.buffers import DecodeContext
from lance_format.encodings.structural import accel
from lance_format.encodings.structural import decode_fsst as fsst
from lance_format.encodings.structural.decode_block_codecs import InlineBitpackedBlock, RleBlock, decompress_bytes
from lance_format.encodings.structural.decoded_blocks import (
    Block,
    Fixed,
    Fsl,
    Struct,
    Variable,
    check_range,
    gather,
    group_of,
    ranges_index,
    read_uint,
    take_block,
)
from lance_format.errors import UnsupportedFeatureError
from lance_format.proto import encodings_v2_1_pb2 as pb


class ChunkCodec:
    num_buffers = 1

    def decode(self, buf: np.ndarray, starts: np.ndarray, sizes: np.ndarray, counts: np.ndarray,
               ctx: DecodeContext) -> Block:
        raise NotImplementedError

    def take(self, buf: np.ndarray, starts: np.ndarray, sizes: np.ndarray, counts: np.ndarray, picks: np.ndarray,
             ctx: DecodeContext) -> Block:
        """The values at ``picks`` (indices into the values of all the chunks, in range) only."""
        return take_block(self.decode(buf, starts, sizes, counts, ctx), picks)


def _bits(buf: np.ndarray, starts: np.ndarray, sizes: np.ndarray, counts: np.ndarray, ctx: DecodeContext) -> np.ndarray:
    """Bools from per-chunk LSB-first bitmaps holding ``counts`` bits each."""
    need = (counts + 7) // 8
    if bool((sizes < need).any()):
        raise ctx.corrupt("a bitmap is shorter than its values")
    raw = gather(buf, starts, need)
    bits = np.unpackbits(raw, bitorder="little").view(np.bool_)
    if bool((counts % 8 == 0).all()):
        return bits
    first = np.zeros(len(need), np.int64)
    np.cumsum(need[:-1] * 8, out=first[1:])
    return bits[ranges_index(first, counts)]


class FlatChunks(ChunkCodec):
    def __init__(self, bits: int, compression: pb.BufferCompression | None) -> None:
        self.bits, self.compression = bits, compression

    def decode(self, buf, starts, sizes, counts, ctx):
        s, z = starts[:, 0], sizes[:, 0]
        if self.compression is not None:
            buf, s, z = _decompress_each(buf, s, z, self.compression, ctx)
        if self.bits == 1:
            return Fixed(_bits(buf, s, z, counts, ctx), 1)
        if self.bits % 8:
            raise UnsupportedFeatureError(f"flat values of {self.bits} bits are not supported",
                                          path=ctx.path, column=ctx.column)
        need = counts * (self.bits // 8)
        if bool((z != need).any()):
            raise ctx.corrupt("a mini-block value buffer does not hold exactly its values")
        return Fixed(gather(buf, s, need), self.bits)

    def take(self, buf, starts, sizes, counts, picks, ctx):
        if self.compression is not None or self.bits % 8 or self.bits // 8 not in (1, 2, 4, 8):
            return super().take(buf, starts, sizes, counts, picks, ctx)
        s, z = starts[:, 0], sizes[:, 0]
        width = self.bits // 8
        if bool((z != counts * width).any()):
            raise ctx.corrupt("a mini-block value buffer does not hold exactly its values")
        # the picked values straight from their chunks: no copy of every chunk's values
        value_ends = np.cumsum(counts)
        chunk = group_of(picks, value_ends - counts)
        at = s[chunk] + (np.asarray(picks, np.int64) - (value_ends - counts)[chunk]) * width
        words = read_uint(buf, at, width)
        return Fixed(words.astype(f"<u{width}").view(np.uint8), self.bits)


class InlineBitpackedChunks(ChunkCodec):
    def __init__(self, width: int) -> None:
        self.block = InlineBitpackedBlock(width)

    def decode(self, buf, starts, sizes, counts, ctx):
        if bool((counts > 1024).any()):
            raise ctx.corrupt("a bit-packed mini-block chunk holds more than 1024 values")
        return self.block.decode_many(buf, starts[:, 0], sizes[:, 0], counts, ctx)

    def take(self, buf, starts, sizes, counts, picks, ctx):
        if bool((counts > 1024).any()):
            raise ctx.corrupt("a bit-packed mini-block chunk holds more than 1024 values")
        picks = np.asarray(picks, np.int64)
        compiled = accel.read_kernels() if buf.dtype == np.uint8 and buf.ndim == 1 else None
        if compiled is None or not len(picks):
            return self.block.take_many(buf, starts[:, 0], sizes[:, 0], counts, picks, ctx)
        # Each chunk is one block: unpack (compiled) just the blocks holding a pick, then gather.
        # Few values per chunk are taken, but a block's unpacking costs less than finding words.
        value_from = np.cumsum(counts) - counts
        chunk = np.searchsorted(value_from, picks, side="right") - 1
        new_chunk = np.ones(len(chunk), np.bool_)
        new_chunk[1:] = chunk[1:] != chunk[:-1]  # picks are sorted
        need = chunk[new_chunk]
        wb = self.block.width // 8
        at, size = starts[need, 0], sizes[need, 0]
        if bool((size < wb).any()):
            raise ctx.corrupt("a bit-packed mini-block chunk is shorter than its bit width")
        widths = read_uint(buf, at, wb)
        if bool((wb + widths * (1024 // 8) != size).any()):
            raise ctx.corrupt("bit-packed blocks do not fill their buffer exactly")
        out = np.empty((len(need), 1024), self.block.dtype)
        if not compiled.unpack_inline_blocks(np.ascontiguousarray(buf), np.asarray(at, np.int64), wb, out):
            raise ctx.corrupt("bit-packed blocks run past their buffer or exceed their bit width")
        values = out[np.cumsum(new_chunk) - 1, picks - value_from[chunk]]
        return Fixed(np.ascontiguousarray(values).view(np.uint8), self.block.width)


class VariableChunks(ChunkCodec):
    def __init__(self, offset_bits: int) -> None:
        if offset_bits not in (32, 64):
            raise UnsupportedFeatureError(f"{offset_bits}-bit string offsets are not supported")
        self.ow = offset_bits // 8

    def decode(self, buf, starts, sizes, counts, ctx):
        s, z = starts[:, 0], sizes[:, 0]
        n = len(counts)
        if bool((z < (counts + 1) * self.ow).any()):
            raise ctx.corrupt("a mini-block string buffer is shorter than its offsets")
        raw = np.ascontiguousarray(gather(buf, s, (counts + 1) * self.ow))
        offsets = raw.view(f"<u{self.ow}").astype(np.int64)
        ends = np.cumsum(counts + 1)
        first = offsets[ends - counts - 1]
        last = offsets[ends - 1]
        if bool((first < (counts + 1) * self.ow).any()) or bool((last > z).any()):
            raise ctx.corrupt("mini-block string offsets point outside their buffer")
        data = gather(buf, s + first, last - first)
        base = np.zeros(n, np.int64)
        np.cumsum((last - first)[:-1], out=base[1:])
        chunk_of = np.repeat(np.arange(n), counts + 1)
        rebased = offsets + (base - first)[chunk_of]
        # each chunk's closing offset equals the next chunk's first one: drop it
        keep = np.ones(len(rebased), np.bool_)
        keep[(ends - 1)[:-1]] = False
        rebased = rebased[keep]
        if bool((rebased[1:] < rebased[:-1]).any()):
            raise ctx.corrupt("mini-block string offsets are not increasing")
        return Variable(rebased, data)

    def take(self, buf, starts, sizes, counts, picks, ctx):
        # only the picked values' offsets and bytes are read: a selective take of a page whose
        # chunks all hold some picked rows must not rebase every offset of every chunk
        s, z = starts[:, 0], sizes[:, 0]
        ow = self.ow
        if bool((z < (counts + 1) * ow).any()):
            raise ctx.corrupt("a mini-block string buffer is shorter than its offsets")
        picks = np.asarray(picks, np.int64)
        value_ends = np.cumsum(counts)
        chunk = group_of(picks, value_ends - counts)
        at = s[chunk] + (picks - (value_ends - counts)[chunk]) * ow
        begin, end = read_uint(buf, at, ow), read_uint(buf, at + ow, ow)
        if bool(((begin < (counts[chunk] + 1) * ow) | (end < begin) | (end > z[chunk])).any()):
            raise ctx.corrupt("mini-block string offsets point outside their buffer or are not increasing")
        lengths = end - begin
        offsets = np.zeros(len(picks) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return Variable(offsets, gather(buf, s[chunk] + begin, lengths))


class FsstChunks(ChunkCodec):
    def __init__(self, table: fsst.SymbolTable, inner: ChunkCodec) -> None:
        self.table, self.inner = table, inner
        self.num_buffers = inner.num_buffers

    def decode(self, buf, starts, sizes, counts, ctx):
        if self.table.enabled and isinstance(self.inner, VariableChunks):
            compiled = accel.kernels(int(sizes[:, 0].sum()))
            if compiled is not None:
                # one pass over the chunks' own bytes: no gathered copy of offsets and codes
                result = compiled.fsst_chunks(np.ascontiguousarray(buf, np.uint8), starts[:, 0].astype(np.int64),
                                              sizes[:, 0].astype(np.int64), np.asarray(counts, np.int64),
                                              self.inner.ow, self.table.words, self.table.lengths, self.table.count)
                return fsst.compiled_result(compiled, result, ctx)
        block = self.inner.decode(buf, starts, sizes, counts, ctx)
        if not isinstance(block, Variable):
            raise ctx.corrupt("FSST values are not variable-width")
        return fsst.decompress(block, self.table, ctx)


class RleChunks(ChunkCodec):
    num_buffers = 2

    def __init__(self, width: int) -> None:
        self.width = width
        RleBlock(width)  # validates the width

    def decode(self, buf, starts, sizes, counts, ctx):
        wb = self.width // 8
        runs = sizes[:, 1]
        if bool((sizes[:, 0] != runs * wb).any()):
            raise ctx.corrupt("RLE value and run-length buffers disagree")
        values = np.ascontiguousarray(gather(buf, starts[:, 0], runs * wb)).view(f"<u{wb}")
        lengths = gather(buf, starts[:, 1], runs).astype(np.int64)
        bounds = np.zeros(len(runs) + 1, np.int64)
        np.cumsum(runs, out=bounds[1:])
        cum = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(lengths, out=cum[1:])
        if not np.array_equal(cum[bounds[1:]] - cum[bounds[:-1]], counts):
            raise ctx.corrupt("RLE run lengths do not add up to the chunk's values")
        return Fixed(np.repeat(values, lengths).view(np.uint8), self.width)


class ByteStreamSplitChunks(ChunkCodec):
    def __init__(self, bits: int) -> None:
        if bits % 8:
            raise UnsupportedFeatureError(f"byte-stream-split of {bits}-bit values is not supported")
        self.bits = bits

    def decode(self, buf, starts, sizes, counts, ctx):
        wb = self.bits // 8
        need = counts * wb
        if bool((sizes[:, 0] < need).any()):
            raise ctx.corrupt("byte-stream-split buffer is shorter than its values")
        raw = gather(buf, starts[:, 0], need)
        out = np.empty(len(raw), np.uint8)
        pos = np.zeros(len(counts) + 1, np.int64)
        np.cumsum(need, out=pos[1:])
        # chunks of equal size are un-transposed together (all but the last chunk, usually)
        for count in np.unique(counts).tolist():
            sel = np.flatnonzero(counts == count)
            if count == 0:
                continue
            idx = pos[sel][:, None] + np.arange(count * wb)[None, :]
            streams = raw[idx].reshape(len(sel), wb, count)
            out[idx] = streams.transpose(0, 2, 1).reshape(len(sel), -1)
        return Fixed(out, self.bits)


class GeneralChunks(ChunkCodec):
    def __init__(self, compression: pb.BufferCompression, inner: ChunkCodec) -> None:
        self.compression, self.inner = compression, inner
        self.num_buffers = inner.num_buffers

    def decode(self, buf, starts, sizes, counts, ctx):
        new_buf, s0, z0 = _decompress_each(buf, starts[:, 0], sizes[:, 0], self.compression, ctx)
        # the other buffers are appended after the decompressed ones
        merged = np.concatenate([new_buf, buf])
        new_starts = starts.copy()
        new_sizes = sizes.copy()
        new_starts[:, 0], new_sizes[:, 0] = s0, z0
        new_starts[:, 1:] += len(new_buf)
        return self.inner.decode(merged, new_starts, new_sizes, counts, ctx)


class FslChunks(ChunkCodec):
    def __init__(self, enc: pb.FixedSizeList, ctx: DecodeContext) -> None:
        self.layers: list[tuple[int, bool]] = []
        while True:
            self.layers.append((enc.items_per_value, enc.has_validity))
            inner = enc.values
            if inner.WhichOneof("compression") == "fixed_size_list":
                enc = inner.fixed_size_list
                continue
            if inner.WhichOneof("compression") != "flat":
                raise UnsupportedFeatureError("fixed-size lists of compressed values are not supported",
                                              path=ctx.path, column=ctx.column)
            self.items = FlatChunks(inner.flat.bits_per_value, None)
            break
        self.num_buffers = 1 + sum(1 for _, v in self.layers if v)

    def decode(self, buf, starts, sizes, counts, ctx):
        validities, col, cum = [], 0, counts
        for dim, has_validity in self.layers:
            cum = cum * dim
            if has_validity:
                validities.append(_bits(buf, starts[:, col], sizes[:, col], cum, ctx))
                col += 1
            else:
                validities.append(None)
        block = self.items.decode(buf, starts[:, col:], sizes[:, col:], cum, ctx)
        for (dim, _), validity in zip(reversed(self.layers), reversed(validities)):
            block = Fsl(block, dim, validity)
        return block


class PackedStructChunks(ChunkCodec):
    def __init__(self, enc: pb.PackedStruct, ctx: DecodeContext) -> None:
        self.field_bits = list(enc.bits_per_value)
        if enc.values.WhichOneof("compression") != "flat" or any(b % 8 for b in self.field_bits):
            raise UnsupportedFeatureError("packed structs must be byte-aligned flat values",
                                          path=ctx.path, column=ctx.column)
        self.row_bits = enc.values.flat.bits_per_value
        if self.row_bits != sum(self.field_bits):
            raise ctx.corrupt("packed struct row width is not the sum of its fields")
        self.rows = FlatChunks(self.row_bits, None)

    def decode(self, buf, starts, sizes, counts, ctx):
        rows = self.rows.decode(buf, starts, sizes, counts, ctx)
        return split_rows(rows.data, self.field_bits, int(np.sum(counts)))


def split_rows(data: np.ndarray, field_bits: list[int], n: int) -> Struct:
    """Row-major fixed-width structs into one Fixed block per field."""
    row = sum(field_bits) // 8
    matrix = data[: n * row].reshape(n, row) if row else np.zeros((n, 0), np.uint8)
    children: list[Block] = []
    at = 0
    for bits in field_bits:
        w = bits // 8
        children.append(Fixed(np.ascontiguousarray(matrix[:, at : at + w]).reshape(-1), bits))
        at += w
    return Struct(children, n)


def _decompress_each(buf: np.ndarray, starts: np.ndarray, sizes: np.ndarray, compression: pb.BufferCompression,
                     ctx: DecodeContext) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    check_range(ctx, "a compressed mini-block buffer", starts, sizes, len(buf))
    pieces = [decompress_bytes(buf[s : s + z], compression, ctx) for s, z in zip(starts.tolist(), sizes.tolist())]
    new_sizes = np.array([len(p) for p in pieces], np.int64)
    new_starts = np.zeros(len(pieces), np.int64)
    np.cumsum(new_sizes[:-1], out=new_starts[1:])
    data = np.concatenate(pieces) if pieces else np.zeros(0, np.uint8)
    return data, new_starts, new_sizes


def chunk_codec(enc: pb.CompressiveEncoding, ctx: DecodeContext) -> ChunkCodec:
    """The mini-block value decompressor described by ``enc``."""
    kind = enc.WhichOneof("compression")
    if kind == "flat":
        return FlatChunks(enc.flat.bits_per_value, enc.flat.data if enc.flat.HasField("data") else None)
    if kind == "inline_bitpacking":
        if enc.inline_bitpacking.HasField("values"):
            raise UnsupportedFeatureError("compressed inline bit-packing is not supported",
                                          path=ctx.path, column=ctx.column)
        return InlineBitpackedChunks(enc.inline_bitpacking.uncompressed_bits_per_value)
    if kind == "variable":
        offsets = enc.variable.offsets
        if offsets.WhichOneof("compression") != "flat":
            raise UnsupportedFeatureError("compressed string offsets are not supported", path=ctx.path, column=ctx.column)
        # Lance's mini-block reader ignores `variable.values`; so do we
        return VariableChunks(offsets.flat.bits_per_value)
    if kind == "fsst":
        return FsstChunks(fsst.parse_symbol_table(enc.fsst.symbol_table, ctx), chunk_codec(enc.fsst.values, ctx))
    if kind == "rle":
        values, lengths = enc.rle.values, enc.rle.run_lengths
        if values.WhichOneof("compression") != "flat" or lengths.WhichOneof("compression") != "flat":
            raise ctx.corrupt("RLE values and run lengths must be flat")
        if lengths.flat.bits_per_value != 8:
            raise UnsupportedFeatureError("RLE run lengths must be 8-bit", path=ctx.path, column=ctx.column)
        return RleChunks(values.flat.bits_per_value)
    if kind == "byte_stream_split":
        values = enc.byte_stream_split.values
        if values.WhichOneof("compression") != "flat":
            raise ctx.corrupt("byte-stream-split values must be flat")
        return ByteStreamSplitChunks(values.flat.bits_per_value)
    if kind == "general":
        return GeneralChunks(enc.general.compression, chunk_codec(enc.general.values, ctx))
    if kind == "fixed_size_list":
        return FslChunks(enc.fixed_size_list, ctx)
    if kind == "packed_struct":
        return PackedStructChunks(enc.packed_struct, ctx)
    if kind is None:
        raise ctx.corrupt("compressive encoding is empty")
    raise UnsupportedFeatureError(f"{kind} mini-block compression is not supported", path=ctx.path, column=ctx.column)
