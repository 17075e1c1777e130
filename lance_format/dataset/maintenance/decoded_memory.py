"""How much memory pylance's decoder allocates for the arrays its compaction reads.

pylance's 2.1/2.2 writer flushes a column's page once the arrays it buffered *occupy* more than
8 MiB (``get_array_memory_size``: allocated capacity, not length), and a compaction cuts a file
at the first flush after which ``max_bytes_per_file`` bytes are written. The arrays a
compaction writes are those pylance's mini-block decoder built for each 8192-row scan batch:

* the values buffer starts with twice the bytes of the chunks the batch touches and, when the
  decoded values do not fit, grows as a Rust ``Vec`` does (to the larger of twice its capacity
  and what is needed);
* the offsets buffer (variable-width values) starts with room for one offset and grows the same
  way, chunk by chunk;
* an array also counts its own struct (120 bytes for strings, 96 for primitives).

* a page with definition levels (nullable strings) adds a validity bitmap to every batch, in a
  buffer rounded up to 64 bytes;
* fixed-width values (numbers, timestamps, dates) without nulls end up in a buffer of exactly
  their size (without rep/def levels pylance's decoder knows the decoded size); with nulls, in
  the values buffer described above (twice the touched chunks' bytes, grown when short), and no
  validity bitmap is counted (measured: counting one moves the cuts by a batch).

A fragment with deletions is read in batches of 8192 *live* rows, each run of live rows of each
chunk being one decode instruction; the values buffer then starts at twice the bytes of the
chunk of every instruction, so a chunk is counted once per run (measured one batch at a time:
the same bytes to within the resolution of the experiment). Dense deletions make every batch
flush a page by itself, and files are then cut by the bytes those pages wrote.

A dictionary page's batch is expanded from the dictionary value by value into a buffer first
sized for the dictionary's bytes (values and offsets) per entry times the batch's rows (plus one
entry less than the dictionary holds), grown when short; the offsets grow one row at a time.

Of a list field, pylance's list encoder hands its leaf the decoded items (of which the lists are
a slice): their values buffer starts at twice the bytes of every chunk the batch's rows touch (a
list's continuation chunks included, since levels are not a known decoded size) and grows chunk
by chunk (a row's items counted with the chunk where it starts); no validity is counted.

Every leaf column is decoded, and counted by pylance's writer, on its own: the writer gives each
leaf its own queue (so where dense deletions make one leaf of a struct flush a page per batch,
only that leaf's pages are written). A leaf is counted as pylance's leaf encoder receives it: a
struct's child (at any depth), a list's items (a list in a struct too), a leaf of the items of a
list of structs (the items' values buffer as for a list of that leaf). Deeper nesting (lists of
lists, lists of structs of lists, maps) is counted by length.

A batch spanning pages is decoded page by page and the parts concatenated by arrow, whose
buffers hold exactly the values (rounded up to 64 bytes; no validity bitmap is counted), whatever
the pages' layouts.

So for a batch read from one mini-block page (of a leaf, a list of one leaf or a leaf of a
list's items) the size is a function of the page's chunk sizes and the batch's row ranges, which
this module computes from the source files. Other pages are not modelled: the writer then counts
the array's length in bytes, as before. That is pylance's size of full-zip pages (wide strings,
binary and vectors, decoded into buffers of their exact size: measured on batches of a few
hundred rows, cut at pylance's rows) and, to a few bytes, of fixed-size lists. Measured against
pylance 14 (tests/test_compaction_file_bytes*.py) in 2.1 and 2.2 on files of either engine: the
same cuts, except near the threshold with several nullable string columns in 2.2 (a batch off),
and once in a 2.2 list of structs of nullable strings with deletions (a batch off).

2.0 files have their own model (:mod:`~lance_format.dataset.maintenance.decoded_memory_v2_0`):
pylance's 2.0 decoders and writer allocate differently.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.encodings.structural.decode_miniblock import MiniBlockPage
from lance_format.encodings.structural.decoded_blocks import Variable
from lance_format.encodings.structural.encode_page import counted_array, decoded_memory_model, leaf_array
from lance_format.file.reader import DataFileReader
from lance_format.file.reader_structural import StructuralReader
from lance_format.schema.fields import marked_packed

if TYPE_CHECKING:
    from lance_format.dataset.fragment import LanceFragment
    from lance_format.schema import LanceField

_BYTE_ARRAY_STRUCT = 120  # size_of arrow-rs GenericByteArray<i32>
_PRIMITIVE_STRUCT = 96  # size_of arrow-rs PrimitiveArray<T>


def _grown(capacity: int, needed: int, minimum: int) -> int:
    """A Rust ``Vec``'s capacity after reserving room for ``needed`` elements."""
    if needed <= capacity:
        return capacity
    return max(capacity * 2, needed, minimum)


