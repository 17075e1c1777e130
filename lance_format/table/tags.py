"""Tags: named versions stored as ``_refs/tags/<name>.json``, in official Lance's JSON shape.

``{"branch": null, "version": 2, "createdAt": "...Z", "updatedAt": "...Z", "manifestSize": 645, "metadata": {}}``
"""

from __future__ import annotations

import builtins
import json
import re
from datetime import UTC, datetime
from typing import Any

from lance_format.errors import ArgumentTypeError, CorruptFileError, TagError, TagNotFoundError, VersionNotFoundError
from lance_format.io import ObjectStore
from lance_format.table.naming import list_versions

TAGS_DIR = "_refs/tags"
_VALID_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# A tag is the file ``<name>.json``, staged locally as ``.tmp_<name>.json_<32 hex>``: file
# systems cap a name at 255 bytes.
MAX_TAG_NAME_BYTES = 255 - len(".tmp_.json_") - 32


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not _VALID_TAG.match(name) or name.endswith(".lock") or ".." in name:
        raise TagError(f"invalid tag name {name!r}: use letters, digits, '_', '-' and '.'")
    if len(name.encode()) > MAX_TAG_NAME_BYTES:
        raise TagError(f"invalid tag name {name[:40]!r}...: longer than {MAX_TAG_NAME_BYTES} bytes")


def _parse_time(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


class TableTags:
    """The tags of one table; mirrors pylance's ``LanceDataset.tags``."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store

    def _path(self, name: str) -> str:
        _check_name(name)
        return f"{TAGS_DIR}/{name}.json"

    def _read(self, name: str) -> dict[str, Any]:
        path = self._path(name)
        if not self._store.exists(path):
            raise TagNotFoundError(f"Ref not found error: tag {name} does not exist", table=self._store.uri)
        try:
            content = json.loads(self._store.read_bytes(path))
            int(content["version"])
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptFileError(f"malformed tag file: {exc}", table=self._store.uri, path=path) from exc
        return content

    def list(self) -> dict[str, dict[str, Any]]:
        """``{name: {"branch", "version", "created_at", "updated_at", "manifest_size", "metadata"}}``
        like pylance (times as UTC datetimes, None when the tag file has none)."""
        result: dict[str, dict[str, Any]] = {}
        for info in self._store.list_dir(TAGS_DIR):
            if not info.base_name.endswith(".json"):
                continue
            name = info.base_name[: -len(".json")]
            content = self._read(name)
            result[name] = {
                "branch": content.get("branch"),
                "version": int(content["version"]),
                "created_at": _parse_time(content.get("createdAt")),
                "updated_at": _parse_time(content.get("updatedAt")),
                "manifest_size": content.get("manifestSize"),
                "metadata": content.get("metadata") or {},
            }
        return result

    def list_ordered(self, order: str | None = None) -> builtins.list[tuple[str, dict[str, Any]]]:
        """pylance's ``tags.list_ordered``: ``(name, info)`` pairs by version, newest first
        (``order="desc"``, the default) or oldest first (``"asc"``); tags of one version by name."""
        if order is None:
            order = "desc"
        if order not in ("asc", "desc"):
            raise TagError(f"Invalid sort order {order!r}. Valid values are: asc, desc")
        tags = sorted(self.list().items())  # by name, kept among tags of the same version
        return sorted(tags, key=lambda item: item[1]["version"], reverse=order == "desc")

    def get_version(self, tag: str) -> int:
        """The version ``tag`` names (:class:`TagError`, a ValueError, when there is no such tag)."""
        return int(self._read(tag)["version"])

    def _manifest_size(self, version: int) -> int:
        listing = list_versions(self._store)
        if version not in listing.versions:
            raise VersionNotFoundError(f"cannot tag version {version}: it does not exist", table=self._store.uri)
        return self._store.size(listing.versions[version])

    def create(self, tag: str, version: int) -> None:
        path = self._path(tag)
        size = self._manifest_size(int(version))
        now = _now()
        body: dict[str, Any] = {
            "branch": None,
            "version": int(version),
            "createdAt": now,
            "updatedAt": now,
            "manifestSize": size,
            "metadata": {},
        }
        if not self._store.put_if_not_exists(path, json.dumps(body, indent=2).encode()):
            raise TagError(f"tag {tag!r} already exists", table=self._store.uri)

    def update(self, tag: str, version: int) -> None:
        content = self._read(tag)
        content["version"] = int(version)
        content["manifestSize"] = self._manifest_size(int(version))
        content["updatedAt"] = _now()
        self._store.replace_bytes(self._path(tag), json.dumps(content, indent=2).encode())

    def delete(self, tag: str) -> None:
        path = self._path(tag)
        if not self._store.exists(path):
            raise TagNotFoundError(f"Ref not found error: tag {tag} does not exist", table=self._store.uri)
        self._store.delete(path)

    def replace_metadata(self, tag: str, metadata: dict[str, str]) -> None:
        """Replace the whole metadata map of ``tag`` (pylance's ``replace_metadata``): its version
        and ``updated_at`` stay as they are."""
        bad = [repr(v) for pair in metadata.items() for v in pair if not isinstance(v, str)]
        if bad:
            raise ArgumentTypeError(f"tag metadata keys and values must be strings, got {bad[0]}",
                                    table=self._store.uri)
        content = self._read(tag)
        content["metadata"] = dict(metadata)
        self._store.replace_bytes(self._path(tag), json.dumps(content, indent=2).encode())
