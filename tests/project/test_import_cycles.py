"""No runtime import cycle among the project's modules.

The layer contracts (``lint-imports``) look at every import, including the ones inside functions;
this test looks at what runs when a module is imported: the imports at module level (inside
``if``/``try`` too, not under ``TYPE_CHECKING``). A cycle there makes a module's import succeed or
fail depending on which module of the cycle is imported first, so none may exist. Break a new
cycle by moving the import that closes it into the function that needs it (and say why there).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("lance_format", "lance_assets")


def _module_name(path: Path) -> str:
    name = ".".join(path.with_suffix("").parts)
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_time_imports(tree: ast.Module, module: str, is_package: bool) -> list[tuple[str, list[str]]]:
    """(imported module, imported names) of every import run when ``module`` is imported."""
    found: list[tuple[str, list[str]]] = []

    def visit(statements: list[ast.stmt]) -> None:
        for statement in statements:
            if isinstance(statement, ast.If):
                if not _is_type_checking(statement.test):
                    visit(statement.body)
                visit(statement.orelse)
            elif isinstance(statement, ast.Try):
                visit(statement.body)
                visit(statement.orelse)
                visit(statement.finalbody)
                for handler in statement.handlers:
                    visit(handler.body)
            elif isinstance(statement, ast.With):
                visit(statement.body)
            elif isinstance(statement, ast.Import):
                found.extend((alias.name, []) for alias in statement.names)
            elif isinstance(statement, ast.ImportFrom):
                target = statement.module or ""
                if statement.level:
                    base = module.split(".") if is_package else module.split(".")[:-1]
                    base = base[: len(base) - (statement.level - 1)]
                    target = ".".join(base + ([target] if target else []))
                found.append((target, [alias.name for alias in statement.names]))

    visit(tree.body)
    return found


def import_graph(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """Module -> the project modules its import runs (a submodule named in ``from p import m``
    counts as ``p.m``; parent packages are left out: Python tolerates a half-initialized parent)."""
    files = {_module_name(p.relative_to(root)): p for package in packages for p in (root / package).rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for target, names in _import_time_imports(tree, name, path.name == "__init__.py"):
            if target.split(".")[0] not in packages:
                continue
            submodules = [f"{target}.{n}" for n in names if f"{target}.{n}" in files]
            if (not names or len(submodules) < len(names)) and target in files:
                submodules.append(target)
            graph[name].update(s for s in submodules if s != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                connect(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for node in sorted(graph):
            if node not in index:
                connect(node)
    finally:
        sys.setrecursionlimit(limit)
    return found


def test_no_import_time_cycle_in_the_project() -> None:
    graph = import_graph(ROOT)
    assert len(graph) > 300  # the whole project was read
    assert "lance_format.dataset.scan.plan" in graph["lance_format.dataset.scan.executor"]
    assert cycles(graph) == []


def test_a_cycle_is_found(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.sub import b\n")
    (package / "sub" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import c\n"
                                          "def f():\n    from pkg import a\n")
    (package / "c.py").write_text("from pkg import a\n")
    graph = import_graph(tmp_path, ("pkg",))
    assert cycles(graph) == []  # b -> a only inside a function, b -> c only for type checking
    (package / "sub" / "b.py").write_text("try:\n    from .. import c\nexcept ImportError:\n    pass\n")
    assert cycles(import_graph(tmp_path, ("pkg",))) == [["pkg.a", "pkg.c", "pkg.sub.b"]]
