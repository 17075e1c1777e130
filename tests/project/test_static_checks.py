"""Static checks CI enforces: ruff over the repository, mypy over lance_format and lance_assets,
and the public exports.

mypy runs with the ``[tool.mypy]`` configuration of pyproject.toml (strict for the public API
modules) from the repository root, with a fresh cache so a stale one cannot hide errors.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import lance_format
import lance_format.errors as errors

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_mypy_passes(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy_cache")],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, f"mypy failed:\n{result.stdout}\n{result.stderr}"
    assert "Success: no issues found" in result.stdout


def test_ruff_passes() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "."],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, f"ruff failed:\n{result.stdout}\n{result.stderr}"


def test_every_error_class_is_exported() -> None:
    defined = {
        name for name, value in vars(errors).items()
        if inspect.isclass(value) and issubclass(value, Exception) and value.__module__ == errors.__name__
    }
    assert defined == set(errors.__all__)
    assert defined <= set(lance_format.__all__)
    for name in defined:
        assert getattr(lance_format, name) is getattr(errors, name)


def test_py_typed_markers_ship() -> None:
    for package in ("lance_format", "lance_assets"):
        assert (REPO_ROOT / package / "py.typed").is_file()
