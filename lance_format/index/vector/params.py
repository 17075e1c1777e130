"""Build parameters of pylance's vector index types: names, defaults, validation, details message.

pylance 14.0.2's ``create_index`` names: ``metric`` (``distance_type``), ``num_partitions``,
``num_sub_vectors``, ``num_bits``, ``sample_rate``, ``max_iters``, ``ivf_centroids``,
``pq_codebook``, ``target_partition_size``. Defaults (from its builds): ``sample_rate`` 256 rows
per partition (IVF) or per code (PQ/SQ), ``max_iters`` 50, ``num_bits`` 8, ``num_partitions``
``rows // target_partition_size`` clamped to [1, 4096] (4096 rows per partition for IVF_FLAT,
8192 for IVF_PQ and IVF_SQ) and at most the row count. The ``index_details`` message is a
``lance.index.pb.VectorIndexDetails`` with pylance's ``runtime_hints``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lance_format.proto import index_pb2

VECTOR_TYPE_URL = "/lance.index.pb.VectorIndexDetails"
#: the types pylance's create_index accepts, in its error message's order
PYLANCE_VECTOR_TYPES = ("IVF_FLAT", "IVF_PQ", "IVF_SQ", "IVF_HNSW_FLAT", "IVF_HNSW_PQ", "IVF_HNSW_SQ", "IVF_RQ")
#: the types this engine builds
BUILT_TYPES = ("IVF_FLAT", "IVF_PQ", "IVF_SQ", "IVF_HNSW_SQ", "IVF_HNSW_PQ")
TARGET_PARTITION_SIZE = {"IVF_FLAT": 4096, "IVF_PQ": 8192, "IVF_SQ": 8192, "IVF_RQ": 4096, "IVF_HNSW_FLAT": 1 << 20,
                         "IVF_HNSW_SQ": 1 << 20, "IVF_HNSW_PQ": 1 << 20}
MAX_PARTITIONS = 4096
PYLANCE_METRICS = ("l2", "cosine", "euclidean", "dot", "hamming")
_METRIC_ENUM = {"l2": index_pb2.L2, "cosine": index_pb2.Cosine, "dot": index_pb2.Dot}


def canonical_metric(metric: str) -> str:
    """``euclidean`` is l2; the rest lower-cased."""
    text = metric.lower()
    return "l2" if text == "euclidean" else text


@dataclass
class VectorIndexParams:
    """One build's parameters, validated."""

    index_type: str
    metric: str = "l2"
    num_partitions: int | None = None
    num_sub_vectors: int | None = None
    num_bits: int = 8
    sample_rate: int = 256
    max_iters: int = 50
    target_partition_size: int | None = None
    ivf_centroids: np.ndarray | None = None
    pq_codebook: np.ndarray | None = None
    #: SQ bounds ``(start, end)`` trained elsewhere (a distributed build's driver): not trained again
    sq_bounds: tuple[float, float] | None = None
    shuffle_partition_batches: int = 10240
    shuffle_partition_concurrency: int = 2
    skip_transpose: bool = False
    seed: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def hnsw(self) -> bool:
        return self.index_type.startswith("IVF_HNSW")

    @property
    def quantizer(self) -> str:
        return self.index_type.rsplit("_", 1)[-1].lower()  # flat / pq / sq

    @property
    def pretrained(self) -> bool:
        """Whether every trained artifact is given (centroids, and the codebook or SQ bounds):
        a build then needs no training sample."""
        if self.ivf_centroids is None:
            return False
        return {"pq": self.pq_codebook is not None, "sq": self.sq_bounds is not None}.get(self.quantizer, True)

    def partitions_for(self, num_rows: int) -> int:
        """The partition count for ``num_rows`` training rows (pylance clamps to the row count)."""
        if self.ivf_centroids is not None:
            return int(len(self.ivf_centroids))
        if self.num_partitions is not None:
            wanted = int(self.num_partitions)
        else:
            target = self.target_partition_size or TARGET_PARTITION_SIZE.get(self.index_type, 8192)
            wanted = min(max(num_rows // int(target), 1), MAX_PARTITIONS)
        return max(1, min(wanted, num_rows))

    def runtime_hints(self) -> dict[str, str]:
        hints = {"lance.ivf.max_iters": str(self.max_iters), "lance.ivf.sample_rate": str(self.sample_rate),
                 "lance.ivf.shuffle_partition_batches": str(self.shuffle_partition_batches),
                 "lance.ivf.shuffle_partition_concurrency": str(self.shuffle_partition_concurrency),
                 "lance.skip_transpose": "true" if self.skip_transpose else "false"}
        if self.quantizer == "pq":
            hints.update({"lance.pq.max_iters": str(self.max_iters), "lance.pq.sample_rate": str(self.sample_rate),
                          "lance.pq.kmeans_redos": "1"})
        if self.quantizer == "sq":
            hints["lance.sq.sample_rate"] = str(self.sample_rate)
        if self.hnsw:
            hints["lance.hnsw.prefetch_distance"] = "2"
        return hints

    def details(self) -> bytes:
        """The serialized ``VectorIndexDetails`` (pylance's ``index_details`` value)."""
        message = index_pb2.VectorIndexDetails(metric_type=_METRIC_ENUM[self.metric])
        if self.target_partition_size is not None and self.num_partitions is None:
            message.target_partition_size = int(self.target_partition_size)
        if self.quantizer == "pq":
            message.pq.num_bits = self.num_bits
            message.pq.num_sub_vectors = int(self.num_sub_vectors or 0)
        elif self.quantizer == "sq":
            message.sq.num_bits = self.num_bits
        else:
            message.flat.SetInParent()
        if self.hnsw:
            message.hnsw_index_config.max_connections = 20
            message.hnsw_index_config.construction_ef = 150
            message.hnsw_index_config.max_level = 7
        for key, value in self.runtime_hints().items():
            message.runtime_hints[key] = value
        return message.SerializeToString(deterministic=True)


_METRIC_NAMES = {index_pb2.L2: "L2", index_pb2.Cosine: "COSINE", index_pb2.Dot: "DOT", index_pb2.Hamming: "HAMMING"}


def describe_details(details: bytes) -> tuple[str | None, dict[str, Any]]:
    """The index type a ``VectorIndexDetails`` names (None when it names none: older indices)
    and the ``details`` dict pylance's ``describe_indices`` shows for it."""
    message = index_pb2.VectorIndexDetails()
    message.ParseFromString(details)
    out: dict[str, Any] = {"metric_type": _METRIC_NAMES.get(message.metric_type, "L2")}
    kind = message.WhichOneof("compression")
    if kind == "pq":
        out["compression"] = {"type": "pq", "num_bits": message.pq.num_bits,
                              "num_sub_vectors": message.pq.num_sub_vectors}
    elif kind == "sq":
        out["compression"] = {"type": "sq", "num_bits": message.sq.num_bits}
    elif kind == "rq":
        out["compression"] = {"type": "rq", "num_bits": message.rq.num_bits}
    if message.target_partition_size:
        out["target_partition_size"] = message.target_partition_size
    if message.runtime_hints:
        out["runtime_hints"] = dict(message.runtime_hints)
    if kind is None:
        return None, out
    name = {"pq": "PQ", "sq": "SQ", "rq": "RQ", "flat": "FLAT"}[kind]
    return ("IVF_HNSW_" if message.HasField("hnsw_index_config") else "IVF_") + name, out


__all__ = ["BUILT_TYPES", "PYLANCE_METRICS", "PYLANCE_VECTOR_TYPES", "VECTOR_TYPE_URL", "VectorIndexParams",
           "canonical_metric", "describe_details"]
