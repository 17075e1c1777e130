"""The ``lance`` streaming sink and ``merge_each_batch``: one version per micro-batch, exactly once.

Input streams are directories of parquet files read with ``maxFilesPerTrigger=1`` (one file per
micro-batch) and ``Trigger.AvailableNow``: every query ends by itself once the files are read.
"""

from __future__ import annotations

import os

import lance
import pyarrow as pa
import pytest
from pyspark.sql import functions as F

import lance_format
from lance_format.spark import merge_each_batch
from lance_format.spark.streaming_sink import (
    STREAM_APP_ID,
    STREAM_BATCH_ID,
    LanceStreamWriter,
)

from .helpers import lance_rows

SCHEMA = "id long, s string"


def _add_file(spark, folder, start: int, count: int, tag: str = "") -> None:
    """One more input file (a micro-batch with maxFilesPerTrigger=1), rows ``start..start+count``."""
    n = len([f for f in os.listdir(folder) if not f.startswith(".")]) if os.path.isdir(folder) else 0
    df = spark.range(start, start + count, 1, 1).select(
        "id", F.concat(F.lit("v"), F.col("id").cast("string"), F.lit(tag)).alias("s"))
    df.coalesce(1).write.parquet(os.path.join(folder, f"part{n:03d}"))


def _input(spark, folder):
    return spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).option("recursiveFileLookup", "true") \
        .parquet(str(folder))


def forget_commit(checkpoint, batch_id: int) -> None:
    """Spark's record of batch ``batch_id`` undone: as after a crash between the sink's commit and
    the checkpoint's ``commits/N`` (its checksum file goes too, or Spark cannot write it again)."""
    os.remove(os.path.join(checkpoint, "commits", str(batch_id)))
    crc = os.path.join(checkpoint, "commits", f".{batch_id}.crc")
    if os.path.exists(crc):
        os.remove(crc)


def _run(writer, uri: str):
    query = writer.trigger(availableNow=True).start(uri)
    query.awaitTermination()
    assert query.exception() is None
    return query


def _properties(uri: str) -> list[dict]:
    """The transaction properties of every version (read by the engine)."""
    latest = lance.dataset(uri).version
    return [dict(lance_format.dataset(uri, v).read_transaction().transaction_properties) for v in range(1, latest + 1)]


def test_append_sink_one_version_per_batch(spark, tmp_path):
    folder, uri, checkpoint = tmp_path / "in", str(tmp_path / "t.lance"), str(tmp_path / "ck")
    for start in (0, 100, 200):
        _add_file(spark, folder, start, 100)
    query = _run(_input(spark, folder).writeStream.format("lance").option("checkpointLocation", checkpoint), uri)
    assert lance.dataset(uri).version == 3  # batch 0 creates the table, batches 1 and 2 append
    assert [r["id"] for r in lance_rows(uri)] == list(range(300))
    props = _properties(uri)
    assert [p[STREAM_BATCH_ID] for p in props] == ["0", "1", "2"]
    assert {p[STREAM_APP_ID] for p in props} == {str(query.id)}
    # a restart from the checkpoint reads only the new file: one more version
    _add_file(spark, folder, 300, 50)
    again = _run(_input(spark, folder).writeStream.format("lance").option("checkpointLocation", checkpoint), uri)
    assert again.id == query.id
    assert lance.dataset(uri).version == 4
    assert [r["id"] for r in lance_rows(uri)] == list(range(350))


def test_restart_after_commit_before_checkpoint_commits_once(spark, tmp_path):
    """Batch 1's commit landed but Spark did not record it (commits/1 removed): the restarted query
    runs batch 1 again, and the sink finds batch 1 in the table and skips it."""
    folder, uri, checkpoint = tmp_path / "in", str(tmp_path / "t.lance"), tmp_path / "ck"
    _add_file(spark, folder, 0, 100)
    _add_file(spark, folder, 100, 100)
    _run(_input(spark, folder).writeStream.format("lance").option("checkpointLocation", str(checkpoint)), uri)
    assert lance.dataset(uri).version == 2
    files_before = set(os.listdir(os.path.join(uri, "data")))
    forget_commit(checkpoint, 1)
    _run(_input(spark, folder).writeStream.format("lance").option("checkpointLocation", str(checkpoint)), uri)
    assert (checkpoint / "commits" / "1").exists()  # Spark did re-run batch 1
    assert lance.dataset(uri).version == 2  # ... and no version came of it
    assert [r["id"] for r in lance_rows(uri)] == list(range(200))
    assert set(os.listdir(os.path.join(uri, "data"))) == files_before  # the re-run's files are gone


