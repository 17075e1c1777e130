"""Page decoders of Lance file version 2.0 (pages described by ``ArrayEncoding`` trees).

``decode_leaf`` turns one page (its ArrayEncoding and buffers) into an Arrow array of the
requested type: Nullable/Flat (optionally zstd/lz4-compressed), FixedSizeList, Binary (u64 end
offsets + null_adjustment), Dictionary (u8 indices with 0 = null for utf8 pages; raw keys for
Arrow dictionary columns). ``decode_list_offsets`` decodes a List offsets page.

Every size, index and offset read from the file is validated before it is used, so corrupt
input raises :class:`CorruptFileError` instead of producing wrong data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lance_format.encodings.array_v2_0.packed_struct import decode_packed_struct
from lance_format.encodings.buffers import DecodeContext, bitmap_to_bools, bools_to_bitmap, decompress_buffer
from lance_format.errors import UnsupportedFeatureError
from lance_format.proto import encodings_v2_0_pb2 as pb

_INT32_MAX = 2**31 - 1


def _unsupported(what: str, ctx: DecodeContext) -> UnsupportedFeatureError:
    return UnsupportedFeatureError(f"{what} is not supported in 2.0 pages", path=ctx.path, column=ctx.column)


def _buffer(ref: pb.Buffer, buffers: list[pa.Buffer], ctx: DecodeContext) -> pa.Buffer:
    if ref.buffer_type != pb.Buffer.page:
        raise _unsupported("a column or file buffer reference", ctx)
    if ref.buffer_index >= len(buffers):
        raise ctx.corrupt(f"page refers to buffer {ref.buffer_index} but has only {len(buffers)} buffers")
    return buffers[ref.buffer_index]


def _flat_data(enc: pb.Flat, buffers: list[pa.Buffer], nbits: int | None, ctx: DecodeContext) -> pa.Buffer:
    """The (decompressed) buffer of a Flat encoding, checked to hold at least ``nbits`` bits."""
    data = _buffer(enc.buffer, buffers, ctx)
    if enc.HasField("compression") and enc.compression.scheme not in ("", "none"):
        data = decompress_buffer(data, enc.compression.scheme, ctx)
    if nbits is not None and len(data) * 8 < nbits:
        raise ctx.corrupt(f"page buffer holds {len(data)} bytes but {(nbits + 7) // 8} are needed")
    return data


def _expected_bits(data_type: pa.DataType, ctx: DecodeContext) -> int:
    if pa.types.is_boolean(data_type):
        return 1
    try:
        return data_type.bit_width
    except ValueError:
        raise ctx.corrupt(f"a flat page cannot hold values of type {data_type}") from None


def _unwrap_nullable(
    enc: pb.ArrayEncoding, buffers: list[pa.Buffer], length: int, ctx: DecodeContext
) -> tuple[pb.ArrayEncoding | None, pa.Buffer | None]:
    """(values encoding, validity bitmap or None) of a page; ``(None, None)`` when all null."""
    if enc.WhichOneof("array_encoding") != "nullable":
        return enc, None
    which = enc.nullable.WhichOneof("nullability")
    if which == "all_nulls":
        return None, None
    if which == "no_nulls":
        return enc.nullable.no_nulls.values, None
    if which == "some_nulls":
        validity_enc = enc.nullable.some_nulls.validity
        if validity_enc.WhichOneof("array_encoding") != "flat" or validity_enc.flat.bits_per_value != 1:
            raise _unsupported("a validity encoding other than a 1-bit flat bitmap", ctx)
        return enc.nullable.some_nulls.values, _flat_data(validity_enc.flat, buffers, length, ctx)
    raise ctx.corrupt("nullable encoding without a nullability case")


def decode_leaf(enc: pb.ArrayEncoding, buffers: list[pa.Buffer], length: int, data_type: pa.DataType, ctx: DecodeContext) -> pa.Array:
    """Decode ``length`` values of ``data_type`` from one page."""
    values, validity = _unwrap_nullable(enc, buffers, length, ctx)
    if values is None:
        return pa.nulls(length, data_type)
    return _decode_inner(values, buffers, length, data_type, validity, ctx)


def _decode_inner(
    enc: pb.ArrayEncoding,
    buffers: list[pa.Buffer],
    length: int,
    data_type: pa.DataType,
    validity: pa.Buffer | None,
    ctx: DecodeContext,
) -> pa.Array:
    kind = enc.WhichOneof("array_encoding")
    if kind == "flat":
        if pa.types.is_dictionary(data_type) or pa.types.is_fixed_size_list(data_type):
            raise ctx.corrupt(f"flat page found for a column of type {data_type}")
        bits = enc.flat.bits_per_value
        expected = _expected_bits(data_type, ctx)
        if bits != expected:
            raise ctx.corrupt(f"flat page has {bits} bits per value, type {data_type} needs {expected}")
        data = _flat_data(enc.flat, buffers, length * bits, ctx)
        return pa.Array.from_buffers(data_type, length, [validity, data])
    if kind == "fixed_size_list":
        if not pa.types.is_fixed_size_list(data_type):
            raise ctx.corrupt(f"fixed_size_list page found for a column of type {data_type}")
        dim = enc.fixed_size_list.dimension
        if dim != data_type.list_size:
            raise ctx.corrupt(f"fixed_size_list page has dimension {dim}, type {data_type} needs {data_type.list_size}")
        if enc.fixed_size_list.has_validity:
            raise _unsupported("fixed_size_list with inline validity", ctx)
        items = decode_leaf(enc.fixed_size_list.items, buffers, length * dim, data_type.value_type, ctx)
        return pa.Array.from_buffers(data_type, length, [validity], children=[items])
    if kind == "binary":
        return _decode_binary(enc.binary, buffers, length, data_type, validity, ctx)
    if kind == "packed_struct":
        return decode_packed_struct(enc.packed_struct, buffers, length, data_type, validity, ctx)
    if kind == "dictionary":
        if validity is not None:
            raise _unsupported("a dictionary page inside a nullable wrapper", ctx)
        return _decode_dictionary(enc.dictionary, buffers, length, data_type, ctx)
    if kind is None:
        raise ctx.corrupt("page has an empty ArrayEncoding")
    raise _unsupported(f"the {kind!r} encoding", ctx)


def decode_u64(enc: pb.ArrayEncoding, buffers: list[pa.Buffer], length: int, ctx: DecodeContext) -> np.ndarray:
    """A non-null u64 array (binary indices, list offsets) as numpy."""
    array = decode_leaf(enc, buffers, length, pa.uint64(), ctx)
    if array.null_count:
        raise ctx.corrupt("offsets of a page contain nulls")
    return np.frombuffer(array.buffers()[1], np.uint64, length, array.offset * 8)


def decode_leaf_window(
    enc: pb.ArrayEncoding, buffers: list[pa.Buffer], length: int, data_type: pa.DataType, lo: int, hi: int, ctx: DecodeContext
) -> pa.Array | None:
    """Values ``[lo, hi)`` of a binary page, decoding only that window, or None when the page
    is not an uncompressed binary page (the caller then decodes the whole page and slices).

    A point lookup (``take`` of a few rows) would otherwise validate and convert the offsets of
    every value in the page; here the cost follows the window, not the page.
    """
    values, validity = _unwrap_nullable(enc, buffers, length, ctx)
    if values is None or values.WhichOneof("array_encoding") != "binary":
        return None
    indices, _ = _unwrap_nullable(values.binary.indices, buffers, length, ctx)  # pylance wraps offsets too
    if indices is None or indices.WhichOneof("array_encoding") != "flat" or (
        indices.flat.HasField("compression") and indices.flat.compression.scheme not in ("", "none")
    ):
        return None  # decompressing costs the whole page anyway: decode it once and cache it
    return _decode_binary(values.binary, buffers, length, data_type, validity, ctx, lo, hi)


def _decode_binary(
    enc: pb.Binary,
    buffers: list[pa.Buffer],
    length: int,
    data_type: pa.DataType,
    outer_validity: pa.Buffer | None,
    ctx: DecodeContext,
    lo: int = 0,
    hi: int | None = None,
) -> pa.Array:
    """Values ``[lo, hi)`` (default: all) of a binary page."""
    large = pa.types.is_large_string(data_type) or pa.types.is_large_binary(data_type)
    if not (large or pa.types.is_string(data_type) or pa.types.is_binary(data_type)):
        raise ctx.corrupt(f"binary page found for a column of type {data_type}")
    hi = length if hi is None else hi
    data = _flat_data(enc.bytes.flat, buffers, None, ctx) if enc.bytes.WhichOneof("array_encoding") == "flat" else None
    if data is None:
        raise _unsupported(f"binary bytes encoded as {enc.bytes.WhichOneof('array_encoding')!r}", ctx)
    # Ends of the values before the window's first one (its start) up to its last one.
    first = max(lo - 1, 0)
    raw = decode_u64(enc.indices, buffers, length, ctx)[first:hi]
    adjustment = np.uint64(enc.null_adjustment)
    if raw.size and adjustment:
        nulls = raw >= adjustment
        ends = np.where(nulls, raw - adjustment, raw) if nulls.any() else raw
    else:
        nulls = np.zeros(raw.size, np.bool_)
        ends = raw
    if lo > 0:
        start, ends, nulls = int(ends[0]), ends[1:], nulls[1:]
    else:
        start = 0
    count = hi - lo
    if count:
        if np.any(ends[1:] < ends[:-1]) or int(ends[0]) < start or int(ends[-1]) > len(data):
            raise ctx.corrupt(f"string offsets are not increasing or exceed the {len(data)}-byte data buffer")
        if not large and int(ends[-1]) > _INT32_MAX:
            raise ctx.corrupt("string data of a page exceeds 2 GiB; read the column as a large type")
    offsets = np.empty(count + 1, np.int64 if large else np.int32)
    offsets[0] = 0
    if start and count:  # a window: rebase its offsets onto the slice of the data it covers
        data = data.slice(start, int(ends[-1]) - start)
        offsets[1:] = ends - np.uint64(start)
    else:
        offsets[1:] = ends
    valid = ~nulls
    if outer_validity is not None:
        byte_lo = lo // 8
        window = bitmap_to_bools(outer_validity.slice(byte_lo), hi - byte_lo * 8)
        valid &= window[lo - byte_lo * 8 :]
    validity = None if valid.all() else bools_to_bitmap(valid)
    return pa.Array.from_buffers(data_type, count, [validity, pa.py_buffer(offsets), data])


def _decode_dictionary(enc: pb.Dictionary, buffers: list[pa.Buffer], length: int, data_type: pa.DataType, ctx: DecodeContext) -> pa.Array:
    count = enc.num_dictionary_items
    if pa.types.is_dictionary(data_type):
        # An Arrow dictionary column: keys are stored as-is; null rows point at a null item.
        items = decode_leaf(enc.items, buffers, count, data_type.value_type, ctx)
        keys = decode_leaf(enc.indices, buffers, length, data_type.index_type, ctx)
        codes = keys.fill_null(0).to_numpy(zero_copy_only=False)
        if length and (codes.min() < 0 or codes.max() >= max(count, 1)):
            raise ctx.corrupt(f"dictionary index out of range (dictionary has {count} items)")
        valid = np.ones(length, np.bool_) if keys.null_count == 0 else keys.is_valid().to_numpy(zero_copy_only=False)
        if items.null_count and count:
            # Null rows point at null items; drop those items (Arrow cannot concatenate
            # dictionaries holding nulls) and re-number the keys of the other rows.
            keep = items.is_valid().to_numpy(zero_copy_only=False)
            valid &= keep[codes]
            renumber = (np.cumsum(keep) - 1).astype(codes.dtype)
            codes = np.where(valid, renumber[codes], 0).astype(codes.dtype)
            items = items.filter(pa.array(keep))
        validity = None if valid.all() else bools_to_bitmap(valid)
        keys = pa.Array.from_buffers(data_type.index_type, length, [validity, pa.py_buffer(codes)])
        return pa.DictionaryArray.from_arrays(keys, items)
    # A utf8 page pylance dictionary-encoded: u8 indices, 0 = null, k = items[k - 1].
    items = decode_leaf(enc.items, buffers, count, data_type, ctx)
    index_bits = _flat_bits(enc.indices)
    index_type = None if index_bits is None else _UNSIGNED.get(index_bits)
    if index_type is None:
        raise _unsupported(f"dictionary indices of {_flat_bits(enc.indices)} bits", ctx)
    codes = decode_leaf(enc.indices, buffers, length, index_type, ctx)
    if codes.null_count:
        raise ctx.corrupt("dictionary indices contain nulls")
    idx = codes.to_numpy(zero_copy_only=False).astype(np.int32)
    if length and int(idx.max()) > count:
        raise ctx.corrupt(f"dictionary index {int(idx.max())} out of range (dictionary has {count} items)")
    nulls = idx == 0
    take = pa.array(idx - 1, pa.int32(), mask=nulls if nulls.any() else None)
    return items.take(take)


_UNSIGNED = {8: pa.uint8(), 16: pa.uint16(), 32: pa.uint32(), 64: pa.uint64()}


def _flat_bits(enc: pb.ArrayEncoding) -> int | None:
    """bits_per_value of the Flat inside an (optionally Nullable-wrapped) encoding."""
    if enc.WhichOneof("array_encoding") == "nullable":
        which = enc.nullable.WhichOneof("nullability")
        if which == "no_nulls":
            return _flat_bits(enc.nullable.no_nulls.values)
        if which == "some_nulls":
            return _flat_bits(enc.nullable.some_nulls.values)
        return 8
    if enc.WhichOneof("array_encoding") == "flat":
        return enc.flat.bits_per_value
    return None


@dataclass
class ListOffsetsPage:
    """A decoded List offsets page: raw u64 values plus the page's adjustment and item count."""

    ends: np.ndarray  # int64 end offsets relative to the page's first item
    valid: np.ndarray  # bool per list
    num_items: int


