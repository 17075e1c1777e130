"""Index specs on a Spark DataFrame asset: the executors write, then the driver builds and
refreshes the declared indices through the engine, after each write and merge."""

from __future__ import annotations

import dagster as dg
import lance
import pytest

import lance_format
from lance_assets import LanceIOManager, SparkSessionResource
from lance_assets.indices import INDICES

pytest.importorskip("pyspark.sql")
from pyspark.sql import DataFrame  # noqa: E402


def test_spark_output_indices_follow_writes_and_merges(spark, root, instance):
    state = {"start": 0, "count": 50}
    resource = SparkSessionResource(master="local[2]")
    resources = {"io_manager": LanceIOManager(base_uri=root, spark=resource), "spark": resource}

    @dg.asset(metadata={INDICES: [{"column": "id", "type": "BTREE"}, {"column": "email", "type": "BITMAP"}],
                        "lance/write_mode": "merge", "lance/merge_on": "id"})
    def users(spark: SparkSessionResource) -> DataFrame:
        start, count = state["start"], state["count"]
        data = [(i, f"user{i % 7}@example.com" if i % 5 else None, f"https://example.com/u/{i}")
                for i in range(start, start + count)]
        return spark.get_session().createDataFrame(data, "id long, email string, url string")

    uri = f"{root}/users.lance"
    for start, total, action in ((0, 50, "created"), (40, 70, "optimized")):
        state["start"] = start
        state["count"] = 30 if start else 50
        result = dg.materialize([users], instance=instance, resources=resources)
        assert result.success
        meta = result.asset_materializations_for_node("users")[0].metadata
        assert meta["lance/engine"].value == "spark"
        assert {e["action"] for e in meta[INDICES].value} == {action}
        assert meta["lance/index/id_idx/indexed_rows"].value == lance.dataset(uri).stats.index_stats(
            "id_idx")["num_indexed_rows"]
        assert meta["lance/index/email_idx/unindexed_rows"].value == 0
        assert lance.dataset(uri).count_rows() == total
    for query in ("id IN (3, 45, 69)", "email = 'user3@example.com'", "email IS NULL"):
        assert lance_format.dataset(uri).to_table(filter=query).sort_by("id").equals(
            lance.dataset(uri).to_table(filter=query).sort_by("id")), query
