"""One scan must never read with another scan's filter (issue 28).

Spark 4.1-4.3 keep the read plan of a DataFrame's last filter pushdown on its data source
object and reuse it for every later scan of that DataFrame, so the ``lance`` source accepts no
pushed filters there (:mod:`lance_format.spark.pushed_filters`). The suite's session has
``spark.sql.python.filterPushdown.enabled=true``, as a user following old advice would.
"""

from __future__ import annotations

import decimal
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_format
from lance_format.spark import pushed_filters
from lance_format.spark.pushed_filters import PUSHDOWN_CONF, PushdownIgnoredWarning, pushdown_leaks
from tests.spark.pushdown_sources import register_variants

ROWS = 15_000


@pytest.fixture(scope="module")
def customers(tmp_path_factory, spark):
    """A 15,000-row customer table (TPC-H's customer shape: a decimal balance, phone numbers,
    skewed segments, nullable comments), and its rows as pyarrow sees them."""
    rng = np.random.default_rng(28)
    cents = rng.integers(-99_999, 999_999, ROWS)
    segments = np.array(["BUILDING", "AUTOMOBILE", "MACHINERY", "HOUSEHOLD", "FURNITURE"])
    table = pa.table({
        "c_custkey": pa.array(np.arange(1, ROWS + 1), pa.int64()),
        "c_phone": pa.array([f"{10 + i % 25}-{i % 997:03d}-555-{i:04d}" for i in range(ROWS)]),
        "c_acctbal": pa.array([decimal.Decimal(int(c)).scaleb(-2) for c in cents], pa.decimal128(15, 2)),
        "c_mktsegment": pa.array(segments[np.minimum(rng.geometric(0.45, ROWS) - 1, 4)]),
        "c_comment": pa.array([None if i % 7 == 0 else f"see https://example.com/c/{i}" for i in range(ROWS)]),
    })
    uri = str(tmp_path_factory.mktemp("leak") / "customer.lance")
    lance_format.write_dataset(table, uri, max_rows_per_file=6000)
    register_variants(spark)
    return uri, table


def _rich(table: pa.Table) -> int:
    return pc.sum(pc.greater(table["c_acctbal"], pa.scalar(decimal.Decimal("4000.00"), pa.decimal128(15, 2)))).as_py()


def test_the_reduced_case_counts_right_with_pushdown_on(spark, customers):
    uri, table = customers
    assert spark.conf.get(PUSHDOWN_CONF) == "true"
    rich = _rich(table)
    assert 0 < rich < ROWS
    spark.read.format("lance").load(uri).createOrReplaceTempView("leak_customer")
    try:
        answers = [spark.sql(q).collect()[0][0] for q in (
            "SELECT count(*) FROM leak_customer",
            "SELECT count(*) FROM leak_customer WHERE c_acctbal > 4000",
            "SELECT count(*) FROM leak_customer",
            "SELECT count(*) FROM leak_customer WHERE c_mktsegment = 'BUILDING'",
            "SELECT count(*) FROM leak_customer WHERE c_acctbal > 4000",
        )]
    finally:
        spark.catalog.dropTempView("leak_customer")
    building = pc.sum(pc.equal(table["c_mktsegment"], "BUILDING")).as_py()
    assert answers == [ROWS, rich, ROWS, building, rich]


# PySpark refuses a reader with pushFilters() while the setting is off: lance_pushdown only with it on
@pytest.mark.parametrize("source,pushdown", [("lance", "true"), ("lance", "false"), ("lance_pushdown", "true")])
def test_a_view_queried_repeatedly_and_self_joined(spark, customers, session_conf, source, pushdown):
    """The same DataFrame under several filters, and twice in one query (a self-join whose two
    sides filter differently, like q22's customer and its subquery)."""
    uri, table = customers
    rich, building = _rich(table), pc.sum(pc.equal(table["c_mktsegment"], "BUILDING")).as_py()
    both = pc.sum(pc.and_(pc.equal(table["c_mktsegment"], "BUILDING"), pc.greater(
        table["c_acctbal"], pa.scalar(decimal.Decimal("4000.00"), pa.decimal128(15, 2))))).as_py()
    with session_conf({PUSHDOWN_CONF: pushdown}):
        spark.read.format(source).load(uri).createOrReplaceTempView("leak_view")
        try:
            for _ in range(2):
                assert spark.sql("SELECT count(*) FROM leak_view WHERE c_acctbal > 4000").collect()[0][0] == rich
                assert spark.sql("SELECT count(*) FROM leak_view").collect()[0][0] == ROWS
                assert spark.sql("SELECT count(*) FROM leak_view WHERE c_mktsegment = 'BUILDING'"
                                 ).collect()[0][0] == building
            joined = spark.sql("""
                SELECT count(*) FROM leak_view a JOIN leak_view b ON a.c_custkey = b.c_custkey
                WHERE a.c_acctbal > 4000 AND b.c_mktsegment = 'BUILDING'""").collect()[0][0]
            assert joined == both
            above_average = spark.sql("""
                SELECT count(*) FROM leak_view WHERE c_acctbal >
                  (SELECT avg(c_acctbal) FROM leak_view WHERE c_acctbal > 0.00)""").collect()[0][0]
            positive = pc.filter(table["c_acctbal"], pc.greater(table["c_acctbal"], pa.scalar(
                decimal.Decimal("0.00"), pa.decimal128(15, 2))))
            average = sum(v.as_py() for v in positive) / len(positive)
            assert above_average == sum(1 for v in table["c_acctbal"].to_pylist() if v > average)
        finally:
            spark.catalog.dropTempView("leak_view")


