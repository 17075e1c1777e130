"""Blob v2 bytes uploaded ahead of their data file, as pylance 14's ``lance.file`` API does it:
:class:`PackedBlobWriter` and :class:`DedicatedBlobWriter` (from
``LanceFileSession.open_packed_blob_writer`` / ``open_dedicated_blob_writer``) write the sidecars
``<data file without .lance>/<blob_id>.blob`` of a data file yet to be written, and return
:class:`BlobDescriptor` references; :class:`BlobDescriptorArrayBuilder` turns references (and inline
bytes) into the blob input column the data file's writer takes.

That input column is ``struct<kind: u8, data: large_binary, uri: string, blob_id: u32, blob_size:
u64, position: u64>`` named ``lance.blob.v2``: kind 0 inline ``data``, 1 packed (``blob_id``,
``position``, ``blob_size``), 2 dedicated (``blob_id``, ``blob_size``), 4 a table-managed object
(``uri``, ``position``, ``blob_size``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from lance_format.errors import InvalidInputError
from lance_format.io.object_store import ObjectStore
from lance_format.schema.arrow_checks import check_array

INPUT_TYPE = pa.struct([
    pa.field("kind", pa.uint8()), pa.field("data", pa.large_binary()), pa.field("uri", pa.string()),
    pa.field("blob_id", pa.uint32()), pa.field("blob_size", pa.uint64()), pa.field("position", pa.uint64()),
])
INLINE, PACKED, DEDICATED, MANAGED = 0, 1, 2, 4
_EXTENSION = {b"ARROW:extension:name": b"lance.blob.v2"}


def sidecar_path(data_path: str, blob_id: int) -> str:
    """Where blob ``blob_id`` of the data file ``data_path`` is stored."""
    return f"{data_path.removesuffix('.lance')}/{format(blob_id, '032b')[::-1]}.blob"


def _blob_id(blob_id: int) -> int:
    if isinstance(blob_id, bool) or not isinstance(blob_id, int) or not 0 < blob_id < 1 << 32:
        raise InvalidInputError(f"blob_id must be an integer in 1..2^32-1, got {blob_id!r}")
    return blob_id


@dataclass(frozen=True)
class BlobDescriptor:
    """A reference to blob bytes already stored: packed (``offset`` and ``size`` in pack
    ``blob_id``) or dedicated (all ``size`` bytes of sidecar ``blob_id``)."""

    kind: int
    blob_id: int
    size: int
    offset: int = 0

    def __repr__(self) -> str:
        if self.kind == PACKED:
            return f"Packed {{ blob_id: {self.blob_id}, offset: {self.offset}, size: {self.size} }}"
        return f"Dedicated {{ blob_id: {self.blob_id}, size: {self.size} }}"


def _input_array(kinds: list[int | None], data: list[bytes | None], uris: list[str | None], blob_ids: list[int | None],
                 sizes: list[int | None], positions: list[int | None]) -> pa.StructArray:
    columns = [pa.array(values, f.type) for values, f in zip((kinds, data, uris, blob_ids, sizes, positions), INPUT_TYPE)]
    return pa.StructArray.from_arrays(columns, fields=list(INPUT_TYPE), mask=pa.array([k is None for k in kinds]))


def _input_field(name: str) -> pa.Field:
    return pa.field(name, INPUT_TYPE, metadata=_EXTENSION)


class _SidecarWriter:
    def __init__(self, store: ObjectStore, data_path: str, blob_id: int) -> None:
        self._store = store
        self._blob_id = _blob_id(blob_id)
        self._path = store.full_path(sidecar_path(data_path, blob_id)).lstrip("/")
        self._relative = sidecar_path(data_path, blob_id)
        self._out: Any = store.open_output(self._relative)
        self._written = 0
        self._finished = False

    def _check_open(self) -> None:
        if self._finished:
            raise InvalidInputError(f"{type(self).__name__} is already finished")

    @property
    def blob_id(self) -> int:
        """The sidecar's blob id (names its file; see :func:`sidecar_path`).

        Raises
        ------
        InvalidInputError
            If the writer is already finished.
        """
        self._check_open()
        return self._blob_id

    @property
    def path(self) -> str:
        """The sidecar's path in the object store."""
        self._check_open()
        return self._path

    def _write(self, data: Any) -> int:
        self._check_open()
        view = memoryview(data).cast("B")
        self._out.write(view)
        self._written += view.nbytes
        return view.nbytes

    def _close(self) -> None:
        self._check_open()
        self._out.close()
        self._finished = True