def test_restart_after_commit_then_new_data(spark, tmp_path):
    """The same, with the re-run batch followed by new batches: each later batch commits once."""
    folder, uri, checkpoint = tmp_path / "in", str(tmp_path / "t.lance"), tmp_path / "ck"
    for start in (0, 10, 20):
        _add_file(spark, folder, start, 10)
    _run(_input(spark, folder).writeStream.format("lance").option("checkpointLocation", str(checkpoint)), uri)
    forget_commit(checkpoint, 2)
    _add_file(spark, folder, 30, 10)
    _run(_input(spark, folder).writeStream.format("lance").option("checkpointLocation", str(checkpoint)), uri)
    assert lance.dataset(uri).version == 4
    assert [r["id"] for r in lance_rows(uri)] == list(range(40))
    assert [p[STREAM_BATCH_ID] for p in _properties(uri)] == ["0", "1", "2", "3"]


def test_complete_mode_overwrites_each_batch(spark, tmp_path):
    folder, uri, checkpoint = tmp_path / "in", str(tmp_path / "t.lance"), str(tmp_path / "ck")
    _add_file(spark, folder, 0, 30)
    _add_file(spark, folder, 30, 30)
    counts = _input(spark, folder).groupBy((F.col("id") % 3).alias("id")).agg(F.count("*").alias("n"))
    _run(counts.writeStream.format("lance").outputMode("complete").option("checkpointLocation", checkpoint), uri)
    assert lance.dataset(uri).version == 2
    assert lance_rows(uri) == [{"id": 0, "n": 20}, {"id": 1, "n": 20}, {"id": 2, "n": 20}]
    assert lance_rows(uri, version=1) == [{"id": 0, "n": 10}, {"id": 1, "n": 10}, {"id": 2, "n": 10}]
    assert lance_format.dataset(uri, 2).read_transaction_message().WhichOneof("operation") == "overwrite"


def test_update_mode_is_refused_by_spark(spark, tmp_path):
    folder, uri = tmp_path / "in", str(tmp_path / "t.lance")
    _add_file(spark, folder, 0, 10)
    counts = _input(spark, folder).groupBy("id").count()
    query = counts.writeStream.format("lance").outputMode("update") \
        .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start(uri)
    with pytest.raises(Exception, match="does not support Update mode"):
        query.awaitTermination()
    assert not os.path.exists(uri)


def test_sink_refuses_a_mismatching_table(spark, tmp_path):
    folder, uri = tmp_path / "in", str(tmp_path / "t.lance")
    spark.range(3).selectExpr("id", "id * 2 AS other").write.format("lance").mode("append").save(uri)
    _add_file(spark, folder, 0, 10)
    with pytest.raises(Exception, match="SchemaMismatchError|does not match the table schema"):
        _input(spark, folder).writeStream.format("lance").option("checkpointLocation", str(tmp_path / "ck")) \
            .trigger(availableNow=True).start(uri).awaitTermination()
    assert lance.dataset(uri).version == 1


def test_merge_each_batch_upserts_exactly_once(spark, tmp_path):
    folder, uri, checkpoint = tmp_path / "in", str(tmp_path / "t.lance"), tmp_path / "ck"
    _add_file(spark, folder, 0, 20)   # batch 0: inserts 0..19
    _add_file(spark, folder, 10, 20, tag="-new")  # batch 1: updates 10..19, inserts 20..29
    stream = _input(spark, folder)

    def start():
        query = stream.writeStream.foreachBatch(merge_each_batch(uri, "id")) \
            .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
        query.awaitTermination()
        assert query.exception() is None

    start()
    # v1: the empty table made from batch 0's schema; v2, v3: one merge per batch
    assert lance.dataset(uri).version == 3
    rows = lance_rows(uri)
    assert [r["id"] for r in rows] == list(range(30))
    assert [r["s"] for r in rows] == [f"v{i}" for i in range(10)] + [f"v{i}-new" for i in range(10, 30)]
    assert [p.get(STREAM_BATCH_ID) for p in _properties(uri)] == [None, "0", "1"]
    forget_commit(checkpoint, 1)
    start()  # batch 1 runs again: already merged, skipped
    assert lance.dataset(uri).version == 3
    assert lance_rows(uri) == rows


