"""The JVM ``lance`` source (lance_format/spark/jvm): same answers as the Python source and as
parquet, pruning and filters in the plan, statistics Spark uses, and the fallback without it.

The suite's ``register(spark)`` turns it on for the shared session's main thread where ``javac``
exists (unless ``LANCE_SPARK_JVM=0``); this module turns it on if it is not, and restores the
thread after; ``python_source()`` gives a block on the Python
data source by taking the jar off the thread's class loader, as it is without it.
"""

from __future__ import annotations

import datetime
import importlib.util
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import lance_format
from lance_format.spark import jvm
from tests.spark.helpers import python_source

_BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_tpch.py"

pytestmark = pytest.mark.skipif(jvm.jar_path() is None, reason="no javac: the JVM lance source cannot be built")


@pytest.fixture(scope="module", autouse=True)
def jvm_source(spark):
    from lance_format.spark import register

    thread = spark._jvm.java.lang.Thread.currentThread()
    old = thread.getContextClassLoader()
    register(spark, jvm=True)
    yield
    thread.setContextClassLoader(old)  # the other modules read with the Python source


def _plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    n = 3000
    rows = pa.table({
        "id": pa.array(range(n), pa.int64()),
        "email": pa.array([None if i % 11 == 0 else f"user{i}@example.com" for i in range(n)]),
        "url": pa.array([f"https://example.com/{['a', 'a', 'a', 'b', 'c'][i % 5]}/{i}" for i in range(n)]),
        "day": pa.array([datetime.date(2024, 1, 1) + datetime.timedelta(days=i % 90) for i in range(n)]),
        "amount": pa.array([None if i % 13 == 0 else i * 0.25 for i in range(n)]),
        "tags": pa.array([[f"t{i % 3}"] * (i % 3) for i in range(n)], pa.list_(pa.string())),
    })
    path = str(tmp_path_factory.mktemp("jvm") / "t.lance")
    lance_format.write_dataset(rows, path, max_rows_per_file=700)
    return path


def test_the_session_reads_lance_through_the_jvm_source(spark, table):
    assert jvm.loaded(spark)
    df = spark.read.format("lance").load(table)
    plan = _plan(df.select("email"))
    assert "BatchScan lance" in plan and "columns=[email]" in plan
    with python_source(spark):
        assert "columns=" not in _plan(spark.read.format("lance").load(table).select("email"))


def test_same_rows_as_the_python_source(spark, table):
    query = "SELECT id, email, day, amount, tags FROM t WHERE (day >= DATE'2024-02-01' AND email LIKE 'user1%') " \
            "OR amount IS NULL OR url LIKE '%/b/%'"
    spark.read.format("lance").load(table).createOrReplaceTempView("t")
    got = spark.sql(query).collect()
    with python_source(spark):
        spark.read.format("lance").load(table).createOrReplaceTempView("t")
        expected = spark.sql(query).collect()
    assert len(got) > 100 and sorted(map(tuple, got), key=str) == sorted(map(tuple, expected), key=str)
    assert spark.read.format("lance").load(table).count() == 3000
    assert spark.read.format("lance").load(table).where("amount IS NULL").count() == 231


def test_pruned_columns_and_pushed_filters_show_in_the_plan(spark, table):
    df = spark.read.format("lance").load(table).where("day > DATE'2024-03-01' AND NOT (id < 100 AND url LIKE '%/a/%')")
    plan = _plan(df.select("id"))
    assert "columns=[id, url, day]" in plan
    assert "`day` > DATE '2024-03-01'" in plan and "NOT" in plan.split("filters=")[1]  # taken by the engine
    expected = sum(1 for i in range(3000) if i % 90 > 60 and not (i < 100 and i % 5 < 3))
    assert df.count() == len(df.select("id").collect()) == expected


def test_filters_are_widened_never_narrowed():
    from lance_format.spark.jvm.filters import filter_to_sql

    schema = pa.schema([("id", pa.int64()), ("at", pa.timestamp("us"))])
    simple = {"op": "LessThan", "attr": "id", "value": {"t": "int", "v": "5"}}
    timestamp = {"op": "EqualTo", "attr": "at", "value": {"t": "str", "v": "2024-01-01"}}  # not the column's type
    both = {"op": "And", "left": simple, "right": timestamp}
    assert filter_to_sql(simple, schema) == "`id` < 5"
    assert filter_to_sql(both, schema) == "`id` < 5"  # a wider filter: Spark filters again
    assert filter_to_sql({"op": "Not", "left": both}, schema) is None  # NOT of a wider one would be narrower
    assert filter_to_sql({"op": "Or", "left": simple, "right": timestamp}, schema) is None
    assert filter_to_sql({"op": "Not", "left": simple}, schema) == "NOT (`id` < 5)"


