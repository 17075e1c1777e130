"""Indices through a compaction: which fragments may be rewritten, and the remapped segments.

pylance 14.0.2's rules (checked on its tables): without stable row ids, a BTREE, BITMAP,
LABEL_LIST or NGRAM segment covering rewritten fragments is rewritten as a new segment (new
uuid, same name, fields, ``dataset_version``, details and ``index_version``) whose entries
hold the rows' new addresses, listed in ``Rewrite.rewritten_indices``; ZONEMAP and BLOOMFILTER
segments stay as they are. With stable row ids, only segments whose entries are row addresses
(BTREE of ``index_version`` 1) are rewritten; the others follow their rows, or (ZONEMAP,
BLOOMFILTER) lose the rewritten fragments (:func:`lance_format.table.index_meta.apply_rewrite`).

A remapped segment is trained anew from the column's values in the fragments it covers, with
the rewritten rows keyed by their new addresses: the same entries pylance's remap keeps (rows
deleted since the build are left out, which queries exclude anyway). Fragments covered by a
segment this engine cannot remap (a type it does not know, a segment without a fragment
bitmap) are never compacted.
"""

from __future__ import annotations

import uuid as uuid_mod
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from lance_format.dataset.index_describe import catalog_of, field_paths
from lance_format.dataset.index_optimize import training_params
from lance_format.errors import UnsupportedFeatureError
from lance_format.index.metadata import fragment_ids_of, user_segments
from lance_format.index.scalar.base import VALUE_COLUMN, by_type_url
from lance_format.index.store import IndexStore, index_file_version
from lance_format.proto import table_pb2, transaction_pb2
from lance_format.table.index_meta import holds_row_addresses, kept_through_rewrite

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset

# the types whose segments this engine rewrites with new row addresses
_REMAPPED_TYPES = ("BTREE", "BITMAP", "LABEL_LIST", "NGRAM", "INVERTED")

Groups = list[tuple[list[table_pb2.DataFragment], list[table_pb2.DataFragment]]]


def _needs_rewrite(meta: table_pb2.IndexMetadata, stable_row_ids: bool) -> bool:
    """Whether a segment covering rewritten fragments must be rewritten with new addresses."""
    if kept_through_rewrite(meta):  # ZONEMAP / BLOOMFILTER: kept, or they lose the fragments
        return False
    # with stable row ids only entries that are row addresses move; row ids stay valid
    return holds_row_addresses(meta) if stable_row_ids else True


def _handled(meta: table_pb2.IndexMetadata, stable_row_ids: bool) -> bool:
    """Whether a compaction can rewrite fragments this segment covers."""
    if fragment_ids_of(meta) is None:
        return False
    kind = by_type_url(meta.index_details.type_url)
    if kind is None:
        return False
    return not _needs_rewrite(meta, stable_row_ids) or kind.name in _REMAPPED_TYPES


def blocked_fragments(ds: LanceDataset) -> BitMap:
    """Fragments no compaction by this engine may rewrite (covered by a segment it cannot remap)."""
    stable = ds.has_stable_row_ids
    blocked = BitMap()
    for segment in user_segments(ds.manifest_file.index_section):
        if not _handled(segment.meta, stable):
            bitmap = fragment_ids_of(segment.meta)
            if bitmap is None:  # covers every fragment of its version
                return BitMap(f.id for f in ds.manifest.fragments)
            blocked |= bitmap
    return blocked


def indexed_fragments(ds: LanceDataset) -> BitMap:
    """Every fragment some user index covers."""
    covered = BitMap()
    for segment in user_segments(ds.manifest_file.index_section):
        covered |= segment.fragment_ids
    return covered


def _column_batches(ds: LanceDataset, path: str, fragment_ids: list[int]) -> Iterator[pa.RecordBatch]:
    fragments = [f for f in ds.get_fragments() if f.fragment_id in set(fragment_ids)]
    if not fragments:
        return iter(())
    return iter(ds.scanner(columns=[path], fragments=fragments, with_row_address=True,
                           scan_in_order=True).to_batches())


def _training_batches(ds: LanceDataset, path: str, key: str, kept: list[int],
                      groups: Groups) -> Iterator[pa.RecordBatch]:
    """``(value, key)`` batches in ascending new-address order: the covered fragments a
    compaction keeps, then each rewritten group with its live rows numbered into its new
    fragments (the order the compaction wrote them in)."""
    for batch in _column_batches(ds, path, kept):
        yield pa.RecordBatch.from_arrays([batch.column(0), batch.column("_rowaddr")], names=[VALUE_COLUMN, key])
    for old, new in groups:
        sizes = np.array([f.physical_rows for f in new], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        ids = np.array([f.id for f in new], dtype=np.uint64)
        position = 0
        for batch in _column_batches(ds, path, [f.id for f in old]):
            live = np.arange(position, position + batch.num_rows, dtype=np.int64)
            position += batch.num_rows
            which = np.searchsorted(starts, live, side="right") - 1
            addresses = (ids[which] << np.uint64(32)) | (live - starts[which]).astype(np.uint64)
            yield pa.RecordBatch.from_arrays([batch.column(0), pa.array(addresses, pa.uint64())],
                                             names=[VALUE_COLUMN, key])


def remap_indices(ds: LanceDataset, groups: Groups, written: list[str]
                  ) -> list[transaction_pb2.Transaction.Rewrite.RewrittenIndex]:
    """Rewrite the segments covering ``groups`` (new fragments' ids assigned) with the moved
    rows' new addresses; their files' paths are appended to ``written`` as they are written."""
    stable = ds.has_stable_row_ids
    rewritten_ids = BitMap(f.id for old, _ in groups for f in old)
    paths = field_paths(ds)
    out = []
    for segment in user_segments(ds.manifest_file.index_section):
        meta = segment.meta
        bitmap = fragment_ids_of(meta)
        if bitmap is None or not (bitmap & rewritten_ids) or not _needs_rewrite(meta, stable):
            continue
        kind = by_type_url(meta.index_details.type_url)
        if kind is None or kind.name not in _REMAPPED_TYPES:
            raise UnsupportedFeatureError(f"index {meta.name} ({meta.index_details.type_url}) covers fragments "
                                          "a compaction rewrites and this engine cannot remap it", table=ds.uri)
        fields = {f.id: f for f in ds.lance_schema.walk()}
        field = fields[meta.fields[0]]
        touched = [(old, new) for old, new in groups if any(f.id in bitmap for f in old)]
        kept = list(bitmap - rewritten_ids)
        params = training_params(kind, segment, catalog_of(ds).store(segment))
        store = IndexStore(ds.object_store, str(uuid_mod.uuid4()), index_file_version(ds.data_storage_version))
        try:
            kind.train(store, _training_batches(ds, paths[field.id], kind.row_key, kept, touched),
                       field.data_type, params)
        finally:
            written.extend(store.path(n) for n, _ in store.written_files())
        change = transaction_pb2.Transaction.Rewrite.RewrittenIndex()
        change.old_id.CopyFrom(meta.uuid)
        change.new_id.uuid = uuid_mod.UUID(store.uuid).bytes
        change.new_index_details.CopyFrom(meta.index_details)
        change.new_index_version = meta.index_version
        for name, size in store.written_files():
            change.new_index_files.add(path=name, size_bytes=int(size))
        out.append(change)
    return out


__all__ = ["blocked_fragments", "indexed_fragments", "remap_indices"]
