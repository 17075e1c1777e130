"""Change-feed inputs: an asset partitioned by Lance versions receives what changed in them.

An input asks for the change feed with input metadata ``{"lance/read": "changes"}`` (and gets
a pyarrow Table, RecordBatchReader, pandas or Spark DataFrame, chosen by its annotation) or by
annotating it ``LanceChangeFeed`` (a lazy handle). The version range ``(begin, end]`` comes from,
in order: explicit ``lance/begin_version`` / ``lance/end_version`` input metadata; the input's own
version partitions (an upstream partitioned by the same version partitions); the run's partition
key (version ``v`` -> ``(v-1, v]``); or the run's partition range, which a single-run backfill
(``BackfillPolicy.single_run()``) over versions ``a..b`` creates -> ``(a-1, b]``, read at once.

Rows carry ``_change_type`` (insert, update_preimage, update_postimage, delete), ``_commit_version``
and ``_commit_timestamp``; deletes and pre-images carry their old values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from lance_assets import engine
from lance_assets.config import ReadSettings
from lance_assets.partitions import versions_of_keys
from lance_assets.type_handlers import from_reader
from lance_format.errors import InvalidInputError

if TYPE_CHECKING:
    from lance_assets.resources import SparkSessionConfig, SparkSessionResource

RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"
CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"


@dataclass(frozen=True)
class LanceChangeFeed:
    """The changes of versions ``(begin_version, end_version]`` of the table at ``uri`` (lazy).

    The input type of an asset partitioned by Lance versions: nothing is read until one of the
    ``to_*`` methods is called. Rows carry the table's columns (or ``columns``) plus
    ``_rowid``, ``_change_type`` (insert, update_preimage, update_postimage, delete),
    ``_commit_version`` and ``_commit_timestamp``.

    Parameters
    ----------
    uri
        The table.
    begin_version
        The exclusive start of the range.
    end_version
        The inclusive end of the range.
    columns
        The table columns to read; all if None.
    storage_options
        Object-store settings (Lance's keys) for an object-store table.
    """

    uri: str
    begin_version: int
    end_version: int
    columns: tuple[str, ...] | None = None
    storage_options: Mapping[str, str] | None = field(default=None, repr=False, compare=False)

    @property
    def versions(self) -> range:
        """The versions whose changes this feed holds."""
        return range(self.begin_version + 1, self.end_version + 1)

    def to_reader(self) -> pa.RecordBatchReader:
        """The changes as a stream of record batches (bounded memory)."""
        return engine.change_feed(
            self.uri, self.begin_version, self.end_version, columns=list(self.columns) if self.columns else None,
            storage_options=self.storage_options,
        )

    def to_table(self) -> pa.Table:
        """The changes as one pyarrow Table."""
        return self.to_reader().read_all()

    def to_pandas(self) -> Any:
        """The changes as a pandas DataFrame."""
        return self.to_table().to_pandas()

    def to_spark(self, spark: Any) -> Any:
        """The changes as a Spark DataFrame read by ``spark``'s executors (``lance_format.spark.read_changes``)."""
        return engine.spark_changes(
            spark, self.uri, self.begin_version, self.end_version, list(self.columns) if self.columns else None,
            storage_options=self.storage_options,
        )


def change_counts(changes: pa.Table) -> dict[str, int]:
    """Rows per ``_change_type`` (inserts, updates counted once per pre/post pair, deletes)."""
    counts = {"insert": 0, "update_preimage": 0, "update_postimage": 0, "delete": 0}
    if changes.num_rows and CHANGE_TYPE in changes.column_names:
        values = pc.value_counts(changes.column(CHANGE_TYPE))
        for item in values.to_pylist():
            counts[item["values"]] = int(item["counts"])
    return {"inserted": counts["insert"], "updated": counts["update_postimage"], "deleted": counts["delete"]}


def version_range(
    context: dg.InputContext, settings: ReadSettings, run_tags: Mapping[str, str]
) -> tuple[int, int]:
    """``(begin_exclusive, end_inclusive)`` of the versions an input's change feed covers."""
    if settings.begin_version is not None or settings.end_version is not None:
        if settings.begin_version is None or settings.end_version is None:
            raise InvalidInputError("set both lance/begin_version and lance/end_version, or neither")
        return settings.begin_version, settings.end_version
    if context.has_asset_partitions:
        versions = versions_of_keys(context.asset_partition_keys, what="input partition key")
        return versions[0] - 1, versions[-1]
    if context.has_partition_key:
        version = versions_of_keys([context.partition_key], what="run partition key")[0]
        return version - 1, version
    if RANGE_START_TAG in run_tags and RANGE_END_TAG in run_tags:
        start, end = versions_of_keys([run_tags[RANGE_START_TAG], run_tags[RANGE_END_TAG]], what="run partition range key")
        return start - 1, end
    raise InvalidInputError(
        f"input {context.name!r} reads a change feed but the run has no version partition: partition the "
        "consuming asset by the version partitions a lance_version_sensor fills, or set "
        "lance/begin_version and lance/end_version input metadata"
    )


def load_changes(
    context: dg.InputContext,
    uri: str,
    settings: ReadSettings,
    *,
    kind: str,
    run_tags: Mapping[str, str],
    spark: SparkSessionConfig | SparkSessionResource | None,
    storage_options: Mapping[str, str] | None = None,
) -> Any:
    """The change feed for an input, in the representation ``kind`` asks for."""
    begin, end = version_range(context, settings, run_tags)
    if begin < 0 or end < begin:
        raise InvalidInputError(f"invalid change-feed version range ({begin}, {end}]", table=uri)
    feed = LanceChangeFeed(uri, begin, end, tuple(settings.columns) if settings.columns else None,
                           storage_options=storage_options)
    context.log.info(f"change feed of {uri}: versions {begin + 1}..{end}")
    if kind == "feed":
        return feed
    if kind == "spark":
        from lance_assets.spark_io import session_for

        return feed.to_spark(session_for(spark))
    return from_reader(feed.to_reader(), kind)
