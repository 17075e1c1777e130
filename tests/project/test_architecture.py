"""Architecture contracts: ``lint-imports`` checks pyproject.toml's [tool.importlinter] contracts.

Among them: lance_assets uses only lance_format's public API (never lance_format.table, .io,
.proto, .dataset, .file, .encodings or .schema), and only lance_assets/engine.py imports
lance_format (the others import lance_format.errors at most).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _lint_imports() -> list[str]:
    found = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    if not os.path.exists(found):
        pytest.fail("lint-imports is not installed (pip install import-linter, see the test extra)")
    return [found]


def test_import_contracts_hold() -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run(_lint_imports() + ["--no-cache"], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout
