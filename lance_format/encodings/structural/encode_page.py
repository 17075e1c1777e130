"""Page encoding of file versions 2.1/2.2: layout choice per leaf page, and the per-field writer.

For each leaf page (see ``encode_repdef``) the layout is chosen the way pylance 14 does:

1. no item has a value (all null, or only null/empty lists) -> constant layout, no value;
2. (2.2) all non-null items share one value -> constant layout with that value;
3. Arrow dictionary columns -> mini-block over the indices, dictionary in page buffer 2;
4. pages with few distinct values, of any width -> mini-block of dictionary indices;
5. values narrower than 256 bytes -> mini-block (RLE / FastLanes bit-packing / flat / FSST /
   variable);
6. wide values (vectors, long strings, big binaries) -> full-zip.

Packed structs (``lance-encoding:packed``) are one leaf of whole rows (see ``encode_packed``).
The field's encoding metadata (``field_params``) tunes every step: dictionary thresholds,
compressions, ``structural-encoding`` forcing mini-block or full-zip (read on the top-level
field, as pylance does).

``StructuralFieldWriter`` buffers the arrays of one top-level field and cuts them into pages of
about ``max_page_bytes``; memory is bounded by the page size, as in pylance's accumulation queue.
As pylance does, every leaf column has its own queue, counting the array pylance's leaf encoder
receives (a struct's child, a nested list's items) and flushed on its own: a struct's leaves
write pages at different rows. A flush is one page, except that lists holding empty or null lists
are cut to pylance's rep/def level budget.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import replace

import numpy as np
import pyarrow as pa

from lance_format.encodings.structural.encode_compression import value_plan, word_plan
from lance_format.encodings.structural.encode_constant import constant_value, encode_all_null, encode_constant
from lance_format.encodings.structural.encode_dictionary import try_dictionary
from lance_format.encodings.structural.encode_fullzip import encode_fullzip
from lance_format.encodings.structural.encode_miniblock import encode_miniblock
from lance_format.encodings.structural.encode_packed import packed_values
from lance_format.encodings.structural.encode_repdef import LeafPage, leaf_paths, shred_leaf
from lance_format.encodings.structural.encode_values import LeafValues, leaf_values, take_values
from lance_format.encodings.structural.encode_variable_chunks import MAX_AIM_BYTES_2_1
from lance_format.encodings.structural.field_params import FieldParams, field_params
from lance_format.errors import UnsupportedFeatureError
from lance_format.proto import encodings_v2_1_pb2 as pb
from lance_format.schema import LanceField
from lance_format.schema.fields import marked_packed

MINIBLOCK_MAX_VALUE_BYTES = 256
# Pages of fields holding a struct hold at least this many rows (unless the data ends first):
# pylance 14's reader fails on nested struct columns cut into many tiny pages ("Incorrect number
# of nulls for StructArray"), even on files its own writer made that way. Other fields flush as
# pylance's do, however few rows (100 values of 1 MiB: a page per 8 values).
MIN_PAGE_ROWS = 256
# ...but a buffer this many times over the page size is flushed anyway (huge rows).
_FORCE_FLUSH_FACTOR = 16

# pylance cuts a page whose lists hold empty or null lists into runs of whole rows whose rep and
# def levels, at the bit widths of the flush's largest levels, fit this many bits (mini-block's
# rep/def budget); pages of lists without such lists are never cut.
LEVEL_BITS_BUDGET = 16 * 1024 * 8 - 1

# The bytes a buffered array counts for (None: its length in bytes). A compaction sets it to
# pylance's decoder allocations for the arrays it reads, which decide where pylance's writer
# flushes pages and so where it cuts files (lance_format.dataset.maintenance.decoded_memory).
decoded_memory_model: ContextVar[Callable[[pa.Array], int | None] | None] = ContextVar(
    "decoded_memory_model", default=None)

# emit(column index, page buffers, page layout, rows in the page, first row of the page)
EmitPage = Callable[[int, list, pb.PageLayout, int, int], None]


def column_leaves(lance_field: LanceField) -> Iterator[LanceField]:
    """The fields stored as columns, depth first: fields without children and packed structs."""
    if not lance_field.children or marked_packed(lance_field.metadata):
        yield lance_field
        return
    for child in lance_field.children:
        yield from column_leaves(child)


def check_structural_field(lance_field: LanceField, name: str, minor: int = 2) -> None:
    """Refuse, up front and naming the column, types the 2.1+ writer cannot store.

    ``minor`` is the file version's minor number: maps need 2.2 (pylance 14 refuses them in 2.1).
    """
    data_type = lance_field.data_type
    if pa.types.is_map(data_type) and minor < 2:
        raise UnsupportedFeatureError(
            f"map column {name!r} cannot be written in file version 2.{minor} (pylance 14: \"Map data type "
            "is not enabled by the selected file format\"); use file version 2.2",
            column=name,
        )
    if pa.types.is_fixed_size_list(data_type) and not lance_field.children:
        item = data_type.value_type
        while pa.types.is_fixed_size_list(item):
            item = item.value_type
        if not (pa.types.is_primitive(item) or pa.types.is_fixed_size_binary(item) or pa.types.is_decimal(item)):
            raise UnsupportedFeatureError(
                f"fixed-size lists of {item} cannot be written in file versions 2.1+ (pylance cannot either)",
                column=name,
            )
    if pa.types.is_fixed_size_list(data_type) and lance_field.children:
        # pylance 14 writes fixed-size lists of structs with a page length of rows x dimension and
        # then cannot read them next to any other column: refuse rather than write such files.
        raise UnsupportedFeatureError(
            f"fixed-size lists of {data_type.value_type} cannot be written in file versions 2.1+ "
            "(pylance 14 cannot read them back either)",
            column=name,
        )
    if lance_field.children and marked_packed(lance_field.metadata):
        for child in lance_field.children:
            if child.children or not (_byte_width_bits(child.data_type) or _variable_width(child.data_type)):
                raise UnsupportedFeatureError(
                    f"packed struct {name!r} has field {child.name!r} of type {child.data_type}: the 2.1+ writer packs "
                    "fixed-width fields of whole bytes and strings/binaries only (not booleans or nested fields)",
                    column=name)
        return
    for child in lance_field.children:
        check_structural_field(child, f"{name}.{child.name}", minor)


def _variable_width(data_type: pa.DataType) -> bool:
    return (pa.types.is_string(data_type) or pa.types.is_binary(data_type) or pa.types.is_large_string(data_type)
            or pa.types.is_large_binary(data_type))


def _byte_width_bits(data_type: pa.DataType) -> int | None:
    if pa.types.is_boolean(data_type) or pa.types.is_null(data_type):
        return None
    if pa.types.is_fixed_size_binary(data_type) or pa.types.is_decimal(data_type):
        return data_type.byte_width * 8
    if pa.types.is_primitive(data_type):
        return data_type.bit_width
    return None


class PageTooDense(UnsupportedFeatureError):
    """A page's levels do not fit mini-block chunks and its values cannot be full-zipped."""


