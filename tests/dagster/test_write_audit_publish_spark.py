"""Write-audit-publish of PySpark outputs: the executors write the branch, Spark reads it in a
check, and the publish replays the Spark commit on main (tests/dagster/test_write_audit_publish.py
has the rest)."""

from __future__ import annotations

import dagster as dg
import lance
import pytest

from lance_assets import LanceIOManager, SparkSessionResource, lance_publish_asset
from tests.dagster.test_write_audit_publish import WAP, _ids, _meta

pyspark_sql = pytest.importorskip("pyspark.sql")
from pyspark.sql import DataFrame  # noqa: E402


def test_spark_output_is_audited_and_published(spark, root, instance):
    uri = f"{root}/events.lance"
    state = {"ids": [1, 2]}

    @dg.asset(metadata={**WAP, "lance/write_mode": "append"})
    def events(spark: SparkSessionResource) -> DataFrame:
        return spark.get_session().createDataFrame([(i,) for i in state["ids"]], "id long")

    @dg.asset_check(asset=events, blocking=True)
    def ids_positive(events: DataFrame) -> dg.AssetCheckResult:  # read from the branch by Spark
        state["audited"] = sorted(row.id for row in events.collect())
        return dg.AssetCheckResult(passed=min(state["audited"]) > 0)

    spark_resource = SparkSessionResource(master="local[2]")
    resources = {"io_manager": LanceIOManager(base_uri=root, spark=spark_resource), "spark": spark_resource}
    defs = [events, ids_positive, lance_publish_asset(events)]
    assert dg.materialize(defs, instance=instance, resources=resources).success
    state["ids"] = [3]
    result = dg.materialize(defs, instance=instance, resources=resources)
    assert result.success and state["audited"] == [1, 2, 3]
    assert _meta(result, "events")["lance/engine"] == "spark"
    assert _ids(uri) == [1, 2, 3] and lance.dataset(uri).version == 3
    state["ids"] = [-4]
    assert not dg.materialize(defs, instance=instance, resources=resources, raise_on_error=False).success
    assert _ids(uri) == [1, 2, 3] and lance.dataset(uri).version == 3
