"""The engine installs and runs without the Spark and Dagster extras, and the package builds as
a wheel and an sdist whose wheel installs into a fresh environment and resolves with each extra.

The first checks run in a fresh interpreter in which the extras' top-level packages cannot be imported
(a meta-path finder refuses them), the way they are absent after ``pip install lance-assets``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]

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


# -- the built distributions ----------------------------------------------------------------------
# `pip install lance-assets` finds nothing on PyPI; the README documents installing from a clone
# or from a wheel built with `python -m build`. These tests build both distributions from a copy
# of the source tree and install the wheel into a fresh virtual environment.

_NOT_SHIPPED = shutil.ignore_patterns(".git", ".venv", "venv", ".ci", "site", "build", "dist", "*.egg-info",
                                      "__pycache__", ".pytest_cache", "node_modules")


@pytest.fixture(scope="module")
def distributions(tmp_path_factory) -> dict[str, Path]:
    pytest.importorskip("build", reason="building needs the `build` front-end (pip install '.[test]')")
    work = tmp_path_factory.mktemp("dist")
    source = work / "src"
    shutil.copytree(ROOT, source, ignore=_NOT_SHIPPED)  # the repository stays untouched
    # No build isolation: the test environment's setuptools builds, so nothing is downloaded.
    built = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--skip-dependency-check", "--outdir",
         str(work / "out"), str(source)],
        capture_output=True, text=True, timeout=300,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = (work / "out").glob("lance_assets-*-py3-none-any.whl")
    (sdist,) = (work / "out").glob("lance_assets-*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


def test_wheel_and_sdist_hold_the_packages_and_declare_every_extra(distributions) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    with zipfile.ZipFile(distributions["wheel"]) as wheel:
        names = wheel.namelist()
        (metadata_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = wheel.read(metadata_name).decode()
        entry_points = wheel.read(metadata_name.replace("METADATA", "entry_points.txt")).decode()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"lance_format", "lance_assets"}, tops  # no tests, examples or benchmarks
    for must in ("lance_format/py.typed", "lance_assets/py.typed", "lance_format/proto/table_pb2.py",
                 "lance_assets/components/__init__.py"):
        assert must in names, must
    assert "lance_assets = lance_assets.components" in entry_points  # `dg list components`
    for extra, requirements in project["optional-dependencies"].items():
        assert f"Provides-Extra: {extra}" in metadata, extra
        for requirement in requirements:
            name = re.split(r"[\[<>=!~ ]", requirement, maxsplit=1)[0]
            assert re.search(rf"Requires-Dist: {re.escape(name)}\b.*extra == \"{extra}\"", metadata), (extra, name)
    for requirement in project["dependencies"]:
        name = re.split(r"[\[<>=!~ ]", requirement, maxsplit=1)[0]
        assert re.search(rf"^Requires-Dist: {re.escape(name)}[^;]*$", metadata, re.M), name
    with tarfile.open(distributions["sdist"]) as sdist:
        members = {m.name.split("/", 1)[1] for m in sdist.getmembers() if "/" in m.name}
    for must in ("pyproject.toml", "README.md", "lance_format/__init__.py", "lance_assets/__init__.py",
                 "lance_format/py.typed"):
        assert must in members, must


def test_wheel_installs_into_a_fresh_environment_and_writes_a_table(distributions, tmp_path: Path) -> None:
    """The base package, as a user installs it: a new venv, the wheel, its dependencies resolved
    by pip (from its cache or the index), then run from a directory without the source tree."""
    env = tmp_path / "env"
    base_python = Path(sys.base_prefix) / "bin" / "python3"
    subprocess.run([str(base_python), "-m", "venv", str(env)], check=True, timeout=120)
    python = env / "bin" / "python"
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-compile", "--disable-pip-version-check",
         str(distributions["wheel"])],
        capture_output=True, text=True, timeout=600,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    run_dir = tmp_path / "elsewhere"
    run_dir.mkdir()
    code = textwrap.dedent(f"""
        import importlib.util, sys
        import pyarrow as pa
        import lance_format
        assert lance_format.__file__.startswith({str(env)!r}), lance_format.__file__  # the wheel's copy
        assert importlib.util.find_spec("pyspark") is None and importlib.util.find_spec("dagster") is None
        uri = {str(tmp_path / "people.lance")!r}
        people = pa.table({{"id": [1, 2, 3], "email": ["ada@example.com", None, "linus@example.org"]}})
        lance_format.write_dataset(people, uri, enable_stable_row_ids=True)
        ds = lance_format.write_dataset(people.slice(0, 1), uri, mode="append")
        ds.delete("email IS NULL")
        assert ds.version == 3 and ds.count_rows() == 3, (ds.version, ds.count_rows())
        assert ds.to_table(filter="id = 1").num_rows == 2
        print("wheel ok", lance_format.__version__)
    """)
    result = subprocess.run([str(python), "-c", code], cwd=run_dir, capture_output=True, text=True, timeout=120,
                            env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "wheel ok 0.1.0" in result.stdout


# -- each extra resolves from the wheel -------------------------------------------------------------
EXTRAS = ("spark", "dagster", "polars", "s3", "gcs", "azure", "fast", "fts", "namespace", "namespace-server", "docs")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _extra_requirements(extra: str) -> list[Requirement]:
    """The requirements ``extra`` adds, with the project's own extras (``lance-assets[namespace]``) expanded."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    out = []
    for line in extras[extra]:
        requirement = Requirement(line)
        if _canonical(requirement.name) == "lance-assets":
            for inner in sorted(requirement.extras):
                out += _extra_requirements(inner)
        else:
            out.append(requirement)
    return out


