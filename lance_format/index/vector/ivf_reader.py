"""Reading one segment of a pylance vector index (``_indices/<uuid>/``) of every IVF kind:
IVF_FLAT, IVF_PQ, IVF_SQ, IVF_HNSW_SQ and IVF_HNSW_PQ, as pylance 14.0.2 writes them.

``index.idx``: schema metadata ``lance:index`` = ``{"type": ..., "distance_type": ...}`` and
``lance:ivf`` = the number of the global buffer holding the ``IVF`` protobuf whose
``centroids_tensor`` holds the partition centroids. Its rows are empty (``__flat_marker``) except
for the HNSW kinds, whose rows are the graphs (``__vector_id``, ``__neighbors``, ``_distance``;
``lance:hnsw`` lists each partition's entry point and level offsets).

``auxiliary.idx``: the storage, rows sorted by partition (its own ``IVF`` protobuf gives each
partition's row offset and length): ``_rowid`` and ``flat`` (IVF_FLAT: the vectors, normalized
for cosine), ``__pq_code`` (PQ: ``num_sub_vectors`` bytes a row, stored *transposed* within each
partition: all rows' first bytes, then all second bytes, ...; the codebook is the ``Tensor``
protobuf in global buffer ``codebook_position``, ``(num_sub_vectors, 2**nbits, sub_dim)`` when
flattened) or ``__sq_code`` (SQ: one byte a dimension over the ``bounds`` in
``storage_metadata``).

This module only reads (one cached, immutable :class:`VectorIndexSegment` per segment); the
search lives in :mod:`lance_format.dataset.scan.ivf`.
"""

from __future__ import annotations

import json
import posixpath
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lance_format.errors import CorruptFileError, UnsupportedFeatureError
from lance_format.file.api import LanceFileReader
from lance_format.index.vector.hnsw_search import HnswGraphs, read_graphs
from lance_format.index.vector.pq_distance import PqCodebook
from lance_format.index.vector.sq_distance import SqBounds
from lance_format.proto import index_pb2

VECTOR_INDEX_TYPES = ("IVF_FLAT", "IVF_PQ", "IVF_SQ", "IVF_HNSW_SQ", "IVF_HNSW_PQ", "IVF_HNSW_FLAT")
_TENSOR_DTYPES = {index_pb2.Tensor.FLOAT16: np.float16, index_pb2.Tensor.FLOAT32: np.float32,
                  index_pb2.Tensor.FLOAT64: np.float64, index_pb2.Tensor.UINT8: np.uint8}
_CODE_COLUMNS = ("flat", "__pq_code", "__sq_code")


def tensor_array(tensor: index_pb2.Tensor, where: str) -> np.ndarray:
    """A ``Tensor`` protobuf as a numpy array of its shape."""
    dtype = _TENSOR_DTYPES.get(tensor.data_type)
    if dtype is None:
        raise UnsupportedFeatureError(f"{where}: tensor of data type {tensor.data_type} cannot be read")
    values = np.frombuffer(tensor.data, dtype=dtype)
    shape = list(tensor.shape)
    if int(np.prod(shape)) != len(values):
        raise CorruptFileError(f"{where}: tensor of shape {shape} holds {len(values)} values")
    return values.reshape(shape)


def _metadata(reader: LanceFileReader) -> dict[str, str]:
    raw = reader.metadata().schema.metadata or {}
    return {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
            for k, v in raw.items()}


def _ivf(reader: LanceFileReader, metadata: dict[str, str], where: str) -> index_pb2.IVF:
    if "lance:ivf" not in metadata:
        raise CorruptFileError(f"{where}: no lance:ivf metadata")
    message = index_pb2.IVF()
    message.ParseFromString(bytes(reader.read_global_buffer(int(metadata["lance:ivf"]))))
    return message


