"""A table-rooted view of a ``pyarrow.fs`` filesystem: local paths or S3.

All table code addresses files by paths relative to the table root (``_versions/3.manifest``,
``data/abc.lance``). This layer resolves them against the root, refuses paths that would leave
it, and offers the one primitive a commit protocol needs: an atomic put-if-not-exists (a hard
link locally, a conditional PUT on S3). Object stores have no directories: listings are prefix
listings, nothing creates directory objects, and a replaced file is one whole-object PUT.
"""

from __future__ import annotations

import os
import posixpath
import uuid
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.fs as pafs

from lance_format.errors import (
    CorruptFileError,
    InvalidInputError,
    PathEscapeError,
    UnsupportedFeatureError,
)
from lance_format.io.storage_options import normalize_storage_options, s3_config


SUPPORTED_SCHEMES = ("local paths", "file://", "s3://")


def _open_uri(uri: str | os.PathLike[str], options: dict[str, str]) -> tuple[pafs.FileSystem, str, str, Any]:
    """Return (filesystem, root path inside it, display uri, S3 object client or None)."""
    text = os.fspath(uri)
    parsed = urlparse(text)
    if parsed.scheme in ("", "file") or (len(parsed.scheme) == 1 and os.name == "nt"):
        # Like Lance, storage options do not apply to local tables.
        local = parsed.path if parsed.scheme == "file" else text
        root = os.path.abspath(os.path.expanduser(local)).rstrip("/") or "/"
        return pafs.LocalFileSystem(), root, root, None
    if parsed.scheme == "s3":
        from lance_format.io.s3 import S3Objects, resolve_region, s3_filesystem

        bucket = parsed.netloc
        if not bucket or parsed.query or parsed.fragment:
            raise InvalidInputError("an S3 table URI looks like s3://bucket/path/to/table", table=text)
        prefix = parsed.path.strip("/")
        if prefix:
            prefix = posixpath.normpath(prefix)
            if prefix == ".." or prefix.startswith("../"):
                raise InvalidInputError("the table path leaves the bucket", table=text)
        root = f"{bucket}/{prefix}" if prefix and prefix != "." else bucket
        display = f"s3://{root}"
        config = resolve_region(s3_config(bucket, options, table=display))
        return s3_filesystem(config), root, display, S3Objects(config)
    raise UnsupportedFeatureError(
        f"URI scheme {parsed.scheme!r} is not supported (supported: {', '.join(SUPPORTED_SCHEMES)})", table=text
    )


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

    ``storage_options``: Lance's keys for the object store (see
    :mod:`lance_format.io.storage_options`); ignored for local paths, like Lance does.
    """

    def __init__(self, uri: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None) -> None:
        self._options = normalize_storage_options(storage_options, table=os.fspath(uri))
        self.filesystem, self.root, self.uri, self._s3 = _open_uri(uri, self._options)
        self._local = isinstance(self.filesystem, pafs.LocalFileSystem)

    @property
    def is_local(self) -> bool:
        return self._local

    @property
    def storage_options(self) -> dict[str, str]:
        """The options the store was opened with (normalized keys), to open it again elsewhere."""
        return dict(self._options)

    def __reduce__(self):
        # Spark ships stores to executors: re-open there rather than pickling live clients.
        return (ObjectStore, (self.uri, self._options))

    def __repr__(self) -> str:
        return f"ObjectStore({self.uri!r})"

    # -- paths -------------------------------------------------------------------------------
    def full_path(self, relative: str) -> str:
        return posixpath.join(self.root, check_relative_path(relative, table=self.uri))

    # -- reads -------------------------------------------------------------------------------
    def exists(self, relative: str) -> bool:
        info = self.filesystem.get_file_info(self.full_path(relative))
        return info.type != pafs.FileType.NotFound

    def size(self, relative: str) -> int:
        info = self.filesystem.get_file_info(self.full_path(relative))
        if info.type == pafs.FileType.NotFound:
            raise CorruptFileError("file is missing", table=self.uri, path=relative)
        return int(info.size)

    def open_input(self, relative: str) -> pa.NativeFile:
        try:
            return self.filesystem.open_input_file(self.full_path(relative))
        except FileNotFoundError as exc:
            raise CorruptFileError("file is missing", table=self.uri, path=relative) from exc

    def read_bytes(self, relative: str) -> bytes:
        with self.open_input(relative) as f:
            return f.read()

    def list_dir(self, relative: str) -> list[pafs.FileInfo]:
        """Files directly under a table-relative directory (empty when it does not exist)."""
        return self.list_files(relative, recursive=False)

    def list_files(self, relative: str, *, recursive: bool = True) -> list[pafs.FileInfo]:
        """Files under a table-relative directory (an object-store prefix), with size and mtime;
        ``relative_path`` turns their paths back into table-relative ones."""
        selector = pafs.FileSelector(self.full_path(relative), allow_not_found=True, recursive=recursive)
        return [i for i in self.filesystem.get_file_info(selector) if i.type == pafs.FileType.File]

    def relative_path(self, info: pafs.FileInfo) -> str:
        root = self.root.rstrip("/") + "/"
        return info.path[len(root):] if info.path.startswith(root) else info.path

    # -- writes ------------------------------------------------------------------------------
    def _make_parent(self, full: str) -> None:
        if self._local:  # object stores have no directories; creating "dir/" objects would litter
            self.filesystem.create_dir(posixpath.dirname(full), recursive=True)

    def open_output(self, relative: str) -> pa.NativeFile:
        full = self.full_path(relative)
        self._make_parent(full)
        return self.filesystem.open_output_stream(full)

    def write_bytes(self, relative: str, data: bytes) -> None:
        """Write a file whose name is unique (data, deletion and transaction files)."""
        with self.open_output(relative) as out:
            out.write(data)

    def replace_bytes(self, relative: str, data: bytes) -> None:
        """Atomically replace a small advisory file (version hint, tag): a rename locally, one
        whole-object PUT on an object store (readers see the old or the new object, never part)."""
        full = self.full_path(relative)
        if not self._local:
            with self.filesystem.open_output_stream(full) as out:
                out.write(data)
            return
        self._make_parent(full)
        tmp = f"{posixpath.dirname(full)}/.tmp_{posixpath.basename(full)}_{uuid.uuid4().hex}"
        with self.filesystem.open_output_stream(tmp) as out:
            out.write(data)
        self.filesystem.move(tmp, full)

    def put_if_not_exists(self, relative: str, data: bytes) -> bool:
        """Atomically create ``relative`` with ``data``; return False if it already exists.

        On a local filesystem the data goes to a staging file that is then hard-linked to the
        final name: ``link`` fails when the target exists, so two writers can never both win,
        and readers never see a partially written file. On S3 it is one PUT with
        ``If-None-Match: *`` (what official Lance does), which the store refuses when the key exists.
        """
        full = self.full_path(relative)
        if not self._local:
            return self._s3.put_if_absent(self._key(full), data, table=self.uri, path=relative)
        directory = posixpath.dirname(full)
        Path(directory).mkdir(parents=True, exist_ok=True)
        tmp = f"{directory}/.tmp_{posixpath.basename(full)}_{uuid.uuid4().hex}"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, full)
            return True
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)

    def _key(self, full: str) -> str:
        """The object key inside the bucket of a full S3 path (``bucket/key``)."""
        return full.split("/", 1)[1]

    def delete(self, relative: str, *, missing_ok: bool = True) -> None:
        full = self.full_path(relative)
        if not self._local and missing_ok and self._s3.delete(self._key(full)):
            return
        try:
            self.filesystem.delete_file(full)
        except FileNotFoundError:
            if not missing_ok:
                raise

    def delete_dir_contents(self) -> None:
        self.filesystem.delete_dir_contents(self.root, missing_dir_ok=True)


def object_store_for(
    uri: str | os.PathLike[str] | ObjectStore, storage_options: Mapping[str, Any] | None = None
) -> ObjectStore:
    """The store of ``uri`` (an already open store is reused as it is)."""
    if isinstance(uri, ObjectStore):
        if storage_options and normalize_storage_options(storage_options) != uri.storage_options:
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
