"""Blob values as pylance's ``lance.blob`` presents them: :class:`BlobFile` (one stored blob as a
read-only, seekable file that fetches only the byte ranges it is asked for),
:class:`BlobColumn` (a binary column iterated as file-like objects), and the blob v2 values
written to file version 2.2 tables: :class:`Blob`, :class:`BlobType` (the ``lance.blob.v2``
Arrow extension type), :class:`BlobArray`, :func:`blob_array` and :func:`blob_field`.

``LanceDataset.take_blobs`` hands out :class:`BlobFile` objects; ``read_blobs`` and
``read_blob_ranges`` read whole blobs or ranges of them (:mod:`lance_format.dataset.blob_reads`).
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any

import pyarrow as pa

from lance_format.errors import BlobFileClosedError, InvalidInputError, NotABlobColumnError
from lance_format.file.blob_writers import (
    BlobDescriptor,
    BlobDescriptorArrayBuilder,
    DedicatedBlobWriter,
    PackedBlobWriter,
)
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

    def __init__(self, inner: BlobLocation, buffer_size: int = DEFAULT_BLOB_BUFFER_SIZE) -> None:
        super().__init__()
        self._location = inner  # pylance's name for what the blob's bytes are read from
        self._buffer_size = validate_buffer_size(buffer_size)
        self._cursor = 0
        self._ahead_start = 0
        self._ahead = b""
        self._is_closed = False

    # -- state ---------------------------------------------------------------------------------
    def close(self) -> None:
        """Close the file and drop its read-ahead buffer; later reads raise ``BlobFileClosedError``."""
        self._is_closed = True
        self._ahead = b""

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called."""
        return self._is_closed

    def _check_open(self, what: str | None = None) -> None:
        if self._is_closed:
            raise BlobFileClosedError(f"{what} of closed file" if what else "Blob file is already closed")

    def readable(self) -> bool:
        """Always ``True``: a blob file is readable."""
        return True

    def seekable(self) -> bool:
        """Always ``True``: a blob file supports :meth:`seek` and :meth:`tell`."""
        return True

    def size(self) -> int:
        """The size of the blob in bytes."""
        return self._location.size

    def tell(self) -> int:
        """The cursor's position in bytes from the start of the blob.

        Raises
        ------
        BlobFileClosedError
            If the file is closed.
        """
        self._check_open()
        return self._cursor

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """Move the cursor and return its new position.

        Parameters
        ----------
        offset : int
            Bytes relative to ``whence``. Seeking past the end is allowed (reads there give ``b""``).
        whence : int, default io.SEEK_SET
            ``io.SEEK_SET`` (from the start), ``io.SEEK_CUR`` (from the cursor) or ``io.SEEK_END``
            (from the end of the blob).

        Returns
        -------
        int
            The new position from the start of the blob.

        Raises
        ------
        InvalidInputError
            If ``whence`` is none of the three, or the position would be negative.
        BlobFileClosedError
            If the file is closed.
        """
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
        """Read up to ``size`` bytes from the cursor and advance it.

        Parameters
        ----------
        size : int or None, default -1
            How many bytes at most; ``None`` or a negative value reads to the end of the blob.

        Returns
        -------
        bytes
            Fewer than ``size`` bytes only at the end of the blob; ``b""`` there.

        Raises
        ------
        BlobFileClosedError
            If the file is closed.
        """
        self._check_open("read")
        if size is None or size < 0:
            return self._read_up_to(self._location.size - self._cursor)
        return self._read_up_to(size)

    def read1(self, size: int = -1) -> bytes:
        """Read up to ``size`` bytes (``io.DEFAULT_BUFFER_SIZE`` if negative) and advance the cursor.

        Raises
        ------
        BlobFileClosedError
            If the file is closed.
        """
        self._check_open("read")
        return self._read_up_to(io.DEFAULT_BUFFER_SIZE if size is None or size < 0 else size)

    def readall(self) -> bytes:
        """Read from the cursor to the end of the blob.

        Raises
        ------
        BlobFileClosedError
            If the file is closed.
        """
        self._check_open("read")
        return self._read_up_to(self._location.size - self._cursor)

    def readinto(self, b) -> int:  # type: ignore[override]  # any writable buffer, like io's
        """Read into a writable buffer ``b`` (up to its length) and advance the cursor.

        Returns
        -------
        int
            The number of bytes read (0 at the end of the blob).

        Raises
        ------
        TypeError
            If ``b`` is read-only.
        BlobFileClosedError
            If the file is closed.
        """
        view = memoryview(b).cast("B")
        if view.readonly:
            raise TypeError(f"readinto() argument must be read-write bytes-like object, not {type(b).__name__}")
        self._check_open("readinto")
        data = self._read_up_to(len(view))
        view[:len(data)] = data
        return len(data)

    def readinto1(self, b) -> int:  # type: ignore[override]
        """Like :meth:`readinto` (a blob file makes at most one fetch per call either way)."""
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


