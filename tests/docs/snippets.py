"""The documentation's Python snippets: find them in a page and run them in order.

Conventions of ``docs/**/*.md`` (invisible on the rendered site):

* every fenced ``python`` block runs, in page order, in one namespace per page, with the
  working directory a fresh temporary folder;
* ``/tmp/lance-docs`` in a snippet stands for that folder (so pages can show plain paths);
* ``<!-- skip: reason -->`` on the line before a block skips that block (reason required:
  only for what needs a cluster or a cloud account);
* ``<!-- expected output -->`` on the line before a ``text`` block right after a python block:
  what the python block prints, compared line by line (trailing spaces aside);
* ``<!-- snippets: spark -->`` anywhere in a page puts the test session's SparkSession in the
  page's namespace as ``spark``.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import textwrap
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DOCS_TMP = "/tmp/lance-docs"
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<info>[^\n`]*)$")
SKIP = re.compile(r"<!--\s*skip:\s*(?P<reason>\S.*?)\s*-->")
EXPECTED = "<!-- expected output -->"
SPARK_PAGE = "<!-- snippets: spark -->"


@dataclass
class Snippet:
    page: Path
    line: int  # 1-based line of the opening fence
    code: str
    skip: str | None = None
    expected: str | None = None  # the text block that follows, when marked as its output


def _blocks(text: str) -> list[tuple[int, str, str, str]]:
    """``(line, info, body, previous non-blank line)`` of each fenced block."""
    lines = text.splitlines()
    out = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m or not m.group("info").strip():
            i += 1
            continue
        indent, info = m.group("indent"), m.group("info").strip()
        start = i
        body = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        prev = next((lines[j].strip() for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        out.append((start + 1, info.split()[0], "\n".join(body) + "\n", prev))
        i += 1
    return out


def snippets(page: Path) -> list[Snippet]:
    """The page's python snippets, each with its skip reason and expected output."""
    found: list[Snippet] = []
    blocks = _blocks(page.read_text())
    for n, (line, info, body, prev) in enumerate(blocks):
        if info == "python":
            skip = SKIP.search(prev)
            found.append(Snippet(page, line, textwrap.dedent(body), skip.group("reason") if skip else None))
        elif info == "text" and prev == EXPECTED:
            if n == 0 or blocks[n - 1][1] != "python" or not found:
                raise AssertionError(f"{page}:{line}: an expected output must follow a python block")
            found[-1].expected = body
    return found


def needs_spark(page: Path) -> bool:
    return SPARK_PAGE in page.read_text()


def run_page(page: Path, workdir: Path, extra: dict[str, Any] | None = None) -> list[str]:
    """Run the page's snippets in order in ``workdir``; returns the skip reasons met.

    A failing snippet raises AssertionError naming the page and the fence's line.
    """
    page = page.resolve()
    module = types.ModuleType("docs_snippets_" + re.sub(r"\W", "_", page.stem))
    sys.modules[module.__name__] = module  # dataclasses, pickling and Dagster look modules up
    module.__dict__.update(extra or {})
    skipped = []
    old_cwd = os.getcwd()
    os.chdir(workdir)
    try:
        for snippet in snippets(page):
            if snippet.skip:
                skipped.append(f"{page.name}:{snippet.line}: {snippet.skip}")
                continue
            code = snippet.code.replace(DOCS_TMP, str(workdir))
            out = io.StringIO()
            try:
                with contextlib.redirect_stdout(out):
                    exec(compile(code, f"{page}:{snippet.line}", "exec", dont_inherit=True), module.__dict__)
            except Exception as exc:
                raise AssertionError(f"{page}:{snippet.line}: the snippet failed: {exc!r}\n{snippet.code}") from exc
            if snippet.expected is not None:
                got = _normal(out.getvalue().replace(str(workdir), DOCS_TMP))
                want = _normal(snippet.expected)
                assert got == want, f"{page}:{snippet.line}: printed\n{got}\nbut the page shows\n{want}"
    finally:
        os.chdir(old_cwd)
        sys.modules.pop(module.__name__, None)
    return skipped


def _normal(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())
