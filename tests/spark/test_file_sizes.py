"""File sizes at scale: a write from many small partitions leaves a few fragments near the
target file size, and the commit result reports the fragment and small-file counts."""

from __future__ import annotations

import lance
import pytest
from pyspark.sql import functions as F

from lance_format.errors import InvalidInputError
from lance_format.spark import merge_dataframe, write_dataframe
from lance_format.spark.coalesce import (
    COALESCED_KEY,
    FRAGMENTS_BEFORE_KEY,
    FRAGMENTS_KEY,
    estimated_size,
    planned_tasks,
)
from lance_format.spark.write_plan import plan_write

from .helpers import data_files, lance_rows, spark_rows


def _many_partitions(spark, rows: int = 10_000, partitions: int = 200):
    return spark.range(0, rows, 1, 4).select(
        "id", F.concat(F.lit("v"), F.col("id").cast("string")).alias("s")).repartition(partitions)


def _fragment_rows(uri: str) -> list[int]:
    return [f.count_rows() for f in lance.dataset(uri).get_fragments()]


def test_many_tiny_partitions_write_one_fragment(spark, tmp_path):
    df = _many_partitions(spark)
    assert df.rdd.getNumPartitions() == 200
    uri = str(tmp_path / "t.lance")
    result = write_dataframe(df, uri)
    assert result.rows == 10_000
    assert result.fragments == len(lance.dataset(uri).get_fragments()) == 1
    assert result.small_fragments == 1  # 10,000 rows are below 1/8 of the 1M-row target
    assert lance_rows(uri) == spark_rows(df)

    # without coalescing (the behaviour before): one small fragment per non-empty partition
    before = write_dataframe(df, str(tmp_path / "u.lance"), coalesce=False)
    assert before.fragments == len(lance.dataset(str(tmp_path / "u.lance")).get_fragments()) == 200
    assert before.small_fragments == 200
    assert lance_rows(str(tmp_path / "u.lance")) == lance_rows(uri)


def test_target_rows_per_file(spark, tmp_path):
    # Spark knows this DataFrame's row count (a range, repartitioned); with other operators it
    # estimates the rows from the size (see test_target_bytes_per_file)
    df = spark.range(0, 10_000, 1, 4).repartition(200)
    assert estimated_size(df)[0] == 10_000
    uri = str(tmp_path / "t.lance")
    result = write_dataframe(df, uri, target_rows_per_file=2500)
    sizes = _fragment_rows(uri)
    assert result.fragments == len(sizes) == 4 and sum(sizes) == 10_000
    assert all(2000 <= n <= 3000 for n in sizes), sizes  # hash partitions are near-equal, not equal
    assert result.small_fragments == 0
    assert lance_rows(uri) == spark_rows(df)
    # appends are planned the same way
    more = write_dataframe(spark.range(10_000, 15_000, 1, 4).repartition(100), uri, mode="append",
                           target_rows_per_file=2500)
    assert more.fragments == 2 and len(lance.dataset(uri).get_fragments()) == 6
    assert lance.dataset(uri).count_rows() == 15_000


