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
from collections.abc import Callable
from typing import Any

from lance_format.errors import InvalidInputError
from lance_format.io import ObjectStore

DEFAULT_METADATA_CACHE_BYTES = 1024 * 1024 * 1024


class _ByteBoundedLRU:
    """A least-recently-used map whose values are counted in bytes and bounded by ``capacity``.

    A value larger than the whole capacity is not kept. Callers hold the session's lock.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.nbytes = 0
        self._entries: OrderedDict[tuple[str, str], tuple[Any, int]] = OrderedDict()

    def get(self, key: tuple[str, str]) -> tuple[bool, Any]:
        found = self._entries.get(key)
        if found is None:
            return False, None
        self._entries.move_to_end(key)
        return True, found[0]

    def put(self, key: tuple[str, str], value: Any, size: int) -> None:
        if key in self._entries or size > self.capacity:
            return
        self._entries[key] = (value, size)
        self.nbytes += size
        while self.nbytes > self.capacity:
            _, (_, evicted) = self._entries.popitem(last=False)
            self.nbytes -= evicted


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
        self._manifests = _ByteBoundedLRU(self._capacity)
        self._files = _ByteBoundedLRU(self._capacity)
        # a private session's account of its dataset's parsed manifest (it caches no manifest bytes)
        self._held_manifest_bytes = 0
        self._lock = threading.Lock()

    def read_manifest_bytes(self, store: ObjectStore, path: str) -> bytes:
        """The bytes of a committed manifest, from the cache or (then cached) from the store."""
        key = (store.uri, path)
        with self._lock:
            hit, data = self._manifests.get(key)
        if hit:
            return data
        data = store.read_bytes(path)
        with self._lock:
            self._manifests.put(key, data, len(data))
        return data

    def hold_parsed_manifest(self, nbytes: int, capacity: int | None) -> None:
        """A private session's account of the manifest its dataset keeps parsed: ``nbytes`` when
        that fits ``capacity`` (the dataset's ``metadata_cache_size_bytes``, 1 GiB if None)."""
        limit = DEFAULT_METADATA_CACHE_BYTES if capacity is None else capacity
        self._held_manifest_bytes = nbytes if nbytes <= limit else 0

    def file_metadata(self, key: tuple[str, str], load: Callable[[], Any], size_of: Callable[[Any], int]) -> Any:
        """A data file's decoded metadata (footer, column metadata), from the cache or (then
        cached, counted as ``size_of`` it in bytes) from ``load``: data files never change once written."""
        with self._lock:
            hit, value = self._files.get(key)
        if hit:
            return value
        value = load()
        size = size_of(value)
        with self._lock:
            self._files.put(key, value, size)
        return value

    @classmethod
    def private(cls) -> Session:
        """The session of a dataset opened without one: like pylance's, it caches the metadata
        of the data files its scans open (a second scan reads no footer), not manifests."""
        session = cls(metadata_cache_size_bytes=0)
        session._files.capacity = DEFAULT_METADATA_CACHE_BYTES
        return session

    def size_bytes(self) -> int:
        """Bytes held by the session's caches."""
        return self._manifests.nbytes + self._held_manifest_bytes + self._files.nbytes

    def index_cache_size_bytes(self) -> int:
        """Bytes of cached indices (always 0: this engine reads no indices)."""
        return 0

    def is_same_as(self, other: Session) -> bool:
        """Whether ``other`` is this very session (datasets opened with it share its cache)."""
        return other is self

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled (with a dataset sent to a worker): the same capacity, an empty cache
        return (Session, (None, self._capacity))

    def __repr__(self) -> str:
        return f"Session(index_cache_size_bytes=0, metadata_cache_size_bytes={self.size_bytes()})"


__all__ = ["Session", "DEFAULT_METADATA_CACHE_BYTES"]
