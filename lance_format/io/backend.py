"""The storage-backend interface and the registry that picks a backend by URI scheme.

A backend owns one table root on one store. It offers a ``pyarrow.fs`` filesystem for
streaming reads and writes (native for local paths and S3; for the others an adapter over the
backend's own primitives, :class:`BlobBackend`), and the object operations a table needs:
ranged reads, whole-object writes, listing a prefix, deletes, and the commit primitive, an
atomic put-if-absent. Each backend names how that put is atomic (``atomic_put``), because a
store without one cannot hold a Lance table safely.

Backends register by scheme in :data:`BACKENDS` and are imported on first use, so an optional
client library (boto3, google-cloud-storage, azure-storage-blob) is needed only for its store.
"""

from __future__ import annotations

import importlib
import io
import os
import random
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any, ClassVar, TypeVar
from urllib.parse import ParseResult, urlparse

import pyarrow as pa
import pyarrow.fs as pafs

from lance_format.errors import InvalidInputError, LanceError, StorageThrottledError, UnsupportedFeatureError
from lance_format.io.ranges import ReadPolicy, read_ranges

T = TypeVar("T")

# scheme -> "module:class"; imported lazily (optional client libraries).
BACKENDS: dict[str, str] = {
    "": "lance_format.io.local:LocalBackend",
    "file": "lance_format.io.local:LocalBackend",
    "s3": "lance_format.io.s3:S3Backend",
    "memory": "lance_format.io.memory:MemoryBackend",
    "gs": "lance_format.io.gcs:GcsBackend",
    "az": "lance_format.io.azure:AzureBackend",
    "abfss": "lance_format.io.azure:AzureBackend",
}
SUPPORTED_SCHEMES = ("local paths",) + tuple(f"{scheme}://" for scheme in BACKENDS if scheme)

DEFAULT_MAX_RETRIES = 10  # object_store's default for throttled and failed requests
_BACKOFF_BASE = 0.05
_BACKOFF_CAP = 5.0


@dataclass(frozen=True)
class ObjectInfo:
    """One object under a listed prefix (``path`` in the backend's filesystem namespace)."""

    path: str
    size: int
    mtime: datetime | None = None


