"""The constant page layout of file versions 2.1/2.2: all-null pages and single-value pages.

* all-null, no rep/def beyond the item's own validity: ``ConstantLayout{layers}``, no buffers;
* all-null with nested levels (lists, structs): buffers ``[rep, def]`` as raw u16 levels, an
  empty buffer standing for an absent stream;
* (2.2 only) every item that is not null has the same value: fixed-width values of at most 32
  bytes go in ``inline_value`` (raw little-endian bytes); variable-width values go in a first
  page buffer ``u32 2 | u32 len(offsets) | u32 len(bytes) | offsets [0, L] | bytes`` (the value
  as a one-element Arrow array); the levels, when there are any, follow as ``[rep, def]``.
"""

from __future__ import annotations

import struct

import numpy as np

from lance_format.encodings.structural.encode_repdef import NULLABLE_ITEM, LeafPage
from lance_format.encodings.structural.encode_values import LeafValues
from lance_format.proto import encodings_v2_1_pb2 as pb

MAX_INLINE_BYTES = 32
MAX_VARIABLE_CONSTANT_BYTES = 4096


def _level_buffers(leaf: LeafPage) -> list[bytes]:
    rep = leaf.rep.astype("<u2").tobytes() if leaf.rep is not None else b""
    defs = leaf.defs.astype("<u2").tobytes() if leaf.defs is not None else b""
    return [rep, defs]


def encode_all_null(leaf: LeafPage) -> tuple[list, pb.PageLayout]:
    layout = pb.ConstantLayout(layers=leaf.layers)
    simple = leaf.rep is None and list(leaf.layers) == [NULLABLE_ITEM]
    buffers = [] if simple else _level_buffers(leaf)
    return buffers, pb.PageLayout(constant_layout=layout)


_PROBE = 64  # items compared first: most pages differ early, and then the full pass is skipped


def _differs_early(items: np.ndarray) -> bool:
    """Whether the first few items already differ from the first one."""
    head = items[:_PROBE]
    return not bool((head == head[0]).all())


def _first_valid(valid: np.ndarray | None) -> np.ndarray | None:
    """The indices of the first _PROBE valid items (None: all items are valid)."""
    if valid is None:
        return None
    head = np.flatnonzero(valid[: 64 * _PROBE])[:_PROBE]
    return head if len(head) == _PROBE else np.flatnonzero(valid)[:_PROBE]


def constant_value(values: LeafValues, valid: np.ndarray | None) -> bytes | None:
    """The raw bytes of the single value all valid items share, or None."""
    probe = _first_valid(valid)
    if values.kind == "variable" and values.offsets is not None:
        at = np.arange(min(_PROBE, values.count)) if probe is None else probe
        starts, lengths = values.offsets[at], values.offsets[at + 1] - values.offsets[at]
        if _differs_early(lengths):
            return None
        size = int(lengths[0])
        if values.data is not None and 0 < size <= MAX_VARIABLE_CONSTANT_BYTES:
            if _differs_early(values.data[starts[:, None] + np.arange(size)[None, :]]):
                return None
    elif values.kind == "fixed" and values.bytes_per_value <= MAX_INLINE_BYTES:
        items = values.words if values.words is not None else values.matrix
        assert items is not None  # fixed values always carry the byte matrix
        if _differs_early(items if probe is None else items[probe]):
            return None
    index = np.flatnonzero(valid) if valid is not None else None
    if values.kind == "fixed":
        if values.bytes_per_value > MAX_INLINE_BYTES:
            return None
        if values.words is not None:
            items = values.words if index is None else values.words[index]
            first = items[0]
            return items[0:1].tobytes() if bool((items == first).all()) else None
        assert values.matrix is not None  # fixed values always carry the byte matrix
        items = values.matrix if index is None else values.matrix[index]
        return items[0].tobytes() if bool((items == items[0]).all()) else None
    if values.kind == "bool":
        assert values.bits is not None  # bool values always carry bits
        items = values.bits if index is None else values.bits[index]
        return bytes([int(items[0])]) if bool((items == items[0]).all()) else None
    if values.kind == "variable":
        # variable values always carry offsets and data
        assert values.offsets is not None and values.data is not None
        offsets = values.offsets
        lengths = np.diff(offsets)
        starts = offsets[:-1]
        if index is not None:
            lengths, starts = lengths[index], starts[index]
        size = int(lengths[0])
        if size > MAX_VARIABLE_CONSTANT_BYTES or not bool((lengths == size).all()):
            return None
        first = values.data[int(starts[0]) : int(starts[0]) + size]
        if size and len(starts) > 1:
            # all valid items have the same length; compare their bytes in one reshape
            data = values.data
            if index is None and len(data) == size * values.count:
                same = bool((data.reshape(-1, size) == first).all())
            else:
                gathered = data[(starts[:, None] + np.arange(size)[None, :])]
                same = bool((gathered == first).all())
            if not same:
                return None
        return first.tobytes()
    return None


def encode_constant(leaf: LeafPage, values: LeafValues, value: bytes) -> tuple[list, pb.PageLayout]:
    layout = pb.ConstantLayout(layers=leaf.layers)
    buffers: list[bytes] = []
    if values.kind == "variable":
        ow = values.offset_width
        offsets = struct.pack("<II" if ow == 4 else "<QQ", 0, len(value))
        buffers.append(struct.pack("<III", 2, len(offsets), len(value)) + offsets + value)
    else:
        layout.inline_value = value
    if leaf.rep is not None or leaf.defs is not None:
        buffers.extend(_level_buffers(leaf))
    return buffers, pb.PageLayout(constant_layout=layout)
