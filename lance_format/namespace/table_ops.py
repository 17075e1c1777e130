"""Data operations of the namespace interface on one table: rows in, rows out, counts.

Rows travel as Arrow IPC bytes (a stream in, as pylance's and LanceDB's clients send them; an IPC
file out of ``query_table``, as pylance 14's DirectoryNamespace answers). Each operation opens
the table at its location with this engine and uses the dataset API pylance users know.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lance_format.dataset.dataset import LanceDataset
from lance_format.dataset.writing.write_dataset import write_dataset
from lance_format.namespace.ids import invalid_input


def read_ipc(data: bytes | None, table: str) -> pa.Table:
    """The rows of an Arrow IPC stream (or file) sent with a request."""
    if not data:
        raise invalid_input(f"table {table!r}: the request carries no Arrow IPC data")
    try:
        return pa.ipc.open_stream(pa.BufferReader(data)).read_all()
    except pa.ArrowInvalid:
        try:
            return pa.ipc.open_file(pa.BufferReader(data)).read_all()
        except pa.ArrowInvalid as exc:
            raise invalid_input(f"table {table!r}: the request data is not Arrow IPC ({exc})") from exc


def ipc_file(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def create(location: str, rows: pa.Table, storage_options: dict | None) -> LanceDataset:
    return write_dataset(rows, location, mode="create", storage_options=storage_options)


def insert(location: str, rows: pa.Table, mode: str | None, storage_options: dict | None) -> LanceDataset:
    mode = (mode or "append").lower()
    if mode not in ("append", "overwrite"):
        raise invalid_input(f"{location}: insert mode must be 'append' or 'overwrite', got {mode!r}")
    return write_dataset(rows, location, mode=mode, storage_options=storage_options)


def merge_insert(ds: LanceDataset, rows: pa.Table, request: Any) -> dict:
    """``MergeInsertIntoTableRequest`` on ``ds``: the counts (``num_inserted_rows``, ...)."""
    on = request.on if isinstance(request.on, (list, tuple)) else [request.on]
    builder = ds.merge_insert(list(on))
    if request.when_matched_update_all:
        builder = builder.when_matched_update_all(request.when_matched_update_all_filt)
    if request.when_not_matched_insert_all:
        builder = builder.when_not_matched_insert_all()
    if request.when_not_matched_by_source_delete:
        builder = builder.when_not_matched_by_source_delete(request.when_not_matched_by_source_delete_filt)
    return dict(builder.execute(rows))


def update(ds: LanceDataset, predicate: str | None, updates: list) -> int:
    """``updates`` as ``[[column, SQL expression], ...]``: the number of rows updated."""
    pairs = {}
    for pair in updates or []:
        if len(pair) != 2:
            raise invalid_input(f"{ds.uri}: each update must be [column, expression], got {pair!r}")
        pairs[pair[0]] = pair[1]
    if not pairs:
        raise invalid_input(f"{ds.uri}: update_table needs at least one [column, expression]")
    result = ds.update(pairs, where=predicate)
    return int(result["num_rows_updated"])


def delete(ds: LanceDataset, predicate: str | None) -> None:
    if not predicate:
        raise invalid_input(f"{ds.uri}: delete_from_table needs a predicate")
    ds.delete(predicate)


def query(ds: LanceDataset, request: Any) -> bytes:
    """A plain scan (filter, columns, offset, limit ``k``); vector and full-text queries are
    refused with the package's UnsupportedOperationError."""
    from lance_namespace.errors import UnsupportedOperationError

    vector = getattr(request, "vector", None)
    if getattr(request, "full_text_query", None) is not None or (vector is not None and _has_vector(vector)):
        raise UnsupportedOperationError(f"{ds.uri}: vector and full-text queries are not supported here")
    columns = None
    if request.columns is not None:
        columns = getattr(request.columns, "column_names", None)
        if columns is None and getattr(request.columns, "column_aliases", None):
            columns = dict(request.columns.column_aliases)
    limit = request.k if request.k and request.k > 0 else None
    table = ds.to_table(columns=columns, filter=request.filter, offset=request.offset, limit=limit,
                        with_row_id=bool(request.with_row_id))
    return ipc_file(table)


def _has_vector(vector: Any) -> bool:
    single = getattr(vector, "single_vector", None)
    multi = getattr(vector, "multi_vector", None)
    return bool(single) or bool(multi)