class StorageBackend(ABC):
    """One table root on one store. Paths given to the methods are full filesystem paths
    (``root`` joined with a checked table-relative path)."""

    name: ClassVar[str]  # "local", "s3", "gcs", "azure", "memory"
    atomic_put: ClassVar[str]  # how put_if_absent is atomic, for docs and errors
    has_directories: ClassVar[bool] = False  # parents must exist before files are created
    writes_version_hint: ClassVar[bool] = False  # pylance writes the hint file only on local disks
    process_local: ClassVar[bool] = False  # other processes (Spark workers) cannot reach the store
    read_policy: ClassVar[ReadPolicy] = ReadPolicy()  # how batched ranged reads coalesce and run

    uri: str  # the table URI, for messages
    root: str  # the table root inside ``filesystem``

    @classmethod
    @abstractmethod
    def open(cls, uri: str, parsed: ParseResult, options: dict[str, str]) -> StorageBackend:
        """Validate ``options`` (normalized keys) for this store and open the table root ``uri``."""

    @property
    @abstractmethod
    def filesystem(self) -> pafs.FileSystem: ...

    # -- object operations (defaults: through the filesystem) ----------------------------------
    def read_range(self, path: str, start: int, length: int) -> bytes:
        with self.filesystem.open_input_file(path) as f:
            return f.read_at(length, start)

    def read_ranges(self, path: str, ranges: Sequence[tuple[int, int]], *,
                    file: pa.NativeFile | None = None) -> list[pa.Buffer]:
        """The bytes of each ``(offset, length)`` range of ``path``, coalesced and read in parallel
        (:mod:`lance_format.io.ranges`); ``file``: the object already open (saves a HEAD)."""
        if file is not None:
            return read_ranges(lambda offset, length: file.read_at(length, offset), ranges, self.read_policy,
                               path=path)
        with self.filesystem.open_input_file(path) as f:
            return read_ranges(lambda offset, length: f.read_at(length, offset), ranges, self.read_policy,
                               path=path)

    def read_all(self, path: str) -> bytes:
        """The whole object (FileNotFoundError when it is absent)."""
        with self.filesystem.open_input_file(path) as f:
            return f.read()

    def size(self, path: str) -> int | None:
        info = self.filesystem.get_file_info(path)
        return None if info.type == pafs.FileType.NotFound else int(info.size or 0)

    def list_prefix(self, path: str, *, recursive: bool = True) -> list[pafs.FileInfo]:
        selector = pafs.FileSelector(path, allow_not_found=True, recursive=recursive)
        return [i for i in self.filesystem.get_file_info(selector) if i.type == pafs.FileType.File]

    def list_sorted(self, path: str) -> Iterator[pafs.FileInfo]:
        """Files directly under ``path`` in lexical order of their names. Stores that list in that
        order page by page (S3) yield lazily, so a caller wanting the first names stops early;
        the default lists everything and sorts."""
        yield from sorted(self.list_prefix(path, recursive=False), key=lambda info: info.path)

    def write(self, path: str, data: bytes) -> None:
        if self.has_directories:
            self.filesystem.create_dir(os.path.dirname(path), recursive=True)
        with self.filesystem.open_output_stream(path) as out:
            out.write(data)

    def replace(self, path: str, data: bytes) -> None:
        """Replace a small advisory file atomically (one whole-object PUT on object stores)."""
        self.write(path, data)

    @abstractmethod
    def put_if_absent(self, path: str, data: bytes, *, relative: str) -> bool:
        """Atomically create ``path`` with ``data``; False when it already exists."""

    def delete(self, path: str) -> None:
        """Delete ``path``; an absent object is not an error."""
        try:
            self.filesystem.delete_file(path)
        except FileNotFoundError:
            pass

    def delete_many(self, paths: Sequence[str]) -> list[str]:
        """Delete ``paths`` (absent ones too); the paths that could not be deleted. Stores with a
        batch delete override this."""
        failed = []
        for path in paths:
            try:
                self.delete(path)
            except OSError:
                failed.append(path)
        return failed

    def delete_prefix(self) -> None:
        self.filesystem.delete_dir_contents(self.root, missing_dir_ok=True)

    def use_credential_provider(self, provider: Callable[[], Mapping[str, Any]]) -> None:
        """Take credentials from ``provider`` (called again when they expire); S3 only so far."""
        raise UnsupportedFeatureError(f"the {self.name} store does not take a credential_provider", table=self.uri)

    def refresh_credentials(self) -> bool:
        """After refused credentials: True when a provider gave new ones (worth one more try)."""
        return False

    def local_path(self, path: str) -> str | None:
        """A path the OS can open (memory-mapped reads), or None."""
        return None

    def translate_error(self, exc: OSError, what: str) -> Exception | None:
        """A typed error for a failed filesystem call (refused credentials, throttling), or None
        to let ``exc`` through. SDK-backed stores translate inside their primitives already."""
        return None


def open_backend(uri: str, options: dict[str, str]) -> StorageBackend:
    parsed = urlparse(uri)
    scheme = parsed.scheme.lower()
    if len(scheme) == 1 and os.name == "nt":  # a drive letter
        scheme = ""
    target = BACKENDS.get(scheme)
    if target is None:
        raise UnsupportedFeatureError(
            f"URI scheme {parsed.scheme!r} is not supported (supported: {', '.join(SUPPORTED_SCHEMES)})", table=uri)
    module, _, name = target.partition(":")
    backend_class: type[StorageBackend] = getattr(importlib.import_module(module), name)
    return backend_class.open(uri, parsed, options)


def missing_extra(exc: ImportError, scheme: str, package: str, extra: str, requirement: str) -> UnsupportedFeatureError:
    """The install hint for a store whose SDK cannot be imported. Any ImportError counts: a partly
    installed extra misses one of the SDK's own dependencies (google.api_core, azure.core)."""
    return UnsupportedFeatureError(
        f"{scheme} tables need {package} and its dependencies ({exc.name or exc} is missing): "
        f"pip install 'lance-assets[{extra}]' ({requirement})")


def split_bucket_uri(uri: str, parsed: ParseResult, example: str) -> tuple[str, str]:
    """(bucket, normalized key prefix) of ``scheme://bucket/prefix``; refuses prefixes leaving the bucket."""
    import posixpath


    bucket = parsed.netloc
    if not bucket or parsed.query or parsed.fragment:
        raise InvalidInputError(f"a table URI looks like {example}", table=uri)
    prefix = parsed.path.strip("/")
    if prefix:
        prefix = posixpath.normpath(prefix)
        if prefix == ".." or prefix.startswith("../"):
            raise InvalidInputError("the table path leaves the bucket", table=uri)
        if prefix == ".":
            prefix = ""
    return bucket, prefix


