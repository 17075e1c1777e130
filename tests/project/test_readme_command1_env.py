"""The README's quick start, run as a user runs it: as a script, with the interpreter of the venv
the README's first command builds (``.[dagster,spark]`` only: no test extra, no pylance), from a
directory outside the repository. The walkthrough in the browser runs there too
(tests/dagster/test_ui_walkthrough.py)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _quick_start_script(root: Path) -> tuple[str, list[str]]:
    """The quick start's python blocks as one script, and the outputs their comments promise."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    quick = text[text.index("## Quick start"):]
    quick = quick[: quick.index("\n## ", 1)]
    blocks = re.findall(r"```python\n(.*?)```", quick, re.S)
    assert len(blocks) == 3  # engine, Spark, Dagster
    script = "\n".join(blocks).replace("/tmp/lance-docs/", f"{root}/")
    promised = [m.group(1).strip() for line in script.splitlines()
                if line.lstrip().startswith("print(") and (m := re.search(r"#\s*(.+)$", line))]
    return script, promised


def test_quick_start_runs_in_the_first_commands_environment(tmp_path, command1_env):
    assert not command1_env.has("pylance")  # the oracle is a test-only dependency
    script, promised = _quick_start_script(tmp_path / "data")
    assert promised[:2] == ["2", "3"] and len(promised) == 5
    path = tmp_path / "quick_start.py"
    path.write_text(script)
    run = subprocess.run([str(command1_env.python), str(path)], cwd=tmp_path, env=command1_env.env(),
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert run.stdout.split("\n")[: len(promised)] == promised, run.stdout[-3000:]
