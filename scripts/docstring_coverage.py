"""List the public functions, classes and methods of the documented API that lack a docstring.

The documented API is every name in ``__all__`` of ``lance_format``, ``lance_format.spark``,
``lance_format.namespace``, ``lance_format.indices`` and ``lance_assets``, and the public methods
and properties of their classes (including those from the project's own base classes and
mixins). ``python scripts/docstring_coverage.py`` prints the undocumented ones and exits 1 if there
are any; ``tests/docs/test_docstrings.py`` runs the same check.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path

MODULES = ("lance_format", "lance_format.spark", "lance_format.namespace", "lance_format.indices",
           "lance_assets")
PACKAGES = ("lance_format", "lance_assets")


def _has_doc(obj: object) -> bool:
    return bool((getattr(obj, "__doc__", None) or "").strip())


def _members(cls: type) -> list[tuple[str, object]]:
    """The public callables and properties ``cls`` has from its own body or from the project's
    classes it derives from (mixins such as ``LanceDataset``'s); members of outside bases
    (``io``, ``pyarrow``, ``Enum``) are those libraries' business."""
    out: dict[str, object] = {}
    for klass in cls.__mro__:
        if klass is not cls and not klass.__module__.startswith(PACKAGES):
            continue
        for name, attr in vars(klass).items():
            if name.startswith("_") or name in out:
                continue
            if isinstance(attr, (staticmethod, classmethod)):
                attr = attr.__func__
            if isinstance(attr, property) or inspect.isfunction(attr):
                out[name] = attr
    return list(out.items())


def public_api() -> dict[str, object]:
    """Each documented public name (``module.name`` or ``module.Class.member``) and its object."""
    seen: dict[str, object] = {}
    for modname in MODULES:
        mod = importlib.import_module(modname)
        for name in getattr(mod, "__all__", ()):
            obj = getattr(mod, name)
            if not (inspect.isfunction(obj) or inspect.isclass(obj)):
                continue  # constants, type aliases and submodules document themselves elsewhere
            seen.setdefault(f"{modname}.{name}", obj)
            if inspect.isclass(obj):
                for member, attr in _members(obj):
                    seen.setdefault(f"{modname}.{name}.{member}", attr)
    return seen


def undocumented() -> list[str]:
    """The names of :func:`public_api` without a docstring, sorted."""
    return sorted(name for name, obj in public_api().items() if not _has_doc(obj))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's packages, not an installed copy
    api = public_api()
    missing = undocumented()
    for name in missing:
        print(name)
    print(f"{len(missing)} of {len(api)} public names lack a docstring", file=sys.stderr)
    sys.exit(1 if missing else 0)
