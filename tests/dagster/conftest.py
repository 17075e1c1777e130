"""Fixtures of the Dagster integration tests: a Dagster instance, table roots, one SparkSession.

Spark is expensive (a JVM per session), so every Spark test in the suite shares one session:
the ``spark`` fixture reuses an already active session (e.g. one the Spark tests started) and
otherwise starts a small local one that lives until the end of the test session.
"""

from __future__ import annotations

import os
import sys

import dagster as dg
import pytest


def pytest_configure(config):
    # backfill_policy, observable_source_asset and build_column_schema_change_checks are beta.
    for category in ("BetaWarning", "PreviewWarning"):
        config.addinivalue_line("filterwarnings", f"ignore::dagster_shared.utils.warnings.{category}")


@pytest.fixture
def instance():
    with dg.instance_for_test() as inst:
        yield inst


@pytest.fixture
def root(tmp_path):
    return str(tmp_path / "lake")


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """The suite's one SparkSession: reuse an active one, else start it like tests/spark/ does.

    The configuration mirrors tests/spark/conftest.py so that whichever test package starts the
    session first, the other reuses a compatible one (``getOrCreate`` returns it). It is not
    stopped here: tests/spark/ stops it at the end of the test session, or the JVM exits with
    the test process.
    """
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    from lance_format.spark import register

    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    base = tmp_path_factory.mktemp("spark")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("lance-format-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.python.task.killTimeout", "500ms")
        .config("spark.rdd.compress", "false")
        .config("spark.shuffle.compress", "false")
        .config("spark.local.dir", str(base / "local"))
        .config("spark.sql.warehouse.dir", str(base / "warehouse"))
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .config(
            "spark.driver.extraJavaOptions",
            f"-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData "
            f"-Djava.io.tmpdir={base} -Dderby.system.home={base}",
        )
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
