"""Index-build progress events with pylance's ``IndexProgress`` shape (``event``, ``stage``,
``completed``, ``total``, ``unit``) and a reporter that hands them to a user callback."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal


@dataclass
class IndexProgress:
    """One progress event: ``event`` is ``"start"``, ``"progress"`` or ``"complete"``."""

    event: Literal["start", "progress", "complete"]
    stage: str
    completed: int | None = None
    total: int | None = None
    unit: str = ""

    @property
    def fraction(self) -> float | None:
        """``completed / total`` capped at 1.0, or None when either is unknown (total 0 = unknown)."""
        if self.completed is None or self.total in (None, 0):
            return None
        return min(self.completed / self.total, 1.0)


class Reporter:
    """Sends events to ``callback`` (None: no-op). An error the callback raises on the last
    event of a build (``final``) is ignored, as pylance does once the index is written."""

    def __init__(self, callback: Callable[[Any], Any] | None, final: str = "") -> None:
        self.callback = callback
        self.final = final

    def emit(self, event: Literal["start", "progress", "complete"], stage: str, completed: int | None = 0,
             total: int | None = None, unit: str = "") -> None:
        if self.callback is None:
            return
        try:
            self.callback(IndexProgress(event, stage, completed, total, unit))
        except Exception:
            if not (event == "complete" and stage == self.final):
                raise

    def stage(self, stage: str, steps: list[int], total: int | None, unit: str = "") -> None:
        """start, one progress event per value of ``steps``, complete (at the last step or 0)."""
        self.emit("start", stage, 0, total, unit)
        for done in steps:
            self.emit("progress", stage, done, total, unit)
        self.emit("complete", stage, steps[-1] if steps else 0, total, unit)