def _attempt(writer, ids):
    """One task attempt of a micro-batch, run here: its files and commit message."""
    batch = pa.record_batch([pa.array(ids, pa.int64()), pa.array([f"v{i}" for i in ids], pa.string())],
                            names=["id", "s"])
    return writer.write(iter([batch]))


def test_second_attempt_of_a_batch_commits_nothing(spark, tmp_path, monkeypatch):
    """Attempts of one batch (a re-run, or two racing): one commit; the others' files are removed."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from lance_format.spark import streaming_sink

    uri = str(tmp_path / "t.lance")
    schema = StructType([StructField("id", LongType()), StructField("s", StringType())])
    options = {"path": uri, "txnAppId": "app-1"}
    first = streaming_sink.commit_batch(LanceStreamWriter(options, schema, False),
                                        [_attempt(LanceStreamWriter(options, schema, False), [1, 2])], 0)
    assert (first.version, first.skipped) == (1, False)
    files = set(os.listdir(os.path.join(uri, "data")))
    again = streaming_sink.commit_batch(LanceStreamWriter(options, schema, False),
                                        [_attempt(LanceStreamWriter(options, schema, False), [1, 2])], 0)
    assert again.skipped and again.version == 1
    assert set(os.listdir(os.path.join(uri, "data"))) == files
    # two attempts of batch 1 race: B checks the table just before A's commit lands
    writer = LanceStreamWriter(options, schema, False)
    a, b = _attempt(writer, [3]), _attempt(writer, [3])
    checked = streaming_sink.batch_committed

    def check_then_lose_the_race(*args, **kwargs):
        result = checked(*args, **kwargs)
        monkeypatch.setattr(streaming_sink, "batch_committed", checked)
        assert not streaming_sink.commit_batch(LanceStreamWriter(options, schema, False), [a], 1).skipped
        return result

    monkeypatch.setattr(streaming_sink, "batch_committed", check_then_lose_the_race)
    raced = streaming_sink.commit_batch(LanceStreamWriter(options, schema, False), [b], 1)
    assert raced.skipped and raced.version == 2
    assert lance.dataset(uri).version == 2
    assert [r["id"] for r in lance_rows(uri)] == [1, 2, 3]
    assert len(os.listdir(os.path.join(uri, "data"))) == len(files) + 1  # B's file is gone
    # a different stream id is another stream: its batch 0 commits
    other = {**options, "txnAppId": "app-2"}
    assert not streaming_sink.commit_batch(LanceStreamWriter(other, schema, False),
                                           [_attempt(LanceStreamWriter(other, schema, False), [4])], 0).skipped
    assert lance.dataset(uri).version == 3


def test_failed_batch_commits_nothing_and_its_rerun_commits_once(spark, tmp_path):
    """A task of batch 1 fails: the query stops with no version for it; the restarted query runs
    batch 1 again (its tasks anew) and commits it once."""
    folder, uri, checkpoint = tmp_path / "in", str(tmp_path / "t.lance"), str(tmp_path / "ck")
    marker = str(tmp_path / "fail")
    open(marker, "w").close()
    _add_file(spark, folder, 0, 100)
    _add_file(spark, folder, 100, 100)

    def fail_while_marked(batches):
        for batch in batches:
            if os.path.exists(marker) and 150 in batch.column(0).to_pylist():
                raise RuntimeError("task failed on purpose")
            yield batch

    def start():
        stream = _input(spark, folder).repartition(2).mapInArrow(fail_while_marked, SCHEMA)
        query = stream.writeStream.format("lance").option("checkpointLocation", checkpoint) \
            .trigger(availableNow=True).start(uri)
        query.awaitTermination()

    with pytest.raises(Exception, match="task failed on purpose"):
        start()
    assert lance.dataset(uri).version == 1
    assert [r["id"] for r in lance_rows(uri)] == list(range(100))
    os.remove(marker)
    start()
    assert lance.dataset(uri).version == 2
    assert [r["id"] for r in lance_rows(uri)] == list(range(200))
    assert [p[STREAM_BATCH_ID] for p in _properties(uri)] == ["0", "1"]