# -- bounded retries --------------------------------------------------------------------------
def backoff_delay(attempt: int) -> float:
    """Full-jitter exponential backoff."""
    return random.uniform(0, min(_BACKOFF_CAP, _BACKOFF_BASE * (2 ** attempt)))


def with_retries(call: Callable[[], T], *, is_throttled: Callable[[BaseException], bool], max_retries: int,
                 store: str, table: str, what: str, sleep: Callable[[float], None] = time.sleep) -> T:
    """Run ``call``; retry it with backoff while the store throttles (HTTP 429/503), at most
    ``max_retries`` times, then raise :class:`StorageThrottledError`."""
    for attempt in range(max_retries + 1):
        try:
            return call()
        except LanceError:
            raise
        except Exception as exc:  # the SDK's own error types
            if not is_throttled(exc):
                raise
            if attempt == max_retries:
                raise StorageThrottledError(
                    f"the {store} store kept throttling {what} (HTTP 429/503) after {max_retries} retries",
                    table=table) from exc
            sleep(backoff_delay(attempt))
    raise AssertionError("unreachable")


def list_in_pages(fetch_page: Callable[[str | None, int], tuple[list[pafs.FileInfo], str | None]], *,
                  first_page: int, page: int) -> Iterator[pafs.FileInfo]:
    """A listing fetched a page at a time: ``fetch_page(token, page_size)`` returns one page and the
    token of the next (None after the last). The first request is small because callers often
    want only the first names (the newest V2 manifests); later ones ask for full pages."""
    token: str | None = None
    page_size = first_page
    while True:
        infos, token = fetch_page(token, page_size)
        yield from infos
        if not token:
            return
        page_size = page


# -- SDK-backed stores --------------------------------------------------------------------------
class BlobBackend(StorageBackend):
    """A store reached through a client SDK: implements the object primitives, and gets a
    ``pyarrow.fs`` filesystem over them. Paths are ``bucket/key`` (or ``container/key``)."""

    @abstractmethod
    def head(self, path: str) -> ObjectInfo | None: ...

    @abstractmethod
    def read_range(self, path: str, start: int, length: int) -> bytes: ...

    @abstractmethod
    def list_objects(self, prefix: str) -> list[ObjectInfo]:
        """Every object whose path starts with ``prefix`` (a ``dir/`` prefix, or a root path)."""

    @abstractmethod
    def write(self, path: str, data: bytes) -> None: ...

    def write_file(self, path: str, file: IO[bytes], size: int) -> None:
        """Upload the contents of a spooled file (large data files); default: read it whole."""
        self.write(path, file.read())

    @abstractmethod
    def delete(self, path: str) -> None: ...

    @property
    def filesystem(self) -> pafs.FileSystem:
        fs = self.__dict__.get("_filesystem")
        if fs is None:
            fs = self.__dict__["_filesystem"] = pafs.PyFileSystem(_BlobHandler(self))
        return fs

    def size(self, path: str) -> int | None:
        info = self.head(path)
        return None if info is None else info.size

    def read_ranges(self, path: str, ranges: Sequence[tuple[int, int]], *,
                    file: pa.NativeFile | None = None) -> list[pa.Buffer]:
        # straight to the SDK: a Python file object would serialize the parallel reads
        return read_ranges(lambda offset, length: self.read_range(path, offset, length), ranges, self.read_policy,
                           path=path)

    def list_prefix(self, path: str, *, recursive: bool = True) -> list[pafs.FileInfo]:
        base = path.rstrip("/") + "/"
        infos = []
        for obj in self.list_objects(base):
            if not recursive and "/" in obj.path[len(base):]:
                continue
            infos.append(pafs.FileInfo(obj.path, pafs.FileType.File, size=obj.size, mtime=obj.mtime))
        return infos

    def delete_prefix(self) -> None:
        for obj in self.list_objects(self.root.rstrip("/") + "/"):
            self.delete(obj.path)


