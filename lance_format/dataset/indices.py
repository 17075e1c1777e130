"""The index API of ``LanceDataset``, with pylance's names, signatures and errors.

``create_scalar_index`` trains a segment of a registered scalar type
(:mod:`lance_format.index.scalar`) from a scan of the column (deleted rows left out, the row
identifier the type stores attached), writes its files under ``_indices/<uuid>/`` and commits a
``CreateIndex`` transaction (new segment; the segments of a replaced index removed).
``drop_index`` commits a ``CreateIndex`` that only removes. ``describe_indices``,
``list_indices``, ``index_statistics``, ``has_index`` and ``prewarm_index`` read the manifest.
"""

from __future__ import annotations

import uuid as uuid_mod
import warnings
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lance_format.dataset.index_describe import (
    IndexDescription,
    catalog_of,
    describe,
    field_paths,
    index_statistics,
    require_index,
)
from lance_format.dataset.index_vector import build_vector_segment, create_vector_index, is_vector_type
from lance_format.dataset.lance_operations import Index, index_from_proto, index_to_proto
from lance_format.dataset.mixin import DatasetMixin
from lance_format.dataset.mutations.base import Prepared, run_mutation, transaction_for
from lance_format.errors import (
    ArgumentTypeError,
    IndexColumnNotFoundError,
    IndexExistsError,
    IndexNotFoundError,
    InvalidInputError,
    UnsupportedFeatureError,
)
from lance_format.index.metadata import fragment_ids_of, new_index_metadata, parse_index_uuid
from lance_format.index.progress import Reporter
from lance_format.index.scalar.base import VALUE_COLUMN, ScalarIndexType, by_name, by_type_url
from lance_format.index.scalar.inverted_train import check_fts_format_version
from lance_format.index.store import IndexStore, index_file_version

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset
    from lance_format.schema import LanceField

# the scalar types pylance 14.0.2's create_scalar_index accepts (others: NotImplementedError)
PYLANCE_SCALAR_TYPES = ("BTREE", "BITMAP", "NGRAM", "ZONEMAP", "LABEL_LIST", "INVERTED", "FTS", "BLOOMFILTER",
                        "RTREE", "MINHASHLSH")
# the types pylance builds per fragment only through create_index_uncommitted
_UNCOMMITTED_ONLY = ("BTREE", "BITMAP", "NGRAM", "RTREE", "ZONEMAP", "BLOOMFILTER", "LABEL_LIST", "MINHASHLSH")
_TYPE_ERRORS = {
    "BTREE": "BTREE/BITMAP index column {c} must be int, float, bool, str, large_str, binary, large_binary, "
             "decimal, fixed-size-binary, or temporal",
    "LABEL_LIST": "LABEL_LIST index column {c} must be a list or large list",
    "NGRAM": "NGRAM index column {c} must be a string",
    "BLOOMFILTER": "Bloom filter index does not support data type: {d} (column {c}). Supported types: Int8, Int16, "
                   "Int32, Int64, UInt8, UInt16, UInt32, UInt64, Float32, Float64, Utf8, LargeUtf8, Binary, "
                   "LargeBinary, Date32, Date64, Time32, Time64, Timestamp",
}
_TYPE_ERRORS["BITMAP"] = _TYPE_ERRORS["BTREE"]
_TYPE_ERRORS["INVERTED"] = "INVERTED index column {c} must be string, large string or list of strings, or json, but got {d}"


def _resolve_column(ds: LanceDataset, column: str | list[str]) -> tuple[str, LanceField]:
    if isinstance(column, (list, tuple)):
        if len(column) != 1:
            raise UnsupportedFeatureError("Scalar indices currently only support a single column", table=ds.uri)
        column = column[0]
    paths = field_paths(ds)
    fields = {f.id: f for f in ds.lance_schema.walk()}
    exact = [i for i, p in paths.items() if p == column]
    folded = exact or [i for i, p in paths.items() if p.lower() == str(column).lower()]
    if not folded:
        raise IndexColumnNotFoundError(f"{column} not found in schema", table=ds.uri, column=str(column))
    return paths[folded[0]], fields[folded[0]]


