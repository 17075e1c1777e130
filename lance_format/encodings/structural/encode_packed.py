"""Packed structs (field metadata ``lance-encoding:packed``) in file versions 2.1/2.2.

A packed struct is one column whose items are whole rows, as pylance 14 writes it:

* fixed-width fields only: each row is its fields' bytes one after another, written as
  mini-block ``packed_struct{bits_per_value[], values: flat}`` (kind ``packed``);
* with variable-width fields (2.2 only; pylance refuses them in 2.1): each valid row is one
  variable-width value of full-zip ``variable_packed_struct``: fixed fields as their bytes,
  variable fields as a u32 (u64 for large types) length then the bytes, each variable field
  compressed value by value the way a column of it would be in full-zip (FSST, zstd, ...).

Fields must not have nulls of their own and must be whole bytes wide (pylance 14 cannot write
field nulls either); null rows store nothing (full-zip) or their fields' bytes (mini-block).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_format.encodings.structural.encode_fullzip import scatter_le, variable_values_per_value
from lance_format.encodings.structural.encode_values import LeafValues, fixed_bytes, fixed_width_bits, variable_values
from lance_format.encodings.structural.field_params import field_params
from lance_format.errors import UnsupportedFeatureError
from lance_format.proto import encodings_v2_1_pb2 as pb
from lance_format.schema import LanceField


def _is_variable(data_type: pa.DataType) -> bool:
    return (pa.types.is_string(data_type) or pa.types.is_binary(data_type) or pa.types.is_large_string(data_type)
            or pa.types.is_large_binary(data_type))


def packed_values(array: pa.StructArray, valid: np.ndarray | None, lance_field: LanceField, column: str,
                  minor: int) -> LeafValues:
    """The rows of a packed struct page (``valid``: per row, None when all are valid)."""
    for index in range(array.type.num_fields):
        child, name = array.field(index), array.type.field(index).name
        if child.null_count:
            raise UnsupportedFeatureError(
                f"packed struct field {name!r} has nulls, which packed structs cannot store (pylance 14 refuses "
                "them too)", column=column)
    if any(_is_variable(array.type.field(i).type) for i in range(array.type.num_fields)):
        if minor < 2:
            raise UnsupportedFeatureError(
                "packed structs with variable-width fields need file version 2.2 (pylance 14: \"Variable packed "
                "struct encoding is not enabled by the selected file format\")", column=column)
        return _variable_rows(array, valid, lance_field, column)
    matrices, bits = [], []
    for index in range(array.type.num_fields):
        child = array.field(index)
        width = fixed_width_bits(child.type)
        if width is None or width % 8 or pa.types.is_null(child.type):
            raise UnsupportedFeatureError(
                f"packed struct field {array.type.field(index).name!r} of type {child.type} cannot be written: "
                "packed structs hold fixed-width fields of whole bytes and strings/binaries", column=column)
        matrices.append(fixed_bytes(child, width // 8))
        bits.append(width)
    matrix = np.ascontiguousarray(np.concatenate(matrices, axis=1) if len(matrices) > 1 else matrices[0])
    return LeafValues("packed", len(array), bytes_per_value=matrix.shape[1], matrix=matrix, field_bits=bits)


def _variable_rows(array: pa.StructArray, valid: np.ndarray | None, lance_field: LanceField,
                   column: str) -> LeafValues:
    """Each valid row as one value: its fields back to back (variable ones length-prefixed)."""
    n = len(array)
    keep = np.ones(n, np.bool_) if valid is None else valid
    pieces: list[tuple[str, np.ndarray, np.ndarray | None, int]] = []  # (kind, bytes, offsets, width)
    fields = []
    for index, child_field in enumerate(lance_field.children):
        child = array.field(index)
        if _is_variable(child.type):
            values = variable_values(child, None)
            values, encoding = variable_values_per_value(values, valid, child.type,
                                                         field_params(child_field.metadata, column))
            assert values.offsets is not None and values.data is not None  # variable values carry both
            width = values.offset_width
            pieces.append(("variable", values.data, values.offsets, width))
            fields.append(pb.VariablePackedStruct.FieldEncoding(value=encoding, bits_per_length=width * 8))
            continue
        bits = fixed_width_bits(child.type)
        if bits is None or bits % 8 or pa.types.is_null(child.type):
            raise UnsupportedFeatureError(
                f"packed struct field {child_field.name!r} of type {child.type} cannot be written: packed structs "
                "hold fixed-width fields of whole bytes and strings/binaries", column=column)
        pieces.append(("fixed", fixed_bytes(child, bits // 8), None, bits // 8))
        fields.append(pb.VariablePackedStruct.FieldEncoding(
            value=pb.CompressiveEncoding(flat=pb.Flat(bits_per_value=bits)), bits_per_value=bits))
    # bytes of each field in each row, then where each field starts in the output
    sizes = np.zeros((n, len(pieces)), np.int64)
    for column_index, (_, _, offsets, width) in enumerate(pieces):
        sizes[:, column_index] = width if offsets is None else width + np.diff(offsets)
    null_bytes = int(sizes[~keep].sum()) + (n - int(keep.sum())) * 4
    sizes[~keep] = 0
    row_bytes = sizes.sum(axis=1)
    row_offsets = np.concatenate(([0], np.cumsum(row_bytes)))
    field_starts = row_offsets[:-1, None] + np.cumsum(sizes, axis=1) - sizes
    out = np.zeros(int(row_offsets[-1]), np.uint8)
    rows = np.flatnonzero(keep)
    for column_index, (kind, data, offsets, width) in enumerate(pieces):
        starts = field_starts[rows, column_index]
        if kind == "fixed":
            out[starts[:, None] + np.arange(width)] = data[rows]
            continue
        assert offsets is not None  # variable pieces carry offsets
        lengths = np.diff(offsets)[rows]
        scatter_le(out, starts, lengths, width)
        total = int(lengths.sum())
        within = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        source = np.repeat(offsets[:-1][rows], lengths) + within
        out[np.repeat(starts + width, lengths) + within] = data[source]
    offset_width = 8 if int(row_offsets[-1]) >= 1 << 32 else 4
    encoding = pb.CompressiveEncoding(variable_packed_struct=pb.VariablePackedStruct(fields=fields))
    return LeafValues("variable", n, offsets=row_offsets, data=out, offset_width=offset_width,
                      packed_encoding=encoding, packed_null_bytes=null_bytes)
