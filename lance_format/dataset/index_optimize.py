"""``optimize.optimize_indices``: bring the fragments appended since a build into the indices.

pylance 14.0.2's rules, per named index (checked on its tables): the *unindexed* fragments are the
live ones no segment of the index covers. With ``num_indices_to_merge`` left unset (or 0) and
nothing unindexed, the index is left alone. Otherwise the last ``num_indices_to_merge`` segments
(default 1; 0 builds a new delta segment over the unindexed fragments only; with stable row ids
an older segment covering a fragment with deletions is merged too) are replaced by one segment
covering their live fragments plus the unindexed ones, keeping the index's name, fields and
details; ``retrain=True`` rebuilds the whole index as one segment. A segment merged from one old segment (or
several BTREE/BITMAP/NGRAM ones) still covering live fragments keeps the oldest ``dataset_version``
of those, any other gets the table's version. One ``CreateIndex`` commits every index's new segment and removed segments; new
segments are listed in index-name order.

Segments are built anew from the column's values in the fragments they cover (the same entries
pylance's merge keeps; rows deleted since are left out, which queries exclude anyway).
"""

from __future__ import annotations

import json
import uuid as uuid_mod
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyroaring import BitMap

from lance_format.dataset.index_describe import catalog_of, field_paths
from lance_format.dataset.index_vector import optimize_vector_segment
from lance_format.dataset.mutations.base import Prepared, run_mutation, transaction_for
from lance_format.errors import IndexNotFoundError, InvalidInputError, UnsupportedFeatureError
from lance_format.index.metadata import Segment, fragment_ids_of, new_index_metadata
from lance_format.index.scalar.base import VALUE_COLUMN, ScalarIndexType, by_type_url
from lance_format.index.scalar.details import decode_fields
from lance_format.index.store import IndexStore, index_file_version
from lance_format.index.vector.params import VECTOR_TYPE_URL

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset


def training_params(kind: type[ScalarIndexType], segment: Segment, store: IndexStore) -> dict[str, Any]:
    """The build parameters a segment was trained with, so a rebuilt one is trained alike."""
    if kind.name == "ZONEMAP":
        rows = decode_fields(bytes(segment.meta.index_details.value)).get(1)
        return {"rows_per_zone": int(rows)} if rows else {}
    params: dict[str, Any] = {}
    for file in segment.meta.files:
        try:
            meta = store.schema_metadata(file.path)
        except Exception:  # a parameter we cannot read back falls back to the default
            continue
        if kind.name == "BTREE" and "batch_size" in meta:
            params["batch_size"] = int(meta["batch_size"])
        if kind.name == "INVERTED" and "params" in meta:
            params.update(json.loads(meta["params"]))
        if kind.name == "BLOOMFILTER" and "bloomfilter_item" in meta:
            params["number_of_items"] = int(meta["bloomfilter_item"])
            params["probability"] = float(meta.get("bloomfilter_probability", "0.00057"))
    return params


def _batches(ds: LanceDataset, path: str, key: str, fragment_ids: BitMap) -> Iterable[pa.RecordBatch]:
    fragments = [f for f in ds.get_fragments() if f.fragment_id in fragment_ids]
    if not fragments:
        return
    scanner = ds.scanner(columns=[path], fragments=fragments, with_row_id=key == "_rowid",
                         with_row_address=key == "_rowaddr", scan_in_order=True)
    for batch in scanner.to_batches():
        yield pa.RecordBatch.from_arrays([batch.column(0), batch.column(key)], names=[VALUE_COLUMN, key])


def _selected(ds: LanceDataset, segments: list[Segment], count: int) -> list[Segment]:
    tail = segments[len(segments) - count:] if count else []
    if count == 0 or not ds.has_stable_row_ids:
        return tail
    deleted = BitMap(f.id for f in ds.manifest.fragments if f.HasField("deletion_file"))
    return [s for i, s in enumerate(segments) if s in tail or s.fragment_ids & deleted]


def _work(ds: LanceDataset, segments: list[Segment], num_to_merge: int | None, retrain: bool,
          live: BitMap) -> tuple[BitMap, list[Segment]] | None:
    """The unindexed fragments and the segments to replace, or None when the index stays."""
    covered = BitMap()
    for segment in segments:
        bitmap = fragment_ids_of(segment.meta)
        covered |= bitmap if bitmap is not None else live
    unindexed = live - covered
    if not retrain and not num_to_merge and not unindexed:
        return None
    count = len(segments) if retrain else min(1 if num_to_merge is None else int(num_to_merge), len(segments))
    selected = _selected(ds, segments, count)
    if not unindexed and len(selected) <= 1:
        return None
    return unindexed, selected


