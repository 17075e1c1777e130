"""PySpark DataFrames through the IO manager (written and read by lance_format.spark), one session."""

from __future__ import annotations

import datetime as dt

import dagster as dg
import lance
import pytest

import lance_format
from lance_assets import LanceIOManager, LanceTableResource, SparkSessionResource

pyspark_sql = pytest.importorskip("pyspark.sql")
from pyspark.sql import DataFrame  # noqa: E402

DAILY = dg.DailyPartitionsDefinition(start_date="2024-01-01")


def _resources(root):
    spark_resource = SparkSessionResource(master="local[2]")
    return {"io_manager": LanceIOManager(base_uri=root, spark=spark_resource), "spark": spark_resource}


def test_spark_outputs_inputs_partitions_and_merge(spark, root, instance):
    @dg.asset(partitions_def=DAILY, metadata={"partition_expr": "ts"})
    def raw(context, spark: SparkSessionResource) -> DataFrame:
        session = spark.get_session()
        day = dt.datetime.fromisoformat(context.partition_key)
        rows = [(i, day + dt.timedelta(hours=i), f"{context.partition_key}-{i}") for i in range(4)]
        return session.createDataFrame(rows, "id long, ts timestamp_ntz, label string")

    @dg.asset(deps=[raw], metadata={"lance/write_mode": "merge", "lance/merge_on": "id"})
    def latest(spark: SparkSessionResource) -> DataFrame:
        return spark.get_session().createDataFrame([(1, "one"), (9, "nine")], "id long, label string")

    seen = {}

    @dg.asset(ins={"raw": dg.AssetIn(metadata={"columns": ["id", "label"]})})
    def summary(raw: DataFrame) -> None:
        seen["count"] = raw.count()
        seen["columns"] = raw.columns

    resources = _resources(root)
    for key in ["2024-01-01", "2024-01-02", "2024-01-01"]:
        result = dg.materialize([raw], partition_key=key, instance=instance, resources=resources)
    meta = result.get_asset_materialization_events()[0].materialization.metadata
    assert meta["lance/engine"].value == "spark"
    assert meta["lance/rows_deleted"].value == 4 and meta["dagster/partition_row_count"].value == 4
    table = lance.dataset(f"{root}/raw.lance")
    assert table.count_rows() == 8 and table.version == 3
    assert type(table.read_transaction(3).operation).__name__ == "Update"
    props = table.read_transaction(3).transaction_properties
    assert props["dagster/partition_key"] == "2024-01-01" and props["dagster/run_id"] == result.run_id

    dg.materialize([raw, summary], selection=[summary], instance=instance, resources=resources)
    assert seen == {"count": 8, "columns": ["id", "label"]}

    dg.materialize([latest], instance=instance, resources=resources)
    meta = dg.materialize([raw, latest], selection=[latest], instance=instance,
                          resources=resources).get_asset_materialization_events()[0].materialization.metadata
    assert meta["lance/rows_updated"].value == 2 and meta["lance/rows_inserted"].value == 0
    assert sorted(lance_format.dataset(f"{root}/latest.lance").to_table().column("id").to_pylist()) == [1, 9]


def test_spark_merge_options_scoped_to_a_partition(spark, root, instance):
    parts = dg.StaticPartitionsDefinition(["a", "b"])
    state = {"rows": [(1, "a", "x"), (2, "a", "y"), (3, "b", "z")], "meta": {}}

    def make():
        @dg.asset(partitions_def=parts, metadata={"partition_expr": "p", "lance/write_mode": "merge",
                                                   "lance/merge_on": "id", **state["meta"]})
        def keyed(spark: SparkSessionResource) -> DataFrame:
            return spark.get_session().createDataFrame(state["rows"], "id long, p string, v string")

        return keyed

    resources = _resources(root)
    dg.materialize([make()], partition_key="a", instance=instance, resources=resources)
    dg.materialize([make()], partition_key="b", instance=instance, resources=resources)
    # partition "a" now has only id 1 (updated): id 2 must go, id 3 (partition "b") must stay
    state.update(rows=[(1, "a", "X")], meta={"lance/merge_delete_not_matched_by_source": True})
    result = dg.materialize([make()], partition_key="a", instance=instance, resources=resources)
    meta = result.get_asset_materialization_events()[0].materialization.metadata
    assert meta["lance/rows_deleted"].value == 1 and meta["lance/rows_updated"].value == 1
    rows = sorted(lance.dataset(f"{root}/keyed.lance").to_table().to_pylist(), key=lambda r: r["id"])
    assert rows == [{"id": 1, "p": "a", "v": "X"}, {"id": 3, "p": "b", "v": "z"}]
    # when_matched=delete removes the matched row
    state.update(rows=[(3, "b", "ignored")], meta={"lance/merge_when_matched": "delete"})
    dg.materialize([make()], partition_key="b", instance=instance, resources=resources)
    assert lance.dataset(f"{root}/keyed.lance").to_table().column("id").to_pylist() == [1]
    # a conditional update (tests/dagster/test_spark_merge_condition.py has more) applies where it holds
    state.update(rows=[(1, "a", "Y")], meta={"lance/merge_update_condition": "source.v > target.v"})
    result = dg.materialize([make()], partition_key="a", instance=instance, resources=resources)
    assert result.get_asset_materialization_events()[0].materialization.metadata["lance/rows_updated"].value == 1
    assert lance.dataset(f"{root}/keyed.lance").to_table().to_pylist() == [{"id": 1, "p": "a", "v": "Y"}]