BLOB_V2_EXTENSION_NAME = "lance.blob.v2"
_INLINE_THRESHOLD_KEY = b"lance-encoding:blob-inline-size-threshold"
_DEDICATED_THRESHOLD_KEY = b"lance-encoding:blob-dedicated-size-threshold"
_PACK_FILE_THRESHOLD_KEY = b"lance-encoding:blob-pack-file-size-threshold"
_STORAGE_FIELDS = [("data", pa.large_binary()), ("uri", pa.utf8()), ("position", pa.uint64()), ("size", pa.uint64())]


@dataclass(frozen=True)
class Blob:
    """One blob v2 value to write: inline ``data``, or an external ``uri`` (optionally a range of
    it: ``position`` and a positive ``size``). ``None`` is a null blob; :meth:`empty` an empty one."""

    data: bytes | None = None
    uri: str | None = None
    position: int | None = None
    size: int | None = None

    def __post_init__(self) -> None:
        if self.data is not None and self.uri is not None:
            raise InvalidInputError("Blob cannot have both data and uri")
        if self.uri == "":
            raise InvalidInputError("Blob uri cannot be empty")
        if (self.position is not None or self.size is not None) and self.uri is None:
            raise InvalidInputError("External packed blob must have a uri")
        if (self.position is None) != (self.size is None):
            raise InvalidInputError("External blob must set both position and size, or neither")
        if self.data is None and self.uri is None:
            raise InvalidInputError("Blob must set `data` or `uri`; use None for a null blob")
        if self.size == 0:
            raise InvalidInputError("External blob range size must be greater than zero")

    @staticmethod
    def from_bytes(data: bytes | bytearray | memoryview) -> Blob:
        """A blob of inline bytes.

        Parameters
        ----------
        data : bytes, bytearray or memoryview
            The blob's content, copied.
        """
        return Blob(data=bytes(data))

    @staticmethod
    def from_uri(uri: str, position: int | None = None, size: int | None = None) -> Blob:
        """A blob referencing an external object, or a byte range of it.

        Parameters
        ----------
        uri : str
            Where the bytes live (a path or object-store URI).
        position, size : int, optional
            A byte range of the object; give both or neither. ``size`` must be positive.

        Raises
        ------
        InvalidInputError
            If ``uri`` is empty, ``position`` or ``size`` is negative, ``size`` is zero, or only one
            of the two is given.
        """
        if uri == "":
            raise InvalidInputError("Blob uri cannot be empty")
        if (position is not None and position < 0) or (size is not None and size < 0):
            raise InvalidInputError("External blob position and size must be non-negative")
        return Blob(uri=uri, position=position, size=size)

    @staticmethod
    def empty() -> Blob:
        """An empty (zero-byte, non-null) inline blob."""
        return Blob(data=b"")


class BlobType(pa.ExtensionType):
    """The ``lance.blob.v2`` Arrow extension type: a blob column as written (stored as
    ``struct<data: large_binary, uri: string, position: uint64, size: uint64>``; the two-field
    ``struct<data, uri>`` is accepted too). Reads give descriptors, not this type's values."""

    def __init__(self, storage_type: pa.DataType | None = None) -> None:
        if storage_type is None:
            storage_type = pa.struct([pa.field(name, data_type) for name, data_type in _STORAGE_FIELDS])
        _check_storage(storage_type)
        super().__init__(storage_type, BLOB_V2_EXTENSION_NAME)

    def __arrow_ext_serialize__(self) -> bytes:
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type: pa.DataType, serialized: bytes) -> BlobType:
        return cls(storage_type)

    def __arrow_ext_class__(self) -> type:
        return BlobArray

    def __reduce__(self) -> tuple[Any, ...]:
        return BlobType, (self.storage_type,)


