"""Run code written for pylance against lance_format: ``import lance`` resolves to ``lance_format``.

Imported first (from a conftest) by ``scripts/pylance_suite.py``: afterwards ``import lance``,
``lance.dataset(...)`` and ``from lance.fragment import FragmentMetadata`` all reach
``lance_format`` and its submodules, exactly as a user who replaced ``import lance`` with
``import lance_format as lance`` would. Nothing of pylance is imported.

``LANCE_ALIAS_STUBS=1`` additionally gives names the tests import at module level but
lance_format lacks a placeholder that raises on use, so the rest of such a file still runs;
the placeholders are listed on stdout (they are gaps, and the tests using them fail).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
from typing import Any

import lance_format


class _LanceModule(types.ModuleType):
    """``lance``: lance_format's names. Importing ``lance.x`` must not replace ``lance.x``'s
    existing value (``lance.dataset`` is a function and a module, as in pylance)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(lance_format, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("__") or not hasattr(lance_format, name):
            object.__setattr__(self, name, value)


class _SubmoduleAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``lance.x.y`` is ``lance_format.x.y``, the same module object."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if not name.startswith("lance."):
            return None
        try:
            importlib.import_module("lance_format" + name[len("lance"):])
        except ModuleNotFoundError:
            return None
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return sys.modules["lance_format" + spec.name[len("lance"):]]

    def exec_module(self, module: types.ModuleType) -> None:
        """Already executed under its lance_format name."""


def install() -> None:
    for key in [k for k in sys.modules if k == "lance" or k.startswith("lance.")]:
        del sys.modules[key]
    alias = _LanceModule("lance")
    alias.__path__ = []  # a package, so `lance.x` imports go through the finder
    sys.modules["lance"] = alias
    sys.meta_path.insert(0, _SubmoduleAlias())


class _Missing:
    def __init__(self, name: str) -> None:
        self._name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"pylance_alias: lance.{self._name} does not exist in lance_format")

    def __getattr__(self, attr: str) -> Any:
        raise NotImplementedError(f"pylance_alias: lance.{self._name} does not exist in lance_format")


def stub_missing(imports: dict[str, list[str]]) -> list[str]:
    """Placeholders for ``from lance.<module> import <name>`` that lance_format cannot serve."""
    stubbed = []
    for sub, names in imports.items():
        full = "lance_format." + sub
        try:
            module = importlib.import_module(full)
        except ModuleNotFoundError:
            module = types.ModuleType(full)
            module.__path__ = []
            sys.modules[full] = module
            stubbed.append(sub)
        for name in names:
            if not hasattr(module, name):
                placeholder: Any = _Missing(f"{sub}.{name}")
                if name[:1].isupper():  # classes get subclassed at import time: a class that refuses to exist
                    placeholder = type(name, (), {"__init__": placeholder})
                setattr(module, name, placeholder)
                stubbed.append(f"{sub}.{name}")
    return stubbed


install()
if os.environ.get("LANCE_ALIAS_STUBS") == "1":
    import json

    _stubbed = stub_missing(json.loads(os.environ.get("LANCE_ALIAS_IMPORTS", "{}")))
    if _stubbed:
        print("pylance_alias placeholders:", ", ".join(_stubbed))
