"""Suite-wide fixtures: the test session's one SparkSession (local[2], UI off, fast JVM flags),
and a local S3 API (moto's server) per test module that asks for ``s3`` / ``bucket``.

The JVM start costs seconds, so Spark and Dagster tests share this session; it starts lazily,
only when a test asks for ``spark``. Runtime confs a test changes must be restored by that test.
"""

from __future__ import annotations

import os
import sys

import pytest


@pytest.fixture(autouse=True)
def _working_directory_restored():
    """A test that changes the working directory must restore it: Spark's driver-side Python
    workers inherit it (``python -m`` puts it on their path), so a leaked ``chdir`` changes what
    later Spark tests can import."""
    before = os.getcwd()
    yield
    after = os.getcwd()
    if after != before:
        os.chdir(before)
        pytest.fail(f"the test left the working directory at {after} (was {before})")


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    pytest.importorskip("pyspark", reason="pyspark is not installed")
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


@pytest.fixture(scope="module")
def s3():
    """A moto S3/DynamoDB server for this module (a module may override it to add set-up)."""
    from tests.s3_support import start_server

    server, info = start_server()
    yield info
    server.stop()


@pytest.fixture
def bucket(s3):
    return s3.new_bucket()


@pytest.fixture(params=["numpy", "compiled"])
def kernel_policy(request):
    """Run a test on the numpy codecs and on the numba-compiled kernels (the `fast` extra)."""
    from lance_format.encodings.structural import accel

    if request.param == "compiled":
        pytest.importorskip("numba")
        if os.environ.get("LANCE_FORMAT_JIT") == "0":
            pytest.skip("LANCE_FORMAT_JIT=0 keeps the numpy code")
    accel.use_compiled(request.param == "compiled")
    assert (accel.kernels() is not None) == (request.param == "compiled")
    yield request.param
    accel.use_compiled(None)


@pytest.fixture(scope="session")
def command1_env(tmp_path_factory):
    """A venv built exactly as the README's first command builds it (``.[dagster,spark]`` only),
    shared by the tests of the README's flows (tests/command1_env.py)."""
    from tests.command1_env import build

    return build(tmp_path_factory.mktemp("command1") / "venv")