def _check_storage(storage_type: pa.DataType) -> None:
    if not pa.types.is_struct(storage_type):
        raise InvalidInputError("BlobType storage type must be a struct")
    fields = list(storage_type)
    if len(fields) not in (2, 4):
        raise InvalidInputError("BlobType storage struct must contain either data/uri or data/uri/position/size")
    for index, (field, (name, data_type)) in enumerate(zip(fields, _STORAGE_FIELDS)):
        if field.name != name or field.type != data_type:
            raise InvalidInputError(f"BlobType storage field {index} must be {name}: {data_type}, "
                                    f"got {field.name}: {field.type}")
        if index < 2 and not field.nullable:
            raise InvalidInputError(f"BlobType storage field {field.name} must be nullable")


try:
    pa.register_extension_type(BlobType())
except pa.ArrowKeyError:  # already registered in this interpreter (e.g. by pylance, whose class then wins)
    pass


class BlobArray(pa.ExtensionArray):
    """An array of the ``lance.blob.v2`` extension type; build one with :func:`blob_array`."""

    @classmethod
    def from_pylist(cls, values: list[Any]) -> BlobArray:
        """From bytes-like values (inline), ``str`` (an external URI), :class:`Blob` or ``None``."""
        rows: list[tuple[bytes | None, str | None, int | None, int | None] | None] = []
        for value in values:
            if value is None:
                rows.append(None)
            elif isinstance(value, Blob):
                rows.append((value.data, value.uri, value.position, value.size))
            elif isinstance(value, str):
                rows.append((None, Blob.from_uri(value).uri, None, None))
            elif isinstance(value, (bytes, bytearray, memoryview)):
                rows.append((bytes(value), None, None, None))
            else:
                raise TypeError(f"BlobArray values must be bytes-like, str (URI), Blob, or None; got {type(value)}")
        columns = [pa.array([None if row is None else row[i] for row in rows], data_type)
                   for i, (_, data_type) in enumerate(_STORAGE_FIELDS)]
        storage = pa.StructArray.from_arrays(columns, names=[name for name, _ in _STORAGE_FIELDS],
                                             mask=pa.array([row is None for row in rows], pa.bool_()))
        return pa.ExtensionArray.from_storage(BlobType(), storage)  # type: ignore[return-value]


def blob_array(values: list[Any]) -> BlobArray:
    """A blob v2 array from bytes-like values (inline), ``str`` (external URIs), :class:`Blob` and ``None``."""
    return BlobArray.from_pylist(values)


def _threshold(name: str, value: int | None, *, allow_zero: bool) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 0 or (value == 0 and not allow_zero):
        raise InvalidInputError(f"{name} must be {'non-negative' if allow_zero else 'positive'}")
    if value >= 1 << 64:
        raise OverflowError(f"{name} must fit in a Rust usize")
    return str(value).encode()


def blob_field(name: str, *, nullable: bool = True, inline_size_threshold: int | None = None,
               dedicated_size_threshold: int | None = None, pack_file_size_threshold: int | None = None) -> pa.Field:
    """An Arrow field of a blob v2 column (file version 2.2). The thresholds (bytes) choose where
    each blob is stored: up to ``inline_size_threshold`` in the data file, up to
    ``dedicated_size_threshold`` in a shared pack sidecar (a new one past
    ``pack_file_size_threshold``), larger ones in a sidecar of their own."""
    thresholds = {
        _INLINE_THRESHOLD_KEY: _threshold("inline_size_threshold", inline_size_threshold, allow_zero=True),
        _DEDICATED_THRESHOLD_KEY: _threshold("dedicated_size_threshold", dedicated_size_threshold, allow_zero=False),
        _PACK_FILE_THRESHOLD_KEY: _threshold("pack_file_size_threshold", pack_file_size_threshold, allow_zero=False),
    }
    field = pa.field(name, BlobType(), nullable=nullable)
    metadata = {key: value for key, value in thresholds.items() if value is not None}
    return field.with_metadata(metadata) if metadata else field


__all__ = ["DEFAULT_BLOB_BUFFER_SIZE", "Blob", "BlobArray", "BlobDescriptor", "BlobDescriptorArrayBuilder",
           "DedicatedBlobWriter", "PackedBlobWriter", "BlobColumn", "BlobFile", "BlobLocation", "BlobType",
           "blob_array", "blob_field"]
