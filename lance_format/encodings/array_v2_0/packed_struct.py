"""The 2.0 ``packed_struct`` page encoding: a struct of fixed-width fields stored row by row.

Official Lance writes it (file version 2.0) for a struct field whose metadata says
``packed: true`` (or ``lance-encoding:packed``). The struct is then one column: its children
have no columns of their own and ``DataFile.fields`` omits them. The page's single buffer holds,
for each row, the children's values back to back (each child ``byte_width`` bytes, in schema
order); there is no validity for the struct or its children.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_format.encodings.buffers import DecodeContext
from lance_format.encodings.legacy_v0_1 import fixed_stride_bits, read_fixed
from lance_format.errors import UnsupportedFeatureError
from lance_format.proto import encodings_v2_0_pb2 as pb
from lance_format.schema.fields import marked_packed


def is_packed_struct_leaf(field, positions: dict[int, int]) -> bool:
    """Whether a 2.0 file stores ``field`` (a LanceField) as one packed column.

    True for a struct marked packed that has a column while none of its children do.
    """
    if not field.children or field.id not in positions or any(c.id in positions for c in field.children):
        return False
    return marked_packed(field.metadata)


def decode_packed_struct(
    enc: pb.PackedStruct,
    buffers: list[pa.Buffer],
    length: int,
    data_type: pa.DataType,
    validity: pa.Buffer | None,
    ctx: DecodeContext,
) -> pa.Array:
    """``length`` rows of a packed struct page."""
    if not pa.types.is_struct(data_type):
        raise ctx.corrupt(f"packed_struct page found for a column of type {data_type}")
    if len(enc.inner) != data_type.num_fields:
        raise ctx.corrupt(
            f"packed_struct page has {len(enc.inner)} children, type {data_type} needs {data_type.num_fields}")
    widths = []
    for child in data_type:
        bits = fixed_stride_bits(child.type)
        if bits is None or bits % 8:
            raise UnsupportedFeatureError(
                f"packed struct child {child.name!r} of type {child.type} is not byte-aligned fixed-width",
                path=ctx.path, column=ctx.column,
            )
        widths.append(bits // 8)
    ref = enc.buffer
    if ref.buffer_type != pb.Buffer.page:
        raise UnsupportedFeatureError("packed_struct with a column or file buffer is not supported",
                                      path=ctx.path, column=ctx.column)
    if ref.buffer_index >= len(buffers):
        raise ctx.corrupt(f"page refers to buffer {ref.buffer_index} but has only {len(buffers)} buffers")
    data = buffers[ref.buffer_index]
    row_width = sum(widths)
    if len(data) < length * row_width:
        raise ctx.corrupt(f"packed_struct buffer holds {len(data)} bytes, {length} rows need {length * row_width}")
    rows = np.frombuffer(data, np.uint8, length * row_width).reshape(length, row_width)
    children = []
    start = 0
    for child, width in zip(data_type, widths):
        column = pa.py_buffer(np.ascontiguousarray(rows[:, start : start + width]))
        start += width
        children.append(read_fixed(column.slice, child.type, 0, length, 0, length, ctx))
    return pa.StructArray.from_buffers(data_type, length, [validity], children=children)
