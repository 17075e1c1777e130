"""pylance's ``lance.Session``: the cache datasets opened with the same session share.

Here it caches the bytes of manifest files and the decoded metadata of data files, which never
change once written, so opening or checking out a version, or scanning a file, that a dataset of
the session already read costs no object-store read for them.
The cache is least-recently-used and bounded by ``metadata_cache_size_bytes`` (pylance's
default, 1 GiB). A dataset opened without a session gets a private one that keeps no
manifest bytes (the dataset keeps its parsed manifest anyway, and the private session counts
that manifest's size as what it holds, when it fits ``metadata_cache_size_bytes``) but caches
the metadata of the data files its scans open. This engine has no indices to cache:
``index_cache_size_bytes()`` is 0.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable

from lance_format.errors import InvalidInputError
from lance_format.io import ObjectStore

DEFAULT_METADATA_CACHE_BYTES = 1024 * 1024 * 1024


class Session:
    """A cache shared by the datasets opened with it (``dataset(uri, session=...)``)."""

    def __init__(self, index_cache_size_bytes: int | None = None, metadata_cache_size_bytes: int | None = None,
                 index_cache_backend: Any = None, metadata_cache_backend: Any = None,
                 store_registry: Any = None) -> None:
        if index_cache_size_bytes is not None and index_cache_backend is not None:
            raise InvalidInputError("index_cache_backend and index_cache_size_bytes are mutually exclusive")
        if metadata_cache_size_bytes is not None and metadata_cache_backend is not None:
            raise InvalidInputError("metadata_cache_backend and metadata_cache_size_bytes are mutually exclusive")
        for name, value in (("index_cache_size_bytes", index_cache_size_bytes),
                            ("metadata_cache_size_bytes", metadata_cache_size_bytes)):
            if value is not None and (not isinstance(value, int) or value < 0):
                raise InvalidInputError(f"{name} must be a non-negative int, got {value!r}")
        self._capacity = DEFAULT_METADATA_CACHE_BYTES if metadata_cache_size_bytes is None \
            else metadata_cache_size_bytes
        self._manifests: OrderedDict[tuple[str, str], bytes] = OrderedDict()
        self._file_capacity = self._capacity
        self._files: OrderedDict[tuple[str, str], tuple[Any, int]] = OrderedDict()
        self._file_bytes = 0
        self._size = 0
        self._lock = threading.Lock()

    def read_manifest_bytes(self, store: ObjectStore, path: str) -> bytes:
        """The bytes of a committed manifest, from the cache or (then cached) from the store."""
        key = (store.uri, path)
        with self._lock:
            data = self._manifests.get(key)
            if data is not None:
                self._manifests.move_to_end(key)
                return data
        data = store.read_bytes(path)
        with self._lock:
            if key not in self._manifests and len(data) <= self._capacity:
                self._manifests[key] = data
                self._size += len(data)
                while self._size > self._capacity:
                    _, evicted = self._manifests.popitem(last=False)
                    self._size -= len(evicted)
        return data

    def hold_parsed_manifest(self, nbytes: int, capacity: int | None) -> None:
        """A private session's account of the manifest its dataset keeps parsed: ``nbytes`` when
        that fits ``capacity`` (the dataset's ``metadata_cache_size_bytes``, 1 GiB if None)."""
        limit = DEFAULT_METADATA_CACHE_BYTES if capacity is None else capacity
        self._size = nbytes if nbytes <= limit else 0

    def file_metadata(self, key: tuple[str, str], load: Callable[[], Any], size_of: Callable[[Any], int]) -> Any:
        """A data file's decoded metadata (footer, column metadata), from the cache or (then
        cached, counted as ``size_of`` it in bytes) from ``load``: data files never change once written."""
        with self._lock:
            found = self._files.get(key)
            if found is not None:
                self._files.move_to_end(key)
                return found[0]
        value = load()
        size = size_of(value)
        with self._lock:
            if key not in self._files and size <= self._file_capacity:
                self._files[key] = (value, size)
                self._file_bytes += size
                while self._file_bytes > self._file_capacity:
                    _, (_, evicted) = self._files.popitem(last=False)
                    self._file_bytes -= evicted
        return value

    @classmethod
    def private(cls) -> "Session":
        """The session of a dataset opened without one: like pylance's, it caches the metadata
        of the data files its scans open (a second scan reads no footer), not manifests."""
        session = cls(metadata_cache_size_bytes=0)
        session._file_capacity = DEFAULT_METADATA_CACHE_BYTES
        return session

    def size_bytes(self) -> int:
        """Bytes held by the session's caches."""
        return self._size + self._file_bytes

    def index_cache_size_bytes(self) -> int:
        """Bytes of cached indices (always 0: this engine reads no indices)."""
        return 0

    def is_same_as(self, other: "Session") -> bool:
        """Whether ``other`` is this very session (datasets opened with it share its cache)."""
        return other is self

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled (with a dataset sent to a worker): the same capacity, an empty cache
        return (Session, (None, self._capacity))

    def __repr__(self) -> str:
        return f"Session(index_cache_size_bytes=0, metadata_cache_size_bytes={self.size_bytes()})"


__all__ = ["Session", "DEFAULT_METADATA_CACHE_BYTES"]