def _grown_through(capacity: int, needs: np.ndarray, minimum: int) -> int:
    """A ``Vec``'s capacity after reserving, in turn, the (non-decreasing) ``needs``: one step
    per growth, not per element."""
    while True:
        at = int(np.searchsorted(needs, capacity, side="right"))
        if at >= len(needs):
            return capacity
        capacity = _grown(capacity, int(needs[at]), minimum)


def _fixed_width(data_type: pa.DataType) -> bool:
    t = pa.types
    return (t.is_integer(data_type) or t.is_floating(data_type) or t.is_timestamp(data_type) or t.is_date(data_type)
            or t.is_time(data_type) or t.is_duration(data_type))


def _pieces(page: MiniBlockPage, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """pylance's decode instructions for the page-relative row ranges [lo, hi): one per range
    and chunk it touches, as (chunk, rows taken)."""
    first, rows = page.first_row, page.chunk_rows
    c_lo = np.searchsorted(first, lo, side="right") - 1
    c_hi = np.searchsorted(first, hi - 1, side="right") - 1
    per_range = c_hi - c_lo + 1
    which = np.repeat(np.arange(len(lo)), per_range)
    chunk = c_lo[which] + np.arange(len(which)) - np.repeat(np.cumsum(per_range) - per_range, per_range)
    taken = np.minimum(hi[which], first[chunk] + rows[chunk]) - np.maximum(lo[which], first[chunk])
    return chunk, taken


def _offset_width(data_type: pa.DataType) -> int:
    large = pa.types.is_large_string(data_type) or pa.types.is_large_binary(data_type)
    return 8 if large else 4


def _round64(n: int) -> int:
    return -(-n // 64) * 64


def _concatenated_bytes(array: pa.Array) -> int:
    """Allocated bytes of arrow's ``concat`` of the arrays a batch spanning pages was decoded
    into: buffers of exactly the values' size, rounded up to 64 bytes (no validity bitmap is
    counted: measured on nullable numbers, where counting one moves the cuts). Of lists,
    ``array`` is the items (which the list encoder hands its leaf)."""
    if _fixed_width(array.type):
        return _round64(len(array) * array.type.byte_width) + _PRIMITIVE_STRUCT
    values = int(pc.sum(pc.binary_length(array)).as_py() or 0)
    return _round64(values) + _round64((len(array) + 1) * _offset_width(array.type)) + _BYTE_ARRAY_STRUCT


def _dictionary_decoded_bytes(page: MiniBlockPage, array: pa.Array) -> int:
    """Allocated bytes of a batch of a dictionary page: pylance expands the indices value by
    value into a buffer first sized for the dictionary's bytes (values and offsets) per entry
    times the batch's rows (plus one entry less than the dictionary holds), grown when short."""
    dictionary = page.dictionary
    if dictionary is None:
        return array.nbytes
    entries = dictionary.n
    n = len(array)
    if _fixed_width(array.type):
        dict_bytes = entries * array.type.byte_width
        estimate = dict_bytes * (n + entries - 1) // entries
        return _grown(estimate, n * array.type.byte_width, 8) + _PRIMITIVE_STRUCT
    if not isinstance(dictionary, Variable):
        return array.nbytes
    width = _offset_width(array.type)
    dict_bytes = len(dictionary.data) + (entries + 1) * width
    estimate = dict_bytes * (n + entries - 1) // entries
    # null rows take an empty dictionary entry; no validity bitmap is counted (measured)
    ends = np.cumsum(pc.fill_null(pc.binary_length(array), 0).to_numpy(zero_copy_only=False))
    values_cap = _grown_through(estimate, ends, 8)
    offsets_cap = _grown_through(1, 2 + np.arange(n), 4)  # one offset pushed per row
    return values_cap + offsets_cap * width + _BYTE_ARRAY_STRUCT


def _list_items_bytes(page: MiniBlockPage, lo: np.ndarray, hi: np.ndarray, lengths: np.ndarray,
                      items: pa.Array) -> int:
    """Allocated bytes of the items of a batch of lists (what pylance's list encoder hands its
    leaf: the decoded items buffer, of which the lists are a slice); ``lengths``: the items of
    each row. Every chunk the batch's ranges touch (a list's continuation chunks too) is one
    instruction of the items' decode task; the values buffer starts at twice their bytes and
    grows chunk by chunk."""
    first_chunk, _ = page._chunks_for(lo)
    _, last_chunk = page._chunks_for(hi - 1)
    per_range = last_chunk - first_chunk + 1
    chunk = np.repeat(first_chunk, per_range) + np.arange(int(per_range.sum())) - np.repeat(
        np.cumsum(per_range) - per_range, per_range)
    estimate = 2 * int(np.diff(page.chunk_offsets)[chunk].sum())
    # items taken chunk by chunk: each row's items counted with the chunk where the row starts
    lengths_of_ranges = hi - lo
    rows = np.repeat(lo - np.cumsum(lengths_of_ranges) + lengths_of_ranges, lengths_of_ranges) + np.arange(
        int(lengths_of_ranges.sum()))
    row_chunk, _ = page._chunks_for(rows)
    breaks = np.flatnonzero(np.diff(row_chunk) != 0) + 1
    piece_items = np.add.reduceat(lengths, np.concatenate([[0], breaks])) if len(rows) else np.zeros(0, np.int64)
    item_ends = np.cumsum(piece_items)
    if _fixed_width(items.type):
        return _grown_through(estimate, item_ends * items.type.byte_width, 8) + _PRIMITIVE_STRUCT
    byte_ends = np.zeros(len(items) + 1, np.int64)
    np.cumsum(pc.fill_null(pc.binary_length(items), 0).to_numpy(zero_copy_only=False), out=byte_ends[1:])
    values_cap = _grown_through(estimate, byte_ends[item_ends], 8)
    offsets_cap = _grown_through(1, 1 + item_ends, 4)
    return values_cap + offsets_cap * _offset_width(items.type) + _BYTE_ARRAY_STRUCT


def _row_lengths(lists: pa.Array) -> np.ndarray:
    return pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False).astype(np.int64)


def _batch_bytes(page: MiniBlockPage | None, lo: np.ndarray, hi: np.ndarray, array: pa.Array) -> int:
    """Allocated bytes of the page-relative row ranges [lo, hi) of ``page`` (``array`` holds
    their rows in order) decoded as pylance does: one decode task whose instructions each take
    one range's rows of one chunk, and whose values buffer starts at twice the bytes of the
    chunk of every instruction (a chunk several ranges touch is counted once per range)."""
    if page is None:
        return _concatenated_bytes(array)
    if page.dictionary_enc is not None:
        return _dictionary_decoded_bytes(page, array)
    chunk, taken = _pieces(page, lo, hi)
    estimate = 2 * int(np.diff(page.chunk_offsets)[chunk].sum())
    if _fixed_width(array.type):
        if page.def_codec is None:
            # fixed-width values end up in a buffer of exactly their size (measured against pylance)
            return len(array) * array.type.byte_width + _PRIMITIVE_STRUCT
        return _grown(estimate, len(array) * array.type.byte_width, 8) + _PRIMITIVE_STRUCT
    ends = np.zeros(len(array) + 1, np.int64)
    np.cumsum(pc.fill_null(pc.binary_length(array), 0).to_numpy(zero_copy_only=False), out=ends[1:])
    row_ends = np.cumsum(taken)
    values_cap = _grown_through(estimate, ends[row_ends], 8)
    offsets_cap = _grown_through(1, 1 + row_ends, 4)
    # a page with definition levels gives every batch a validity bitmap (a 64-byte rounded buffer)
    validity = _round64((len(array) + 7) // 8) if page.def_codec is not None else 0
    return values_cap + offsets_cap * _offset_width(array.type) + validity + _BYTE_ARRAY_STRUCT


_Plan = tuple[MiniBlockPage | None, np.ndarray, np.ndarray]


def _batch_ranges(live: np.ndarray | None, total: int, batch_rows: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per scan batch, the physical row ranges [lo, hi) it reads (runs of live rows)."""
    if live is None:
        starts = np.arange(0, total, batch_rows)
        return [(np.array([a]), np.array([min(total, a + batch_rows)])) for a in starts]
    out = []
    for a in range(0, len(live), batch_rows):
        rows = live[a:a + batch_rows]
        breaks = np.flatnonzero(np.diff(rows) != 1) + 1
        out.append((rows[np.concatenate([[0], breaks])], rows[np.concatenate([breaks - 1, [len(rows) - 1]])] + 1))
    return out


def _column_plans(fragment: LanceFragment, field: pa.Field, field_id: int,
                  batches: list[tuple[np.ndarray, np.ndarray]], in_list: bool = False) -> list[_Plan | None]:
    """Per scan batch, the page and page-relative row ranges one leaf field's array (a leaf, a
    list of a leaf, or, ``in_list``, a leaf of a list's items) is decoded from (None: not
    modelled)."""
    t = pa.types
    files = [f for f in fragment.proto.files if field_id in f.fields]
    is_list = in_list or t.is_list(field.type) or t.is_large_list(field.type)
    leaf_type = field.type if in_list else field.type.value_type if is_list else field.type
    if not (t.is_string(leaf_type) or t.is_binary(leaf_type) or _fixed_width(leaf_type)) or len(files) != 1 \
            or files[0].file_major_version != 2 or files[0].file_minor_version < 1:
        return []
    data_file = files[0]
    column = data_file.column_indices[list(data_file.fields).index(field_id)]
    reader = StructuralReader(DataFileReader(fragment._dataset.object_store, f"data/{data_file.path}"))
    col = reader._leaf_column(type("Plan", (), {"column": column})(), field.name)
    out: list[_Plan | None] = []
    for lo, hi in batches:
        page = int(np.searchsorted(col.starts, lo[0], side="right") - 1)
        if col.starts[page + 1] < hi[-1]:
            # decoded page by page, then concatenated
            out.append((None, lo, hi))
            continue
        decoder = col.decoder(page)
        if isinstance(decoder, MiniBlockPage):
            decoder._load()
            if (decoder.rep_codec is not None) == is_list and not (
                    decoder.rep_codec is not None and (decoder.whole_page or decoder.dictionary_enc is not None)):
                start = int(col.starts[page])
                out.append((decoder, lo - start, hi - start))
                continue
        out.append(None)
    return out


# One leaf's plan: its path (see ``leaf_paths``), the path of the list whose items it is a leaf of
# (None: not in a list's items), and its decode plan for one scan batch.
_LeafPlan = tuple[tuple[int, ...], "tuple[int, ...] | None", "_Plan | None"]


class ArraySizes:
    """Modelled sizes of arrays, registered as a scan reads them and taken once by the writer.
    An array is found by its data buffer, offset and length (the very array the scan produced,
    or the leaf of it the writer counts), so arrays of other origins are never matched."""

    def __init__(self) -> None:
        self._sizes: dict[tuple[int, int, int], int] = {}

    @staticmethod
    def _key(array: pa.Array) -> tuple[int, int, int] | None:
        buffers = array.buffers()
        if len(buffers) < 2 or buffers[1] is None:
            return None
        return buffers[1].address, array.offset, len(array)

    def register(self, array: pa.Array, size: int | None) -> None:
        key = self._key(array)
        if key is not None and size is not None:
            self._sizes[key] = size

    def size_of(self, array: pa.Array) -> int | None:
        key = self._key(array)
        return None if key is None else self._sizes.pop(key, None)


class DecodedSizes(ArraySizes):
    """Modelled sizes of the arrays of 2.1/2.2 scan batches (see module doc); ``expect``
    registers a batch as it is read."""

    def expect(self, batch: pa.RecordBatch, plans: list[list[_LeafPlan]]) -> None:
        for column, leaves in zip(batch.columns, plans):
            for path, list_path, plan in leaves:
                if plan is None:
                    continue
                # the items pylance's leaf encoder counts, and the lists they are items of
                counted = counted_array(column, path)
                key = self._key(counted)
                holder = leaf_array(column, path)
                lists = holder if _is_list(holder.type) else (
                    None if list_path is None else leaf_array(column, list_path))
                rows = len(counted) if lists is None else len(lists)
                if key is None or int((plan[2] - plan[1]).sum()) != rows:
                    continue
                if lists is None:
                    self._sizes[key] = _batch_bytes(plan[0], plan[1], plan[2], counted)
                elif plan[0] is None:
                    self._sizes[key] = _concatenated_bytes(counted)
                else:
                    self._sizes[key] = _list_items_bytes(plan[0], plan[1], plan[2], _row_lengths(lists), counted)


def _is_list(data_type: pa.DataType) -> bool:
    return pa.types.is_list(data_type) or pa.types.is_large_list(data_type)


_Leaf = tuple[tuple[int, ...], "tuple[int, ...] | None", pa.Field, int, bool]


def _leaf_fields(lance_field: LanceField, arrow_field: pa.Field, path: tuple[int, ...] = (),
                 list_path: tuple[int, ...] | None = None) -> Iterator[_Leaf]:
    """(path, list path, arrow field, lance field id, modelled) of each leaf column of a field,
    in ``leaf_paths`` order. Modelled: a leaf, a list of a leaf, and a leaf of the items of one
    list of structs (deeper nesting, maps and packed structs are not)."""
    data_type = arrow_field.type
    packed = marked_packed(lance_field.metadata)
    if pa.types.is_struct(data_type) and lance_field.children and not packed:
        for index, child in enumerate(lance_field.children):
            yield from _leaf_fields(child, data_type.field(index), (*path, index), list_path)
        return
    if lance_field.children and not pa.types.is_struct(data_type):  # a list or map
        item = lance_field.children[0]
        if not item.children or marked_packed(item.metadata):
            yield path, list_path, arrow_field, item.id, _is_list(data_type) and list_path is None
            return
        nested = _is_list(data_type) and list_path is None and pa.types.is_struct(data_type.value_type)
        for leaf_path, leaf_list_path, leaf_field, leaf_id, modelled in _leaf_fields(
                item, data_type.value_field if _is_list(data_type) else pa.field("entries", pa.null()), path, path):
            yield leaf_path, leaf_list_path, leaf_field, leaf_id, modelled and nested
        return
    yield path, list_path, arrow_field, lance_field.id, not packed and not lance_field.children


def fragment_batch_plans(fragment: LanceFragment, schema: pa.Schema, batch_rows: int) -> list[list[list[_LeafPlan]]]:
    """Per scan batch of ``fragment``, per column, each leaf's decode plan."""
    live = None
    if fragment.proto.HasField("deletion_file"):
        live = np.setdiff1d(np.arange(fragment.physical_rows), fragment.deleted_offsets.astype(np.int64))
    batches = _batch_ranges(live, fragment.physical_rows, batch_rows)
    if not batches:
        return []
    lance_fields = {f.name: f for f in fragment._dataset.lance_schema.fields}
    columns: list[list[tuple[tuple[int, ...], tuple[int, ...] | None, list[_Plan | None]]]] = []
    for field in schema:
        leaves = []
        if field.name in lance_fields:
            for path, list_path, leaf_field, leaf_id, modelled in _leaf_fields(lance_fields[field.name], field):
                # each leaf is decoded (and counted by pylance's writer) on its own
                plans = _column_plans(fragment, leaf_field, leaf_id, batches, list_path is not None) if modelled else []
                leaves.append((path, list_path, plans))
        columns.append(leaves)
    return [[[(path, list_path, plans[b] if b < len(plans) else None) for path, list_path, plans in leaves]
             for leaves in columns] for b in range(len(batches))]


def _rebatched(batches: Iterator[pa.RecordBatch], rows: int, batch_rows: int,
               carry: list[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The next ``rows`` rows of ``carry`` then ``batches``, in batches of ``batch_rows`` rows (the
    last one shorter), as pylance's scan of a fragment with deletions yields them (its batches
    count live rows); rows read beyond ``rows`` are left in ``carry``."""
    pending: list[pa.RecordBatch] = []
    have = 0
    while rows > 0:
        while have < min(batch_rows, rows):
            batch = carry.pop(0) if carry else next(batches, None)
            if batch is None:
                break
            pending.append(batch)
            have += batch.num_rows
        if not pending:
            return
        take = min(batch_rows, rows, have)
        if len(pending) == 1 and pending[0].num_rows == take:
            out, pending = pending[0], []
        else:
            table = pa.Table.from_batches(pending)
            out = table.slice(0, take).combine_chunks().to_batches()[0]
            rest = table.slice(take)
            pending = rest.combine_chunks().to_batches() if rest.num_rows else []
        have -= take
        rows -= take
        yield out
    carry[:0] = pending


BatchRegistrar = Callable[[int, pa.RecordBatch], None]


def registered_batches(batches: Iterator[pa.RecordBatch], fragments: list[LanceFragment], batch_rows: int,
                       registrar: Callable[[LanceFragment], BatchRegistrar]) -> Iterator[pa.RecordBatch]:
    """``batches`` (a scan of ``fragments`` in order, restarting batches at each fragment), each
    registered by ``registrar(fragment)(index, batch)`` before it is passed on while the scan
    stays in step with pylance's batches; a fragment with deletions is passed on in batches of
    ``batch_rows`` live rows, as pylance reads it."""
    carry: list[pa.RecordBatch] = []
    for fragment in fragments:
        register = registrar(fragment)
        left, index, in_step = fragment.count_rows(), 0, True
        source: Iterator[pa.RecordBatch] = batches
        if fragment.proto.HasField("deletion_file") or carry:
            source = _rebatched(batches, left, batch_rows, carry)
        while left > 0:
            batch = next(source, None)
            if batch is None:
                return
            in_step = in_step and batch.num_rows == min(batch_rows, left)  # out of step: lengths from here on
            if in_step:
                register(index, batch)
            left -= batch.num_rows
            index += 1
            yield batch
    yield from carry
    yield from batches


def registered(batches: Iterator[pa.RecordBatch], fragments: list[LanceFragment], schema: pa.Schema,
               batch_rows: int, sizes: DecodedSizes) -> Iterator[pa.RecordBatch]:
    """:func:`registered_batches` of 2.1/2.2 fragments, each batch registered with ``sizes``."""
    def registrar(fragment: LanceFragment) -> BatchRegistrar:
        plans = fragment_batch_plans(fragment, schema, batch_rows)

        def register(index: int, batch: pa.RecordBatch) -> None:
            if index < len(plans):
                sizes.expect(batch, plans[index])
        return register

    return registered_batches(batches, fragments, batch_rows, registrar)


@contextlib.contextmanager
def modelled_decoder_memory() -> Iterator[DecodedSizes]:
    """While active, the 2.1/2.2 writer counts registered arrays at their modelled sizes."""
    sizes = DecodedSizes()
    token = decoded_memory_model.set(sizes.size_of)
    try:
        yield sizes
    finally:
        decoded_memory_model.reset(token)


__all__ = ["DecodedSizes", "fragment_batch_plans", "modelled_decoder_memory", "registered"]