def _fullzip(leaf: LeafPage, values: LeafValues, params: FieldParams) -> tuple[list, pb.PageLayout]:
    if values.kind == "bool":
        # full-zip needs byte-aligned values; the writer retries with fewer rows per page
        raise PageTooDense(
            "boolean values under more than 32767 consecutive empty or null lists cannot be written",
            column=leaf.name,
        )
    return encode_fullzip(leaf, values, params)


def encode_leaf_page(leaf: LeafPage, minor: int, structural: str | None = None) -> tuple[list, pb.PageLayout]:
    """Buffers and PageLayout of one leaf page (``minor``: 1 for file version 2.1, 2 for 2.2;
    ``structural``: the top-level field's ``lance-encoding:structural-encoding``, which pylance
    reads there and not on nested fields, unlike the compression keys it reads on the leaf)."""
    # num_items is 0 when values is None; the explicit test narrows the type
    if leaf.values is None or leaf.num_items == 0 or pa.types.is_null(leaf.values.type) or (
        leaf.valid is not None and not leaf.valid.any()
    ):
        return encode_all_null(leaf)
    if pa.types.is_struct(leaf.values.type):  # a packed struct (the only struct leaf with fields)
        values = packed_values(leaf.values, leaf.valid, leaf.field, leaf.name, minor)
        if values.packed_encoding is not None:
            return encode_fullzip(leaf, values)
    else:
        values = leaf_values(leaf.values, leaf.valid, leaf.name)
    params = replace(field_params(leaf.field.metadata, leaf.name), structural=structural)
    if minor < 2 and params.minichunk_size is not None and params.minichunk_size >= MAX_AIM_BYTES_2_1:
        params = replace(params, minichunk_size=None)  # pylance: "too large for the u16 layout, using default"
    if minor >= 2 and values.kind in ("fixed", "bool", "variable"):
        value = constant_value(values, leaf.valid)
        if value is not None:
            return encode_constant(leaf, values, value)
    if values.kind == "dictionary":
        # dictionary values always carry indices and the dictionary
        assert values.indices is not None and values.dictionary is not None
        result = encode_miniblock(leaf, word_plan(values.indices, params=params), minor, dictionary=values.dictionary,
                                  params=params)
        if result is not None:
            return result
        values = take_values(values.dictionary, values.indices.astype(np.int64))
    # pylance tries a dictionary before choosing by width: wide values repeated a lot still
    # become a mini-block page of indices
    encoded = try_dictionary(values, minor, params)
    if encoded is not None:
        indices, dictionary = encoded
        result = encode_miniblock(leaf, word_plan(indices, params=params), minor, dictionary=dictionary, params=params)
        if result is not None:
            return result
    if params.structural == "fullzip" and values.kind != "packed":  # pylance cannot full-zip packed structs
        if values.kind == "bool":
            # pylance's full-zip needs whole bytes: one byte (0/1) per boolean
            assert values.bits is not None  # bool values always carry bits
            words = values.bits.astype(np.uint8)
            values = LeafValues("fixed", values.count, bytes_per_value=1, words=words, matrix=words.reshape(-1, 1))
        return _fullzip(leaf, values, params)
    if values.max_value_bytes() < MINIBLOCK_MAX_VALUE_BYTES or params.structural == "miniblock" or (
            values.kind == "packed"):
        result = encode_miniblock(leaf, value_plan(values, leaf.values.type, params), minor)
        if result is not None:
            return result
    return _fullzip(leaf, values, params)