def decode_list_offsets(enc: pb.ArrayEncoding, buffers: list[pa.Buffer], length: int, ctx: DecodeContext) -> ListOffsetsPage:
    if enc.WhichOneof("array_encoding") != "list":
        raise ctx.corrupt(f"expected a list offsets page, found {enc.WhichOneof('array_encoding')!r}")
    adjustment = enc.list.null_offset_adjustment
    num_items = enc.list.num_items
    raw = decode_u64(enc.list.offsets, buffers, length, ctx)
    if not length:
        if num_items:
            raise ctx.corrupt("empty list page claims to reference items")
        return ListOffsetsPage(np.zeros(0, np.int64), np.zeros(0, np.bool_), 0)
    if adjustment == 0 or num_items >= 2**62:
        raise ctx.corrupt(f"list page has an invalid null_offset_adjustment {adjustment} / num_items {num_items}")
    adj = np.uint64(adjustment)
    valid = raw < adj
    ends = (raw if valid.all() else np.where(valid, raw, raw - adj)).astype(np.int64)
    if (
        np.any(raw >= np.uint64(2 * adjustment))
        or np.any(ends[1:] < ends[:-1])
        or int(ends[-1]) != num_items
    ):
        raise ctx.corrupt(f"list offsets do not add up to the page's {num_items} items")
    return ListOffsetsPage(ends, valid, int(num_items))
