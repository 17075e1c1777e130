"""``LanceDataset``'s blob reads, as pylance 14 defines them: ``take_blobs`` (file-like
:class:`~lance_format.blob.BlobFile` objects), ``read_blobs`` (whole blobs) and
``read_blob_ranges`` (blob-local byte ranges).

A blob column's rows read as descriptions (:mod:`lance_format.schema.blob`); these turn each
description into the place its bytes are, and only those byte ranges are read:

- blob v1 (2.0/2.1): ``size`` bytes at ``position`` of the fragment's data file holding the
  column. An empty blob is ``(0, 0)``; in 2.0 a null blob is ``(1, 0)``, in 2.1 a null.
- blob v2 (2.2): by ``kind``: 0 inline (in the data file, like v1), 1 packed and 2 dedicated (in
  ``<data file without .lance>/<blob_id>.blob``, the id as 32 bits written least significant
  first, like data file names), 3 external (a URI outside the table: not supported here).

Rows are chosen by exactly one of ``ids`` (row ids), ``addresses`` (row addresses) or
``indices`` (positions among the live rows); ids and addresses of deleted rows are refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import pyarrow as pa

from lance_format.blob import DEFAULT_BLOB_BUFFER_SIZE, BlobFile, BlobLocation, check_blob_range, validate_buffer_size
from lance_format.dataset.mixin import DatasetMixin
from lance_format.errors import (
    ColumnNotFoundError,
    DeletedRowError,
    InvalidInputError,
    NotABlobColumnError,
    UnsupportedFeatureError,
)
from lance_format.schema import LanceField
from lance_format.schema.blob import is_blob_field, is_blob_v2

_SELECTORS = ("ids", "addresses", "indices")
_INLINE, _PACKED, _DEDICATED, _EXTERNAL = 0, 1, 2, 3


def _selection(ids: Any, addresses: Any, indices: Any) -> tuple[str, Any]:
    given = [(kind, value) for kind, value in zip(_SELECTORS, (ids, addresses, indices)) if value is not None]
    if len(given) != 1:
        raise InvalidInputError("Exactly one of ids, indices, or addresses must be specified")
    return given[0]


def _blob_file_name(blob_id: int) -> str:
    return format(blob_id, "032b")[::-1] + ".blob"


class BlobMethods(DatasetMixin):
    """Mixed into ``LanceDataset``: reads of blob columns' bytes."""

    def _blob_field(self, blob_column: str) -> LanceField:
        ds = self._as_dataset()
        fields = {f.name: f for f in ds.lance_schema.fields}
        found = fields.get(blob_column)
        if found is None:
            raise ColumnNotFoundError(f"Field '{blob_column}' not found.\nAvailable fields: {list(fields)}",
                                      table=ds.uri, column=blob_column)
        if not is_blob_field(found):
            raise NotABlobColumnError(f"the column '{blob_column}' is not a blob column", table=ds.uri,
                                      column=blob_column)
        return found

    def _blob_locations(self, blob_column: str, kind: str, rows: Any) -> tuple[np.ndarray, list[BlobLocation | None]]:
        """Row addresses of the selected rows and where each one's blob is (None: null)."""
        ds = self._as_dataset()
        blob_field = self._blob_field(blob_column)
        columns = [blob_column, "_rowaddr"]
        if kind == "indices":
            table = ds.take(rows, columns=columns)
        else:
            wanted = len(rows)
            table = ds._take_rows(rows, columns=columns, _addresses=kind == "addresses")
            if table.num_rows != wanted:
                raise DeletedRowError(f"Expected {wanted} rows, got {table.num_rows}.  A take by row "
                                      f"{'address' if kind == 'addresses' else 'id'} must not target deleted rows",
                                      table=ds.uri, column=blob_column)
        addresses = np.asarray(table.column("_rowaddr").to_numpy(), np.uint64)
        return addresses, self._locations_of(blob_field, table.column(blob_column).combine_chunks(), addresses)

    def _locations_of(self, blob_field: LanceField, descriptions: pa.StructArray,
                      addresses: np.ndarray) -> list[BlobLocation | None]:
        """Where each described blob is (None: null), for rows at ``addresses``."""
        ds = self._as_dataset()
        blob_column = blob_field.name
        if len(addresses) == 0:
            return []
        valid = np.asarray(descriptions.is_valid())
        positions = np.asarray(descriptions.field("position").fill_null(0).to_numpy(), np.uint64)
        sizes = np.asarray(descriptions.field("size").fill_null(0).to_numpy(), np.uint64)
        if is_blob_v2(blob_field):
            kinds = np.asarray(descriptions.field("kind").fill_null(0).to_numpy(), np.uint8)
            blob_ids = np.asarray(descriptions.field("blob_id").fill_null(0).to_numpy(), np.uint32)
            if (valid & (kinds >= _EXTERNAL)).any():
                raise UnsupportedFeatureError(
                    f"reading external blobs (blob v2 kind {int(kinds[valid][kinds[valid] >= _EXTERNAL][0])}) "
                    f"of column {blob_column!r} is not supported", table=ds.uri, column=blob_column)
        else:
            # a 2.0 null blob is (1, 0); an empty one is always (0, 0)
            kinds = np.zeros(len(valid), np.uint8)
            blob_ids = np.zeros(len(valid), np.uint32)
            valid &= ~((sizes == 0) & (positions != 0))
        files = self._blob_data_files(blob_field, np.unique(addresses >> np.uint64(32)))
        fragment_ids = (addresses >> np.uint64(32)).tolist()
        locations: list[BlobLocation | None] = []
        for i, is_valid in enumerate(valid.tolist()):
            if not is_valid:
                locations.append(None)
                continue
            store, path = files[fragment_ids[i]]
            if kinds[i] in (_PACKED, _DEDICATED):
                path = f"{path.removesuffix('.lance')}/{_blob_file_name(int(blob_ids[i]))}"
            locations.append(BlobLocation(store, path, int(positions[i]), int(sizes[i])))
        return locations

    def _blob_data_files(self, blob_field: LanceField, fragment_ids: np.ndarray) -> dict[int, tuple[Any, str]]:
        ds = self._as_dataset()
        files: dict[int, tuple[Any, str]] = {}
        for fragment_id in fragment_ids.tolist():
            fragment = ds.get_fragment(int(fragment_id))
            assert fragment is not None  # the rows were just read from it
            holder = next((f for f in fragment.proto.files if blob_field.id in f.fields), None)
            if holder is None:
                raise UnsupportedFeatureError(f"fragment {fragment_id} has no data file for blob column "
                                              f"{blob_field.name!r}", table=ds.uri, column=blob_field.name)
            files[int(fragment_id)] = ds.base_stores.data_file(holder)
        return files

    def take_blobs(
        self,
        blob_column: str,
        ids: Sequence[int] | pa.Array | None = None,
        addresses: Sequence[int] | pa.Array | None = None,
        indices: Sequence[int] | pa.Array | None = None,
        *,
        buffer_size: int = DEFAULT_BLOB_BUFFER_SIZE,
    ) -> list[BlobFile | None]:
        """The selected rows' blobs as file-like :class:`~lance_format.blob.BlobFile` objects, in
        the order asked (None for a null blob; an empty blob is a file of size 0). Exactly one of
        ``ids``, ``addresses`` or ``indices``; ``buffer_size``: bytes read ahead by sequential reads.

        Raises
        ------
        InvalidInputError
            Not exactly one selection, or an index out of range; ``NotABlobColumnError`` and
            ``ColumnNotFoundError`` for a wrong column; ``DeletedRowError`` for a deleted row.
        """
        buffer_size = validate_buffer_size(buffer_size)
        kind, rows = _selection(ids, addresses, indices)
        _, locations = self._blob_locations(blob_column, kind, rows)
        return [None if where is None else BlobFile(where, buffer_size) for where in locations]

    def read_blobs(
        self,
        blob_column: str,
        ids: Sequence[int] | pa.Array | None = None,
        addresses: Sequence[int] | pa.Array | None = None,
        indices: Sequence[int] | pa.Array | None = None,
        *,
        io_buffer_size: int | None = None,
        preserve_order: bool | None = None,
    ) -> list[tuple[int, bytes | None]]:
        """``(row_address, bytes)`` of each selected row's blob (None for a null blob), in the
        order asked, or fragment by fragment with ``preserve_order=False``. One coalesced read per data
        file; ``io_buffer_size`` is accepted for pylance's signature."""
        kind, rows = _selection(ids, addresses, indices)
        addresses_found, locations = self._blob_locations(blob_column, kind, rows)
        payloads = _read_whole(locations)
        result = list(zip(addresses_found.tolist(), payloads))
        if preserve_order is False:
            result.sort(key=lambda item: item[0] >> 32)  # pylance: fragment by fragment
        return result

    def read_blob_ranges(
        self,
        blob_column: str,
        requests: Sequence[tuple[int, int, int]],
        *,
        selector: Literal["ids", "addresses", "indices"],
        io_buffer_size: int | None = None,
        preserve_order: bool | None = None,
    ) -> list[tuple[int, int, bytes | None]]:
        """``(request_index, row_address, bytes)`` for each ``(row, offset, length)`` request,
        ``row`` read as ``selector`` says: None on a null blob, ``b""`` for an empty range. Every
        range of a non-null blob must end within it (:class:`InvalidInputError` otherwise)."""
        if selector not in _SELECTORS:
            raise InvalidInputError(f"selector must be one of 'ids', 'addresses', or 'indices', got \"{selector}\"")
        requests = [(int(row), int(offset), int(length)) for row, offset, length in requests]
        if not requests:
            self._blob_field(blob_column)
            return []
        row_addresses, locations = self._blob_locations(blob_column, selector, [r for r, _, _ in requests])
        for index, ((_, offset, length), where) in enumerate(zip(requests, locations)):
            if where is not None:
                try:
                    check_blob_range(offset, length, where.size)
                except InvalidInputError as exc:
                    raise InvalidInputError(f"Blob range request {index} for row address {int(row_addresses[index])} "
                                            f"is invalid: {exc.args[0]}", column=blob_column) from None
        payloads = _read_pieces([(where, offset, length) for (_, offset, length), where in zip(requests, locations)])
        result = [(index, int(address), data)
                  for index, (address, data) in enumerate(zip(row_addresses.tolist(), payloads))]
        if preserve_order is False:
            result.sort(key=lambda item: item[1] >> 32)
        return result


