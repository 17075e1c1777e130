"""The ``dg`` CLI on the example project (the repository root is its dg project directory):
``dg check defs`` validates defs.yaml and loads the definitions, ``dg list components`` finds
``LanceTablesComponent`` through the package's entry point, and a wrong attribute in a defs.yaml
fails the check with the file and attribute named."""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path

from tests.dagster.dev_server import DG, REPO, dagster_home


def _dg(args: list[str], cwd: Path, tmp_path: Path, extra_path: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "DAGSTER_HOME": str(dagster_home(tmp_path / "home")),
           "LANCE_EXAMPLE_ROOT": str(tmp_path / "lake"),
           "PYTHONPATH": os.pathsep.join(p for p in (extra_path, str(REPO), str(cwd)) if p)}
    return subprocess.run([str(DG), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_dg_check_defs_passes_on_the_example(tmp_path):
    result = _dg(["check", "defs"], REPO, tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout + result.stderr
    assert "All component YAML validated successfully." in out
    assert "All definitions loaded successfully." in out


def test_dg_list_components_shows_the_component(tmp_path):
    # The environment as `pip install` leaves it: the package's metadata with the entry points
    # pyproject.toml declares (the shared test venv may hold an older install of the package).
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]
    modules = declared["dagster_dg_cli.registry_modules"]
    assert modules == {"lance_assets": "lance_assets.components"}
    site = tmp_path / "site"
    dist = site / "lance_assets-0.1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: lance-assets\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text("[dagster_dg_cli.registry_modules]\n"
                                           + "".join(f"{k} = {v}\n" for k, v in modules.items()))
    result = _dg(["list", "components", "--json"], REPO, tmp_path, extra_path=str(site))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    items = {item["key"]: item["summary"] for item in json.loads(result.stdout)["items"]}
    assert "lance_assets.components.LanceTablesComponent" in items
    assert items["lance_assets.components.LanceTablesComponent"].startswith("Lance tables under one base URI")


def test_dg_check_defs_names_a_wrong_attribute(tmp_path):
    """A project of its own whose defs.yaml misspells an attribute: the check fails and says where."""
    project = tmp_path / "lakeproj"
    (project / "lakeproj" / "defs" / "lake").mkdir(parents=True)
    (project / "pyproject.toml").write_text(
        '[project]\nname = "lakeproj"\nversion = "0.1.0"\n\n[tool.dg]\ndirectory_type = "project"\n\n'
        '[tool.dg.project]\nroot_module = "lakeproj"\nregistry_modules = ["lance_assets.components"]\n')
    (project / "lakeproj" / "__init__.py").write_text("")
    (project / "lakeproj" / "defs" / "__init__.py").write_text("")
    (project / "lakeproj" / "definitions.py").write_text(
        "from pathlib import Path\nimport dagster as dg\n\n"
        "defs = dg.components.load_from_defs_folder(path_within_project=Path(__file__).parent)\n")
    defs_yaml = project / "lakeproj" / "defs" / "lake" / "defs.yaml"
    good = ("type: lance_assets.components.LanceTablesComponent\nattributes:\n"
            f"  base_uri: {tmp_path / 'lake'}\n  tables:\n    - key: events\n      checks: {{min_rows: 1}}\n")
    defs_yaml.write_text(good)
    ok = _dg(["check", "defs"], project, tmp_path)
    assert ok.returncode == 0, ok.stdout[-3000:] + ok.stderr[-3000:]

    defs_yaml.write_text(good.replace("min_rows", "min_row"))
    bad = _dg(["check", "defs"], project, tmp_path)
    assert bad.returncode != 0
    out = bad.stdout + bad.stderr
    assert "defs.yaml" in out and "min_row" in out, out[-3000:]
