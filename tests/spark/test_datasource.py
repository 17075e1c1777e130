"""The ``lance`` data source: ``spark.read.format("lance")`` and ``df.write.format("lance")``."""

from __future__ import annotations

import json
import threading

import lance
import pytest
from pyspark.sql import functions as F

import lance_format
from lance_format.spark import IDEMPOTENCY_KEY, read_changes, write_dataframe

from .helpers import data_files, lance_rows, spark_rows


def _frame(spark, start: int, stop: int, label: str = "v"):
    return spark.range(start, stop, 1, 2).select("id", F.concat(F.lit(label), F.col("id").cast("string")).alias("s"))


def test_write_and_read_through_the_data_source(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    _frame(spark, 0, 50).write.format("lance").mode("append").option("max_rows_per_file", "20").save(uri)
    assert lance.dataset(uri).version == 1 and len(lance.dataset(uri).get_fragments()) >= 3
    _frame(spark, 50, 60).write.format("lance").mode("append").save(uri)
    assert lance_rows(uri) == spark_rows(_frame(spark, 0, 60))
    _frame(spark, 0, 5, "o").write.format("lance").mode("overwrite").save(uri)
    assert lance_rows(uri) == spark_rows(_frame(spark, 0, 5, "o"))
    (_frame(spark, 0, 2, "r").write.format("lance").mode("overwrite").option("replace_where", "id < 2")
     .option("transaction_properties", json.dumps({"job": "ds"})).save(uri))
    assert [r["s"] for r in lance_rows(uri)] == ["r0", "r1", "o2", "o3", "o4"]
    assert lance.dataset(uri).read_transaction(4).transaction_properties["job"] == "ds"

    # reads: pinned versions, columns, the engine's filter, Spark's filters pushed down
    assert spark_rows(spark.read.format("lance").option("version", "2").load(uri)) == spark_rows(_frame(spark, 0, 60))
    df = spark.read.format("lance").option("columns", "s").option("filter", "id >= 3").option("with_row_address", "true").load(uri)
    assert df.columns == ["s", "_rowaddr"] and sorted(r.s for r in df.collect()) == ["o3", "o4"]
    pushed = spark.read.format("lance").load(uri).where((F.col("id") > 1) & F.col("s").startswith("o"))
    assert "o3" in {r.s for r in pushed.collect()} and pushed.count() == 3
    empty = spark.read.format("lance").option("filter", "id > 100").load(uri)
    assert empty.count() == 0


def test_idempotent_data_source_write(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    write_dataframe(_frame(spark, 0, 10), uri)
    writer = _frame(spark, 10, 20).write.format("lance").mode("append").option("idempotency_key", "once")
    writer.save(uri)
    files = data_files(uri)
    writer.save(uri)
    assert lance.dataset(uri).version == 2 and data_files(uri) == files
    assert lance.dataset(uri).read_transaction(2).transaction_properties[IDEMPOTENCY_KEY] == "once"


def test_failed_data_source_write_leaves_nothing(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    write_dataframe(_frame(spark, 0, 10), uri)
    files = data_files(uri)
    bad = _frame(spark, 10, 2000).withColumn(
        "id", F.when(F.col("id") == 1500, F.raise_error(F.lit("boom"))).otherwise(F.col("id")))
    with pytest.raises(Exception, match="boom"):
        bad.write.format("lance").mode("append").save(uri)
    assert lance.dataset(uri).version == 1
    assert data_files(uri) == files


def test_change_feed_through_the_data_source(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    write_dataframe(_frame(spark, 0, 10), uri, enable_stable_row_ids=True)
    write_dataframe(_frame(spark, 10, 15), uri, mode="append")
    feed = spark.read.format("lance").option("begin_version", "0").option("end_version", "2").load(uri)
    direct = read_changes(spark, uri, 0, 2)
    key = ["_commit_version", "_rowid"]
    assert feed.toArrow().sort_by([(k, "ascending") for k in key]).to_pylist() == \
        direct.toArrow().sort_by([(k, "ascending") for k in key]).to_pylist()
    assert feed.count() == 15


def test_data_source_from_another_thread(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    write_dataframe(_frame(spark, 0, 10), uri)
    errors: list[BaseException] = []

    def work():
        try:
            spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
            _frame(spark, 10, 20).write.format("lance").mode("append").save(uri)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert not errors and lance_format.dataset(uri).count_rows() == 20
