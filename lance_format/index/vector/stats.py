"""What ``describe_indices`` and ``stats.index_stats`` report for a vector index segment, read
from its files the way pylance 14.0.2 reports its own (IVF_FLAT, IVF_PQ, IVF_SQ; HNSW segments
get the same fields with the sub-index's stored metadata)."""

from __future__ import annotations

import json
import posixpath
from typing import Any

import numpy as np

from lance_format.index.store import IndexStore
from lance_format.proto import index_pb2

_TENSOR_DTYPES = {index_pb2.Tensor.FLOAT16: "<f2", index_pb2.Tensor.FLOAT32: "<f4", index_pb2.Tensor.FLOAT64: "<f8"}


def _ivf(store: IndexStore, name: str) -> index_pb2.IVF:
    meta = store.schema_metadata(name)
    message = index_pb2.IVF()
    message.ParseFromString(bytes(store._reader(name).read_global_buffer(int(meta["lance:ivf"]))))
    return message


def index_kind(store: IndexStore) -> tuple[str, str]:
    """``(index type, distance type)`` from ``index.idx``'s ``lance:index`` metadata."""
    kind = json.loads(store.schema_metadata("index.idx").get("lance:index", "{}"))
    return str(kind.get("type", "Vector")), str(kind.get("distance_type", "l2"))


def _sub_index(kind: str, metric: str, storage: dict[str, Any], graph: dict[str, Any]) -> dict[str, Any]:
    if kind.endswith("_PQ") and not kind.startswith("IVF_HNSW"):
        # pylance's PQ measures cosine rows (normalized at build) in l2
        return {"metric_type": "l2" if metric == "cosine" else metric, "nbits": storage.get("nbits"), "num_sub_vectors": storage.get("num_sub_vectors"),
                "dimension": storage.get("dimension"), "index_type": "PQ", "transposed": storage.get("transposed")}
    if kind.endswith("_SQ") and not kind.startswith("IVF_HNSW"):
        return {"dim": storage.get("dim"), "num_bits": storage.get("num_bits"), "bounds": storage.get("bounds"),
                "index_type": "SQ", "metric_type": metric}
    if kind.startswith("IVF_HNSW"):  # the first partition's graph entry, then the storage's fields
        quantized = {k: v for k, v in storage.items() if k not in ("codebook_tensor", "codebook_position")}
        if kind.endswith("_PQ"):
            quantized["metric_type"] = "l2" if metric == "cosine" else metric
        return {**graph, **quantized, "index_type": "HNSW", "metric_type": quantized.get("metric_type", metric)}
    return {"dim": storage.get("dim"), "index_type": "FLAT", "metric_type": metric}


def segment_statistics(store: IndexStore) -> dict[str, Any]:
    """The segment's entry of ``index_stats(...)["indices"]``."""
    kind, metric = index_kind(store)
    main = _ivf(store, "index.idx")
    layout = _ivf(store, "auxiliary.idx")
    tensor = main.centroids_tensor
    centroids = np.frombuffer(tensor.data, dtype=_TENSOR_DTYPES.get(tensor.data_type, "<f4")).reshape(
        list(tensor.shape)) if tensor.data else np.zeros((0, 0), np.float32)
    storage_list = json.loads(store.schema_metadata("auxiliary.idx").get("storage_metadata", "[]"))
    storage = json.loads(storage_list[0]) if storage_list else {}
    graphs = json.loads(store.schema_metadata("index.idx").get("lance:hnsw", "[]"))
    graph = json.loads(graphs[0]) if graphs else {}
    out: dict[str, Any] = {
        "index_type": kind, "uuid": store.uuid,
        "uri": posixpath.join(store.store.uri.removeprefix("file://"), store.path("index.idx")),
        "metric_type": metric, "num_partitions": len(layout.lengths), "sub_index": _sub_index(kind, metric, storage, graph),
        "partitions": [{"size": int(n)} for n in layout.lengths], "centroids": centroids.astype(np.float64).tolist(),
    }
    if main.HasField("loss"):
        out["loss"] = main.loss
    out["index_file_version"] = "V3"
    return out


__all__ = ["index_kind", "segment_statistics"]
