"""polars DataFrame and LazyFrame outputs and inputs (the optional extra ``polars``)."""

# No ``from __future__ import annotations``: Dagster resolves the annotations of local functions.
import subprocess
import sys

import dagster as dg
import lance
import polars as pl
import pytest

from lance_assets import LanceIOManager

DAILY = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-03")


def test_polars_dataframe_and_lazyframe_round_trip(root, instance):
    seen = {}

    @dg.asset
    def eager() -> pl.DataFrame:
        return pl.DataFrame({"id": [1, 2, 3], "name": ["a", "b", "c"]})

    @dg.asset
    def lazy(eager: pl.LazyFrame) -> pl.LazyFrame:
        seen["lazy_in"] = type(eager)
        return eager.with_columns((pl.col("id") * 10).alias("score")).filter(pl.col("id") > 1)

    @dg.asset(ins={"lazy": dg.AssetIn(metadata={"columns": ["id", "score"]})})
    def summary(lazy: pl.DataFrame) -> None:
        seen["summary"] = lazy

    result = dg.materialize([eager, lazy, summary], resources={"io_manager": LanceIOManager(base_uri=root)},
                            instance=instance)
    assert result.success
    assert seen["lazy_in"] is pl.LazyFrame
    assert isinstance(seen["summary"], pl.DataFrame)
    assert seen["summary"].sort("id").to_dict(as_series=False) == {"id": [2, 3], "score": [20, 30]}
    table = lance.dataset(f"{root}/lazy.lance").to_table()
    assert table.column_names == ["id", "name", "score"] and table.num_rows == 2
    (event,) = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey("lazy")]
    assert event.materialization.metadata["dagster/row_count"].value == 2


def test_polars_partitions_and_self_dependency(root, instance):
    seen = {}

    @dg.asset(partitions_def=DAILY, metadata={"partition_expr": "day"},
              ins={"days": dg.AssetIn(["days"],
                                      partition_mapping=dg.TimeWindowPartitionMapping(start_offset=-1, end_offset=-1))})
    def days(context: dg.AssetExecutionContext, days: pl.DataFrame) -> pl.DataFrame:
        seen[context.partition_key] = days.height
        return pl.DataFrame({"day": [context.partition_key] * 2, "v": [1, 2]})

    manager = LanceIOManager(base_uri=root)
    for key in DAILY.get_partition_keys():
        assert dg.materialize([days], partition_key=key, resources={"io_manager": manager}, instance=instance).success
    assert dg.materialize([days], partition_key="2024-01-01", resources={"io_manager": manager},
                          instance=instance).success
    assert seen == {"2024-01-01": 0, "2024-01-02": 2}
    assert lance.dataset(f"{root}/days.lance").count_rows() == 4  # the rewritten day replaced, not added


def test_type_handlers_do_not_import_polars():
    """A pyarrow/pandas pipeline never imports polars (it is an optional extra)."""
    code = (
        "import sys, tempfile, dagster as dg, pyarrow as pa, pandas as pd\n"
        "from lance_assets import LanceIOManager\n"
        "@dg.asset\n"
        "def a() -> pa.Table: return pa.table({'x': [1]})\n"
        "@dg.asset\n"
        "def b(a: pd.DataFrame) -> pd.DataFrame: return a\n"
        "assert dg.materialize([a, b], resources={'io_manager': LanceIOManager(base_uri=tempfile.mkdtemp())}).success\n"
        "assert 'polars' not in sys.modules, 'polars was imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]


def test_unsupported_polars_type_fails_clearly(root, instance):
    @dg.asset
    def series() -> pl.Series:
        return pl.Series("x", [1])

    with pytest.raises(Exception, match="cannot store an object of type Series"):
        dg.materialize([series], resources={"io_manager": LanceIOManager(base_uri=root)}, instance=instance)
