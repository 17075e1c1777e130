"""pylance's ``lance.progress``: trackers of fragment writes, called by ``write_dataset``,
``write_fragments`` and ``LanceFragment.create`` (``progress=``) as each data file opens
(``begin``) and is finished (``complete``).

The writers hand a tracker the fragment's JSON (``_do_begin``/``_do_complete``), which it turns
into a :class:`~lance_format.fragment.FragmentMetadata`, as pylance's do; so trackers written for
``lance.progress`` work with either engine. :class:`FileSystemFragmentWriteProgress` leaves, per
fragment, ``fragment_<id>.in_progress`` (removed on completion) and ``fragment_<id>.json`` under
its directory, the files pylance's writes.
"""

from __future__ import annotations

import json
import posixpath
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from lance_format.dataset.fragment_metadata import FragmentMetadata

if TYPE_CHECKING:
    from lance_format.dataset.fragment_metadata import FragmentMetadata


def _fragment_from_json(fragment_json: str) -> FragmentMetadata:
    return FragmentMetadata.from_json(fragment_json)


class FragmentWriteProgress(ABC):
    """What a write reports about each fragment it writes (experimental in pylance too)."""

    def _do_begin(self, fragment_json: str, **kwargs: Any) -> None:
        self.begin(_fragment_from_json(fragment_json), **kwargs)

    def _do_complete(self, fragment_json: str, **kwargs: Any) -> None:
        self.complete(_fragment_from_json(fragment_json), **kwargs)

    @abstractmethod
    def begin(self, fragment: FragmentMetadata, **kwargs: Any) -> None:
        """A data file of ``fragment`` is about to be written (its id may not be final yet)."""

    @abstractmethod
    def complete(self, fragment: FragmentMetadata, **kwargs: Any) -> None:
        """``fragment``'s data file is completely written."""


class NoopFragmentWriteProgress(FragmentWriteProgress):
    """A tracker that does nothing (the default)."""

    def begin(self, fragment: FragmentMetadata, **kwargs: Any) -> None:
        return None

    def complete(self, fragment: FragmentMetadata, **kwargs: Any) -> None:
        return None


class FileSystemFragmentWriteProgress(FragmentWriteProgress):
    """Records fragments in progress as files under ``base_uri`` (a path or a URI pyarrow opens):
    ``fragment_<id>.in_progress`` holds ``{"fragment_id", "metadata"}`` until the fragment is
    complete, ``fragment_<id>.json`` the fragment's JSON as it began. ``metadata`` identifies the
    writer (e.g. a distributed worker)."""

    PROGRESS_EXT: str = ".in_progress"

    def __init__(self, base_uri: Any, metadata: Mapping[str, str] | None = None) -> None:
        from pyarrow.fs import FileSystem

        self._fs, self._base_path = FileSystem.from_uri(str(base_uri))
        self._metadata = dict(metadata or {})

    def _in_progress_path(self, fragment: FragmentMetadata) -> str:
        return posixpath.join(self._base_path, f"fragment_{fragment.id}{self.PROGRESS_EXT}")

    def _fragment_file(self, fragment: FragmentMetadata) -> str:
        return posixpath.join(self._base_path, f"fragment_{fragment.id}.json")

    def _write_json(self, path: str, value: Any) -> None:
        with self._fs.open_output_stream(path) as out:
            out.write(json.dumps(value).encode("utf-8"))

    def begin(self, fragment: FragmentMetadata, **kwargs: Any) -> None:
        self._fs.create_dir(self._base_path, recursive=True)
        self._write_json(self._in_progress_path(fragment), {"fragment_id": fragment.id, "metadata": self._metadata})
        self._write_json(self._fragment_file(fragment), fragment.to_json())

    def complete(self, fragment: FragmentMetadata, **kwargs: Any) -> None:
        self._fs.delete_file(self._in_progress_path(fragment))


@dataclass(frozen=True)
class IndexProgress:
    """One progress event of an index build (pylance's ``IndexProgress``; this engine builds no
    indices, the class exists for code that names it)."""

    event: Literal["start", "progress", "complete"]
    stage: str
    completed: int | None = None
    total: int | None = None
    unit: str = ""

    @property
    def fraction(self) -> float | None:
        """``completed / total`` (at most 1), or None when either is unknown or total is 0."""
        if self.completed is None or not self.total:
            return None
        return min(self.completed / self.total, 1.0)


__all__ = ["FragmentWriteProgress", "NoopFragmentWriteProgress", "FileSystemFragmentWriteProgress",
           "IndexProgress"]
