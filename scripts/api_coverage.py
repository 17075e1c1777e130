"""How much of pylance's public Python API exists here, with compatible signatures.

Compares the public names of pylance (the test oracle) with ``lance_format``'s: module-level
names of ``lance``, ``lance.fragment`` and the submodules of :data:`SUBMODULES` (``lance.file``,
``lance.progress``, ...), the operations of ``LanceOperation``, and the public methods and
properties of ``LanceDataset``, ``LanceFragment``, ``LanceScanner``, ``MergeInsertBuilder`` and
the ``lance.file`` reader, writer and session. A name counts as *compatible* when it exists here
and every parameter pylance's signature has can be passed here by the same name (or is absorbed
by ``**kwargs``), and the positional parameters come in the same order.

    python scripts/api_coverage.py            # the summary table
    python scripts/api_coverage.py --missing  # also list what is missing or incompatible
"""

from __future__ import annotations

import argparse
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import lance
import lance.dataset
import lance.file
import lance.fragment

import lance_format

CLASSES = {
    "LanceDataset": ("lance.dataset.LanceDataset", "LanceDataset"),
    "LanceFragment": ("lance.fragment.LanceFragment", "LanceFragment"),
    "LanceScanner": ("lance.dataset.LanceScanner", "LanceScanner"),
    "MergeInsertBuilder": ("lance.dataset.MergeInsertBuilder", "MergeInsertBuilder"),
    # ours named by dotted path where the engine has a class of the same name elsewhere
    "LanceFileReader": ("lance.file.LanceFileReader", "lance_format.file.LanceFileReader"),
    "LanceFileWriter": ("lance.file.LanceFileWriter", "lance_format.file.LanceFileWriter"),
    "LanceFileSession": ("lance.file.LanceFileSession", "lance_format.file.LanceFileSession"),
}
# pylance's submodules whose own names count (``lance.<name>`` against ``lance_format.<name>``)
SUBMODULES = ["file", "progress", "debug", "commit", "util", "vector", "dataset", "arrow", "optimize", "log",
              "sampler", "_dataset.sharded_batch_iterator"]


@dataclass
class Coverage:
    scope: str
    total: int = 0
    present: int = 0
    compatible: int = 0
    missing: list[str] = field(default_factory=list)
    incompatible: list[str] = field(default_factory=list)


def _resolve(dotted: str) -> Any:
    module, _, name = dotted.rpartition(".")
    # `lance.dataset` is both a module and a function: go through sys.modules
    return getattr(sys.modules[module], name)


def _ours(name: str) -> Any:
    """The class of ours with this name (or dotted path), wherever the package keeps it."""
    if "." in name:
        import importlib

        module, _, attr = name.rpartition(".")
        return getattr(importlib.import_module(module), attr, None)
    found = getattr(lance_format, name, None)
    if found is not None:
        return found
    import importlib
    import pkgutil

    for info in pkgutil.walk_packages(lance_format.__path__, "lance_format."):
        if ".spark" in info.name:
            continue
        try:
            module = importlib.import_module(info.name)
        except Exception:  # noqa: BLE001 - optional modules
            continue
        if isinstance(getattr(module, name, None), type):
            return getattr(module, name)
    return None


def _public(obj: Any) -> dict[str, Any]:
    return {n: getattr(obj, n) for n in dir(obj) if not n.startswith("_")}


def _signature(fn: Any) -> inspect.Signature | None:
    if isinstance(fn, property):
        return None
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def compatible(theirs: Any, ours: Any) -> bool:
    """Every pylance parameter can be passed to ours by name, positional order preserved."""
    if isinstance(theirs, property) or not callable(theirs):
        return True
    if not callable(ours):
        return False
    sig_t, sig_o = _signature(theirs), _signature(ours)
    if sig_t is None or sig_o is None:
        return True  # builtins without signatures: presence is all we can check
    params_o = sig_o.parameters
    var_kw = any(p.kind is p.VAR_KEYWORD for p in params_o.values())
    var_pos = any(p.kind is p.VAR_POSITIONAL for p in params_o.values())
    positional_t = [p.name for p in sig_t.parameters.values()
                    if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name not in ("self", "cls")]
    positional_o = [p.name for p in params_o.values()
                    if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name not in ("self", "cls")]
    if not var_pos and positional_o[: len(positional_t)] != positional_t:
        # same names in the same order; ours may take more positionals after them
        if not all(name in params_o or var_kw for name in positional_t):
            return False
        if [n for n in positional_o if n in positional_t] != [n for n in positional_t if n in positional_o]:
            return False
    for p in sig_t.parameters.values():
        if p.name in ("self", "cls") or p.name.startswith("_") or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue  # (underscored parameters are pylance's internals, not API)
        if p.name not in params_o and not var_kw:
            return False
    return True


