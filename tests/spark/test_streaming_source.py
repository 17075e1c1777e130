"""``spark.readStream.format("lance")``: the change feed and appended rows as streams.

Every query runs with ``Trigger.AvailableNow`` (it stops by itself at the version that was newest
when it started); micro-batches are collected on the driver by ``foreachBatch``.
"""

from __future__ import annotations

import lance
import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from lance_format.spark import merge_dataframe, read_changes, write_dataframe

KEY = ["_commit_version", "_change_type", "_rowid"]


def _rows(spark, start: int, count: int):
    return spark.range(start, start + count, 1, 2).select(
        "id", F.concat(F.lit("v"), F.col("id").cast("string")).alias("s"))


def _history(spark, uri: str) -> int:
    write_dataframe(_rows(spark, 0, 1000), uri, enable_stable_row_ids=True, max_rows_per_file=300)  # v1
    write_dataframe(_rows(spark, 5000, 100), uri, mode="append")  # v2
    merge_dataframe(_rows(spark, 0, 1000).where("id % 10 = 0").withColumn("s", F.lit("updated")), uri, "id")  # v3
    lance.dataset(uri).delete("id >= 900 AND id < 950")  # v4
    lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=5000)  # v5, v6: no change
    write_dataframe(_rows(spark, 6000, 10), uri, mode="append")  # v7
    return lance.dataset(uri).version


def _collect(stream, checkpoint: str) -> list[tuple[int, pa.Table]]:
    """Run ``stream`` to the end (availableNow); the micro-batches as (batch id, rows)."""
    batches: list[tuple[int, pa.Table]] = []

    def keep(df, batch_id):
        batches.append((batch_id, df.toArrow()))

    query = stream.writeStream.foreachBatch(keep).option("checkpointLocation", checkpoint) \
        .trigger(availableNow=True).start()
    query.awaitTermination()
    assert query.exception() is None
    return batches


def _sorted(table: pa.Table, keys=KEY) -> list[dict]:
    return table.sort_by([(k, "ascending") for k in keys]).to_pylist() if table.num_rows else []


def _feed_stream(spark, uri: str, **options):
    reader = spark.readStream.format("lance").option("readChangeFeed", "true")
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load(uri)


def test_change_feed_stream_equals_read_changes(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    latest = _history(spark, uri)
    batches = _collect(_feed_stream(spark, uri, startingVersion=1), str(tmp_path / "ck"))
    assert len(batches) == 1
    expected = _sorted(read_changes(spark, uri, 0, latest).toArrow())
    assert _sorted(batches[0][1]) == expected
    assert {r["_change_type"] for r in expected} == {"insert", "delete", "update_preimage", "update_postimage"}
    # startingVersion is inclusive: from 3 on
    batches = _collect(_feed_stream(spark, uri, startingVersion=3), str(tmp_path / "ck3"))
    assert _sorted(pa.concat_tables([t for _, t in batches])) == _sorted(read_changes(spark, uri, 2, latest).toArrow())


def test_change_feed_stream_rate_limited_by_versions(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    latest = _history(spark, uri)
    batches = _collect(_feed_stream(spark, uri, maxVersionsPerTrigger=2), str(tmp_path / "ck"))
    # versions (0,2], (2,4], (4,6] (compaction only: no rows, still a batch), (6,7]
    assert [b for b, _ in batches] == [0, 1, 2, 3]
    assert [sorted(set(t.column("_commit_version").to_pylist())) for _, t in batches] == [[1, 2], [3, 4], [], [7]]
    for (_, table), (begin, end) in zip(batches, [(0, 2), (2, 4), (4, 6), (6, 7)]):
        assert _sorted(table) == _sorted(read_changes(spark, uri, begin, end).toArrow())
    assert latest == 7


def test_change_feed_stream_resumes_from_its_checkpoint(spark, tmp_path):
    uri, checkpoint = str(tmp_path / "t.lance"), str(tmp_path / "ck")
    write_dataframe(_rows(spark, 0, 100), uri, enable_stable_row_ids=True)  # v1
    write_dataframe(_rows(spark, 100, 100), uri, mode="append")  # v2
    first = _collect(_feed_stream(spark, uri), checkpoint)
    assert sorted(set(first[0][1].column("_commit_version").to_pylist())) == [1, 2]
    lance.dataset(uri).delete("id < 10")  # v3
    write_dataframe(_rows(spark, 200, 5), uri, mode="append")  # v4
    second = _collect(_feed_stream(spark, uri), checkpoint)
    assert [b for b, _ in second] == [1]  # the query goes on with its next batch
    assert _sorted(second[0][1]) == _sorted(read_changes(spark, uri, 2, 4).toArrow())
    # nothing new: a third run has no batch at all
    assert _collect(_feed_stream(spark, uri), checkpoint) == []
    # every version once, none lost, none repeated
    every = pa.concat_tables([t for _, t in first + second])
    assert _sorted(every) == _sorted(read_changes(spark, uri, 0, 4).toArrow())


def test_change_feed_stream_from_latest_and_columns(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    write_dataframe(_rows(spark, 0, 10), uri, enable_stable_row_ids=True)  # v1
    stream = _feed_stream(spark, uri, startingVersion="latest", columns="s")
    assert stream.columns[:2] == ["s", "_rowid"] and "id" not in stream.columns
    # Spark runs the first batch of a new query even when it is empty
    assert sum(t.num_rows for _, t in _collect(stream, str(tmp_path / "ck"))) == 0
    write_dataframe(_rows(spark, 10, 3), uri, mode="append")  # v2
    batches = _collect(stream, str(tmp_path / "ck"))
    assert sorted(batches[0][1].column("s").to_pylist()) == ["v10", "v11", "v12"]
    assert set(batches[0][1].column("_change_type").to_pylist()) == {"insert"}


def test_change_feed_stream_needs_stable_row_ids(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"id": [1, 2]}), uri)
    with pytest.raises(Exception, match="stable row ids"):
        _feed_stream(spark, uri, startingVersion=1).writeStream.format("noop") \
            .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start().awaitTermination()


def test_appended_rows_stream(spark, tmp_path):
    uri, checkpoint = str(tmp_path / "t.lance"), str(tmp_path / "ck")
    write_dataframe(_rows(spark, 0, 100), uri)  # v1
    write_dataframe(_rows(spark, 100, 50), uri, mode="append")  # v2
    stream = spark.readStream.format("lance").load(uri)
    first = _collect(stream, checkpoint)  # the snapshot of v2
    assert [b for b, _ in first] == [0]
    assert sorted(first[0][1].column("id").to_pylist()) == list(range(150))
    write_dataframe(_rows(spark, 150, 10), uri, mode="append")  # v3
    lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=10_000)  # v4: no new rows
    write_dataframe(_rows(spark, 160, 5), uri, mode="append")  # v5
    second = _collect(stream, checkpoint)
    assert sorted(pa.concat_tables([t for _, t in second]).column("id").to_pylist()) == list(range(150, 165))
    # a delete is not an append: the query stops, unless told to pass over such commits
    lance.dataset(uri).delete("id < 5")  # v6
    write_dataframe(_rows(spark, 165, 5), uri, mode="append")  # v7
    with pytest.raises(Exception, match="not an append"):
        _collect(stream, checkpoint)
    skipping = spark.readStream.format("lance").option("skipChangeCommits", "true").load(uri)
    third = _collect(skipping, checkpoint)
    assert sorted(pa.concat_tables([t for _, t in third]).column("id").to_pylist()) == list(range(165, 170))


