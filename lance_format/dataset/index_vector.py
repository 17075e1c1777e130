"""``create_index`` for pylance's vector index types: validation with pylance's errors, the
training sample and the row stream of the column, and the ``CreateIndex`` commit.

The build itself (k-means, quantizers, files) is :mod:`lance_format.index.vector`. Rows whose
vector is null or holds a NaN are left out of the index (pylance's ``filter_nan=True``); the
segment still covers every fragment it was built over, so appended fragments stay uncovered
and are searched flat.
"""

from __future__ import annotations

import logging
import uuid as uuid_mod
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lance_format.dataset.index_describe import catalog_of, field_paths
from lance_format.dataset.mutations.base import Prepared, run_mutation, transaction_for
from lance_format.errors import (
    ArgumentTypeError,
    IndexColumnNotFoundError,
    IndexExistsError,
    InvalidInputError,
    UnsupportedFeatureError,
)
from lance_format.index.metadata import new_index_metadata, parse_index_uuid
from lance_format.index.store import IndexStore, index_dir, index_file_version
from lance_format.index.vector import ivf_build
from lance_format.index.vector.ivf_build import normalize
from lance_format.index.vector.params import (
    BUILT_TYPES,
    PYLANCE_METRICS,
    PYLANCE_VECTOR_TYPES,
    VECTOR_TYPE_URL,
    VectorIndexParams,
    canonical_metric,
)
from lance_format.proto import index_pb2

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset

LOGGER = logging.getLogger(__name__)
VECTOR_INDEX_VERSION = 1
DEFAULT_SEED = 42  # IndexMetadata.index_version of pylance 14.0.2's IVF indices


def is_vector_type(index_type: Any) -> bool:
    return isinstance(index_type, str) and (index_type.upper() in PYLANCE_VECTOR_TYPES
                                            or index_type.upper().startswith("IVF_"))


def _vector_field(ds: LanceDataset, column: str | list[str]) -> tuple[str, Any, int, pa.DataType]:
    """The column's path, field, dimension and element type (pylance's checks and messages)."""
    name = column[0] if isinstance(column, (list, tuple)) else column
    found = next((f for f in ds.lance_schema.fields if f.name == name), None) or next(
        (f for f in ds.lance_schema.fields if f.name.lower() == str(name).lower()), None)
    if found is None:
        raise IndexColumnNotFoundError(f"{name} not found in schema", table=ds.uri, column=str(name))
    data_type = found.to_arrow().type
    storage = data_type.storage_type if isinstance(data_type, pa.ExtensionType) else data_type
    if isinstance(data_type, pa.FixedShapeTensorType) and len(data_type.shape) == 1:
        dim, element = int(data_type.shape[0]), data_type.value_type
    elif pa.types.is_fixed_size_list(storage) and not isinstance(data_type, pa.FixedShapeTensorType):
        dim, element = int(storage.list_size), storage.value_type
    else:
        raise ArgumentTypeError(f"Vector column {found.name} must be FixedSizeListArray 1-dimensional "
                                f"FixedShapeTensorArray, got {data_type}", table=ds.uri, column=found.name)
    return found.name, found, dim, element


def _as_array(value: Any, what: str) -> np.ndarray:
    if isinstance(value, (pa.FixedSizeListArray, pa.ChunkedArray)):
        arr = value.combine_chunks() if isinstance(value, pa.ChunkedArray) else value
        return arr.flatten().to_numpy(zero_copy_only=False).reshape(len(arr), -1)
    if hasattr(value, "to_numpy_ndarray"):
        return np.asarray(value.to_numpy_ndarray())
    return np.asarray(value)


