"""Writing an IVF vector index segment as pylance 14.0.2 lays it out (IVF_FLAT, IVF_PQ, IVF_SQ;
the IVF_HNSW types write ``auxiliary.idx`` alike and their graphs into ``index.idx``, see
:mod:`.hnsw`).

``_indices/<uuid>/index.idx``: no rows, one column ``__flat_marker`` (uint64, not null); schema
metadata ``lance:index`` = ``{"type":"IVF_PQ","distance_type":"l2"}``, ``lance:ivf`` = ``"1"``
(the global buffer holding the ``IVF`` message: the centroids as a FLOAT32 ``Tensor``
``[partitions, dim]``, all-zero offsets and lengths, the k-means loss) and ``lance:flat`` (one
empty string per partition).

``auxiliary.idx``: one row per indexed vector, partition after partition (rows in scan order
within one), columns ``_rowid`` (uint64) and the storage column: ``flat`` (the vectors; cosine
ones normalized), ``__pq_code`` (``m`` bytes, each partition's codes transposed, of the residual
to the partition's centroid for l2/cosine, of the vector itself for dot) or ``__sq_code`` (``dim``
bytes of the vector). Schema metadata: ``distance_type``, ``lance:ivf`` = ``"1"`` (an ``IVF``
with each partition's row offset and length) and ``storage_metadata`` (a JSON list of one JSON
text; PQ's names ``codebook_position`` 2, the global buffer of its codebook ``Tensor``).

Memory stays bounded: the encoded rows are spilled to a temporary Arrow file as they are made,
then read back memory-mapped in partition order.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lance_format.file.api import LanceFileWriter
from lance_format.index.store import IndexStore
from lance_format.index.vector import hnsw, kmeans, pq, sq
from lance_format.index.vector.params import VectorIndexParams
from lance_format.io import ObjectStore
from lance_format.proto import index_pb2

INDEX_FILE = "index.idx"
AUX_FILE = "auxiliary.idx"
_WRITE_ROWS = 65536

Batches = Callable[[], Iterable[tuple[np.ndarray, np.ndarray]]]


def normalize(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as cosine indices store them, in the
    rows' own float type (float16 computed in float32)."""
    wide = x.astype(np.float32) if x.dtype == np.float16 else x
    norms = np.linalg.norm(wide, axis=1, keepdims=True)
    return (wide / np.where(norms == 0, 1, norms)).astype(x.dtype, copy=False)


# the Tensor type pylance writes centroids and codebooks in: the column's element type
_TENSOR_OF = {np.dtype(np.float16): (index_pb2.Tensor.FLOAT16, "<f2"),
              np.dtype(np.float32): (index_pb2.Tensor.FLOAT32, "<f4"),
              np.dtype(np.float64): (index_pb2.Tensor.FLOAT64, "<f8")}


def tensor_type(value_type: pa.DataType) -> tuple[int, str]:
    """``(Tensor.DataType, numpy dtype)`` for a vector column's element type."""
    return _TENSOR_OF.get(np.dtype(value_type.to_pandas_dtype()), _TENSOR_OF[np.dtype(np.float32)])


