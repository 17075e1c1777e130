"""Lance Namespace (official Lance's catalog specification) on this engine.

``DirectoryNamespace`` implements ``lance_namespace.LanceNamespace`` over a folder, V1 and V2
(the ``__manifest`` table) as pylance 14 writes them. Importing this package (which needs the
``lance-namespace`` package, the ``namespace`` extra) also lets ``lance_namespace.connect("dir",
...)`` find it when official Lance is not installed.
"""

from __future__ import annotations

import importlib.util
from abc import ABC, abstractmethod

import lance_namespace

# like pylance's ``lance.namespace``: the interface, request and response models are importable here
from lance_namespace import *  # noqa: F401,F403
from lance_namespace import LanceNamespace

from lance_format.namespace.directory import DirectoryNamespace
from lance_format.namespace.rest import RestNamespace
from lance_format.namespace.tables import TableLocation, connect_namespace, locate_table, table_id_parts

__all__ = ["DirectoryNamespace", "DynamicContextProvider", "LanceNamespace", "RestNamespace", "TableLocation",
           "connect_namespace", "locate_table", "register", "table_id_parts"]


def __getattr__(name: str) -> object:
    """``RestAdapter`` (the REST server) is imported when used: it needs starlette and uvicorn."""
    if name == "RestAdapter":
        from lance_format.namespace.adapter import RestAdapter

        return RestAdapter
    raise AttributeError(f"module 'lance_format.namespace' has no attribute {name!r}")


class DynamicContextProvider(ABC):
    """pylance's per-request context hook (e.g. headers for a REST namespace). A directory
    namespace accepts one and has no use for it."""

    @abstractmethod
    def provide_context(self, info: dict) -> dict:
        """Context entries (``{"headers.Authorization": "Bearer ..."}``) for one operation."""

IMPLS = {"dir": "lance_format.namespace.DirectoryNamespace", "rest": "lance_format.namespace.RestNamespace"}


def register() -> None:
    """Point ``connect``'s built-in names at this engine's implementations, unless official Lance
    (whose ``lance.namespace`` they name) is installed."""
    if not _official_lance_installed() or _lance_is_us():
        lance_namespace.NATIVE_IMPLS.update(IMPLS)
    else:
        for name, path in IMPLS.items():
            lance_namespace.register_namespace_impl(name, path)


def _official_lance_installed() -> bool:
    try:
        return importlib.util.find_spec("lance") is not None
    except (ImportError, ValueError):  # a half-imported or blocked ``lance``
        return False


def _lance_is_us() -> bool:
    """Whether ``import lance`` is aliased to this engine (``import lance_format as lance`` shims)."""
    import sys

    module = sys.modules.get("lance")
    return module is not None and getattr(module, "__name__", "") == "lance_format"


register()
