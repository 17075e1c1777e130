"""Identifiers of a directory namespace: checks and the ``$``-joined object ids of ``__manifest``.

Official Lance joins an id's parts with ``$`` (``["sales", "orders"]`` is ``sales$orders``) and puts
the parts into folder names. pylance 14 accepts ``..``, ``/`` and empty parts and so writes outside
its root (or into oddly escaped folders); this engine refuses them with the package's typed error.
"""

from __future__ import annotations

from collections.abc import Sequence

DELIMITER = "$"
_FORBIDDEN = ("/", "\\", "\x00", DELIMITER)


def invalid_input(message: str) -> Exception:
    """``lance_namespace.InvalidInputError`` (imported when namespace features are used)."""
    from lance_namespace.errors import InvalidInputError

    return InvalidInputError(message)


def check_id(parts: Sequence[str] | None, what: str, *, allow_root: bool = False) -> list[str]:
    """``parts`` as a list after refusing anything that could leave the catalog's root."""
    if parts is None:
        parts = []
    if isinstance(parts, str) or not all(isinstance(p, str) for p in parts):
        raise invalid_input(f"{what} id must be a list of strings, got {parts!r}")
    parts = list(parts)
    if not parts and not allow_root:
        raise invalid_input(f"{what} id must not be empty")
    for part in parts:
        if part in ("", ".", "..") or any(c in part for c in _FORBIDDEN):
            raise invalid_input(f"{what} id {parts!r}: part {part!r} is not allowed (empty, '.', '..', or "
                                f"containing '/', '\\', '$' or NUL)")
    return parts


def object_id(parts: Sequence[str]) -> str:
    """The ``__manifest`` row id of ``parts``."""
    return DELIMITER.join(parts)


def check_location(location: str, table: Sequence[str]) -> str:
    """A registered table's location relative to the root, refused when it would leave the root."""
    where = f"table {object_id(table)!r}: location {location!r}"
    if not location:
        raise invalid_input(f"table {object_id(table)!r}: the location is empty")
    # the messages start as official Lance's do, so callers matching on them keep working
    if "://" in location:
        raise invalid_input(f"Absolute URIs are not allowed: {where} must be relative to the namespace root")
    if location.startswith(("/", "\\")) or (len(location) > 1 and location[1] == ":"):
        raise invalid_input(f"Absolute paths are not allowed: {where} must be relative to the namespace root")
    pieces = location.strip("/").split("/")
    if any(p in ("", ".", "..") for p in pieces) or "\\" in location or "\x00" in location:
        raise invalid_input(f"Path traversal is not allowed: {where} leaves the namespace root")
    return "/".join(pieces)
