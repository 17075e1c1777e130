"""Dictionary pages of file versions 2.1/2.2: when pylance 14 replaces a page's items by u32
indices into its distinct values, and how those values are stored (page buffer 2).

Field metadata tunes the choice (``lance-encoding:dict-divisor``, ``…:dict-size-ratio``) and the
storage of the values in 2.2 (``…:dict-values-compression`` lz4 / zstd / none with
``…:dict-values-compression-level``); see :mod:`field_params`.
"""

from __future__ import annotations

import struct
from types import ModuleType

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.encodings.buffers import compress_buffer
from lance_format.encodings.structural import accel
from lance_format.encodings.structural.encode_compression import ZSTD_DEFAULT_LEVEL, flat_encoding, variable_encoding
from lance_format.encodings.structural.encode_fastlanes import BLOCK, bit_widths, inline_pack_chunks, out_of_line_pack
from lance_format.encodings.structural.encode_values import LeafValues, take_values, variable_values
from lance_format.encodings.structural.field_params import DEFAULT_PARAMS, FieldParams
from lance_format.proto import encodings_v2_1_pb2 as pb

DICT_MIN_VALUES = 100
DICT_SIZE_RATIO = 0.8
DICT_SAMPLE = 4096
DICT_DIVISOR = 2
DICT_MAX_CARDINALITY = 100_000
_SCHEMES = {"zstd": pb.COMPRESSION_ALGORITHM_ZSTD, "lz4": pb.COMPRESSION_ALGORITHM_LZ4}



def _as_arrow(values: LeafValues) -> pa.Array:
    if values.kind == "variable":
        # variable values always carry offsets and data
        assert values.offsets is not None and values.data is not None
        offsets = np.ascontiguousarray(values.offsets, np.int64 if values.offset_width == 8 else np.int32)
        data_type = pa.large_binary() if values.offset_width == 8 else pa.binary()
        return pa.Array.from_buffers(data_type, values.count, [None, pa.py_buffer(offsets), pa.py_buffer(values.data)])
    if values.words is None:  # 16-byte values (decimal128): one fixed-size binary each
        assert values.matrix is not None  # fixed values always carry the byte matrix
        matrix = np.ascontiguousarray(values.matrix)
        return pa.Array.from_buffers(pa.binary(values.bytes_per_value), values.count, [None, pa.py_buffer(matrix)])
    return pa.array(values.words)


def _from_arrow(array: pa.Array, like: LeafValues) -> LeafValues:
    if like.kind == "variable":
        return variable_values(array, None)
    if like.words is None:  # 16-byte values
        width = like.bytes_per_value
        buf = array.buffers()[1]
        matrix = np.frombuffer(buf, np.uint8, len(array) * width, array.offset * width).reshape(len(array), width)
        return LeafValues("fixed", len(array), bytes_per_value=width, matrix=matrix)
    words = np.asarray(array.to_numpy(zero_copy_only=False)).astype(like.words.dtype)
    width = like.bytes_per_value
    return LeafValues("fixed", len(words), bytes_per_value=width, words=words,
                      matrix=words.view(np.uint8).reshape(len(words), width))