def test_appended_rows_stream_from_a_version_rate_limited(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    for start in range(0, 50, 10):
        write_dataframe(_rows(spark, start, 10), uri, mode="append")  # v1..v5
    stream = spark.readStream.format("lance").option("startingVersion", 2).option("maxVersionsPerTrigger", 3).load(uri)
    batches = _collect(stream, str(tmp_path / "ck"))
    assert [sorted(t.column("id").to_pylist()) for _, t in batches] == [list(range(10, 40)), list(range(40, 50))]
    # without startingVersion the first batch is the newest snapshot, whatever the limit
    snapshot = spark.readStream.format("lance").option("maxVersionsPerTrigger", 1).load(uri)
    batches = _collect(snapshot, str(tmp_path / "ck2"))
    assert [sorted(t.column("id").to_pylist()) for _, t in batches] == [list(range(50))]


def test_batch_read_change_feed_options(spark, tmp_path):
    """The batch twin of the stream's options: readChangeFeed, startingVersion (inclusive), endingVersion."""
    uri = str(tmp_path / "t.lance")
    latest = _history(spark, uri)
    df = spark.read.format("lance").option("readChangeFeed", "true").option("startingVersion", 2) \
        .option("endingVersion", 4).load(uri)
    assert _sorted(df.toArrow()) == _sorted(read_changes(spark, uri, 1, 4).toArrow())
    df = spark.read.format("lance").option("readChangeFeed", "true").option("startingVersion", 7).load(uri)
    assert _sorted(df.toArrow()) == _sorted(read_changes(spark, uri, 6, latest).toArrow())


def test_live_pipeline_from_change_feed_to_lance_sink(spark, tmp_path):
    """A running query (processingTime trigger) follows new versions of one table into another;
    processAllAvailable() waits for each step, stop() ends it."""
    source, target = str(tmp_path / "a.lance"), str(tmp_path / "b.lance")
    write_dataframe(_rows(spark, 0, 10), source, enable_stable_row_ids=True)  # v1
    feed = _feed_stream(spark, source, startingVersion=1).select("id", "s", "_change_type", "_commit_version")
    query = feed.writeStream.format("lance").option("checkpointLocation", str(tmp_path / "ck")) \
        .trigger(processingTime="200 milliseconds").start(target)
    try:
        query.processAllAvailable()
        assert lance.dataset(target).count_rows() == 10
        write_dataframe(_rows(spark, 10, 5), source, mode="append")  # v2
        lance.dataset(source).delete("id < 2")  # v3
        query.processAllAvailable()
    finally:
        query.stop()
    rows = lance.dataset(target).to_table().to_pylist()
    assert sorted((r["_commit_version"], r["_change_type"], r["id"]) for r in rows) == (
        [(1, "insert", i) for i in range(10)] + [(2, "insert", i) for i in range(10, 15)]
        + [(3, "delete", 0), (3, "delete", 1)])