@dataclass(frozen=True, eq=False)
class VectorIndexSegment:
    """One segment's centroids, partition layout and storage (row ids and codes, in memory once
    read: pylance keeps a searched index in memory as well)."""

    directory: str
    index_type: str  # pylance's name, e.g. "IVF_PQ"
    metric: str  # "l2", "cosine", "dot" or "hamming"
    centroids: np.ndarray  # (partitions, dim)
    offsets: np.ndarray
    lengths: np.ndarray
    code_column: str  # "flat", "__pq_code" or "__sq_code"
    pq: PqCodebook | None = None
    sq: SqBounds | None = None
    _storage: list[Any] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _graphs: list[HnswGraphs] = field(default_factory=list, repr=False)

    @property
    def is_hnsw(self) -> bool:
        return "HNSW" in self.index_type

    def graphs(self) -> HnswGraphs:
        """The HNSW graphs of the partitions (IVF_HNSW_* only), read once."""
        with self._lock:
            if not self._graphs:
                self._graphs.append(read_graphs(self.directory))
            return self._graphs[0]

    @property
    def num_partitions(self) -> int:
        return len(self.centroids)

    @property
    def quantizer(self) -> str:
        """"FLAT", "PQ" or "SQ"."""
        return {"flat": "FLAT", "__pq_code": "PQ", "__sq_code": "SQ"}[self.code_column]

    def _table(self) -> tuple[np.ndarray, np.ndarray]:
        with self._lock:
            if not self._storage:
                reader = LanceFileReader(posixpath.join(self.directory, "auxiliary.idx"))
                table = reader.read_all(batch_size=1 << 16).to_table()
                row_ids = np.asarray(table.column("_rowid").to_numpy(zero_copy_only=False), dtype=np.uint64)
                codes = table.column(self.code_column).combine_chunks()
                width = codes.type.list_size
                values = np.asarray(codes.flatten().to_numpy(zero_copy_only=False))
                if self.pq is not None:
                    # PQ codes kept sub-vector major, (code bytes, rows): a partition's bytes of
                    # one sub-vector are then contiguous (pylance stores them so within each
                    # partition when ``transposed``)
                    matrix = np.empty((width, len(codes)), dtype=values.dtype)
                    if self.pq.transposed:
                        for start, length in zip(self.offsets.tolist(), self.lengths.tolist()):
                            block = values[start * width:(start + length) * width]
                            matrix[:, start:start + length] = block.reshape(width, length)
                    else:
                        matrix[:] = values.reshape(len(codes), width).T
                    matrix = self.pq.positions(matrix)
                else:
                    matrix = values.reshape(len(codes), width)
                self._storage.append((row_ids, np.ascontiguousarray(matrix)))
            return self._storage[0]

    def row_ids(self, partitions: np.ndarray) -> np.ndarray:
        """The row ids of the partitions, in their order."""
        row_ids, _ = self._table()
        return np.concatenate([row_ids[int(self.offsets[p]):int(self.offsets[p] + self.lengths[p])]
                               for p in partitions]) if len(partitions) else row_ids[:0]

    def pq_codes(self, partition: int) -> np.ndarray:
        """A PQ partition's codes as positions in a flattened lookup table (sub-vector ``m``'s
        code ``c`` at ``m * 2**nbits + c``), sub-vector major: (num_sub_vectors, rows)."""
        _, codes = self._table()
        start = int(self.offsets[partition])
        return codes[:, start:start + int(self.lengths[partition])]

    def partition(self, partition: int) -> tuple[np.ndarray, np.ndarray]:
        """(row ids, codes) of one partition: codes are (rows, dim) vectors (FLAT), (rows,
        code bytes) (PQ, un-transposed) or (rows, dim) bytes (SQ)."""
        row_ids, codes = self._table()
        start, length = int(self.offsets[partition]), int(self.lengths[partition])
        if self.pq is not None:  # the centroid numbers, (rows, num_sub_vectors)
            per = np.arange(self.pq.num_sub_vectors)[:, None] << self.pq.nbits
            return row_ids[start:start + length], (codes[:, start:start + length] - per).T
        return row_ids[start:start + length], codes[start:start + length]

    def partitions(self, partitions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(row ids, codes, each row's position in ``partitions``) of several FLAT or SQ
        partitions (PQ: :meth:`pq_codes`)."""
        row_ids, codes = self._table()
        starts, lengths = self.offsets[partitions], self.lengths[partitions]
        if len(partitions) == 1:
            start, length = int(starts[0]), int(lengths[0])
            return (row_ids[start:start + length], codes[start:start + length],
                    np.zeros(length, dtype=np.intp))
        total = int(lengths.sum())
        # every row number of the partitions, without a loop: start of its run + its place in it
        runs = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
        rows = runs + np.arange(total)
        which = np.repeat(np.arange(len(partitions), dtype=np.intp), lengths)
        return row_ids[rows], codes[rows], which


def read_segment(directory: str) -> VectorIndexSegment:
    """Open the vector index segment in ``directory`` (pylance's files, see the module docstring).

    Raises
    ------
    UnsupportedFeatureError
        An index kind or storage this reader does not know (e.g. IVF_RQ).
    CorruptFileError
        Inconsistent metadata (missing keys, a partition layout not matching the centroids).
    """
    main = LanceFileReader(posixpath.join(directory, "index.idx"))
    meta = _metadata(main)
    kind = json.loads(meta.get("lance:index", "{}"))
    index_type, metric = str(kind.get("type", "")), str(kind.get("distance_type", "l2")).lower()
    if index_type not in VECTOR_INDEX_TYPES:
        raise UnsupportedFeatureError(f"vector index {directory}: type {index_type or '?'} cannot be searched "
                                      "through its index")
    ivf = _ivf(main, meta, f"{directory}/index.idx")
    centroids = tensor_array(ivf.centroids_tensor, f"{directory}/index.idx centroids")
    aux = LanceFileReader(posixpath.join(directory, "auxiliary.idx"))
    aux_meta = _metadata(aux)
    layout = _ivf(aux, aux_meta, f"{directory}/auxiliary.idx")
    if len(layout.offsets) != len(centroids) or len(layout.lengths) != len(centroids):
        raise CorruptFileError(f"vector index {directory}: {len(layout.offsets)} partitions stored, "
                               f"{len(centroids)} centroids")
    names = aux.metadata().schema.names
    code_column = next((n for n in _CODE_COLUMNS if n in names), None)
    if code_column is None:
        raise UnsupportedFeatureError(f"vector index {directory}: storage columns {names} cannot be read")
    storage = json.loads(aux_meta.get("storage_metadata", "[]"))
    settings = json.loads(storage[0]) if storage else {}
    pq = sq = None
    if code_column == "__pq_code":
        position = int(settings["codebook_position"])
        codebook = index_pb2.Tensor()
        codebook.ParseFromString(bytes(aux.read_global_buffer(position)))
        pq = PqCodebook.from_flat(tensor_array(codebook, f"{directory}/auxiliary.idx codebook"),
                                  num_sub_vectors=int(settings["num_sub_vectors"]), nbits=int(settings["nbits"]),
                                  transposed=bool(settings.get("transposed", False)), metric=metric)
    elif code_column == "__sq_code":
        bounds = settings["bounds"]
        sq = SqBounds(float(bounds["start"]), float(bounds["end"]), int(settings.get("num_bits", 8)), metric)
    numeric = centroids if centroids.dtype == np.uint8 else centroids.astype(np.float32)
    return VectorIndexSegment(directory, index_type, metric, numeric,
                              np.asarray(layout.offsets, dtype=np.int64), np.asarray(layout.lengths, dtype=np.int64),
                              code_column, pq, sq)


_SEGMENTS: OrderedDict[str, VectorIndexSegment] = OrderedDict()
_SEGMENTS_LOCK = threading.Lock()
SEGMENTS_CACHED = 8  # segments kept open (each holds its storage once searched)


def cached_segment(directory: str) -> VectorIndexSegment:
    """:func:`read_segment`, cached for the last few segments (a segment's files never change)."""
    with _SEGMENTS_LOCK:
        found = _SEGMENTS.get(directory)
        if found is not None:
            _SEGMENTS.move_to_end(directory)
            return found
    segment = read_segment(directory)
    with _SEGMENTS_LOCK:
        _SEGMENTS[directory] = segment
        while len(_SEGMENTS) > SEGMENTS_CACHED:
            _SEGMENTS.popitem(last=False)
    return segment


__all__ = ["VECTOR_INDEX_TYPES", "VectorIndexSegment", "cached_segment", "read_segment", "tensor_array"]
