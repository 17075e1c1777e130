"""``lance/merge_update_condition`` on Spark DataFrame outputs: the same table and the same
reported row counts as the same merge from a pyarrow output (which runs ``merge_insert``)."""

from __future__ import annotations

import os

import dagster as dg
import lance
import pyarrow as pa
import pytest

from lance_assets import LanceIOManager, SparkSessionResource

pyspark_sql = pytest.importorskip("pyspark.sql")
from pyspark.sql import DataFrame  # noqa: E402

DDL = "id long, version int, label string"
ARROW = pa.schema([("id", pa.int64()), ("version", pa.int32()), ("label", pa.string())])
COUNTS = ("lance/rows_inserted", "lance/rows_updated", "lance/rows_deleted")


def _assets(state: dict) -> list:
    meta = {"lance/write_mode": "merge", "lance/merge_on": "id", **state["meta"]}

    @dg.asset(metadata=meta)
    def spark_versions(spark: SparkSessionResource) -> DataFrame:
        return spark.get_session().createDataFrame(state["rows"], DDL)

    @dg.asset(metadata=meta)
    def arrow_versions() -> pa.Table:
        return pa.Table.from_pylist([dict(zip(ARROW.names, r)) for r in state["rows"]], schema=ARROW)

    return [spark_versions, arrow_versions]


def _materialize(state: dict, root: str, instance) -> dict[str, dict]:
    session = SparkSessionResource(master="local[2]")
    resources = {"io_manager": LanceIOManager(base_uri=root, spark=session), "spark": session}
    result = dg.materialize(_assets(state), instance=instance, resources=resources)
    events = result.get_asset_materialization_events()
    return {e.asset_key.path[-1]: {k: v.value for k, v in e.materialization.metadata.items()} for e in events}


def _table(uri: str) -> list[dict]:
    columns = ["id", "version", "label", "_row_created_at_version", "_row_last_updated_at_version"]
    return lance.dataset(uri).to_table(columns=columns).sort_by("id").to_pylist()


def _both_agree(root: str, meta: dict[str, dict]) -> list[dict]:
    spark_uri, arrow_uri = f"{root}/spark_versions.lance", f"{root}/arrow_versions.lance"
    assert meta["spark_versions"]["lance/engine"] == "spark"
    assert [meta["spark_versions"][k] for k in COUNTS] == [meta["arrow_versions"][k] for k in COUNTS]
    assert _table(spark_uri) == _table(arrow_uri)
    return _table(spark_uri)


def test_spark_output_with_update_condition(spark, root, instance):
    state = {"rows": [(1, 1, "a"), (2, 1, "b"), (3, None, "c"), (4, 5, "d")],
             "meta": {"lance/merge_update_condition": "source.version > target.version"}}
    _materialize(state, root, instance)  # creates both tables (version 1)
    spark_uri = f"{root}/spark_versions.lance"
    ids_before = dict(zip(*lance.dataset(spark_uri).to_table(columns=["id"], with_row_id=True).to_pydict().values()))

    # id 1 is newer (updated); id 2 is stale; ids 3 and 4 compare with NULL (not updated); 5 is new
    state["rows"] = [(1, 2, "A"), (2, 0, "B"), (3, 7, "C"), (4, None, "D"), (5, 1, "E")]
    meta = _materialize(state, root, instance)
    assert [meta["spark_versions"][k] for k in COUNTS] == [1, 1, 0]
    rows = _both_agree(root, meta)
    assert [(r["id"], r["version"], r["label"], r["_row_last_updated_at_version"]) for r in rows] == [
        (1, 2, "A", 2), (2, 1, "b", 1), (3, None, "c", 1), (4, 5, "d", 1), (5, 1, "E", 2)]
    ids_after = dict(zip(*lance.dataset(spark_uri).to_table(columns=["id"], with_row_id=True).to_pydict().values()))
    assert {i: ids_after[i] for i in ids_before} == ids_before  # updated or not, rows keep their stable ids

    # with delete-by-source: only id 1 passes the condition; ids 2 and 4 are not in the source
    state["rows"] = [(1, 2, "A2"), (3, 8, "C3"), (5, 1, "E")]
    state["meta"] = {"lance/merge_update_condition": "source.label <> target.label AND source.version >= target.version",
                     "lance/merge_delete_not_matched_by_source": True}
    meta = _materialize(state, root, instance)
    assert [meta["spark_versions"][k] for k in COUNTS] == [0, 1, 2]
    rows = _both_agree(root, meta)
    assert [(r["id"], r["label"]) for r in rows] == [(1, "A2"), (3, "c"), (5, "E")]


def test_spark_output_with_invalid_update_condition_changes_nothing(spark, root, instance):
    state = {"rows": [(1, 1, "a")], "meta": {}}
    _materialize(state, root, instance)
    uri = f"{root}/spark_versions.lance"
    before = (lance.dataset(uri).version, sorted(os.listdir(f"{uri}/data")))
    state.update(rows=[(1, 2, "A")], meta={"lance/merge_update_condition": "source.version > target.nope"})
    session = SparkSessionResource(master="local[2]")
    resources = {"io_manager": LanceIOManager(base_uri=root, spark=session), "spark": session}
    with pytest.raises(Exception, match="nope") as info:
        dg.materialize(_assets(state)[:1], instance=instance, resources=resources)
    assert "when_matched_update_condition" in str(info.value) and "spark_versions.lance" in str(info.value)
    assert (lance.dataset(uri).version, sorted(os.listdir(f"{uri}/data"))) == before
