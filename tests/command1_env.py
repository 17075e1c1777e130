"""The environment the README's first command builds, for tests that must run where users run.

Command 1 is ``python3 -m venv .venv && .venv/bin/pip install -q -e ".[dagster,spark]"`` from
the repository root: no test extra, no pylance, no Playwright. Tests of the README's flows run
their programs with this environment's interpreter and ``dg``, so a dependency that only the
test extra brings (the Spark Connect packages once made a Dagster run exit silently) fails
here as it would for a user.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXTRAS = "dagster,spark"  # Command 1's extras (tests/project/test_readme.py checks the README says so)


@dataclass(frozen=True)
class Command1Env:
    """A virtual environment built exactly as Command 1 builds one."""

    root: Path

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def dg(self) -> Path:
        return self.root / "bin" / "dg"

    def env(self, **extra: str) -> dict[str, str]:
        """The process environment of a program run from this venv, as from a user's shell:
        the test run's PYTHONPATH, PYSPARK_PYTHON and virtualenv settings removed."""
        env = {k: v for k, v in os.environ.items()
               if k not in {"PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV"}}
        env["PATH"] = os.pathsep.join([str(self.root / "bin"), env.get("PATH", "")])
        return {**env, **extra}

    def has(self, distribution: str) -> bool:
        probe = subprocess.run([str(self.python), "-c",
                                f"import importlib.metadata as m; m.version({distribution!r})"],
                               capture_output=True)
        return probe.returncode == 0


def build(root: Path) -> Command1Env:
    """``python3 -m venv <root> && <root>/bin/pip install -q -e "<repo>[dagster,spark]"``."""
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    venv = Command1Env(root)
    install = subprocess.run([str(venv.python), "-m", "pip", "install", "-q", "-e", f"{REPO}[{EXTRAS}]"],
                             cwd=REPO, env=venv.env(), capture_output=True, text=True)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    return venv
