"""pylance's ``lance.set_logger``: send log records to a file or handler.

pylance's Python code logs to the logger ``name`` (``"pylance"``); this engine logs to the
``lance_format`` loggers, so the handler set up here receives both: the records of the named
logger and those of the engine.
"""

from __future__ import annotations

import logging
from typing import Optional

ENGINE_LOGGER = "lance_format"
_FORMAT = "%(asctime)s %(name)s [%(levelname)s] %(filename)s:%(lineno)d %(funcName)s : %(message)s"


def set_logger(file_path: Optional[str] = "pylance.log", name: str = "pylance", level: int = logging.INFO,
               format_string: Optional[str] = None, log_handler: Optional[logging.Handler] = None) -> logging.Logger:
    """Log records of level ``level`` and above to ``log_handler`` (a file handler writing to
    ``file_path`` if None), formatted with ``format_string``; the configured logger ``name``."""
    handler = log_handler if log_handler is not None else logging.FileHandler(str(file_path))
    handler.setLevel(level)
    handler.setFormatter(logging.Formatter(format_string or _FORMAT))
    named = logging.getLogger(name)
    named.setLevel(level)
    named.addHandler(handler)
    engine = logging.getLogger(ENGINE_LOGGER)
    if engine is not named:
        engine.setLevel(level)
        engine.addHandler(handler)
    return named


__all__ = ["set_logger", "ENGINE_LOGGER"]
