"""``IndexMetadata`` messages as pylance 14.0.2 writes them, and reading them back.

Field by field (checked against pylance-built manifests): ``uuid`` (16 bytes), ``fields``
(the indexed field ids), ``name``, ``dataset_version`` (the version the segment was built at),
``fragment_bitmap`` (a portable 32-bit roaring bitmap of the covered fragment ids),
``index_details`` (an ``Any``: the type URL, an empty value for BTREE/BITMAP),
``index_version`` (0 for BTREE and BITMAP, always present), ``created_at`` (milliseconds since
the epoch), ``base_id`` (unset unless the segment lives under a base path) and ``files``
(``path`` and ``size_bytes`` of each file, sorted by path).
"""

from __future__ import annotations

import time
import uuid as uuid_mod
from collections.abc import Iterable
from dataclasses import dataclass

from pyroaring import BitMap

from lance_format.errors import InvalidInputError
from lance_format.proto import table_pb2

FRAG_REUSE_INDEX_NAME = "__lance_frag_reuse"
MEM_WAL_INDEX_NAME = "__lance_mem_wal"


def new_index_metadata(*, index_uuid: str, name: str, field_ids: Iterable[int], dataset_version: int,
                       fragment_ids: Iterable[int], type_url: str, details: bytes, index_version: int,
                       files: Iterable[tuple[str, int]], base_id: int | None = None,
                       created_at_ms: int | None = None) -> table_pb2.IndexMetadata:
    """A new segment's metadata message."""
    meta = table_pb2.IndexMetadata()
    meta.uuid.uuid = uuid_mod.UUID(str(index_uuid)).bytes
    meta.fields.extend(int(f) for f in field_ids)
    meta.name = name
    meta.dataset_version = int(dataset_version)
    bitmap = BitMap(int(f) for f in fragment_ids)
    meta.fragment_bitmap = bitmap.serialize()
    meta.index_details.type_url = type_url
    meta.index_details.value = details
    meta.index_version = int(index_version)
    meta.created_at = int(created_at_ms if created_at_ms is not None else time.time_ns() // 1_000_000)
    if base_id is not None:
        meta.base_id = int(base_id)
    for path, size in sorted(files):
        meta.files.add(path=path, size_bytes=int(size))
    return meta


def uuid_of(meta: table_pb2.IndexMetadata) -> str:
    """The segment's uuid as text (``"de05ed18-a055-..."``)."""
    return str(uuid_mod.UUID(bytes=bytes(meta.uuid.uuid)))


def fragment_ids_of(meta: table_pb2.IndexMetadata) -> BitMap | None:
    """The fragment ids the segment covers; None when the message has no bitmap (very old
    indices, which pylance takes as covering the fragments of ``dataset_version``)."""
    return BitMap.deserialize(bytes(meta.fragment_bitmap)) if meta.fragment_bitmap else None


def is_system_index(meta: table_pb2.IndexMetadata) -> bool:
    """Indices that are not user indices (the fragment-reuse and MemWAL indices)."""
    return meta.name in (FRAG_REUSE_INDEX_NAME, MEM_WAL_INDEX_NAME)


@dataclass(frozen=True)
class Segment:
    """One segment of a named index as the manifest lists it (``details_inferred``: the manifest
    has no ``index_details``; ``meta`` carries the type inferred from the files)."""

    meta: table_pb2.IndexMetadata
    details_inferred: bool = False

    @property
    def uuid(self) -> str:
        return uuid_of(self.meta)

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def type_url(self) -> str:
        return self.meta.index_details.type_url

    @property
    def fragment_ids(self) -> BitMap:
        return fragment_ids_of(self.meta) or BitMap()

    @property
    def base_id(self) -> int | None:
        return int(self.meta.base_id) if self.meta.HasField("base_id") else None

    @property
    def size_bytes(self) -> int | None:
        return sum(int(f.size_bytes) for f in self.meta.files) if len(self.meta.files) else None


def user_segments(section: table_pb2.IndexSection | None) -> list[Segment]:
    """The manifest's user index segments, in manifest order."""
    if section is None:
        return []
    return [Segment(m) for m in section.indices if not is_system_index(m)]


def parse_index_uuid(value: object) -> str:
    """``value`` as a canonical UUID string (an index or segment id a user passed)."""
    try:
        return str(uuid_mod.UUID(str(value)))
    except ValueError as exc:
        raise InvalidInputError(f"Invalid UUID string for index_uuid: {value!r} ({exc})") from exc
