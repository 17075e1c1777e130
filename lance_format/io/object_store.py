"""A table-rooted view of a ``pyarrow.fs`` filesystem.

All table code addresses files by paths relative to the table root (``_versions/3.manifest``,
``data/abc.lance``). This layer resolves them against the root, refuses paths that would leave
it, and offers the one primitive a commit protocol needs: an atomic put-if-not-exists.
"""

from __future__ import annotations

import os
import posixpath
import uuid
from pathlib import Path
from typing import Iterator
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.fs as pafs

from lance_format.errors import (
    CorruptFileError,
    InvalidInputError,
    PathEscapeError,
    UnsupportedFeatureError,
)


def _normalize_uri(uri: str | os.PathLike[str]) -> tuple[pafs.FileSystem, str, str]:
    """Return (filesystem, root path inside it, display uri)."""
    text = os.fspath(uri)
    parsed = urlparse(text)
    if parsed.scheme in ("", "file") or (len(parsed.scheme) == 1 and os.name == "nt"):
        local = parsed.path if parsed.scheme == "file" else text
        root = os.path.abspath(os.path.expanduser(local)).rstrip("/") or "/"
        return pafs.LocalFileSystem(), root, root
    # Object stores come later through the same interface; refuse clearly until then.
    raise UnsupportedFeatureError(f"URI scheme {parsed.scheme!r} is not supported yet", table=text)


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
    """Files of one table, addressed relative to its root."""

    def __init__(self, uri: str | os.PathLike[str]) -> None:
        self.filesystem, self.root, self.uri = _normalize_uri(uri)
        self._local = isinstance(self.filesystem, pafs.LocalFileSystem)

    # -- paths -------------------------------------------------------------------------------
    def full_path(self, relative: str) -> str:
        return posixpath.join(self.root, check_relative_path(relative, table=self.uri))

    # -- reads -------------------------------------------------------------------------------
    def exists(self, relative: str) -> bool:
        info = self.filesystem.get_file_info(self.full_path(relative))
        return info.type != pafs.FileType.NotFound

    def is_dir(self, relative: str = ".") -> bool:
        path = self.root if relative == "." else self.full_path(relative)
        return self.filesystem.get_file_info(path).type == pafs.FileType.Directory

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
        selector = pafs.FileSelector(self.full_path(relative), allow_not_found=True, recursive=False)
        return [i for i in self.filesystem.get_file_info(selector) if i.type == pafs.FileType.File]

    # -- writes ------------------------------------------------------------------------------
    def _make_parent(self, full: str) -> None:
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
        """Atomically replace a small advisory file (version hint, tag) via rename."""
        full = self.full_path(relative)
        self._make_parent(full)
        tmp = f"{posixpath.dirname(full)}/.tmp_{posixpath.basename(full)}_{uuid.uuid4().hex}"
        with self.filesystem.open_output_stream(tmp) as out:
            out.write(data)
        self.filesystem.move(tmp, full)

    def put_if_not_exists(self, relative: str, data: bytes) -> bool:
        """Atomically create ``relative`` with ``data``; return False if it already exists.

        On a local filesystem the data goes to a staging file that is then hard-linked to the
        final name: ``link`` fails when the target exists, so two writers can never both win,
        and readers never see a partially written file.
        """
        if not self._local:
            raise UnsupportedFeatureError(
                "atomic put-if-not-exists is only implemented for local filesystems", table=self.uri
            )
        full = self.full_path(relative)
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

    def delete(self, relative: str, *, missing_ok: bool = True) -> None:
        try:
            self.filesystem.delete_file(self.full_path(relative))
        except FileNotFoundError:
            if not missing_ok:
                raise

    def delete_dir_contents(self) -> None:
        self.filesystem.delete_dir_contents(self.root, missing_dir_ok=True)


def object_store_for(uri: str | os.PathLike[str] | ObjectStore) -> ObjectStore:
    if isinstance(uri, ObjectStore):
        return uri
    if not isinstance(uri, (str, os.PathLike)):
        raise InvalidInputError(f"a table URI must be a string or path, got {type(uri).__name__}")
    return ObjectStore(uri)


def iter_file_names(infos: list[pafs.FileInfo]) -> Iterator[str]:
    for info in infos:
        yield info.base_name
