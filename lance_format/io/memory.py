"""``memory://name/path``: tables in this process's memory, like pylance's ``memory://``.

Objects live in per-name stores shared by every ``memory://name...`` URI and thread, guarded by
a lock; the commit's put-if-absent is a check-and-set under that lock. Other processes (Spark's
Python workers) do not see them. Meant for tests and scratch tables; nothing is persisted.

As in pylance, ``memory://`` without a name is a new empty store each time it is opened (only
the dataset written there reaches it), and creating a table (``mode="create"``) at a name that
already holds one starts that name over with an empty store: datasets opened before keep the
store they read.
"""

from __future__ import annotations

import posixpath
import threading
from datetime import UTC, datetime
from urllib.parse import ParseResult

from lance_format.errors import InvalidInputError
from lance_format.io.backend import BlobBackend, ObjectInfo
from lance_format.io.storage_options import OptionSpec

_Objects = dict[str, tuple[bytes, datetime]]
_STORES: dict[str, _Objects] = {}  # name -> the objects its URIs open now
_LOCK = threading.Lock()
_ANONYMOUS = "memory"  # the root of a store opened as plain memory://

MEMORY_OPTIONS = OptionSpec(store="memory", scheme="memory://", aliases={})


class MemoryBackend(BlobBackend):
    name = "memory"
    atomic_put = "check-and-set under a process-wide lock"
    process_local = True

    def __init__(self, uri: str, root: str, name: str | None) -> None:
        self.uri, self.root = uri, root
        self._name = name  # None: an anonymous store, reachable only through this backend
        if name is None:
            self._objects: _Objects = {}
        else:
            with _LOCK:
                self._objects = _STORES.setdefault(name, {})

    @classmethod
    def open(cls, uri: str, parsed: ParseResult, options: dict[str, str]) -> MemoryBackend:
        MEMORY_OPTIONS.resolve(options, table=uri)  # generic client keys are accepted and have no effect
        if not (parsed.netloc or parsed.path.strip("/")):
            return cls("memory://", _ANONYMOUS, None)
        root = posixpath.normpath(f"{parsed.netloc}/{parsed.path.strip('/')}".strip("/"))
        if not root or root == "." or root.startswith(".."):
            raise InvalidInputError("a memory table URI looks like memory://name", table=uri)
        return cls(f"memory://{root}", root, root.split("/")[0])

    def start_over(self) -> None:
        """Point this name at a new empty store (``mode="create"`` where a table exists)."""
        with _LOCK:
            self._objects = {}
            if self._name is not None:
                _STORES[self._name] = self._objects

    def head(self, path: str) -> ObjectInfo | None:
        entry = self._objects.get(path)
        return None if entry is None else ObjectInfo(path, len(entry[0]), entry[1])

    def read_range(self, path: str, start: int, length: int) -> bytes:
        entry = self._objects.get(path)
        if entry is None:
            raise FileNotFoundError(path)
        return entry[0][start:start + length]

    def list_objects(self, prefix: str) -> list[ObjectInfo]:
        with _LOCK:
            items = [(p, e) for p, e in self._objects.items() if p.startswith(prefix)]
        return [ObjectInfo(p, len(data), mtime) for p, (data, mtime) in sorted(items)]

    def write(self, path: str, data: bytes) -> None:
        with _LOCK:
            self._objects[path] = (bytes(data), datetime.now(UTC))

    def put_if_absent(self, path: str, data: bytes, *, relative: str) -> bool:
        with _LOCK:
            if path in self._objects:
                return False
            self._objects[path] = (bytes(data), datetime.now(UTC))
            return True

    def delete(self, path: str) -> None:
        with _LOCK:
            self._objects.pop(path, None)


__all__ = ["MemoryBackend"]
