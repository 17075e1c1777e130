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

from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

import pyarrow as pa

from lance_format.dataset.evolution.alterations import apply_alterations
from lance_format.dataset.evolution.base import new_column_file, next_field_id_of, resolve_field, set_merge, set_project
from lance_format.dataset.mutations.base import (
    DEFAULT_CONFLICT_RETRIES,
    Prepared,
    evaluate,
    run_mutation,
    storage_version_of,
    transaction_for,
)
from lance_format.dataset.sql.filter import to_value_expression
from lance_format.dataset.writing.arrow_input import as_reader
from lance_format.errors import InvalidInputError
from lance_format.proto import file_pb2
from lance_format.schema import LanceSchema

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset

# -- add_columns -------------------------------------------------------------------------------
def _new_schema(ds: "LanceDataset", arrow: pa.Schema) -> LanceSchema:
    for name in arrow.names:
        if name in ds.schema.names:
            raise InvalidInputError(f"Column {name} already exists in the dataset", table=ds.uri, column=name)
    return LanceSchema.from_arrow(arrow, first_id=next_field_id_of(ds.manifest))


def _sql_batches(ds, fragment, exprs: dict[str, Any], reads: list[str], arrow: pa.Schema, batch_size):
    scanner = ds.scanner(columns=reads, fragments=[fragment], batch_size=batch_size)
    for batch in scanner.to_batches():
        columns = [evaluate(batch, exprs[f.name]).cast(f.type) for f in arrow]
        yield pa.RecordBatch.from_arrays(columns, schema=arrow)


def _udf_batches(ds, fragment, udf: Callable, reads: list[str] | None, batch_size):
    scanner = ds.scanner(columns=reads, fragments=[fragment], batch_size=batch_size)
    for batch in scanner.to_batches():
        out = udf(batch)
        if not isinstance(out, pa.RecordBatch):
            out = pa.RecordBatch.from_pandas(out, preserve_index=False) if hasattr(out, "to_numpy") else \
                pa.RecordBatch.from_pydict(out)
        if out.num_rows != batch.num_rows:
            raise InvalidInputError(f"the UDF returned {out.num_rows} rows for a batch of {batch.num_rows}",
                                    table=ds.uri)
        yield out


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
                    raise InvalidInputError("Stream ended before producing values for all rows in dataset",
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
            raise InvalidInputError("Stream produced more values than expected for dataset", table=self._table)


def add_columns(
    ds: "LanceDataset",
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

    def prepare(current: "LanceDataset") -> Prepared:
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
                if pa.types.is_null(dtype):
                    raise InvalidInputError(f"cannot infer a type for column {name!r} from {sql!r}",
                                            table=current.uri, column=name)
                exprs[name] = expr
                fields.append(pa.field(name, dtype))
                reads += [c for c in cols if c not in reads]
            arrow = pa.schema(fields)
            new = _new_schema(current, arrow)
            metas = [new_column_file(current, f, new, _sql_batches(current, f, exprs, reads, arrow, batch_size),
                                    prepared) for f in fragments]
        elif callable(transforms):
            batches = [(_udf_batches(current, f, transforms, read_columns, batch_size), f) for f in fragments]
            metas, new = [], None
            for gen, fragment in batches:
                first = next(gen, None)
                if first is None:
                    raise InvalidInputError("the UDF produced no data", table=current.uri)
                new = new or _new_schema(current, first.schema)

                def chain(head=first, rest=gen):
                    yield head
                    yield from rest

                metas.append(new_column_file(current, fragment, new, chain(), prepared))
            if new is None:
                raise InvalidInputError("cannot add columns with a UDF to a table without rows", table=current.uri)
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
    run_mutation(ds, prepare, conflict_retries=DEFAULT_CONFLICT_RETRIES if recomputable else 0)


# -- drop / alter ------------------------------------------------------------------------------
def _subtree(fields: list[file_pb2.Field], root_id: int) -> set[int]:
    ids = {root_id}
    for f in fields:  # pre-order: parents come before children
        if f.parent_id in ids:
            ids.add(f.id)
    return ids


def drop_columns(ds: "LanceDataset", columns: list[str], *, transaction_properties=None, commit_message=None) -> None:
    """Remove columns (top-level or nested ``a.b``) from the schema; data stays until compaction."""
    if isinstance(columns, str):
        columns = [columns]

    def prepare(current: "LanceDataset") -> Prepared:
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


def alter_columns(ds: "LanceDataset", *alterations: Mapping[str, Any], transaction_properties=None,
                  commit_message=None) -> None:
    """Rename, change nullability, or safely cast columns (pylance's ``alter_columns``)."""
    for alteration in alterations:
        if not isinstance(alteration, Mapping) or "path" not in alteration:
            raise InvalidInputError("each alteration must be a dict with a 'path'", table=ds.uri)
        unknown = set(alteration) - {"path", "name", "nullable", "data_type"}
        if unknown:
            raise InvalidInputError(f"unknown alteration keys {sorted(unknown)}", table=ds.uri)

    def prepare(current: "LanceDataset") -> Prepared:
        return apply_alterations(current, alterations, transaction_properties, commit_message)

    run_mutation(ds, prepare)


__all__ = ["add_columns", "drop_columns", "alter_columns"]