def _params(ds: LanceDataset, path: str, dim: int, element: pa.DataType, index_type: str, metric: Any,
            kwargs: dict[str, Any]) -> VectorIndexParams:
    """Validate the request as pylance does (same order, same messages) and gather parameters."""
    table = ds.uri
    num_sub_vectors = kwargs.get("num_sub_vectors")
    if num_sub_vectors is not None and dim % int(num_sub_vectors) != 0:
        raise InvalidInputError(f"dimension ({dim}) must be divisible by num_sub_vectors ({num_sub_vectors})",
                                table=table, column=path)
    if not (pa.types.is_floating(element) or pa.types.is_uint8(element)):
        raise ArgumentTypeError(f"Vector column {path} must have floating value type, got {element}",
                                table=table, column=path)
    if not isinstance(metric, str) or metric.lower() not in PYLANCE_METRICS:
        raise InvalidInputError(f"Metric {metric} not supported.", table=table, column=path)
    kind = index_type.upper()
    if kind not in PYLANCE_VECTOR_TYPES:
        raise UnsupportedFeatureError(f"Only {list(PYLANCE_VECTOR_TYPES)} index types supported. Got {kind}",
                                      table=table, column=path)
    accelerator = kwargs.get("accelerator")
    if accelerator is not None:
        if kind != "IVF_PQ":
            LOGGER.warning("Index type %s does not support GPU acceleration; falling back to CPU", kind)
        else:
            raise UnsupportedFeatureError(
                f"accelerator={accelerator!r}: GPU-accelerated IVF_PQ training is not available in this engine (no "
                "GPU package is used); build on the CPU by leaving accelerator unset", table=table, column=path)
    if kind not in BUILT_TYPES:
        raise UnsupportedFeatureError(f"building {kind} indices is not supported by this engine (it builds "
                                      f"{', '.join(BUILT_TYPES)})", table=table, column=path)
    distance = canonical_metric(metric)
    if distance == "hamming" or pa.types.is_uint8(element):
        raise UnsupportedFeatureError(f"{kind} with the hamming metric / uint8 vectors is not supported by this "
                                      "engine", table=table, column=path)
    num_partitions = kwargs.get("num_partitions")
    if isinstance(num_partitions, float):
        num_partitions = int(num_partitions)
    elif num_partitions is not None and not isinstance(num_partitions, int):
        raise ArgumentTypeError(f"num_partitions must be int, got {type(num_partitions)}", table=table, column=path)
    if num_partitions is not None and num_partitions <= 0:
        raise InvalidInputError("Invalid user input: num_partitions must be set and positive when training from "
                                f"samples, got Some({num_partitions})", table=table, column=path)
    centroids = kwargs.get("ivf_centroids")
    codebook = kwargs.get("pq_codebook")
    if centroids is None and codebook is not None:
        raise InvalidInputError("ivf_centroids must be specified when pq_codebook is provided", table=table, column=path)
    if centroids is not None:
        centroids = _as_array(centroids, "ivf_centroids")
        if centroids.ndim != 2 or centroids.shape[0] == 0 or centroids.shape[1] != dim:
            raise InvalidInputError(f"Ivf centroids must be 2D array: (clusters, {dim}), got {centroids.shape}",
                                    table=table, column=path)
        if num_partitions is not None and centroids.shape[0] != num_partitions:
            raise InvalidInputError(f"Ivf centroids has {centroids.shape[0]} clusters, but num_partitions="
                                    f"{num_partitions}", table=table, column=path)
        if not np.issubdtype(centroids.dtype, np.floating):
            raise ArgumentTypeError(f"IVF centroids must be floating numbergot {centroids.dtype}", table=table,
                                    column=path)
    num_bits = int(kwargs.get("num_bits", 8))
    if "PQ" in kind:
        if num_sub_vectors is None:
            raise InvalidInputError("num_partitions and num_sub_vectors are required for IVF_PQ", table=table,
                                    column=path)
        if num_bits not in (4, 8):
            raise InvalidInputError(f"ProductQuantization: num_bits {num_bits} not supported", table=table,
                                    column=path)
        if codebook is not None:
            codebook = _as_array(codebook, "pq_codebook")
            want = (int(num_sub_vectors), 1 << num_bits, dim // int(num_sub_vectors))
            if codebook.shape != want:
                raise InvalidInputError(f"PQ codebook must be 3D array: (sub_vectors, {1 << num_bits}, dim) for "
                                        f"num_bits={num_bits}, got {codebook.shape}", table=table, column=path)
    bounds = kwargs.get("sq_bounds")
    if bounds is not None:
        bounds = tuple(float(v) for v in bounds)
        if "SQ" not in kind or len(bounds) != 2 or not bounds[0] <= bounds[1] or not all(np.isfinite(bounds)):
            raise InvalidInputError(f"sq_bounds must be (start, end) with start <= end for an SQ index, got "
                                    f"{kwargs.get('sq_bounds')!r} for {kind}", table=table, column=path)
    if kind != "IVF_FLAT" and num_bits != 8:
        raise UnsupportedFeatureError(f"{kind} with num_bits={num_bits} is not supported by this engine (8 only)",
                                      table=table, column=path)
    return VectorIndexParams(
        index_type=kind, metric=distance, num_partitions=num_partitions,
        num_sub_vectors=int(num_sub_vectors) if num_sub_vectors is not None else None, num_bits=num_bits,
        sample_rate=int(kwargs.get("sample_rate") or 256), max_iters=int(kwargs.get("max_iters") or 50),
        target_partition_size=kwargs.get("target_partition_size"), ivf_centroids=centroids, pq_codebook=codebook,
        sq_bounds=bounds,
        shuffle_partition_batches=int(kwargs.get("shuffle_partition_batches") or 10240),
        shuffle_partition_concurrency=int(kwargs.get("shuffle_partition_concurrency") or 2),
        skip_transpose=bool(kwargs.get("skip_transpose", False)),
        # a fixed default seed: the same data and parameters build the same index
        seed=int(kwargs.get("seed", DEFAULT_SEED)))


def _vectors(batch: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray]:
    """One scanned batch's non-null, NaN-free vectors (float32, rows x dim) and their row ids."""
    column = batch.column(0)
    if isinstance(column, pa.ExtensionArray):
        column = column.storage
    row_ids = batch.column(1).to_numpy()
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    if not valid.all():
        column = column.filter(pa.array(valid))
        row_ids = row_ids[valid]
    dim = column.type.list_size
    values = column.values.slice(column.offset * dim, len(column) * dim)
    x = values.to_numpy(zero_copy_only=False).reshape(len(column), dim)  # its own float type
    finite = ~np.isnan(x).any(axis=1)
    return (x, row_ids) if finite.all() else (x[finite], row_ids[finite])


def _stream(ds: LanceDataset, path: str, fragment_ids: list[int] | None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    fragments = ds.get_fragments()
    if fragment_ids is not None:
        wanted = set(fragment_ids)
        fragments = [f for f in fragments if f.fragment_id in wanted]
    if not fragments:
        return
    scanner = ds.scanner(columns=[path], fragments=fragments, with_row_id=True, scan_in_order=True)
    for batch in scanner.to_batches():
        yield _vectors(batch)


def _sample(ds: LanceDataset, path: str, fragment_ids: list[int] | None, wanted: int, total: int,
            seed: int | None) -> np.ndarray:
    """About ``wanted`` rows drawn uniformly (each row kept with probability wanted/total), or all."""
    rng = np.random.default_rng(seed)
    keep = 1.0 if total <= wanted else wanted / total
    parts = []
    for x, _ in _stream(ds, path, fragment_ids):
        parts.append(x if keep >= 1.0 else x[rng.random(len(x)) < keep])
    return np.concatenate(parts).astype(np.float32, copy=False) if parts else np.zeros((0, 0), np.float32)


def sample_size(params: VectorIndexParams, partitions: int) -> int:
    """How many rows training draws: ``sample_rate`` per partition, and per code of the quantizer."""
    codes = params.sample_rate << params.num_bits if params.quantizer != "flat" else 0
    return max(partitions * params.sample_rate, codes)


def check_vector_request(ds: LanceDataset, column: str | list[str], index_type: str, metric: Any,
                         kwargs: dict[str, Any]) -> tuple[str, int, VectorIndexParams]:
    """Validate a vector index request as ``create_index`` does (same typed errors), before any
    work: the column's path, its dimension and the build's parameters."""
    path, _, dim, element = _vector_field(ds, column)
    return path, dim, _params(ds, path, dim, element, index_type, metric, dict(kwargs))


def build_vector_segment(ds: LanceDataset, column: str | list[str], index_type: str, name: str, metric: Any, *,
                         fragment_ids: list[int] | None, segment_uuid: str | None, kwargs: dict[str, Any],
                         written: list[str]) -> Any:
    """Train and write one vector index segment over ``fragment_ids`` (all when None); its
    uncommitted ``IndexMetadata``."""
    path, lance_field, dim, element = _vector_field(ds, column)
    params = _params(ds, path, dim, element, index_type, metric, kwargs)
    wanted = None if fragment_ids is None else set(fragment_ids)
    covered = [f.id for f in ds.manifest.fragments if wanted is None or f.id in wanted]
    total = sum(f.count_rows() for f in ds.get_fragments() if wanted is None or f.fragment_id in wanted)
    if total == 0:
        raise InvalidInputError(f"cannot train a {params.index_type} index on column {path}: the table has no rows",
                                table=ds.uri, column=path)
    partitions = params.partitions_for(total)
    if params.pretrained:  # centroids and quantizer given (a distributed build): nothing to sample
        sample = np.zeros((0, dim), np.float32)
    else:
        sample = _sample(ds, path, fragment_ids, sample_size(params, partitions), total, params.seed)
    if len(sample) == 0 and not params.pretrained:
        raise InvalidInputError(f"cannot train a {params.index_type} index on column {path}: every vector is null "
                                "or NaN", table=ds.uri, column=path)
    if params.metric == "cosine":
        sample = normalize(sample)
    trained = ivf_build.train(sample, partitions, params)
    del sample
    uuid = segment_uuid or str(uuid_mod.uuid4())
    directory = index_dir(uuid)
    written.extend(f"{directory}/{n}" for n in (ivf_build.AUX_FILE, ivf_build.INDEX_FILE))
    files = ivf_build.write_index(ds.object_store, directory, index_file_version(ds.data_storage_version), dim=dim,
                                  value_type=element, params=params, trained=trained,
                                  batches=lambda: _stream(ds, path, fragment_ids))
    return new_index_metadata(index_uuid=uuid, name=name, field_ids=[lance_field.id], dataset_version=ds.version,
                              fragment_ids=covered, type_url=VECTOR_TYPE_URL, details=params.details(),
                              index_version=VECTOR_INDEX_VERSION, files=files)


def create_vector_index(ds: LanceDataset, column: str | list[str], index_type: str, name: str | None, metric: Any,
                        *, replace: bool, fragment_ids: list[int] | None, index_uuid: str | None,
                        kwargs: dict[str, Any]) -> None:
    """Build a vector index and commit it (pylance's ``create_index`` for IVF types)."""
    path, lance_field, dim, element = _vector_field(ds, column)
    _params(ds, path, dim, element, index_type, metric, kwargs)  # fail before any work
    chosen = name if name is not None else f"{path}_idx"
    segment_uuid = parse_index_uuid(index_uuid) if index_uuid is not None else None

    def prepare(current: LanceDataset) -> Prepared:
        existing = catalog_of(current).get(chosen)
        removed = []
        if existing is not None:
            if not replace:
                raise IndexExistsError(f"Index name '{chosen}' already exists, please specify a different name or "
                                       "use replace=True", table=current.uri, column=path)
            removed = [s.meta for s in existing.segments]
        prepared = Prepared(transaction_for(current, None, None), None)
        meta = build_vector_segment(current, column, index_type, chosen, metric, fragment_ids=fragment_ids,
                                    segment_uuid=segment_uuid, kwargs=kwargs, written=prepared.written)
        body = prepared.txn.create_index
        body.SetInParent()
        body.new_indices.add().CopyFrom(meta)
        for old in removed:
            body.removed_indices.add().CopyFrom(old)
        return prepared

    run_mutation(ds, prepare)




def optimize_vector_segment(ds: LanceDataset, reference: Any, store: IndexStore, fragments: list[int], *,
                            retrain: bool, written: list[str]) -> Any:
    """A new segment of the vector index ``reference`` (an ``IndexMetadata``) over ``fragments``.

    Without ``retrain`` the new rows are assigned to the index's centroids and encoded with its
    quantizer (a delta segment, as pylance adds appended fragments); with ``retrain`` the index is
    trained afresh over the fragments with its partition count and parameters."""
    index_type, metric, trained = ivf_build.read_trained(store)
    details = index_pb2.VectorIndexDetails()
    details.ParseFromString(bytes(reference.index_details.value))
    num_sub_vectors = details.pq.num_sub_vectors if details.HasField("pq") else None
    num_bits = details.pq.num_bits if details.HasField("pq") else details.sq.num_bits if details.HasField("sq") else 8
    hints = dict(details.runtime_hints)
    kwargs: dict[str, Any] = {"num_partitions": len(trained.centroids), "num_sub_vectors": num_sub_vectors,
                              "num_bits": num_bits or 8, "sample_rate": int(hints.get("lance.ivf.sample_rate", 256)),
                              "max_iters": int(hints.get("lance.ivf.max_iters", 50))}
    path = field_paths(ds)[reference.fields[0]]
    if retrain:
        return build_vector_segment(ds, path, index_type, reference.name, metric, fragment_ids=fragments,
                                    segment_uuid=None, kwargs=kwargs, written=written)
    name, lance_field, dim, element = _vector_field(ds, path)
    params = _params(ds, name, dim, element, index_type, metric, kwargs)
    uuid = str(uuid_mod.uuid4())
    directory = index_dir(uuid)
    written.extend(f"{directory}/{n}" for n in (ivf_build.AUX_FILE, ivf_build.INDEX_FILE))
    files = ivf_build.write_index(ds.object_store, directory, index_file_version(ds.data_storage_version), dim=dim,
                                  value_type=element, params=params, trained=trained,
                                  batches=lambda: _stream(ds, name, fragments))
    return new_index_metadata(index_uuid=uuid, name=reference.name, field_ids=list(reference.fields),
                              dataset_version=ds.version, fragment_ids=fragments, type_url=VECTOR_TYPE_URL,
                              details=bytes(reference.index_details.value), index_version=VECTOR_INDEX_VERSION,
                              files=files)


__all__ = ["build_vector_segment", "check_vector_request", "create_vector_index", "sample_size", "is_vector_type", "optimize_vector_segment"]
