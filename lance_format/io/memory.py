"""``memory://name/path``: tables in this process's memory, like pylance's ``memory://``.

One store per process, shared by every ``memory://`` URI and thread, guarded by a lock; the
commit's put-if-absent is a check-and-set under that lock. Other processes (Spark's Python
workers) do not see it. Meant for tests and scratch tables; nothing is persisted.
"""

from __future__ import annotations

import posixpath
import threading
from datetime import datetime, timezone
from urllib.parse import ParseResult

from lance_format.errors import InvalidInputError
from lance_format.io.backend import BlobBackend, ObjectInfo
from lance_format.io.storage_options import OptionSpec

_OBJECTS: dict[str, tuple[bytes, datetime]] = {}
_LOCK = threading.Lock()

MEMORY_OPTIONS = OptionSpec(store="memory", scheme="memory://", aliases={})


class MemoryBackend(BlobBackend):
    name = "memory"
    atomic_put = "check-and-set under a process-wide lock"
    process_local = True

    def __init__(self, uri: str, root: str) -> None:
        self.uri, self.root = uri, root

    @classmethod
    def open(cls, uri: str, parsed: ParseResult, options: dict[str, str]) -> "MemoryBackend":
        MEMORY_OPTIONS.resolve(options, table=uri)  # generic client keys are accepted and have no effect
        root = posixpath.normpath(f"{parsed.netloc}/{parsed.path.strip('/')}".strip("/")) \
            if (parsed.netloc or parsed.path.strip("/")) else ""
        if not root or root == "." or root.startswith(".."):
            raise InvalidInputError("a memory table URI looks like memory://name", table=uri)
        return cls(f"memory://{root}", root)

    def head(self, path: str) -> ObjectInfo | None:
        entry = _OBJECTS.get(path)
        return None if entry is None else ObjectInfo(path, len(entry[0]), entry[1])

    def read_range(self, path: str, start: int, length: int) -> bytes:
        entry = _OBJECTS.get(path)
        if entry is None:
            raise FileNotFoundError(path)
        return entry[0][start:start + length]

    def list_objects(self, prefix: str) -> list[ObjectInfo]:
        with _LOCK:
            items = [(p, e) for p, e in _OBJECTS.items() if p.startswith(prefix)]
        return [ObjectInfo(p, len(data), mtime) for p, (data, mtime) in sorted(items)]

    def write(self, path: str, data: bytes) -> None:
        with _LOCK:
            _OBJECTS[path] = (bytes(data), datetime.now(timezone.utc))

    def put_if_absent(self, path: str, data: bytes, *, relative: str) -> bool:
        with _LOCK:
            if path in _OBJECTS:
                return False
            _OBJECTS[path] = (bytes(data), datetime.now(timezone.utc))
            return True

    def delete(self, path: str) -> None:
        with _LOCK:
            _OBJECTS.pop(path, None)


__all__ = ["MemoryBackend"]
