"""Reader of legacy Lance data files (file version 0.1; footer versions 0.0, 0.1 and 0.2).

Layout::

    [pages of batch 0, field by field] [pages of batch 1] ...
    [page table: for each field id in [first, last], for each batch: i64 position, i64 length]
    [u32 length | Manifest proto (the file's own schema)]   (self-describing files only)
    [u32 length | Metadata proto: batch_offsets, page_table_position, manifest_position]
    [u64 metadata position | u16 major | u16 minor | b"LANC"]

Rows are split into batches (``Metadata.batch_offsets`` = cumulative row counts starting at
0); each field has one page per batch, found in the page table. Structs have no page of their
own, list fields have an offsets page and their items are the child field's page of the same
batch. The page table covers field ids ``DataFile.fields[0]`` up to ``max(DataFile.fields)``,
as official Lance reads it. Page decoding lives in :mod:`lance_format.encodings.legacy_v0_1`.

On object stores a take (or a range over several batches) would send one small request per
field, batch and level of indirection (a var-binary page's positions, then its bytes). Instead
the reads go out in rounds (:class:`_Rounds`): every (batch, field) piece is decoded with the
bytes fetched so far; a piece that needs bytes not yet fetched names them and waits for the next
round, and each round fetches everything named as one batch of coalesced parallel requests.
A take thus costs a few requests per level of indirection, not a few per row.
"""

from __future__ import annotations

import functools
import struct
import threading
from collections.abc import Callable, Mapping
from typing import TypeVar

import numpy as np
import pyarrow as pa
from google.protobuf.message import DecodeError

from lance_format.encodings.buffers import DecodeContext
from lance_format.encodings.legacy_v0_1 import fixed_stride_bits, read_binary, read_fixed, read_offsets
from lance_format.errors import CorruptFileError, InvalidInputError, LanceError, UnsupportedFeatureError
from lance_format.file.container import MAGIC, TAIL_READ_BYTES
from lance_format.file.reader import ColumnPlan, _open
from lance_format.io.object_store import ObjectStore
from lance_format.proto import file_pb2, table_pb2
from lance_format.schema import LanceSchema

T = TypeVar("T")


class _NotFetched(Exception):
    """A piece needs bytes the current round has not fetched (see :class:`_Rounds`)."""


class _Rounds:
    """The bytes fetched for one batched read, by ``(offset, length)``, and the ones wanted next."""

    def __init__(self) -> None:
        self.fetched: dict[tuple[int, int], pa.Buffer] = {}
        self.wanted: set[tuple[int, int]] = set()

    def read(self, offset: int, length: int) -> pa.Buffer:
        buffer = self.fetched.get((offset, length))
        if buffer is None:
            self.wanted.add((offset, length))
            raise _NotFetched
        return buffer


_TAIL = struct.Struct("<QHH4s")


def is_legacy_version(major: int, minor: int) -> bool:
    """Whether a DataFile's (major, minor) names the legacy format (official: major 0, minor < 3)."""
    return major == 0 and minor < 3


def _is_binary(data_type: pa.DataType) -> bool:
    return (
        pa.types.is_string(data_type)
        or pa.types.is_large_string(data_type)
        or pa.types.is_binary(data_type)
        or pa.types.is_large_binary(data_type)
    )