def test_engine_errors_reach_the_caller(spark, table):
    with pytest.raises(Exception, match="VersionNotFound|version"):
        spark.read.format("lance").option("version", "99").load(table).collect()
    with pytest.raises(Exception, match="does_not_exist"):
        spark.read.format("lance").option("filter", "does_not_exist > 1").load(table).collect()


def test_writes_and_the_change_feed_stay_on_the_python_source(spark, tmp_path, table):
    path = str(tmp_path / "w.lance")
    (spark.read.format("lance").load(table).where("id < 50").write.format("lance").mode("overwrite")
     .option("enable_stable_row_ids", "true").save(path))
    spark.read.format("lance").load(table).where("id >= 2990").write.format("lance").mode("append").save(path)
    assert spark.read.format("lance").load(path).count() == 60
    feed = spark.read.format("lance").option("begin_version", "1").load(path)
    assert feed.count() == 10


def test_without_javac_there_is_no_jar_and_the_python_source_reads(spark, table, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", "/nonexistent")
    monkeypatch.setattr(jvm.shutil, "which", lambda name: None)
    assert jvm.jar_path() is None
    with python_source(spark):
        assert jvm.enable(spark) is False
        df = spark.read.format("lance").load(table)
        assert df.where("amount IS NULL").count() == 231


def test_configure_puts_the_jar_on_the_session_classpath():
    from pyspark.sql import SparkSession

    builder = jvm.configure(SparkSession.Builder().config("spark.jars", "/x/other.jar"))
    assert builder._options["spark.jars"] == f"/x/other.jar,{jvm.jar_path()}"
    assert builder._options[jvm.PYTHON_CONF] == sys.executable


# -- TPC-H ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_tpch_jvm", _BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def test_tpch_answers_match_parquet_and_the_python_source(spark, bench, tmp_path_factory):
    try:
        bench.tpchgen()
    except SystemExit:
        pytest.skip("tpchgen-cli is not installed (the test extra has it)")
    import pyarrow.parquet as pq
    from tpch_queries import QUERIES

    base = tmp_path_factory.mktemp("tpch_jvm")
    generated = bench.generate(0.01, str(base / "generated"))
    frames: dict[str, dict] = {"lance": {}, "parquet": {}}
    python_frames = {}
    for name in bench.TABLES:
        data = pq.read_table(f"{generated}/{name}.parquet")
        data = data.cast(pa.schema([f.with_type(pa.string()) if pa.types.is_string_view(f.type) else f
                                    for f in data.schema]))
        path = str(base / f"{name}.lance")
        lance_format.write_dataset(data, path, max_rows_per_file=25_000)
        frames["parquet"][name] = spark.read.parquet(f"{generated}/{name}.parquet")
        frames["lance"][name] = spark.read.format("lance").load(path)
        with python_source(spark):
            python_frames[name] = spark.read.format("lance").load(path)
    assert "BatchScan lance" in _plan(frames["lance"]["nation"])
    wrong = bench.check_answers(spark, frames, list(QUERIES))
    assert not wrong, wrong
    # against the Python source too (test_tpch_small compares it with parquet): q22 scans
    # customer twice, once filtered, and the scans' filters must stay apart
    against_python = {"parquet": python_frames, "lance": frames["lance"]}
    assert not bench.check_answers(spark, against_python, [22])


def test_register_again_keeps_the_jvm_source_and_writes_streams_reach_python(spark, tmp_path):
    import warnings

    from lance_format.spark import register
    from lance_format.spark.pushed_filters import PushdownIgnoredWarning

    with warnings.catch_warnings():
        warnings.simplefilter("error", PushdownIgnoredWarning)  # the JVM source pushes safely
        register(spark)  # "lance" is the JVM source's on this thread: only the delegate is added
    assert jvm.loaded(spark) and spark.conf.get("spark.sql.python.filterPushdown.enabled") == "true"
    uri = str(tmp_path / "w.lance")
    rows = spark.range(0, 40, 1, 2).selectExpr("id", "concat('u', id, '@example.com') AS email")
    rows.write.format("lance").mode("append").save(uri)
    rows.where("id >= 30").write.format("lance").mode("append").save(uri)
    df = spark.read.format("lance").load(uri)
    assert "BatchScan lance" in _plan(df) and df.where("id >= 30").count() == 20
    seen = []
    query = spark.readStream.format("lance").load(uri).writeStream \
        .foreachBatch(lambda batch, _: seen.append(batch.count())) \
        .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start()
    query.awaitTermination()
    assert query.exception() is None and sum(seen) == 50