class DedicatedBlobWriter(_SidecarWriter):
    """Streams one blob into its own sidecar; :meth:`finish` gives its :class:`BlobDescriptor`."""

    def write(self, data: Any) -> None:
        """Append bytes to the blob.

        Parameters
        ----------
        data : bytes-like
            Any object supporting the buffer protocol.

        Raises
        ------
        InvalidInputError
            If the writer is already finished.
        """
        self._write(data)

    def finish(self) -> BlobDescriptor:
        """Close the sidecar file and describe the blob written.

        Returns
        -------
        BlobDescriptor
            A dedicated reference to pass to :meth:`BlobDescriptorArrayBuilder.append`.

        Raises
        ------
        InvalidInputError
            If the writer is already finished.
        """
        self._close()
        return BlobDescriptor(DEDICATED, self._blob_id, self._written)


class PackedBlobWriter(_SidecarWriter):
    """Appends blobs to one pack sidecar; :meth:`finish` gives their :class:`BlobDescriptor`
    references, :meth:`finish_array` the blob input column holding them."""

    def __init__(self, store: ObjectStore, data_path: str, blob_id: int) -> None:
        super().__init__(store, data_path, blob_id)
        self._pieces: list[tuple[int, int]] = []
        self._field: pa.Field | None = None

    def write_blob(self, data: Any) -> None:
        """Append one blob (bytes-like) to the pack file.

        Raises
        ------
        InvalidInputError
            If the writer is already finished.
        """
        start = self._written
        self._pieces.append((start, self._write(data)))

    def write_blobs(self, payloads: pa.Array | pa.ChunkedArray) -> None:
        """Append each value of a binary Arrow array as one blob.

        Parameters
        ----------
        payloads : pyarrow.Array or pyarrow.ChunkedArray
            Binary, large binary, fixed-size binary or binary view values, none null.

        Raises
        ------
        InvalidInputError
            If the array is not binary, holds a null, or the writer is already finished.
        """
        chunks = payloads.chunks if isinstance(payloads, pa.ChunkedArray) else [payloads]
        check_array(payloads, what="Packed blob payload")  # every chunk before any is written
        for chunk in chunks:
            if not (pa.types.is_binary(chunk.type) or pa.types.is_large_binary(chunk.type)
                    or pa.types.is_fixed_size_binary(chunk.type) or pa.types.is_binary_view(chunk.type)):
                raise InvalidInputError(f"write_blobs takes a binary Arrow array, got {chunk.type}")
            if chunk.null_count:
                raise InvalidInputError("write_blobs payloads cannot be null")
            for value in chunk.cast(pa.large_binary()):  # one append per payload (each is a blob)
                self.write_blob(value.as_buffer() or b"")

    def finish(self) -> list[BlobDescriptor]:
        """Close the pack file and describe the blobs written, in order.

        Returns
        -------
        list of BlobDescriptor
            One packed reference (offset and size in the pack) per blob.

        Raises
        ------
        InvalidInputError
            If the writer is already finished.
        """
        self._close()
        return [BlobDescriptor(PACKED, self._blob_id, size, offset) for offset, size in self._pieces]

    def finish_array(self, field_name: str) -> pa.StructArray:
        """Close the pack file and return its blobs as a blob input column.

        Parameters
        ----------
        field_name : str
            The column's name; :attr:`field` gives the matching field afterwards.

        Returns
        -------
        pyarrow.StructArray
            One row per blob written, ready for ``write_dataset``.

        Raises
        ------
        InvalidInputError
            If the writer is already finished.
        """
        descriptors = self.finish()
        builder = BlobDescriptorArrayBuilder(field_name)
        builder.extend(descriptors)
        self._field = builder.field
        return builder.finish()

    @property
    def field(self) -> pa.Field:
        """The blob input field of the array :meth:`finish_array` returned."""
        if self._field is None:
            raise InvalidInputError("field is available only after finish_array")
        return self._field