class LegacyFileReader:
    """Range reads and takes of one legacy data file, with the interface of ``LanceFileReader``.

    Plans name fields by id (``ColumnPlan.column`` is the field id). ``dictionaries`` maps the
    id of each dictionary field to its values (stored in the manifest, not in the data file).
    """

    def __init__(
        self,
        store: ObjectStore,
        path: str,
        *,
        field_ids: tuple[int, int],
        size: int | None = None,
        dictionaries: Mapping[int, pa.Array] | None = None,
    ) -> None:
        self.store = store
        self.path = path
        self.dictionaries = dict(dictionaries or {})
        self._rounds = threading.local()  # the batched read in progress in this thread, if any
        self._file, self._mapped = _open(store, path)
        try:
            self._size = size if size else self._file.size()
            self._load(field_ids)
        except BaseException:
            self._file.close()
            raise

    # -- metadata --------------------------------------------------------------------------------
    def _load(self, field_ids: tuple[int, int]) -> None:
        size = self._size
        if size < _TAIL.size:
            raise CorruptFileError(f"file is too short ({size} bytes) to be a Lance file", path=self.path)
        tail_start = max(0, size - TAIL_READ_BYTES)
        tail = self._read_exact(tail_start, size - tail_start)
        meta_pos, major, minor, magic = _TAIL.unpack_from(tail, len(tail) - _TAIL.size)
        if magic != MAGIC:
            raise CorruptFileError("not a Lance file (bad or missing footer magic)", path=self.path)
        if not is_legacy_version(major, minor):
            raise CorruptFileError(
                f"the manifest lists a legacy file but its footer says version {major}.{minor}", path=self.path
            )
        self.version: tuple[int, int] = (major, minor)
        meta_end = size - _TAIL.size
        if meta_pos + 4 > meta_end:
            raise CorruptFileError(f"metadata position {meta_pos} lies past the end of the file", path=self.path)
        (length,) = struct.unpack("<I", self._bytes(tail, tail_start, meta_pos, 4))
        if meta_pos + 4 + length > meta_end:
            raise CorruptFileError(f"metadata of {length} bytes runs past the end of the file", path=self.path)
        try:
            metadata = file_pb2.Metadata.FromString(self._bytes(tail, tail_start, meta_pos + 4, length))
        except DecodeError as exc:
            raise CorruptFileError(f"undecodable file metadata: {exc}", path=self.path) from exc
        offsets = np.asarray(metadata.batch_offsets, np.int64)
        if len(offsets) and (int(offsets[0]) != 0 or bool(np.any(offsets[1:] < offsets[:-1]))):
            raise CorruptFileError("batch offsets must start at 0 and never decrease", path=self.path)
        self.batch_offsets = offsets if len(offsets) else np.zeros(1, np.int64)
        self.num_batches = len(self.batch_offsets) - 1
        self.num_rows: int = int(self.batch_offsets[-1])
        self.num_columns = 0
        first, last = field_ids
        if last < first:
            raise CorruptFileError(f"field ids [{first}, {last}] are empty", path=self.path)
        self._first_field = first
        entries = (last - first + 1) * self.num_batches * 2
        table_pos = int(metadata.page_table_position)
        if table_pos + entries * 8 > meta_pos:
            raise CorruptFileError(
                f"page table of {entries // 2} pages at {table_pos} runs into the metadata at {meta_pos}",
                path=self.path,
            )
        raw = self._bytes(tail, tail_start, table_pos, entries * 8) if entries else b""
        table = np.frombuffer(raw, "<i8").reshape(last - first + 1, self.num_batches, 2)
        positions, lengths = table[:, :, 0], table[:, :, 1]
        if bool(np.any(positions < 0)) or bool(np.any(lengths < 0)) or bool(np.any(positions > meta_pos)):
            raise CorruptFileError("page table has pages outside the data region", path=self.path)
        self._pages = table
        self._data_end = table_pos
        self._manifest_position = int(metadata.manifest_position)
        self._metadata_position = meta_pos

    def file_dictionaries(self) -> dict[int, pa.Array]:
        """Dictionary values the file's own schema holds (legacy writers put them in the file too;
        a new legacy table's manifest takes them from its files)."""
        position, end = self._manifest_position, self._metadata_position
        if not (0 < position and position + 4 <= end):
            raise CorruptFileError(f"the file's schema position {position} lies outside the file", path=self.path)
        (length,) = struct.unpack("<I", self._read_exact(position, 4))
        if position + 4 + length > end:
            raise CorruptFileError(f"the file's schema of {length} bytes runs into its metadata", path=self.path)
        try:
            described = table_pb2.Manifest.FromString(self._read_exact(position + 4, length))
        except DecodeError as exc:
            raise CorruptFileError(f"undecodable file schema: {exc}", path=self.path) from exc
        return _dictionaries(lambda offset, size: pa.py_buffer(self._read_exact(offset, size)), position,
                             described.fields, path=self.path)

    def _bytes(self, tail: bytes, tail_start: int, offset: int, length: int) -> bytes:
        if offset >= tail_start:
            return tail[offset - tail_start : offset - tail_start + length]
        return self._read_exact(offset, length)

    def _read_exact(self, offset: int, length: int) -> bytes:
        data = self._file.read_at(length, offset)
        if len(data) != length:
            raise CorruptFileError(f"short read of {length} bytes at {offset}", path=self.path)
        return bytes(data)

    def _read_at(self, ctx: DecodeContext):
        limit = self._data_end

        def read_at(offset: int, length: int) -> pa.Buffer:
            if offset < 0 or length < 0 or offset + length > limit:
                raise ctx.corrupt(f"read of {length} bytes at {offset} leaves the data region (ends at {limit})")
            if self._mapped is not None:
                return self._mapped.slice(offset, length)
            rounds: _Rounds | None = getattr(self._rounds, "current", None)
            if rounds is not None:
                return rounds.read(offset, length)
            return pa.py_buffer(self._read_exact(offset, length))

        return read_at

    def _page(self, field_id: int, batch: int, ctx: DecodeContext) -> tuple[int, int]:
        row = field_id - self._first_field
        if not 0 <= row < self._pages.shape[0]:
            raise ctx.corrupt(f"the page table has no pages for field id {field_id}")
        position, length = self._pages[row, batch]
        return int(position), int(length)

    # -- plumbing --------------------------------------------------------------------------------
    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> LegacyFileReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- reads -----------------------------------------------------------------------------------
    def read_range(self, plans: list[ColumnPlan], start: int, stop: int) -> list[pa.Array]:
        """Rows ``[start, stop)`` of each planned field."""
        if not 0 <= start <= stop <= self.num_rows:
            raise InvalidInputError(f"row range [{start}, {stop}) is outside the file's {self.num_rows} rows")
        windows: list[tuple[int, int, int]] = []  # (batch, lo, hi)
        first = int(np.searchsorted(self.batch_offsets, start, side="right")) - 1
        for batch in range(max(first, 0), self.num_batches):
            b_start, b_stop = int(self.batch_offsets[batch]), int(self.batch_offsets[batch + 1])
            if b_start >= stop:
                break
            lo, hi = max(start, b_start) - b_start, min(stop, b_stop) - b_start
            if hi > lo:
                windows.append((batch, lo, hi))
        pieces = self._batched([functools.partial(self._read_field, plan, batch, lo, hi, plan.field.name)
                                for batch, lo, hi in windows for plan in plans])
        return [_concat(pieces[i::len(plans)], plan.field.type) for i, plan in enumerate(plans)]

    def take(self, plans: list[ColumnPlan], indices) -> list[pa.Array]:
        """The rows at ``indices`` (any order, duplicates allowed) of each planned field."""
        idx = np.asarray(indices)
        if idx.ndim != 1:
            raise InvalidInputError("take indices must be one-dimensional")
        if idx.size and (idx.dtype.kind not in "iu" or int(idx.min()) < 0 or int(idx.max()) >= self.num_rows):
            raise InvalidInputError(f"take indices must be integers in [0, {self.num_rows})")
        rows, inverse = np.unique(idx.astype(np.int64, copy=False), return_inverse=True)
        batch_of = np.searchsorted(self.batch_offsets, rows, side="right") - 1
        bounds = np.flatnonzero(np.diff(batch_of)) + 1
        windows: list[tuple[int, int, int, pa.Array]] = []  # (batch, lo, hi, rows of the window)
        for group in np.split(rows, bounds) if len(rows) else []:
            batch = int(np.searchsorted(self.batch_offsets, group[0], side="right")) - 1
            local = group - self.batch_offsets[batch]
            lo, hi = int(local[0]), int(local[-1]) + 1
            windows.append((batch, lo, hi, pa.array(local - lo)))
        pieces = self._batched([functools.partial(self._take_field, plan, batch, lo, hi, selection)
                                for batch, lo, hi, selection in windows for plan in plans])
        take_back = pa.array(inverse.ravel())
        return [_concat(pieces[i::len(plans)], plan.field.type).take(take_back) for i, plan in enumerate(plans)]

    def _take_field(self, plan: ColumnPlan, batch: int, lo: int, hi: int, selection: pa.Array) -> pa.Array:
        return self._read_field(plan, batch, lo, hi, plan.field.name).take(selection)

    def _batched(self, reads: list[Callable[[], T]]) -> list[T]:
        """The results of ``reads`` (pieces that read through ``_read_at``). On an object store
        their reads go out in rounds of coalesced parallel requests (see the module docstring)."""
        if self._mapped is not None or len(reads) < 2:
            return [read() for read in reads]
        rounds = _Rounds()
        results: dict[int, T] = {}
        pending = list(range(len(reads)))
        self._rounds.current = rounds
        try:
            while pending:
                rounds.wanted.clear()
                waiting = []
                for index in pending:
                    try:
                        results[index] = reads[index]()
                    except _NotFetched:
                        waiting.append(index)
                if waiting:
                    wanted = sorted(rounds.wanted)
                    self._rounds.current = None  # the fetch itself reads for real
                    try:
                        fetched = self.store.read_ranges(self.path, wanted, file=self._file)
                    except CorruptFileError as exc:
                        raise CorruptFileError(exc.reason, path=self.path) from exc
                    finally:
                        self._rounds.current = rounds
                    rounds.fetched.update(zip(wanted, fetched))
                pending = waiting
        finally:
            self._rounds.current = None
        return [results[index] for index in range(len(reads))]

    def _read_field(self, plan: ColumnPlan, batch: int, lo: int, hi: int, name: str) -> pa.Array:
        ctx = DecodeContext(self.path, name)
        try:
            return self._decode(plan, batch, lo, hi, name, ctx)
        except LanceError:
            raise
        except (pa.ArrowException, ValueError, IndexError, OverflowError) as exc:
            raise ctx.corrupt(f"page of batch {batch} cannot be decoded: {exc}") from exc

    def _decode(self, plan: ColumnPlan, batch: int, lo: int, hi: int, name: str, ctx: DecodeContext) -> pa.Array:
        data_type = plan.field.type
        n = hi - lo
        if pa.types.is_struct(data_type):
            if len(plan.children) != data_type.num_fields:
                raise InvalidInputError(f"plan for {name!r} has the wrong number of children")
            children = [self._read_field(c, batch, lo, hi, f"{name}.{c.field.name}") for c in plan.children]
            return pa.StructArray.from_buffers(data_type, n, [None], children=children)
        read_at = self._read_at(ctx)
        position, length = self._page(plan.column, batch, ctx)
        if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
            if len(plan.children) != 1:
                raise InvalidInputError(f"plan for {name!r} has the wrong number of children")
            large = pa.types.is_large_list(data_type)
            # the offsets page holds n + 1 entries, relative to the batch's item page
            ends = read_offsets(read_at, np.dtype("<i8" if large else "<i4"), position, length, lo, hi, ctx)
            child = plan.children[0]
            items = self._read_field(child, batch, int(ends[0]), int(ends[-1]), f"{name}.{child.field.name}")
            offsets = ends - ends[0]
            buf = pa.py_buffer(offsets if large else offsets.astype(np.int32))
            return pa.Array.from_buffers(data_type, n, [None, buf], children=[items])
        if pa.types.is_dictionary(data_type):
            values = self.dictionaries.get(plan.column)
            if values is None:
                raise CorruptFileError("dictionary field has no dictionary values in the manifest",
                                       path=self.path, column=name)
            keys = read_fixed(read_at, data_type.index_type, position, length, lo, hi, ctx)
            key_values = keys.to_numpy(zero_copy_only=False)
            if len(key_values) and (int(key_values.min()) < 0 or int(key_values.max()) >= len(values)):
                raise ctx.corrupt(f"dictionary keys lie outside the {len(values)} dictionary values")
            return pa.DictionaryArray.from_arrays(keys, values)
        if _is_binary(data_type):
            return read_binary(read_at, data_type, plan.field.nullable, position, length, lo, hi, ctx)
        if pa.types.is_null(data_type):
            if hi > length:
                raise ctx.corrupt(f"values [{lo}, {hi}) are needed from a page of {length} values")
            return pa.nulls(n)
        if fixed_stride_bits(data_type) is not None:
            return read_fixed(read_at, data_type, position, length, lo, hi, ctx)
        raise UnsupportedFeatureError(f"legacy files cannot hold {data_type} values", path=self.path, column=name)