def test_spark_change_feed_input(spark, root, instance):
    uri = f"{root}/orders.lance"
    ds = lance_format.write_dataset(__import__("pyarrow").table({"id": [1, 2], "v": [1.0, 2.0]}), uri,
                                    enable_stable_row_ids=True)
    ds.update({"v": "v * 10"}, where="id = 2")
    versions = dg.DynamicPartitionsDefinition(name="spark_orders_versions")
    instance.add_dynamic_partitions("spark_orders_versions", ["2"])
    seen = {}

    @dg.asset
    def orders() -> None:
        raise AssertionError("written directly")

    @dg.asset(partitions_def=versions, ins={"orders": dg.AssetIn(metadata={"lance/read": "changes"})})
    def spark_changes(orders: DataFrame) -> None:
        seen["rows"] = sorted((r["_change_type"], r["v"]) for r in orders.collect())

    dg.materialize([orders, spark_changes], selection=[spark_changes], partition_key="2", instance=instance,
                   resources=_resources(root))
    assert seen["rows"] == [("update_postimage", 20.0), ("update_preimage", 2.0)]
    assert SparkSessionResource().get_session() is spark  # the lazy resource reuses the active session


def test_resource_merges_spark_dataframes_on_the_executors(spark, root, instance):
    def frame(rows):
        return spark.createDataFrame(rows, "id long, v string, ts long")

    @dg.asset
    def upsert(lance_tables: LanceTableResource) -> None:
        # a merge into a missing table creates it, with the resource's file version
        ds, stats = lance_tables.merge("t", frame([(1, "a", 1), (2, "b", 1), (3, "c", 1)]), on="id")
        assert stats == {"inserted": 3, "updated": 0, "deleted": 0} and ds.data_storage_version == "2.0"
        ds, stats = lance_tables.merge("t", frame([(1, "A", 2), (2, "stale", 0), (4, "d", 1)]), on="id",
                                       update_condition="source.ts > target.ts", delete_not_matched_by_source=True)
        assert stats == {"inserted": 1, "updated": 1, "deleted": 1}
        assert sorted((r["id"], r["v"]) for r in ds.to_table().to_pylist()) == [(1, "A"), (2, "b"), (4, "d")]

    resource = LanceTableResource(base_uri=root, data_storage_version="2.0")
    assert dg.materialize([upsert], instance=instance, resources={"lance_tables": resource}).success
    ds = lance.dataset(f"{root}/t.lance")
    assert ds.version == 2 and ds.has_stable_row_ids
    rows = sorted(ds.to_table(columns=["id", "v"], with_row_id=True).to_pylist(), key=lambda r: r["id"])
    assert [(r["id"], r["_rowid"]) for r in rows][:2] == [(1, 0), (2, 1)]  # stable ids kept by the merge


def test_spark_sql_partition_expr_and_writer_properties(spark, root, instance):
    """The Spark path with a SQL ``partition_expr`` (a day replaced in one commit, a partition
    input filtered by the expression), commit properties and ``max_rows_per_file``."""
    spark_resource = SparkSessionResource(master="local[2]")
    manager = LanceIOManager(base_uri=root, spark=spark_resource, max_rows_per_file=2,
                             commit_properties={"team": "spark"})
    resources = {"io_manager": manager, "spark": spark_resource}

    @dg.asset(partitions_def=DAILY, metadata={"partition_expr": "CAST(ts AS DATE)"})
    def events(context, spark: SparkSessionResource) -> DataFrame:
        day = dt.datetime.fromisoformat(context.partition_key)
        rows = [(i, day + dt.timedelta(hours=5 * i)) for i in range(4)]  # all within the day
        return spark.get_session().createDataFrame(rows, "id long, ts timestamp_ntz")

    seen = {}

    @dg.asset(partitions_def=DAILY)
    def per_day(context, events: DataFrame) -> None:
        seen[context.partition_key] = events.count()

    for key in ["2024-01-01", "2024-01-02", "2024-01-01"]:
        dg.materialize([events], partition_key=key, instance=instance, resources=resources)
    table = lance.dataset(f"{root}/events.lance")
    assert table.count_rows() == 8
    assert type(table.read_transaction(table.version).operation).__name__ == "Update"
    assert table.read_transaction(table.version).transaction_properties["team"] == "spark"
    assert max(f.count_rows() for f in table.get_fragments()) <= 2
    dg.materialize([events, per_day], selection=[per_day], partition_key="2024-01-02", instance=instance,
                   resources=resources)
    assert seen == {"2024-01-02": 4}