def _read_whole(locations: list[BlobLocation | None]) -> list[bytes | None]:
    return _read_pieces([(where, 0, where.size if where is not None else 0) for where in locations])


def _read_pieces(pieces: list[tuple[BlobLocation | None, int, int]]) -> list[bytes | None]:
    """The bytes of blob-local ranges, one coalesced ``read_ranges`` per file."""
    out: list[bytes | None] = [None if where is None else b"" for where, _, _ in pieces]
    by_file: dict[tuple[int, str], list[int]] = {}
    for i, (where, _, length) in enumerate(pieces):
        if where is not None and length:
            by_file.setdefault((id(where.store), where.path), []).append(i)
    for members in by_file.values():
        first = pieces[members[0]][0]
        assert first is not None
        ranges = [(pieces[i][0].position + pieces[i][1], pieces[i][2]) for i in members]  # type: ignore[union-attr]
        for i, data in zip(members, first.store.read_ranges(first.path, ranges)):
            out[i] = data.to_pybytes()
    return out


def blob_bytes_columns(ds: Any, batch: pa.RecordBatch, names: Sequence[str]) -> pa.RecordBatch:
    """``batch`` (with ``_rowaddr``) with the description columns ``names`` replaced by the blobs'
    bytes (``blob_handling="all_binary"``)."""
    if not names:
        return batch
    fields = {f.name: f for f in ds.lance_schema.fields}
    addresses = np.asarray(batch.column("_rowaddr").to_numpy(), np.uint64)
    columns = dict(zip(batch.schema.names, batch.columns))
    for name in names:
        descriptions = columns[name]
        locations = ds._locations_of(fields[name], descriptions, addresses) if batch.num_rows else []
        columns[name] = pa.array(_read_whole(locations), pa.large_binary())
    return pa.RecordBatch.from_pydict(columns)


