"""``package_zip`` / ``ship_to_executors``: the zip alone makes lance_format importable in a
Python that has only its dependencies. ``ship_to_executors`` itself is tested on real
executors in test_cluster.py (adding the zip to the suite's shared session would put it on
every later test's worker path)."""

from __future__ import annotations

import os
import subprocess
import zipfile

import lance_format
from lance_format.spark.shipping import package_zip

from .cluster import deps_only_python


def test_the_zip_is_the_whole_package_and_imports_alone(tmp_path):
    archive = package_zip(tmp_path)
    root = os.path.dirname(lance_format.__file__)
    sources = {os.path.relpath(os.path.join(d, f), root) for d, _, files in os.walk(root) for f in files
               if f.endswith(".py") and "__pycache__" not in d}
    with zipfile.ZipFile(archive) as z:
        names = {n[len("lance_format/"):] for n in z.namelist()}
    assert sources <= names and not any("__pycache__" in n for n in names)
    assert package_zip(tmp_path) == archive  # same contents, same file (addPyFile refuses a changed one)

    python = deps_only_python(tmp_path / "venv")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    without = subprocess.run([python, "-c", "import lance_format"], env=env, capture_output=True, text=True,
                             cwd=tmp_path)
    assert without.returncode != 0 and "No module named 'lance_format'" in without.stderr
    code = ("import lance_format, lance_format.spark.write, lance_format.spark.datasource; "
            "print(lance_format.__file__)")
    shipped = subprocess.run([python, "-c", code], env={**env, "PYTHONPATH": str(archive)},
                             capture_output=True, text=True, cwd=tmp_path)
    assert shipped.returncode == 0, shipped.stderr
    assert shipped.stdout.strip() == os.path.join(str(archive), "lance_format", "__init__.py")