def manifest_dictionaries(store: ObjectStore, manifest_path: str, fields) -> dict[int, pa.Array]:
    """Dictionary values of a table's dictionary fields (read only if some field has them)."""
    if not any(f.HasField("dictionary") and f.logical_type.startswith("dict:") for f in fields):
        return {}
    return load_dictionaries(store.read_bytes(manifest_path), fields, path=manifest_path)


def load_dictionaries(manifest_bytes: bytes, fields, *, path: str) -> dict[int, pa.Array]:
    """Values of every dictionary field, stored in the manifest file by legacy writers.

    ``fields`` are the manifest's ``lance.file.Field`` protos; ``Field.dictionary`` gives the
    offset (of the values' plain page, or of a var-binary page's positions) and value count.
    """
    buffer = pa.py_buffer(manifest_bytes)
    return _dictionaries(buffer.slice, len(manifest_bytes), fields, path=path)


def _dictionaries(read: Callable[[int, int], pa.Buffer], limit: int, fields, *, path: str) -> dict[int, pa.Array]:
    """Dictionary values of ``fields`` whose bytes ``read(offset, length)`` returns, below ``limit``."""

    ctx = DecodeContext(path, None)
    out: dict[int, pa.Array] = {}
    by_id = {f.id: f for f in fields}
    schema = LanceSchema.from_protos(list(fields), {})
    for lance_field in _walk(schema.fields):
        data_type = lance_field.to_arrow().type
        if not pa.types.is_dictionary(data_type) or not by_id[lance_field.id].HasField("dictionary"):
            continue
        info = by_id[lance_field.id].dictionary
        field_ctx = DecodeContext(path, lance_field.name)
        value_type = data_type.value_type

        def read_at(offset: int, length: int, _ctx=field_ctx) -> pa.Buffer:
            if offset < 0 or length < 0 or offset + length > limit:
                raise _ctx.corrupt(f"dictionary read of {length} bytes at {offset} leaves the manifest")
            return read(offset, length)

        count, offset = int(info.length), int(info.offset)
        if _is_binary(value_type):
            # official Lance reads dictionary values as nullable: empty values are null
            values = read_binary(read_at, value_type, True, offset, count, 0, count, field_ctx)
        elif pa.types.is_integer(value_type):
            values = read_fixed(read_at, value_type, offset, count, 0, count, field_ctx)
        else:
            raise UnsupportedFeatureError(f"dictionary values of type {value_type} are not supported",
                                          path=ctx.path, column=lance_field.name)
        out[lance_field.id] = values
    return out


def _walk(fields):
    for f in fields:
        yield f
        yield from _walk(f.children)


def _concat(pieces: list[pa.Array], data_type: pa.DataType) -> pa.Array:
    if not pieces:
        return pa.array([], type=data_type)
    if len(pieces) == 1:
        return pieces[0]
    if pa.types.is_dictionary(data_type):
        return pa.chunked_array(pieces, data_type).combine_chunks()
    return pa.concat_arrays(pieces)