def _subset(sample: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    if len(sample) <= size:
        return sample
    return sample[np.sort(rng.choice(len(sample), size=size, replace=False))]


@dataclass
class Trained:
    """What training produced: centroids, loss and the quantizer (None for FLAT)."""

    centroids: np.ndarray
    loss: float | None
    quantizer: pq.ProductQuantizer | sq.ScalarQuantizer | None


def train(sample: np.ndarray, num_partitions: int, params: VectorIndexParams) -> Trained:
    """Train the IVF centroids and the quantizer on ``sample`` (rows already cosine-normalized)."""
    rng = np.random.default_rng(params.seed)
    ivf_metric = "dot" if params.metric == "dot" else "l2"
    if params.ivf_centroids is not None:
        centroids = np.ascontiguousarray(params.ivf_centroids, dtype=np.float32)
        loss = None
    else:
        fitted = kmeans.train(_subset(sample, num_partitions * params.sample_rate, rng), num_partitions, ivf_metric,
                              max_iters=params.max_iters, seed=params.seed)
        centroids, loss = fitted.centroids, fitted.loss
    quantizer: pq.ProductQuantizer | sq.ScalarQuantizer | None = None
    code_rows = params.sample_rate << params.num_bits
    if params.quantizer == "pq":
        if params.pq_codebook is not None:
            quantizer = pq.from_codebook(params.pq_codebook, params.num_bits)
        else:
            rows = _subset(sample, code_rows, rng)
            if params.metric != "dot":  # l2 and cosine quantize the residual to the centroid
                rows = rows - centroids[kmeans.assign(rows, centroids, ivf_metric)[0]]
            quantizer = pq.train(rows, int(params.num_sub_vectors or 1), params.num_bits,
                                 max_iters=params.max_iters, seed=params.seed)
    elif params.quantizer == "sq":
        quantizer = (sq.ScalarQuantizer(*params.sq_bounds, params.num_bits) if params.sq_bounds is not None
                     else sq.train(_subset(sample, code_rows, rng), params.num_bits))
    return Trained(centroids, loss, quantizer)


def _storage(params: VectorIndexParams, trained: Trained, dim: int, value_type: pa.DataType
             ) -> tuple[str, pa.DataType, bool, str]:
    """The storage column's name, type, nullability and the ``storage_metadata`` text."""
    if isinstance(trained.quantizer, pq.ProductQuantizer):
        q = trained.quantizer
        meta = json.dumps({"codebook_position": 2, "nbits": q.num_bits, "num_sub_vectors": q.num_sub_vectors,
                           "dimension": dim, "codebook_tensor": [], "transposed": not params.skip_transpose},
                          separators=(",", ":"))
        return "__pq_code", pa.list_(pa.uint8(), q.num_sub_vectors), True, meta
    if isinstance(trained.quantizer, sq.ScalarQuantizer):
        return "__sq_code", pa.list_(pa.uint8(), dim), True, trained.quantizer.storage_metadata(dim)
    return "flat", pa.list_(value_type, dim), False, json.dumps({"dim": dim}, separators=(",", ":"))


def _encode(native: np.ndarray, x: np.ndarray, parts: np.ndarray, params: VectorIndexParams, trained: Trained,
            value_type: pa.DataType) -> np.ndarray:
    """The storage values of rows ``native`` (their own float type) / ``x`` (as float32)."""
    if isinstance(trained.quantizer, pq.ProductQuantizer):
        return trained.quantizer.encode(x - trained.centroids[parts] if params.metric != "dot" else x)
    if isinstance(trained.quantizer, sq.ScalarQuantizer):
        return trained.quantizer.encode(x)
    return native.astype(value_type.to_pandas_dtype(), copy=False)  # FLAT keeps the exact values


def _fsl(values: np.ndarray, list_type: pa.DataType) -> pa.Array:
    flat = pa.array(np.ascontiguousarray(values).reshape(-1), type=list_type.value_type)
    return pa.FixedSizeListArray.from_arrays(flat, type=list_type)


def _ivf_message(offsets: np.ndarray, lengths: np.ndarray, centroids: np.ndarray | None = None,
                 loss: float | None = None, value_type: pa.DataType | None = None) -> bytes:
    message = index_pb2.IVF(offsets=[int(v) for v in offsets], lengths=[int(v) for v in lengths])
    if centroids is not None:
        tensor_code, tensor_dtype = tensor_type(value_type or pa.float32())
        message.centroids_tensor.data_type = tensor_code  # type: ignore[assignment]
        message.centroids_tensor.shape.extend(centroids.shape)
        message.centroids_tensor.data = np.ascontiguousarray(centroids, dtype=tensor_dtype).tobytes()
    if loss is not None:
        message.loss = loss
    return message.SerializeToString()


def _spill(batches: Batches, params: VectorIndexParams, trained: Trained, path: str, column: pa.Field,
           value_type: pa.DataType) -> np.ndarray:
    """Assign and encode every row into an Arrow file at ``path``; each row's partition."""
    schema = pa.schema([pa.field("part", pa.uint32()), pa.field("_rowid", pa.uint64()), column])
    metric = "dot" if params.metric == "dot" else "l2"
    parts_seen: list[np.ndarray] = []
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
        for vectors, row_ids in batches():
            if not len(vectors):
                continue
            native = normalize(vectors) if params.metric == "cosine" else np.asarray(vectors)
            x = native.astype(np.float32, copy=False)
            parts, _ = kmeans.assign(x, trained.centroids, metric)
            codes = _encode(native, x, parts, params, trained, value_type)
            writer.write_batch(pa.record_batch(
                [pa.array(parts), pa.array(np.asarray(row_ids, dtype=np.uint64)), _fsl(codes, column.type)],
                schema=schema))
            parts_seen.append(parts)
    return np.concatenate(parts_seen) if parts_seen else np.zeros(0, np.uint32)


def _write_aux(writer: LanceFileWriter, spilled: pa.Table, parts: np.ndarray, num_partitions: int,
               transpose: bool, schema: pa.Schema) -> np.ndarray:
    """Write the spilled rows partition by partition; each partition's length."""
    order = np.argsort(parts, kind="stable")  # stable: scan order kept within a partition
    lengths = np.bincount(parts, minlength=num_partitions).astype(np.int64)
    if transpose:  # PQ codes are transposed per partition: write whole partitions
        bounds = np.concatenate([[0], np.cumsum(lengths)])
        for p in np.flatnonzero(lengths):
            rows = spilled.take(pa.array(order[bounds[p]:bounds[p + 1]]))
            width = schema.field(1).type.list_size
            codes = rows.column(2).combine_chunks().flatten().to_numpy().reshape(-1, width)
            codes_arr = _fsl(pq.transpose_partition(codes), schema.field(1).type)
            writer.write_batch(pa.record_batch([rows.column(1).combine_chunks(), codes_arr], schema=schema))
        return lengths
    for start in range(0, len(order), _WRITE_ROWS):
        rows = spilled.take(pa.array(order[start:start + _WRITE_ROWS]))
        writer.write_batch(pa.record_batch([rows.column(1).combine_chunks(), rows.column(2).combine_chunks()],
                                           schema=schema))
    return lengths


def write_index(store: ObjectStore, directory: str, file_version: str, *, dim: int, value_type: pa.DataType,
                params: VectorIndexParams, trained: Trained, batches: Batches) -> list[tuple[str, int]]:
    """Encode every row from ``batches`` (``(vectors, row ids)``) and write the segment's two
    files under ``directory``; their ``(name, size)``."""
    num_partitions = len(trained.centroids)
    name, storage_type, nullable, storage_meta = _storage(params, trained, dim, value_type)
    column = pa.field(name, storage_type, nullable)
    aux_schema = pa.schema([pa.field("_rowid", pa.uint64(), True), column])
    with tempfile.TemporaryDirectory(prefix="lance-ivf-") as tmp:
        spill_path = os.path.join(tmp, "rows.arrow")
        parts = _spill(batches, params, trained, spill_path, column, value_type)
        with pa.memory_map(spill_path) as source:
            spilled = pa.ipc.open_file(source).read_all()
            aux = LanceFileWriter(f"{directory}/{AUX_FILE}", aux_schema, version=file_version, _store=store)
            aux.add_schema_metadata("distance_type", params.metric)
            aux.add_schema_metadata("lance:ivf", "1")
            aux.add_schema_metadata("storage_metadata", json.dumps([storage_meta]))
            transpose = isinstance(trained.quantizer, pq.ProductQuantizer) and not params.skip_transpose
            lengths = _write_aux(aux, spilled, parts, num_partitions, transpose, aux_schema)
            offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
            aux.add_global_buffer(_ivf_message(offsets, lengths))
            if isinstance(trained.quantizer, pq.ProductQuantizer):
                aux.add_global_buffer(trained.quantizer.tensor(*tensor_type(value_type)))
            aux.close()
            if params.hnsw:
                main = _write_graphs(store, f"{directory}/{INDEX_FILE}", file_version, spilled, parts, lengths,
                                     params, trained, value_type)
            del spilled
    if not params.hnsw:
        main = LanceFileWriter(f"{directory}/{INDEX_FILE}", pa.schema([pa.field("__flat_marker", pa.uint64(), False)]),
                               version=file_version, _store=store)
        _main_metadata(main, params)
        main.add_schema_metadata("lance:flat", json.dumps([""] * num_partitions, separators=(",", ":")))
        zeros = np.zeros(num_partitions, dtype=np.int64)
        main.add_global_buffer(_ivf_message(zeros, zeros, trained.centroids, trained.loss, value_type))
        main.close()
    return sorted([(AUX_FILE, int(aux.size_bytes or 0)), (INDEX_FILE, int(main.size_bytes or 0))])


def _main_metadata(main: LanceFileWriter, params: VectorIndexParams) -> None:
    main.add_schema_metadata("lance:index", json.dumps({"type": params.index_type, "distance_type": params.metric},
                                                       separators=(",", ":")))
    main.add_schema_metadata("lance:ivf", "1")


def _write_graphs(store: ObjectStore, path: str, file_version: str, spilled: pa.Table, parts: np.ndarray,
                  lengths: np.ndarray, params: VectorIndexParams, trained: Trained,
                  value_type: pa.DataType) -> LanceFileWriter:
    """IVF_HNSW: one HNSW graph per partition over its quantized vectors, into ``index.idx``."""
    rng = np.random.default_rng(params.seed)
    order = np.argsort(parts, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    main = LanceFileWriter(path, hnsw.GRAPH_SCHEMA, version=file_version, _store=store)
    _main_metadata(main, params)
    entries, graph_rows = [], []
    for p in range(len(lengths)):
        rows = spilled.take(pa.array(order[bounds[p]:bounds[p + 1]]))
        codes_column = rows.column(2).combine_chunks()
        width = codes_column.type.list_size
        codes = codes_column.flatten().to_numpy().reshape(-1, width)
        quantizer = trained.quantizer
        if isinstance(quantizer, pq.ProductQuantizer):
            x = quantizer.decode(codes)
            if params.metric != "dot":
                x = x + trained.centroids[p]
        elif isinstance(quantizer, sq.ScalarQuantizer):
            x = quantizer.decode(codes)
        else:
            x = codes.astype(np.float32)
        graph = hnsw.build(np.ascontiguousarray(x, dtype=np.float32), params.metric, rng)
        if graph.rows.num_rows:
            main.write_batch(graph.rows)
        entries.append(graph.metadata)
        graph_rows.append(graph.rows.num_rows)
    main.add_schema_metadata("lance:hnsw", json.dumps(entries, separators=(",", ":")))
    counts = np.asarray(graph_rows, dtype=np.int64)
    main.add_global_buffer(_ivf_message(np.concatenate([[0], np.cumsum(counts)[:-1]]), counts, trained.centroids,
                                        trained.loss, value_type))
    main.close()
    return main




def read_trained(store: IndexStore) -> tuple[str, str, Trained]:
    """``(index type, distance type, trained state)`` of an existing IVF segment (ours or
    pylance's): its centroids, and its PQ codebook or SQ bounds, to encode new rows alike."""
    main_meta = store.schema_metadata(INDEX_FILE)
    kind = json.loads(main_meta.get("lance:index", "{}"))
    main = index_pb2.IVF()
    main.ParseFromString(bytes(store._reader(INDEX_FILE).read_global_buffer(int(main_meta["lance:ivf"]))))
    tensor = main.centroids_tensor
    centroids = np.frombuffer(tensor.data, dtype=_TENSOR_DTYPES[tensor.data_type]).reshape(list(tensor.shape))
    storage_list = json.loads(store.schema_metadata(AUX_FILE).get("storage_metadata", "[]"))
    storage = json.loads(storage_list[0]) if storage_list else {}
    quantizer: pq.ProductQuantizer | sq.ScalarQuantizer | None = None
    index_type = str(kind.get("type", "IVF_FLAT"))
    if index_type == "IVF_PQ":
        book = index_pb2.Tensor()
        book.ParseFromString(bytes(store._reader(AUX_FILE).read_global_buffer(int(storage["codebook_position"]))))
        m, bits = int(storage["num_sub_vectors"]), int(storage["nbits"])
        raw = np.frombuffer(book.data, dtype=_TENSOR_DTYPES[book.data_type])
        quantizer = pq.from_codebook(raw.reshape(m, 1 << bits, -1), bits)
    elif index_type == "IVF_SQ":
        bounds = storage["bounds"]
        quantizer = sq.ScalarQuantizer(float(bounds["start"]), float(bounds["end"]), int(storage["num_bits"]))
    elif index_type != "IVF_FLAT":
        raise ValueError(f"{index_type} segments are not extended by this engine")
    trained = Trained(np.ascontiguousarray(centroids, dtype=np.float32), None, quantizer)
    return index_type, str(kind.get("distance_type", "l2")), trained


_TENSOR_DTYPES = {index_pb2.Tensor.FLOAT16: "<f2", index_pb2.Tensor.FLOAT32: "<f4", index_pb2.Tensor.FLOAT64: "<f8"}


__all__ = ["AUX_FILE", "INDEX_FILE", "Trained", "normalize", "read_trained", "train", "write_index"]