def test_a_source_that_accepts_filters_leaks_exactly_on_the_sparks_named_leaky(spark, customers):
    """The version rule is checked against this Spark's real behaviour: a reader that accepts
    the filter makes the next unfiltered scan of the same DataFrame read filtered rows exactly
    when :func:`pushdown_leaks` names this Spark."""
    uri, table = customers
    df = spark.read.format("lance_accepting").load(uri)
    assert df.where("c_acctbal > 4000").count() == _rich(table)  # a fresh scan: accepted and right
    leaked = df.count() != ROWS
    assert leaked == pushdown_leaks(spark.version)


def test_the_version_rule_matches_the_jvm_classes(spark):
    """Spark 4.1-4.3's provider has ``setReadInfo`` (the read plan lives on the shared data
    source object); Spark 4.0 has no Python filter pushdown, 5.0 keeps the plan per scan."""
    jvm_class = spark._jvm.java.lang.Class.forName(
        "org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2")
    methods = {m.getName() for m in jvm_class.getDeclaredMethods()}
    assert ("setReadInfo" in methods) == pushdown_leaks(spark.version)


@pytest.mark.parametrize("version,leaks", [
    ("3.5.3", False), ("4.0.1", False), ("4.1.0", True), ("4.2.1", True), ("4.3.0", True),
    ("4.3.2-SNAPSHOT", True), ("5.0.0", False), ("5.0.0-preview1", False), ("5.1.0", False), ("not a version", True),
])
def test_which_spark_versions_leak(version, leaks):
    assert pushdown_leaks(version) is leaks


def test_register_warns_once_where_the_setting_is_ignored(spark, monkeypatch):
    from lance_format.spark import register
    from lance_format.spark.jvm import loaded
    from tests.spark.helpers import python_source

    monkeypatch.setattr(pushed_filters, "_warned", False)
    with python_source(spark), warnings.catch_warnings(record=True) as caught:  # the Python source's thread
        warnings.simplefilter("always")
        register(spark, jvm=False)
        register(spark, jvm=False)
        assert not loaded(spark)
    ours = [w for w in caught if issubclass(w.category, PushdownIgnoredWarning)]
    assert len(ours) == (1 if pushdown_leaks(spark.version) else 0)
    if ours:
        assert PUSHDOWN_CONF in str(ours[0].message) and spark.version in str(ours[0].message)


def test_register_is_silent_where_the_jvm_source_takes_the_filters(spark, monkeypatch):
    from lance_format.spark import register
    from lance_format.spark.jvm import jar_path, loaded

    if jar_path() is None:
        pytest.skip("no javac: the JVM lance source cannot be built")
    monkeypatch.setattr(pushed_filters, "_warned", False)
    thread = spark._jvm.java.lang.Thread.currentThread()
    old = thread.getContextClassLoader()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            register(spark, jvm=True)
        assert loaded(spark) and spark.conf.get(PUSHDOWN_CONF) == "true"
        assert not [w for w in caught if issubclass(w.category, PushdownIgnoredWarning)]
    finally:
        thread.setContextClassLoader(old)


def test_register_is_silent_with_the_setting_off(spark, session_conf, monkeypatch):
    from lance_format.spark import register

    monkeypatch.setattr(pushed_filters, "_warned", False)
    with session_conf({PUSHDOWN_CONF: "false"}), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        register(spark)
    assert not [w for w in caught if issubclass(w.category, PushdownIgnoredWarning)]
