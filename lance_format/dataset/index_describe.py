"""What ``describe_indices``, ``list_indices`` and ``stats.index_stats`` report, in pylance's shapes.

Row counts are live rows (deleted rows excluded) of the fragments a segment covers that the
version still has; an index type this engine does not know is described from its metadata
alone (its type from the type URL, no per-segment statistics).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lance_format.errors import IndexNotFoundError
from lance_format.index.catalog import IndexCatalog, NamedIndex, display_type
from lance_format.index.metadata import Segment
from lance_format.index.scalar.inverted_details import describe_inverted
from lance_format.index.vector.params import VECTOR_TYPE_URL, describe_details
from lance_format.index.vector.stats import index_kind, segment_statistics
from lance_format.table.deletion import live_row_count

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset


@dataclass
class IndexSegmentDescription:
    """One segment of an index (pylance's ``lance.indices.IndexSegmentDescription``)."""

    uuid: str
    dataset_version_at_last_update: int
    fragment_ids: set[int]
    index_version: int
    created_at: datetime | None
    size_bytes: int | None
    base_id: int | None
    covering_fields: list[int] = field(default_factory=list)


@dataclass
class IndexDescription:
    """One named index (pylance's ``lance.indices.IndexDescription``)."""

    name: str
    type_url: str
    index_type: str
    num_rows_indexed: int
    fields: list[int]
    field_names: list[str]
    segments: list[IndexSegmentDescription]
    details: dict[str, Any]
    total_size_bytes: int | None

    def __repr__(self) -> str:
        names = "[" + ", ".join(f'"{n}"' for n in self.field_names) + "]"
        return (f"IndexDescription(name={self.name!r}, type_url={self.type_url!r}, "
                f"num_rows_indexed={self.num_rows_indexed}, fields={self.fields}, field_names={names}, "
                f"num_segments={len(self.segments)}, total_size_bytes={self.total_size_bytes})")


def catalog_of(ds: LanceDataset) -> IndexCatalog:
    """The indices of ``ds``'s version (segments without details get them inferred, as pylance's)."""

    def field_type(field_id: int) -> pa.DataType | None:
        found = next((f for f in ds.lance_schema.walk() if f.id == field_id), None)
        return None if found is None else found.to_arrow().type

    return IndexCatalog(ds.manifest_file.index_section, ds.base_stores.store, ds.data_storage_version, field_type)


def _live_rows(ds: LanceDataset) -> dict[int, int]:
    return {f.id: live_row_count(f) for f in ds.manifest.fragments}


def _segment_rows(segment: Segment, live: dict[int, int]) -> int:
    return sum(live.get(f, 0) for f in segment.fragment_ids)


def field_paths(ds: LanceDataset) -> dict[int, str]:
    """Field id -> dotted path (``"meta.lang"``) of every field of the schema."""
    paths: dict[int, str] = {}

    def visit(fields: Any, prefix: str) -> None:
        for f in fields:
            paths[f.id] = prefix + f.name
            visit(f.children, prefix + f.name + ".")

    visit(ds.lance_schema.fields, "")
    return paths


def _field_names(ds: LanceDataset, field_ids: list[int]) -> list[str]:
    paths = field_paths(ds)
    return [paths.get(i, str(i)) for i in field_ids]


def _created(segment: Segment) -> datetime | None:
    if not segment.meta.HasField("created_at"):
        return None
    return datetime.fromtimestamp(segment.meta.created_at / 1000, tz=UTC)


def _vector_type(catalog: IndexCatalog, named: NamedIndex) -> tuple[str, dict[str, Any]]:
    """A vector index's type (``IVF_PQ``) and details dict: from its ``VectorIndexDetails``, or
    (older indices, whose details name no compression) from its ``index.idx``."""
    kind, details = describe_details(bytes(named.segments[0].meta.index_details.value))
    if kind is None:
        try:
            kind = index_kind(catalog.store(named.segments[0]))[0]
        except Exception:  # unreadable files: described from the metadata alone
            kind = "Vector"
    return kind, details


def type_and_details(catalog: IndexCatalog, named: NamedIndex) -> tuple[str, dict[str, Any]]:
    """The type name ``describe_indices`` / ``list_indices`` show, and the details dict."""
    if named.type_url == VECTOR_TYPE_URL:
        return _vector_type(catalog, named)
    if named.type_url == "/lance.table.InvertedIndexDetails":
        return display_type(named.type_url), describe_inverted(bytes(named.segments[0].meta.index_details.value))
    return display_type(named.type_url), {}


def describe(ds: LanceDataset) -> list[IndexDescription]:
    """Every user index of the version, by name."""
    live = _live_rows(ds)
    out = []
    catalog = catalog_of(ds)
    for named in catalog.indices.values():
        segments = [IndexSegmentDescription(
            uuid=s.uuid, dataset_version_at_last_update=int(s.meta.dataset_version), fragment_ids=set(s.fragment_ids),
            index_version=int(s.meta.index_version), created_at=_created(s), size_bytes=s.size_bytes,
            base_id=s.base_id) for s in named.segments]
        sizes = [s.size_bytes for s in segments]
        index_type, details = type_and_details(catalog, named)
        type_url = named.type_url
        if named.segments[0].details_inferred:
            # pylance describes a segment without details as the manifest has it, but for a legacy
            # vector index (its statistics and searches use the inferred type)
            type_url = ""
            index_type = index_type if named.type_url == VECTOR_TYPE_URL else "Unknown"
        out.append(IndexDescription(
            name=named.name, type_url=type_url, index_type=index_type,
            num_rows_indexed=sum(_segment_rows(s, live) for s in named.segments), fields=list(named.field_ids),
            field_names=_field_names(ds, named.field_ids), segments=segments, details=details,
            total_size_bytes=None if any(s is None for s in sizes) else sum(s or 0 for s in sizes)))
    return out


def require_index(ds: LanceDataset, name: str, catalog: IndexCatalog | None = None) -> NamedIndex:
    found = (catalog or catalog_of(ds)).get(name)
    if found is None:
        raise IndexNotFoundError(f"Index \"{name}\" not found", table=ds.uri, version=ds.version)
    return found


def index_statistics(ds: LanceDataset, name: str) -> dict[str, Any]:
    """pylance's ``stats.index_stats(name)`` dictionary."""
    catalog = catalog_of(ds)
    named = require_index(ds, name, catalog)
    live = _live_rows(ds)
    covered = named.fragment_ids
    per_segment: list[dict[str, Any]] = []
    vector = named.type_url == VECTOR_TYPE_URL
    for segment in named.segments:
        if vector and len(segment.fragment_ids):
            per_segment.append(segment_statistics(catalog.store(segment)))
        elif named.index_type is None or not len(segment.fragment_ids):  # pylance: {} for an untrained one
            per_segment.append({})
        else:
            per_segment.append(catalog.load(segment).statistics())
    trained = any(len(s.fragment_ids) for s in named.segments)
    index_type = type_and_details(catalog, named)[0] if trained or named.index_type is None else "N/A"
    indexed_rows = sum(n for f, n in live.items() if f in covered)
    return {
        "index_type": index_type,
        "name": name,
        "num_indices": len(named.segments),
        "num_segments": len(named.segments),
        "indices": per_segment,
        "segments": per_segment,
        "num_indexed_fragments": sum(1 for f in live if f in covered),
        "num_indexed_rows": indexed_rows,
        "num_unindexed_fragments": sum(1 for f in live if f not in covered),
        "num_unindexed_rows": sum(n for f, n in live.items() if f not in covered),
        "num_indexed_rows_per_delta": [_segment_rows(s, live) for s in named.segments],
        "updated_at_timestamp_ms": max((int(s.meta.created_at) for s in named.segments), default=0),
    }