def _index_type(ds: LanceDataset, index_type: Any) -> type[ScalarIndexType]:
    if not isinstance(index_type, str):
        raise UnsupportedFeatureError(f"index_type {index_type!r}: only scalar index type names are supported",
                                      table=ds.uri)
    name = index_type.upper()
    if name not in PYLANCE_SCALAR_TYPES:
        raise UnsupportedFeatureError(
            'Only "BTREE", "BITMAP", "NGRAM", "ZONEMAP", "LABEL_LIST", "INVERTED", "BLOOMFILTER", "RTREE" or '
            f'"MINHASHLSH" are supported for scalar columns.  Received {index_type}', table=ds.uri)
    found = by_name(name)
    if found is None:
        raise UnsupportedFeatureError(f"building {name} indices is not supported by this engine yet", table=ds.uri)
    return found


def _training_batches(ds: LanceDataset, column: str, index_type: type[ScalarIndexType],
                      fragment_ids: list[int] | None) -> Iterator[pa.RecordBatch]:
    """``(value, row key)`` batches of the column, in row-address order, deleted rows left out."""
    key = index_type.row_key
    fragments = ds.get_fragments()
    if fragment_ids is not None:
        wanted = set(fragment_ids)
        fragments = [f for f in fragments if f.fragment_id in wanted]
    scanner = ds.scanner(columns=[column], fragments=fragments, with_row_id=key == "_rowid",
                         with_row_address=key == "_rowaddr", scan_in_order=True)
    for batch in scanner.to_batches():
        yield pa.RecordBatch.from_arrays([batch.column(0), batch.column(key)], names=[VALUE_COLUMN, key])


def _free_name(taken: Iterable[str], base: str) -> str:
    names = set(taken)
    n = 2
    while f"{base}_{n}" in names:
        n += 1
    return f"{base}_{n}"


def check_index_request(ds: LanceDataset, column: str | list[str], index_type: Any
                        ) -> tuple[str, LanceField, type[ScalarIndexType]]:
    """The column's path and field and the index type, or the typed error ``create_scalar_index``
    raises (for callers that plan a build elsewhere, e.g. on Spark executors)."""
    kind = _index_type(ds, index_type)
    path, lance_field = _resolve_column(ds, column)
    if not kind.supports(lance_field.data_type):
        message = _TYPE_ERRORS.get(kind.name, "{t} index column {c} has unsupported type {d}")
        raise ArgumentTypeError(message.format(c=path, t=kind.name, d=lance_field.data_type), table=ds.uri,
                                column=path)
    return path, lance_field, kind


def build_segment(ds: LanceDataset, path: str, lance_field: LanceField, kind: type[ScalarIndexType],
                  name: str, *, fragment_ids: list[int] | None, segment_uuid: str | None,
                  params: dict[str, Any], train: bool, written: list[str]) -> Any:
    """Train one segment of ``kind`` over ``fragment_ids`` (all when None) of this version, write its
    files under ``_indices/<uuid>/`` (their paths appended to ``written``, for cleanup on failure)
    and return its ``IndexMetadata`` message, uncommitted."""
    store = IndexStore(ds.object_store, segment_uuid or str(uuid_mod.uuid4()),
                       index_file_version(ds.data_storage_version))
    covered: list[int] = []
    if train:
        wanted = None if fragment_ids is None else set(fragment_ids)
        covered = [f.id for f in ds.manifest.fragments if wanted is None or f.id in wanted]
    batches = _training_batches(ds, path, kind, fragment_ids) if train else iter(())
    try:
        kind.train(store, batches, lance_field.data_type, params)
    finally:
        written.extend(store.path(n) for n, _ in store.written_files())
    return new_index_metadata(
        index_uuid=store.uuid, name=name, field_ids=[lance_field.id], dataset_version=ds.version,
        fragment_ids=covered, type_url=kind.type_url, details=kind.details(params),
        index_version=kind.version_for(ds.has_stable_row_ids), files=store.written_files())