def _plan_one(ds: LanceDataset, name: str, segments: list[Segment], num_to_merge: int | None, retrain: bool,
              live: BitMap, prepared: Prepared) -> tuple[Any, list[Segment]] | None:
    work = _work(ds, segments, num_to_merge, retrain, live)
    if work is None:
        return None
    unindexed, selected = work
    if segments[-1].type_url == VECTOR_TYPE_URL:
        return _plan_vector(ds, segments, unindexed, retrain, live, prepared)
    kind = by_type_url(segments[-1].type_url)
    if kind is None:
        raise UnsupportedFeatureError(f"index {name} ({segments[-1].type_url}) cannot be optimized by this engine",
                                      table=ds.uri)
    reference = selected[0] if selected else segments[-1]
    bitmap = BitMap(unindexed)
    for segment in selected:
        bitmap |= (fragment_ids_of(segment.meta) or live) & live
    catalog = catalog_of(ds)
    params = training_params(kind, reference, catalog.store(reference))
    field_id = reference.meta.fields[0]
    data_type = {f.id: f for f in ds.lance_schema.walk()}[field_id].data_type
    store = IndexStore(ds.object_store, str(uuid_mod.uuid4()), index_file_version(ds.data_storage_version))
    try:
        kind.train(store, _batches(ds, field_paths(ds)[field_id], kind.row_key, bitmap), data_type, params)
    finally:
        prepared.written.extend(store.path(n) for n, _ in store.written_files())
    # pylance merges into the old segment(s) (keeping their oldest version) when they still cover
    # live fragments and there is one of them, or several of a type with an N:1 merge (BTREE, BITMAP,
    # NGRAM); otherwise it rebuilds over the fragments, at the table's version
    merged = bool(bitmap - unindexed) and (len(selected) == 1 or kind.name in ("BTREE", "BITMAP", "NGRAM"))
    version = min(s.meta.dataset_version for s in selected) if selected and merged else ds.version
    meta = new_index_metadata(
        index_uuid=store.uuid, name=name, field_ids=list(reference.meta.fields), dataset_version=version,
        fragment_ids=bitmap, type_url=reference.type_url, details=bytes(reference.meta.index_details.value),
        index_version=kind.version_for(ds.has_stable_row_ids), files=store.written_files())
    return meta, selected


def _plan_vector(ds: LanceDataset, segments: list[Segment], unindexed: BitMap, retrain: bool, live: BitMap,
                 prepared: Prepared) -> tuple[Any, list[Segment]] | None:
    """A vector index: a delta segment over the unindexed fragments on the index's centroids and
    quantizer (what pylance 14.0.2 adds for appended fragments), or with ``retrain`` one segment
    trained afresh over every live fragment, replacing them all."""
    fragments = BitMap(live) if retrain else BitMap(unindexed)
    if not fragments:
        return None
    reference = segments[-1]
    meta = optimize_vector_segment(ds, reference.meta, catalog_of(ds).store(reference), list(fragments),
                                   retrain=retrain, written=prepared.written)
    return meta, list(segments) if retrain else []


def optimize_indices(ds: LanceDataset, index_names: Iterable[str] | None = None,
                     num_indices_to_merge: int | None = None, retrain: bool = False) -> None:
    """Add the unindexed fragments to ``ds``'s indices (all, or ``index_names``) and commit."""
    if num_indices_to_merge is not None and (isinstance(num_indices_to_merge, bool)
                                             or int(num_indices_to_merge) < 0):
        raise InvalidInputError(f"num_indices_to_merge must be a non-negative integer, got {num_indices_to_merge!r}",
                                table=ds.uri)
    wanted = None if index_names is None else list(index_names)
    if wanted is not None:
        known = catalog_of(ds).names()
        missing = [n for n in wanted if n not in known]
        if missing:
            raise IndexNotFoundError(f"Lance index not found: name={missing[0]}", table=ds.uri, version=ds.version)

    def prepare(current: LanceDataset) -> Prepared:
        catalog = catalog_of(current)
        live = BitMap(f.id for f in current.manifest.fragments)
        prepared = Prepared(transaction_for(current, None, None), None)
        body = prepared.txn.create_index
        body.SetInParent()
        for name in sorted(catalog.names()):
            if wanted is not None and name not in wanted:
                continue
            found = catalog.get(name)
            if found is None or not found.segments:
                continue
            planned = _plan_one(current, name, list(found.segments), num_indices_to_merge, bool(retrain), live,
                                prepared)
            if planned is None:
                continue
            meta, removed = planned
            body.new_indices.add().CopyFrom(meta)
            for segment in removed:
                body.removed_indices.add().CopyFrom(segment.meta)
        return prepared

    if _has_work(ds, wanted, num_indices_to_merge, retrain):
        run_mutation(ds, prepare)


def _has_work(ds: LanceDataset, wanted: list[str] | None, num_to_merge: int | None, retrain: bool) -> bool:
    """Whether some index would change (pylance commits no version when none does)."""
    catalog = catalog_of(ds)
    live = BitMap(f.id for f in ds.manifest.fragments)
    for name in catalog.names():
        found = catalog.get(name)
        if found is None or (wanted is not None and name not in wanted) or not found.segments:
            continue
        if _work(ds, list(found.segments), num_to_merge, retrain, live) is not None:
            return True
    return False


__all__ = ["optimize_indices", "training_params"]
