"""Whether the hot loops of the 2.1/2.2 codecs run as numba-compiled kernels (:mod:`.numba_kernels`).

numba is an optional dependency (the ``fast`` extra): with it, FSST compression and decoding and
the mini-block writer's chunking are several times faster; without it, the numpy code produces
the same bytes. Importing numba and loading the cached kernels costs about 0.3 s of CPU (and the
first use after installation compiles them, several seconds, cached on disk afterwards), so the
kernels are loaded only once a process has handed the codecs ``WORTH_LOADING`` bytes of work:
small one-off writes and reads stay on numpy, large or long-running ones switch over (outputs
are identical, so switching mid-file is harmless).
``LANCE_FORMAT_JIT=0`` in the environment keeps the numpy code even where numba is installed;
``LANCE_FORMAT_JIT=1`` uses the kernels from the first call (e.g. to test them on small tables).
"""

from __future__ import annotations

import os
import sys
from types import ModuleType

JIT_ENV = "LANCE_FORMAT_JIT"
WORTH_LOADING = 32 << 20  # bytes of work after which the import and load pay for themselves

_kernels: ModuleType | None = None
_loaded = False
_policy: bool | None = None  # True: load now, False: never, None: after WORTH_LOADING bytes
_work = 0


def _load() -> ModuleType | None:
    # the kernels read and write little-endian words directly
    if os.environ.get(JIT_ENV, "") == "0" or sys.byteorder != "little":
        return None
    try:
        from lance_format.encodings.structural import numba_kernels
    except (ImportError, RuntimeError, OSError):
        # numba missing, or unusable here (e.g. no writable cache directory): numpy it is
        return None
    return numba_kernels


def kernels(work: int = 0) -> ModuleType | None:
    """The compiled kernels module, or None: numba missing or disabled, or (before they are
    loaded) less than WORTH_LOADING bytes of work seen so far, ``work`` included."""
    global _kernels, _loaded, _work
    if not _loaded:
        if _policy is False:
            return None
        _work += work
        if _policy is None and _work < WORTH_LOADING and os.environ.get(JIT_ENV, "") != "1":
            return None
        _kernels, _loaded = _load(), True
    return _kernels


def write_kernels(work: int = 0) -> ModuleType | None:
    """The writer's further compiled kernels (:mod:`.numba_write_kernels`), under the same
    policy as :func:`kernels`: None whenever that gives None."""
    if kernels(work) is None:
        return None
    from lance_format.encodings.structural import numba_write_kernels

    return numba_write_kernels


def read_kernels(work: int = 0) -> ModuleType | None:
    """The reader's further compiled kernels (:mod:`.numba_read_kernels`), under the same
    policy as :func:`kernels`: None whenever that gives None."""
    if kernels(work) is None:
        return None
    from lance_format.encodings.structural import numba_read_kernels

    return numba_read_kernels


def use_compiled(policy: bool | None) -> None:
    """True: use the kernels from now on (where importable); False: numpy only; None: the
    default (load after WORTH_LOADING bytes of work). For tests and benchmarks."""
    global _kernels, _loaded, _policy, _work
    _kernels, _loaded, _policy, _work = None, False, policy, 0
    if policy:
        kernels()
