"""The ``lance.auto_cleanup.*`` table config of official Lance: its keys and durations.

A table whose config holds ``lance.auto_cleanup.interval`` = N runs ``cleanup_old_versions`` after
every commit of a version divisible by N, with ``lance.auto_cleanup.older_than`` (a humantime
duration such as ``"14days"`` or ``"1h 30m"``) and/or ``lance.auto_cleanup.retain_versions``.
Like official Lance, the cleanup (:func:`clean_up_after_commit`, which the commit loop runs after
every commit) sees the table as the committing writer read it (the version before the new one),
never fails the commit (errors are logged), and neither removes tagged versions nor raises for them. ``write_dataset(..., auto_cleanup_options=...)`` sets the config when
it creates a table; ``enable_auto_cleanup``/``disable_auto_cleanup`` change it later.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from datetime import timedelta
from typing import TypedDict

from lance_format.errors import InvalidInputError
from lance_format.io import ObjectStore
from lance_format.proto import table_pb2
from lance_format.table.cleanup import VersionAt, cleanup_old_versions
from lance_format.table.manifest import read_manifest
from lance_format.table.naming import list_versions

INTERVAL_KEY = "lance.auto_cleanup.interval"
OLDER_THAN_KEY = "lance.auto_cleanup.older_than"
RETAIN_VERSIONS_KEY = "lance.auto_cleanup.retain_versions"

log = logging.getLogger(__name__)

# humantime's units (Rust crate used by official Lance): a year is 365.25 days, a month 30.44
_UNITS = [("year", 31_557_600), ("month", 2_630_016), ("day", 86_400), ("h", 3600), ("m", 60), ("s", 1)]
_PARSE_UNITS = {
    "nsec": 1e-9, "ns": 1e-9, "usec": 1e-6, "us": 1e-6, "msec": 1e-3, "ms": 1e-3,
    "seconds": 1, "second": 1, "sec": 1, "s": 1, "minutes": 60, "minute": 60, "min": 60, "m": 60,
    "hours": 3600, "hour": 3600, "hr": 3600, "h": 3600, "days": 86_400, "day": 86_400, "d": 86_400,
    "weeks": 604_800, "week": 604_800, "w": 604_800, "months": 2_630_016, "month": 2_630_016, "M": 2_630_016,
    "years": 31_557_600, "year": 31_557_600, "y": 31_557_600,
}
_PART = re.compile(r"(\d+)\s*([A-Za-z]+)")


class AutoCleanupConfig(TypedDict):
    """pylance's ``AutoCleanupConfig``: run cleanup every ``interval`` versions, removing versions
    older than ``older_than_seconds``."""

    interval: int
    older_than_seconds: int


def format_duration(seconds: int) -> str:
    """Whole seconds in humantime's format (``"1year 1month 4days 7h 26m 24s"``, ``"0s"``)."""
    if seconds <= 0:
        return "0s"
    parts = []
    for unit, size in _UNITS:
        count, seconds = divmod(seconds, size)
        if count:
            plural = "s" if count > 1 and unit in ("year", "month", "day") else ""
            parts.append(f"{count}{unit}{plural}")
    return " ".join(parts)


def parse_duration(text: str) -> timedelta:
    """A humantime duration (``"14days"``, ``"1h 30m"``, ``"90s"``) as a timedelta."""
    stripped = text.strip()
    matches = list(_PART.finditer(stripped))
    if not matches or _PART.sub("", stripped).strip():
        raise InvalidInputError(f"not a duration: {text!r}")
    total = 0.0
    for match in matches:
        unit = match.group(2)
        if unit not in _PARSE_UNITS:
            raise InvalidInputError(f"unknown unit {unit!r} in duration {text!r}")
        total += int(match.group(1)) * _PARSE_UNITS[unit]
    return timedelta(seconds=total)


def config_values(options: Mapping[str, int]) -> dict[str, str]:
    """The table config entries for an ``AutoCleanupConfig``."""
    try:
        interval = int(options["interval"])
        older_than = int(options["older_than_seconds"])
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInputError(
            f"auto cleanup options need integer 'interval' and 'older_than_seconds', got {options!r}") from exc
    if interval <= 0 or older_than < 0:
        raise InvalidInputError(f"auto cleanup needs interval > 0 and older_than_seconds >= 0, got {options!r}")
    return {INTERVAL_KEY: str(interval), OLDER_THAN_KEY: format_duration(older_than)}


def due(manifest: table_pb2.Manifest) -> bool:
    """Whether the commit of ``manifest`` triggers an automatic cleanup."""
    interval = manifest.config.get(INTERVAL_KEY)
    if interval is None:
        return False
    try:
        return int(interval) > 0 and manifest.version % int(interval) == 0
    except ValueError:
        log.error("table config %s=%r is not an integer; no automatic cleanup", INTERVAL_KEY, interval)
        return False




def clean_up_after_commit(store: ObjectStore, manifest: table_pb2.Manifest) -> None:
    """Official Lance's automatic cleanup after the commit of ``manifest``, if due; logs errors."""
    if not due(manifest):
        return
    try:
        listing = list_versions(store)
        earlier = [v for v in listing.versions if v < manifest.version]
        seen = read_manifest(store, listing.versions[max(earlier)]).manifest if earlier else manifest
        older = manifest.config.get(OLDER_THAN_KEY)
        retain = manifest.config.get(RETAIN_VERSIONS_KEY)
        older_than = parse_duration(older) if older is not None else None
        retain_versions = int(retain) if retain is not None else None
        if older_than is None and retain_versions is None:
            older_than = timedelta(0)  # official Lance's empty policy: every version before the read one
        stats = cleanup_old_versions(VersionAt(store, seen), older_than, retain_versions,
                                     error_if_tagged_old_versions=False)
        log.info("automatic cleanup after version %d of %s: %s", manifest.version, store.uri, stats)
    except Exception as exc:  # the commit has landed; a failed cleanup must not fail it
        log.error("automatic cleanup after version %d of %s failed: %s", manifest.version, store.uri, exc)