class _RangeFile(io.RawIOBase):
    """A seekable read-only file over ranged GETs."""

    def __init__(self, backend: BlobBackend, path: str, size: int) -> None:
        self._backend, self._path, self._size, self._pos = backend, path, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def size(self) -> int:
        return self._size

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def read(self, n: int = -1) -> bytes:
        end = self._size if n is None or n < 0 else min(self._size, self._pos + n)
        if end <= self._pos:
            return b""
        data = self._backend.read_range(self._path, self._pos, end - self._pos)
        self._pos += len(data)
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class _UploadFile(io.RawIOBase):
    """A write-only file spooled in memory (then on disk) and uploaded as one object on close;
    an upload error surfaces from ``close``, which every writer checks."""

    _SPOOL_BYTES = 64 << 20

    def __init__(self, backend: BlobBackend, path: str) -> None:
        self._backend, self._path = backend, path
        self._spool = tempfile.SpooledTemporaryFile(max_size=self._SPOOL_BYTES)
        self._size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        n = self._spool.write(data)
        self._size += n
        return n

    def tell(self) -> int:
        return self._size

    def close(self) -> None:
        if self.closed:
            return
        try:
            self._spool.seek(0)
            self._backend.write_file(self._path, self._spool, self._size)
        finally:
            self._spool.close()
            super().close()


class _BlobHandler(pafs.FileSystemHandler):
    """``pyarrow.fs`` over a :class:`BlobBackend` (no directories: a prefix with objects is one)."""

    def __init__(self, backend: BlobBackend) -> None:
        self._backend = backend

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _BlobHandler) and other._backend is self._backend

    def __ne__(self, other: object) -> bool:
        return not self == other

    def get_type_name(self) -> str:
        return f"lance-{self._backend.name}"

    def normalize_path(self, path: str) -> str:
        return path

    def equals(self, other: Any) -> bool:
        return self == other

    def _info(self, path: str) -> pafs.FileInfo:
        obj = self._backend.head(path) if "/" in path.strip("/") else None  # a bare bucket is no object
        if obj is not None:
            return pafs.FileInfo(path, pafs.FileType.File, size=obj.size, mtime=obj.mtime)
        if path and self._backend.list_objects(path.rstrip("/") + "/"):
            return pafs.FileInfo(path, pafs.FileType.Directory)
        return pafs.FileInfo(path, pafs.FileType.NotFound)

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return [self._info(p) for p in paths]

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        base = selector.base_dir.rstrip("/") + "/"
        infos: list[pafs.FileInfo] = []
        dirs: set[str] = set()
        for obj in self._backend.list_objects(base):
            rest = obj.path[len(base):]
            parts = rest.split("/")
            for i in range(1, len(parts) if selector.recursive else min(len(parts), 2)):
                dirs.add(base + "/".join(parts[:i]))
            if selector.recursive or len(parts) == 1:
                infos.append(pafs.FileInfo(obj.path, pafs.FileType.File, size=obj.size, mtime=obj.mtime))
        if not infos and not dirs and not selector.allow_not_found:
            raise FileNotFoundError(selector.base_dir)
        return infos + [pafs.FileInfo(d, pafs.FileType.Directory) for d in sorted(dirs)]

    def create_dir(self, path: str, recursive: bool) -> None:
        pass  # object stores have no directories

    def delete_dir(self, path: str) -> None:
        self.delete_dir_contents(path, missing_dir_ok=True)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        for obj in self._backend.list_objects(path.rstrip("/") + "/"):
            self._backend.delete(obj.path)

    def delete_root_dir_contents(self) -> None:
        raise UnsupportedFeatureError("deleting a whole bucket is not supported")

    def delete_file(self, path: str) -> None:
        if self._backend.head(path) is None:
            raise FileNotFoundError(path)
        self._backend.delete(path)

    def move(self, src: str, dest: str) -> None:
        self.copy_file(src, dest)
        self._backend.delete(src)

    def copy_file(self, src: str, dest: str) -> None:
        info = self._backend.head(src)
        if info is None:
            raise FileNotFoundError(src)
        self._backend.write(dest, self._backend.read_range(src, 0, info.size))

    def open_input_stream(self, path: str) -> Any:
        return self.open_input_file(path)

    def open_input_file(self, path: str) -> Any:
        info = self._backend.head(path)
        if info is None:
            raise FileNotFoundError(path)
        return _python_file(_RangeFile(self._backend, path, info.size), "r")

    def open_output_stream(self, path: str, metadata: Any = None) -> Any:
        return _python_file(_UploadFile(self._backend, path), "w")

    def open_append_stream(self, path: str, metadata: Any = None) -> Any:
        raise UnsupportedFeatureError("object stores cannot append to an object")


def _python_file(raw: io.RawIOBase, mode: str) -> Any:
    import pyarrow as pa

    return pa.PythonFile(raw, mode=mode)


__all__ = [
    "BACKENDS", "BlobBackend", "DEFAULT_MAX_RETRIES", "ObjectInfo", "StorageBackend", "SUPPORTED_SCHEMES",
    "backoff_delay", "open_backend", "split_bucket_uri", "with_retries",
]
