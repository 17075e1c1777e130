"""Reading pylance's IVF_FLAT vector indices for ``nearest`` (``use_index`` with ``nprobes``).

An index directory ``_indices/<uuid>/`` holds ``index.idx`` (no rows; schema metadata
``lance:index`` = ``{"type": "IVF_FLAT", "distance_type": ...}`` and ``lance:ivf`` = the global
buffer holding the ``IVF`` protobuf with the centroids tensor) and ``auxiliary.idx`` (rows
``_rowid`` and ``flat`` sorted by partition; its own ``IVF`` protobuf gives each partition's row
offset and length). A search probes the ``nprobes`` partitions whose centroids are nearest the
query and measures their vectors exactly, so it returns what pylance's IVF_FLAT returns.

Only what is certain is used: l2 indices, an explicit ``nprobes`` (pylance then probes exactly
that many partitions), no prefilter. Anything else searches flat (exact), never worse in recall.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from lance_format.file.api import LanceFileReader

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def _fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of a protobuf message (a small reader: IVF and Tensor
    hold only varints, doubles, floats and length-delimited fields)."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            yield number, wire, value
        elif wire == 1:
            yield number, wire, data[pos:pos + 8]
            pos += 8
        elif wire == 2:
            size, pos = _varint(data, pos)
            yield number, wire, data[pos:pos + size]
            pos += size
        elif wire == 5:
            yield number, wire, data[pos:pos + 4]
            pos += 4
        else:
            raise ValueError(f"unexpected protobuf wire type {wire}")


def _packed_varints(value: int | bytes) -> list[int]:
    if isinstance(value, int):
        return [value]
    out, pos = [], 0
    while pos < len(value):
        item, pos = _varint(value, pos)
        out.append(item)
    return out


@dataclass(frozen=True)
class Ivf:
    """An ``IVF`` protobuf: centroids (partitions x dim, or None), partition offsets and lengths."""

    centroids: np.ndarray | None
    offsets: np.ndarray
    lengths: np.ndarray


_TENSOR_TYPES = {1: np.float16, 2: np.float32, 3: np.float64}


def parse_ivf(data: bytes) -> Ivf:
    centroids, offsets, lengths = None, [], []
    for number, _, value in _fields(data):
        if number == 2:
            offsets += _packed_varints(value)
        elif number == 3:
            lengths += _packed_varints(value)
        elif number == 4 and isinstance(value, bytes):
            dtype, shape, raw = 2, [], b""
            for tn, _, tv in _fields(value):
                if tn == 1 and isinstance(tv, int):
                    dtype = tv
                elif tn == 2:
                    shape += _packed_varints(tv)
                elif tn == 3 and isinstance(tv, bytes):
                    raw = tv
            if dtype not in _TENSOR_TYPES:
                raise ValueError(f"centroids of tensor type {dtype}")
            centroids = np.frombuffer(raw, dtype=_TENSOR_TYPES[dtype]).reshape(shape).astype(np.float32)
    return Ivf(centroids, np.asarray(offsets, dtype=np.int64), np.asarray(lengths, dtype=np.int64))


@dataclass(frozen=True, eq=False)
class IvfFlatIndex:
    """One IVF_FLAT index of a column: its partitions and the fragments it covers."""

    name: str
    directory: str
    centroids: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray
    fragments: frozenset[int]

    def partitions(self, query: np.ndarray, nprobes: int) -> np.ndarray:
        """The ``nprobes`` partitions whose centroids are nearest ``query`` (l2)."""
        distances = ((self.centroids - query) ** 2).sum(axis=1)
        return np.argsort(distances, kind="stable")[:nprobes]

    def rows(self, partitions: np.ndarray) -> Iterator[pa.RecordBatch]:
        """The ``_rowid`` and ``flat`` rows of the partitions."""
        reader = LanceFileReader(posixpath.join(self.directory, "auxiliary.idx"))
        for partition in partitions:
            start, length = int(self.offsets[partition]), int(self.lengths[partition])
            if length:
                yield from reader.read_range(start, length).to_batches()


def _uuid(raw: bytes) -> str:
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def ivf_flat_index(dataset: LanceDataset, column: str) -> IvfFlatIndex | None:
    """The table's IVF_FLAT l2 index on ``column`` (None: none, or of another kind)."""
    section = dataset.manifest_file.index_section
    if section is None:
        return None
    field_id = dataset.lance_schema.field(column).id
    for index in section.indices:
        if list(index.fields) != [field_id] or not index.index_details.type_url.endswith("VectorIndexDetails"):
            continue
        directory = posixpath.join(dataset.uri, "_indices", _uuid(index.uuid.uuid))
        try:
            main = LanceFileReader(posixpath.join(directory, "index.idx"))
            metadata = {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v
                        for k, v in (main.metadata().schema.metadata or {}).items()}
            kind = json.loads(metadata.get("lance:index", "{}"))
            if kind.get("type") != "IVF_FLAT" or kind.get("distance_type") != "l2":
                return None
            centroids = parse_ivf(bytes(main.read_global_buffer(int(metadata["lance:ivf"])))).centroids
            aux = LanceFileReader(posixpath.join(directory, "auxiliary.idx"))
            aux_meta = {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v
                        for k, v in (aux.metadata().schema.metadata or {}).items()}
            layout = parse_ivf(bytes(aux.read_global_buffer(int(aux_meta["lance:ivf"]))))
        except (OSError, KeyError, ValueError):
            return None  # not a layout read here: the search stays flat (exact)
        if centroids is None or len(layout.offsets) != len(centroids):
            return None
        covered = (frozenset(BitMap.deserialize(bytes(index.fragment_bitmap))) if index.fragment_bitmap
                   else frozenset(f.fragment_id for f in dataset.get_fragments()))
        return IvfFlatIndex(index.name, directory, centroids, layout.offsets, layout.lengths, covered)
    return None


__all__ = ["Ivf", "IvfFlatIndex", "ivf_flat_index", "parse_ivf"]
