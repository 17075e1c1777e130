"""The change feed read through Spark equals the engine's."""

from __future__ import annotations

import lance
import pyarrow as pa
import pytest
from pyspark.sql import functions as F

import lance_format
from lance_format.errors import InvalidInputError
from lance_format.spark import merge_dataframe, read_changes, write_dataframe
from lance_format.spark.changes import plan_changes

KEY = ["_commit_version", "_change_type", "_rowid"]


def _engine_feed(uri: str, begin: int, end: int, columns=None) -> list[dict]:
    reader = lance_format.dataset(uri, end).delta(begin_version=begin, end_version=end).get_changes(columns)
    return reader.read_all().sort_by([(k, "ascending") for k in KEY]).to_pylist()


def _spark_feed(df) -> list[dict]:
    return df.toArrow().sort_by([(k, "ascending") for k in KEY]).to_pylist()


def _history(spark, uri: str) -> int:
    rows = spark.range(0, 3000, 1, 2).select("id", F.concat(F.lit("v"), F.col("id").cast("string")).alias("s"))
    write_dataframe(rows, uri, enable_stable_row_ids=True, max_rows_per_file=700)  # v1
    write_dataframe(rows.where("id < 200").withColumn("id", F.col("id") + 5000), uri, mode="append")  # v2
    merge_dataframe(rows.where("id % 10 = 0").withColumn("s", F.lit("updated")), uri, "id")  # v3
    lance.dataset(uri).delete("id >= 2500 AND id < 2600")  # v4 (pylance)
    lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=5000)  # v5, v6: no change
    write_dataframe(rows.where("id < 100"), uri, mode="overwrite", replace_where="id < 100")  # v7
    return lance.dataset(uri).version


def test_change_feed_equals_the_engines(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    latest = _history(spark, uri)
    assert latest == 7
    for begin, end in ((0, latest), (1, 3), (3, 7), (4, 6), (2, 2)):
        spark_df = read_changes(spark, uri, begin, end)
        assert _spark_feed(spark_df) == _engine_feed(uri, begin, end), f"({begin}, {end}]"
    assert spark_df.columns[-3:] == ["_change_type", "_commit_version", "_commit_timestamp"]
    # small tasks: a version's changes are shared by several tasks, the feed is the same
    spec, tasks, _ = plan_changes(uri, 0, latest, ["s"], rows_per_task=500)
    assert max(parts for _, _, parts in tasks) > 1
    assert {v for v, _, _ in tasks} == {1, 2, 3, 4, 7}  # compaction versions need no task
    feed = _spark_feed(read_changes(spark, uri, 0, latest, ["s"], rows_per_task=500))
    assert feed == _engine_feed(uri, 0, latest, ["s"])
    kinds = {(r["_commit_version"], r["_change_type"]) for r in feed}
    assert {(3, "update_preimage"), (3, "update_postimage"), (4, "delete"), (7, "insert")} <= kinds


def test_change_feed_errors(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"id": [1, 2]}), uri)  # no stable row ids
    with pytest.raises(InvalidInputError, match="stable row ids"):
        read_changes(spark, uri, 0, 1)
    with pytest.raises(InvalidInputError):
        read_changes(spark, uri, 1, 0)
