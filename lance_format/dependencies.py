"""pylance's ``lance.dependencies``: optional libraries imported on first use.

``_LazyModule(name, module_available=...)`` stands for a module: touching one of its attributes
imports the real module (or, when it is not installed, raises ``ModuleNotFoundError`` saying what
to install). The ``_<NAME>_AVAILABLE`` flags say which optional libraries are installed; code
that would use one checks its flag first, so a missing library never fails an import of this
package. ``pandas``, ``numpy``, ``polars``, ``torch``, ``datasets`` are such proxies.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import types
from typing import Any


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a broken or half-installed package counts as missing
        return False


class _LazyModule(types.ModuleType):
    """A stand-in for the module ``module_name``, imported when an attribute is first read."""

    _hints = {"numpy": "np.", "pandas": "pd.", "polars": "pl.", "torch": "torch."}

    def __init__(self, module_name: str, *, module_available: bool) -> None:
        super().__init__(module_name)
        self._module_name = module_name
        self._module_available = module_available

    def __getattr__(self, attr: str) -> Any:
        if attr == "__wrapped__":  # decorators probe for it: never import because of that
            raise AttributeError(f"{self._module_name!r} object has no attribute {attr!r}")
        if self._module_available:
            module = importlib.import_module(self._module_name)
            self.__dict__.update(module.__dict__)
            return getattr(module, attr)
        if re.fullmatch(r"__\w+__", attr) and attr != "__version__":
            return None  # introspection (help(), doctest) works without the module
        raise ModuleNotFoundError(f"{self._hints.get(self._module_name, '')}{attr} requires "
                                  f"{self._module_name!r} module to be installed") from None

    def __repr__(self) -> str:
        state = "" if self._module_available else " (not installed)"
        return f"<lazy module {self._module_name!r}{state}>"


def _lazy_import(module_name: str) -> tuple[types.ModuleType, bool]:
    """A proxy for ``module_name`` and whether it is installed (nothing is imported yet)."""
    available = _installed(module_name)
    return _LazyModule(module_name, module_available=available), available


numpy, _NUMPY_AVAILABLE = _lazy_import("numpy")
pandas, _PANDAS_AVAILABLE = _lazy_import("pandas")
polars, _POLARS_AVAILABLE = _lazy_import("polars")
torch, _TORCH_AVAILABLE = _lazy_import("torch")
datasets, _HUGGING_FACE_AVAILABLE = _lazy_import("datasets")
_PYDANTIC_AVAILABLE = _installed("pydantic")


def _check_for_numpy(obj: Any) -> bool:
    return _NUMPY_AVAILABLE and type(obj).__module__.split(".")[0] == "numpy"


def _check_for_pandas(obj: Any) -> bool:
    return _PANDAS_AVAILABLE and type(obj).__module__.split(".")[0] == "pandas"


def _check_for_polars(obj: Any) -> bool:
    return _POLARS_AVAILABLE and type(obj).__module__.split(".")[0] == "polars"


def _check_for_hugging_face(obj: Any) -> bool:
    return _HUGGING_FACE_AVAILABLE and type(obj).__module__.split(".")[0] == "datasets"


__all__ = [
    "numpy", "pandas", "polars", "torch", "datasets", "_LazyModule", "_check_for_numpy", "_check_for_pandas",
    "_check_for_polars", "_check_for_hugging_face", "_NUMPY_AVAILABLE", "_PANDAS_AVAILABLE", "_POLARS_AVAILABLE",
    "_TORCH_AVAILABLE", "_HUGGING_FACE_AVAILABLE", "_PYDANTIC_AVAILABLE",
]
