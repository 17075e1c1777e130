"""Block decompressors of 2.1/2.2 pages: one buffer holding ``count`` values.

Used for rep/def levels (mini-block chunks, constant pages), mini-block dictionaries and
general-compressed blocks. Formats (pylance 14):

- ``flat{bits}``: raw values, optionally general-compressed as a whole;
- ``inline_bitpacking{W}``: FastLanes blocks of 1024 values, each prefixed by its bit width;
- ``out_of_line_bitpacking{W, values: flat{b}}``: whole FastLanes blocks at width ``b``; a tail of
  fewer than 1024 values is raw when the buffer length says so, else one more packed block;
- ``rle`` (block form): u64 byte length of the values, the run values, then u8 run lengths;
- ``variable``: bits_per_offset and bytes_start (u32 or u64 each), offsets, then the bytes;
- ``general{scheme, values}``: the whole buffer compressed (lz4: u32 size prefix, zstd: u64);
- ``constant{value}``: one value repeated;  ``fixed_size_list{flat}``: flattened items.

``decode_many`` decodes the same-encoded buffers of many chunks at once; the FastLanes and RLE
codecs do it without a per-chunk loop, since every mini-block chunk carries its own levels.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_format.encodings.buffers import DecodeContext, decompress_buffer
from lance_format.encodings.structural import accel
from lance_format.encodings.structural import decode_fastlanes as fastlanes
from lance_format.encodings.structural.decoded_blocks import (
    Block,
    Fixed,
    Fsl,
    Variable,
    concat,
    gather,
    group_of,
    ranges_index,
    read_uint,
)
from lance_format.errors import UnsupportedFeatureError
from lance_format.proto import encodings_v2_1_pb2 as pb

_SCHEMES = {pb.COMPRESSION_ALGORITHM_LZ4: "lz4", pb.COMPRESSION_ALGORITHM_ZSTD: "zstd"}


def scheme_name(compression: pb.BufferCompression, ctx: DecodeContext) -> str:
    name = _SCHEMES.get(compression.scheme)
    if name is None:
        raise ctx.corrupt(f"unknown buffer compression scheme {compression.scheme}")
    return name


def decompress_bytes(data: np.ndarray, compression: pb.BufferCompression, ctx: DecodeContext) -> np.ndarray:
    """Undo a general (lz4/zstd) compression of one buffer."""
    if len(data) == 0:
        return data
    out = decompress_buffer(pa.py_buffer(np.ascontiguousarray(data)), scheme_name(compression, ctx), ctx)
    return np.frombuffer(out, np.uint8)


class BlockCodec:
    """Decodes a whole buffer of ``count`` values."""

    def decode(self, data: np.ndarray, count: int, ctx: DecodeContext) -> Block:
        raise NotImplementedError

    def decode_many(self, buf: np.ndarray, starts: np.ndarray, sizes: np.ndarray, counts: np.ndarray,
                    ctx: DecodeContext) -> Block:
        """The values of many buffers (``buf[starts[i]:starts[i]+sizes[i]]`` holding ``counts[i]``)."""
        pieces = [
            self.decode(buf[s : s + z], c, ctx)
            for s, z, c in zip(starts.tolist(), sizes.tolist(), counts.tolist())
        ]
        return concat(pieces) if pieces else self.decode(buf[:0], 0, ctx)


class FlatBlock(BlockCodec):
    def __init__(self, bits: int, compression: pb.BufferCompression | None) -> None:
        self.bits = bits
        self.compression = compression

    def decode(self, data: np.ndarray, count: int, ctx: DecodeContext) -> Block:
        if self.compression is not None:
            data = decompress_bytes(data, self.compression, ctx)
        if self.bits == 1:
            if len(data) * 8 < count:
                raise ctx.corrupt(f"bitmap of {len(data)} bytes cannot hold {count} values")
            return Fixed(np.unpackbits(data, count=count, bitorder="little").view(np.bool_), 1)
        if self.bits % 8:
            raise UnsupportedFeatureError(f"flat values of {self.bits} bits are not supported",
                                          path=ctx.path, column=ctx.column)
        need = count * self.bits // 8
        if len(data) < need:
            raise ctx.corrupt(f"flat buffer has {len(data)} bytes, {count} values need {need}")
        return Fixed(data[:need], self.bits)

    def decode_many(self, buf, starts, sizes, counts, ctx):
        if self.compression is not None or self.bits % 8:
            return super().decode_many(buf, starts, sizes, counts, ctx)
        need = counts * (self.bits // 8)
        if bool((sizes < need).any()):
            raise ctx.corrupt("a flat buffer is shorter than its values")
        return Fixed(gather(buf, starts, need), self.bits)


class InlineBitpackedBlock(BlockCodec):
    """FastLanes blocks, each ``[bit width][1024 * width / W words]``; the last is zero-padded."""

    def __init__(self, width: int) -> None:
        if width not in (8, 16, 32, 64):
            raise UnsupportedFeatureError(f"bitpacking of {width}-bit values is not supported")
        self.width = width
        self.dtype = fastlanes.word_dtype(width)

    def decode(self, data, count, ctx):
        return self.decode_many(data, np.zeros(1, np.int64), np.array([len(data)]), np.array([count]), ctx)

    def decode_many(self, buf, starts, sizes, counts, ctx):
        counts = np.asarray(counts, np.int64)
        bpos, bchunk, bindex = self._blocks(buf, starts, sizes, counts, ctx)
        if not len(bpos):
            return Fixed(np.zeros(0, np.uint8), self.width)
        values = self._unpack(buf, bpos, ctx)
        keep = np.minimum(counts[bchunk] - bindex * fastlanes.BLOCK, fastlanes.BLOCK)
        if bool((keep[:-1] == fastlanes.BLOCK).all()):
            flat = values.reshape(-1)[: int(keep.sum())]  # only the last block is partial: a view
        else:
            flat = values[np.arange(fastlanes.BLOCK)[None, :] < keep[:, None]]
        return Fixed(flat.view(np.uint8), self.width)

    def take_many(self, buf, starts, sizes, counts, picks, ctx):
        """The values at ``picks`` (sorted indices into all the buffers' values, in range) only:
        one or two packed words read per value, no block unpacked whole."""
        wb = self.width // 8
        counts = np.asarray(counts, np.int64)
        bpos, _, _ = self._blocks(buf, starts, sizes, counts, ctx)
        nblocks = (counts + fastlanes.BLOCK - 1) // fastlanes.BLOCK
        value_ends = np.cumsum(counts)
        chunk = group_of(picks, value_ends - counts)
        local = picks - (value_ends - counts)[chunk]
        block = (np.cumsum(nblocks) - nblocks)[chunk] + local // fastlanes.BLOCK
        at = bpos[block]
        values = fastlanes.take(buf, at + wb, read_uint(buf, at, wb), local % fastlanes.BLOCK, self.width)
        return Fixed(values.view(np.uint8), self.width)

    def _blocks(self, buf, starts, sizes, counts, ctx) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Where each block of the buffers starts, its buffer and its index there, in buffer
        order (the blocks are checked to fill their buffers exactly)."""
        wb = self.width // 8
        nblocks = (counts + fastlanes.BLOCK - 1) // fastlanes.BLOCK
        # walk the j-th block of every buffer at once (buffers usually hold one block)
        block_pos, block_chunk, block_index = [], [], []
        pos = np.asarray(starts, np.int64).copy()
        ends = pos + np.asarray(sizes, np.int64)
        for j in range(int(nblocks.max()) if len(nblocks) else 0):
            active = np.flatnonzero(nblocks > j)
            if bool((pos[active] + wb > ends[active]).any()):
                raise ctx.corrupt("bit-packed levels run past their buffer")
            widths = read_uint(buf, pos[active], wb)
            if bool((widths > self.width).any()):
                raise ctx.corrupt(f"bit width {int(widths.max())} exceeds the {self.width}-bit values")
            block_pos.append(pos[active])
            block_chunk.append(active)
            block_index.append(np.full(len(active), j))
            pos[active] += wb + widths * (fastlanes.BLOCK // 8)
        if bool((pos != ends).any()):
            # every byte of a bit-packed buffer belongs to a block: anything else is corruption
            raise ctx.corrupt("bit-packed blocks do not fill their buffer exactly")
        if not block_pos:
            empty = np.zeros(0, np.int64)
            return empty, empty, empty
        if len(block_pos) == 1:
            return block_pos[0], block_chunk[0], block_index[0]
        bpos = np.concatenate(block_pos)
        bchunk = np.concatenate(block_chunk)
        bindex = np.concatenate(block_index)
        order = np.lexsort((bindex, bchunk))
        return bpos[order], bchunk[order], bindex[order]

    def _unpack(self, buf: np.ndarray, positions: np.ndarray, ctx: DecodeContext) -> np.ndarray:
        wb = self.width // 8
        compiled = accel.read_kernels(len(positions) * fastlanes.BLOCK * wb) \
            if buf.dtype == np.uint8 and buf.ndim == 1 else None
        if compiled is not None:
            out = np.empty((len(positions), fastlanes.BLOCK), self.dtype)
            if not compiled.unpack_inline_blocks(np.ascontiguousarray(buf), np.asarray(positions, np.int64), wb, out):
                raise ctx.corrupt("bit-packed blocks run past their buffer or exceed their bit width")
            return out
        widths = read_uint(buf, positions, wb)
        first = int(widths[0])
        if bool((widths == first).all()):
            # the usual case: every block has the same width, unpack them straight into the output
            return fastlanes.unpack(self._words(buf, positions + wb, first), first, self.width)
        out = np.empty((len(positions), fastlanes.BLOCK), self.dtype)
        for bits in np.unique(widths).tolist():
            sel = np.flatnonzero(widths == bits)
            out[sel] = fastlanes.unpack(self._words(buf, positions[sel] + wb, bits), bits, self.width)
        return out

    def _words(self, buf: np.ndarray, starts: np.ndarray, bits: int) -> np.ndarray:
        """The packed words of blocks starting at ``starts``, one row per block."""
        nbytes = fastlanes.BLOCK * bits // 8
        n = len(starts)
        if n > 1 and nbytes:
            step = int(starts[1] - starts[0])
            fits = int(starts[0]) >= 0 and int(starts[0]) + (n - 1) * step + nbytes <= len(buf)
            if fits and step >= nbytes and bool((np.diff(starts) == step).all()) and int(starts[0]) % 8 == 0 \
                    and step % 8 == 0:
                # evenly spaced blocks (equal-sized chunks): a strided view, no copy
                rows = np.lib.stride_tricks.as_strided(buf[int(starts[0]):], (n, nbytes), (step, 1))
                return rows.view(self.dtype) if buf.ctypes.data % 8 == 0 else np.ascontiguousarray(rows).view(self.dtype)
        raw = gather(buf, starts, np.full(n, nbytes))
        return np.ascontiguousarray(raw).view(self.dtype).reshape(n, -1)


class OutOfLineBitpackedBlock(BlockCodec):
    def __init__(self, width: int, bits: int) -> None:
        if width not in (8, 16, 32, 64):
            raise UnsupportedFeatureError(f"bitpacking of {width}-bit values is not supported")
        self.width, self.bits = width, bits
        self.dtype = fastlanes.word_dtype(width)

    def decode(self, data, count, ctx):
        if self.bits > self.width:
            raise ctx.corrupt(f"bit width {self.bits} exceeds the {self.width}-bit values")
        wb = self.width // 8
        words = np.ascontiguousarray(data[: len(data) // wb * wb]).view(self.dtype)
        per_block = fastlanes.packed_words(self.bits, self.width)
        whole, tail = divmod(count, fastlanes.BLOCK)
        full = whole * per_block
        raw_tail = tail > 0 and len(words) == full + tail
        nblocks = whole + (1 if tail and not raw_tail else 0)
        if len(words) != nblocks * per_block + (tail if raw_tail else 0) or len(data) % wb:
            raise ctx.corrupt(f"bit-packed buffer of {len(data)} bytes does not hold {count} values")
        out = fastlanes.unpack(words[: nblocks * per_block].reshape(nblocks, per_block), self.bits, self.width)
        out = out.reshape(-1)[: whole * fastlanes.BLOCK + (0 if raw_tail else tail)]
        if raw_tail:
            out = np.concatenate([out, words[full : full + tail]])
        return Fixed(out.view(np.uint8), self.width)


    def decode_many(self, buf, starts, sizes, counts, ctx):
        """All chunks' levels at once: their whole blocks are unpacked together (one bit width)."""
        if self.bits > self.width:
            raise ctx.corrupt(f"bit width {self.bits} exceeds the {self.width}-bit values")
        wb = self.width // 8
        starts = np.asarray(starts, np.int64)
        sizes = np.asarray(sizes, np.int64)
        counts = np.asarray(counts, np.int64)
        compiled = accel.read_kernels(int(counts.sum()) * wb) \
            if self.width == 16 and 0 < self.bits < 16 and buf.dtype == np.uint8 and buf.ndim == 1 else None
        if compiled is not None:
            # rep/def levels: every chunk unpacked in one compiled pass
            status, levels = compiled.unpack_u16(np.ascontiguousarray(buf), starts, sizes, counts, self.bits)
            if status == compiled.UNPACK_SIZE_MISMATCH:
                raise ctx.corrupt("bit-packed levels do not match their buffer size")
            if status == compiled.UNPACK_PAST_END:
                raise ctx.corrupt("bit-packed levels run past their buffer")
            return Fixed(levels.view(np.uint8), self.width)
        per_block = fastlanes.packed_words(self.bits, self.width)
        whole, tail = counts // fastlanes.BLOCK, counts % fastlanes.BLOCK
        words = sizes // wb
        raw_tail = (tail > 0) & (words == whole * per_block + tail)
        nblocks = whole + ((tail > 0) & ~raw_tail)
        if bool((words != nblocks * per_block + np.where(raw_tail, tail, 0)).any()) or bool((sizes % wb).any()):
            raise ctx.corrupt("bit-packed levels do not match their buffer size")
        packed_len = np.minimum(nblocks * fastlanes.BLOCK, counts)  # values coming from packed blocks
        values = np.zeros(0, self.dtype)
        if int(nblocks.sum()):
            block_starts = np.repeat(starts, nblocks) + ranges_index(np.zeros(len(counts), np.int64), nblocks) \
                * (per_block * wb)
            raw = gather(buf, block_starts, np.full(len(block_starts), per_block * wb))
            packed = np.ascontiguousarray(raw).view(self.dtype).reshape(len(block_starts), per_block)
            values = fastlanes.unpack(packed, self.bits, self.width).reshape(-1)
        if not bool(raw_tail.any()):
            # no raw tails: keep the first `count` values of every chunk's blocks with one mask
            total_blocks = int(nblocks.sum())
            if total_blocks == 0:
                return Fixed(np.zeros(0, np.uint8), self.width)
            block_chunk = np.repeat(np.arange(len(counts)), nblocks)
            block_index = ranges_index(np.zeros(len(counts), np.int64), nblocks)
            keep = np.minimum(counts[block_chunk] - block_index * fastlanes.BLOCK, fastlanes.BLOCK)
            if bool((keep == fastlanes.BLOCK).all()):
                return Fixed(values.view(np.uint8), self.width)
            rows = values.reshape(total_blocks, fastlanes.BLOCK)
            first = int(keep[0])
            if bool((keep[:-1] == first).all()):
                # equal chunks of one partial block each (the usual case): two strided copies
                # instead of a boolean mask over every block
                head = (total_blocks - 1) * first
                out = np.empty(head + int(keep[-1]), self.dtype)
                out[:head].reshape(total_blocks - 1, first)[:] = rows[:-1, :first]
                out[head:] = rows[-1, : int(keep[-1])]
                return Fixed(out.view(np.uint8), self.width)
            mask = np.arange(fastlanes.BLOCK)[None, :] < keep[:, None]
            return Fixed(rows[mask].view(np.uint8), self.width)
        tail_at = starts + whole * per_block * wb
        raw_words = np.where(raw_tail, tail, 0)
        if int((tail_at + raw_words * wb).max()) > len(buf) or int(tail_at.min()) < 0:
            raise ctx.corrupt("bit-packed levels run past their buffer")
        compiled = accel.kernels(int(counts.sum()) * wb) if len(counts) >= 8 and buf.dtype == np.uint8 else None
        if compiled is not None:
            # two nogil passes of byte-range copies: every chunk's used unpacked values, then
            # behind each of them its raw tail
            kept = packed_len + raw_words
            dst = np.cumsum(kept) - kept
            block_at = (np.cumsum(nblocks) - nblocks) * fastlanes.BLOCK
            out_bytes = np.empty(int(kept.sum()) * wb, np.uint8)
            compiled.copy_ranges(out_bytes, dst * wb, np.ascontiguousarray(values).view(np.uint8), block_at * wb,
                                 packed_len * wb)
            compiled.copy_ranges(out_bytes, (dst + packed_len) * wb, buf, tail_at, raw_words * wb)
            return Fixed(out_bytes, self.width)
        # each chunk: the used part of its unpacked blocks, then its raw tail (a per-chunk loop
        # over slices: cheaper than index arithmetic over every level)
        pieces, at = [], 0
        for i in range(len(counts)):
            used = int(packed_len[i])
            if used:
                pieces.append(values[at : at + used])
            at += int(nblocks[i]) * fastlanes.BLOCK
            if raw_tail[i]:
                t0 = int(tail_at[i])
                pieces.append(buf[t0 : t0 + int(tail[i]) * wb].view(self.dtype))
        out = np.concatenate(pieces) if pieces else np.zeros(0, self.dtype)
        return Fixed(out.view(np.uint8), self.width)


class RleBlock(BlockCodec):
    """Block RLE: ``u64 values_bytes | values | u8 run lengths``."""

    def __init__(self, width: int) -> None:
        if width not in (8, 16, 32, 64):
            raise UnsupportedFeatureError(f"RLE of {width}-bit values is not supported")
        self.width = width

    def decode(self, data, count, ctx):
        return self.decode_many(data, np.zeros(1, np.int64), np.array([len(data)]), np.array([count]), ctx)

    def decode_many(self, buf, starts, sizes, counts, ctx):
        wb = self.width // 8
        starts = np.asarray(starts, np.int64)
        sizes = np.asarray(sizes, np.int64)
        counts = np.asarray(counts, np.int64)
        empty = sizes == 0
        if bool((counts[empty] > 0).any()) or bool((sizes[~empty] < 8).any()):
            raise ctx.corrupt("RLE buffer is too short")
        live = np.flatnonzero(~empty)
        s, z = starts[live], sizes[live]
        value_bytes = read_uint(buf, s, 8)
        runs = value_bytes // wb
        if bool((value_bytes % wb != 0).any()) or bool((8 + value_bytes + runs > z).any()):
            raise ctx.corrupt("RLE buffer sizes are inconsistent")
        values = np.ascontiguousarray(gather(buf, s + 8, value_bytes)).view(f"<u{wb}")
        lengths = gather(buf, s + 8 + value_bytes, runs).astype(np.int64)
        per_chunk = np.add.reduceat(lengths, np.concatenate([[0], np.cumsum(runs)[:-1]])) if len(runs) else lengths
        per_chunk = np.where(runs > 0, per_chunk, 0)
        if not np.array_equal(per_chunk, counts[live]):
            raise ctx.corrupt("RLE run lengths do not add up to the number of values")
        return Fixed(np.repeat(values, lengths).view(np.uint8), self.width)


class VariableBlock(BlockCodec):
    def decode(self, data, count, ctx):
        if len(data) < 8:
            raise ctx.corrupt("variable-width block is too short")
        bits = int(read_uint(data, np.array([0]), 4)[0])
        if bits == 32:
            start, header, ow = int(read_uint(data, np.array([4]), 4)[0]), 8, 4
        elif bits == 64:
            if len(data) < 16:
                raise ctx.corrupt("variable-width block is too short")
            start, header, ow = int(read_uint(data, np.array([8]), 8)[0]), 16, 8
        else:
            raise ctx.corrupt(f"variable-width block has {bits}-bit offsets")
        if start < header or start > len(data) or (start - header) < (count + 1) * ow:
            raise ctx.corrupt("variable-width block header is inconsistent")
        offsets = read_uint(data, header + ow * np.arange(count + 1), ow)
        return Variable(offsets, data[start:])


class GeneralBlock(BlockCodec):
    def __init__(self, compression: pb.BufferCompression, inner: BlockCodec) -> None:
        self.compression, self.inner = compression, inner

    def decode(self, data, count, ctx):
        return self.inner.decode(decompress_bytes(data, self.compression, ctx), count, ctx)


class ConstantBlock(BlockCodec):
    def __init__(self, value: bytes | None) -> None:
        self.value = value

    def decode(self, data, count, ctx):
        if not self.value:
            raise UnsupportedFeatureError("constant block without a value", path=ctx.path, column=ctx.column)
        item = np.frombuffer(self.value, np.uint8)
        return Fixed(np.tile(item, count), 8 * len(item))


class FslBlock(BlockCodec):
    def __init__(self, dim: int, inner: BlockCodec) -> None:
        self.dim, self.inner = dim, inner

    def decode(self, data, count, ctx):
        return Fsl(self.inner.decode(data, count * self.dim, ctx), self.dim, None)


def block_codec(enc: pb.CompressiveEncoding, ctx: DecodeContext) -> BlockCodec:
    """The block decompressor described by ``enc``."""
    kind = enc.WhichOneof("compression")
    if kind == "flat":
        return FlatBlock(enc.flat.bits_per_value, enc.flat.data if enc.flat.HasField("data") else None)
    if kind == "inline_bitpacking":
        if enc.inline_bitpacking.HasField("values"):
            raise UnsupportedFeatureError("compressed inline bit-packing blocks are not supported",
                                          path=ctx.path, column=ctx.column)
        return InlineBitpackedBlock(enc.inline_bitpacking.uncompressed_bits_per_value)
    if kind == "out_of_line_bitpacking":
        inner = enc.out_of_line_bitpacking.values
        if inner.WhichOneof("compression") != "flat":
            raise ctx.corrupt("out-of-line bit-packing values must be flat")
        return OutOfLineBitpackedBlock(enc.out_of_line_bitpacking.uncompressed_bits_per_value, inner.flat.bits_per_value)
    if kind == "rle":
        values = enc.rle.values
        if values.WhichOneof("compression") != "flat":
            raise ctx.corrupt("RLE values must be flat")
        return RleBlock(values.flat.bits_per_value)
    if kind == "variable":
        return VariableBlock()
    if kind == "general":
        return GeneralBlock(enc.general.compression, block_codec(enc.general.values, ctx))
    if kind == "constant":
        return ConstantBlock(enc.constant.value if enc.constant.HasField("value") else None)
    if kind == "fixed_size_list":
        return FslBlock(enc.fixed_size_list.items_per_value, block_codec(enc.fixed_size_list.values, ctx))
    if kind is None:
        raise ctx.corrupt("compressive encoding is empty")
    raise UnsupportedFeatureError(f"{kind} block compression is not supported", path=ctx.path, column=ctx.column)


def decode_levels(codec: BlockCodec, buf: np.ndarray, starts: np.ndarray, sizes: np.ndarray, counts: np.ndarray,
                  ctx: DecodeContext) -> np.ndarray:
    """Rep or def levels (u16) of many chunks, concatenated."""
    block = codec.decode_many(buf, starts, sizes, counts, ctx)
    if not isinstance(block, Fixed) or block.bits != 16:
        raise ctx.corrupt("repetition/definition levels are not 16-bit values")
    levels = np.ascontiguousarray(block.data).view("<u2")
    if len(levels) != int(np.sum(counts)):
        raise ctx.corrupt(f"decoded {len(levels)} levels instead of {int(np.sum(counts))}")
    return levels


__all__ = ["BlockCodec", "block_codec", "decode_levels", "decompress_bytes"]
