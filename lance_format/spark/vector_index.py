"""``create_index`` on Spark: a vector index (IVF_FLAT, IVF_PQ, IVF_SQ, IVF_HNSW_SQ, IVF_HNSW_PQ)
trained on the driver from a sample, built by the executors fragment by fragment, committed once.

The flow is official Lance's distributed vector build with *shared model artifacts* (as its Ray
integration drives it):

1. the driver reads the manifest, checks the request with the engine's own validation (typed
   errors before any job runs) and sizes the training sample as ``create_index`` does
   (``sample_rate`` rows per partition, and per code of the PQ/SQ quantizer);
2. one Spark job draws the sample: for each fragment a task takes a random set of its live rows,
   about the fragment's share of the sample (``fragment.take``: only those rows are read; at
   most two such tasks per core), so the driver holds the sample and nothing more;
3. the driver trains the IVF centroids (k-means), and the PQ codebook or SQ bounds, on it;
4. a second job builds one index segment per group of ``fragments_per_task`` fragments: every
   task opens the pinned version and calls ``LanceDataset.create_index_uncommitted`` with the
   shared centroids / codebook / bounds and its fragments, so it assigns and encodes its rows
   batch by batch and writes the segment's ``index.idx`` / ``auxiliary.idx`` itself. It returns
   only the segment's metadata (a pickled ``Index``, a few hundred bytes);
5. the driver commits every segment as one index in one ``CreateIndex`` version
   (``commit_existing_index_segments``). Readers (pylance and LanceDB included) search each
   segment and merge by distance; since the segments share centroids, probing ``nprobes``
   partitions means the same partitions as in a single-segment index.

A failed task fails the job before anything is committed; the segment directories the driver
named for the tasks are then removed. Memory on the driver is bounded by the sample (and the
trained model), on an executor by a batch of rows (the engine's build spills encoded rows to a
local temporary file).
"""

from __future__ import annotations

import math
import pickle
import uuid as uuid_mod
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lance_format.distributed import (
    LanceDataset,
    ProductQuantizer,
    ScalarQuantizer,
    Trained,
    VectorIndexParams,
    check_vector_request,
    normalize_vectors,
    sample_size,
    train_ivf,
)
from lance_format.errors import CorruptFileError, IndexExistsError, InvalidInputError
from lance_format.spark.common import JobScope, parallelism, translate_task_error
from lance_format.spark.namespace_options import located_table

_SAMPLE_OUT = "fragment int, rows long, dim int, data binary"
_BUILD_OUT = "task long, segment binary"
#: keys the driver sets for the build tasks (the user's values are trained or checked first)
_TRAINED_KEYS = ("ivf_centroids", "pq_codebook", "sq_bounds")


