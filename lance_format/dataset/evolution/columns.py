"""Schema evolution like pylance: ``add_columns``, ``drop_columns``, ``alter_columns``.

* ``add_columns`` writes, for every fragment, one new data file holding only the new columns
  (new field ids: one above every id in the schema *and* in the fragments' data files, so a
  dropped column's id is never reused while its data is still on disk) and commits a ``Merge``.
  Values come from SQL expressions over existing columns, from Arrow data aligned with the live
  rows in scan order, or (``pa.Field``/``pa.Schema``) nowhere: all-null, metadata only.
  Deleted rows get a copy of a neighbouring value; they are never visible.
* ``drop_columns`` and renames / nullability changes are metadata-only ``Project`` commits.
* casts (``data_type``) rewrite the column into new data files under a new field id (``Merge``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.dataset.evolution.alterations import apply_alterations
from lance_format.dataset.evolution.base import new_column_file, resolve_field, set_merge, set_project
from lance_format.dataset.evolution.base import new_columns_schema as _new_schema
from lance_format.dataset.evolution.udf_columns import udf_fragment_files
from lance_format.dataset.mutations.base import (
    DEFAULT_CONFLICT_RETRIES,
    Prepared,
    evaluate,
    run_mutation,
    storage_version_of,
    transaction_for,
)
from lance_format.dataset.sql.filter import is_typed_null, to_value_expression, value_nullable
from lance_format.dataset.writing.arrow_input import as_reader
from lance_format.errors import InvalidInputError, NewColumnDataError, SchemaMismatchError
from lance_format.proto import file_pb2

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset

# -- add_columns -------------------------------------------------------------------------------
def _sql_batches(ds, fragment, exprs: dict[str, Any], reads: list[str], arrow: pa.Schema, batch_size):
    # expressions of no column (constants) still need the fragment's row count: read row addresses
    scanner = ds.scanner(columns=reads, fragments=[fragment], batch_size=batch_size, with_row_address=not reads)
    for batch in scanner.to_batches():
        columns = [evaluate(batch, exprs[f.name]).cast(f.type) for f in arrow]
        yield pa.RecordBatch.from_arrays(columns, schema=arrow)


class _AlignedReader:
    """Hands out exactly ``n`` rows at a time from a stream of batches."""

    def __init__(self, reader: pa.RecordBatchReader, table: str) -> None:
        self._it = iter(reader)
        self._pending: pa.RecordBatch | None = None
        self._table = table

    def take(self, n: int) -> Iterator[pa.RecordBatch]:
        while n > 0:
            if self._pending is None:
                self._pending = next(self._it, None)
                if self._pending is None:
                    raise NewColumnDataError("Stream ended before producing values for all rows in dataset",
                                            table=self._table)
            batch = self._pending
            piece = batch.slice(0, min(n, batch.num_rows))
            self._pending = batch.slice(piece.num_rows) if piece.num_rows < batch.num_rows else None
            n -= piece.num_rows
            if piece.num_rows:
                yield piece

    def finish(self) -> None:
        rest = self._pending.num_rows if self._pending is not None else 0
        rest += sum(b.num_rows for b in self._it)
        if rest:
            raise NewColumnDataError("Stream produced more values than expected for dataset", table=self._table)


def add_columns(
    ds: LanceDataset,
    transforms: Any,
    read_columns: list[str] | None = None,
    reader_schema: pa.Schema | None = None,
    batch_size: int | None = None,
    *,
    transaction_properties: Mapping[str, str] | None = None,
    commit_message: str | None = None,
) -> None:
    """Add columns (dict of SQL expressions, aligned Arrow data, a batch UDF, or all-null fields)."""
    if isinstance(transforms, pa.Field):
        transforms = [transforms]
    if isinstance(transforms, list) and transforms and all(isinstance(f, pa.Field) for f in transforms):
        transforms = pa.schema(transforms)

    def prepare(current: LanceDataset) -> Prepared:
        prepared = Prepared(transaction_for(current, transaction_properties, commit_message), None,
                            storage_version=storage_version_of(current))
        fragments = current.get_fragments()
        if isinstance(transforms, pa.Schema):
            new = _new_schema(current, transforms)
            for field in transforms:
                if not field.nullable:
                    raise InvalidInputError(f"column {field.name!r} added without data must be nullable",
                                            table=current.uri, column=field.name)
            metas = [f.proto for f in fragments]
        elif isinstance(transforms, Mapping):
            if not transforms:
                raise InvalidInputError("add_columns needs at least one column", table=current.uri)
            exprs, reads, fields = {}, [], []
            for name, sql in transforms.items():
                expr, dtype, cols = to_value_expression(sql, current.schema)
                exprs[name] = expr
                fields.append(pa.field(name, dtype, nullable=value_nullable(sql, current.schema)))
                reads += [c for c in cols if c not in reads]
            arrow = pa.schema(fields)
            new = _new_schema(current, arrow)
            if all(is_typed_null(sql) for sql in transforms.values()) and \
                    storage_version_of(current) != "0.1":
                # only CAST(NULL AS t) columns: metadata only, as pylance (readers fill in nulls)
                metas = [f.proto for f in fragments]
            else:
                metas = [new_column_file(current, f, new,
                                         _sql_batches(current, f, exprs, reads, arrow, batch_size), prepared)
                         for f in fragments]
        elif callable(transforms):
            metas, new = udf_fragment_files(current, transforms, read_columns, batch_size, prepared)
        else:
            reader = as_reader(transforms, reader_schema)
            new = _new_schema(current, reader.schema)
            aligned = _AlignedReader(reader, current.uri)
            metas = [new_column_file(current, f, new, aligned.take(f.count_rows()), prepared) for f in fragments]
            aligned.finish()
        # every branch above sets `new` or raises
        fields = list(current.manifest.fields) + new.to_protos()  # type: ignore[union-attr]
        set_merge(current, prepared, metas, fields)
        return prepared

    # Arrow data is consumed by the first attempt, so only recomputable transforms are retried.
    recomputable = isinstance(transforms, (pa.Schema, Mapping)) or callable(transforms)
    cache = getattr(transforms, "cache", None)
    # a checkpoint's fragments belong to the version it was made on: no retries on a later one
    run_mutation(ds, prepare, conflict_retries=DEFAULT_CONFLICT_RETRIES if recomputable and cache is None else 0)
    if cache is not None:
        cache.cleanup()


# -- merge (pylance's LanceDataset.merge: new columns joined on a key) ---------------------------
def _unique_right(right: pa.Table, key: str) -> pa.Table:
    """One row per key, the last one winning (as pylance resolves repeated keys)."""
    positions = pa.array(range(right.num_rows), pa.int64())
    last = right.append_column("__position", positions).group_by(key).aggregate([("__position", "max")])
    return right.take(last.column("__position_max"))


def _joined_batches(ds, fragment, left_on: str, keys: pa.Array, values: pa.Table, batch_size):
    for batch in ds.scanner(columns=[left_on], fragments=[fragment], batch_size=batch_size).to_batches():
        # a null key matches a null key, as in pylance's join; no match gives a null row
        where = pc.index_in(batch.column(0), value_set=keys)
        yield pa.RecordBatch.from_arrays([c.take(where).combine_chunks() for c in values.columns],
                                         schema=values.schema)


def merge_on_key(
    ds: LanceDataset,
    data: Any,
    left_on: str,
    right_on: str | None = None,
    schema: pa.Schema | None = None,
    *,
    batch_size: int | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    commit_message: str | None = None,
) -> None:
    """Add the columns of ``data`` by a left join on ``left_on = right_on`` (one ``Merge`` commit).

    Rows without a match get nulls; null keys match each other (as in pylance); when ``data``
    repeats a key, its last row wins. The right
    side is read into memory once (it is a table of new column values, keyed), then each
    fragment's new data file is written batch by batch.
    """
    right_on = right_on or left_on
    right = as_reader(data, schema).read_all()
    if right_on not in right.schema.names:
        raise SchemaMismatchError(f"Column {right_on} does not exist in the right side dataset",
                                  table=ds.uri, column=right_on)
    new_fields = [f for f in right.schema if f.name != right_on]
    if not new_fields:
        raise InvalidInputError("the data to merge has no columns besides the key", table=ds.uri)
    right = _unique_right(right, right_on)

    def prepare(current: LanceDataset) -> Prepared:
        if left_on not in current.schema.names:
            raise SchemaMismatchError(f"Column {left_on} does not exist in the left side dataset",
                                      table=current.uri, column=left_on)
        for f in new_fields:
            if f.name in current.schema.names:
                raise SchemaMismatchError(f"Column {f.name} exists in both sides of the dataset",
                                          table=current.uri, column=f.name)
        left_type = current.schema.field(left_on).type
        try:
            keys = right.column(right_on).cast(left_type).combine_chunks()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SchemaMismatchError(
                f"cannot join {left_on} ({left_type}) with {right_on} ({right.schema.field(right_on).type}): {exc}",
                table=current.uri, column=left_on) from None
        values = right.select([f.name for f in new_fields])
        arrow = pa.schema(new_fields)
        new = _new_schema(current, arrow)
        prepared = Prepared(transaction_for(current, transaction_properties, commit_message), None,
                            storage_version=storage_version_of(current))
        metas = [new_column_file(current, f, new, _joined_batches(current, f, left_on, keys, values, batch_size),
                                 prepared) for f in current.get_fragments()]
        set_merge(current, prepared, metas, list(current.manifest.fields) + new.to_protos())
        return prepared

    run_mutation(ds, prepare, conflict_retries=DEFAULT_CONFLICT_RETRIES)


# -- drop / alter ------------------------------------------------------------------------------
def _subtree(fields: list[file_pb2.Field], root_id: int) -> set[int]:
    ids = {root_id}
    for f in fields:  # pre-order: parents come before children
        if f.parent_id in ids:
            ids.add(f.id)
    return ids


def drop_columns(ds: LanceDataset, columns: list[str], *, transaction_properties=None, commit_message=None) -> None:
    """Remove columns (top-level or nested ``a.b``) from the schema; data stays until compaction."""
    if isinstance(columns, str):
        columns = [columns]

    def prepare(current: LanceDataset) -> Prepared:
        fields = list(current.manifest.fields)
        gone: set[int] = set()
        for name in columns:
            try:
                gone |= _subtree(fields, resolve_field(current, name).id)
            except InvalidInputError:
                raise InvalidInputError(f"Column {name} does not exist in the dataset", table=current.uri,
                                        column=name) from None
        kept = [f for f in fields if f.id not in gone]
        if not any(f.parent_id == -1 for f in kept):
            raise InvalidInputError("Cannot drop all columns from a dataset", table=current.uri)
        prepared = Prepared(transaction_for(current, transaction_properties, commit_message), None)
        set_project(prepared, kept)
        return prepared

    run_mutation(ds, prepare)


def alter_columns(ds: LanceDataset, *alterations: Mapping[str, Any], transaction_properties=None,
                  commit_message=None) -> None:
    """Rename, change nullability, or safely cast columns (pylance's ``alter_columns``)."""
    for alteration in alterations:
        if not isinstance(alteration, Mapping) or "path" not in alteration:
            raise InvalidInputError("each alteration must be a dict with a 'path'", table=ds.uri)
        unknown = [key for key in alteration if key not in ("path", "name", "nullable", "data_type")]
        if unknown:
            raise InvalidInputError(f"Unknown key: {unknown[0]}. Valid keys are name, nullable, and data_type.",
                                    table=ds.uri)
        if all(alteration.get(key) is None for key in ("name", "nullable", "data_type")):
            raise InvalidInputError("At least one of name, nullable, or data_type must be specified", table=ds.uri)

    def prepare(current: LanceDataset) -> Prepared:
        return apply_alterations(current, alterations, transaction_properties, commit_message)

    run_mutation(ds, prepare)


__all__ = ["add_columns", "merge_on_key", "drop_columns", "alter_columns"]
