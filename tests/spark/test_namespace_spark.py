"""Spark on Lance Namespace tables: ``format("lance")`` with ``namespace.*`` and ``table_id``
options, ``read_dataframe`` / ``write_dataframe`` with ``namespace=`` and ``table_id=``, streams,
through V1 and V2 directory namespaces and this engine's REST server; pylance's
DirectoryNamespace lists and opens what Spark wrote."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.datasource import CaseInsensitiveDict

pytest.importorskip("lance_namespace")
pylance = pytest.importorskip("lance")

from lance.namespace import DirectoryNamespace as PyDirectory  # noqa: E402
from lance_namespace import ListTablesRequest  # noqa: E402

from lance_format.errors import DatasetNotFoundError, InvalidInputError  # noqa: E402
from lance_format.spark import read_dataframe, write_dataframe  # noqa: E402
from lance_format.spark.namespace_options import resolve_options  # noqa: E402
from tests.namespace_support import orders  # noqa: E402


def _df(spark, start: int, n: int):
    return spark.createDataFrame(orders(start, n).to_pandas(), "id long, email string, url string, "
                                 "region string, amount double")


def _ids(df) -> list[int]:
    return sorted(r["id"] for r in df.select("id").collect())


def _read(spark, options: dict, table_id: str):
    reader = spark.read.format("lance").option("table_id", table_id)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _write(df, options: dict, table_id: str, mode: str) -> None:
    writer = df.write.format("lance").mode(mode).option("table_id", table_id)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()


def _pylance_rows(root, table_id: list[str], **properties) -> pa.Table:
    ns = PyDirectory(root=str(root), **properties)
    return pylance.dataset(namespace_client=ns, table_id=table_id).to_table().sort_by("id")


def test_v2_directory_read_write_append_overwrite(spark, tmp_path):
    options = {"namespace.impl": "dir", "namespace.root": str(tmp_path)}
    _write(_df(spark, 0, 6), options, "sales.orders", "append")  # creates the table and its namespace
    _write(_df(spark, 6, 3), options, "sales.orders", "append")
    assert _ids(_read(spark, options, "sales.orders")) == list(range(9))
    # official Lance lists and opens the table Spark wrote, with the same rows (nulls included)
    py = PyDirectory(root=str(tmp_path))
    assert py.list_tables(ListTablesRequest(id=["sales"])).tables == ["orders"]
    assert _pylance_rows(tmp_path, ["sales", "orders"]).equals(
        pa.concat_tables([orders(0, 6), orders(6, 3)]).sort_by("id"))
    _write(_df(spark, 100, 2), options, "sales.orders", "overwrite")
    assert _ids(_read(spark, options, "sales.orders")) == [100, 101]
    assert pylance.dataset(namespace_client=py, table_id=["sales", "orders"]).version == 3
    # overwrite also creates a missing table; a deeper id gets its namespaces
    _write(_df(spark, 7, 2), options, "sales.eu.returns", "overwrite")
    assert py.list_tables(ListTablesRequest(id=["sales", "eu"])).tables == ["returns"]
    assert _read(spark, {**options, "filter": "region = 'eu'"}, "sales.eu.returns").count() == 2


def test_v1_directory_namespace(spark, tmp_path):
    options = {"namespace.impl": "dir", "namespace.root": str(tmp_path), "namespace.manifest_enabled": "false"}
    _write(_df(spark, 0, 4), options, "customers", "append")
    _write(_df(spark, 4, 4), options, "customers", "append")
    assert (tmp_path / "customers.lance").is_dir() and not (tmp_path / "__manifest").exists()
    assert _ids(_read(spark, options, "customers")) == list(range(8))
    py = PyDirectory(root=str(tmp_path), manifest_enabled="false")
    assert py.list_tables(ListTablesRequest(id=[])).tables == ["customers"]
    assert _pylance_rows(tmp_path, ["customers"], manifest_enabled="false").num_rows == 8
    # V1 is flat: a nested id is refused, naming the table
    with pytest.raises(Exception, match="sales.orders"):
        _write(_df(spark, 0, 1), options, "sales.orders", "append")


def test_python_api_and_pylance_written_tables(spark, tmp_path):
    config = {"impl": "dir", "root": str(tmp_path)}
    result = write_dataframe(_df(spark, 0, 5), namespace=config, table_id="sales.orders")
    assert result.version == 1 and result.rows == 5
    assert write_dataframe(_df(spark, 5, 5), namespace=config, table_id=["sales", "orders"], mode="append").version == 2
    assert _ids(read_dataframe(spark, namespace=config, table_id="sales.orders")) == list(range(10))
    assert _ids(read_dataframe(spark, namespace=config, table_id="sales.orders", version=1)) == list(range(5))
    # a namespace client works as well, and a table pylance wrote through its namespace reads the same
    py = PyDirectory(root=str(tmp_path))
    pylance.write_dataset(orders(20, 4), namespace_client=py, table_id=["sales", "leads"])
    leads = read_dataframe(spark, namespace=py, table_id="sales.leads").toArrow().sort_by("id")
    assert leads.to_pylist() == orders(20, 4).to_pylist()
    with pytest.raises(Exception, match="already exists"):  # mode="create" of an existing table
        write_dataframe(_df(spark, 0, 1), namespace=config, table_id="sales.orders")


def test_rest_namespace(spark, tmp_path):
    pytest.importorskip("uvicorn")
    from lance_format.namespace.adapter import RestAdapter

    with RestAdapter("dir", {"root": str(tmp_path)}, port=0, token="s3cret") as server:
        options = {"namespace.impl": "rest", "namespace.uri": f"http://127.0.0.1:{server.port}",
                   "namespace.headers.Authorization": "Bearer s3cret"}
        _write(_df(spark, 0, 3), options, "sales.orders", "append")
        _write(_df(spark, 3, 3), options, "sales.orders", "append")
        assert _ids(_read(spark, options, "sales.orders")) == list(range(6))
        config = {"impl": "rest", "uri": f"http://127.0.0.1:{server.port}", "header.Authorization": "Bearer s3cret"}
        write_dataframe(_df(spark, 50, 2), namespace=config, table_id="sales.orders", mode="overwrite")
        assert _ids(read_dataframe(spark, namespace=config, table_id="sales.orders")) == [50, 51]
        # a wrong token is refused by the server
        with pytest.raises(InvalidInputError, match="Unauthenticated"):
            read_dataframe(spark, namespace={**config, "header.Authorization": "Bearer nope"}, table_id="sales.orders")
    assert _pylance_rows(tmp_path, ["sales", "orders"]).column("id").to_pylist() == [50, 51]


def test_streams(spark, tmp_path):
    options = {"namespace.impl": "dir", "namespace.root": str(tmp_path / "catalog")}
    source = tmp_path / "in"
    _df(spark, 0, 4).coalesce(1).write.parquet(str(source / "p0"))
    _df(spark, 4, 3).coalesce(1).write.parquet(str(source / "p1"))
    stream = spark.readStream.schema(_df(spark, 0, 1).schema).option("maxFilesPerTrigger", 1) \
        .option("recursiveFileLookup", "true").parquet(str(source))
    writer = stream.writeStream.format("lance").option("checkpointLocation", str(tmp_path / "ck1")) \
        .option("table_id", "events.clicks")
    for key, value in options.items():
        writer = writer.option(key, value)
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()
    assert query.exception() is None
    assert _ids(_read(spark, options, "events.clicks")) == list(range(7))
    assert pylance.dataset(namespace_client=PyDirectory(root=str(tmp_path / "catalog")),
                           table_id=["events", "clicks"]).version == 2  # one version per micro-batch
    # the table as a streaming source (its appended rows)
    reader = spark.readStream.format("lance").option("table_id", "events.clicks")
    for key, value in options.items():
        reader = reader.option(key, value)
    seen: list[int] = []
    out = reader.load().writeStream.foreachBatch(lambda df, _: seen.extend(_ids(df))) \
        .option("checkpointLocation", str(tmp_path / "ck2")).trigger(availableNow=True).start()
    out.awaitTermination()
    assert sorted(seen) == list(range(7))


def test_missing_tables_and_bad_options(spark, tmp_path):
    options = {"namespace.impl": "dir", "namespace.root": str(tmp_path)}
    _write(_df(spark, 0, 2), options, "sales.orders", "append")
    with pytest.raises(DatasetNotFoundError, match="'sales.nope'"):
        read_dataframe(spark, namespace={"impl": "dir", "root": str(tmp_path)}, table_id="sales.nope")
    with pytest.raises(Exception, match=r"DatasetNotFoundError.*'sales.nope'"):
        _read(spark, options, "sales.nope").collect()
    with pytest.raises(Exception, match=r"InvalidInputError.*needs option 'namespace.impl'"):
        spark.read.format("lance").option("table_id", "sales.orders").load().collect()
    # the other option checks, as the data source runs them on the driver
    for bad, message in [({**options}, "need option 'table_id'"),
                         ({**options, "table_id": "sales.orders", "path": str(tmp_path)}, "not both"),
                         ({**options, "table_id": "sales..orders"}, "empty part"),
                         ({"namespace.impl": "nosuch", "table_id": "sales.orders"},
                          "cannot connect to the 'nosuch' namespace"),
                         ({"namespace.impl": "dir", "table_id": "sales.orders"}, "'root'")]:
        with pytest.raises(InvalidInputError, match=message):
            resolve_options(CaseInsensitiveDict(bad), create=True)
    with pytest.raises(InvalidInputError, match="refused it.*not allowed"):
        write_dataframe(_df(spark, 0, 1), namespace={"impl": "dir", "root": str(tmp_path)}, table_id=["sales", ".."])
    with pytest.raises(InvalidInputError, match="not both"):
        read_dataframe(spark, str(tmp_path), namespace={"impl": "dir", "root": str(tmp_path)}, table_id="a")
    # Spark allows Python data sources append and overwrite only: errorifexists is refused by Spark
    # itself (write_dataframe's default mode="create" is the way to fail on an existing table)
    with pytest.raises(Exception, match="(?i)errorifexists"):
        _write(_df(spark, 0, 1), options, "sales.orders", "errorifexists")
    # nothing was declared by the failed reads and writes
    py = PyDirectory(root=str(tmp_path))
    assert py.list_tables(ListTablesRequest(id=["sales"])).tables == ["orders"]
