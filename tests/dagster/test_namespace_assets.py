"""Assets stored in a Lance Namespace: ``LanceIOManager(namespace={"impl": "dir", "root": ...})``
maps asset key ``sales/orders`` to table ``sales.orders``; materializations, downstream reads,
the version sensor with change-feed partitions, Spark outputs; pylance lists the tables."""

from __future__ import annotations

import dagster as dg
import pyarrow as pa
import pytest

pytest.importorskip("lance_namespace")
pylance = pytest.importorskip("lance")

from lance.namespace import DirectoryNamespace as PyDirectory  # noqa: E402
from lance_namespace import DescribeTableRequest, ListNamespacesRequest, ListTablesRequest  # noqa: E402

from lance_assets import LanceChangeFeed, LanceIOManager, LanceTableWatch, lance_version_sensor  # noqa: E402
from lance_format.errors import DatasetNotFoundError, InvalidInputError  # noqa: E402
from tests.namespace_support import orders as order_rows  # noqa: E402

try:
    from pyspark.sql import DataFrame
except ImportError:  # the Spark test skips
    DataFrame = object

VERSIONS = dg.DynamicPartitionsDefinition(name="orders_versions")
BATCHES = iter(())


@dg.asset(key_prefix="sales")
def orders() -> pa.Table:
    return next(BATCHES)


@dg.asset(key_prefix="sales", ins={"orders": dg.AssetIn(key=["sales", "orders"])})
def region_totals(orders: pa.Table) -> pa.Table:
    grouped = orders.group_by("region").aggregate([("amount", "sum"), ("id", "count")])
    return grouped.rename_columns(["region", "amount", "orders"]).sort_by("region")


@dg.asset(partitions_def=VERSIONS, ins={"orders": dg.AssetIn(key=["sales", "orders"])})
def order_changes(orders: LanceChangeFeed) -> pa.Table:
    return orders.to_table().select(["id", "_change_type"])


def _materialize(assets, io_manager, instance, **kwargs):
    return dg.materialize(assets, instance=instance, resources={"io_manager": io_manager}, **kwargs)


def _metadata(result, key: list[str]) -> dict:
    events = [e for e in result.get_asset_materialization_events()
              if e.asset_key == dg.AssetKey(key)]
    return {k: getattr(v, "value", v) for k, v in events[-1].materialization.metadata.items()}


def _location(root, table_id: list[str]) -> str:
    return PyDirectory(root=root).describe_table(DescribeTableRequest(id=table_id)).location.replace("file://", "")


@pytest.mark.parametrize("shape", ["flat", "nested"])
def test_assets_in_a_directory_namespace(tmp_path, instance, shape):
    global BATCHES
    root = str(tmp_path / "catalog")
    config = {"impl": "dir", "root": root} if shape == "flat" else {"impl": "dir", "properties": {"root": root}}
    io = LanceIOManager(namespace=config, write_mode="append")
    BATCHES = iter([order_rows(0, 6), order_rows(6, 4)])
    first = _materialize([orders], io, instance)
    second = _materialize([orders, region_totals], io, instance)
    meta = _metadata(second, ["sales", "orders"])
    assert meta["dagster/table_name"] == "sales.orders"
    assert meta["dagster/uri"] == _location(root, ["sales", "orders"])
    assert meta["lance/version"] == 2 and _metadata(first, ["sales", "orders"])["lance/version"] == 1
    # the downstream asset read both writes; official Lance's namespace lists and opens the tables
    totals = pylance.dataset(namespace_client=PyDirectory(root=root), table_id=["sales", "region_totals"]).to_table()
    assert dict(zip(totals["region"].to_pylist(), totals["orders"].to_pylist())) == {"eu": 8, "us": 2}
    py = PyDirectory(root=root)
    assert py.list_namespaces(ListNamespacesRequest(id=[])).namespaces == ["sales"]
    assert py.list_tables(ListTablesRequest(id=["sales"])).tables == ["orders", "region_totals"]
    rows = pylance.dataset(namespace_client=py, table_id=["sales", "orders"]).to_table().sort_by("id")
    assert rows.equals(pa.concat_tables([order_rows(0, 6), order_rows(6, 4)]).sort_by("id").cast(rows.schema))
    assert io.table_name(["sales", "orders"]) == "sales.orders"
    assert io.uri_for(dg.AssetKey(["sales", "orders"])) == meta["dagster/uri"]


