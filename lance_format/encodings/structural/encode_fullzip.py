"""The full-zip page layout of file versions 2.1/2.2: levels zipped with each (large) value.

Page buffers: ``[zipped data, (repetition index)]``. For every level entry, in order:

* a control word of ``ceil((bits_rep + bits_def) / 8)`` bytes (none when there are no levels),
  ``(rep << bits_def) | def``, where the bit counts are those of the page's largest levels;
* then, for an entry that is an item: fixed-width values store their bytes always (null items
  too, as zeros; a fixed-size list with item nulls prefixes each value with its validity bytes,
  one bitmap per level); variable-width values store ``length`` (u32, or u64 for large types)
  and the bytes, but only for valid items. Strings are FSST-compressed value by value where
  Lance does so (``fsst{symbol_table, variable}``; the length is the compressed length).

The repetition index (variable-width values, or any list) holds the byte offset of every row
start plus the end, each 1, 2, 4 or 8 bytes wide (the reader infers the width from the size).
Everything is built with numpy: entry sizes -> positions (cumsum) -> scatter of the headers,
and the value bytes dropped into the remaining positions in one masked assignment.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_format.encodings.buffers import compress_buffer
from lance_format.encodings.structural import encode_fsst
from lance_format.encodings.structural.encode_compression import (
    ZSTD_DEFAULT_LEVEL,
    flat_encoding,
    use_fsst,
    variable_encoding,
)
from lance_format.encodings.structural.encode_repdef import LeafPage
from lance_format.encodings.structural.encode_values import LeafValues
from lance_format.encodings.structural.field_params import DEFAULT_PARAMS, FieldParams
from lance_format.proto import encodings_v2_1_pb2 as pb

PER_VALUE_ZSTD_MIN_LENGTH = 32 * 1024  # Lance zstd-compresses values one by one past this length


def _fixed_matrix(values: LeafValues) -> tuple[np.ndarray, pb.CompressiveEncoding]:
    """``(n, bytes_per_value)`` value bytes (with fsl validity prefixes) and their encoding."""
    n = values.count
    if values.kind == "fixed":
        assert values.matrix is not None  # fixed values always carry the byte matrix
        return values.matrix.reshape(n, values.bytes_per_value), flat_encoding(values.bytes_per_value * 8)
    # fixed-size list: [validity bytes per level with nulls] + item bytes, per value
    parts = []
    cum = 1
    for dim, validity in zip(values.dims, values.item_validity):
        cum *= dim
        if validity is not None:
            bits = validity.reshape(n, cum)
            parts.append(np.packbits(bits, axis=1, bitorder="little"))
    assert values.data is not None  # fsl values always carry their item data
    if values.item_bits == 1:
        parts.append(np.packbits(values.data.reshape(n, cum), axis=1, bitorder="little"))
    else:
        parts.append(values.data.reshape(n, cum * values.item_bits // 8))
    matrix = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
    encoding = flat_encoding(values.item_bits)
    for dim, validity in zip(reversed(values.dims), reversed(values.item_validity)):
        encoding = pb.CompressiveEncoding(
            fixed_size_list=pb.FixedSizeList(items_per_value=dim, values=encoding, has_validity=validity is not None)
        )
    return matrix, encoding


def _byte_width(max_value: int) -> int:
    for width in (1, 2, 4):
        if max_value < 1 << (8 * width):
            return width
    return 8


def scatter_le(out: np.ndarray, positions: np.ndarray, values: np.ndarray, nbytes: int) -> None:
    values = values.astype(np.uint64)
    for k in range(nbytes):
        out[positions + k] = ((values >> np.uint64(8 * k)) & np.uint64(0xFF)).astype(np.uint8)


def _fsst_values(values: LeafValues) -> tuple[LeafValues, pb.CompressiveEncoding]:
    """Strings FSST-compressed value by value with one page-wide table (Lance's FsstPerValueEncoder)."""
    assert values.offsets is not None and values.data is not None  # variable values carry both
    table = encode_fsst.train(values.data, values.offsets)
    data, offsets = encode_fsst.compress(values.data, values.offsets, table)
    inner = variable_encoding(values.offset_width * 8)
    encoding = pb.CompressiveEncoding(fsst=pb.Fsst(symbol_table=encode_fsst.symbol_table_bytes(table), values=inner))
    return LeafValues("variable", values.count, offsets=offsets, data=data, offset_width=values.offset_width), encoding


def _zstd_values(values: LeafValues, valid: np.ndarray | None, level: int) -> tuple[LeafValues, pb.CompressiveEncoding]:
    """Every valid value zstd-compressed on its own (u64 LE size + frame), as Lance's
    CompressedBufferEncoder does for large values (one call per value: each must decompress
    alone); null items stay empty (full-zip stores nothing for them)."""
    assert values.offsets is not None and values.data is not None  # variable values carry both
    data, bounds = values.data, values.offsets.tolist()
    keep = [True] * values.count if valid is None else valid.tolist()
    pieces = [compress_buffer(data[a:b], "zstd", level or ZSTD_DEFAULT_LEVEL) if k else b""
              for a, b, k in zip(bounds, bounds[1:], keep)]
    offsets = np.zeros(values.count + 1, np.int64)
    np.cumsum([len(piece) for piece in pieces], out=offsets[1:])
    packed = np.frombuffer(b"".join(pieces), np.uint8)
    general = pb.General(compression=pb.BufferCompression(scheme=pb.COMPRESSION_ALGORITHM_ZSTD, level=level),
                         values=variable_encoding(values.offset_width * 8))
    return (LeafValues("variable", values.count, offsets=offsets, data=packed, offset_width=values.offset_width),
            pb.CompressiveEncoding(general=general))


def variable_values_per_value(values: LeafValues, valid: np.ndarray | None, data_type: pa.DataType | None,
                     params: FieldParams) -> tuple[LeafValues, pb.CompressiveEncoding]:
    """Lance's per-value compression of large variable-width values: none when the field says
    ``none``; zstd value by value when a value exceeds 32 KiB or the field asks for lz4/zstd
    (always zstd, at the field's level only when it asked for zstd), given 32 KiB of data;
    else FSST where it applies (or the field asks for it); else plain."""
    assert values.offsets is not None  # variable values always carry offsets
    plain = variable_encoding(values.offset_width * 8)
    if params.off:
        return values, plain
    data_size = int(values.offsets[-1]) + values.offset_width * (values.count + 1)
    if (values.max_value_bytes() > PER_VALUE_ZSTD_MIN_LENGTH or params.general is not None) and (
            data_size >= encode_fsst.MIN_INPUT_BYTES):
        level = params.level if params.compression == "zstd" and params.level is not None else 0
        return _zstd_values(values, valid, level)
    if params.compression == "fsst" or (data_type is not None and use_fsst(values, data_type)):
        return _fsst_values(values)
    return values, plain


def encode_fullzip(leaf: LeafPage, values: LeafValues, params: FieldParams = DEFAULT_PARAMS) -> tuple[list, pb.PageLayout]:
    n_items = values.count
    rep, defs = leaf.rep, leaf.defs
    has_levels = rep is not None or defs is not None
    n_entries = leaf.num_levels if has_levels else n_items
    max_rep = int(rep.max()) if rep is not None and len(rep) else 0
    # Size the def bits by the layers, not the page's data: a page whose levels are all 0 but
    # whose layers are nullable still needs def bits for pylance's reader.
    max_def = max(int(defs.max()) if defs is not None and len(defs) else 0,
                  leaf.def_levels_of_layers() if defs is not None else 0)
    bits_rep = max_rep.bit_length()
    bits_def = max_def.bit_length()
    cw_bits = bits_rep + bits_def
    cw_bytes = 0 if cw_bits == 0 else (1 if cw_bits <= 8 else (2 if cw_bits <= 16 else 4))
    visible = leaf.visible_mask()  # None: every entry is an item
    variable = values.kind == "variable"

    layout = pb.FullZipLayout(
        bits_rep=bits_rep,
        bits_def=bits_def,
        num_items=n_entries if rep is not None else n_items,
        num_visible_items=n_items,
        layers=leaf.layers,
    )
    if variable:
        # variable values always carry offsets and data
        assert values.offsets is not None and values.data is not None
        ow = values.offset_width
        layout.bits_per_offset = ow * 8
        if values.packed_encoding is not None:  # rows of a packed struct, already laid out
            encoding = values.packed_encoding
        else:
            values, encoding = variable_values_per_value(
                values, leaf.valid, leaf.values.type if leaf.values is not None else None, params)
        assert values.offsets is not None and values.data is not None  # variable values carry both
        layout.value_compression.CopyFrom(encoding)
        lengths = np.diff(values.offsets)
        valid = np.ones(n_items, np.bool_) if leaf.valid is None else leaf.valid
        item_bytes = np.where(valid, ow + lengths, 0)
    else:
        matrix, encoding = _fixed_matrix(values)
        width = matrix.shape[1]
        layout.bits_per_value = width * 8
        layout.value_compression.CopyFrom(encoding)
        item_bytes = np.full(n_items, width, np.int64)

    if visible is None:
        entry_bytes = cw_bytes + item_bytes
    else:
        entry_bytes = np.full(n_entries, cw_bytes, np.int64)
        entry_bytes[visible] += item_bytes
    positions = np.cumsum(entry_bytes) - entry_bytes
    total = int(entry_bytes.sum())

    if not variable and cw_bytes == 0:
        data = matrix.reshape(-1)
    elif not variable and visible is None:
        out = np.empty((n_items, cw_bytes + width), np.uint8)
        word = (rep.astype(np.uint32) << bits_def if rep is not None else 0) | (
            defs.astype(np.uint32) if defs is not None else 0)
        for k in range(cw_bytes):
            out[:, k] = (word >> (8 * k)) & 0xFF
        out[:, cw_bytes:] = matrix
        data = out.reshape(-1)
    else:
        out = np.zeros(total, np.uint8)
        header = np.zeros(total, np.bool_)
        if cw_bytes:
            word = np.zeros(n_entries, np.uint32)
            if rep is not None:
                word |= rep.astype(np.uint32) << bits_def
            if defs is not None:
                word |= defs.astype(np.uint32)
            scatter_le(out, positions, word, cw_bytes)
            for k in range(cw_bytes):
                header[positions + k] = True
        item_pos = positions + cw_bytes if visible is None else positions[visible] + cw_bytes
        if variable:
            has_value = item_bytes > 0
            length_pos = item_pos[has_value]
            scatter_le(out, length_pos, lengths[has_value], ow)
            for k in range(ow):
                header[length_pos + k] = True
            out[~header] = values.data
        else:
            out[~header] = matrix.reshape(-1)
        data = out

    buffers: list[np.ndarray | bytes] = [data]
    if variable or rep is not None:
        if rep is not None:
            row_entries = np.flatnonzero(rep == max_rep) if max_rep else np.arange(n_entries)
        else:
            row_entries = np.arange(n_entries)
        row_offsets = np.append(positions[row_entries], total)
        width = _byte_width(total + values.packed_null_bytes)
        buffers.append(row_offsets.astype(f"<u{width}").tobytes())
    return buffers, pb.PageLayout(full_zip_layout=layout)
