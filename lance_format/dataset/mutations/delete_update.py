"""Row mutations with pylance's API and transactions: ``delete``, ``update``, ``merge_insert``.

* ``delete(predicate)`` writes, for every fragment that loses rows, a new deletion file with the
  union of old and new deleted offsets (fragments left empty are dropped) and commits a
  ``Delete`` (``updated_fragments``, ``deleted_fragment_ids``, ``predicate``).
* ``update(values, where)`` rewrites the matching rows as new fragments (values are SQL
  expressions over the row, or literals, safely cast to the column type) and deletes the old
  copies, in one ``Update``. With stable row ids the new fragments carry the rows' ids, so
  ``_rowid`` and ``_row_created_at_version`` survive; ``_row_last_updated_at_version`` becomes
  the commit's version.
* ``merge_insert(on)`` returns the builder of :mod:`lance_format.dataset.mutations.merge_insert`.

Every mutation commits even when nothing matched (as pylance does), accepts
``transaction_properties`` / ``commit_message`` and moves the dataset object to the new version.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.dataset.mutations.base import (
    DEFAULT_CONFLICT_RETRIES,
    DEFAULT_RETRY_TIMEOUT,
    Prepared,
    apply_deletions,
    attach_row_ids,
    cast_to,
    concat,
    evaluate,
    field_ids_of,
    run_mutation,
    split_addresses,
    storage_version_of,
    table_context,
    transaction_for,
    write_new_fragments,
)
from lance_format.dataset.mutations.merge_insert import MergeInsertBuilder
from lance_format.dataset.sql.filter import to_expression, to_value_expression
from lance_format.errors import InvalidInputError, UnsupportedFeatureError
from lance_format.schema.blob import binary_read_field, is_blob_field

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset
    from lance_format.dataset.mutations.merge_insert import MergeInsertBuilder

ROW_ADDRESS = "_rowaddr"
ROW_ID = "_rowid"


def _predicate_text(predicate: str | pc.Expression) -> str:
    if isinstance(predicate, str):
        return predicate
    if isinstance(predicate, pc.Expression):
        return str(predicate)
    raise InvalidInputError(f"a predicate must be a SQL string or a pyarrow expression, got {type(predicate).__name__}")


def _matching_addresses(ds: LanceDataset, predicate) -> np.ndarray:
    scanner = ds.scanner(columns=[], filter=predicate, with_row_address=True)
    return concat([b.column(ROW_ADDRESS).to_numpy(zero_copy_only=False) for b in scanner.to_batches()])


def delete(
    ds: LanceDataset,
    predicate: str | pc.Expression,
    *,
    conflict_retries: int = DEFAULT_CONFLICT_RETRIES,
    retry_timeout: timedelta = DEFAULT_RETRY_TIMEOUT,
    transaction_properties: Mapping[str, str] | None = None,
    commit_message: str | None = None,
) -> dict[str, int]:
    """Delete the rows matching ``predicate``; returns ``{"num_deleted_rows": n}``."""
    with table_context(ds):
        text = _predicate_text(predicate)
        to_expression(predicate, ds.schema)  # validate before doing any work

    def prepare(current: LanceDataset) -> Prepared:
        prepared = Prepared(transaction_for(current, transaction_properties, commit_message), None)
        addresses = _matching_addresses(current, predicate)
        offsets = split_addresses(addresses)
        updated, removed = apply_deletions(current, offsets, prepared)
        body = prepared.txn.delete
        body.SetInParent()
        body.updated_fragments.extend(updated)
        body.deleted_fragment_ids.extend(removed)
        body.predicate = text
        prepared.affected_rows = offsets
        prepared.result = {"num_deleted_rows": int(addresses.size)}
        return prepared

    return run_mutation(ds, prepare, conflict_retries=conflict_retries, retry_timeout=retry_timeout)


def _compile_values(ds: LanceDataset, values: Mapping[str, Any]) -> dict[str, tuple[Any, list[str]]]:
    if not isinstance(values, Mapping) or not values:
        raise InvalidInputError("update needs a non-empty dict of column -> SQL expression", table=ds.uri)
    schema = ds.schema
    compiled: dict[str, tuple[Any, list[str]]] = {}
    for column, value in values.items():
        if column not in schema.names:
            raise InvalidInputError(
                f"Column {column!r} does not exist in dataset schema (columns: {schema.names})",
                table=ds.uri, version=ds.version, column=column,
            )
        target = schema.field(column).type
        if isinstance(value, str):
            expr, _dtype, reads = to_value_expression(value, schema)
            compiled[column] = (expr, reads)
        else:
            try:
                scalar = value if isinstance(value, pa.Scalar) else pa.scalar(value)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
                raise InvalidInputError(f"cannot use {value!r} as a value for column {column!r}: {exc}",
                                        table=ds.uri, column=column) from None
            compiled[column] = (cast_to(pa.array([scalar.as_py()], scalar.type), target, column=column,
                                        table=ds.uri)[0], [])
    return compiled


def update(
    ds: LanceDataset,
    updates: Mapping[str, Any],
    where: str | pc.Expression | None = None,
    *,
    conflict_retries: int = DEFAULT_CONFLICT_RETRIES,
    retry_timeout: timedelta = DEFAULT_RETRY_TIMEOUT,
    data_storage_version: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    commit_message: str | None = None,
) -> dict[str, int]:
    """Set ``updates`` (column -> SQL expression or literal) on the rows matching ``where``.

    Returns ``{"num_rows_updated": n}`` like pylance. New files use the table's file version
    (``data_storage_version`` may only name that version).
    """
    with table_context(ds):
        if data_storage_version is not None and data_storage_version != ds.data_storage_version:
            raise UnsupportedFeatureError(
                f"writing {data_storage_version} files into a {ds.data_storage_version} table is not supported")
        compiled = _compile_values(ds, updates)
        if where is not None:
            to_expression(where, ds.schema)

    def prepare(current: LanceDataset) -> Prepared:
        prepared = Prepared(transaction_for(current, transaction_properties, commit_message), None,
                            storage_version=storage_version_of(current))
        # blob columns are rewritten from their bytes (the writer stores them anew)
        blob_fields = {f.name: f for f in current.lance_schema.fields if is_blob_field(f)}
        schema = pa.schema([binary_read_field(blob_fields[f.name]) if f.name in blob_fields else f
                            for f in current.schema], metadata=current.schema.metadata)
        blobs = "all_binary" if blob_fields else None
        stable = current.has_stable_row_ids
        names = schema.names
        addresses: list[np.ndarray] = []
        row_ids: list[np.ndarray] = []

        def rows() -> Iterator[pa.RecordBatch]:
            scanner = current.scanner(columns=names, filter=where, with_row_address=True, with_row_id=stable,
                                      blob_handling=blobs)
            for batch in scanner.to_batches():
                addresses.append(batch.column(ROW_ADDRESS).to_numpy(zero_copy_only=False))
                if stable:
                    row_ids.append(batch.column(ROW_ID).to_numpy(zero_copy_only=False))
                columns = []
                for field in schema:
                    if field.name in compiled:
                        expr, _reads = compiled[field.name]
                        value = evaluate(batch, expr)
                        columns.append(cast_to(value, field.type, column=field.name, table=current.uri))
                    else:
                        columns.append(batch.column(field.name))
                yield pa.RecordBatch.from_arrays(columns, schema=schema)

        new_fragments = write_new_fragments(current, schema, rows(), prepared)
        all_addresses = concat(addresses)
        if stable:
            attach_row_ids(new_fragments, concat(row_ids))
        offsets = split_addresses(all_addresses)
        updated, removed = apply_deletions(current, offsets, prepared)
        body = prepared.txn.update
        body.SetInParent()
        body.removed_fragment_ids.extend(removed)
        body.updated_fragments.extend(updated)
        body.new_fragments.extend(new_fragments)
        body.fields_for_preserving_frag_bitmap.extend(field_ids_of(current, [n for n in names if n in compiled]))
        prepared.affected_rows = offsets
        prepared.result = {"num_rows_updated": int(all_addresses.size)}
        return prepared

    return run_mutation(ds, prepare, conflict_retries=conflict_retries, retry_timeout=retry_timeout)


def merge_insert(ds: LanceDataset, on: str | Iterable[str] | None) -> MergeInsertBuilder:
    """A builder for an upsert / insert-if-not-exists / replace-range operation keyed on ``on``."""

    return MergeInsertBuilder(ds, on)


__all__ = ["delete", "update", "merge_insert"]