def test_version_sensor_and_change_feed(tmp_path, instance):
    global BATCHES
    root = str(tmp_path / "catalog")
    config = {"impl": "dir", "root": root}
    io = LanceIOManager(namespace=config, write_mode="append")
    watch = LanceTableWatch.in_namespace("orders", config, "sales.orders", partitions_def=VERSIONS,
                                         assets=[order_changes])
    sensor = lance_version_sensor(watch, name="orders_versions_sensor")
    assert isinstance(sensor(dg.build_sensor_context(instance=instance)), dg.SkipReason)  # no table yet
    BATCHES = iter([order_rows(0, 3), order_rows(3, 2)])
    _materialize([orders], io, instance)
    _materialize([orders], io, instance)
    tick = sensor(dg.build_sensor_context(instance=instance))
    assert [r.partition_key for r in tick.run_requests] == ["1", "2"]
    assert [r.tags["lance/table"] for r in tick.run_requests] == ["sales.orders"] * 2
    instance.add_dynamic_partitions("orders_versions", ["1", "2"])
    result = _materialize([orders, order_changes], io, instance, selection=[order_changes], partition_key="2")
    changes = pylance.dataset(namespace_client=PyDirectory(root=root), table_id=["order_changes"]).to_table()
    assert sorted(changes["id"].to_pylist()) == [3, 4] and set(changes["_change_type"].to_pylist()) == {"insert"}
    assert _metadata(result, ["order_changes"])["dagster/table_name"] == "order_changes"


def test_missing_tables_and_bad_configs(tmp_path, instance):
    root = str(tmp_path / "catalog")
    io = LanceIOManager(namespace={"impl": "dir", "root": root})
    with pytest.raises(DatasetNotFoundError, match="'sales.orders'"):
        io.uri_for(dg.AssetKey(["sales", "orders"]))
    result = _materialize([orders, region_totals], io, instance, selection=[region_totals], raise_on_error=False)
    assert not result.success
    failure = result.get_step_failure_events()[0].event_specific_data.error.cause
    assert failure.cls_name == "DatasetNotFoundError"
    assert "'sales.orders'" in failure.message and "was sales/orders materialized?" in failure.message
    with pytest.raises(InvalidInputError, match="needs 'impl'"):
        LanceIOManager(namespace={"root": root}).uri_for(["a"])
    with pytest.raises(InvalidInputError, match="cannot connect to the 'dir' namespace"):
        LanceIOManager(namespace={"impl": "dir"}).uri_for(["a"])
    with pytest.raises(InvalidInputError, match="needs base_uri"):
        LanceIOManager().uri_for(["a"])
    with pytest.raises(InvalidInputError, match="needs .impl."):
        LanceTableWatch.in_namespace("x", {"root": root}, "a.b")
    # a path prefix keeps its meaning
    assert LanceIOManager(base_uri=root, namespace="prod").uri_for(["a", "b"]) == f"{root}/prod/a/b.lance"


def test_spark_outputs_and_inputs(tmp_path, instance, spark):
    pytest.importorskip("pyspark")
    root = str(tmp_path / "catalog")
    io = LanceIOManager(namespace={"impl": "dir", "root": root})

    @dg.asset(key_prefix="web")
    def clicks():
        return spark.createDataFrame(order_rows(0, 5).to_pandas())

    @dg.asset(key_prefix="web", ins={"clicks": dg.AssetIn(key=["web", "clicks"])})
    def eu_clicks(clicks: DataFrame) -> DataFrame:
        assert isinstance(clicks, DataFrame)  # loaded by Spark from the namespace table's location
        return clicks.filter("region = 'eu'")
    result = _materialize([clicks, eu_clicks], io, instance)
    assert _metadata(result, ["web", "eu_clicks"])["dagster/table_name"] == "web.eu_clicks"
    py = PyDirectory(root=root)
    assert py.list_tables(ListTablesRequest(id=["web"])).tables == ["clicks", "eu_clicks"]
    assert pylance.dataset(namespace_client=py, table_id=["web", "eu_clicks"]).count_rows() == 4