def blob_frame(ds: Any, scanner: Any, blob_mode: str, keep_address: bool) -> Any:
    """The pandas DataFrame of ``scanner``'s rows with its blob columns as pylance's ``to_pandas``
    gives them: ``BlobFile`` objects (``"lazy"``), bytes (``"bytes"``) or descriptions."""
    if blob_mode not in _PANDAS_BLOB_MODES:
        raise InvalidInputError("blob_mode must be one of: 'lazy', 'bytes', 'descriptions'")
    fields = {f.name: f for f in ds.lance_schema.fields if is_blob_field(f)}
    table = scanner.to_table()
    blob_columns = [name for name in table.column_names if name in fields]
    if blob_mode == "descriptions" or not blob_columns or table.num_rows == 0:
        frame = table.to_pandas()
        return frame if keep_address or "_rowaddr" not in frame else frame.drop(columns=["_rowaddr"])
    if "_rowaddr" not in table.column_names:
        raise InvalidInputError("reading blob bytes needs the rows' addresses (scan with with_row_address=True)")
    addresses = np.asarray(table.column("_rowaddr").to_numpy(), np.uint64)
    values: dict[str, list[Any]] = {}
    for name in blob_columns:
        locations = ds._locations_of(fields[name], table.column(name).combine_chunks(), addresses)
        values[name] = (_read_whole(locations) if blob_mode == "bytes"
                        else [None if where is None else BlobFile(where) for where in locations])
    frame = table.drop_columns(blob_columns).to_pandas()
    for name in blob_columns:
        frame.insert(table.column_names.index(name), name, pd_object_series(values[name], frame.index))
    return frame if keep_address else frame.drop(columns=["_rowaddr"])


def pd_object_series(values: list[Any], index: Any) -> Any:
    import pandas as pd

    return pd.Series(values, index=index, dtype=object)


_PANDAS_BLOB_MODES = ("lazy", "bytes", "descriptions")

__all__ = ["BlobMethods", "blob_bytes_columns", "blob_frame"]
