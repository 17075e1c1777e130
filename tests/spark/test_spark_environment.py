"""The Spark entry points in the environment the README's Command 1 builds.

That environment has no Spark Connect client packages (grpcio-status, googleapis-common-protos,
zstandard), and scripts run there as ``python -c``, in notebooks or in Dagster's run workers,
where ``__main__`` has no ``__file__``: PySpark's Connect dependency check then calls
``sys.exit(0)``. Scripts are also run as ``.venv/bin/python`` without the venv activated, so
``python3`` on ``PATH`` is another interpreter. Each check runs a fresh interpreter (and JVM).
"""

from __future__ import annotations

import os
import subprocess
import sys
import types

import lance
import pytest

from lance_format.errors import WorkerEnvironmentError
from lance_format.spark.common import is_connect, translate_task_error, use_driver_python

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Makes the Connect client packages unimportable, as in an environment built by Command 1.
_BLOCKER = """\
import sys
for _name in ("grpc_status", "google.rpc", "zstandard"):
    sys.modules[_name] = None  # `import` raises ImportError; importlib's find_spec answers None
"""

_SCRIPT = """\
import sys
from pyspark.sql import SparkSession
import lance_format
from lance_format.spark import merge_dataframe, read_changes, read_dataframe, write_dataframe

spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").config("spark.driver.host", "127.0.0.1")
         .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.memory", "512m")
         .getOrCreate())
uri = {uri!r}
first = spark.createDataFrame([(1, "ada@example.com"), (2, None), (3, "https://x.io/a?b=1")],
                              "id long, contact string")
assert write_dataframe(first, uri, enable_stable_row_ids=True).version == 1
update = spark.createDataFrame([(2, "bob@example.org"), (4, "eve@example.net")], "id long, contact string")
merged = merge_dataframe(update, uri, on="id")
assert (merged.rows_updated, merged.rows_inserted) == (1, 1), merged
assert read_dataframe(spark, uri, filter="id >= 2").count() == 3
assert read_changes(spark, uri, 1, 2).count() > 0
print("connect modules:", sorted(m for m in sys.modules if m.startswith("pyspark.sql.connect.dataframe")))
print("DONE", lance_format.dataset(uri).version)
"""


def _environment(tmp_path) -> dict[str, str]:
    """Connect packages blocked, no PYSPARK_PYTHON, and a ``python3`` on PATH that is the same
    Python without any installed package (as the system's python3 beside a venv)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_BLOCKER)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("python3", "python"):
        fake = bin_dir / name
        fake.write_text(f"#!/bin/sh\nexec {sys._base_executable} -S \"$@\"\n")  # -S: no site-packages
        fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), REPO])
    env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH", "")])
    env["SPARK_HOME"] = os.path.dirname(__import__("pyspark").__file__)  # spark-submit would ask python3
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return env


def test_python_dash_c_without_connect_packages_writes_and_merges(tmp_path):
    uri = str(tmp_path / "orders.lance")
    env = _environment(tmp_path)
    # The hazard is real here: importing Connect's DataFrame ends the process, with status 0.
    probe = subprocess.run([sys.executable, "-c", "import pyspark.sql.connect.dataframe; print('imported')"],
                           env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0 and "imported" not in probe.stdout, (probe.stdout, probe.stderr)
    done = subprocess.run([sys.executable, "-c", _SCRIPT.format(uri=uri)], env=env, cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "DONE 2" in done.stdout, (done.stdout, done.stderr[-4000:])
    assert "connect modules: []" in done.stdout  # Connect's DataFrame module was never imported
    rows = lance.dataset(uri).to_table().sort_by("id").to_pylist()
    assert rows == [{"id": 1, "contact": "ada@example.com"}, {"id": 2, "contact": "bob@example.org"},
                    {"id": 3, "contact": "https://x.io/a?b=1"}, {"id": 4, "contact": "eve@example.net"}]


def test_is_connect_goes_by_the_class_module_without_importing_connect():
    connect_frame = type("DataFrame", (), {"__module__": "pyspark.sql.connect.dataframe"})
    subclass = type("MyFrame", (connect_frame,), {"__module__": "user_code"})
    classic_frame = type("DataFrame", (), {"__module__": "pyspark.sql.classic.dataframe"})
    assert is_connect(connect_frame()) and is_connect(subclass())
    assert not is_connect(classic_frame()) and not is_connect(object())
    code = ("import sys; from lance_format.spark.common import is_connect; "
            "from pyspark.sql.classic.dataframe import DataFrame\n"
            "assert is_connect(object()) is False and is_connect(DataFrame.__new__(DataFrame)) is False\n"
            "assert not [m for m in sys.modules if m.startswith('pyspark.sql.connect')]")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


class _Conf(dict):
    def get(self, key, default=None):  # type: ignore[override]
        return super().get(key, default)

    def set(self, key, value):
        self[key] = value


def _session(master: str, **conf: str) -> types.SimpleNamespace:
    """A classic session's parts ``use_driver_python`` looks at (its SparkContext and conf)."""
    context = types.SimpleNamespace(master=master, pythonExec="python3", getConf=lambda: _Conf(conf))
    return types.SimpleNamespace(sparkContext=context, conf=_Conf(conf))


def test_local_sessions_use_the_driver_interpreter_unless_one_was_chosen(monkeypatch):
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    sql_python = "spark.sql.execution.pyspark.python"
    local = _session("local[2]")
    use_driver_python(local)
    assert local.sparkContext.pythonExec == sys.executable and local.conf[sql_python] == sys.executable
    own = _session("local[*]", **{sql_python: "/opt/udf/bin/python"})
    use_driver_python(own)
    assert own.conf[sql_python] == "/opt/udf/bin/python" and own.sparkContext.pythonExec == sys.executable
    for untouched in (_session("spark://host:7077"), _session("yarn"),  # executors' interpreters: not ours
                      _session("local[2]", **{"spark.pyspark.python": "/opt/py/bin/python"})):
        use_driver_python(untouched)
        assert untouched.sparkContext.pythonExec == "python3" and sql_python not in untouched.conf
    monkeypatch.setenv("PYSPARK_PYTHON", "/usr/bin/python3.11")
    env_chosen = _session("local[2]")
    use_driver_python(env_chosen)
    assert env_chosen.sparkContext.pythonExec == "python3" and sql_python not in env_chosen.conf


@pytest.mark.parametrize("module", ["lance_format", "pyarrow", "lance_format.spark"])
def test_a_worker_without_the_package_gets_a_typed_error_saying_what_to_set(module):
    failure = RuntimeError("An exception was thrown from the Python worker:\nTraceback (most recent call last):\n"
                           f"  File \"<frozen>\", line 1\nModuleNotFoundError: No module named '{module}'\n")
    error = translate_task_error(failure)
    assert isinstance(error, WorkerEnvironmentError) and isinstance(error, ImportError)
    assert "PYSPARK_PYTHON" in str(error) and module.split(".")[0] in str(error)
    assert error.__cause__ is failure
    other = RuntimeError("ModuleNotFoundError: No module named 'user_helpers'")
    assert translate_task_error(other) is other