COMPONENT = """
base_uri: {lake}
io_manager:
  settings:
    write_mode: append
    namespace: {{impl: dir, root: "{catalog}"}}
definitions_module: tests.dagster.test_namespace_assets
tables:
  - key: sales/orders
    checks: {{min_rows: 1}}
    change_feed: {{partitions: orders_versions, consumers: [order_changes]}}
    maintain: true
"""


def test_component_yaml_on_a_namespace(tmp_path, instance):
    global BATCHES
    from lance_assets.components import LanceTablesComponent

    catalog = tmp_path / "catalog"
    component = LanceTablesComponent.resolve_from_yaml(COMPONENT.format(lake=tmp_path / "lake", catalog=catalog))
    defs = component.build_defs(None)  # type: ignore[arg-type]  # the context is not used
    assert not catalog.exists()  # loading the definitions touches no catalog: tables are located when used
    meta = defs.resolve_assets_def(dg.AssetKey(["sales", "orders"])).specs_by_key[dg.AssetKey(["sales", "orders"])].metadata
    assert meta["dagster/table_name"] == "sales.orders" and "dagster/uri" not in meta
    sensor = defs.resolve_sensor_def("sales__orders_versions_sensor")
    assert isinstance(sensor(dg.build_sensor_context(instance=instance)), dg.SkipReason)

    BATCHES = iter([order_rows(0, 4)])
    everything = [*(defs.assets or []), *(defs.asset_checks or [])]
    result = dg.materialize(everything, selection=dg.AssetSelection.assets(["sales", "orders"]).without_checks()
                            | dg.AssetSelection.checks_for_assets(dg.AssetKey(["sales", "orders"])),
                            resources=defs.resources, instance=instance)
    assert [(e.check_name, e.passed) for e in result.get_asset_check_evaluations()] == [
        ("lance_row_count_in_bounds", True)]
    assert PyDirectory(root=str(catalog)).list_tables(ListTablesRequest(id=["sales"])).tables == ["orders"]
    tick = sensor(dg.build_sensor_context(instance=instance))
    assert [r.partition_key for r in tick.run_requests] == ["1"]


def test_example_project_on_a_namespace(spark, tmp_path, capsys, monkeypatch, instance):
    """The example, opted into a directory namespace with LANCE_EXAMPLE_NAMESPACE=dir: the same
    results, its tables listed by official Lance's DirectoryNamespace."""
    from example_project import run_example

    monkeypatch.setenv("LANCE_EXAMPLE_ROOT", str(tmp_path))  # main() sets it; restored after the test
    monkeypatch.setenv("LANCE_EXAMPLE_NAMESPACE", "dir")
    root = tmp_path / "example"
    assert run_example.main(str(root), instance=instance) == 0
    out = capsys.readouterr().out
    assert "change_raw_orders job changed the source outside its asset: new raw_orders versions [2, 3]" in out
    assert "customer_totals partition 2: changes {'inserted': 2, 'updated': 1, 'deleted': 0}" in out
    assert "incremental result equals a full recompute: True" in out
    py = PyDirectory(root=str(root))
    tables = ["customer_totals", "daily_orders", "daily_revenue", "product_embeddings", "raw_orders",
              "similar_products"]
    assert py.list_tables(ListTablesRequest(id=[])).tables == tables
    assert py.list_tables(ListTablesRequest(id=["ops"])).tables == ["source_changes"]
    assert f"Lance Namespace at {root}: tables {tables}, ops tables ['source_changes']" in out
    assert pylance.dataset(namespace_client=py, table_id=["raw_orders"]).version == 3
    event = instance.get_latest_materialization_event(dg.AssetKey("customer_totals"))
    assert event.asset_materialization.metadata["dagster/table_name"].value == "customer_totals"
