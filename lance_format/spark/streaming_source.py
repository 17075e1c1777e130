"""The ``lance`` streaming source: ``spark.readStream.format("lance").load(uri)``.

Offsets are table versions: ``{"version": n}`` means every version up to ``n`` was read. Each
micro-batch reads the versions ``(start, end]``, planned on the driver from manifests alone;
its tasks read the rows.

* ``option("readChangeFeed", "true")``: the change feed (the rows of :func:`read_changes`, with
  ``_change_type``, ``_commit_version``, ...); needs stable row ids. ``startingVersion`` ``n``
  (inclusive) or ``latest``; without it the feed starts after version 0 (the whole history).
* otherwise the rows that versions appended: an Append's new fragments. Without
  ``startingVersion`` the first batch is the snapshot of the newest version (like Delta);
  compaction, index and config commits change no rows and are passed over; a commit that
  deleted or rewrote rows (delete, update, merge, overwrite) stops the query unless
  ``skipChangeCommits`` is ``true`` (then it is passed over; read the change feed to see it).

``maxVersionsPerTrigger`` caps the versions per micro-batch (Spark's ``ReadMaxFiles`` limit
carries it; ``Trigger.AvailableNow`` honours it and stops at the version that was newest when
the query started). ``columns`` restricts the columns, as for batch reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)

from lance_format.distributed import (
    NO_CHANGE_OPERATIONS,
    LanceDataset,
    ObjectStore,
    list_versions,
    object_store_for,
    operation_name,
)
from lance_format.errors import InvalidInputError, SchemaMismatchError
from lance_format.spark.changes import ChangeSpec, plan_changes, version_changes
from lance_format.spark.datasource import _columns, _flag, _int, _path, _storage
from lance_format.spark.read import DEFAULT_ROWS_PER_SPLIT, plan_read
from lance_format.spark.tasks import ScanSpec, Split, read_split

CHANGE_FEED_OPTION = "readChangeFeed"


@dataclass
class ChangePartition(InputPartition):
    spec: ChangeSpec
    version: int
    part: int
    parts: int


@dataclass
class ScanPartition(InputPartition):
    spec: ScanSpec
    split: Split


def _starting_version(options: Any) -> int | str | None:
    value = options.get("startingVersion")
    if value is None or str(value).strip() == "":
        return None
    text = str(value).strip().lower()
    if text == "latest":
        return "latest"
    try:
        version = int(text)
    except ValueError:
        raise InvalidInputError(f"startingVersion must be a version number or 'latest', got {value!r}") from None
    if version < 0:
        raise InvalidInputError(f"startingVersion must not be negative, got {value!r}")
    return version


def change_feed_schema(options: Any) -> Any:
    """The Spark schema of the change feed of the table's newest version."""
    path, storage = _path(options), _storage(options)
    latest = LanceDataset(path, storage_options=storage).version
    return plan_changes(path, latest, latest, _columns(options), storage_options=storage)[2]


class LanceStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Lives in one Python worker for the whole query run; ``read`` runs on the executors from
    a copy made at the start, so partitions carry everything a task needs."""

    def __init__(self, options: Any, schema: Any) -> None:
        self.path = _path(options)
        self.storage = _storage(options)
        self.change_feed = _flag(options, CHANGE_FEED_OPTION)
        self.columns = _columns(options)
        self.starting = _starting_version(options)
        self.skip_change_commits = _flag(options, "skipChangeCommits")
        self.max_versions = _int(options, "maxVersionsPerTrigger")
        if self.max_versions is not None and self.max_versions <= 0:
            raise InvalidInputError("maxVersionsPerTrigger must be positive", table=self.path)
        self.rows_per_split = _int(options, "rows_per_split", DEFAULT_ROWS_PER_SPLIT)
        self.schema = schema
        self.available_now_end: int | None = None
        self._store: ObjectStore | None = None

    # -- offsets -----------------------------------------------------------------------------------
    def _latest(self) -> int:
        if self._store is None:
            self._store = object_store_for(self.path, self.storage)
        latest = list_versions(self._store).latest
        if latest is None:
            raise InvalidInputError("no Lance table here", table=self.path)
        return latest

    def initialOffset(self) -> dict:
        if self.starting == "latest":
            return {"version": self._latest()}
        if self.starting is not None:
            return {"version": max(int(self.starting) - 1, 0)}
        if self.change_feed:
            return {"version": 0}
        return {"version": 0, "snapshot": True}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxFiles(self.max_versions) if self.max_versions else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.available_now_end = self._latest()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = int(start["version"])
        end = self.available_now_end if self.available_now_end is not None else self._latest()
        if isinstance(limit, ReadMaxFiles) and not start.get("snapshot"):
            # (the first snapshot is the newest version's: its rows are not versions to ration)
            end = min(end, begin + max(int(limit.max_files), 1))
        if end <= begin:
            return start
        return {"version": end}

    def reportLatestOffset(self) -> dict | None:
        try:
            return {"version": self._latest()}
        except Exception:
            return None

    # -- planning ----------------------------------------------------------------------------------
    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        begin, stop = int(start["version"]), int(end["version"])
        if stop <= begin and not (start.get("snapshot") and stop > 0):
            return []
        if self.change_feed:
            spec, tasks, schema = plan_changes(self.path, begin, stop, self.columns, rows_per_task=self.rows_per_split,
                                               storage_options=self.storage)
            self._check_schema(schema, stop)
            return [ChangePartition(spec, *task) for task in tasks]
        if start.get("snapshot"):
            plan = plan_read(self.path, version=stop, columns=self.columns, rows_per_split=self.rows_per_split,
                             target_splits=2, storage_options=self.storage)
            self._check_schema(plan.schema, stop)
            return [ScanPartition(plan.spec, split) for split in plan.splits]
        partitions: list[InputPartition] = []
        previous = LanceDataset(self.path, begin, storage_options=self.storage) if begin >= 1 else None
        for version in range(begin + 1, stop + 1):
            current = LanceDataset(self.path, version, storage_options=self.storage)
            partitions.extend(self._appended(previous, current))
            previous = current
        return partitions

    def _appended(self, previous: LanceDataset | None, current: LanceDataset) -> list[InputPartition]:
        txn = current.read_transaction_message()
        operation = operation_name(txn) if txn is not None else None
        if operation in NO_CHANGE_OPERATIONS:
            return []
        if operation != "append" and previous is not None:
            if self.skip_change_commits:
                return []
            raise InvalidInputError(
                f"version {current.version} is a {operation or 'unknown'} commit, not an append: a stream of "
                "appended rows cannot express it; set skipChangeCommits=true to pass over such commits, or "
                "read the change feed (readChangeFeed=true)", table=self.path, version=current.version,
            )
        before = {f.id for f in previous.manifest.fragments} if previous is not None else set()
        new = [f for f in current.manifest.fragments if f.id not in before and f.physical_rows > 0]
        if not new:
            return []
        plan = plan_read(self.path, version=current.version, columns=self.columns, rows_per_split=self.rows_per_split,
                         storage_options=self.storage)
        self._check_schema(plan.schema, current.version)
        step = max(1, self.rows_per_split)
        return [ScanPartition(plan.spec, ((f.id, lo, min(lo + step, f.physical_rows)),))
                for f in new for lo in range(0, f.physical_rows, step)]

    def _check_schema(self, schema: Any, version: int) -> None:
        if self.schema is not None and schema.simpleString() != self.schema.simpleString():
            raise SchemaMismatchError(
                f"the table's schema changed under the stream ({self.schema.simpleString()} -> "
                f"{schema.simpleString()}); restart the query with a new checkpoint",
                table=self.path, version=version,
            )

    # -- executors ---------------------------------------------------------------------------------
    def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, ChangePartition):
            yield from version_changes(partition.spec, partition.version, partition.part, partition.parts)
        elif isinstance(partition, ScanPartition):
            yield from read_split(partition.spec, partition.split)

    def commit(self, end: dict) -> None:
        pass  # nothing to release: versions stay until the table's own cleanup

    def stop(self) -> None:
        pass


__all__ = ["CHANGE_FEED_OPTION", "ChangePartition", "LanceStreamReader", "ScanPartition", "change_feed_schema"]
