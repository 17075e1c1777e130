"""Change-feed materialization: turning planned row positions into Arrow batches.

Rows are fetched with :meth:`LanceFragment.take_physical` (so every file version the fragment
reader supports works here too), a chunk of at most ``batch_size`` positions at a time, so
memory is bounded by the batch size whatever the size of the change. Columns are those of one
reference schema (the range's end version); an older version's rows are projected onto it by
field id (renamed columns follow), then by name, and columns a version lacks read as nulls.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from lance_format.dataset.changes.lineage_lookup import CREATED_AT, LAST_UPDATED_AT, row_ids_at, versions_at
from lance_format.dataset.changes.plan import RowRefs, VersionChanges
from lance_format.dataset.fragment import ROW_CREATED_AT, ROW_ID, ROW_LAST_UPDATED_AT
from lance_format.schema import LanceField, LanceSchema
from lance_format.schema.blob import read_arrow_field

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset
    from lance_format.dataset.fragment import LanceFragment

LINEAGE_COLUMNS = [ROW_ID, ROW_CREATED_AT, ROW_LAST_UPDATED_AT]
CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")

INSERT = "insert"
DELETE = "delete"
UPDATE_PREIMAGE = "update_preimage"
UPDATE_POSTIMAGE = "update_postimage"


def lineage_schema(fields: list[LanceField], metadata: dict | None = None) -> pa.Schema:
    """Output columns followed by ``_rowid`` and the two row-version columns (pylance's delta),
    with the table's schema metadata, as pylance returns it."""
    return pa.schema(
        [read_arrow_field(f) for f in fields] + [pa.field(name, pa.uint64()) for name in LINEAGE_COLUMNS],
        metadata=metadata,
    )


def change_schema(fields: list[LanceField], metadata: dict | None = None) -> pa.Schema:
    return lineage_schema(fields, metadata).append(pa.field(CHANGE_TYPE, pa.string(), nullable=False)).append(
        pa.field(COMMIT_VERSION, pa.uint64(), nullable=False)
    ).append(pa.field(COMMIT_TIMESTAMP, TIMESTAMP_TYPE, nullable=False))


def commit_timestamp(dataset: LanceDataset) -> pa.Scalar:
    """When ``dataset``'s version was committed (its manifest timestamp), in UTC microseconds."""
    stamp = dataset.manifest.timestamp
    return pa.scalar(stamp.seconds * 1_000_000 + stamp.nanos // 1000, TIMESTAMP_TYPE)


class Projection:
    """Reads a fixed list of output columns from the fragments of one version."""

    def __init__(self, out_fields: list[LanceField], schema: LanceSchema) -> None:
        by_id = {f.id: f for f in schema.fields}
        by_name = {f.name: f for f in schema.fields}
        self._out = out_fields
        read: list[LanceField] = []
        self._source: list[int | None] = []
        for out in out_fields:
            wanted = out.data_type
            src = by_id.get(out.id)
            if src is None or src.data_type != wanted:
                # Field ids restart on overwrite, so a same-id field of another type is not ours.
                src = by_name.get(out.name)
                if src is not None and src.data_type != wanted:
                    src = None
            if src is None:
                self._source.append(None)
                continue
            if src not in read:
                read.append(src)
            self._source.append(read.index(src))
        self._read_schema = LanceSchema(read, schema.metadata)

    def take(self, fragment: LanceFragment, offsets: np.ndarray) -> list[pa.Array]:
        """Output columns and lineage columns of the rows at sorted physical ``offsets``."""
        batch = fragment.take_physical(self._read_schema, [], offsets.astype(np.uint64, copy=False))
        n = len(offsets)
        arrays = [
            batch.column(src) if src is not None else pa.nulls(n, out.data_type)
            for out, src in zip(self._out, self._source)
        ]
        # Lineage from the sequences' touched segments only (take_physical would decode them whole).
        if fragment.proto.WhichOneof("row_id_sequence") is None:
            row_ids = (np.uint64(fragment.fragment_id) << np.uint64(32)) | offsets.astype(np.uint64)  # = _rowaddr
        else:
            row_ids = row_ids_at(fragment, offsets)
        arrays.append(pa.array(row_ids, pa.uint64()))
        arrays.append(pa.array(versions_at(fragment, CREATED_AT, offsets), pa.uint64()))
        arrays.append(pa.array(versions_at(fragment, LAST_UPDATED_AT, offsets), pa.uint64()))
        return arrays


def take_rows(dataset: LanceDataset, projection: Projection, rows: RowRefs) -> list[pa.Array]:
    """Columns of ``rows`` (any order, any fragments of ``dataset``), in the order given."""
    order = np.lexsort((rows.offset, rows.frag))
    frag, offset = rows.frag[order], rows.offset[order]
    fragments = dataset.get_fragments()
    pieces: list[list[pa.Array]] = []
    bounds = np.flatnonzero(np.diff(frag)) + 1
    for group in np.split(np.arange(len(frag)), bounds) if len(frag) else []:
        pieces.append(projection.take(fragments[int(frag[group[0]])], offset[group]))
    if len(pieces) == 1:
        columns = pieces[0]
    else:
        columns = [pa.concat_arrays([p[k] for p in pieces]) for k in range(len(pieces[0]))]
    if np.any(order != np.arange(len(order))):
        inverse = pa.array(np.argsort(order))
        columns = [c.take(inverse) for c in columns]
    return columns


def _chunks(total: int, batch_size: int) -> Iterator[slice]:
    for start in range(0, total, batch_size):
        yield slice(start, min(start + batch_size, total))


def _whole_fragment_rows(index: int, fragment: LanceFragment, batch_size: int) -> Iterator[RowRefs]:
    live = fragment.live_offsets().astype(np.int64)
    for part in _chunks(live.size, batch_size):
        offsets = live[part]
        empty = np.zeros(offsets.size, np.uint64)
        yield RowRefs(np.full(offsets.size, index, np.int64), offsets, empty, empty)


class ChangeWriter:
    """Builds the change batches of one version (``old`` -> ``new``)."""

    def __init__(
        self,
        schema: pa.Schema,
        out_fields: list[LanceField],
        old: LanceDataset | None,
        new: LanceDataset,
        batch_size: int,
    ) -> None:
        self.schema = schema
        self._old = old
        self._new = new
        self._old_projection = Projection(out_fields, old.lance_schema) if old is not None else None
        self._new_projection = Projection(out_fields, new.lance_schema)
        self._batch_size = batch_size
        self._version = pa.scalar(new.version, pa.uint64())
        self._timestamp = commit_timestamp(new)

    def _batch(self, columns: list[pa.Array], change_type: str) -> pa.RecordBatch:
        n = len(columns[0]) if columns else 0
        extra = [
            pa.repeat(pa.scalar(change_type, pa.string()), n),
            pa.repeat(self._version, n),
            pa.repeat(self._timestamp, n),
        ]
        return pa.RecordBatch.from_arrays(columns + extra, schema=self.schema)

    def _rows(self, rows: RowRefs, old_side: bool, change_type: str) -> Iterator[pa.RecordBatch]:
        dataset, projection = (self._old, self._old_projection) if old_side else (self._new, self._new_projection)
        for part in _chunks(len(rows), self._batch_size):
            chunk = rows.select(part)
            yield self._batch(take_rows(dataset, projection, chunk), change_type)  # type: ignore[arg-type]

    def batches(self, changes: VersionChanges) -> Iterator[pa.RecordBatch]:
        """Deletes, then update pre/post-image pairs (same row order), then inserts."""
        if self._old is not None:
            old_fragments = self._old.get_fragments()
            for index in changes.deleted_whole:
                for rows in _whole_fragment_rows(index, old_fragments[index], self._batch_size):
                    yield from self._rows(rows, True, DELETE)
        yield from self._rows(changes.deleted, True, DELETE)
        for part in _chunks(len(changes.updated_pre), self._batch_size):
            yield from self._rows(changes.updated_pre.select(part), True, UPDATE_PREIMAGE)
            yield from self._rows(changes.updated_post.select(part), False, UPDATE_POSTIMAGE)
        new_fragments = self._new.get_fragments()
        for index in changes.inserted_whole:
            for rows in _whole_fragment_rows(index, new_fragments[index], self._batch_size):
                yield from self._rows(rows, False, INSERT)
        yield from self._rows(changes.inserted, False, INSERT)


def lineage_batches(
    dataset: LanceDataset, fragment: LanceFragment, offsets: np.ndarray, batch_size: int
) -> Iterator[pa.RecordBatch]:
    """Rows of ``fragment`` at sorted live ``offsets`` with every column plus lineage columns."""
    fields = dataset.lance_schema.fields
    projection = Projection(fields, dataset.lance_schema)
    schema = lineage_schema(fields, dataset.schema.metadata)
    for part in _chunks(offsets.size, batch_size):
        yield pa.RecordBatch.from_arrays(projection.take(fragment, offsets[part]), schema=schema)
