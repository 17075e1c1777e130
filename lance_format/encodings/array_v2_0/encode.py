"""Page encoders of Lance file version 2.0 (the encodings pylance 14 writes for ``version="2.0"``).

* fixed width (ints, floats, bool, temporal, decimal, fixed_size_binary) and fixed_size_list of
  those: ``Nullable{NoNull|SomeNull|AllNull}`` around ``Flat`` / ``FixedSizeList``;
* utf8/binary/large_*: ``Binary`` (u64 end offsets, null rows add ``null_adjustment``);
* utf8 pages with >= 100 rows and < 100 distinct values: ``Dictionary`` with u8 indices (0 = null);
* Arrow dictionary columns: ``Dictionary`` with the key type as indices; the chunk dictionaries
  are concatenated and null keys point at an extra null item appended at the end;
* list offsets pages: ``List`` (u64 end offsets relative to the page, null lists add
  ``null_offset_adjustment = num_items + 1``); struct header pages: ``SimpleStruct``.

Every encoder respects Arrow array offsets (sliced input) and never copies more than it must.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.encodings.buffers import bitmap_slice, compress_buffer, validity_bools
from lance_format.errors import UnsupportedFeatureError
from lance_format.proto import encodings_v2_0_pb2 as pb

DEFAULT_DICT_THRESHOLD = 100
COMPRESSION_META_KEY = "lance-encoding:compression"
COMPRESSION_LEVEL_META_KEY = "lance-encoding:compression-level"


def dict_threshold() -> int:
    """pylance's ``LANCE_DICT_ENCODING_THRESHOLD`` (default 100), honoured for parity."""
    try:
        return int(os.environ.get("LANCE_DICT_ENCODING_THRESHOLD", DEFAULT_DICT_THRESHOLD))
    except ValueError:
        return DEFAULT_DICT_THRESHOLD


@dataclass
class EncodedPage:
    """One page: its buffers (in buffer-index order), its ArrayEncoding and its length."""

    buffers: list = field(default_factory=list)
    encoding: pb.ArrayEncoding = field(default_factory=pb.ArrayEncoding)
    length: int = 0

    def add(self, buf) -> int:
        self.buffers.append(buf if buf is not None else b"")
        return len(self.buffers) - 1


@dataclass(frozen=True)
class Compression:
    scheme: str
    level: int | None = None


def compression_from_metadata(metadata: dict[str, bytes] | None) -> Compression | None:
    """The general compression a field's metadata asks for (only zstd/lz4 are honoured in 2.0)."""
    if not metadata:
        return None
    raw = metadata.get(COMPRESSION_META_KEY)
    if raw is None:
        return None
    scheme = raw.decode() if isinstance(raw, bytes) else str(raw)
    if scheme not in ("zstd", "lz4"):
        return None  # pylance ignores "none"/"fsst" here for 2.0 binary pages too (fsst is 2.1+)
    level_raw = metadata.get(COMPRESSION_LEVEL_META_KEY)
    level = None
    if level_raw is not None:
        try:
            level = int(level_raw.decode() if isinstance(level_raw, bytes) else level_raw)
        except ValueError:
            level = None
    return Compression(scheme, level)


# -- protobuf builders -------------------------------------------------------------------------


def flat(bits: int, index: int, compression: Compression | None = None) -> pb.ArrayEncoding:
    enc = pb.ArrayEncoding()
    enc.flat.bits_per_value = bits
    enc.flat.buffer.buffer_index = index
    enc.flat.buffer.buffer_type = pb.Buffer.page
    if compression is not None:
        enc.flat.compression.scheme = compression.scheme
        if compression.level is not None:
            enc.flat.compression.level = compression.level
    return enc


def no_nulls(values: pb.ArrayEncoding) -> pb.ArrayEncoding:
    enc = pb.ArrayEncoding()
    enc.nullable.no_nulls.values.CopyFrom(values)
    return enc


def struct_page(num_rows: int) -> EncodedPage:
    enc = pb.ArrayEncoding()
    enc.struct.SetInParent()
    return EncodedPage([], enc, num_rows)


# -- fixed width ---------------------------------------------------------------------------------