@pytest.fixture(scope="module")
def resolution(distributions, tmp_path_factory) -> dict[str, dict]:
    """``pip install --dry-run --report`` of ``"<wheel>[every extra]"`` in a new venv (nothing but pip
    in it), run away from the source tree: pip resolves against the package index and installs
    nothing. One resolution of all extras together (a minute less than one per extra): a set of
    versions satisfying every extra at once satisfies each extra alone, and the metadata test above
    checks that each requirement sits under its own extra. Returns the report's ``install`` list by
    canonical name."""
    work = tmp_path_factory.mktemp("extras")
    env_dir = work / "env"
    subprocess.run([str(Path(sys.base_prefix) / "bin" / "python3"), "-m", "venv", str(env_dir)], check=True,
                   timeout=120)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV")}
    report = work / "report.json"
    resolved = subprocess.run(
        [str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--dry-run",
         "--report", str(report), f"{distributions['wheel']}[{','.join(EXTRAS)}]"],
        cwd=work, capture_output=True, text=True, timeout=300, env=env,
    )
    assert resolved.returncode == 0, resolved.stderr[-3000:]
    return {_canonical(item["metadata"]["name"]): item for item in json.loads(report.read_text())["install"]}


def test_extras_are_all_checked_here() -> None:
    declared = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    assert declared - {"test"} == set(EXTRAS)  # a new extra gets its resolution check


def test_the_resolution_installs_the_wheel_itself(distributions, resolution: dict[str, dict]) -> None:
    ours = resolution["lance-assets"]
    assert ours["download_info"]["url"] == distributions["wheel"].as_uri()  # the wheel, not a source tree
    assert sorted(ours["requested_extras"]) == sorted(EXTRAS)


@pytest.mark.parametrize("extra", EXTRAS)
def test_wheel_resolves_with_each_extra(resolution: dict[str, dict], extra: str) -> None:
    """Every package ``extra`` names is in the resolution, at a version its specifier allows."""
    for requirement in _extra_requirements(extra):
        name = _canonical(requirement.name)
        assert name in resolution, f"extra {extra!r}: {name} missing from the resolution"
        version = resolution[name]["metadata"]["version"]
        assert requirement.specifier.contains(version, prereleases=True), (extra, name, version)
