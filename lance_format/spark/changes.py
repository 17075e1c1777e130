"""``read_changes``: the engine's change feed between two versions, read by the executors.

The feed of ``(begin, end]`` is the concatenation of the feeds of each version ``v`` in that
range (``v - 1 -> v``); :meth:`lance_format.LanceDataset.delta` builds it exactly so. The driver
validates the range through the engine (stable row ids, versions present, columns) and reads
only manifests to estimate how many rows each version changed; each version becomes one or
more tasks. A task plans its version with the engine (metadata only) and materializes its
share: a contiguous slice of the changed row positions and of the update pre/post pairs, and
a round-robin share of whole fragments (an overwrite). Versions that cannot change rows
(compaction, index or config changes, dropped columns) get no task.

Columns: the requested columns of the ``end`` schema, then ``_rowid``,
``_row_created_at_version``, ``_row_last_updated_at_version``, ``_change_type``,
``_commit_version`` and ``_commit_timestamp`` (row ids and versions as Spark longs).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from lance_format.distributed import (
    NO_CHANGE_OPERATIONS,
    ChangeWriter,
    LanceDataset,
    Manifest,
    VersionChanges,
    change_schema,
    list_versions,
    live_row_count,
    load_transaction,
    operation_name,
    plan_version,
    read_manifest,
    require_stable_row_ids,
    same_last_updated,
)
from lance_format.errors import InvalidInputError
from lance_format.spark.common import StorageOptions, pack_options, table_location, use_driver_python
from lance_format.spark.read import DEFAULT_ROWS_PER_SPLIT
from lance_format.spark.tasks import arrow_schema_from_bytes, arrow_schema_to_bytes, manifest_identity, open_version
from lance_format.spark.types import BatchConverter, spark_arrow_schema, spark_schema

MAX_TASKS_PER_VERSION = 64


@dataclass(frozen=True)
class ChangeSpec:
    uri: str
    end_version: int
    columns: tuple[str, ...] | None
    target: bytes  # Spark's Arrow schema of the feed
    batch_size: int = 65536
    identities: tuple[tuple[int, str], ...] = ()  # (version, manifest_identity) of the range
    storage_options: StorageOptions = field(default=(), repr=False)  # may hold credentials

    def open(self, version: int) -> LanceDataset:
        return open_version(self.uri, version, dict(self.identities).get(version), self.storage_options)


def estimate_changed_rows(old: Manifest | None, new: Manifest) -> int:
    """An upper bound of the rows one commit changed, from the two manifests alone."""
    before = {f.id: f for f in old.fragments} if old is not None else {}
    total = 0
    for fragment in new.fragments:
        prior = before.pop(fragment.id, None)
        if prior is None or [f.path for f in prior.files] != [f.path for f in fragment.files]:
            total += live_row_count(fragment) + (live_row_count(prior) if prior is not None else 0)
        elif prior.SerializeToString() != fragment.SerializeToString():
            total += abs(live_row_count(prior) - live_row_count(fragment)) + (
                0 if same_last_updated(prior, fragment) else fragment.physical_rows)
    total += sum(live_row_count(f) for f in before.values())
    return total


def _share(changes: VersionChanges, part: int, parts: int) -> VersionChanges:
    """Part ``part`` of ``parts`` of one version's changes (contiguous slices, pairs kept)."""
    if parts == 1:
        return changes

    def piece(refs):
        n = len(refs)
        return refs.select(np.arange(part * n // parts, (part + 1) * n // parts))

    return VersionChanges(
        deleted=piece(changes.deleted),
        inserted=piece(changes.inserted),
        updated_pre=piece(changes.updated_pre),
        updated_post=piece(changes.updated_post),
        deleted_whole=[i for k, i in enumerate(changes.deleted_whole) if k % parts == part],
        inserted_whole=[i for k, i in enumerate(changes.inserted_whole) if k % parts == part],
    )


def version_changes(spec: ChangeSpec, version: int, part: int, parts: int) -> Iterator[pa.RecordBatch]:
    """The change batches of ``version`` (share ``part`` of ``parts``), in Spark's Arrow types."""

    end = spec.open(spec.end_version)
    schema = end.lance_schema
    out_fields = list(schema.fields) if spec.columns is None else [schema.field(n) for n in spec.columns]
    new = end if version == spec.end_version else spec.open(version)
    old = spec.open(version - 1) if version > 1 else None
    txn = new.read_transaction_message()
    operation = operation_name(txn) if txn is not None else None
    if operation in NO_CHANGE_OPERATIONS:
        return
    for ds in (old, new):
        if ds is not None:
            require_stable_row_ids(ds, "the change feed requires")
    changes = plan_version(old, new, operation)
    if changes.is_empty():
        return
    convert = BatchConverter(arrow_schema_from_bytes(spec.target), table=spec.uri, check_nulls=False)
    writer = ChangeWriter(change_schema(out_fields, end.schema.metadata), out_fields, old, new, spec.batch_size)
    for batch in writer.batches(_share(changes, part, parts)):
        if batch.num_rows:
            yield convert(batch)


def changes_task(spec: ChangeSpec, tasks: list[tuple[int, int, int]]) -> Callable:
    """``mapInArrow`` over ``spark.range(len(tasks))``: (version, part, parts) per task."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                yield from version_changes(spec, *tasks[index])

    return run


def plan_changes(
    uri: str | os.PathLike[str],
    begin_version: int,
    end_version: int,
    columns: Sequence[str] | None = None,
    *,
    rows_per_task: int = DEFAULT_ROWS_PER_SPLIT,
    storage_options: Mapping[str, str] | None = None,
) -> tuple[ChangeSpec, list[tuple[int, int, int]], Any]:
    """Validate the range with the engine and list the tasks: (spec, tasks, Spark schema)."""
    if isinstance(columns, str):
        raise InvalidInputError("columns must be a list of column names, not a string")
    if begin_version > end_version:
        raise InvalidInputError(f"begin version {begin_version} is newer than end version {end_version}")
    end = LanceDataset(table_location(uri), end_version,
                       storage_options=storage_options)
    reader = end.delta(begin_version=begin_version, end_version=end_version).get_changes(
        list(columns) if columns is not None else None)
    arrow = reader.schema  # validated and typed by the engine; its batches are never pulled here
    schema = spark_schema(arrow)
    store = end.object_store
    listing = list_versions(store)
    tasks: list[tuple[int, int, int]] = []
    identities: list[tuple[int, str]] = []
    previous = read_manifest(store, listing.versions[begin_version]).manifest if begin_version >= 1 else None
    if previous is not None:
        identities.append((begin_version, manifest_identity(previous)))
    for version in range(begin_version + 1, end_version + 1):
        manifest_file = read_manifest(store, listing.versions[version])
        identities.append((version, manifest_identity(manifest_file.manifest)))
        txn = load_transaction(store, manifest_file)
        if (operation_name(txn) if txn is not None else None) not in NO_CHANGE_OPERATIONS:
            rows = estimate_changed_rows(previous, manifest_file.manifest)
            parts = max(1, min(MAX_TASKS_PER_VERSION, math.ceil(rows / max(1, rows_per_task))))
            tasks.extend((version, part, parts) for part in range(parts))
        previous = manifest_file.manifest
    spec = ChangeSpec(uri=end.uri, end_version=end.version, columns=tuple(columns) if columns is not None else None,
                      target=arrow_schema_to_bytes(spark_arrow_schema(schema)), identities=tuple(identities),
                      storage_options=pack_options(store.storage_options))
    return spec, tasks, schema


def read_changes(
    spark: Any,
    uri: str | os.PathLike[str],
    begin_version: int,
    end_version: int,
    columns: Sequence[str] | None = None,
    *,
    rows_per_task: int = DEFAULT_ROWS_PER_SPLIT,
    storage_options: Mapping[str, str] | None = None,
) -> Any:
    """The change feed of versions ``(begin_version, end_version]`` as a DataFrame (the same rows
    as ``dataset(uri).delta(begin_version=..., end_version=...).get_changes(columns)``).
    ``storage_options``: object-store settings (Lance's keys) for ``s3://``, ``gs://`` or ``az://``
    tables, shipped to the executors."""
    spec, tasks, schema = plan_changes(uri, begin_version, end_version, columns, rows_per_task=rows_per_task,
                                       storage_options=storage_options)
    if not tasks:
        return spark.createDataFrame([], schema)
    use_driver_python(spark)
    n = len(tasks)
    return spark.range(0, n, 1, n).mapInArrow(changes_task(spec, tasks), schema)


__all__ = ["ChangeSpec", "plan_changes", "read_changes", "version_changes", "estimate_changed_rows"]