def _unpack_config(index_type: Any, params: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """An ``IndexConfig`` (pylance's ``lance.indices``) as a type name and its parameters."""
    if hasattr(index_type, "index_type") and hasattr(index_type, "parameters"):
        return index_type.index_type, {**dict(index_type.parameters), **params}
    return index_type, params


def create_scalar_index(ds: LanceDataset, column: str | list[str], index_type: Any, name: str | None,
                        *, replace: bool, train: bool, fragment_ids: list[int] | None,
                        index_uuid: str | None, params: dict[str, Any]) -> None:
    index_type, params = _unpack_config(index_type, params)
    kind = _index_type(ds, index_type)
    path, lance_field = _resolve_column(ds, column)
    data_type = lance_field.data_type
    if not kind.supports(data_type):
        message = _TYPE_ERRORS.get(kind.name, "{t} index column {c} has unsupported type {d}")
        raise ArgumentTypeError(message.format(c=path, t=kind.name, d=data_type), table=ds.uri, column=path)
    if fragment_ids is not None and kind.name in _UNCOMMITTED_ONLY:
        raise InvalidInputError(f"{kind.name} distributed indexing uses create_index_uncommitted(..., "
                                f'index_type="{kind.name}", fragment_ids=...)', table=ds.uri)
    kind.check_params(params)
    if fragment_ids is not None and kind.name == "INVERTED":
        from lance_format.dataset.fts_staging import stage

        stage(ds, path, list(fragment_ids), index_uuid, params)  # pylance: staged, committed later
        return
    defaulted = name is None
    chosen = name if name is not None else f"{path}_idx"
    segment_uuid = parse_index_uuid(index_uuid) if index_uuid is not None else None

    def prepare(current: LanceDataset) -> Prepared:
        nonlocal chosen
        catalog = catalog_of(current)
        existing = catalog.get(chosen)
        removed = []
        if existing is not None:
            if existing.field_ids != [lance_field.id]:
                raise IndexExistsError(f"Index name '{chosen}' already exists with different fields, please "
                                       "specify a different name")
            if replace:
                removed = [s.meta for s in existing.segments]
            elif defaulted and existing.index_type is not kind:
                chosen = _free_name(catalog.names(), chosen)
            else:
                raise IndexExistsError(f"Index name '{chosen}' already exists, please specify a different name "
                                       "or use replace=True")
        prepared = Prepared(transaction_for(current, None, None), None)
        meta = build_segment(current, path, lance_field, kind, chosen, fragment_ids=fragment_ids,
                             segment_uuid=segment_uuid, params=params, train=train, written=prepared.written)
        body = prepared.txn.create_index
        body.SetInParent()
        body.new_indices.add().CopyFrom(meta)
        for old in removed:
            body.removed_indices.add().CopyFrom(old)
        return prepared

    run_mutation(ds, prepare)


def commit_segments(ds: LanceDataset, index_name: str, column: str, segments: list[Any]) -> None:
    """Commit segments built by ``create_index_uncommitted`` as the index ``index_name`` on
    ``column`` (an existing index of that name replaced), in one ``CreateIndex`` transaction."""

    path, lance_field = _resolve_column(ds, column)
    if not segments:
        raise InvalidInputError(f"commit_existing_index_segments: no segments given for index {index_name!r}",
                                table=ds.uri, column=path)
    metas = []
    for segment in segments:
        meta = index_to_proto(segment)
        if list(meta.fields) != [lance_field.id]:
            raise InvalidInputError(f"segment {segment.uuid} indexes fields {list(meta.fields)}, not column "
                                    f"{path} (field {lance_field.id})", table=ds.uri, column=path)
        meta.name = index_name
        metas.append(meta)
    covered = [f for m in metas for f in (fragment_ids_of(m) or [])]
    if len(covered) != len(set(covered)):
        raise InvalidInputError(f"segments of index {index_name!r} cover some fragments more than once",
                                table=ds.uri, column=path)

    def prepare(current: LanceDataset) -> Prepared:
        existing = catalog_of(current).get(index_name)
        prepared = Prepared(transaction_for(current, None, None), None)
        body = prepared.txn.create_index
        body.SetInParent()
        for meta in metas:
            body.new_indices.add().CopyFrom(meta)
        for old in existing.segments if existing is not None else []:
            body.removed_indices.add().CopyFrom(old.meta)
        return prepared

    run_mutation(ds, prepare)


def drop_index(ds: LanceDataset, name: str) -> None:
    catalog = catalog_of(ds)
    if catalog.get(name) is None:
        raise IndexNotFoundError(f"Lance index not found: name={name}", table=ds.uri, version=ds.version)

    def prepare(current: LanceDataset) -> Prepared:
        found = catalog_of(current).get(name)
        if found is None:
            raise IndexNotFoundError(f"Lance index not found: name={name}")
        prepared = Prepared(transaction_for(current, None, None), None)
        body = prepared.txn.create_index
        body.SetInParent()
        for segment in found.segments:
            body.removed_indices.add().CopyFrom(segment.meta)
        return prepared

    run_mutation(ds, prepare)


def _merge_inverted(ds: LanceDataset, metas: list[Any], fragments: list[int]) -> Any:
    """One INVERTED segment holding the partitions of the segments ``metas`` (not committed)."""
    from lance_format.index.scalar.inverted_train import merge_segments

    kind = by_name("INVERTED")
    assert kind is not None
    version = index_file_version(ds.data_storage_version)
    sources = []
    for meta in metas:
        root = ds.base_stores.store(meta.base_id if meta.HasField("base_id") else None)
        sources.append(IndexStore(root, str(uuid_mod.UUID(bytes=bytes(meta.uuid.uuid))), version))
    target = IndexStore(ds.object_store, str(uuid_mod.uuid4()), version)
    merge_segments(target, sources)
    return new_index_metadata(
        index_uuid=target.uuid, name=metas[0].name, field_ids=list(metas[0].fields), dataset_version=ds.version,
        fragment_ids=fragments, type_url=kind.type_url, details=bytes(metas[0].index_details.value),
        index_version=kind.version_for(ds.has_stable_row_ids), files=target.written_files())


class IndexMethods(DatasetMixin):
    """Mixed into ``LanceDataset``: building, dropping and describing indices."""

    def create_scalar_index(self, column: str | list[str], index_type: Any, name: str | None = None, *,
                            replace: bool = True, train: bool = True, fragment_ids: list[int] | None = None,
                            index_uuid: str | None = None, **kwargs: Any) -> None:
        """Build a scalar index on ``column`` and commit it (pylance's ``create_scalar_index``).

        ``index_type``: ``"BTREE"`` or ``"BITMAP"`` (plus the types registered in
        :mod:`lance_format.index.scalar.types`); ``name`` defaults to ``"{column}_idx"``;
        ``replace`` replaces an index of that name (else :class:`IndexExistsError`); ``train=False``
        commits an empty index covering no fragment. Other keyword arguments are the type's
        parameters (BTREE: ``batch_size``, rows per page, default 4096).
        """
        granularity = kwargs.pop("document_granularity", None)
        if granularity is not None and not str(getattr(granularity, "name", granularity)).upper().endswith("ROW"):
            # pylance's LIST_ELEMENT makes each list element a document: not built by this engine
            raise UnsupportedFeatureError(f"document_granularity {granularity} is not supported yet (only ROW)",
                                          table=self._as_dataset().uri, column=str(column))
        callback = kwargs.pop("progress_callback", None)
        format_version = kwargs.pop("format_version", None)
        ds = self._as_dataset()
        if not (isinstance(index_type, str) and index_type.upper() in ("INVERTED", "FTS")):
            create_scalar_index(ds, column, index_type, name, replace=replace, train=train,
                                fragment_ids=fragment_ids, index_uuid=index_uuid, params=kwargs)
            return
        check_fts_format_version(format_version, ds.uri, str(column))
        progress = Reporter(callback, final="write_metadata")
        progress.stage("load_data", [], None, "rows")
        progress.emit("start", "tokenize_docs", 0, None, "rows")
        create_scalar_index(ds, column, index_type, name, replace=replace, train=train,
                            fragment_ids=fragment_ids, index_uuid=index_uuid, params=kwargs)
        if callback is not None:
            # the build tokenizes and writes in one pass: the later stages are reported once it is done
            wanted = None if fragment_ids is None else set(fragment_ids)
            rows = sum(f.count_rows() for f in ds.get_fragments() if wanted is None or f.fragment_id in wanted)
            progress.emit("progress", "tokenize_docs", rows, None, "rows")
            progress.emit("complete", "tokenize_docs", rows, None, "rows")
            progress.stage("copy_partitions", [1], 1, "partitions")
            progress.stage("write_metadata", [1], 1, "files")

    def create_index(self, column: str | list[str], index_type: str, name: str | None = None,
                     metric: str = "L2", replace: bool = False, *args: Any, train: bool = True,
                     fragment_ids: list[int] | None = None, index_uuid: str | None = None,
                     **kwargs: Any) -> LanceDataset:
        """pylance's ``create_index``: scalar index types, and the vector types IVF_FLAT, IVF_PQ and
        IVF_SQ (:mod:`lance_format.dataset.index_vector`) with pylance's parameters
        (``num_partitions``, ``num_sub_vectors``, ``num_bits``, ``sample_rate``, ``max_iters``,
        ``ivf_centroids``, ``pq_codebook``, ``target_partition_size``, ``accelerator``...).
        Returns the dataset, now at the version that holds the index, as pylance does."""
        if is_vector_type(index_type):
            if args:
                kwargs = {**dict(zip(("num_partitions", "ivf_centroids", "pq_codebook", "num_sub_vectors",
                                      "accelerator"), args, strict=False)), **kwargs}
            metric = kwargs.pop("distance_type", metric)
            create_vector_index(self._as_dataset(), column, index_type, name, metric, replace=replace,
                                fragment_ids=fragment_ids, index_uuid=index_uuid, kwargs=kwargs)
            return self._as_dataset()
        if hasattr(index_type, "index_type") and hasattr(index_type, "parameters"):
            self.create_scalar_index(column, index_type, name, replace=replace, train=train,
                                     fragment_ids=fragment_ids, index_uuid=index_uuid)
            return self._as_dataset()
        if isinstance(index_type, str) and by_name(index_type) is not None:
            # an INVERTED index takes its analyzer parameters; other scalar types only batch_size
            wanted = kwargs if by_name(index_type) is by_name("INVERTED") else {}
            scalar = {k: v for k, v in kwargs.items() if k in ("batch_size",) or k in wanted}
            self.create_scalar_index(column, index_type, name, replace=replace, train=train,
                                     fragment_ids=fragment_ids, index_uuid=index_uuid, **scalar)
            return self._as_dataset()
        raise UnsupportedFeatureError(f"building {index_type} indices is not supported by this engine",
                                      table=self._as_dataset().uri)

    def create_index_uncommitted(self, column: str | list[str], index_type: Any,
                                 name: str | None = None, metric: str = "L2", replace: bool = False,
                                 *args: Any, train: bool = True, fragment_ids: list[int] | None = None,
                                 index_uuid: str | None = None, **kwargs: Any) -> Index:
        """Build one segment over ``fragment_ids`` without committing it and return its
        :class:`Index` metadata (pylance's distributed-build API: run on each worker, then
        :meth:`commit_existing_index_segments` once with every worker's result)."""

        ds = self._as_dataset()
        if fragment_ids is None:
            raise InvalidInputError("create_index_uncommitted requires fragment_ids for distributed index build",
                                    table=ds.uri)
        index_type, kwargs = _unpack_config(index_type, kwargs)
        if is_vector_type(index_type):  # one segment of a distributed vector build
            metric = kwargs.pop("distance_type", metric)
            segment_uuid = parse_index_uuid(index_uuid) if index_uuid is not None else None
            column_name = column[0] if isinstance(column, (list, tuple)) else column
            meta = build_vector_segment(ds, column, index_type, name or f"{column_name}_idx", metric,
                                        fragment_ids=list(fragment_ids), segment_uuid=segment_uuid, kwargs=kwargs,
                                        written=[])
            return index_from_proto(meta)
        path, lance_field, kind = check_index_request(ds, column, index_type)
        params = {k: v for k, v in kwargs.items() if k not in ("progress_callback", "format_version")}
        kind.check_params(params)
        known = {f.id for f in ds.manifest.fragments}
        missing = sorted(set(fragment_ids) - known)
        if missing:
            raise InvalidInputError(f"fragments {missing} are not in version {ds.version}", table=ds.uri)
        if index_uuid is not None and kind.name in ("BTREE", "NGRAM"):
            raise InvalidInputError(f"index_uuid is no longer accepted for {kind.display_name} distributed index "
                                    "builds; segment UUIDs are generated by Lance and returned in the index metadata",
                                    table=ds.uri)
        segment_uuid = parse_index_uuid(index_uuid) if index_uuid is not None else None
        meta = build_segment(ds, path, lance_field, kind, name or f"{path}_idx", fragment_ids=list(fragment_ids),
                             segment_uuid=segment_uuid, params=params, train=train, written=[])
        return index_from_proto(meta)

    def merge_existing_index_segments(self, segments: list[Any]) -> Index:
        """One uncommitted segment covering the fragments of ``segments`` (same column and type),
        rebuilt from this version's data. The type's default parameters are used: parameters of
        the given segments (e.g. ZONEMAP's ``rows_per_zone``) are not carried over."""

        ds = self._as_dataset()
        metas = [index_to_proto(s) for s in segments]
        if not metas:
            raise InvalidInputError("merge_existing_index_segments: no segments given", table=ds.uri)
        fields = {tuple(m.fields) for m in metas}
        urls = {m.index_details.type_url for m in metas}
        if len(fields) != 1 or len(urls) != 1:
            raise InvalidInputError(f"segments to merge must index the same column with the same type, got fields "
                                    f"{sorted(fields)} and types {sorted(urls)}", table=ds.uri)
        kind = by_type_url(urls.pop())
        if kind is None:
            raise UnsupportedFeatureError("merging segments of this index type is not supported by this engine",
                                          table=ds.uri)
        field_id = fields.pop()[0]
        paths = field_paths(ds)
        fragments = sorted({f for m in metas for f in (fragment_ids_of(m) or [])})
        lance_field = next(f for f in ds.lance_schema.walk() if f.id == field_id)
        if kind.name == "INVERTED":  # partitions are self-contained: copied, not rebuilt
            return index_from_proto(_merge_inverted(ds, metas, fragments))
        meta = build_segment(ds, paths[field_id], lance_field, kind, metas[0].name, fragment_ids=fragments,
                             segment_uuid=None, params={}, train=True, written=[])
        return index_from_proto(meta)

    def merge_index_metadata(self, index_uuid: str, index_type: str, batch_readhead: int | None = None,
                             progress_callback: Any = None) -> None:
        """Turn the partitions staged by ``create_scalar_index(..., fragment_ids=, index_uuid=)``
        into segment ``index_uuid``'s files (INVERTED only); commit it with ``LanceDataset.commit``
        and a ``CreateIndex`` operation, as with pylance."""
        from lance_format.dataset.fts_staging import merge

        merge(self._as_dataset(), index_uuid, index_type, progress_callback)

    def commit_existing_index_segments(self, index_name: str, column: str, segments: list[Any]) -> LanceDataset:
        """Commit segments from :meth:`create_index_uncommitted` as one index named ``index_name``."""
        ds = self._as_dataset()
        commit_segments(ds, index_name, column, list(segments))
        return ds

    def describe_indices(self) -> list[IndexDescription]:
        """Every index of this version, by name (pylance's ``describe_indices``)."""
        return describe(self._as_dataset())

    def list_indices(self) -> list[dict[str, Any]]:
        """One dict per index segment (deprecated in pylance, in favour of ``describe_indices``)."""
        warnings.warn("The 'list_indices' method is deprecated. It may be removed in a future version. "
                      "Use describe_indices() instead.", DeprecationWarning, stacklevel=2)
        return [{"name": d.name, "type": d.index_type, "uuid": s.uuid, "fields": d.field_names,
                 "version": s.dataset_version_at_last_update, "fragment_ids": s.fragment_ids,
                 "base_id": s.base_id}
                for d in self.describe_indices() for s in d.segments]

    def index_statistics(self, index_name: str) -> dict[str, Any]:
        """Statistics of an index (deprecated in pylance, in favour of ``stats.index_stats``)."""
        warnings.warn("LanceDataset.index_statistics() is deprecated, use LanceDataset.stats.index_stats() "
                      "instead", DeprecationWarning, stacklevel=2)
        return index_statistics(self._as_dataset(), index_name)

    @property
    def has_index(self) -> bool:
        """Whether the version has any index."""
        return len(catalog_of(self._as_dataset()).indices) > 0

    def drop_index(self, name: str) -> None:
        """Remove the index ``name`` (its files stay until cleanup) and commit."""
        drop_index(self._as_dataset(), name)

    def prewarm_index(self, name: str, *, with_position: bool = False,
                      index_segments: Iterable[str | uuid_mod.UUID] | None = None) -> None:
        """Load the index ``name`` (or only ``index_segments`` of it) into memory."""
        ds = self._as_dataset()
        catalog = catalog_of(ds)
        found = catalog.get(name)
        if found is None:
            raise IndexNotFoundError(f"Lance index not found: name={name}", table=ds.uri, version=ds.version)
        wanted = None if index_segments is None else {parse_index_uuid(s) for s in index_segments}
        if found.index_type is None:
            return  # an index type this engine does not read: nothing to load
        for segment in found.segments:
            if wanted is None or segment.uuid in wanted:
                catalog.load(segment).prewarm()


__all__ = ["IndexMethods", "require_index"]
