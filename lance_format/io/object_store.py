"""A table-rooted view of one storage backend (local paths, S3, GCS, Azure, memory).

All table code addresses files by paths relative to the table root (``_versions/3.manifest``,
``data/abc.lance``). This layer resolves them against the root, refuses paths that would leave
it, and hands the work to the backend the URI's scheme selects (:mod:`lance_format.io.backend`),
including the one primitive a commit protocol needs: an atomic put-if-not-exists. Object
stores have no directories: listings are prefix listings, nothing creates directory objects,
and a replaced file is one whole-object PUT.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.fs as pafs

from lance_format.errors import CorruptFileError, InvalidInputError, LanceError, PathEscapeError, StorageAccessError
from lance_format.io.backend import SUPPORTED_SCHEMES, StorageBackend, open_backend  # noqa: F401 (re-export)
from lance_format.io.counters import IOCounters, count_reads
from lance_format.io.credentials import CREDENTIAL_PROVIDER, CREDENTIAL_PROVIDER_ARGS, split_credential_provider  # noqa: F401 (re-export)
from lance_format.io.manifest_store import ExternalManifests, open_external_manifests
from lance_format.io.options_accessor import StorageOptionsAccessor
from lance_format.io.storage_options import normalize_storage_options

T = TypeVar("T")


def check_relative_path(relative: str, *, table: str | None = None) -> str:
    """Normalize a table-relative path, refusing anything that escapes the table root."""
    if not relative or "\x00" in relative:
        raise PathEscapeError(f"invalid path {relative!r}", table=table, path=relative)
    if relative.startswith("/") or relative.startswith("\\") or ":" in relative.split("/")[0]:
        raise PathEscapeError("absolute path is not allowed inside a table", table=table, path=relative)
    normalized = posixpath.normpath(relative.replace("\\", "/"))
    if normalized == ".." or normalized.startswith("../") or normalized == ".":
        raise PathEscapeError("path escapes the table root", table=table, path=relative)
    return normalized


class ObjectStore:
    """Files of one table, addressed relative to its root.

    ``storage_options``: Lance's keys for the object store, validated by the backend (see
    :mod:`lance_format.io.storage_options`); ignored for local paths, like Lance does. One
    more key takes a callable: ``credential_provider`` returns credentials as storage options
    (``aws_access_key_id``, ``aws_secret_access_key``, optionally ``aws_session_token`` and
    ``expires_at_millis``); it is called when the store opens, again a minute before the
    credentials expire, and again when the store refuses them (then the refused request is
    retried once with the new credentials). Where options must be strings (Spark task options,
    Dagster config), ``credential_provider`` names a factory of the provider instead,
    ``"package.module:factory"``, with its arguments in ``credential_provider_args``; each
    process that opens the store makes the provider itself (:mod:`lance_format.io.credentials`).
    """

    def __init__(self, uri: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None) -> None:
        options, self._credential_provider, named = split_credential_provider(storage_options,
                                                                              table=os.fspath(uri))
        store_options = normalize_storage_options(options, table=os.fspath(uri))
        self._options = {**store_options, **named}  # a named provider travels with the options
        self._provider_is_named = bool(named)
        # A manifest-store URI (s3+ddb://...) names the object store of the files and the
        # key-value store that coordinates commits (lance_format.io.manifest_store).
        # pylance's commit_lock: a callable of the version being committed returning a context
        # manager, held while that version's manifest is published (lance_format.table.commit)
        self.commit_lock: Callable[[int], Any] | None = None
        self.manifest_store: ExternalManifests | None = open_external_manifests(
            os.fspath(uri), store_options, self._credential_provider)
        target = self.manifest_store.target if self.manifest_store is not None else None
        self.backend: StorageBackend = open_backend(
            target.object_uri if target else os.fspath(uri), target.storage_options if target else store_options)
        if self._credential_provider is not None:
            self.backend.use_credential_provider(self._credential_provider)
        self.root: str = self.backend.root
        self.uri: str = os.fspath(uri) if target else self.backend.uri
        # this store's reads and writes (LanceDataset.io_stats_snapshot / io_stats_incremental)
        self.io_counters = IOCounters()

    @property
    def filesystem(self) -> pafs.FileSystem:
        """The backend's ``pyarrow.fs`` filesystem (a new one after refreshed credentials)."""
        return self.backend.filesystem

    @property
    def storage_options(self) -> dict[str, str]:
        """The options the store was opened with (normalized keys), to open it again elsewhere."""
        return dict(self._options)

    def options_accessor(self) -> StorageOptionsAccessor | None:
        """pylance's accessor of the options and credential provider the store was opened with
        (None when it had neither)."""
        static = {k: v for k, v in self._options.items() if k not in (CREDENTIAL_PROVIDER, CREDENTIAL_PROVIDER_ARGS)}
        if not static and self._credential_provider is None:
            return None
        return StorageOptionsAccessor(static, self._credential_provider)

    def _reopen_options(self) -> dict[str, Any]:
        options: dict[str, Any] = dict(self._options)
        if self._credential_provider is not None and not self._provider_is_named:
            options[CREDENTIAL_PROVIDER] = self._credential_provider
        return options

    def sibling(self, uri: str) -> ObjectStore:
        """Another table root (a branch, a base path) opened with this store's options and
        credential provider."""
        return object_store_for(uri, self._reopen_options())

    @property
    def writes_version_hint(self) -> bool:
        """Whether commits keep ``_latest_version_hint.json`` (like pylance: on local disks only)."""
        return self.backend.writes_version_hint

    def __reduce__(self) -> tuple[Any, ...]:
        # Spark ships stores to executors: re-open there rather than pickling live clients
        # (a named credential provider is made again there).
        return (ObjectStore, (self.uri, self._reopen_options()))

    def __repr__(self) -> str:
        return f"ObjectStore({self.uri!r})"

    # -- paths -------------------------------------------------------------------------------
    def full_path(self, relative: str) -> str:
        return posixpath.join(self.root, check_relative_path(relative, table=self.uri))

    def local_path(self, relative: str) -> str | None:
        """A path the OS can open (for memory-mapped reads), or None on object stores."""
        return self.backend.local_path(self.full_path(relative))

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """Typed errors for refused credentials and throttling from filesystem calls."""
        try:
            yield
        except (LanceError, FileNotFoundError):
            raise
        except OSError as exc:
            typed = self.backend.translate_error(exc, what)
            if typed is None:
                raise
            raise typed from exc

    def _run(self, what: str, call: Callable[[bool], T]) -> T:
        """``call(retried)`` with typed errors; refused credentials that a provider replaces are
        tried once more (``retried`` True: e.g. reopen files opened with the old ones)."""
        try:
            with self._errors(what):
                return call(False)
        except StorageAccessError:
            if not self.backend.refresh_credentials():
                raise
        with self._errors(what):
            return call(True)

    # -- reads -------------------------------------------------------------------------------
    def exists(self, relative: str) -> bool:
        full = self.full_path(relative)
        info = self._run(f"checking {relative!r}", lambda _: self.filesystem.get_file_info(full))
        return info.type != pafs.FileType.NotFound

    def size(self, relative: str) -> int:
        full = self.full_path(relative)
        size = self._run(f"reading the size of {relative!r}", lambda _: self.backend.size(full))
        if size is None:
            raise CorruptFileError("file is missing", table=self.uri, path=relative)
        return size

    def open_input(self, relative: str) -> pa.NativeFile:
        try:
            full = self.full_path(relative)
            return self._run(f"opening {relative!r}", lambda _: self.filesystem.open_input_file(full))
        except FileNotFoundError as exc:
            raise CorruptFileError("file is missing", table=self.uri, path=relative) from exc

    def read_ranges(self, relative: str, ranges: Sequence[tuple[int, int]], *,
                    file: pa.NativeFile | None = None) -> list[pa.Buffer]:
        """The bytes of each ``(offset, length)`` range of ``relative``, in order. On object stores
        nearby ranges are coalesced into one request and the requests run in parallel
        (:mod:`lance_format.io.ranges`); local files are sliced from a memory map. ``file``: the
        file already opened with :meth:`open_input`. A range past the end of the file raises
        :class:`CorruptFileError`."""
        try:
            full = self.full_path(relative)
            buffers = self._run(f"reading {relative!r}", lambda retried: self.backend.read_ranges(
                full, ranges, file=None if retried else file))
        except FileNotFoundError as exc:
            raise CorruptFileError("file is missing", table=self.uri, path=relative) from exc
        count_reads(sum(length for _, length in ranges), len(ranges), self.io_counters)
        return buffers

    def read_bytes(self, relative: str) -> bytes:
        full = self.full_path(relative)
        try:
            data = self._run(f"reading {relative!r}", lambda _: self.backend.read_all(full))
        except FileNotFoundError as exc:
            raise CorruptFileError("file is missing", table=self.uri, path=relative) from exc
        count_reads(len(data), 1, self.io_counters)
        return data

    def list_dir(self, relative: str) -> list[pafs.FileInfo]:
        """Files directly under a table-relative directory (empty when it does not exist)."""
        return self.list_files(relative, recursive=False)

    def list_files(self, relative: str, *, recursive: bool = True) -> list[pafs.FileInfo]:
        """Files under a table-relative directory (an object-store prefix), with size and mtime;
        ``relative_path`` turns their paths back into table-relative ones."""
        full = self.root if relative == "" else self.full_path(relative)  # "": the whole table
        return self._run(f"listing {relative!r}", lambda _: self.backend.list_prefix(full, recursive=recursive))

    def list_sorted(self, relative: str) -> Iterator[pafs.FileInfo]:
        """Files directly under a table-relative directory in lexical order of their names,
        listed lazily where the store pages its listings in that order (S3): stop iterating
        once the names you need are in."""
        full = self.full_path(relative)
        yielded = False
        try:
            with self._errors(f"listing {relative!r}"):
                for info in self.backend.list_sorted(full):
                    yielded = True
                    yield info
            return
        except StorageAccessError:
            if yielded or not self.backend.refresh_credentials():
                raise
        with self._errors(f"listing {relative!r}"):
            yield from self.backend.list_sorted(full)

    def relative_path(self, info: pafs.FileInfo) -> str:
        root = self.root.rstrip("/") + "/"
        return info.path[len(root):] if info.path.startswith(root) else info.path

    # -- writes ------------------------------------------------------------------------------
    def open_output(self, relative: str) -> pa.NativeFile:
        full = self.full_path(relative)
        with self._errors(f"writing {relative!r}"):
            if self.backend.has_directories:  # object stores have none; "dir/" objects would litter
                self.filesystem.create_dir(posixpath.dirname(full), recursive=True)
            return self.filesystem.open_output_stream(full)

    def write_bytes(self, relative: str, data: bytes) -> None:
        """Write a file whose name is unique (data, deletion and transaction files)."""
        full = self.full_path(relative)
        self._run(f"writing {relative!r}", lambda _: self.backend.write(full, data))
        self.io_counters.count_write(len(data))

    def replace_bytes(self, relative: str, data: bytes) -> None:
        """Atomically replace a small advisory file (version hint, tag): a rename locally, one
        whole-object PUT on an object store (readers see the old or the new object, never part)."""
        full = self.full_path(relative)
        self._run(f"writing {relative!r}", lambda _: self.backend.replace(full, data))
        self.io_counters.count_write(len(data))

    def put_if_not_exists(self, relative: str, data: bytes) -> bool:
        """Atomically create ``relative`` with ``data``; return False if it already exists.

        How depends on the backend (``backend.atomic_put``): a hard link of a staging file
        locally, a conditional PUT with ``If-None-Match: *`` on S3 and Azure, a create-only
        upload (``ifGenerationMatch=0``) on GCS, a locked check-and-set in memory.
        """
        full = self.full_path(relative)
        created = self._run(f"committing {relative!r}",
                            lambda _: self.backend.put_if_absent(full, data, relative=relative))
        self.io_counters.count_write(len(data))  # a refused conditional write is a request too
        return created

    def delete(self, relative: str, *, missing_ok: bool = True) -> None:
        full = self.full_path(relative)
        if not missing_ok and self.backend.size(full) is None:
            raise FileNotFoundError(full)
        self._run(f"deleting {relative!r}", lambda _: self.backend.delete(full))
        self.io_counters.count_write(0)  # a delete is a write request of no bytes (as pylance counts it)

    def delete_many(self, relatives: Sequence[str]) -> list[str]:
        """Delete files (absent ones too) in as few requests as the store allows (S3: 1000 keys
        per DeleteObjects request); the ones the store refused to delete. A failed request raises."""
        if not relatives:
            return []
        by_full = {self.full_path(relative): relative for relative in relatives}
        failed = self._run(f"deleting {len(by_full)} files", lambda _: self.backend.delete_many(list(by_full)))
        self.io_counters.count_write(0, len(by_full))
        return [by_full[path] for path in failed]

    def delete_dir_contents(self) -> None:
        self._run("deleting the table", lambda _: self.backend.delete_prefix())
        if self.manifest_store is not None:
            self.manifest_store.delete()


