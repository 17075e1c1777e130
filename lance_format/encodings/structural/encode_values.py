"""Leaf item values as flat numpy data for the 2.1/2.2 encoders, with null items normalised.

Structural encodings store a placeholder for every null item (its validity lives in the def
levels). Fixed-width items (and fixed-size lists, booleans) keep whatever bytes Arrow holds under
their nulls, as pylance does: those bytes feed the bit widths and chunking, so zeroing them would
change the file. Variable-width items drop the bytes under nulls (empty strings).

Kinds:

* ``fixed``: ``data`` is an ``(n, bytes_per_value)`` uint8 matrix, or a 1-D unsigned array when
  the width is 8/16/32/64 bits (``words``);
* ``bool``: ``bits`` is a numpy bool array;
* ``fsl``: a (possibly nested) fixed-size list of fixed-width items: flattened item data plus one
  validity bit array per list level whose items have nulls;
* ``variable``: ``offsets`` (int64, starting at 0) and ``data`` (uint8), offset width 4 or 8;
* ``dictionary``: an Arrow dictionary column: ``indices`` (uint32) and the dictionary as a leaf;
* ``packed``: a packed struct's rows as an ``(n, row bytes)`` matrix, ``field_bits`` per field.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from lance_format.encodings.buffers import validity_bools
from lance_format.errors import UnsupportedFeatureError
from lance_format.proto import encodings_v2_1_pb2 as pb

_WORD_DTYPES = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@dataclass
class LeafValues:
    kind: str
    count: int
    bytes_per_value: int = 0  # fixed / fsl: bytes per value (fsl: data bytes only)
    words: np.ndarray | None = None  # fixed with a power-of-two width <= 8 bytes
    matrix: np.ndarray | None = None  # fixed, any width: (count, bytes_per_value) uint8
    bits: np.ndarray | None = None  # bool
    item_bits: int = 0  # fsl: bits per innermost item
    dims: list[int] = field(default_factory=list)  # fsl: dimension of each level, outermost first
    item_validity: list[np.ndarray | None] = field(default_factory=list)  # fsl: per level, flattened
    offsets: np.ndarray | None = None  # variable
    data: np.ndarray | None = None  # variable / fsl item bytes (fsl: uint8, or bool bits)
    offset_width: int = 4  # variable
    indices: np.ndarray | None = None  # dictionary
    dictionary: LeafValues | None = None  # dictionary
    longest: int | None = field(default=None, repr=False, compare=False)  # variable: max_value_bytes, once known
    field_bits: list[int] = field(default_factory=list)  # packed: bits of each struct field
    # variable: rows of a packed struct with variable-width fields, described by this encoding
    packed_encoding: pb.CompressiveEncoding | None = None
    # ... and the bytes its null rows would take: pylance sizes the repetition index with them
    packed_null_bytes: int = 0

    def raw_bytes(self) -> int:
        """Size of the plain (uncompressed) representation, for cost comparisons."""
        if self.kind in ("fixed", "packed"):
            return self.count * self.bytes_per_value
        if self.kind == "bool":
            return (self.count + 7) // 8
        if self.kind == "variable":
            assert self.offsets is not None  # variable values always carry offsets
            return int(self.offsets[-1]) + self.offset_width * (self.count + 1)
        if self.kind == "fsl":
            return self.count * self.value_width()
        return 4 * self.count

    def value_width(self) -> int:
        """Bytes per value of fixed-width kinds including any per-value validity bytes (fsl)."""
        if self.kind in ("fixed", "packed"):
            return self.bytes_per_value
        if self.kind == "fsl":
            total, cum = 0, 1
            for dim, validity in zip(self.dims, self.item_validity):
                cum *= dim
                if validity is not None:
                    total += (cum + 7) // 8
            return total + (self.item_bits * cum + 7) // 8
        raise ValueError(self.kind)

    def max_value_bytes(self) -> int:
        if self.kind == "variable":
            assert self.offsets is not None  # variable values always carry offsets
            if self.longest is None:  # asked by the layout choice and again by FSST's
                self.longest = int(np.diff(self.offsets).max()) if self.count else 0
            return self.longest
        if self.kind in ("fixed", "fsl", "packed"):
            return self.value_width()
        return 1


def fixed_width_bits(data_type: pa.DataType) -> int | None:
    if pa.types.is_boolean(data_type):
        return 1
    if pa.types.is_fixed_size_binary(data_type) or pa.types.is_decimal(data_type):
        return data_type.byte_width * 8
    if pa.types.is_primitive(data_type):
        return data_type.bit_width
    return None


def fixed_bytes(array: pa.Array, width: int) -> np.ndarray:
    """The value bytes of the rows of a fixed-width array, as an (n, width) uint8 matrix (a view)."""
    buf = array.buffers()[1]
    n = len(array)
    if buf is None or n == 0:
        return np.zeros((n, width), np.uint8)
    return np.frombuffer(buf, np.uint8, n * width, array.offset * width).reshape(n, width)


def _bool_bits(array: pa.Array) -> np.ndarray:
    n = len(array)
    buf = array.buffers()[1]
    if buf is None or n == 0:
        return np.zeros(n, np.bool_)
    nbytes = (array.offset + n + 7) // 8
    bits = np.unpackbits(np.frombuffer(buf, np.uint8, nbytes), bitorder="little")
    return bits[array.offset : array.offset + n].view(np.bool_)


def fixed_values(array: pa.Array, valid: np.ndarray | None, column: str) -> LeafValues:
    bits = fixed_width_bits(array.type)
    if bits is None:
        raise UnsupportedFeatureError(f"type {array.type} cannot be written in file versions 2.1+", column=column)
    n = len(array)
    if bits == 1:
        values = _bool_bits(array)
        return LeafValues("bool", n, bits=values)
    width = bits // 8
    matrix = fixed_bytes(array, width)
    words = None
    if width in _WORD_DTYPES:
        words = np.ascontiguousarray(matrix).reshape(-1).view(_WORD_DTYPES[width])
    return LeafValues("fixed", n, bytes_per_value=width, words=words, matrix=matrix)


def fsl_values(array: pa.Array, valid: np.ndarray | None, column: str) -> LeafValues:
    """A fixed-size list of fixed-width items (nested lists allowed) as flattened item data."""
    dims: list[int] = []
    validity: list[np.ndarray | None] = []
    current = array
    while pa.types.is_fixed_size_list(current.type):
        dim = current.type.list_size
        dims.append(dim)
        child = current.values.slice(current.offset * dim, len(current) * dim)
        child_valid = validity_bools(child) if child.null_count else None
        if child_valid is not None and child_valid.all():
            child_valid = None
        validity.append(child_valid)
        current = child
    bits = fixed_width_bits(current.type)
    if bits is None or pa.types.is_null(current.type):
        raise UnsupportedFeatureError(
            f"fixed-size lists of {current.type} cannot be written in file versions 2.1+", column=column
        )
    data = _bool_bits(current) if bits == 1 else fixed_bytes(current, bits // 8).reshape(-1)
    return LeafValues(
        "fsl", len(array), bytes_per_value=(bits * int(np.prod(dims)) + 7) // 8, item_bits=bits,
        dims=dims, item_validity=validity, data=data,
    )


def variable_values(array: pa.Array, valid: np.ndarray | None) -> LeafValues:
    large = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
    dtype = np.int64 if large else np.int32
    n = len(array)
    bufs = array.buffers()
    if n == 0 or bufs[1] is None:
        return LeafValues("variable", n, offsets=np.zeros(n + 1, np.int64), data=np.zeros(0, np.uint8),
                          offset_width=8 if large else 4)
    offsets = np.frombuffer(bufs[1], dtype, n + 1, array.offset * np.dtype(dtype).itemsize).astype(np.int64)
    first, last = int(offsets[0]), int(offsets[-1])
    data = np.frombuffer(bufs[2], np.uint8, last - first, first) if bufs[2] is not None and last > first else (
        np.zeros(0, np.uint8))
    if first:
        offsets -= first  # a copy already (astype): rebased in place
    if valid is not None:
        lengths = np.diff(offsets)
        dropped = ~valid & (lengths > 0)
        if dropped.any():
            data = data[np.repeat(valid, lengths)]
            lengths = np.where(valid, lengths, 0)
            offsets = np.concatenate(([0], np.cumsum(lengths)))
    return LeafValues("variable", n, offsets=offsets, data=data, offset_width=8 if large else 4)


def dictionary_values(array: pa.Array, valid: np.ndarray | None, column: str) -> LeafValues:
    indices = array.indices
    # the reader checks that the stored index width matches the key type
    dtype = _WORD_DTYPES[indices.type.bit_width // 8]
    keys = np.asarray(indices.fill_null(0).to_numpy(zero_copy_only=False)).astype(dtype)
    if valid is not None:
        keys = np.where(valid, keys, 0).astype(dtype)
    dictionary = array.dictionary
    if len(dictionary) == 0:
        dictionary = pa.array([None], dictionary.type)
    return LeafValues("dictionary", len(array), indices=keys, dictionary=leaf_values(dictionary, None, column))


def leaf_values(array: pa.Array, valid: np.ndarray | None, column: str) -> LeafValues:
    """Flatten a leaf's items (``valid``: per item, None when all are valid)."""
    data_type = array.type
    if pa.types.is_dictionary(data_type):
        return dictionary_values(array, valid, column)
    if pa.types.is_fixed_size_list(data_type):
        return fsl_values(array, valid, column)
    if pa.types.is_string(data_type) or pa.types.is_binary(data_type) or pa.types.is_large_string(
        data_type
    ) or pa.types.is_large_binary(data_type):
        return variable_values(array, valid)
    if pa.types.is_string_view(data_type) or pa.types.is_binary_view(data_type):
        raise UnsupportedFeatureError(f"type {data_type} cannot be written; cast it to string/binary", column=column)
    return fixed_values(array, valid, column)


def take_values(values: LeafValues, index: np.ndarray) -> LeafValues:
    """The values at ``index`` (used to build dictionaries and constants)."""
    if values.kind == "variable":
        # variable values always carry offsets and data
        assert values.offsets is not None and values.data is not None
        starts, ends = values.offsets[index], values.offsets[index + 1]
        lengths = ends - starts
        total = int(lengths.sum())
        src = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(total)
        offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
        return LeafValues("variable", len(index), offsets=offsets, data=values.data[src],
                          offset_width=values.offset_width)
    if values.kind == "fixed":
        assert values.matrix is not None  # fixed values always carry the byte matrix
        matrix = values.matrix[index]
        words = values.words[index] if values.words is not None else None
        return LeafValues("fixed", len(index), bytes_per_value=values.bytes_per_value, words=words, matrix=matrix)
    if values.kind == "bool":
        assert values.bits is not None  # bool values always carry bits
        return LeafValues("bool", len(index), bits=values.bits[index])
    raise ValueError(f"cannot take from {values.kind} values")