class BlobDescriptorArrayBuilder:
    """Builds a blob input column (see the module docstring) row by row."""

    def __init__(self, column: str) -> None:
        self._column = column
        self._rows: tuple[list[Any], ...] = ([], [], [], [], [], [])

    @property
    def field(self) -> pa.Field:
        """The blob input field of the column this builder makes."""
        return _input_field(self._column)

    def _add(self, kind: int | None, data: bytes | None = None, uri: str | None = None, blob_id: int | None = None,
             size: int | None = None, position: int | None = None) -> None:
        for values, value in zip(self._rows, (kind, data, uri, blob_id, size, position)):
            values.append(value)

    def append(self, value: BlobDescriptor) -> None:
        """Append a row referencing a blob written by a sidecar writer.

        Parameters
        ----------
        value : BlobDescriptor
            From :meth:`DedicatedBlobWriter.finish` or :meth:`PackedBlobWriter.finish`.

        Raises
        ------
        TypeError
            If ``value`` is not a ``BlobDescriptor``.
        """
        if not isinstance(value, BlobDescriptor):
            raise TypeError(f"{type(value).__name__!r} object is not an instance of 'BlobDescriptor'")
        if value.kind == PACKED:
            self._add(PACKED, blob_id=value.blob_id, size=value.size, position=value.offset)
        else:
            self._add(DEDICATED, blob_id=value.blob_id, size=value.size)

    def extend(self, values: Iterable[BlobDescriptor]) -> None:
        """Append a row per descriptor (see :meth:`append`).

        Raises
        ------
        TypeError
            If a value is not a ``BlobDescriptor``.
        """
        for value in values:
            self.append(value)

    def append_inline(self, data: Any) -> None:
        """Append a row holding ``data`` (bytes-like) inline."""
        self._add(INLINE, data=bytes(data))

    def append_dedicated(self, blob_id: int, size: int) -> None:
        """Append a row referencing a whole dedicated sidecar.

        Parameters
        ----------
        blob_id : int
            The sidecar's id (1 to 2^32 - 1).
        size : int
            The blob's size in bytes.

        Raises
        ------
        InvalidInputError
            If ``blob_id`` is out of range.
        """
        self._add(DEDICATED, blob_id=_blob_id(blob_id), size=int(size))

    def extend_packed(self, blob_id: int, offsets: Sequence[int], sizes: Sequence[int]) -> None:
        """Append one row per blob packed in sidecar ``blob_id``.

        Parameters
        ----------
        blob_id : int
            The pack sidecar's id (1 to 2^32 - 1).
        offsets, sizes : sequence of int
            Each blob's byte offset in the pack and its size, pairwise.

        Raises
        ------
        InvalidInputError
            If ``offsets`` and ``sizes`` differ in length, or ``blob_id`` is out of range.
        """
        offsets_array, sizes_array = np.asarray(offsets, np.uint64), np.asarray(sizes, np.uint64)
        if offsets_array.shape != sizes_array.shape:
            raise InvalidInputError("extend_packed needs as many offsets as sizes")
        for offset, size in zip(offsets_array.tolist(), sizes_array.tolist()):
            self._add(PACKED, blob_id=_blob_id(blob_id), size=size, position=offset)

    def append_managed(self, uri: str, offset: int, size: int, *, base_id: int | None = None) -> None:
        """Append a row referencing a byte range of an external object.

        Parameters
        ----------
        uri : str
            The object's location.
        offset, size : int
            The byte range.
        base_id : int, optional
            Not supported; must be ``None``.

        Raises
        ------
        InvalidInputError
            If ``base_id`` is given.
        """
        if base_id is not None:
            raise InvalidInputError("append_managed(base_id=...) is not supported here")
        self._add(MANAGED, uri=uri, size=int(size), position=int(offset))

    def append_null(self) -> None:
        """Append a null blob row."""
        self._add(None)

    def finish(self) -> pa.StructArray:
        """The column built so far; the builder is empty afterwards.

        Returns
        -------
        pyarrow.StructArray
            The blob input column, one row per append.
        """
        array = _input_array(*self._rows)
        self._rows = ([], [], [], [], [], [])
        return array


__all__ = ["BlobDescriptor", "BlobDescriptorArrayBuilder", "DedicatedBlobWriter", "INPUT_TYPE", "PackedBlobWriter",
           "sidecar_path"]
