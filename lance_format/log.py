"""pylance's ``lance.log``: ``set_logger`` sends log records to a file or handler, and the
``"pylance"`` logger (:data:`LOGGER`) starts at the level the ``LANCE_LOG`` environment variable
names (:func:`get_log_level`, as pylance reads it).

pylance's Python code logs to the logger ``name`` (``"pylance"``); this engine logs to the
``lance_format`` loggers, so the handler set up here receives both: the records of the named
logger and those of the engine.
"""

from __future__ import annotations

import logging
import os

ENGINE_LOGGER = "lance_format"
ENV_NAME_PYLANCE_LOGGING_LEVEL = "LANCE_LOG"


def get_python_log_level(rust_log_level: str) -> str:
    """The Python level name of a Rust ``log`` level (``trace`` is finer than DEBUG: DEBUG)."""
    return "DEBUG" if rust_log_level.lower() == "trace" else rust_log_level


def get_log_level() -> str:
    """The level ``LANCE_LOG`` sets for everything: its first entry without a ``target=``
    (``"lance-core=debug,WARNING"`` is WARNING); INFO when unset or empty."""
    value = os.environ.get(ENV_NAME_PYLANCE_LOGGING_LEVEL, "INFO").upper()
    plain = [entry for entry in value.split(",") if entry and "=" not in entry]
    return get_python_log_level(plain[0]) if plain else "INFO"


LOGGER = logging.getLogger("pylance")
LOGGER.setLevel(get_log_level())
_FORMAT = "%(asctime)s %(name)s [%(levelname)s] %(filename)s:%(lineno)d %(funcName)s : %(message)s"


def set_logger(file_path: str | None = "pylance.log", name: str = "pylance", level: int = logging.INFO,
               format_string: str | None = None, log_handler: logging.Handler | None = None) -> logging.Logger:
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


__all__ = ["set_logger", "ENGINE_LOGGER", "ENV_NAME_PYLANCE_LOGGING_LEVEL", "LOGGER", "get_log_level",
           "get_python_log_level"]