def _float_rows(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """The non-null, NaN-free vectors of a fixed-size-list (or 1-d tensor) column, as float32."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks else pa.array([], column.type)
    if isinstance(column, pa.ExtensionArray):
        column = column.storage
    column = column.filter(column.is_valid()) if column.null_count else column
    dim = column.type.list_size
    values = column.values.slice(column.offset * dim, len(column) * dim)
    x = np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.float32).reshape(len(column), dim)
    finite = ~np.isnan(x).any(axis=1)
    return x if finite.all() else x[finite]


def _sample_task(uri: str, version: int, storage_options: dict[str, str], path: str,
                 specs: Sequence[Sequence[tuple[int, int, int]]]) -> Any:
    """``mapInArrow`` over ``spark.range``: for each id, every ``(fragment, quota, seed)`` of its
    specs: ``quota`` random live rows of ``path`` in that fragment, as float32 bytes."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ds = LanceDataset(uri, version=version, storage_options=storage_options)
        for batch in batches:
            for fragment_id, quota, seed in (spec for task in batch.column(0).to_pylist() for spec in specs[task]):
                fragment = ds.get_fragment(fragment_id)
                if fragment is None:
                    raise CorruptFileError(f"fragment {fragment_id} is not in version {version}", table=uri,
                                           version=version)
                live = fragment.count_rows()
                rng = np.random.default_rng(seed)
                positions = np.sort(rng.choice(live, size=min(quota, live), replace=False))
                x = _float_rows(fragment.take(positions, columns=[path]).column(0))
                yield pa.RecordBatch.from_pydict(
                    {"fragment": [fragment_id], "rows": [len(x)], "dim": [x.shape[1]], "data": [x.tobytes()]},
                    schema=pa.schema([("fragment", pa.int32()), ("rows", pa.int64()), ("dim", pa.int32()),
                                      ("data", pa.binary())]))

    return run


def _build_task(uri: str, version: int, storage_options: dict[str, str], path: str, index_type: str, name: str,
                metric: str, kwargs: dict[str, Any], specs: Sequence[tuple[list[int], str]]) -> Any:
    """``mapInArrow`` over ``spark.range``: for each id, the uncommitted segment of the spec's
    ``(fragment ids, segment uuid)``; yields its pickled ``Index``."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ds = LanceDataset(uri, version=version, storage_options=storage_options)
        for batch in batches:
            for task in batch.column(0).to_pylist():
                fragments, segment = specs[task]
                index = ds.create_index_uncommitted(path, index_type, name, metric=metric, fragment_ids=fragments,
                                                    index_uuid=segment, **kwargs)
                yield pa.RecordBatch.from_pydict({"task": [task], "segment": [pickle.dumps(index)]},
                                                 schema=pa.schema([("task", pa.int64()), ("segment", pa.binary())]))

    return run


def _tasks(spark: Any, count: int) -> Any:
    """``count`` one-row partitions (ids 0..count-1): one Spark task per spec, without a shuffle."""
    return spark.range(0, count, 1, count)


def _quotas(rows: Sequence[int], wanted: int) -> list[int]:
    """Each fragment's share of a ``wanted``-row sample, in proportion to its live rows."""
    total = sum(rows)
    if total <= wanted:
        return list(rows)
    return [min(r, math.ceil(wanted * r / total)) for r in rows]


def _groups(fragments: Sequence[tuple[int, int]], per_task: int) -> list[list[int]]:
    """Fragment ids in groups of ``per_task`` (one task each); fragments without live rows go
    with the first group, so the index still covers them without a task of their own."""
    full = [f for f, rows in fragments if rows > 0]
    empty = [f for f, rows in fragments if rows == 0]
    groups = [full[i:i + per_task] for i in range(0, len(full), per_task)]
    groups[0] = sorted(groups[0] + empty)
    return groups


def _train_on_sample(spark: Any, ds: LanceDataset, path: str, params: VectorIndexParams,
                     fragments: Sequence[tuple[int, int]], partitions: int,
                     storage_options: dict[str, str]) -> Trained:
    """Draw the sample with one Spark job (a task per fragment) and train on the driver."""
    quotas = _quotas([rows for _, rows in fragments], sample_size(params, partitions))
    seed = params.seed if params.seed is not None else 0
    specs = [(f, q, seed * 1_000_003 + f) for (f, _), q in zip(fragments, quotas) if q > 0]
    # a take of a few rows per fragment is quick: at most two tasks per core, not one per fragment
    count = min(len(specs), 2 * parallelism(spark))
    run = _sample_task(ds.uri, ds.version, storage_options, path, [specs[i::count] for i in range(count)])
    rows = _tasks(spark, count).mapInArrow(run, _SAMPLE_OUT).collect()
    parts = [np.frombuffer(bytes(r["data"]), dtype=np.float32).reshape(r["rows"], r["dim"])
             for r in sorted(rows, key=lambda r: r["fragment"]) if r["rows"]]
    if not parts:
        raise InvalidInputError(f"cannot train a {params.index_type} index on column {path}: every vector is null "
                                "or NaN", table=ds.uri, column=path)
    sample = np.concatenate(parts)
    if params.metric == "cosine":
        sample = normalize_vectors(sample)
    return train_ivf(sample, partitions, params)


def _task_kwargs(kwargs: Mapping[str, Any], trained: Trained) -> dict[str, Any]:
    """The build tasks' ``create_index_uncommitted`` parameters: the user's, with the trained
    centroids and quantizer in place of anything to train."""
    out = {k: v for k, v in kwargs.items() if k not in _TRAINED_KEYS}
    out["ivf_centroids"] = trained.centroids
    if isinstance(trained.quantizer, ProductQuantizer):
        out["pq_codebook"] = trained.quantizer.codebook
    elif isinstance(trained.quantizer, ScalarQuantizer):
        out["sq_bounds"] = (trained.quantizer.start, trained.quantizer.end)
    return out


def _remove_segments(ds: LanceDataset, segments: Sequence[str]) -> None:
    """Delete the files of segments no commit references (after a failed build job)."""
    store = ds.object_store
    paths = [store.relative_path(info) for segment in segments for info in store.list_files(f"_indices/{segment}")]
    if paths:
        store.delete_many(paths)


def create_index(spark: Any, uri: str | None, column: str, index_type: str, *, metric: str = "l2",
                 num_partitions: int | None = None, num_sub_vectors: int | None = None, num_bits: int = 8,
                 sample_rate: int = 256, max_iters: int = 50, ivf_centroids: Any = None, pq_codebook: Any = None,
                 name: str | None = None, replace: bool = False, fragments_per_task: int = 1,
                 storage_options: dict[str, str] | None = None, namespace: Any = None,
                 table_id: str | Sequence[str] | None = None, **kwargs: Any) -> LanceDataset:
    """Build the vector index ``index_type`` on ``column`` of the table at ``uri`` (or
    ``namespace=`` / ``table_id=``) with Spark, committed as one new version.

    Parameters are pylance's ``create_index`` ones: ``metric`` (``l2``, ``cosine``, ``dot``;
    ``distance_type`` too), ``num_partitions``, ``num_sub_vectors``, ``num_bits``,
    ``sample_rate``, ``max_iters``, ``target_partition_size``, ``ivf_centroids``,
    ``pq_codebook``, ``name``, ``replace``. ``fragments_per_task``: how many fragments one build
    task (and one index segment) covers. Returns the dataset at the committed version.

    Raises
    ------
    IndexColumnNotFoundError, ArgumentTypeError, UnsupportedFeatureError, InvalidInputError
        As ``LanceDataset.create_index``, before any Spark job runs; ``InvalidInputError`` also
        for a table without rows.
    IndexExistsError
        An index named ``name`` exists and ``replace`` is False.
    """
    if fragments_per_task < 1:
        raise InvalidInputError(f"fragments_per_task must be at least 1, got {fragments_per_task}", table=str(uri))
    uri, options = located_table(uri, namespace, table_id, create=False, storage_options=storage_options)
    storage = dict(options or {})
    ds = LanceDataset(uri, storage_options=storage)
    given = {"num_partitions": num_partitions, "num_sub_vectors": num_sub_vectors, "ivf_centroids": ivf_centroids,
             "pq_codebook": pq_codebook}
    kwargs = {**kwargs, **{k: v for k, v in given.items() if v is not None}, "num_bits": num_bits,
              "sample_rate": sample_rate, "max_iters": max_iters}
    metric = str(kwargs.pop("distance_type", metric))
    path, _, params = check_vector_request(ds, column, index_type, metric, kwargs)
    index_name = name if name is not None else f"{path}_idx"
    if not replace and any(d.name == index_name for d in ds.describe_indices()):
        raise IndexExistsError(f"Index name '{index_name}' already exists, please specify a different name or use "
                               "replace=True", table=ds.uri, column=path)
    fragments = [(f.fragment_id, f.count_rows()) for f in ds.get_fragments()]
    total = sum(rows for _, rows in fragments)
    if total == 0:
        raise InvalidInputError(f"cannot train a {params.index_type} index on column {path}: the table has no rows",
                                table=ds.uri, column=path)
    partitions = params.partitions_for(total)
    with JobScope(spark) as scope:
        if params.pretrained:  # the caller gave every artifact: nothing to sample or train
            trained = train_ivf(np.zeros((0, 0), np.float32), partitions, params)
        else:
            try:
                trained = _train_on_sample(spark, ds, path, params, fragments, partitions, storage)
            except Exception as exc:
                raise _typed(exc)
        groups = _groups(fragments, fragments_per_task)
        segment_ids = [str(uuid_mod.uuid4()) for _ in groups]
        build = _build_task(ds.uri, ds.version, storage, path, params.index_type, index_name, metric,
                            _task_kwargs(kwargs, trained), list(zip(groups, segment_ids)))
        try:
            rows = _tasks(spark, len(groups)).mapInArrow(build, _BUILD_OUT).collect()
        except Exception as exc:
            scope.settle()  # no task may still be writing when its files are removed
            _remove_segments(ds, segment_ids)
            raise _typed(exc)
    segments = [pickle.loads(bytes(r["segment"])) for r in sorted(rows, key=lambda r: r["task"])]
    if len(segments) != len(groups):
        _remove_segments(ds, segment_ids)
        raise InvalidInputError(f"expected {len(groups)} index segments from the executors, got {len(segments)}",
                                table=ds.uri, column=path)
    try:
        return ds.commit_existing_index_segments(index_name, path, segments)
    except Exception:
        _remove_segments(ds, segment_ids)  # a refused commit (a conflict, a lost race) leaves no files behind
        raise


def _typed(exc: BaseException) -> BaseException:
    """The engine's typed error a task raised (chained to Spark's), else Spark's own."""
    error = translate_task_error(exc)
    if error is not exc and error.__cause__ is None:
        error.__cause__ = exc
    return error


__all__ = ["create_index"]