def is_fixed_width(data_type: pa.DataType) -> bool:
    if pa.types.is_fixed_size_list(data_type):
        return is_fixed_width(data_type.value_type)
    return pa.types.is_boolean(data_type) or (
        isinstance(data_type, pa.FixedSizeBinaryType)
        or (data_type.num_fields == 0 and _bit_width(data_type) is not None)
    )


def _bit_width(data_type: pa.DataType) -> int | None:
    try:
        return data_type.bit_width
    except ValueError:
        return None


def _values_buffer(array: pa.Array):
    """The value bytes of a fixed-width array for its rows only (bool: a re-based bitmap)."""
    n = len(array)
    data = array.buffers()[1]
    if pa.types.is_boolean(array.type):
        return bitmap_slice(data, array.offset, n) if data is not None else pa.py_buffer(bytes((n + 7) // 8))
    width = array.type.bit_width // 8
    if data is None:
        return pa.py_buffer(bytes(n * width))
    return data.slice(array.offset * width, n * width)


def _inner_fixed(array: pa.Array, page: EncodedPage) -> pb.ArrayEncoding:
    data_type = array.type
    if pa.types.is_fixed_size_list(data_type):
        dim = data_type.list_size
        items = array.values.slice(array.offset * dim, len(array) * dim)
        enc = pb.ArrayEncoding()
        enc.fixed_size_list.dimension = dim
        enc.fixed_size_list.items.CopyFrom(_nullable_fixed(items, page))
        return enc
    return flat(data_type.bit_width, page.add(_values_buffer(array)))


def _nullable_fixed(array: pa.Array, page: EncodedPage) -> pb.ArrayEncoding:
    n = len(array)
    nulls = array.null_count
    enc = pb.ArrayEncoding()
    if n == 0 or nulls == n:
        # pylance also writes empty pages (e.g. items of all-null lists) as all-null
        enc.nullable.all_nulls.SetInParent()
        return enc
    if nulls == 0:
        enc.nullable.no_nulls.values.CopyFrom(_inner_fixed(array, page))
        return enc
    validity_index = page.add(bitmap_slice(array.buffers()[0], array.offset, n))
    enc.nullable.some_nulls.validity.CopyFrom(flat(1, validity_index))
    enc.nullable.some_nulls.values.CopyFrom(_inner_fixed(array, page))
    return enc


# -- variable width ------------------------------------------------------------------------------


def _binary_parts(array: pa.Array) -> tuple[np.ndarray, pa.Buffer, int]:
    """(u64 end offsets relative to the page with nulls adjusted, bytes, null_adjustment)."""
    n = len(array)
    large = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
    dtype = np.int64 if large else np.int32
    bufs = array.buffers()
    if n == 0:
        return np.zeros(0, np.uint64), pa.py_buffer(b""), 0
    offsets = np.frombuffer(bufs[1], dtype, n + 1, array.offset * dtype().itemsize)
    first = int(offsets[0])
    total = int(offsets[-1]) - first
    ends = (offsets[1:] - first).astype(np.uint64)
    data = bufs[2].slice(first, total) if bufs[2] is not None and total else pa.py_buffer(b"")
    adjustment = total + 1
    valid = validity_bools(array)
    if valid is not None:
        ends[~valid] += np.uint64(adjustment)
    return ends, data, adjustment


def _binary(array: pa.Array, page: EncodedPage, compression: Compression | None) -> pb.ArrayEncoding:
    ends, data, adjustment = _binary_parts(array)
    indices = no_nulls(flat(64, page.add(ends)))
    if compression is not None:
        data = compress_buffer(data, compression.scheme, compression.level)
    enc = pb.ArrayEncoding()
    enc.binary.indices.CopyFrom(indices)
    enc.binary.bytes.CopyFrom(flat(8, page.add(data), compression))
    enc.binary.null_adjustment = adjustment
    return enc


def _is_binary_like(data_type: pa.DataType) -> bool:
    return (
        pa.types.is_string(data_type)
        or pa.types.is_large_string(data_type)
        or pa.types.is_binary(data_type)
        or pa.types.is_large_binary(data_type)
    )


def _dictionary_candidate(array: pa.Array) -> pa.DictionaryArray | None:
    """pylance's rule: utf8 only, >= threshold rows and < threshold distinct non-null values."""
    threshold = dict_threshold()
    if not pa.types.is_string(array.type) or len(array) < threshold:
        return None
    # cheap early exit on a prefix: its distinct count is a lower bound of the page's
    prefix = array.slice(0, 4 * threshold)
    if pc.count_distinct(prefix, mode="only_valid").as_py() >= threshold:
        return None
    encoded = array.dictionary_encode()  # dictionary in first-occurrence order, like pylance
    if len(encoded.dictionary) >= threshold:
        return None
    return encoded


def _string_dictionary(encoded: pa.DictionaryArray, page: EncodedPage) -> pb.ArrayEncoding:
    indices = encoded.indices
    codes = (indices.fill_null(-1).to_numpy(zero_copy_only=False) + 1).astype(np.uint8)
    items = encoded.dictionary
    if len(items) == 0:
        items = pa.nulls(1, pa.string())  # pylance keeps one null item when every row is null
    enc = pb.ArrayEncoding()
    enc.dictionary.indices.CopyFrom(no_nulls(flat(8, page.add(codes))))
    enc.dictionary.items.CopyFrom(_binary(items, page, None))
    enc.dictionary.num_dictionary_items = len(items)
    return enc


# -- Arrow dictionary columns ------------------------------------------------------------------


def _key_max(index_type: pa.DataType) -> int:
    return int(np.iinfo(index_type.to_pandas_dtype()).max)


def group_dictionary_chunks(chunks: list[pa.DictionaryArray]) -> list[list[pa.DictionaryArray]]:
    """Group chunks so each group's concatenated dictionary (+ a null item) fits the key type."""
    if not chunks:
        return []
    limit = _key_max(chunks[0].type.index_type)
    groups: list[list[pa.DictionaryArray]] = [[]]
    size = 0
    for chunk in chunks:
        extra = len(chunk.dictionary)
        if groups[-1] and size + extra + 1 > limit:
            groups.append([])
            size = 0
        groups[-1].append(chunk)
        size += extra
    return groups


def _arrow_dictionary(chunks: list[pa.DictionaryArray], page: EncodedPage, column: str | None) -> pb.ArrayEncoding:
    data_type = chunks[0].type
    key_dtype = np.dtype(data_type.index_type.to_pandas_dtype())
    parts: list[np.ndarray] = []
    dictionaries: list[pa.Array] = []
    base = 0
    null_masks: list[np.ndarray | None] = []
    for chunk in chunks:
        keys = chunk.indices
        codes = keys.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64) + base
        parts.append(codes)
        valid_keys = validity_bools(keys)  # None exactly when the keys have no nulls
        null_masks.append(None if valid_keys is None else ~valid_keys)
        dictionaries.append(chunk.dictionary)
        base += len(chunk.dictionary)
    codes = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    if any(m is not None for m in null_masks):
        mask = np.concatenate([m if m is not None else np.zeros(len(p), np.bool_) for m, p in zip(null_masks, parts)])
        codes[mask] = base  # nulls point at one extra null item, as pylance does
        dictionaries.append(pa.nulls(1, data_type.value_type))
        base += 1
    if base - 1 > _key_max(data_type.index_type):
        raise UnsupportedFeatureError(
            f"dictionary of {base} items does not fit index type {data_type.index_type}", column=column
        )
    items = pa.concat_arrays(dictionaries) if len(dictionaries) > 1 else dictionaries[0]
    enc = pb.ArrayEncoding()
    enc.dictionary.indices.CopyFrom(no_nulls(flat(key_dtype.itemsize * 8, page.add(codes.astype(key_dtype)))))
    if _is_binary_like(items.type):
        enc.dictionary.items.CopyFrom(_binary(items, page, None))
    elif is_fixed_width(items.type):
        enc.dictionary.items.CopyFrom(_nullable_fixed(items, page))
    else:
        raise UnsupportedFeatureError(f"dictionary values of type {items.type} are not supported", column=column)
    enc.dictionary.num_dictionary_items = len(items)
    return enc


# -- entry points --------------------------------------------------------------------------------


def check_encodable(data_type: pa.DataType, column: str) -> None:
    """Refuse leaf types the 2.0 writer cannot store (before any byte is written)."""
    if pa.types.is_dictionary(data_type):
        value = data_type.value_type
        if not (_is_binary_like(value) or is_fixed_width(value)):
            raise UnsupportedFeatureError(f"dictionary values of type {value} cannot be stored", column=column)
        return
    if pa.types.is_fixed_size_list(data_type) and not is_fixed_width(data_type):
        raise UnsupportedFeatureError(
            f"fixed_size_list of {data_type.value_type} cannot be stored in file version 2.0 "
            "(only fixed-size lists of fixed-width values)",
            column=column,
        )
    if pa.types.is_null(data_type) or _is_binary_like(data_type) or is_fixed_width(data_type):
        return
    raise UnsupportedFeatureError(f"type {data_type} cannot be stored in file version 2.0", column=column)


def encode_leaf_pages(
    chunks: list[pa.Array], compression: Compression | None = None, *, column: str | None = None
) -> list[EncodedPage]:
    """Encode buffered chunks of one leaf column as one page (several for dictionary columns)."""
    data_type = chunks[0].type
    if pa.types.is_dictionary(data_type):
        pages = []
        for group in group_dictionary_chunks(chunks):
            page = EncodedPage(length=sum(len(c) for c in group))
            page.encoding = _arrow_dictionary(group, page, column)
            pages.append(page)
        return pages
    array = chunks[0] if len(chunks) == 1 else pa.concat_arrays(chunks)
    page = EncodedPage(length=len(array))
    if pa.types.is_null(data_type):
        page.encoding.nullable.all_nulls.SetInParent()
    elif _is_binary_like(data_type):
        encoded = _dictionary_candidate(array)
        if encoded is not None:
            page.encoding = _string_dictionary(encoded, page)
        else:
            page.encoding = _binary(array, page, compression)
    else:
        page.encoding = _nullable_fixed(array, page)
    return [page]


def encode_list_offsets(chunks: list[tuple[np.ndarray, np.ndarray | None]]) -> EncodedPage:
    """One list offsets page from (Arrow offsets of len+1, validity or None) chunks."""
    spans = [int(offsets[-1]) - int(offsets[0]) for offsets, _ in chunks]
    num_items = sum(spans)
    adjustment = num_items + 1
    ends: list[np.ndarray] = []
    base = 0
    for (offsets, valid), span in zip(chunks, spans):
        part = (offsets[1:] - offsets[0]).astype(np.uint64) + np.uint64(base)
        if valid is not None:
            part[~valid] += np.uint64(adjustment)
        ends.append(part)
        base += span
    values = np.concatenate(ends) if ends else np.zeros(0, np.uint64)
    page = EncodedPage(length=len(values))
    page.encoding.list.offsets.CopyFrom(no_nulls(flat(64, page.add(values))))
    page.encoding.list.null_offset_adjustment = adjustment
    page.encoding.list.num_items = num_items
    return page


def leaf_nbytes(array: pa.Array) -> int:
    """Bytes a chunk of a leaf column contributes to a page (only its own rows)."""
    n = len(array)
    data_type = array.type
    if pa.types.is_dictionary(data_type):
        return n * (data_type.index_type.bit_width // 8) + leaf_nbytes(array.dictionary)
    if _is_binary_like(data_type):
        if n == 0:
            return 0
        large = pa.types.is_large_string(data_type) or pa.types.is_large_binary(data_type)
        dtype = np.dtype(np.int64 if large else np.int32)
        offsets = np.frombuffer(array.buffers()[1], dtype, n + 1, array.offset * dtype.itemsize)
        return (n + 1) * 8 + int(offsets[-1]) - int(offsets[0])
    if pa.types.is_null(data_type):
        return 0
    bits = 1 if pa.types.is_boolean(data_type) else _fixed_bits(data_type)
    return (n * bits + 7) // 8 + (n + 7) // 8


def _fixed_bits(data_type: pa.DataType) -> int:
    if pa.types.is_fixed_size_list(data_type):
        inner = 1 if pa.types.is_boolean(data_type.value_type) else _fixed_bits(data_type.value_type)
        return data_type.list_size * inner
    return data_type.bit_width
