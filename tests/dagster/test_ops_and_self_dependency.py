"""Op outputs and inputs (no asset key), self-dependent partitioned assets, and runs free of
deprecated Dagster APIs."""

# No ``from __future__ import annotations``: Dagster resolves the annotations of local functions.
import warnings

import dagster as dg
import lance
import pandas as pd
import pyarrow as pa
import pytest

from lance_assets import LanceIOManager, SparkSessionResource, observable_lance_table
from lance_format.errors import DatasetNotFoundError

DAILY = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-04")
PREVIOUS_DAY = dg.TimeWindowPartitionMapping(start_offset=-1, end_offset=-1)


def test_op_outputs_and_inputs(root, instance):
    @dg.op
    def numbers() -> pa.Table:
        return pa.table({"n": [1, 2, 3]})

    @dg.op(out=dg.Out(metadata={"lance/table": "named/doubled", "lance/write_mode": "append"}))
    def doubled(numbers: pa.Table) -> pd.DataFrame:
        return pd.DataFrame({"n": [v * 2 for v in numbers.column("n").to_pylist()]})

    seen = {}

    @dg.op
    def total(doubled: pd.DataFrame) -> None:
        seen["total"] = int(doubled["n"].sum())

    @dg.op
    def passthrough(numbers: pa.Table) -> pa.Table:
        return numbers

    @dg.graph
    def inner(numbers: pa.Table) -> pa.Table:
        return passthrough(numbers)

    @dg.job(resource_defs={"io_manager": LanceIOManager(base_uri=root)})
    def pipeline() -> None:
        total(doubled(inner(numbers())))

    for _ in (1, 2):
        result = pipeline.execute_in_process(instance=instance)
        assert result.success
    # unnamed outputs: {base_uri}/{op}/{output}.lance, the op's step key keeping graph ops apart
    assert lance.dataset(f"{root}/numbers/result.lance").to_table().column("n").to_pylist() == [1, 2, 3]
    assert lance.dataset(f"{root}/inner/passthrough/result.lance").count_rows() == 3
    # the Out's metadata names the table and its write mode (appended twice)
    assert sorted(lance.dataset(f"{root}/named/doubled.lance").to_table().column("n").to_pylist()) == [2, 2, 4, 4, 6, 6]
    assert seen["total"] == 24  # the op input read the whole appended table back
    ds = lance.dataset(f"{root}/numbers/result.lance")
    props = ds.read_transaction(ds.version).transaction_properties
    assert props["dagster/op_output"] == "numbers/result" and props["dagster/run_id"] == result.run_id
    meta = result.output_for_node("numbers", "result")  # the in-process result keeps the object too
    assert meta.num_rows == 3
    (event,) = [e for e in result.all_events if e.event_type_value == "HANDLED_OUTPUT"
                and e.step_key == "numbers"]
    assert event.event_specific_data.metadata["lance/version"].value == 2


def test_op_input_without_table_fails_clearly(root, instance):
    @dg.op(out=dg.Out(io_manager_key="mem"))
    def produce() -> pa.Table:
        return pa.table({"n": [1]})

    @dg.op(ins={"produce": dg.In(input_manager_key="io_manager")})
    def consume(produce: pa.Table) -> None:
        pass

    @dg.job(resource_defs={"io_manager": LanceIOManager(base_uri=root), "mem": dg.mem_io_manager})
    def broken() -> None:
        consume(produce())

    with pytest.raises(DatasetNotFoundError, match="op output produce/result has no Lance table"):
        broken.execute_in_process(instance=instance)


@pytest.mark.parametrize("annotation", ["arrow", "pandas"])
def test_self_dependent_partitioned_asset(root, instance, annotation):
    """The first partition gets an empty input (no table yet, or no previous partition); later
    ones read the previous day's rows from the asset's own table."""
    typ = pa.Table if annotation == "arrow" else pd.DataFrame
    seen: dict[str, int] = {}

    @dg.asset(partitions_def=DAILY, metadata={"partition_expr": "day"},
              ins={"running": dg.AssetIn(["running"], partition_mapping=PREVIOUS_DAY)})
    def running(context: dg.AssetExecutionContext, running: typ) -> pa.Table:
        seen[context.partition_key] = len(running)
        if not len(running):
            previous = []
        else:
            previous = running["total"].to_pylist() if annotation == "arrow" else list(running["total"])
        total = (previous[0] if previous else 0) + 10
        return pa.table({"day": [context.partition_key], "total": [total]})

    manager = LanceIOManager(base_uri=root)
    for day in DAILY.get_partition_keys():
        assert dg.materialize([running], partition_key=day, resources={"io_manager": manager}, instance=instance).success
    assert seen == {"2024-01-01": 0, "2024-01-02": 1, "2024-01-03": 1}
    rows = sorted(lance.dataset(f"{root}/running.lance").to_table().to_pylist(), key=lambda r: r["day"])
    assert [r["total"] for r in rows] == [10, 20, 30]
    # re-materializing the first partition when the table exists: still an empty input, now with the table's columns
    assert dg.materialize([running], partition_key="2024-01-01", resources={"io_manager": manager},
                          instance=instance).success
    assert seen["2024-01-01"] == 0


