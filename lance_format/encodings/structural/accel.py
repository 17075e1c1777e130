"""Whether the hot loops of the 2.1/2.2 codecs run as numba-compiled kernels (:mod:`.numba_kernels`).

numba is an optional dependency (the ``fast`` extra): with it, FSST compression and decoding and
the mini-block writer's chunking are several times faster; without it, the numpy code produces
the same bytes. It is imported on first use, not with the package (importing numba takes a
noticeable fraction of a second).
``LANCE_FORMAT_NO_JIT=1`` in the environment keeps the numpy code even where numba is installed.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType

DISABLE_ENV = "LANCE_FORMAT_NO_JIT"

_kernels: ModuleType | None = None
_loaded = False


def kernels() -> ModuleType | None:
    """The compiled kernels module, or None where numba is missing or disabled."""
    global _kernels, _loaded
    if not _loaded:
        _loaded = True
        # the kernels read and write little-endian words directly
        if os.environ.get(DISABLE_ENV, "") not in ("", "0") or sys.byteorder != "little":
            _kernels = None
        else:
            try:
                from lance_format.encodings.structural import numba_kernels
            except ImportError:
                numba_kernels = None  # type: ignore[assignment]
            _kernels = numba_kernels
    return _kernels


def set_enabled(enabled: bool) -> None:
    """Use (when importable) or bypass the compiled kernels from now on; for tests and benchmarks."""
    global _kernels, _loaded
    _kernels, _loaded = None, not enabled