def try_dictionary(values: LeafValues, minor: int = 2,
                   params: FieldParams = DEFAULT_PARAMS) -> tuple[np.ndarray, LeafValues] | None:
    """Dictionary-encode a page's items where pylance 14 does: (u32 indices, dictionary), or None.

    Its rule (fitted to pylance 14's choices over string and int64 pages of 1,000 to 400,000
    values, every choice matched): strings and binaries, and 64-bit values in 2.2, of at least
    100 values; the distinct values among the first 4,096, scaled to the page, and the actual
    number of distinct values must both stay within ``min(n / 2, 100,000)``; and the dictionary
    plus u32 indices (and the dictionary's offsets) must take at most 0.8 of the plain bytes.
    128-bit values (decimals) are dictionary-encoded in 2.1 too, as pylance does.
    """
    n = values.count
    if n < DICT_MIN_VALUES:
        return None
    if values.kind == "fixed":
        if not (values.bytes_per_value == 16 or values.bytes_per_value == 8 and values.words is not None and minor >= 2):
            return None
    elif values.kind != "variable":
        return None
    divisor = DICT_DIVISOR if params.dict_divisor is None else params.dict_divisor
    limit = min(n // divisor, DICT_MAX_CARDINALITY)
    compiled = accel.write_kernels(values.raw_bytes()) if values.kind == "variable" else None
    found = _distinct_compiled(compiled, values, limit) if compiled is not None else _distinct_arrow(values, limit)
    if found is None:
        return None
    indices, dictionary = found
    cardinality = dictionary.count
    if values.kind == "variable":
        assert values.offsets is not None and dictionary.offsets is not None  # variable values carry offsets
        width = values.offset_width
        size = int(dictionary.offsets[-1]) + (cardinality + 1) * width + 4 * n
        plain = int(values.offsets[-1]) + (n + 1) * width
    else:
        width = values.bytes_per_value
        size, plain = width * cardinality + 4 * n, width * n
    if size > (DICT_SIZE_RATIO if params.dict_size_ratio is None else params.dict_size_ratio) * plain:
        return None
    return indices, dictionary


def _distinct_arrow(values: LeafValues, limit: int) -> tuple[np.ndarray, LeafValues] | None:
    """(u32 indices, dictionary) by Arrow's ``dictionary_encode``, or None when the first values
    (scaled to the page) or all of them have more than ``limit`` distinct values."""
    n = values.count
    arrow = _as_arrow(values)
    # a cheap look at the first values first: hashing a whole high-cardinality page is costly
    sample = min(n, DICT_SAMPLE)
    if pc.count_distinct(arrow.slice(0, sample)).as_py() * n / sample > limit:
        return None
    encoded = arrow.dictionary_encode()
    if len(encoded.dictionary) > limit:
        return None
    indices = np.asarray(encoded.indices.to_numpy(zero_copy_only=False)).astype(np.uint32)
    return indices, _from_arrow(encoded.dictionary, values)


def _distinct_compiled(compiled: ModuleType, values: LeafValues, limit: int) -> tuple[np.ndarray, LeafValues] | None:
    """:func:`_distinct_arrow` of strings by the compiled hash table: the same decisions, the same
    dictionary (first occurrences, in order) and indices."""
    assert values.offsets is not None and values.data is not None  # variable values carry both
    n = values.count
    data = np.ascontiguousarray(values.data, np.uint8)
    offsets = np.ascontiguousarray(values.offsets, np.int64)
    sample = min(n, DICT_SAMPLE)
    if len(compiled.dictionary_encode(data, offsets[: sample + 1], sample)[1]) * n / sample > limit:
        return None
    indices, firsts = compiled.dictionary_encode(data, offsets, limit)
    if len(indices) != n:  # gave up: more than limit distinct values
        return None
    return indices, take_values(values, firsts)


def dictionary_block(dictionary: LeafValues, minor: int = 2,
                     params: FieldParams = DEFAULT_PARAMS) -> tuple[bytes, pb.CompressiveEncoding]:
    """Page buffer 2 of a dictionary page: the distinct values in Lance's block form.

    8/16/32/64-bit values are bit-packed where pylance's block compressor does it (see
    :func:`_bitpacked_dictionary`). Otherwise, in 2.2 pylance compresses the dictionary with the
    field's ``dict-values-compression``, LZ4 by default (``general{lz4}``: u32 LE size, then a
    raw LZ4 block; zstd: u64 LE size, then a frame); 2.1 stores it plain.
    """
    packed_block = _bitpacked_dictionary(dictionary)
    if packed_block is not None:
        return packed_block
    block, encoding = _plain_dictionary_block(dictionary)
    scheme = params.dict_values_compression or "lz4"
    if minor < 2 or dictionary.kind == "bool" or scheme == "none":
        return block, encoding
    level = params.dict_values_level
    compressed = compress_buffer(block, scheme, level if level is not None or scheme != "zstd" else ZSTD_DEFAULT_LEVEL)
    compression = pb.BufferCompression(scheme=_SCHEMES[scheme])
    if level is not None:
        compression.level = level
    return compressed, pb.CompressiveEncoding(general=pb.General(compression=compression, values=encoding))


def _bitpacked_dictionary(dictionary: LeafValues) -> tuple[bytes, pb.CompressiveEncoding] | None:
    """Lance's block bit-packing of fixed-width dictionary values: none when a block of 1024 values
    is all zeros or one block of bit-packing would not be smaller than the values; inline (one
    block with its bit width) up to 1024 values, out-of-line at the widest block's width above."""
    words = dictionary.words
    if dictionary.kind != "fixed" or words is None or not len(words):
        return None
    n = len(words)
    full = n // BLOCK * BLOCK
    widths = bit_widths(words[:full].reshape(-1, BLOCK)) if full else np.zeros(0, np.int64)
    if full < n:
        widths = np.append(widths, bit_widths(words[full:][None, :]))
    if (widths == 0).any() or (len(widths) == 1 and (BLOCK * int(widths[0]) + 7) // 8 >= words.nbytes):
        return None
    bits = words.dtype.itemsize * 8
    if n <= BLOCK:
        data, _ = inline_pack_chunks(words, np.zeros(1, np.int64), np.full(1, n, np.int64))
        encoding = pb.CompressiveEncoding(inline_bitpacking=pb.InlineBitpacking(uncompressed_bits_per_value=bits))
    else:
        width = int(widths.max())
        data, _ = out_of_line_pack(words, width, np.zeros(1, np.int64), np.full(1, n, np.int64))
        encoding = pb.CompressiveEncoding(out_of_line_bitpacking=pb.OutOfLineBitpacking(
            uncompressed_bits_per_value=bits, values=flat_encoding(width)))
    return np.ascontiguousarray(data).view(np.uint8).tobytes(), encoding


def _plain_dictionary_block(dictionary: LeafValues) -> tuple[bytes, pb.CompressiveEncoding]:
    if dictionary.kind == "variable":
        ow = dictionary.offset_width
        fmt = "<II" if ow == 4 else "<QQ"
        # variable values always carry offsets and data
        assert dictionary.offsets is not None and dictionary.data is not None
        offsets = dictionary.offsets.astype(np.uint32 if ow == 4 else np.uint64)
        start = 2 * ow + offsets.nbytes
        return struct.pack(fmt, ow * 8, start) + offsets.tobytes() + dictionary.data.tobytes(), variable_encoding(ow * 8)
    if dictionary.kind == "bool":
        assert dictionary.bits is not None  # bool values always carry bits
        return np.packbits(dictionary.bits, bitorder="little").tobytes(), flat_encoding(1)
    if dictionary.kind == "fixed":
        assert dictionary.matrix is not None  # fixed values always carry the byte matrix
        return dictionary.matrix.tobytes(), flat_encoding(dictionary.bytes_per_value * 8)
    raise ValueError(f"cannot store a dictionary of {dictionary.kind} values")
