"""Mini-block value compressions of file versions 2.1/2.2 and the choice between them.

A *plan* knows how to cut a page's items into chunks cheaply (a cost model) and how to write
the chunks once the boundaries are fixed (vectorized over the whole page). Plans:

* ``flat`` (fixed width, bool bitmaps, fixed-size lists with per-level validity bitmaps);
* ``inline_bitpacking`` (FastLanes, 1024 values per chunk, per-chunk bit width);
* ``rle`` (values + u8 run lengths, two buffers), chosen by size (see :func:`word_plan`);
* ``variable`` (per chunk: n+1 u32/u64 offsets relative to the chunk, then the bytes, padded
  to the offset width with 0x48);
* ``fsst``: strings FSST-compressed with one symbol table per page (in the encoding), then laid
  out like ``variable``; chosen as pylance chooses it (see :func:`use_fsst`);
* dictionary pages (:mod:`encode_dictionary`) write their u32 indices with one of the plans
  above.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_format.encodings.array_v2_0.encode import Compression
from lance_format.encodings.buffers import compress_buffer
from lance_format.encodings.structural import accel, encode_fsst
from lance_format.encodings.structural.encode_fastlanes import BLOCK, bit_widths, inline_pack_chunks
from lance_format.encodings.structural.encode_rle_chunks import rle_chunk_counts
from lance_format.encodings.structural.encode_values import LeafValues
from lance_format.encodings.structural.encode_variable_chunks import DEFAULT_AIM_BYTES, variable_chunk_counts
from lance_format.encodings.structural.field_params import DEFAULT_PARAMS, FieldParams
from lance_format.proto import encodings_v2_1_pb2 as pb

TARGET_CHUNK_BYTES = 4096  # pylance aims at ~4 KiB of values per chunk
MAX_CHUNK_VALUES = 4096
RLE_MAX_CHUNK_VALUES = 2048
PAD_VARIABLE = 0x48
ZSTD_DEFAULT_LEVEL = 3  # pylance's (zstd's own) default; pyarrow's is 1
GENERAL_MIN_BYTES = 4096  # pylance compresses a page's first value buffer from this size on
_SCHEMES = {"zstd": pb.COMPRESSION_ALGORITHM_ZSTD, "lz4": pb.COMPRESSION_ALGORITHM_LZ4}


def flat_encoding(bits: int) -> pb.CompressiveEncoding:
    return pb.CompressiveEncoding(flat=pb.Flat(bits_per_value=bits))


def variable_encoding(offset_bits: int) -> pb.CompressiveEncoding:
    return pb.CompressiveEncoding(variable=pb.Variable(offsets=flat_encoding(offset_bits)))


class ValuePlan:
    """How one page's items become mini-block value buffers."""

    encoding: pb.CompressiveEncoding
    num_buffers = 1
    max_chunk = MAX_CHUNK_VALUES
    min_chunk = 1  # non-last chunks hold a multiple of this (8 when a bitmap must stay byte-aligned)
    target_bytes = TARGET_CHUNK_BYTES
    chunk_overhead = 0
    uniform: float | None = None  # bytes per value when the cost is linear
    # pylance's plain values (ValueEncoder) give a final chunk that is as full as the others its
    # log2 size too, where the other compressions write 0 for every last chunk
    full_last_chunk_log = False

    def __init__(self, count: int) -> None:
        self.count = count

    def cost_prefix(self) -> np.ndarray:
        """``cost[i]``: estimated bytes of items ``[0, i)`` (only used when ``uniform`` is None)."""
        raise NotImplementedError

    def own_chunks(self) -> np.ndarray | None:
        """Items per chunk when the compression itself decides the chunks (as pylance's RLE does)."""
        return None

    def encode(self, starts: np.ndarray, counts: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """For each buffer: its bytes for all chunks back to back (or, with the compiled
        kernels, a :class:`DeferredVariableChunks` that writes them in place), and each chunk's
        share."""
        raise NotImplementedError


# pylance's plain values: the largest power of two of values (<= 4096) under 8186 bytes per chunk
FLAT_TARGET_BYTES = 8 * 1024 - 7


class FlatPlan(ValuePlan):
    full_last_chunk_log = True
    target_bytes = FLAT_TARGET_BYTES

    def __init__(self, values: LeafValues) -> None:
        super().__init__(values.count)
        self.values = values
        if values.kind == "bool":
            self.encoding = flat_encoding(1)
            self.uniform = 1 / 8
            self.min_chunk = 8
        else:
            self.encoding = flat_encoding(values.bytes_per_value * 8)
            self.uniform = values.bytes_per_value

    def encode(self, starts, counts):
        if self.values.kind == "bool":
            data = np.packbits(self.values.bits, bitorder="little")
            return [(data, (counts + 7) // 8)]
        return [(self.values.matrix.reshape(-1), counts * self.values.bytes_per_value)]


class PackedStructPlan(FlatPlan):
    """Packed struct rows as one flat value each (pylance's PackedStructFixedWidthMiniBlockEncoder:
    plain values whatever the field metadata asks)."""

    def __init__(self, values: LeafValues) -> None:
        super().__init__(values)
        self.encoding = pb.CompressiveEncoding(packed_struct=pb.PackedStruct(
            bits_per_value=values.field_bits, values=flat_encoding(values.bytes_per_value * 8)))


class FslPlan(ValuePlan):
    """Fixed-size lists: one validity bitmap buffer per level with item nulls, then the items."""

    full_last_chunk_log = True
    target_bytes = FLAT_TARGET_BYTES

    def __init__(self, values: LeafValues) -> None:
        super().__init__(values.count)
        self.values = values
        inner = flat_encoding(values.item_bits)
        for dim, validity in zip(reversed(values.dims), reversed(values.item_validity)):
            inner = pb.CompressiveEncoding(
                fixed_size_list=pb.FixedSizeList(items_per_value=dim, values=inner, has_validity=validity is not None)
            )
        self.encoding = inner
        self.num_buffers = 1 + sum(v is not None for v in values.item_validity)
        self.uniform = values.value_width()
        if values.item_bits % 8 or self.num_buffers > 1:
            self.min_chunk = 8

    def encode(self, starts, counts):
        out = []
        cum = 1
        for dim, validity in zip(self.values.dims, self.values.item_validity):
            cum *= dim
            if validity is not None:
                out.append((np.packbits(validity, bitorder="little"), (counts * cum + 7) // 8))
        items_per_value = cum
        if self.values.item_bits == 1:
            out.append((np.packbits(self.values.data, bitorder="little"), (counts * items_per_value + 7) // 8))
        else:
            out.append((self.values.data, counts * items_per_value * (self.values.item_bits // 8)))
        return out


class BitpackPlan(ValuePlan):
    max_chunk = BLOCK

    def __init__(self, words: np.ndarray) -> None:
        super().__init__(len(words))
        self.words = words
        width = words.dtype.itemsize * 8
        self.encoding = pb.CompressiveEncoding(inline_bitpacking=pb.InlineBitpacking(uncompressed_bits_per_value=width))
        self.uniform = words.dtype.itemsize
        self.target_bytes = BLOCK * words.dtype.itemsize

    def encode(self, starts, counts):
        return [inline_pack_chunks(self.words, starts, counts)]


class BssPlan(ValuePlan):
    """Byte-stream-split 32/64-bit values: per chunk (1024 / 512 values), byte 0 of every value,
    then byte 1, ... (Lance's ByteStreamSplitEncoder; pylance uses it only under general
    compression, which it is meant to help)."""

    def __init__(self, words: np.ndarray) -> None:
        super().__init__(len(words))
        self.width = words.dtype.itemsize
        self.matrix = words.view(np.uint8).reshape(len(words), self.width)
        self.max_chunk = 1024 if self.width == 4 else 512
        self.uniform = self.width
        self.encoding = pb.CompressiveEncoding(byte_stream_split=pb.ByteStreamSplit(values=flat_encoding(self.width * 8)))

    def encode(self, starts, counts):
        out = np.empty(self.count * self.width, np.uint8)
        # chunks lie back to back; each run of equal-sized chunks is transposed in one go
        change = np.flatnonzero(np.diff(counts)) + 1
        for first, stop in zip(np.concatenate(([0], change)).tolist(), np.append(change, len(counts)).tolist()):
            k = int(counts[first])
            a, b = int(starts[first]), int(starts[first]) + k * (stop - first)
            out[a * self.width : b * self.width] = self.matrix[a:b].reshape(stop - first, k, self.width).transpose(0, 2, 1).reshape(-1)
        return [(out, counts * self.width)]


def bss_wanted(words: np.ndarray, mode: str | None) -> bool:
    """Lance's choice for byte-stream-split: 32/64-bit values; ``on``/``off`` as told, else
    (``auto``) when the mean Shannon entropy of each byte position over the first 64 values is
    under 4 bits (each position's entropy truncated to 1/1000 bit, as Lance stores it)."""
    width = words.dtype.itemsize
    if width not in (4, 8) or mode == "off":
        return False
    if mode == "on":
        return True
    sample = words[:64].view(np.uint8).reshape(-1, width)
    if not len(sample):
        return False
    total = 0
    for position in range(width):
        counts = np.bincount(sample[:, position], minlength=256)
        p = counts[counts > 0] / len(sample)
        # summed in order, as Lance does, then truncated to thousandths of a bit
        total += int(-np.cumsum(p * np.log2(p))[-1] * 1000)
    return total / width / 1000 < 4.0


class RlePlan(ValuePlan):
    num_buffers = 2
    max_chunk = RLE_MAX_CHUNK_VALUES
    chunk_overhead = 0

    def __init__(self, words: np.ndarray, run_starts: np.ndarray) -> None:
        super().__init__(len(words))
        self.words = words
        self.width = words.dtype.itemsize
        self.run_starts = run_starts
        self.encoding = pb.CompressiveEncoding(
            rle=pb.Rle(values=flat_encoding(self.width * 8), run_lengths=flat_encoding(8))
        )
        self.chunk_overhead = 2 * (self.width + 1)

    def cost_prefix(self):
        marks = np.zeros(self.count + 1, np.int64)
        marks[self.run_starts] = 1
        # a run is split every 255 values; charge one extra run per 255 values of any run
        lengths = np.diff(np.append(self.run_starts, self.count))
        marks[self.run_starts] += lengths // 255
        cost = np.zeros(self.count + 1, np.int64)
        np.cumsum(marks[:-1] * (self.width + 1), out=cost[1:])
        return cost

    def own_chunks(self) -> np.ndarray | None:
        return rle_chunk_counts(self.words)

    def encode(self, starts, counts):
        n = self.count
        boundary = np.zeros(n, np.bool_)
        boundary[self.run_starts] = True
        boundary[starts] = True
        run_pos = np.flatnonzero(boundary)
        run_len = np.diff(np.append(run_pos, n))
        pieces = (run_len + 254) // 255
        sub_pos = np.repeat(run_pos, pieces) + 255 * (
            np.arange(int(pieces.sum())) - np.repeat(np.cumsum(pieces) - pieces, pieces)
        )
        sub_len = np.diff(np.append(sub_pos, n))
        # every chunk start is a run start, so chunk c owns the runs between its start and the next
        first_run = np.searchsorted(sub_pos, starts)
        runs_per_chunk = np.diff(np.append(first_run, len(sub_pos)))
        values = self.words[sub_pos].view(np.uint8)
        return [(values, runs_per_chunk * self.width), (sub_len.astype(np.uint8), runs_per_chunk)]


class VariablePlan(ValuePlan):
    def __init__(self, values: LeafValues, aim: int | None = None) -> None:
        super().__init__(values.count)
        self.values = values
        self.ow = values.offset_width
        self.encoding = variable_encoding(self.ow * 8)
        self.chunk_overhead = 2 * self.ow
        self.aim = DEFAULT_AIM_BYTES if aim is None else aim

    def cost_prefix(self):
        return self.values.offsets + self.ow * np.arange(self.count + 1)

    def own_chunks(self) -> np.ndarray | None:
        assert self.values.offsets is not None  # variable values always carry offsets
        return variable_chunk_counts(self.values.offsets, self.ow, self.aim)

    def encode(self, starts, counts):
        ow = self.ow
        offsets = self.values.offsets
        ends = starts + counts
        data_bytes = offsets[ends] - offsets[starts]
        head = (counts + 1) * ow
        sizes = head + data_bytes
        sizes = sizes + (-sizes) % ow
        total = int(sizes.sum())
        if accel.write_kernels(total) is not None:
            # written by the compiled kernel straight into the mini-block chunks
            return [(DeferredVariableChunks(self.values, starts, counts), sizes)]
        chunk_pos = np.cumsum(sizes) - sizes
        out = np.full(total, PAD_VARIABLE, np.uint8)
        word = out.view(np.uint32 if ow == 4 else np.uint64)
        data = self.values.data
        # offsets: chunk c writes counts[c]+1 offsets relative to its own start
        n_off = counts + 1
        chunk_of = np.repeat(np.arange(len(starts)), n_off)
        k = np.arange(int(n_off.sum())) - np.repeat(np.cumsum(n_off) - n_off, n_off)
        rel = offsets[starts[chunk_of] + k] - offsets[starts[chunk_of]] + head[chunk_of]
        word[(chunk_pos[chunk_of] // ow) + k] = rel
        # bytes: one slice copy per chunk (chunks hold ~4 KiB, so the loop is short)
        dst = (chunk_pos + head).tolist()
        src = offsets[starts].tolist()
        for d, a, size in zip(dst, src, data_bytes.tolist()):
            out[d : d + size] = data[a : a + size]
        return [(out, sizes)]


class DeferredVariableChunks:
    """The ``variable`` chunks of a page, not yet laid out: the mini-block writer has the
    compiled kernel write them into their final place (``write_into``) instead of copying them
    from a buffer of their own."""

    def __init__(self, values: LeafValues, starts: np.ndarray, counts: np.ndarray) -> None:
        assert values.offsets is not None and values.data is not None  # variable values carry both
        self.values, self.starts, self.counts = values, starts, counts

    def write_into(self, out: np.ndarray, positions: np.ndarray) -> None:
        compiled = accel.write_kernels()
        assert compiled is not None  # deferred only when the kernels are loaded
        assert self.values.offsets is not None and self.values.data is not None
        compiled.write_variable_chunks(
            out, positions.astype(np.int64, copy=False), np.ascontiguousarray(self.values.offsets, np.int64),
            np.ascontiguousarray(self.values.data, np.uint8), self.starts.astype(np.int64, copy=False),
            self.counts.astype(np.int64, copy=False), self.values.offset_width, PAD_VARIABLE)


class FsstPlan(VariablePlan):
    """FSST-compressed strings in ``variable`` chunks (Lance's FsstMiniBlockEncoder layout)."""

    def __init__(self, values: LeafValues, aim: int | None = None) -> None:
        # variable values always carry offsets and data
        assert values.offsets is not None and values.data is not None
        table = encode_fsst.train(values.data, values.offsets)
        data, offsets = encode_fsst.compress(values.data, values.offsets, table)
        super().__init__(LeafValues("variable", values.count, offsets=offsets, data=data,
                                    offset_width=values.offset_width), aim)
        self.encoding = pb.CompressiveEncoding(
            fsst=pb.Fsst(symbol_table=encode_fsst.symbol_table_bytes(table), values=self.encoding))


class GeneralPlan(ValuePlan):
    """Another plan's chunks with each chunk's first buffer lz4/zstd-compressed
    (``general{compression, values}``), as pylance writes fields whose metadata sets
    ``lance-encoding:compression``. Chunk boundaries are the inner plan's (uncompressed sizes)."""

    def __init__(self, inner: ValuePlan, compression: Compression) -> None:
        super().__init__(inner.count)
        self.inner, self.compression = inner, compression
        for name in ("num_buffers", "max_chunk", "min_chunk", "target_bytes", "chunk_overhead", "uniform",
                     "full_last_chunk_log"):
            setattr(self, name, getattr(inner, name))
        buffer_compression = pb.BufferCompression(scheme=_SCHEMES[compression.scheme])
        if compression.level is not None:
            buffer_compression.level = compression.level
        self.encoding = pb.CompressiveEncoding(
            general=pb.General(compression=buffer_compression, values=inner.encoding))

    def cost_prefix(self) -> np.ndarray:
        return self.inner.cost_prefix()

    def own_chunks(self) -> np.ndarray | None:
        return self.inner.own_chunks()

    def encode(self, starts, counts):
        buffers = self.inner.encode(starts, counts)
        data, sizes = buffers[0]
        if int(np.sum(sizes)) < GENERAL_MIN_BYTES:
            # pylance leaves small pages as the inner plan wrote them
            self.encoding = self.inner.encoding
            return buffers
        if isinstance(data, DeferredVariableChunks):
            positions = np.cumsum(sizes) - sizes
            raw = np.full(int(sizes.sum()), PAD_VARIABLE, np.uint8)
            data.write_into(raw, positions)
            data = raw
        ends = np.cumsum(sizes).tolist()
        begins = [0, *ends[:-1]]
        # one compressor call per ~4 KiB chunk: each chunk must decompress on its own
        level = self.compression.level
        if level is None and self.compression.scheme == "zstd":
            level = ZSTD_DEFAULT_LEVEL
        pieces = [compress_buffer(data[a:b], self.compression.scheme, level)
                  for a, b in zip(begins, ends)]
        packed = np.frombuffer(b"".join(pieces), np.uint8)
        if len(packed) >= int(np.sum(sizes)):
            # ... and pages the compression does not shrink
            self.encoding = self.inner.encoding
            return [(data, sizes), *buffers[1:]]
        return [(packed, np.array([len(p) for p in pieces], np.int64)), *buffers[1:]]


def use_fsst(values: LeafValues, data_type: pa.DataType) -> bool:
    """Lance's choice: strings (not binary) of at least 32 KiB (bytes and offsets) whose longest
    value has at least 5 bytes."""
    if values.kind != "variable" or not (pa.types.is_string(data_type) or pa.types.is_large_string(data_type)):
        return False
    assert values.offsets is not None  # variable values always carry offsets
    data_size = int(values.offsets[-1]) + values.offset_width * (values.count + 1)
    return data_size >= encode_fsst.MIN_INPUT_BYTES and values.max_value_bytes() >= encode_fsst.MIN_MAX_LENGTH


def _run_starts(words: np.ndarray) -> np.ndarray:
    change = np.flatnonzero(words[1:] != words[:-1]) + 1
    return np.concatenate(([0], change)) if len(words) else change


def word_plan(words: np.ndarray, allow_rle: bool = True, params: FieldParams = DEFAULT_PARAMS) -> ValuePlan:
    """Pick RLE, inline bit-packing or flat for 8/16/32/64-bit words, by pylance 14's size model.

    Bit-packing is estimated at one word plus ``1024 * bit_width / bits`` words per block of
    1024 values (the last block counted whole) and chosen when that is under the plain bytes;
    RLE at one pair of a value and a u8 length per run (per 255 values of a run), chosen when under the plain
    bytes and not above the bit-packing estimate (and, if the field sets ``rle-threshold``, only
    when runs < n x threshold).

    The field's metadata can turn this off (``compression = none``: flat), or put
    byte-stream-split first and wrap the result in lz4/zstd (see :mod:`field_params`).
    """
    if params.off:
        return _flat_words(words)
    general = params.general
    if params.compression is not None and bss_wanted(words, params.bss):
        plan: ValuePlan = BssPlan(words)
    else:
        plan = _word_plan(words, allow_rle, params.rle_threshold)
    return plan if general is None else GeneralPlan(plan, general)


def _flat_words(words: np.ndarray) -> FlatPlan:
    n, width = len(words), words.dtype.itemsize
    return FlatPlan(LeafValues("fixed", n, bytes_per_value=width, words=words,
                               matrix=words.view(np.uint8).reshape(n, width)))


def _word_plan(words: np.ndarray, allow_rle: bool, threshold: float | None) -> ValuePlan:
    n = len(words)
    width = words.dtype.itemsize
    if n == 0:
        return FlatPlan(LeafValues("fixed", 0, bytes_per_value=width, words=words, matrix=words.view(np.uint8).reshape(0, width)))
    full = n // BLOCK * BLOCK
    widths = bit_widths(words[:full].reshape(-1, BLOCK)) if full else np.zeros(0, np.int64)
    if full < n:
        widths = np.append(widths, bit_widths(words[full:][None, :]))
    raw = n * width
    packed = int(((1 + BLOCK * widths // (8 * width)) * width).sum())
    bitpack = packed < raw
    if allow_rle:
        # count the runs first: their starts (an int64 per run) are only needed when RLE wins
        runs = 1 + int(np.count_nonzero(words[1:] != words[:-1]))
        gated = threshold is not None and not runs < n * threshold
        if not gated and runs * (width + 1) < raw:
            run_starts = _run_starts(words)
            # runs over 255 values are stored as several (value, length) pairs
            pieces = int(((np.diff(np.append(run_starts, n)) + 254) // 255).sum())
            rle = pieces * (width + 1)
            if rle < raw and not (bitpack and packed < rle):
                return RlePlan(words, run_starts)
    if bitpack:
        return BitpackPlan(words)
    return _flat_words(words)


def value_plan(values: LeafValues, data_type: pa.DataType | None = None,
               params: FieldParams = DEFAULT_PARAMS) -> ValuePlan:
    """The mini-block plan of a page's values (``data_type``: the leaf's Arrow type, for FSST;
    ``params``: the field's metadata; pylance's lz4/zstd replace FSST on strings and wrap fixed
    values of any width, fixed-size lists excepted)."""
    general = params.general
    if values.kind == "variable":
        aim = params.minichunk_size
        if general is not None:
            return GeneralPlan(VariablePlan(values, aim), general)
        if params.compression == "fsst" or (not params.off and data_type is not None and use_fsst(values, data_type)):
            return FsstPlan(values, aim)
        return VariablePlan(values, aim)
    if values.kind == "fixed" and values.words is not None:
        return word_plan(values.words, params=params)
    if values.kind in ("fixed", "bool"):
        return FlatPlan(values) if general is None else GeneralPlan(FlatPlan(values), general)
    if values.kind == "fsl":
        return FslPlan(values)
    if values.kind == "packed":
        return PackedStructPlan(values)
    if values.kind == "variable":
        return VariablePlan(values)
    raise ValueError(values.kind)
