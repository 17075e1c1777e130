"""The indices of one table version: named indices, their segments, and loaded segments.

Segments are loaded lazily and cached per process by their directory (index files never change
once written, so a cached segment stays valid for every version that lists it). A segment whose
``index_details`` type URL is not registered is *unknown*: it is listed and described but never
searched, so the fragments it covers are scanned. A segment committed without details (older
writers, or pylance's distributed ``LanceOperation.CreateIndex(Index(...))``) gets them inferred
from its files and column, as pylance infers them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from lance_format.index.metadata import Segment, user_segments
from lance_format.index.scalar.base import ScalarIndex, ScalarIndexType, by_type_url
from lance_format.index.store import IndexStore
from lance_format.index.vector.params import VECTOR_TYPE_URL
from lance_format.io import ObjectStore
from lance_format.proto import table_pb2
from lance_format.table.rowids import read_row_ids

_CACHE_SEGMENTS = 32


class _SegmentCache:
    """Loaded segments by (root URI, uuid), least recently used dropped first."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._items: OrderedDict[tuple[str, str], ScalarIndex] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str], load: Callable[[], ScalarIndex]) -> ScalarIndex:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
                return found
        loaded = load()
        with self._lock:
            self._items[key] = loaded
            while len(self._items) > self._capacity:
                self._items.popitem(last=False)
        return loaded


SEGMENT_CACHE = _SegmentCache(_CACHE_SEGMENTS)


@dataclass
class NamedIndex:
    """One index by name: its segments (in manifest order), field ids and type (None: unknown)."""

    name: str
    segments: list[Segment]
    field_ids: list[int]
    index_type: type[ScalarIndexType] | None

    @property
    def type_url(self) -> str:
        return self.segments[0].type_url

    @property
    def fragment_ids(self) -> BitMap:
        covered = BitMap()
        for segment in self.segments:
            covered |= segment.fragment_ids
        return covered


def display_type(type_url: str) -> str:
    """A type name for an index type this engine does not know, from its type URL
    (``/lance.table.InvertedIndexDetails`` -> ``Inverted``)."""
    found = by_type_url(type_url)
    if found is not None:
        return found.display_name
    tail = type_url.rsplit(".", 1)[-1].rsplit("/", 1)[-1]
    return tail[: -len("IndexDetails")] if tail.endswith("IndexDetails") else (tail or "Unknown")


def _inferred_type_url(store: IndexStore, data_type: pa.DataType | None, files: list[str]) -> str:
    """pylance's inference for a segment without ``index_details``: a legacy vector index file,
    full-text files, a vector column, a list column (LABEL_LIST), a bitmap lookup file, else BTREE."""
    if "index.idx" in files:
        return VECTOR_TYPE_URL
    if store.exists("metadata.lance") or store.exists("invert.lance"):
        return "/lance.table.InvertedIndexDetails"
    if data_type is not None and pa.types.is_fixed_size_list(data_type):
        return VECTOR_TYPE_URL
    if data_type is not None and (pa.types.is_list(data_type) or pa.types.is_large_list(data_type)):
        return "/lance.table.LabelListIndexDetails"
    if store.exists("bitmap_page_lookup.lance"):
        return "/lance.table.BitmapIndexDetails"
    return "/lance.table.BTreeIndexDetails"


