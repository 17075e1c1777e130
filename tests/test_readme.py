"""The README's set-up: exactly two labelled commands, the second the one CI runs, and a UI
walkthrough served by ``dg dev`` with the command the first one prints."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _section(text: str, title: str) -> str:
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else None]


def test_two_labelled_setup_commands():
    readme = (REPO / "README.md").read_text()
    setup = _section(readme, "Set-up: the two commands")
    commands = re.findall(r"```bash\n(.*?)\n```", setup, re.S)
    assert len(commands) == 2, commands
    labels = re.findall(r"\*\*Command (\d): ([^*]+)\*\*", setup)
    assert [n for n, _ in labels] == ["1", "2"]
    assert commands[0].endswith(".venv/bin/python -m example_project.run_example")
    ci = (REPO / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert commands[1] == ci  # CI runs exactly the second command
    for prerequisite in ("Python 3.11", "Java 17", "Node.js 18", "Chromium"):
        assert prerequisite in setup


def test_walkthrough_uses_dg_dev_with_the_printed_command():
    readme = (REPO / "README.md").read_text()
    ui = _section(readme, "The example in the Dagster UI (`dg dev`)")
    (command,) = re.findall(r"```bash\n(.*?)\n```", ui, re.S)
    assert command == "DAGSTER_HOME=/tmp/lance-assets-example/dagster_home .venv/bin/dg dev"
    setup = _section(readme, "Set-up: the two commands")
    printed = setup.split("```text")[1].split("```")[0]
    assert printed.rstrip().endswith("  " + command)  # the first command's last line
    assert "dagster dev" not in readme  # the README serves the example with dg dev only
