"""The one SparkSession of the Spark tests: local[2], UI off, 2 shuffle partitions, fast JVM flags.

It is created once per test session (the JVM start costs seconds) and only by tests under
tests/spark/; every test writes to its own ``tmp_path``. Runtime confs a test changes must be
restored by that test (see ``session_conf``).
"""

from __future__ import annotations

import contextlib
import os
import sys

import pytest

pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed")


def pytest_configure(config):
    config.addinivalue_line("markers", "spark: needs the shared SparkSession (tests/spark/)")


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    os.environ["PYSPARK_PYTHON"] = sys.executable  # workers must use this venv (lance_format importable)
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    base = tmp_path_factory.mktemp("spark")
    from pyspark.sql import SparkSession

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
        .config("spark.python.task.killTimeout", "500ms")  # failed writes wait for cancelled workers
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
    from lance_format.spark import register

    register(session)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_connect(spark):
    """A Spark Connect client of the same Spark application (no second JVM): the Connect
    service is started inside the shared session's driver, on a free loopback port."""
    try:
        from pyspark.sql.connect.utils import check_dependencies

        check_dependencies()
    except ImportError as exc:
        pytest.skip(f"Spark Connect client dependencies are missing: {exc}")
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    conf = spark.sparkContext._conf
    conf.set("spark.connect.grpc.binding.address", "127.0.0.1")
    conf.set("spark.connect.grpc.binding.port", str(port))
    service = spark._jvm.org.apache.spark.sql.connect.service.SparkConnectService
    service.start(spark.sparkContext._jsc.sc())
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    remote = RemoteSession.builder.remote(f"sc://127.0.0.1:{port}").getOrCreate()
    yield remote
    remote.stop()  # the service itself ends with the shared session's JVM


@pytest.fixture
def session_conf(spark):
    """Set runtime confs for one test: ``with session_conf({"k": "v"}): ...``; restored after."""

    @contextlib.contextmanager
    def setter(values: dict):
        old = {k: spark.conf.get(k, None) for k in values}
        for k, v in values.items():
            spark.conf.set(k, v)
        try:
            yield
        finally:
            for k, v in old.items():
                if v is None:
                    spark.conf.unset(k)
                else:
                    spark.conf.set(k, v)

    return setter
