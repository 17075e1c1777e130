"""The README: exactly two labelled set-up commands, the second the one CI runs; the UI served by
``dg dev`` with the command the first one prints; short, with install instructions that work,
a quick start that runs (one example per layer) and links into the documentation site.

The reference material the README used to hold is in docs/; tests/docs/ checks it (the moved
UI walkthrough steps, the commands repeated on the Getting started page, every snippet)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


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


def test_readme_is_short_and_links_into_the_site():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 200  # the reference material lives in docs/
    links = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", readme)
    assert len(links) >= 10, links
    for link in links:
        assert (REPO / link).is_file(), f"README links to {link}, which does not exist"
    assert "mkdocs serve" in readme  # how to read the site locally
    for section in ("Set-up: the two commands", "Quick start", "Install"):
        assert f"## {section}" in readme


def test_readme_install_says_what_works():
    install = _section((REPO / "README.md").read_text(), "Install")
    assert "not on PyPI" in install  # `pip install lance-assets` resolves nothing
    assert "python -m build" in install and "pip install -e" in install


def test_readme_quick_start_runs(tmp_path, request):
    """The engine, Spark and Dagster examples, in order, as the docs' snippet runner runs pages."""
    from tests.docs.snippets import needs_spark, run_page, snippets

    page = REPO / "README.md"
    assert len([s for s in snippets(page) if s.skip is None]) == 3  # one per layer
    extra = {"spark": request.getfixturevalue("spark")} if needs_spark(page) else {}
    assert run_page(page, tmp_path, extra) == []
