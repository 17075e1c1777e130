"""The README's engine quick start runs with pylance 14 (``import lance as lance_format``) except
the calls it marks as this engine's additions (tests/project/test_readme.py runs it with this engine)."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import lance
import pyarrow as pa

README = os.path.join(str(Path(__file__).resolve().parents[2]), "README.md")
MARK = "# this engine's addition"


def _engine_block() -> str:
    text = open(README, encoding="utf-8").read()
    quick = text[text.index("## Quick start"):]
    block = re.search(r"```python\n(.*?)```", quick, re.S)
    assert block is not None
    return block.group(1)


def test_quick_start_runs_with_pylance_except_the_marked_additions(tmp_path):
    source = _engine_block().replace("/tmp/lance-docs/", f"{tmp_path}/")
    lines = source.splitlines()
    scope: dict = {"pa": pa, "lance_format": lance}  # the block's imports, with pylance as the engine
    marked_names: set[str] = set()
    marked = 0
    for statement in ast.parse(source).body:
        text = "\n".join(lines[statement.lineno - 1:statement.end_lineno])
        code = compile(ast.Module(body=[statement], type_ignores=[]), "<README>", "exec")
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            continue
        try:
            exec(code, scope)
            error = None
        except (AttributeError, NameError) as exc:
            error = exc
        if MARK in text:
            marked += 1
            assert isinstance(error, AttributeError), text  # pylance 14 lacks it
            marked_names.update(t.id for t in ast.walk(statement) if isinstance(t, ast.Name)
                                and isinstance(t.ctx, ast.Store))
        elif error is not None:
            # only statements using what a marked call made may fail
            assert isinstance(error, NameError) and error.name in marked_names, (text, error)
    assert marked >= 1
