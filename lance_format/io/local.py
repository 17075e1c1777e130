"""Local paths (``/data/t.lance``, ``file:///data/t.lance``): ``pyarrow.fs.LocalFileSystem``,
commits by hard link, memory-mapped reads. Like Lance, storage options do not apply."""

from __future__ import annotations

import os
import posixpath
import uuid
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import ParseResult

import pyarrow as pa
import pyarrow.fs as pafs

from lance_format.errors import CorruptFileError
from lance_format.io.backend import StorageBackend
from lance_format.io.ranges import ReadPolicy


class LocalBackend(StorageBackend):
    name = "local"
    atomic_put = "hard link of a fully written staging file (link fails when the target exists)"
    has_directories = True
    writes_version_hint = True
    read_policy = ReadPolicy(gap=0, parallelism=1)  # the page cache makes small reads cheap

    def __init__(self, root: str) -> None:
        self.root = root
        self.uri = root
        self._fs = pafs.LocalFileSystem()

    @classmethod
    def open(cls, uri: str, parsed: ParseResult, options: dict[str, str]) -> LocalBackend:
        local = parsed.path if parsed.scheme == "file" else uri
        return cls(os.path.abspath(os.path.expanduser(local)).rstrip("/") or "/")

    @property
    def filesystem(self) -> pafs.FileSystem:
        return self._fs

    def local_path(self, path: str) -> str | None:
        return path

    def delete_prefix(self) -> None:
        # the table's directory goes too, as pylance's drop removes it
        try:
            self.filesystem.delete_dir(self.root)
        except FileNotFoundError:
            pass

    def use_credential_provider(self, provider) -> None:
        """Ignored, like every storage option on local paths."""

    def read_ranges(self, path: str, ranges: Sequence[tuple[int, int]], *,
                    file: pa.NativeFile | None = None) -> list[pa.Buffer]:
        """Slices of a memory map (no copies, no coalescing needed)."""
        if not ranges:
            return []
        try:
            mapped = pa.memory_map(path, "r")
        except (OSError, pa.ArrowException):  # e.g. an empty file cannot be mapped
            return super().read_ranges(path, ranges, file=file)
        whole = mapped.read_buffer()  # the slices keep the mapping alive
        out = []
        for offset, length in ranges:
            if offset < 0 or length < 0 or offset + length > whole.size:
                raise CorruptFileError(f"short read: wanted {length} bytes at {offset}, the file has {whole.size}",
                                       path=path)
            out.append(whole.slice(offset, length))
        return out

    def replace(self, path: str, data: bytes) -> None:
        """Write a staging file, then rename it over ``path`` (readers see old or new, never part)."""
        directory = posixpath.dirname(path)
        self._fs.create_dir(directory, recursive=True)
        tmp = f"{directory}/.tmp_{posixpath.basename(path)}_{uuid.uuid4().hex}"
        with self._fs.open_output_stream(tmp) as out:
            out.write(data)
        self._fs.move(tmp, path)

    def put_if_absent(self, path: str, data: bytes, *, relative: str) -> bool:
        """The data goes to a staging file that is then hard-linked to the final name: ``link``
        fails when the target exists, so two writers can never both win, and readers never see
        a partially written file."""
        directory = posixpath.dirname(path)
        Path(directory).mkdir(parents=True, exist_ok=True)
        tmp = f"{directory}/.tmp_{posixpath.basename(path)}_{uuid.uuid4().hex}"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
            return True
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)


__all__ = ["LocalBackend"]