def level_budget_rows(page: LeafPage) -> np.ndarray | None:
    """Rows of each page ``page`` is cut into by the rep/def budget (None: it stays whole).

    Only pages with empty or null lists (more level entries than items) are cut, greedily: each
    page takes whole rows while its levels fit ``LEVEL_BITS_BUDGET`` (at least one row)."""
    if page.rep is None or page.num_levels <= page.num_items:
        return None
    # pylance's def levels number only the null / empty kinds the data holds (ours may also number
    # layers the schema declares): its largest def level is the count of distinct ones present
    kinds = 0 if page.defs is None else int(np.count_nonzero(np.bincount(page.defs)[1:]))
    bits = int(page.rep.max()).bit_length() + kinds.bit_length()
    limit = LEVEL_BITS_BUDGET // bits
    if page.num_levels <= limit:
        return None
    # a top-level row begins at every entry with the largest rep level
    row_starts = np.flatnonzero(page.rep == page.max_rep)
    ends = np.append(row_starts[1:], page.num_levels)  # level entries up to the end of each row
    rows = []
    first_row, done = 0, 0
    while first_row < len(row_starts):
        last = int(np.searchsorted(ends, done + limit, side="right"))  # rows ending within the budget
        last = max(last, first_row + 1)
        rows.append(last - first_row)
        first_row, done = last, int(ends[last - 1])
    return np.asarray(rows, np.int64)


def _concat(chunks: list[pa.Array]) -> pa.Array:
    if len(chunks) == 1:
        return chunks[0]
    if pa.types.is_dictionary(chunks[0].type):
        return pa.chunked_array(chunks).unify_dictionaries().combine_chunks()
    return pa.concat_arrays(chunks)


def _is_list(data_type: pa.DataType) -> bool:
    return pa.types.is_list(data_type) or pa.types.is_large_list(data_type) or pa.types.is_map(data_type)


def leaf_array(array: pa.Array, path: tuple[int, ...]) -> pa.Array:
    """The array of the leaf at ``path`` of a top-level field's array (struct children taken in
    turn, lists of nested types entered as their items): a leaf, or a list of leaves."""
    for index in path:
        while _is_list(array.type):
            array = list_items(array)
        array = array.field(index)
    return array


def counted_array(array: pa.Array, path: tuple[int, ...]) -> pa.Array:
    """The array pylance's leaf encoder receives for the leaf at ``path``, which its accumulation
    queue counts: the leaf, or of a list, the items its rows span (``trimmed_values``)."""
    array = leaf_array(array, path)
    while _is_list(array.type):
        array = list_items(array)
    return array


def list_items(array: pa.Array) -> pa.Array:
    """The items a list (or map) array's rows span (pylance's ``trimmed_values``)."""
    if not len(array):
        return array.values.slice(0, 0)
    offsets = array.offsets
    first = offsets[0].as_py()
    return array.values.slice(first, offsets[-1].as_py() - first)