def test_self_dependent_empty_input_has_the_table_schema(root, instance):
    columns: dict[str, list[str]] = {}

    @dg.asset(partitions_def=DAILY, metadata={"partition_expr": "day"},
              ins={"me": dg.AssetIn(["me"], partition_mapping=PREVIOUS_DAY, metadata={"columns": ["day"]})})
    def me(context: dg.AssetExecutionContext, me: pa.Table) -> pa.Table:
        columns[context.partition_key] = me.column_names
        return pa.table({"day": [context.partition_key], "v": [1]})

    manager = LanceIOManager(base_uri=root)
    # a later partition whose previous one was never written: no table, so no silent empty input
    with pytest.raises(DatasetNotFoundError, match="asset me has no Lance table"):
        dg.materialize([me], partition_key="2024-01-02", resources={"io_manager": manager}, instance=instance)
    dg.materialize([me], partition_key="2024-01-01", resources={"io_manager": manager}, instance=instance)
    assert columns == {"2024-01-01": []}  # no table yet: no columns
    dg.materialize([me], partition_key="2024-01-01", resources={"io_manager": manager}, instance=instance)
    assert columns == {"2024-01-01": ["day"]}  # the table's columns, projected to the input's "columns"
    dg.materialize([me], partition_key="2024-01-02", resources={"io_manager": manager}, instance=instance)
    assert columns["2024-01-02"] == ["day"]


def test_spark_self_dependent_first_partition(spark, root, instance):
    from pyspark.sql import DataFrame

    seen = {}

    @dg.asset(partitions_def=DAILY, metadata={"partition_expr": "day"},
              ins={"sp": dg.AssetIn(["sp"], partition_mapping=PREVIOUS_DAY)})
    def sp(context: dg.AssetExecutionContext, sp: DataFrame):
        seen[context.partition_key] = (sp.count(), sp.columns)
        return spark.createDataFrame([(context.partition_key, 1)], "day string, v long")
    manager = LanceIOManager(base_uri=root, spark=SparkSessionResource())
    for day in ("2024-01-01", "2024-01-02"):
        assert dg.materialize([sp], partition_key=day, resources={"io_manager": manager}, instance=instance).success
    assert seen == {"2024-01-01": (0, []), "2024-01-02": (1, ["day", "v"])}


def test_io_manager_with_spark_settings_uses_no_deprecated_api(root, instance):
    """``LanceIOManager(spark=SparkSessionResource(...))`` used to make Dagster initialize a
    nested resource through the deprecated ``InitResourceContext.dagster_run`` on every run."""
    manager = LanceIOManager(base_uri=root, spark=SparkSessionResource(master="local[1]", conf={"a.b": "c"}))
    assert manager.spark is not None and manager.spark.master == "local[1]" and manager.spark.conf == {"a.b": "c"}

    @dg.asset
    def plain() -> pa.Table:
        return pa.table({"x": [1]})

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        result = dg.materialize([plain], resources={"io_manager": manager}, instance=instance)
    assert result.success


def test_observable_lance_table_is_not_a_source_asset(tmp_path, instance):
    uri = str(tmp_path / "ext.lance")
    import lance_format

    lance_format.write_dataset(pa.table({"x": [1, 2]}), uri)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        warnings.simplefilter("error", dg.BetaWarning)
        observed = observable_lance_table(["ext"], uri)
        assert isinstance(observed, dg.AssetsDefinition) and observed.is_observable
        defs = dg.Definitions(assets=[observed], jobs=[dg.define_asset_job("observe", selection=[observed])])
        assert defs.resolve_job_def("observe").execute_in_process(instance=instance).success
    (record,) = instance.fetch_observations(dg.AssetKey("ext"), limit=1).records
    assert record.asset_observation.tags["dagster/data_version"] == "1"