class IndexCatalog:
    """The user indices of one manifest, and the stores their segments live in.

    ``field_types`` (field id -> Arrow type) lets a segment without details have them inferred.
    """

    def __init__(self, section: table_pb2.IndexSection | None, store_for: Callable[[int | None], ObjectStore],
                 file_version: str, field_types: Callable[[int], pa.DataType | None] | None = None) -> None:
        self._store_for = store_for
        self._file_version = file_version
        by_name: dict[str, list[Segment]] = {}
        for segment in user_segments(section):
            if not segment.type_url:
                segment = self._with_inferred_details(segment, field_types)
            by_name.setdefault(segment.name, []).append(segment)
        self._manifest_order = {name: at for at, name in enumerate(by_name)}
        self.indices: dict[str, NamedIndex] = {
            name: NamedIndex(name, segs, list(segs[0].meta.fields), by_type_url(segs[0].type_url))
            for name, segs in sorted(by_name.items())
        }

    def _with_inferred_details(self, segment: Segment,
                               field_types: Callable[[int], pa.DataType | None] | None) -> Segment:
        fields = list(segment.meta.fields)
        data_type = field_types(fields[0]) if field_types is not None and len(fields) == 1 else None
        meta = type(segment.meta)()
        meta.CopyFrom(segment.meta)  # the manifest's own message stays as written
        files = [f.path for f in segment.meta.files]
        meta.index_details.type_url = _inferred_type_url(self.store(segment), data_type, files)
        return Segment(meta, details_inferred=True)

    def names(self) -> list[str]:
        return list(self.indices)

    def get(self, name: str) -> NamedIndex | None:
        return self.indices.get(name)

    def on_field(self, field_id: int) -> list[NamedIndex]:
        """Known single-field indices on ``field_id`` that answer filters: the one covering most fragments first
        (an untrained or older index covers fewer), then the first created (pylance's choice)."""
        found = [i for i in self.indices.values() if i.index_type is not None and i.index_type.answers_filters
                 and i.field_ids == [field_id]]
        return sorted(found, key=lambda i: (-len(i.fragment_ids), self._manifest_order[i.name]))

    def store(self, segment: Segment) -> IndexStore:
        return IndexStore(self._store_for(segment.base_id), segment.uuid, self._file_version)

    def load(self, segment: Segment) -> ScalarIndex:
        """The loaded segment (cached)."""
        index_type = by_type_url(segment.type_url)
        if index_type is None:
            raise KeyError(segment.type_url)
        store = self.store(segment)
        details = bytes(segment.meta.index_details.value)
        return SEGMENT_CACHE.get((store.store.uri, segment.uuid), lambda: index_type.load(store, details))


class RowIdLookup:
    """Stable row id -> row address for the fragments of one version (built once, vectorized)."""

    def __init__(self, store: ObjectStore, fragments: list[Any]) -> None:
        ids: list[np.ndarray] = []
        addresses: list[np.ndarray] = []
        for fragment in fragments:
            row_ids = read_row_ids(store, fragment)
            if row_ids is None:
                continue
            ids.append(np.asarray(row_ids, dtype=np.uint64))
            addresses.append((np.uint64(fragment.id) << np.uint64(32))
                             | np.arange(len(row_ids), dtype=np.uint64))
        all_ids = np.concatenate(ids) if ids else np.zeros(0, np.uint64)
        all_addresses = np.concatenate(addresses) if addresses else np.zeros(0, np.uint64)
        order = np.argsort(all_ids, kind="stable")
        self._ids = all_ids[order]
        self._addresses = all_addresses[order]

    def address_of(self, row_ids: np.ndarray) -> np.ndarray:
        """Each id's address, in the ids' order (the last one an id has; ``2**64 - 1`` for an id
        not in these fragments)."""
        missing = np.full(len(row_ids), np.iinfo(np.uint64).max, dtype=np.uint64)
        if not len(self._ids):
            return missing
        at = np.searchsorted(self._ids, row_ids, "right") - 1
        found = (at >= 0) & (self._ids[np.maximum(at, 0)] == row_ids)
        missing[found] = self._addresses[at[found]]
        return missing

    def addresses(self, row_ids: np.ndarray) -> np.ndarray:
        """The sorted addresses of the ``row_ids`` (every address an id has: an updated row's
        old copy keeps its id in a deleted slot, which the caller's deletion check drops)."""
        if not len(row_ids) or not len(self._ids):
            return np.zeros(0, np.uint64)
        left = np.searchsorted(self._ids, row_ids, "left")
        right = np.searchsorted(self._ids, row_ids, "right")
        counts = right - left
        total = int(counts.sum())
        if total == 0:
            return np.zeros(0, np.uint64)
        # positions left[i], left[i] + 1, ..., right[i] - 1 for every i, without a loop
        starts = np.repeat(left - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
        positions = starts + np.arange(total)
        return np.sort(self._addresses[positions])


_LOOKUPS: OrderedDict[tuple[str, str, tuple[int, ...]], RowIdLookup] = OrderedDict()
_LOOKUPS_LOCK = threading.Lock()


def row_id_lookup(store: ObjectStore, version_key: str, fragments: list[Any]) -> RowIdLookup:
    """The :class:`RowIdLookup` of ``fragments`` of one version (``version_key``: its manifest's
    path), cached for the last few versions: a version's row ids never change."""
    key = (store.uri, version_key, tuple(sorted(int(f.id) for f in fragments)))
    with _LOOKUPS_LOCK:
        found = _LOOKUPS.get(key)
        if found is not None:
            _LOOKUPS.move_to_end(key)
            return found
    built = RowIdLookup(store, fragments)
    with _LOOKUPS_LOCK:
        _LOOKUPS[key] = built
        while len(_LOOKUPS) > 4:
            _LOOKUPS.popitem(last=False)
    return built
