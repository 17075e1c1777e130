"""pylance's ``lance.commit``: the commit-conflict error and the commit-lock type.

:class:`CommitConflictError` is the engine's own (:mod:`lance_format.errors`), an ``OSError``
like pylance's, so ``except lance.commit.CommitConflictError`` catches the engine's conflicts.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from lance_format.errors import CommitConflictError

# a callable taking the version about to be committed, returning a context manager that holds
# the lock while the manifest is written (pylance's ``commit_lock``)
CommitLock = Callable[[int], AbstractContextManager[None]]

__all__ = ["CommitConflictError", "CommitLock"]
