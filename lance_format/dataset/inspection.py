"""Read-only questions about a table version, with pylance's names and result shapes.

``get_version``, ``config``, ``io_stats_snapshot``, ``io_stats_incremental``, ``version_refs``, ``fragment_ids``, ``stats``, ``validate``, ``sample``,
``slice``, ``all_files``, ``tracked_files`` and ``explain_cleanup_old_versions``: a mixin of
``LanceDataset``, kept apart from the reading core so that neither module grows past a page
or two. Nothing here commits.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyroaring import BitMap

from lance_format.dataset.index_describe import index_statistics
from lance_format.dataset.mixin import DatasetMixin
from lance_format.errors import CorruptFileError, InvalidInputError, UnsupportedFeatureError
from lance_format.io.counters import IOStats
from lance_format.io.options_accessor import StorageOptionsAccessor
from lance_format.proto import table_pb2
from lance_format.table.cleanup import explain_cleanup
from lance_format.table.deletion import deleted_row_count, deletion_file_path
from lance_format.table.manifest import read_manifest
from lance_format.table.naming import list_versions
from lance_format.table.transaction import TRANSACTIONS_DIR

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset
    from lance_format.table.cleanup import CleanupExplanation

# pylance's dictionary values for tracked_files' `type` column, in its order
TRACKED_FILE_TYPES = ["manifest", "data file", "deletion file", "transaction file", "index file"]
_TRACKED_SCHEMA = pa.schema([
    pa.field("version", pa.int64(), nullable=False),
    pa.field("base_uri", pa.dictionary(pa.int32(), pa.string()), nullable=False),
    pa.field("path", pa.string(), nullable=False),
    pa.field("type", pa.dictionary(pa.int8(), pa.string()), nullable=False),
])
_ALL_FILES_SCHEMA = pa.schema([
    pa.field("base_uri", pa.dictionary(pa.int32(), pa.string()), nullable=False),
    pa.field("path", pa.string(), nullable=False),
    pa.field("size_bytes", pa.int64(), nullable=False),
    pa.field("last_modified", pa.timestamp("us", tz="UTC"), nullable=False),
])


def version_entry(manifest: table_pb2.Manifest) -> dict[str, Any]:
    """One version as pylance reports it: ``{"version", "timestamp", "metadata"}``."""
    nanos = manifest.timestamp.seconds * 1_000_000_000 + manifest.timestamp.nanos
    # Same float arithmetic as pylance, so both report the identical microsecond.
    stamp = datetime.fromtimestamp(nanos // 1e9) + timedelta(microseconds=(nanos % 1e9) // 1e3)
    return {"version": manifest.version, "timestamp": stamp, "metadata": _summary(manifest)}


def _summary(manifest: table_pb2.Manifest) -> dict[str, str]:
    fragments = manifest.fragments
    physical = sum(f.physical_rows for f in fragments)
    deleted = sum(deleted_row_count(f) for f in fragments)
    stats = {
        "total_data_file_rows": physical,
        "total_data_files": sum(len(f.files) for f in fragments),
        "total_deletion_file_rows": deleted,
        "total_deletion_files": sum(1 for f in fragments if f.HasField("deletion_file")),
        "total_files_size": sum(d.file_size_bytes for f in fragments for d in f.files),
        "total_fragments": len(fragments),
        "total_rows": physical - deleted,
    }
    return {key: str(value) for key, value in stats.items()}


@dataclass(frozen=True)
class FieldStatistics:
    """Bytes one field takes on disk, over every data file (pylance's ``FieldStatistics``).

    0 for tables of the legacy (0.1) file format, as in pylance.
    """

    id: int
    bytes_on_disk: int


@dataclass(frozen=True)
class DataStatistics:
    """Per-field storage statistics of a version (pylance's ``DataStatistics``)."""

    fields: list[FieldStatistics] = field(default_factory=list)


class LanceStats:
    """``LanceDataset.stats``: statistics computed from the manifest and file footers."""

    def __init__(self, dataset: LanceDataset) -> None:
        self._dataset = dataset

    def dataset_stats(self, max_rows_per_group: int = 1024) -> dict[str, int]:
        """Deleted rows, fragments, and fragments smaller than one row group (pylance's keys)."""
        fragments = self._dataset.get_fragments()
        return {
            "num_deleted_rows": sum(f.physical_rows - f.count_rows() for f in fragments),
            "num_fragments": len(fragments),
            "num_small_files": sum(1 for f in fragments if f.physical_rows < max_rows_per_group),
        }

    def data_stats(self) -> DataStatistics:
        """Bytes on disk per schema field: the sum of its columns' page buffers, as pylance counts.

        A column that no field of the schema names continues the field before it (a nested
        field's child columns), so nested data counts towards its top-level field.
        """
        ds = self._dataset
        ids = ds.lance_schema.field_ids()
        totals = dict.fromkeys(ids, 0)
        if ds.data_storage_version not in ("legacy", "0.1"):
            for fragment in ds.get_fragments():
                for data_file in fragment.proto.files:
                    column_to_field = {c: f for f, c in zip(data_file.fields, data_file.column_indices) if c >= 0}
                    sizes = fragment.column_sizes(data_file)
                    current = 0
                    for column, size in enumerate(sizes):
                        current = column_to_field.get(column, current)
                        if current in totals:
                            totals[current] += size
        return DataStatistics([FieldStatistics(i, totals[i]) for i in ids])

    def index_stats(self, index_name: str) -> dict[str, Any]:
        """Statistics of the index ``index_name`` (pylance's dictionary; ``IndexNotFoundError``,
        a ``KeyError``, for a name no index has)."""

        return index_statistics(self._dataset, index_name)


class InspectionMethods(DatasetMixin):
    """The read-only extras of :class:`LanceDataset` (see the module docstring)."""

    def get_version(self) -> dict[str, Any]:
        """This version as ``{"version", "timestamp", "metadata"}``, like one entry of ``versions()``.

        Computed from the loaded manifest; nothing is read from storage.
        """
        return version_entry(self._as_dataset().manifest)

    def config(self) -> dict[str, str]:
        """The table config (a method, as pylance's is)."""
        return dict(self._as_dataset().manifest.config)

    def io_stats_snapshot(self) -> IOStats:
        """The reads and writes of this dataset's object store since it was opened or since the
        last :meth:`io_stats_incremental`, without resetting them (pylance's ``io_stats_snapshot``).
        Datasets on the same store (``checkout_version``, the dataset a write returned) share the
        counts; a dataset opened from the URI again starts its own."""
        return self._as_dataset().object_store.io_counters.snapshot()

    def io_stats_incremental(self) -> IOStats:
        """Like :meth:`io_stats_snapshot`, and reset the counts to zero (pylance's
        ``io_stats_incremental``)."""
        return self._as_dataset().object_store.io_counters.take()

    def version_refs(self) -> list[dict[str, int]]:
        """``[{"version": n}, ...]`` for every version of this branch, oldest first, without
        reading the manifests (pylance's ``version_refs``)."""
        listing = list_versions(self._as_dataset().object_store)
        return [{"version": v} for v in sorted(listing.versions)]

    def fragment_ids(self) -> BitMap:
        """The ids of this version's fragments, as a roaring bitmap (iterable, supports ``in``)."""
        return BitMap(f.id for f in self._as_dataset().manifest.fragments)

    @property
    def initial_storage_options(self) -> dict[str, str] | None:
        """The storage options the dataset was opened with; None when none were given."""
        return self._as_dataset().object_store.storage_options or None

    def latest_storage_options(self) -> dict[str, str] | None:
        """The storage options in use now (credentials from a provider are fetched per request,
        so these are the opening options); None when none were given."""
        return self._as_dataset().object_store.storage_options or None

    @property
    def storage_options_accessor(self) -> StorageOptionsAccessor | None:
        """The storage options and credential provider this table was opened with (pylance's
        ``storage_options_accessor``; None when it had neither)."""
        return self._as_dataset().object_store.options_accessor()

    @property
    def partition_expression(self) -> Any:
        """Not implemented, as in pylance (pyarrow's dataset API; Lance tables are not partitioned)."""
        raise UnsupportedFeatureError("partitioning not yet supported", table=self._as_dataset().uri)

    @property
    def stats(self) -> LanceStats:
        """Statistics about this version (pylance's experimental ``stats``)."""
        return LanceStats(self._as_dataset())

    def validate(self) -> None:
        """Check this version's integrity, as pylance's ``validate`` does.

        Fragment ids must be unique and increasing; every data file must exist and hold the
        fragment's row count; deletion files must be readable and in range.

        Raises
        ------
        CorruptFileError
            The first problem found, naming the table, version and file.
        """
        ds = self._as_dataset()
        ids = [f.id for f in ds.manifest.fragments]
        seen: set[int] = set()
        for previous, current in zip([0] + ids, ids):
            if current in seen:
                raise CorruptFileError(f"Duplicate fragment id {current} found in dataset",
                                       table=ds.uri, version=ds.version, path=ds.manifest_path)
            seen.add(current)
            if current < previous:
                raise CorruptFileError(
                    f"Fragment ids are not sorted in increasing fragment-id order. Found {current} after {previous}",
                    table=ds.uri, version=ds.version, path=ds.manifest_path)
        for fragment in ds.get_fragments():
            fragment.validate()

    def sample(self, num_rows: int, columns: list[str] | None = None, randomize_order: bool = True,
               **kwargs: Any) -> pa.Table:
        """``num_rows`` distinct rows chosen at random (pylance's ``sample``).

        Raises
        ------
        InvalidInputError
            ``num_rows`` exceeds the row count or is negative.
        """
        ds = self._as_dataset()
        total = ds.count_rows()
        if num_rows < 0 or num_rows > total:
            raise InvalidInputError(f"cannot sample {num_rows} rows from {total}", table=ds.uri)
        indices = random.sample(range(total), num_rows)
        if not randomize_order:
            indices.sort()  # in table order: fewer, more local reads
        return ds.take(indices, columns)

    def slice(self, start: int, end: int, columns: list[str] | None = None) -> pa.Table:
        """Rows ``start`` (inclusive) to ``end`` (exclusive) by position, as a scan with offset and limit.

        Raises
        ------
        InvalidInputError
            ``start`` is negative or ``end`` is before it (also a ``ValueError``, like pylance).
        """
        ds = self._as_dataset()
        if start < 0:
            raise InvalidInputError(f"start must be non-negative, got {start}", table=ds.uri)
        if end < start:
            raise InvalidInputError(f"end ({end}) must be >= start ({start})", table=ds.uri)
        return ds.scanner(offset=start, limit=end - start, columns=columns).to_table()

    def all_files(self) -> pa.RecordBatchReader:
        """Every file under the table's root, referenced or not: ``base_uri``, ``path`` (relative),
        ``size_bytes``, ``last_modified`` (pylance's ``all_files``; other bases are not listed)."""
        ds = self._as_dataset()
        store = ds.object_store
        infos = store.list_files("")
        paths = [store.relative_path(i) for i in infos]
        stamps = [i.mtime for i in infos]
        batch = pa.record_batch([
            pa.DictionaryArray.from_arrays(pa.array([0] * len(paths), pa.int32()), pa.array([ds.uri])),
            pa.array(paths, pa.string()),
            pa.array([i.size for i in infos], pa.int64()),
            pa.array(stamps, pa.timestamp("us", tz="UTC")),
        ], schema=_ALL_FILES_SCHEMA)
        return pa.RecordBatchReader.from_batches(_ALL_FILES_SCHEMA, [batch])

    def tracked_files(self, *, min_version: int | None = None,
                      progress: Callable[[int, int | None], Any] | None = None) -> pa.RecordBatchReader:
        """Every file any version's manifest references, one batch per version: ``version``,
        ``base_uri``, ``path`` (relative to the table root), ``type`` (pylance's ``tracked_files``).

        ``progress(processed, total)`` is called after each manifest.
        """
        ds = self._as_dataset()
        store = ds.object_store
        listing = list_versions(store)
        versions = sorted(v for v in listing.versions if min_version is None or v >= min_version)
        base = pa.array([ds.uri])

        def batches() -> Iterator[pa.RecordBatch]:
            for done, version in enumerate(versions, start=1):
                manifest_path = listing.versions[version]
                m = read_manifest(store, manifest_path).manifest
                rows: list[tuple[str, int]] = [(manifest_path, 0)]
                if m.transaction_file:
                    rows.append((f"{TRANSACTIONS_DIR}/{m.transaction_file}", 3))
                for fragment in m.fragments:
                    rows += [(f"data/{d.path}", 1) for d in fragment.files]
                for fragment in m.fragments:
                    if fragment.HasField("deletion_file"):
                        rows.append((deletion_file_path(fragment.id, fragment.deletion_file), 2))
                n = len(rows)
                yield pa.record_batch([
                    pa.array([version] * n, pa.int64()),
                    pa.DictionaryArray.from_arrays(pa.array([0] * n, pa.int32()), base),
                    pa.array([r[0] for r in rows], pa.string()),
                    pa.DictionaryArray.from_arrays(pa.array([r[1] for r in rows], pa.int8()),
                                                   pa.array(TRACKED_FILE_TYPES)),
                ], schema=_TRACKED_SCHEMA)
                if progress is not None:
                    progress(done, len(versions))

        return pa.RecordBatchReader.from_batches(_TRACKED_SCHEMA, batches())

    def explain_cleanup_old_versions(
        self,
        older_than: timedelta | None = None,
        retain_versions: int | None = None,
        *,
        delete_unverified: bool = False,
        error_if_tagged_old_versions: bool = True,
        delete_rate_limit: int | None = None,
        versions: list[int] | None = None,
        include_files: bool = False,
        max_files: int = 1000,
    ) -> CleanupExplanation:
        """What ``cleanup_old_versions`` with the same arguments would remove; deletes nothing.

        Raises
        ------
        InvalidInputError
            ``max_files`` or ``retain_versions`` is not positive.
        TagError
            A tagged version would be removed and ``error_if_tagged_old_versions`` is set.
        """

        ds = self._as_dataset()
        if max_files <= 0:
            raise InvalidInputError("max_files must be positive", table=ds.uri)
        return explain_cleanup(ds, older_than, retain_versions, delete_unverified=delete_unverified,
                               error_if_tagged_old_versions=error_if_tagged_old_versions, versions=versions,
                               include_files=include_files, max_files=max_files)