def _pruned(array: pa.Array, path: tuple[int, ...]) -> pa.Array:
    """``array`` with, at each struct on ``path``, only the child on the path (zero-copy but for
    the structs' validity): what a leaf's queue keeps of a field's array, so that a leaf which
    flushes rarely holds no other leaf's data."""
    if not path:
        return array
    data_type = array.type
    if _is_list(data_type):
        # the list's own buffers (validity, offsets) over its pruned, unsliced items
        values = _pruned(array.values, path)
        # a map becomes a list of its pruned entries (stored alike)
        value_field = pa.field("entries", values.type, False) if pa.types.is_map(data_type) else data_type.value_field
        item = pa.field(value_field.name, values.type, value_field.nullable)
        list_type = pa.large_list(item) if pa.types.is_large_list(data_type) else pa.list_(item)
        return pa.Array.from_buffers(list_type, len(array), array.buffers()[:2], null_count=array.null_count,
                                     offset=array.offset, children=[values])
    child = array.field(path[0])
    mask = array.is_null() if array.null_count else None
    field = data_type.field(path[0])
    child = _pruned(child, path[1:])
    return pa.StructArray.from_arrays([child], fields=[field.with_type(child.type)], mask=mask)


class StructuralFieldWriter:
    """Buffers one top-level field and writes its leaf columns page by page (2.1/2.2).

    As in pylance, every leaf column has its own queue: a struct's leaves are counted, and
    flushed into pages, each on its own (a leaf of small values keeps buffering while its
    neighbour of wide strings writes a page per batch). A leaf's queue holds the field's arrays
    pruned to the path to that leaf."""

    def __init__(self, lance_field: LanceField, first_column: int, minor: int, max_page_bytes: int,
                 emit: EmitPage) -> None:
        self.field = lance_field
        self.first_column = first_column
        self.minor = minor
        self.max_page_bytes = max_page_bytes
        self.emit = emit
        self.paths = leaf_paths(lance_field)
        self.num_leaves = len(self.paths)
        self.structural = field_params(lance_field.metadata, lance_field.name).structural
        # per leaf: buffered (pruned) arrays, bytes counted for flushing, rows
        self.pending: list[list[pa.Array]] = [[] for _ in self.paths]
        self.counted = np.zeros(self.num_leaves, np.int64)
        self.rows = np.zeros(self.num_leaves, np.int64)
        self.rows_written = np.zeros(self.num_leaves, np.int64)
        holds_struct = any(pa.types.is_struct(f.data_type) for f in lance_field.walk())
        self.min_page_rows = MIN_PAGE_ROWS if holds_struct else 1

    def append(self, array: pa.Array) -> None:
        if not len(array):
            return
        model = decoded_memory_model.get()
        for leaf, path in enumerate(self.paths):
            counted = counted_array(array, path)
            modelled = model(counted) if model is not None else None
            # nbytes counts only the referenced ranges of sliced arrays
            self.counted[leaf] += counted.nbytes if modelled is None else modelled
            self.rows[leaf] += len(array)
            self.pending[leaf].append(_pruned(array, path))
            if self.counted[leaf] >= self.max_page_bytes and (
                self.rows[leaf] >= self.min_page_rows or self.counted[leaf] >= _FORCE_FLUSH_FACTOR * self.max_page_bytes
            ):
                self._flush_leaf(leaf)

    def flush(self) -> None:
        for leaf in range(self.num_leaves):
            self._flush_leaf(leaf)

    def _flush_leaf(self, leaf: int) -> None:
        if not self.pending[leaf]:
            return
        chunks = self.pending[leaf]
        self.pending[leaf] = []
        self.counted[leaf] = self.rows[leaf] = 0
        array = _concat(chunks)
        del chunks
        # One flush is one page however large (pylance's 2.1+ writer never splits by bytes on
        # write: its ``max_page_bytes`` applies to 2.0 only, 2.1+ readers split big pages on
        # read); only the rep/def level budget of lists cuts it (``level_budget_rows``).
        self._write_page(leaf, array)

    def _write_page(self, leaf: int, array: pa.Array, planned: bool = False) -> None:
        # a pruned struct has one child: the one on the leaf's path
        page = shred_leaf(array, self.field, self.paths[leaf], pruned=True)
        rows = None if planned else level_budget_rows(page)
        if rows is not None:
            del page
            for start, count in zip(np.cumsum(rows) - rows, rows):
                self._write_page(leaf, array.slice(int(start), int(count)), planned=True)
            return
        try:
            buffers, layout = encode_leaf_page(page, self.minor, self.structural)
        except PageTooDense:
            if len(array) < 2:
                raise
            half = len(array) // 2
            del page
            self._write_page(leaf, array.slice(0, half), planned=True)
            self._write_page(leaf, array.slice(half), planned=True)
            return
        self.emit(self.first_column + leaf, buffers, layout, len(array), int(self.rows_written[leaf]))
        self.rows_written[leaf] += len(array)

    def finish(self) -> None:
        self.flush()
