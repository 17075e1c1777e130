"""Decoded value blocks of 2.1/2.2 pages, byte gathers, and their conversion to Arrow.

Decompressors produce one of these numpy-backed containers (mirroring Lance's ``DataBlock``):

- :class:`Fixed`: fixed-width values as raw little-endian bytes (``bits`` per value, a multiple
  of 8), or booleans (``bits == 1``, one numpy bool per value);
- :class:`Variable`: int64 offsets (n + 1, starting anywhere) into a byte array;
- :class:`Fsl`: a fixed-size list of a child block, with optional validity of the child items;
- :class:`Struct`: the children of a packed struct;
- :class:`Dictionary`: int64 indices into a dictionary block;
- :class:`AllNull`: ``n`` values without data.

Blocks are concatenated across mini-block chunks, sliced to the visible items, and finally turned
into an Arrow array of the schema's type (validity from the rep/def levels).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import pyarrow as pa

from lance_format.encodings.buffers import DecodeContext
from lance_format.encodings.structural import accel
from lance_format.errors import UnsupportedFeatureError

_INT32_MAX = 2**31 - 1


@dataclass
class Fixed:
    data: np.ndarray  # uint8 bytes, or bools when bits == 1
    bits: int

    @property
    def n(self) -> int:
        return len(self.data) if self.bits == 1 else len(self.data) * 8 // self.bits


@dataclass
class Variable:
    offsets: np.ndarray  # int64, n + 1 entries, non-decreasing
    data: np.ndarray  # uint8
    # Arrow arrays made from this block, by type: a page's dictionary serves every batch
    arrow: dict = field(default_factory=dict, repr=False, compare=False)
    # (bytes + 8 spare, value starts, value lengths): a dictionary's form for compiled takes
    padded: tuple | None = field(default=None, repr=False, compare=False)

    @property
    def n(self) -> int:
        return len(self.offsets) - 1


@dataclass
class Fsl:
    child: Block
    dim: int
    validity: np.ndarray | None  # bools, one per child item

    @property
    def n(self) -> int:
        return self.child.n // self.dim if self.dim else 0


@dataclass
class Struct:
    children: list[Block]
    length: int

    @property
    def n(self) -> int:
        return self.length


@dataclass
class Dictionary:
    indices: np.ndarray  # int64
    dictionary: Block

    @property
    def n(self) -> int:
        return len(self.indices)


@dataclass
class AllNull:
    length: int

    @property
    def n(self) -> int:
        return self.length


Block = Fixed | Variable | Fsl | Struct | Dictionary | AllNull


# -- byte gathers ---------------------------------------------------------------------------------


def ranges_index(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(start, start + length)`` for every range, without a Python loop."""
    lengths = np.asarray(lengths, np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    ends = np.cumsum(lengths)
    shift = np.asarray(starts, np.int64) - (ends - lengths)
    return np.arange(total, dtype=np.int64) + np.repeat(shift, lengths)


def group_of(values: np.ndarray, group_starts: np.ndarray) -> np.ndarray:
    """For each of the sorted ``values``, the last group whose (sorted) start is at or below it
    (group 0 for values below every start): ``searchsorted(group_starts, values, "right") - 1``
    clipped at 0, found by searching the few group starts among the many values instead."""
    bounds = np.searchsorted(values, group_starts[1:], side="left")
    sizes = np.diff(bounds, prepend=0, append=len(values))
    return np.repeat(np.arange(len(group_starts)), sizes)


def gather(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The bytes ``buf[s:s+l]`` of every range, concatenated."""
    starts = np.asarray(starts, np.int64)
    lengths = np.asarray(lengths, np.int64)
    if len(starts) == 1:
        s = int(starts[0])
        return buf[s : s + int(lengths[0])]
    total = int(lengths.sum())
    # many ranges: one nogil pass of the compiled kernel (short ones too: it beats building a
    # byte index; a Python loop of slices holds the GIL)
    compiled = accel.kernels(total) if len(starts) >= 32 and buf.dtype == np.uint8 and buf.ndim == 1 else None
    if compiled is not None and int(starts.min()) >= 0 and int((starts + lengths).max()) <= len(buf) \
            and int(lengths.min()) >= 0:
        out = np.empty(total, np.uint8)
        compiled.copy_ranges(out, np.cumsum(lengths) - lengths, buf, starts, lengths)
        return out
    if len(starts) and len(starts) * 64 < total:
        # few long ranges: copying them whole is cheaper than a byte-wise gather
        return np.concatenate([buf[s : s + n] for s, n in zip(starts.tolist(), lengths.tolist())])
    return buf[ranges_index(starts, lengths)]


def read_uint(buf: np.ndarray, positions: np.ndarray, nbytes: int) -> np.ndarray:
    """Little-endian unsigned integers of ``nbytes`` bytes at byte ``positions`` of ``buf``, as int64."""
    positions = np.asarray(positions, np.int64)
    if nbytes == 1:
        return buf[positions].astype(np.int64)
    if len(positions) and not int(np.bitwise_or.reduce(positions)) % nbytes:
        # aligned words (the usual case: buffers are 8-byte aligned): one word-sized gather
        usable = len(buf) // nbytes * nbytes
        words = buf[:usable].view(f"<u{nbytes}")
        return words[positions // nbytes].astype(np.int64)
    idx = positions[:, None] + np.arange(nbytes)[None, :]
    raw = np.ascontiguousarray(buf[idx])
    return raw.view(f"<u{nbytes}").reshape(-1).astype(np.int64)


def check_range(ctx: DecodeContext, what: str, starts: np.ndarray, lengths: np.ndarray, limit: int) -> None:
    """Refuse byte ranges that are negative or run past ``limit``."""
    if len(starts) == 0:
        return
    if int(np.min(lengths)) < 0 or int(np.min(starts)) < 0 or int(np.max(starts + lengths)) > limit:
        raise ctx.corrupt(f"{what} runs past the end of its buffer ({limit} bytes)")


# -- block operations -----------------------------------------------------------------------------


def concat(blocks: Sequence[Block]) -> Block:
    """Blocks of one kind, one after the other."""
    if len(blocks) == 1:
        return blocks[0]
    first = blocks[0]
    # every block has the kind of the first one: the casts only tell the type checker so
    if isinstance(first, Fixed):
        return Fixed(np.concatenate([b.data for b in cast("Sequence[Fixed]", blocks)]), first.bits)
    if isinstance(first, Variable):
        pieces, datas, base = [np.zeros(1, np.int64)], [], 0
        for b in cast("Sequence[Variable]", blocks):
            offs = b.offsets - b.offsets[0]
            pieces.append(offs[1:] + base)
            datas.append(b.data[int(b.offsets[0]) : int(b.offsets[-1])])
            base += int(offs[-1])
        return Variable(np.concatenate(pieces), np.concatenate(datas) if datas else np.zeros(0, np.uint8))
    if isinstance(first, Fsl):
        fsls = cast("Sequence[Fsl]", blocks)
        validity = None
        if any(b.validity is not None for b in fsls):
            validity = np.concatenate(
                [b.validity if b.validity is not None else np.ones(b.child.n, np.bool_) for b in fsls]
            )
        return Fsl(concat([b.child for b in fsls]), first.dim, validity)
    if isinstance(first, Struct):
        structs = cast("Sequence[Struct]", blocks)
        children = [concat([b.children[i] for b in structs]) for i in range(len(first.children))]
        return Struct(children, sum(b.length for b in structs))
    if isinstance(first, Dictionary):
        return Dictionary(np.concatenate([b.indices for b in cast("Sequence[Dictionary]", blocks)]), first.dictionary)
    return AllNull(sum(b.n for b in blocks))


def slice_block(block: Block, start: int, stop: int) -> Block:
    """Values ``[start, stop)`` of a block."""
    if isinstance(block, Fixed):
        if block.bits == 1:
            return Fixed(block.data[start:stop], 1)
        width = block.bits // 8
        return Fixed(block.data[start * width : stop * width], block.bits)
    if isinstance(block, Variable):
        return Variable(block.offsets[start : stop + 1], block.data)
    if isinstance(block, Fsl):
        validity = None if block.validity is None else block.validity[start * block.dim : stop * block.dim]
        return Fsl(slice_block(block.child, start * block.dim, stop * block.dim), block.dim, validity)
    if isinstance(block, Struct):
        return Struct([slice_block(c, start, stop) for c in block.children], stop - start)
    if isinstance(block, Dictionary):
        return Dictionary(block.indices[start:stop], block.dictionary)
    return AllNull(stop - start)


def take_block(block: Block, index: np.ndarray) -> Block:
    """Values at ``index`` (used to select the visible values of full-zip pages)."""
    if isinstance(block, Fixed):
        if block.bits == 1:
            return Fixed(block.data[index], 1)
        width = block.bits // 8
        if width in (1, 2, 4, 8) and block.data.ndim == 1 and block.data.flags.c_contiguous:
            # whole words: a gather of integers, not of rows of bytes
            return Fixed(block.data.view(f"<u{width}")[index].view(np.uint8), block.bits)
        return Fixed(block.data.reshape(-1, width)[index].reshape(-1), block.bits)
    if isinstance(block, Variable):
        starts, ends = block.offsets[index], block.offsets[index + 1]
        offsets = np.zeros(len(index) + 1, np.int64)
        np.cumsum(ends - starts, out=offsets[1:])
        return Variable(offsets, gather(block.data, starts, ends - starts))
    if isinstance(block, Fsl):
        items = (index[:, None] * block.dim + np.arange(block.dim)[None, :]).reshape(-1)
        validity = None if block.validity is None else block.validity[items]
        return Fsl(take_block(block.child, items), block.dim, validity)
    if isinstance(block, Struct):
        return Struct([take_block(c, index) for c in block.children], len(index))
    if isinstance(block, Dictionary):
        return Dictionary(block.indices[index], block.dictionary)
    return AllNull(len(index))


# -- Arrow ----------------------------------------------------------------------------------------


def bitmap(valid: np.ndarray | None) -> pa.Buffer | None:
    if valid is None or bool(valid.all()):
        return None
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def _fixed_width_bytes(data_type: pa.DataType) -> int | None:
    if pa.types.is_fixed_size_binary(data_type):
        return data_type.byte_width
    try:
        bits = data_type.bit_width
    except ValueError:
        return None
    return bits // 8 if bits % 8 == 0 else None


def to_arrow(block: Block, data_type: pa.DataType, valid: np.ndarray | None, ctx: DecodeContext) -> pa.Array:
    """An Arrow array of ``data_type`` from a decoded block and the items' validity."""
    n = block.n
    if valid is not None and len(valid) != n:
        raise ctx.corrupt(f"page has {len(valid)} items but {n} values")
    if pa.types.is_null(data_type):
        return pa.nulls(n)
    if isinstance(block, AllNull):
        if valid is not None and valid.any():
            raise ctx.corrupt("an all-null page has valid items")
        return pa.nulls(n, data_type)
    if pa.types.is_dictionary(data_type):
        return _to_dictionary(block, data_type, valid, ctx)
    if isinstance(block, Dictionary):
        fast = _take_dictionary(block, data_type, valid, ctx)
        if fast is not None:
            return fast
        return to_arrow(materialize(block, ctx), data_type, valid, ctx)
    validity = bitmap(valid)
    if pa.types.is_boolean(data_type):
        if not isinstance(block, Fixed) or block.bits not in (1, 8):
            raise ctx.corrupt("boolean values are not stored as a bitmap or as bytes")
        # full-zip pages (``lance-encoding:structural-encoding: fullzip``) hold one byte per boolean
        bits = block.data if block.bits == 1 else block.data[:n] != 0
        return pa.Array.from_buffers(data_type, n, [validity, pa.py_buffer(np.packbits(bits, bitorder="little"))])
    if pa.types.is_fixed_size_list(data_type):
        if not isinstance(block, Fsl) or block.dim != data_type.list_size:
            raise ctx.corrupt(f"values do not form fixed-size lists of {data_type.list_size}")
        child = to_arrow(block.child, data_type.value_type, block.validity, ctx)
        return pa.Array.from_buffers(data_type, n, [validity], children=[child])
    if pa.types.is_struct(data_type):
        if not isinstance(block, Struct) or len(block.children) != data_type.num_fields:
            raise ctx.corrupt(f"packed struct does not have the {data_type.num_fields} fields of {data_type}")
        children = [to_arrow(c, data_type.field(i).type, None, ctx) for i, c in enumerate(block.children)]
        return pa.StructArray.from_buffers(data_type, n, [validity], children=children)
    if (
        pa.types.is_string(data_type)
        or pa.types.is_binary(data_type)
        or pa.types.is_large_string(data_type)
        or pa.types.is_large_binary(data_type)
    ):
        if not isinstance(block, Variable):
            raise ctx.corrupt(f"{data_type} values are not stored as variable-width data")
        return _variable(block, data_type, validity, ctx)
    width = _fixed_width_bytes(data_type)
    if width is None:
        raise UnsupportedFeatureError(
            f"values of type {data_type} are not supported in file version 2.1+", path=ctx.path, column=ctx.column
        )
    if not isinstance(block, Fixed) or block.bits != width * 8:
        bits = block.bits if isinstance(block, Fixed) else type(block).__name__
        raise ctx.corrupt(f"{data_type} values are stored with {bits} bits instead of {width * 8}")
    return pa.Array.from_buffers(data_type, n, [validity, pa.py_buffer(block.data)])


def _variable(block: Variable, data_type: pa.DataType, validity: pa.Buffer | None, ctx: DecodeContext) -> pa.Array:
    offsets = block.offsets
    n = block.n
    if n and (int(offsets[0]) < 0 or int(offsets[-1]) > len(block.data) or bool(np.less(offsets[1:], offsets[:-1]).any())):
        raise ctx.corrupt("variable-width offsets are not increasing or point past the data")
    base = int(offsets[0]) if n else 0
    data = block.data[base : int(offsets[-1])] if n else block.data[:0]
    large = pa.types.is_large_string(data_type) or pa.types.is_large_binary(data_type)
    if not large and len(data) > _INT32_MAX:
        raise ctx.corrupt("more than 2 GiB of string data in one read; use a large type")
    rel = np.empty(len(offsets), np.int64 if large else np.int32)  # rebased and narrowed in one pass
    np.subtract(offsets, base, out=rel, casting="unsafe")
    return pa.Array.from_buffers(data_type, n, [validity, pa.py_buffer(rel), pa.py_buffer(data)])


def materialize(block: Dictionary, ctx: DecodeContext) -> Block:
    """The dictionary's values at the block's indices."""
    indices = block.indices
    size = block.dictionary.n
    if len(indices) and (int(indices.min()) < 0 or int(indices.max()) >= size):
        raise ctx.corrupt(f"dictionary index out of range (the dictionary has {size} items)")
    return take_block(block.dictionary, indices)


def _take_dictionary(block: Dictionary, data_type: pa.DataType, valid: np.ndarray | None,
                     ctx: DecodeContext) -> pa.Array | None:
    """Variable-width dictionary values gathered by Arrow's ``take`` (C++), or None to fall back.

    A byte-wise numpy gather of every value's bytes dominates string scans; Arrow copies each
    value's bytes with one memcpy instead.
    """
    if not isinstance(block.dictionary, Variable) or not (
        pa.types.is_string(data_type) or pa.types.is_binary(data_type)
        or pa.types.is_large_string(data_type) or pa.types.is_large_binary(data_type)
    ):
        return None
    indices = block.indices
    size = block.dictionary.n
    compiled = accel.kernels(len(indices) * 8)
    if compiled is not None:
        taken = _take_compiled(compiled, block.dictionary, indices, data_type, valid, ctx)
        if taken is not None:
            return taken
    if len(indices) and (int(indices.min()) < 0 or int(indices.max()) >= size):
        raise ctx.corrupt(f"dictionary index out of range (the dictionary has {size} items)")
    dictionary = block.dictionary.arrow.get(data_type)
    if dictionary is None:
        dictionary = block.dictionary.arrow[data_type] = to_arrow(block.dictionary, data_type, None, ctx)
    try:
        taken = dictionary.take(pa.array(indices, pa.int64()))
    except (pa.ArrowInvalid, pa.ArrowCapacityError):
        return None  # e.g. over 2 GiB of string data: the numpy path reports it with context
    validity = bitmap(valid)
    if validity is None:
        return taken
    buffers = taken.buffers()
    return pa.Array.from_buffers(data_type, len(taken), [validity, buffers[1], buffers[2]], offset=taken.offset)


def _take_compiled(compiled, dictionary: Variable, indices: np.ndarray, data_type: pa.DataType,  # type: ignore[no-untyped-def]
                   valid: np.ndarray | None, ctx: DecodeContext) -> pa.Array | None:
    """:func:`_take_dictionary` with the compiled kernels, or None (over 2 GiB for a 32-bit
    offset type: Arrow's path reports it)."""
    if dictionary.padded is None:
        offsets = dictionary.offsets
        base = int(offsets[0]) if len(offsets) else 0
        stop = int(offsets[-1]) if len(offsets) else 0
        if base < 0 or stop > len(dictionary.data) or bool(np.less(offsets[1:], offsets[:-1]).any()):
            raise ctx.corrupt("variable-width offsets are not increasing or point past the data")
        padded = np.zeros(stop - base + 8, np.uint8)
        padded[: stop - base] = dictionary.data[base:stop]
        dictionary.padded = (padded, offsets[:-1] - base, np.diff(offsets))
    padded, starts, lengths = dictionary.padded
    indices = np.ascontiguousarray(indices, np.int64)
    total = int(compiled.take_strings_size(lengths, indices))
    if total < 0:
        raise ctx.corrupt(f"dictionary index out of range (the dictionary has {len(lengths)} items)")
    large = pa.types.is_large_string(data_type) or pa.types.is_large_binary(data_type)
    if not large and total > _INT32_MAX:
        return None
    out = np.empty(total + 8, np.uint8)
    out_offsets = np.empty(len(indices) + 1, np.int64 if large else np.int32)
    compiled.take_strings(padded, starts, lengths, indices, out, out_offsets)
    return pa.Array.from_buffers(data_type, len(indices),
                                 [bitmap(valid), pa.py_buffer(out_offsets), pa.py_buffer(out[:total])])


def _to_dictionary(block: Block, data_type: pa.DictionaryType, valid: np.ndarray | None, ctx: DecodeContext) -> pa.Array:
    """An Arrow dictionary array: Lance's own dictionary pages map onto it directly."""
    if isinstance(block, Dictionary):
        dictionary = to_arrow(block.dictionary, data_type.value_type, None, ctx)
        indices = block.indices
        if len(indices) and (int(indices.min()) < 0 or int(indices.max()) >= len(dictionary)):
            raise ctx.corrupt(f"dictionary index out of range (the dictionary has {len(dictionary)} items)")
        mask = None if valid is None or valid.all() else ~valid
        index_array = indices.astype(data_type.index_type.to_pandas_dtype())
        result = pa.DictionaryArray.from_arrays(index_array, dictionary, mask=mask)
        return result if result.type == data_type else result.cast(data_type)
    plain = to_arrow(block, data_type.value_type, valid, ctx)
    encoded = plain.dictionary_encode()
    return encoded.cast(data_type) if encoded.type != data_type else encoded
