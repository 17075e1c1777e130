"""How much memory pylance's 2.0 (legacy) decoders allocate for the arrays its compaction reads.

pylance's 2.0 writer buffers each leaf column's arrays until their ``get_array_memory_size``
passes 8 MiB (``AccumulationQueue``: strictly more than ``cache_bytes_per_column``), then writes
them as a page; a compaction cuts a file at the first batch after which ``max_bytes_per_file``
bytes are written. So where files are cut depends on the memory of the arrays pylance's 2.0
decoders built for each 8192-row scan batch. Unlike the 2.1 mini-block decoder, these allocate
(almost) exactly:

* fixed-width values are a zero-copy slice of the page's bytes, and strings are offsets rebuilt
  one per row (``(n + 1)`` offsets, exactly) plus a zero-copy slice of the page's bytes; an array
  also counts its own struct (96 bytes for numbers, 120 for strings);
* a validity bitmap is counted only when the batch holds a null (arrow drops an all-valid one): of
  numbers, built by a ``BooleanBufferBuilder`` (rounded up to 64 bytes); of strings, an exact
  ``Vec``, except that the first batch decoded from a page (of a fragment without deletions)
  copies the page's whole bitmap into it (arrow's slice at offset 0 keeps the whole buffer);
* a dictionary page's batch is expanded by arrow's ``take``: exact values and offsets, and the
  validity of the indices (64-byte rounded) when the batch holds a null;
* a batch spanning pages is decoded page by page and concatenated by arrow (buffers rounded up to
  64 bytes, a validity bitmap too when the batch holds a null);
* a fragment with deletions is read in batches of 8192 live rows, its live runs being the ranges
  scheduled in each page. The values (or string bytes) of a batch then come from several
  fetched pieces, one per run, and are copied into a ``Vec`` first sized for the bytes *after* the
  first piece's part (the whole batch when the batch begins a run other than its page's first),
  which then grows as Rust's ``Vec`` does: up to twice the bytes, which is what makes pylance
  flush pages early there.

Of a list field, the writer counts the decoded items (the list encoder hands its leaf the items
the lists slice); of a struct, each child on its own. Both are sized like a top-level field's
array, from the item or child column's pages. With deletions, each run of live lists fetches its
items as one piece, and the items of a null list are those stored under it (this engine's scan
leaves them out, so they are read from the fragment's physical rows); there, only one-page item
columns are modelled, else the items' length in bytes is counted.

Measured against pylance 14 (tests/test_compaction_file_bytes_v2_0.py) on files of either
engine: the same cuts, except lists of strings in fragments with deletions (a batch off at
times).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.dataset.maintenance.decoded_memory import ArraySizes, _batch_ranges, registered_batches
from lance_format.file.reader import DataFileReader
from lance_format.file.writer_v2_0 import legacy_decoded_memory_model
from lance_format.proto import encodings_v2_0_pb2

if TYPE_CHECKING:
    from lance_format.dataset.fragment import LanceFragment

_BYTE_ARRAY_STRUCT = 120  # size_of arrow-rs GenericByteArray<i32>
_PRIMITIVE_STRUCT = 96  # size_of arrow-rs PrimitiveArray<T>
_VEC_MIN_CAPACITY = 8  # Rust's smallest non-zero Vec<u8> capacity


def _round64(n: int) -> int:
    return -(-n // 64) * 64


def _grown_through(capacity: int, needs: np.ndarray) -> int:
    """A ``Vec<u8>``'s capacity after extending it, in turn, to the (non-decreasing) ``needs``:
    each growth takes the larger of twice the capacity and what is needed."""
    while True:
        at = int(np.searchsorted(needs, capacity, side="right"))
        if at >= len(needs):
            return capacity
        capacity = max(capacity * 2, int(needs[at]), _VEC_MIN_CAPACITY)


def _fixed_width(data_type: pa.DataType) -> bool:
    t = pa.types
    return (t.is_integer(data_type) or t.is_floating(data_type) or t.is_timestamp(data_type) or t.is_date(data_type)
            or t.is_time(data_type) or t.is_duration(data_type))


def _byte_like(data_type: pa.DataType) -> bool:
    t = pa.types
    return t.is_string(data_type) or t.is_binary(data_type) or t.is_large_string(data_type) or t.is_large_binary(data_type)


def _offset_width(data_type: pa.DataType) -> int:
    return 8 if pa.types.is_large_string(data_type) or pa.types.is_large_binary(data_type) else 4


@dataclass(frozen=True)
class BatchPlan:
    """How pylance's 2.0 decoder reads one batch of one leaf column: from one page (else the
    parts are concatenated), in ``segments`` rows taken from successive scheduled ranges, the first
    beginning a fetched piece (so that the copy is first sized for the whole batch) or not."""

    pages: int
    dictionary: bool
    segments: np.ndarray
    begins_piece: bool
    page_rows: int = 0  # rows scheduled in the page, when the batch is the first read from it


def _copied_capacity(segment_bytes: np.ndarray, begins_piece: bool) -> int:
    """Capacity of the buffer pylance's ``ValuePageDecoder`` returns for a batch whose bytes come
    from successive fetched pieces: a zero-copy slice when one piece holds them all, else a
    ``Vec`` first sized for the bytes after the first piece's part, grown as it is extended."""
    ends = np.cumsum(segment_bytes)
    take = int(ends[-1]) if len(ends) else 0
    first = 0 if begins_piece else (int(ends[0]) if len(ends) else 0)
    if begins_piece or first >= take:
        return take
    return _grown_through(take - first, ends)