def object_store_for(
    uri: str | os.PathLike[str] | ObjectStore, storage_options: Mapping[str, Any] | None = None
) -> ObjectStore:
    """The store of ``uri`` (an already open store is reused as it is)."""
    if isinstance(uri, ObjectStore):
        options, provider, named = split_credential_provider(storage_options, table=uri.uri)
        if ((options or named) and {**normalize_storage_options(options), **named} != uri.storage_options) or \
                (provider is not None and provider is not uri._credential_provider):
            raise InvalidInputError("storage_options were given together with an already opened store that "
                                    "uses other options", table=uri.uri)
        return uri
    if not isinstance(uri, (str, os.PathLike)):
        raise InvalidInputError(f"a table URI must be a string or path, got {type(uri).__name__}")
    _check_uri_text(os.fspath(uri))
    return ObjectStore(uri, storage_options)


# POSIX file systems cap one path component at 255 bytes and a whole path at 4096.
_MAX_COMPONENT_BYTES, _MAX_URI_BYTES = 255, 4096


def _check_uri_text(uri: str) -> None:
    """Refuse URIs no store can hold, before any I/O turns them into an OS error."""
    shown = uri if len(uri) <= 80 else uri[:77] + "..."
    if "\0" in uri:
        raise InvalidInputError(f"a table URI must not contain a NUL character: {shown!r}")
    encoded = uri.encode("utf-8", "surrogateescape")
    longest = max((len(part) for part in encoded.split(b"/")), default=0)
    if len(encoded) > _MAX_URI_BYTES or longest > _MAX_COMPONENT_BYTES:
        raise InvalidInputError(
            f"a table URI is too long ({len(encoded)} bytes, longest name {longest} bytes; the limits are "
            f"{_MAX_URI_BYTES} and {_MAX_COMPONENT_BYTES}): {shown!r}"
        )