def test_target_rows_never_exceeds_max_rows(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    result = write_dataframe(_many_partitions(spark), uri, target_rows_per_file=5000, max_rows_per_file=1000)
    sizes = _fragment_rows(uri)
    assert max(sizes) <= 1000 and sum(sizes) == 10_000 and result.fragments == len(sizes)
    # the target is capped at the limit: 10 tasks, each rolling its files at 1,000 rows
    assert result.fragments <= 20


def test_target_bytes_per_file(spark, tmp_path):
    df = _many_partitions(spark)
    rows, size = estimated_size(df)
    assert rows is not None and rows > 0 and size is not None and size > 0
    target = -(-size // 5)  # the estimate fills five files
    plan = plan_write(df.schema, str(tmp_path / "t.lance"), target_bytes_per_file=target)
    assert planned_tasks(df, plan) == 5
    uri = str(tmp_path / "t.lance")
    result = write_dataframe(df, uri, target_bytes_per_file=target, target_rows_per_file=rows)
    assert result.fragments == len(lance.dataset(uri).get_fragments()) == 5
    assert lance_rows(uri) == spark_rows(df)


def test_unknown_estimate_coalesces_small_outputs_in_the_commit(spark, tmp_path):
    # a DataFrame made from Python rows has no size estimate: its partitioning is kept, and the
    # tasks' small outputs are coalesced by the commit instead (one version)
    df = spark.createDataFrame([(i, f"v{i}") for i in range(300)], "id long, s string").repartition(3)
    uri = str(tmp_path / "t.lance")
    assert planned_tasks(df, plan_write(df.schema, uri)) is None
    result = write_dataframe(df, uri)
    assert result.fragments == len(lance.dataset(uri).get_fragments()) == 1
    assert (result.version, result.fragments_before_coalescing, result.small_outputs_coalesced) == (1, 3, 3)
    props = lance.dataset(uri).read_transaction(1).transaction_properties
    assert (props[FRAGMENTS_BEFORE_KEY], props[FRAGMENTS_KEY], props[COALESCED_KEY]) == ("3", "1", "3")
    assert lance_rows(uri) == spark_rows(df)
    assert data_files(uri) == {d.path for f in lance.dataset(uri).get_fragments() for d in f.data_files()}
    # coalesce=False: one fragment per partition
    plain = write_dataframe(df, str(tmp_path / "u.lance"), coalesce=False)
    assert (plain.fragments, plain.fragments_before_coalescing, plain.small_outputs_coalesced) == (3, 3, 0)
    # a merge's new rows are coalesced too (tests/spark/test_merge_coalescing.py); its updated
    # rows keep fragments of their own
    merged = merge_dataframe(df.limit(10).withColumn("s", F.lit("m")), uri, "id")
    assert (merged.rows_updated, merged.small_outputs_coalesced) == (10, 1)
    assert lance.dataset(uri).count_rows() == 300


def test_bad_targets_are_refused(spark, tmp_path):
    for options in ({"target_rows_per_file": 0}, {"target_bytes_per_file": -1}):
        with pytest.raises(InvalidInputError, match="target_rows_per_file"):
            plan_write(spark.range(1).schema, str(tmp_path / "t.lance"), **options)


def test_stream_micro_batches_coalesce_through_foreach_batch(spark, tmp_path):
    source = tmp_path / "in"
    for n in range(2):
        spark.range(n * 1000, (n + 1) * 1000, 1, 1).selectExpr("id", "cast(id as string) AS s") \
            .write.parquet(str(source / f"part{n}"))
    uri = str(tmp_path / "t.lance")
    results = []

    def write_batch(batch_df, batch_id: int) -> None:
        results.append(write_dataframe(batch_df.repartition(50), uri, mode="append",
                                       transaction_properties={"idempotency_key": f"batch-{batch_id}"}))

    stream = spark.readStream.schema("id long, s string").option("maxFilesPerTrigger", 1) \
        .option("recursiveFileLookup", "true").parquet(str(source))
    query = stream.writeStream.foreachBatch(write_batch) \
        .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start()
    query.awaitTermination()
    assert query.exception() is None
    assert [r.fragments for r in results] == [1, 1]
    assert [r.small_fragments for r in results] == [1, 1]
    assert len(lance.dataset(uri).get_fragments()) == 2
    assert [r["id"] for r in lance_rows(uri)] == list(range(2000))


def test_stream_sink_reports_fragment_counts(spark, tmp_path):
    source = tmp_path / "in"
    spark.range(0, 1000, 1, 1).selectExpr("id", "cast(id as string) AS s").write.parquet(str(source / "part0"))
    uri = str(tmp_path / "t.lance")
    stream = spark.readStream.schema("id long, s string").option("recursiveFileLookup", "true") \
        .parquet(str(source)).repartition(4)
    query = stream.writeStream.format("lance").option("checkpointLocation", str(tmp_path / "ck")) \
        .option("target_rows_per_file", "400").trigger(availableNow=True).start(uri)
    query.awaitTermination()
    assert query.exception() is None
    ds = lance.dataset(uri)
    assert ds.count_rows() == 1000
    # ~250 rows per task are not small for a 400-row target (1/8 of it is): one fragment per task
    assert len(ds.get_fragments()) == 4
    props = ds.read_transaction(1).transaction_properties
    assert (props[FRAGMENTS_BEFORE_KEY], props[FRAGMENTS_KEY], props[COALESCED_KEY]) == ("4", "4", "0")


def test_stream_sink_commit_counts_small_fragments(spark, tmp_path):
    """A micro-batch's commit reports its fragments and how many are small (below 1/8 of the target)."""
    import pyarrow as pa
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from lance_format.spark.streaming_sink import LanceStreamWriter, commit_batch

    uri = str(tmp_path / "t.lance")
    schema = StructType([StructField("id", LongType()), StructField("s", StringType())])
    options = {"path": uri, "txnAppId": "app-1", "target_rows_per_file": "4000"}  # small: below 500 rows

    def attempt(start: int, count: int):
        ids = pa.array(range(start, start + count), pa.int64())
        batch = pa.record_batch([ids, pa.array([f"v{i}" for i in range(start, start + count)])], names=["id", "s"])
        return LanceStreamWriter(options, schema, False).write(iter([batch]))

    messages = [attempt(i * 250, 250) for i in range(4)] + [attempt(1000, 600)]
    result = commit_batch(LanceStreamWriter(options, schema, False), messages, 0)
    # the four small outputs (below 500 rows) were coalesced into one file
    assert (result.version, result.rows, result.fragments, result.small_fragments) == (1, 1600, 2, 0)
    assert (result.fragments_before_coalescing, result.small_outputs_coalesced) == (5, 4)
    assert sorted(f.count_rows() for f in lance.dataset(uri).get_fragments()) == [600, 1000]
    assert lance.dataset(uri).count_rows() == 1600

    # without coalescing: one fragment per task, four of them small
    options = {**options, "path": str(tmp_path / "u.lance"), "coalesceSmallFragments": "false"}
    messages = [attempt(i * 250, 250) for i in range(4)] + [attempt(1000, 600)]
    result = commit_batch(LanceStreamWriter(options, schema, False), messages, 0)
    assert (result.version, result.rows, result.fragments, result.small_fragments) == (1, 1600, 5, 4)
    assert (result.fragments_before_coalescing, result.small_outputs_coalesced) == (5, 0)
    assert len(lance.dataset(options["path"]).get_fragments()) == 5
