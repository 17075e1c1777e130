"""Fixtures of the Spark tests; the one SparkSession itself is ``spark`` in tests/conftest.py.

Every test writes to its own ``tmp_path``. Runtime confs a test changes must be restored by
that test (see ``session_conf``).
"""

from __future__ import annotations

import contextlib

import pytest

pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed")


def pytest_configure(config):
    config.addinivalue_line("markers", "spark: needs the shared SparkSession (tests/spark/)")


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.spark)


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