def measure(scope: str, theirs: dict[str, Any], ours_of: Callable[[str], Any]) -> Coverage:
    result = Coverage(scope)
    for name, member in sorted(theirs.items()):
        result.total += 1
        mine = ours_of(name)
        if mine is None:
            result.missing.append(name)
            continue
        result.present += 1
        if compatible(member, mine):
            result.compatible += 1
        else:
            result.incompatible.append(name)
    return result


def module_names() -> dict[str, Any]:
    names = getattr(lance, "__all__", None) or [n for n in dir(lance) if not n.startswith("_")]
    return {n: getattr(lance, n) for n in names if not inspect.ismodule(getattr(lance, n, None))}


def fragment_module_names() -> dict[str, Any]:
    """The names ``lance.fragment`` defines (not what it imports from elsewhere, like ``Bitmap``)."""
    module = sys.modules["lance.fragment"]
    return {n: v for n, v in vars(module).items()
            if not n.startswith("_") and not inspect.ismodule(v)
            and getattr(v, "__module__", "") in ("lance.fragment", "lance.lance")}


def submodule_names(name: str) -> dict[str, Any]:
    """The names ``lance.<name>`` defines, or takes from the native module (``lance.lance``)."""
    import importlib

    module = importlib.import_module(f"lance.{name}")
    if name == "dataset":  # `lance.dataset` is also a function: the module is in sys.modules
        module = sys.modules["lance.dataset"]
    def own(value: Any) -> bool:  # defined there, natively, or in a private module of pylance
        where = getattr(value, "__module__", None) or module.__name__
        return where in (module.__name__, "builtins") or where.startswith(("lance.lance", "lance._")) \
            or (name == "optimize" and where == "lance.optimize")

    return {n: v for n, v in vars(module).items()
            if not n.startswith("_") and not inspect.ismodule(v) and (callable(v) or isinstance(v, str)) and own(v)}


def _our_submodule(name: str) -> Any:
    import importlib

    try:
        return importlib.import_module(f"lance_format.{name}")
    except ImportError:
        return None


def operation_names() -> dict[str, Any]:
    operations = sys.modules["lance.dataset"].LanceOperation
    return {n: v for n, v in vars(operations).items() if not n.startswith("_") and isinstance(v, type)}


def run() -> list[Coverage]:
    import lance_format.fragment

    results = [measure("lance (module)", module_names(), lambda n: getattr(lance_format, n, None)),
               measure("lance.fragment (module)", fragment_module_names(),
                       lambda n: getattr(lance_format.fragment, n, None)),
               measure("LanceOperation", operation_names(),
                       lambda n: getattr(getattr(lance_format, "LanceOperation", None), n, None))]
    for sub in SUBMODULES:
        ours_module = _our_submodule(sub)
        results.append(measure(f"lance.{sub}", submodule_names(sub),
                               lambda n, m=ours_module: None if m is None else getattr(m, n, None)))
    for scope, (their_path, our_name) in CLASSES.items():
        theirs = _public(_resolve(their_path))
        ours_cls = _ours(our_name)
        results.append(measure(scope, theirs, lambda n, c=ours_cls: None if c is None else c.__dict__.get(n)
                               or next((k.__dict__[n] for k in c.__mro__ if n in k.__dict__), None)))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--missing", action="store_true", help="list missing and incompatible names")
    args = parser.parse_args()
    results = run()
    total = Coverage("all")
    print(f"{'scope':38s} {'pylance':>8s} {'present':>8s} {'compatible':>11s} {'share':>7s}")
    for r in results:
        share = r.compatible / r.total if r.total else 1.0
        print(f"{r.scope:38s} {r.total:8d} {r.present:8d} {r.compatible:11d} {share:7.0%}")
        total.total += r.total
        total.present += r.present
        total.compatible += r.compatible
    print(f"{'all':38s} {total.total:8d} {total.present:8d} {total.compatible:11d} "
          f"{total.compatible / total.total:7.0%}")
    if args.missing:
        for r in results:
            print(f"\n{r.scope}: missing {len(r.missing)}: {', '.join(r.missing)}")
            if r.incompatible:
                print(f"{r.scope}: incompatible {len(r.incompatible)}: {', '.join(r.incompatible)}")


if __name__ == "__main__":
    main()
