"""SQL over Lance tables: ``CREATE TABLE ... USING lance``, ``spark.table``, ``INSERT``, time travel."""

from __future__ import annotations

import uuid

import lance
import pytest
from pyspark.sql import functions as F

from lance_format.spark import write_dataframe
from lance_format.spark.catalog_tables import TABLE_OPTIONS_KEY

from .helpers import lance_rows, spark_rows


@pytest.fixture
def table_name(spark):
    name = f"lance_{uuid.uuid4().hex[:12]}"
    yield name
    spark.sql(f"DROP TABLE IF EXISTS {name}")


def _rows(spark, start: int, count: int):
    return spark.range(start, start + count, 1, 2).select(
        "id", F.concat(F.lit("v"), F.col("id").cast("string")).alias("s"))


def test_create_table_read_and_insert(spark, tmp_path, table_name):
    uri = str(tmp_path / "t.lance")
    write_dataframe(_rows(spark, 0, 20), uri)  # v1
    spark.sql(f"CREATE TABLE {table_name} USING lance OPTIONS (path '{uri}')")
    assert spark.table(table_name).columns == ["id", "s"]
    assert spark_rows(spark.table(table_name)) == lance_rows(uri)
    assert spark.sql(f"SELECT count(*) AS n FROM {table_name} WHERE id >= 15").collect()[0]["n"] == 5
    spark.sql(f"INSERT INTO {table_name} VALUES (100, 'x'), (101, 'y')")  # v2
    assert lance.dataset(uri).version == 2
    assert [r["id"] for r in lance_rows(uri)] == list(range(20)) + [100, 101]
    spark.sql(f"INSERT INTO {table_name} SELECT id + 200, s FROM {table_name} WHERE id < 3")  # v3
    assert [r["id"] for r in lance_rows(uri)][-3:] == [200, 201, 202]
    # the table is read anew each time: the inserts are visible through SQL
    assert spark.sql(f"SELECT count(*) AS n FROM {table_name}").collect()[0]["n"] == 25
    spark.sql(f"INSERT OVERWRITE {table_name} VALUES (7, 'only')")  # v4
    assert lance_rows(uri) == [{"id": 7, "s": "only"}]
    assert spark_rows(spark.table(table_name)) == [{"id": 7, "s": "only"}]
    spark.sql(f"DROP TABLE {table_name}")
    assert lance.dataset(uri).version == 4  # dropping the catalog entry leaves the data alone


def test_time_travel_by_version_and_tag(spark, tmp_path, table_name):
    uri = str(tmp_path / "t.lance")
    write_dataframe(_rows(spark, 0, 10), uri)  # v1
    write_dataframe(_rows(spark, 10, 5), uri, mode="append")  # v2
    lance.dataset(uri).tags.create("first", 1)
    spark.sql(f"CREATE TABLE {table_name} USING lance OPTIONS (path '{uri}')")
    assert spark.table(table_name).count() == 15
    assert spark.read.option("version", "1").table(table_name).count() == 10
    assert spark.read.option("version", "first").table(table_name).count() == 10
    assert spark.sql(f"SELECT count(*) AS n FROM {table_name} WITH ('version' = '1')").collect()[0]["n"] == 10
    pinned = f"{table_name}_v1"
    try:
        spark.sql(f"CREATE TABLE {pinned} USING lance OPTIONS (path '{uri}', version 'first')")
        assert spark_rows(spark.table(pinned)) == lance_rows(uri, version=1)
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {pinned}")


def test_table_created_before_its_first_write(spark, tmp_path, table_name):
    uri = str(tmp_path / "new.lance")
    spark.sql(f"CREATE TABLE {table_name} USING lance OPTIONS (path '{uri}', schema 'id long, s string')")
    assert spark.table(table_name).count() == 0
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a')")  # creates the Lance table
    assert lance_rows(uri) == [{"id": 1, "s": "a"}]
    assert spark_rows(spark.table(table_name)) == [{"id": 1, "s": "a"}]


def test_catalog_marker_stays_out_of_the_data(spark, tmp_path, table_name):
    uri, copy = str(tmp_path / "t.lance"), str(tmp_path / "copy.lance")
    write_dataframe(_rows(spark, 0, 3), uri)
    spark.sql(f"CREATE TABLE {table_name} USING lance OPTIONS (path '{uri}')")
    df = spark.table(table_name)
    assert TABLE_OPTIONS_KEY in df.schema.fields[0].metadata  # how later reads find the path
    df.write.format("lance").mode("append").save(copy)  # the marker is not table metadata
    assert lance_rows(copy) == lance_rows(uri)
    assert not any(TABLE_OPTIONS_KEY.encode() in k for f in lance.dataset(copy).schema for k in (f.metadata or {}))


def test_sql_without_a_path_fails_clearly(spark, tmp_path, table_name):
    with pytest.raises(Exception, match="needs a path"):
        spark.sql(f"CREATE TABLE {table_name} USING lance AS SELECT 1L AS id")


def test_catalog_table_as_a_stream(spark, tmp_path, table_name):
    uri = str(tmp_path / "t.lance")
    write_dataframe(_rows(spark, 0, 10), uri)
    spark.sql(f"CREATE TABLE {table_name} USING lance OPTIONS (path '{uri}')")
    seen = []
    query = spark.readStream.table(table_name).writeStream \
        .foreachBatch(lambda df, _: seen.extend(r["id"] for r in df.collect())) \
        .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start()
    query.awaitTermination()
    assert sorted(seen) == list(range(10))


def test_schema_option_ddl():
    from lance_format.errors import InvalidInputError
    from lance_format.spark.catalog_tables import declared_schema

    schema = declared_schema({"schema": "`a b` decimal(10, 2), v array<float>, m map<string,int>, "
                                        "st struct<x: int, y: array<string>>, t timestamp_ntz, n BIGINT"})
    assert schema.simpleString() == ("struct<a b:decimal(10,2),v:array<float>,m:map<string,int>,"
                                     "st:struct<x:int,y:array<string>>,t:timestamp_ntz,n:bigint>")
    for bad in ("id", "id long,", "id nosuchtype", "id array<int", "id long s string"):
        with pytest.raises(InvalidInputError):
            declared_schema({"schema": bad})