def _concatenated_bytes(array: pa.Array) -> int:
    """arrow's ``concat`` of a batch's parts from several pages: buffers of exactly the values'
    size, rounded up to 64 bytes."""
    n = len(array)
    validity = _round64((n + 7) // 8) if array.null_count else 0
    if _fixed_width(array.type):
        return _round64(n * array.type.byte_width) + validity + _PRIMITIVE_STRUCT
    values = int(pc.sum(pc.binary_length(array)).as_py() or 0)
    return _round64(values) + _round64((n + 1) * _offset_width(array.type)) + validity + _BYTE_ARRAY_STRUCT


def batch_bytes(plan: BatchPlan, array: pa.Array) -> int | None:
    """Allocated bytes of ``array`` as pylance's 2.0 decoder builds it (None: not modelled)."""
    n = len(array)
    nulls = array.null_count > 0
    if plan.pages > 1:
        return _concatenated_bytes(array)
    if _fixed_width(array.type):
        width = array.type.byte_width
        values = _copied_capacity(plan.segments * width, plan.begins_piece)
        return values + (_round64((n + 7) // 8) if nulls else 0) + _PRIMITIVE_STRUCT
    if not _byte_like(array.type):
        return None
    lengths = pc.fill_null(pc.binary_length(array), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    offsets = (n + 1) * _offset_width(array.type)
    if plan.dictionary:
        return int(lengths.sum()) + offsets + (_round64((n + 7) // 8) if nulls else 0) + _BYTE_ARRAY_STRUCT
    starts = np.concatenate([[0], np.cumsum(plan.segments)[:-1]]).astype(np.int64)
    segment_bytes = np.add.reduceat(lengths, starts) if n else np.zeros(0, np.int64)
    segment_bytes = segment_bytes[segment_bytes > 0]  # runs of empty strings fetch no bytes
    values = _copied_capacity(segment_bytes, plan.begins_piece)
    validity = 0
    if nulls:
        # a Vec sized for the batch's bitmap; the first batch of a page copies the page's whole
        # bitmap into it (arrow's slice at offset 0 keeps the whole buffer)
        validity = _grown_through((n + 7) // 8, np.array([(plan.page_rows + 7) // 8]))
    return values + offsets + validity + _BYTE_ARRAY_STRUCT


class _ColumnPages:
    """Row starts and dictionary pages of one 2.0 column."""

    def __init__(self, reader: DataFileReader, column: int, name: str) -> None:
        pages = reader.metadata.columns[column].pages
        lengths = np.fromiter((p.length for p in pages), np.int64, len(pages))
        self.starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        self.dictionary = np.fromiter(
            (reader.page_encoding(p, encodings_v2_0_pb2.ArrayEncoding, name).WhichOneof("array_encoding")
             == "dictionary" for p in pages), bool, len(pages))

    def plan(self, lo: np.ndarray, hi: np.ndarray, previous_end: int | None, deletions: bool) -> BatchPlan:
        """The plan of a batch reading rows [lo, hi) (runs of live rows) after a batch that ended
        before row ``previous_end`` (None: the first batch) of a fragment with or without
        ``deletions``."""
        first = int(np.searchsorted(self.starts, lo[0], side="right") - 1)
        last = int(np.searchsorted(self.starts, hi[-1] - 1, side="right") - 1)
        if last != first:
            return BatchPlan(last - first + 1, False, hi - lo, False)
        # The batch begins a fetched piece when its first row begins a run and rows of the page
        # were read before it: pylance's decoder skips whole pieces only while the bytes to skip
        # exceed them, so it stops at the end of the previous piece and sizes the copy for all.
        read_before = previous_end is not None and previous_end > self.starts[first]
        begins = read_before and previous_end != lo[0]
        # Without deletions, a nullable string batch decoded first from its page copies the
        # page's whole bitmap (measured: not so in fragments with deletions).
        page_rows = 0 if read_before or deletions else int(self.starts[first + 1] - self.starts[first])
        return BatchPlan(1, bool(self.dictionary[first]), (hi - lo).astype(np.int64), begins, page_rows)


@dataclass
class _LeafSource:
    path: tuple[int, ...]  # the leaf's position: column of the batch, then child indices
    pages: _ColumnPages
    items: bool  # the leaf is a list's items


def _leaf_sources(fragment: LanceFragment, schema: pa.Schema) -> list[_LeafSource] | None:
    files = fragment.proto.files
    if len(files) != 1 or files[0].file_major_version != 2 or files[0].file_minor_version != 0:
        return None
    data_file = files[0]
    columns = dict(zip(data_file.fields, data_file.column_indices))
    reader = DataFileReader(fragment._dataset.object_store, f"data/{data_file.path}")
    lance_fields = {f.name: f for f in fragment._dataset.lance_schema.fields}
    out: list[_LeafSource] = []
    for i, field in enumerate(schema):
        lance_field = lance_fields.get(field.name)
        if lance_field is None:
            continue
        t = field.type
        if (pa.types.is_list(t) or pa.types.is_large_list(t)) and len(lance_field.children) == 1 \
                and not lance_field.children[0].children:
            child = lance_field.children[0]
            if child.id in columns:
                out.append(_LeafSource((i,), _ColumnPages(reader, columns[child.id], child.name), True))
        elif pa.types.is_struct(t):
            for j, child in enumerate(lance_field.children):
                if not child.children and child.id in columns:
                    out.append(_LeafSource((i, j), _ColumnPages(reader, columns[child.id], child.name), False))
        elif not lance_field.children and lance_field.id in columns:
            out.append(_LeafSource((i,), _ColumnPages(reader, columns[lance_field.id], field.name), False))
    return out


def _leaf_array(batch: pa.RecordBatch, path: tuple[int, ...]) -> pa.Array:
    array = batch.column(path[0])
    for j in path[1:]:
        array = array.field(j)
    return array


def _items(array: pa.Array) -> pa.Array:
    """The items a list array hands its item column (as the 2.0 list writer slices them)."""
    offsets = array.offsets
    first, last = int(offsets[0].as_py()), int(offsets[-1].as_py())
    return array.values.slice(first, last - first)


class LegacyDecodedSizes(ArraySizes):
    """Modelled sizes of the arrays of scan batches of 2.0 files, looked up by the 2.0 writer."""


class _FragmentModel:
    """Registers each batch of one fragment's scan with the sizes pylance's decoder gives it."""

    def __init__(self, fragment: LanceFragment, schema: pa.Schema, batch_rows: int) -> None:
        self.sources = _leaf_sources(fragment, schema) or []
        live = None
        if fragment.proto.HasField("deletion_file"):
            live = np.setdiff1d(np.arange(fragment.physical_rows), fragment.deleted_offsets.astype(np.int64))
        self.deletions = live is not None
        self.batches = _batch_ranges(live, fragment.physical_rows, batch_rows)
        self.next_item = [0] * len(self.sources)  # first item of the next batch, per list leaf
        # With deletions, pylance's items of live null lists keep the items stored under them
        # (this engine's scan drops them): take the items from the physical rows.
        self.physical: dict[int, tuple[np.ndarray, pa.Array]] = {}
        one_page = [k for k, source in enumerate(self.sources) if source.items and len(source.pages.starts) == 2]
        if self.deletions and one_page:
            names = sorted({schema.names[self.sources[k].path[0]] for k in one_page})
            table = fragment.to_table(columns=names, include_deleted_rows=True, with_row_id=True)
            for k in one_page:
                lists = table[schema.names[self.sources[k].path[0]]].combine_chunks()
                self.physical[k] = (lists.offsets.to_numpy(zero_copy_only=False).astype(np.int64), lists.values)

    def expect(self, index: int, batch: pa.RecordBatch, sizes: LegacyDecodedSizes) -> None:
        if index >= len(self.batches):
            return
        lo, hi = self.batches[index]
        previous_end = int(self.batches[index - 1][1][-1]) if index > 0 else None
        for k, source in enumerate(self.sources):
            array = _leaf_array(batch, source.path)
            if not source.items:
                sizes.register(array, batch_bytes(source.pages.plan(lo, hi, previous_end, self.deletions), array))
                continue
            items = _items(array)
            start = self.next_item[k]
            self.next_item[k] = start + len(items)
            if not len(items):
                continue
            if not self.deletions:
                plan = source.pages.plan(np.array([start]), np.array([start + len(items)]),
                                         start if index > 0 else None, False)
            elif k in self.physical:
                plan, theirs = self._items_plan(source.pages, self.physical[k], lo, hi, previous_end,
                                                self.batches[0][0][0])
                sizes.register(items, batch_bytes(plan, theirs))
                continue
            else:
                continue  # item positions in pages unknown: the items' length in bytes counts
            sizes.register(items, batch_bytes(plan, items))

    @staticmethod
    def _items_plan(pages: _ColumnPages, physical: tuple[np.ndarray, pa.Array], lo: np.ndarray, hi: np.ndarray,
                    previous_end: int | None, first_row: int) -> tuple[BatchPlan, pa.Array]:
        """The plan of a batch's items from a one-page item column of a fragment with deletions,
        and the items pylance decodes: each run of live rows fetches its items as one piece."""
        offsets, values = physical
        starts, ends = offsets[lo], offsets[hi]
        lengths = ends - starts
        firsts = np.cumsum(lengths) - lengths
        taken = np.repeat(starts - firsts, lengths) + np.arange(int(lengths.sum()))
        read_before = bool(starts[0] > offsets[first_row])
        begins = read_before and previous_end is not None and previous_end != lo[0]
        plan = BatchPlan(1, bool(pages.dictionary[0]), lengths[lengths > 0], begins)
        return plan, values.take(pa.array(taken))


def registered_v2_0(batches: Iterator[pa.RecordBatch], fragments: list[LanceFragment], schema: pa.Schema,
                    batch_rows: int, sizes: LegacyDecodedSizes) -> Iterator[pa.RecordBatch]:
    """:func:`~lance_format.dataset.maintenance.decoded_memory.registered_batches` of 2.0
    fragments, each batch registered with ``sizes``."""
    def registrar(fragment: LanceFragment) -> Callable[[int, pa.RecordBatch], None]:
        model = _FragmentModel(fragment, schema, batch_rows)
        return lambda index, batch: model.expect(index, batch, sizes)

    return registered_batches(batches, fragments, batch_rows, registrar)


@contextlib.contextmanager
def modelled_legacy_decoder_memory() -> Iterator[LegacyDecodedSizes]:
    """While active, the 2.0 writer counts registered arrays at their modelled sizes (and flushes a
    page once they pass the page size, as pylance's accumulation queue does)."""
    sizes = LegacyDecodedSizes()
    token = legacy_decoded_memory_model.set(sizes.size_of)
    try:
        yield sizes
    finally:
        legacy_decoded_memory_model.reset(token)


__all__ = ["BatchPlan", "LegacyDecodedSizes", "batch_bytes", "modelled_legacy_decoder_memory", "registered_v2_0"]
