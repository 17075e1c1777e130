"""The engine installs and runs without the Spark and Dagster extras.

Each check runs in a fresh interpreter in which the extras' top-level packages cannot be imported
(a meta-path finder refuses them), the way they are absent after ``pip install lance-assets``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BLOCKER = """
import importlib.abc, sys
class _Absent(importlib.abc.MetaPathFinder):
    def __init__(self, names):
        self.names = names
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)", name=name)
        return None
sys.meta_path.insert(0, _Absent(BLOCKED))
"""


def _run_without(blocked: set[str], body: str) -> subprocess.CompletedProcess[str]:
    code = BLOCKER.replace("BLOCKED", repr(sorted(blocked))) + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
    )


def test_engine_runs_without_spark_and_dagster(tmp_path: Path) -> None:
    result = _run_without({"pyspark", "dagster", "dagster_webserver"}, f"""
        import pyarrow as pa
        import lance_format
        uri = {str(tmp_path / "t.lance")!r}
        lance_format.write_dataset(pa.table({{"id": [1, 2, 3]}}), uri)
        lance_format.write_dataset(pa.table({{"id": [4]}}), uri, mode="append")
        ds = lance_format.dataset(uri)
        assert ds.count_rows() == 4 and ds.version == 2, (ds.count_rows(), ds.version)
        assert "pyspark" not in sys.modules and "dagster" not in sys.modules
        print("engine ok")
    """)
    assert result.returncode == 0, result.stderr
    assert "engine ok" in result.stdout


def test_spark_module_without_pyspark_names_the_extra() -> None:
    result = _run_without({"pyspark"}, """
        try:
            import lance_format.spark
        except ModuleNotFoundError as exc:
            print("refused:", exc)
        else:
            raise SystemExit("lance_format.spark imported without pyspark")
    """)
    assert result.returncode == 0, result.stderr
    assert "pyspark" in result.stdout


def test_dagster_library_stores_arrow_without_pyspark(tmp_path: Path) -> None:
    result = _run_without({"pyspark"}, f"""
        import dagster as dg
        import pyarrow as pa
        from lance_assets import LanceIOManager

        @dg.asset
        def people() -> pa.Table:
            return pa.table({{"id": [1, 2], "name": ["a", "b"]}})

        @dg.asset
        def people_count(people: pa.Table) -> int:
            return people.num_rows

        res = dg.materialize(
            [people, people_count],
            resources={{"io_manager": LanceIOManager(base_uri={str(tmp_path)!r})}},
            selection=[people],
        )
        assert res.success
        import lance_format
        assert lance_format.dataset({str(tmp_path / "people.lance")!r}).count_rows() == 2
        assert "pyspark" not in sys.modules
        print("dagster ok")
    """)
    assert result.returncode == 0, result.stderr
    assert "dagster ok" in result.stdout


def test_runtime_dependencies_leave_spark_and_dagster_to_extras() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = " ".join(project["dependencies"])
    assert "pyspark" not in runtime and "dagster" not in runtime
    extras = project["optional-dependencies"]
    assert any(dep.startswith("pyspark") for dep in extras["spark"])
    assert any(dep.startswith("dagster") for dep in extras["dagster"])
