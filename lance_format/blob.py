"""Blob values as pylance's ``lance.blob`` presents them: :class:`BlobFile` (one stored blob as a
read-only, seekable file that fetches only the byte ranges it is asked for) and
:class:`BlobColumn` (a binary column iterated as file-like objects).

``LanceDataset.take_blobs`` hands out :class:`BlobFile` objects; ``read_blobs`` and
``read_blob_ranges`` read whole blobs or ranges of them (:mod:`lance_format.dataset.blob_reads`).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import IO, Iterator, Sequence

import pyarrow as pa

from lance_format.errors import BlobFileClosedError, InvalidInputError, NotABlobColumnError
from lance_format.io.object_store import ObjectStore

DEFAULT_BLOB_BUFFER_SIZE = 512 * 1024
"""Bytes a sequential :meth:`BlobFile.read` fetches ahead (pylance's default, 512 KiB)."""


@dataclass(frozen=True)
class BlobLocation:
    """Where one blob's bytes are: ``size`` bytes at ``position`` of the file ``path`` of ``store``."""

    store: ObjectStore
    path: str
    position: int
    size: int

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """The bytes of blob-local ``(offset, length)`` ranges (bounds already checked)."""
        wanted = [(self.position + offset, length) for offset, length in ranges if length]
        fetched = iter(self.store.read_ranges(self.path, wanted) if wanted else [])
        return [next(fetched).to_pybytes() if length else b"" for _, length in ranges]


def check_blob_range(offset: int, length: int, size: int) -> None:
    """Refuse a blob-local range that does not fit a blob of ``size`` bytes, as pylance does."""
    if offset < 0 or length < 0:
        raise InvalidInputError(f"blob range ({offset}, {length}) has a negative offset or length")
    if offset + length > size:
        raise InvalidInputError(f"Blob range end {offset + length} exceeds blob size {size}")


def validate_buffer_size(buffer_size: int) -> int:
    if isinstance(buffer_size, bool) or not isinstance(buffer_size, int):
        raise InvalidInputError(f"buffer_size must be an int, got {type(buffer_size).__name__}")
    if buffer_size < 0:
        raise InvalidInputError("buffer_size must be non-negative")
    return buffer_size


class BlobFile(io.BufferedIOBase):
    """One blob of a Lance table as a read-only, seekable binary file.

    Sequential reads fetch ``buffer_size`` bytes ahead (0: exactly what is asked);
    :meth:`read_range` and :meth:`read_ranges` read blob-local ranges without the buffer and
    without moving the cursor. Obtain them from ``LanceDataset.take_blobs``.
    """

    def __init__(self, location: BlobLocation, buffer_size: int = DEFAULT_BLOB_BUFFER_SIZE) -> None:
        super().__init__()
        self._location = location
        self._buffer_size = validate_buffer_size(buffer_size)
        self._cursor = 0
        self._ahead_start = 0
        self._ahead = b""
        self._is_closed = False

    # -- state ---------------------------------------------------------------------------------
    def close(self) -> None:
        self._is_closed = True
        self._ahead = b""

    @property
    def closed(self) -> bool:
        return self._is_closed

    def _check_open(self, what: str | None = None) -> None:
        if self._is_closed:
            raise BlobFileClosedError(f"{what} of closed file" if what else "Blob file is already closed")

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def size(self) -> int:
        """The size of the blob in bytes."""
        return self._location.size

    def tell(self) -> int:
        self._check_open()
        return self._cursor

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._check_open()
        if whence == io.SEEK_SET:
            position = offset
        elif whence == io.SEEK_CUR:
            position = self._cursor + offset
        elif whence == io.SEEK_END:
            position = self._location.size + offset
        else:
            raise InvalidInputError(f"Invalid whence: {whence}")
        if position < 0:
            raise InvalidInputError(f"negative seek value {position}")
        self._cursor = position
        return position

    # -- sequential reads ----------------------------------------------------------------------
    def _read_up_to(self, limit: int) -> bytes:
        """At most ``limit`` bytes from the cursor (fewer only at the end), via the read-ahead."""
        size = self._location.size
        start = self._cursor
        end = min(size, start + max(limit, 0))
        if end <= start:
            return b""
        ahead_end = self._ahead_start + len(self._ahead)
        if not (self._ahead_start <= start and end <= ahead_end):
            fetch_end = min(size, max(end, start + self._buffer_size))
            self._ahead = self._location.read_ranges([(start, fetch_end - start)])[0]
            self._ahead_start = start
        data = self._ahead[start - self._ahead_start:end - self._ahead_start]
        self._cursor = end
        return data

    def read(self, size: int | None = -1) -> bytes:
        self._check_open("read")
        if size is None or size < 0:
            return self._read_up_to(self._location.size - self._cursor)
        return self._read_up_to(size)

    def read1(self, size: int = -1) -> bytes:
        self._check_open("read")
        return self._read_up_to(io.DEFAULT_BUFFER_SIZE if size is None or size < 0 else size)

    def readall(self) -> bytes:
        self._check_open("read")
        return self._read_up_to(self._location.size - self._cursor)

    def readinto(self, b) -> int:  # type: ignore[override]  # any writable buffer, like io's
        view = memoryview(b).cast("B")
        if view.readonly:
            raise TypeError(f"readinto() argument must be read-write bytes-like object, not {type(b).__name__}")
        self._check_open("readinto")
        data = self._read_up_to(len(view))
        view[:len(data)] = data
        return len(data)

    def readinto1(self, b) -> int:  # type: ignore[override]
        return self.readinto(b)

    # -- ranges ----------------------------------------------------------------------------------
    def read_range(self, offset: int, length: int) -> bytes:
        """A blob-local byte range, without moving the cursor."""
        return self.read_ranges([(offset, length)])[0]

    def read_ranges(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        """Blob-local ``(offset, length)`` ranges, in the order given, without moving the cursor.
        Every range must end within the blob."""
        self._check_open()
        wanted = [(int(offset), int(length)) for offset, length in ranges]
        for offset, length in wanted:
            check_blob_range(offset, length, self._location.size)
        return self._location.read_ranges(wanted)

    def __repr__(self) -> str:
        return f"<BlobFile size={self.size()}>"


class BlobColumn:
    """A binary column iterated as file-like objects (``io.BytesIO``; like pylance's, a null
    value gives an empty one).

    For small to medium values; large values belong in a blob column, read with
    ``LanceDataset.take_blobs`` or ``read_blobs``.
    """

    def __init__(self, blob_column: pa.Array | pa.ChunkedArray) -> None:
        if not isinstance(blob_column, (pa.Array, pa.ChunkedArray)):
            raise InvalidInputError(f"Expected a pyarrow.Array or pyarrow.ChunkedArray, got {type(blob_column)}")
        if not (pa.types.is_large_binary(blob_column.type) or pa.types.is_binary(blob_column.type)):
            raise NotABlobColumnError(f"Expected a binary array, got {blob_column.type}")
        self.blob_column = blob_column

    def __iter__(self) -> Iterator[IO[bytes]]:
        for value in self.blob_column:
            yield io.BytesIO(value.as_py())


__all__ = ["DEFAULT_BLOB_BUFFER_SIZE", "BlobColumn", "BlobFile", "BlobLocation"]
