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

from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping

import numpy as np
import pyarrow as pa

from lance_format.dataset.mutation_base import (
    Prepared,
    evaluate,
    run_mutation,
    storage_version_of,
    transaction_for,
    write_new_fragments,
)
from lance_format.dataset.sql_filter import to_value_expression
from lance_format.errors import InvalidInputError
from lance_format.file.legacy_v0_1_writer import batches_like, fragment_batch_rows
from lance_format.proto import file_pb2, table_pb2
from lance_format.schema import LanceSchema

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset
    from lance_format.dataset.fragment import LanceFragment

# pylance 14 sets unnamed varint fields on Merge (4) and Project (2) to 1; Project leaves its
# field unset when the alteration changes nullability ("preserves_nullability").
_MERGE_FLAG = b"\x20\x01"
_PROJECT_FLAG = b"\x10\x01"


def next_field_id(ds: "LanceDataset") -> int:
    ids = [f.id for f in ds.manifest.fields]
    ids += [i for frag in ds.manifest.fragments for d in frag.files for i in d.fields]
    return max(ids, default=-1) + 1


def _merge_txn(ds: "LanceDataset", prepared: Prepared, fragments, fields: list[file_pb2.Field]) -> None:
    body = prepared.txn.merge
    body.SetInParent()
    body.fragments.extend(fragments)
    body.schema.extend(fields)
    body.MergeFromString(_MERGE_FLAG)


def _project_txn(prepared: Prepared, fields: list[file_pb2.Field], preserves_nullability: bool = True) -> None:
    body = prepared.txn.project
    body.SetInParent()
    body.schema.extend(fields)
    if preserves_nullability:
        body.MergeFromString(_PROJECT_FLAG)


# -- physical alignment ------------------------------------------------------------------------
def _to_physical(fragment: "LanceFragment", batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Spread batches of live-row values over the fragment's physical rows (deleted rows get
    the next live row's value, trailing ones the last's)."""
    live = fragment.live_offsets().astype(np.int64)
    physical = fragment.physical_rows
    position = 0
    for batch in batches:
        n = batch.num_rows
        if n == 0:
            continue
        lo = int(live[position - 1]) + 1 if position else 0
        end = position + n
        hi = int(live[end - 1]) + 1 if end < live.size else physical
        index = np.searchsorted(live[position:end], np.arange(lo, hi))
        yield batch.take(pa.array(np.minimum(index, n - 1)))
        position = end


def _fragment_file(ds: "LanceDataset", fragment: "LanceFragment", schema: LanceSchema,
                   batches: Iterable[pa.RecordBatch], prepared: Prepared) -> table_pb2.DataFragment:
    arrow = schema.to_arrow()
    with batches_like(fragment_batch_rows(ds._store, fragment.metadata)):  # legacy files must align
        written = write_new_fragments(ds, arrow, _to_physical(fragment, batches), prepared, lance_schema=schema,
                                      max_rows_per_file=max(1, fragment.physical_rows))
    if len(written) != 1 or written[0].physical_rows != fragment.physical_rows:
        raise InvalidInputError(f"new column data does not cover the {fragment.physical_rows} rows of fragment "
                                f"{fragment.fragment_id}", table=ds.uri, version=ds.version)
    updated = table_pb2.DataFragment()
    updated.CopyFrom(fragment.metadata)
    updated.files.add().CopyFrom(written[0].files[0])
    return updated


# -- add_columns -------------------------------------------------------------------------------
def _new_schema(ds: "LanceDataset", arrow: pa.Schema) -> LanceSchema:
    for name in arrow.names:
        if name in ds.schema.names:
            raise InvalidInputError(f"Column {name} already exists in the dataset", table=ds.uri, column=name)
    return LanceSchema.from_arrow(arrow, first_id=next_field_id(ds))


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
            metas = [f.metadata for f in fragments]
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
            metas = [_fragment_file(current, f, new, _sql_batches(current, f, exprs, reads, arrow, batch_size),
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

                metas.append(_fragment_file(current, fragment, new, chain(), prepared))
            if new is None:
                raise InvalidInputError("cannot add columns with a UDF to a table without rows", table=current.uri)
        else:
            from lance_format.dataset.write import _as_reader

            reader = _as_reader(transforms, reader_schema)
            new = _new_schema(current, reader.schema)
            aligned = _AlignedReader(reader, current.uri)
            metas = [_fragment_file(current, f, new, aligned.take(f.count_rows()), prepared) for f in fragments]
            aligned.finish()
        fields = list(current.manifest.fields) + new.to_protos()
        _merge_txn(current, prepared, metas, fields)
        return prepared

    # Arrow data is consumed by the first attempt, so only recomputable transforms are retried.
    recomputable = isinstance(transforms, (pa.Schema, Mapping)) or callable(transforms)
    run_mutation(ds, prepare, **({} if recomputable else {"conflict_retries": 0}))


# -- drop / alter ------------------------------------------------------------------------------
def _resolve(ds: "LanceDataset", path: str) -> file_pb2.Field:
    fields = list(ds.manifest.fields)
    parent = -1
    found = None
    for part in path.split("."):
        found = next((f for f in fields if f.parent_id == parent and f.name == part), None)
        if found is None:
            raise InvalidInputError(f'Column "{path}" does not exist in the dataset', table=ds.uri, column=path)
        parent = found.id
    return found


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
                gone |= _subtree(fields, _resolve(current, name).id)
            except InvalidInputError:
                raise InvalidInputError(f"Column {name} does not exist in the dataset", table=current.uri,
                                        column=name) from None
        kept = [f for f in fields if f.id not in gone]
        if not any(f.parent_id == -1 for f in kept):
            raise InvalidInputError("Cannot drop all columns from a dataset", table=current.uri)
        prepared = Prepared(transaction_for(current, transaction_properties, commit_message), None)
        _project_txn(prepared, kept)
        return prepared

    run_mutation(ds, prepare)


def _castable(source: pa.DataType, target: pa.DataType) -> bool:
    t = pa.types
    pairs = [
        (t.is_integer, t.is_integer), (t.is_floating, t.is_floating),
        (lambda x: t.is_string(x) or t.is_large_string(x), lambda x: t.is_string(x) or t.is_large_string(x)),
        (lambda x: t.is_binary(x) or t.is_large_binary(x), lambda x: t.is_binary(x) or t.is_large_binary(x)),
        (lambda x: t.is_timestamp(x), lambda x: t.is_timestamp(x)),
    ]
    if any(a(source) and b(target) for a, b in pairs):
        return True
    lists = (t.is_list, t.is_large_list)
    if any(f(source) for f in lists) and any(f(target) for f in lists):
        return _castable(source.value_type, target.value_type)
    if t.is_fixed_size_list(source) and t.is_fixed_size_list(target):
        return source.list_size == target.list_size and _castable(source.value_type, target.value_type)
    return False


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
        from lance_format.dataset.schema_cast import apply_alterations

        return apply_alterations(current, alterations, transaction_properties, commit_message)

    run_mutation(ds, prepare)


__all__ = ["add_columns", "drop_columns", "alter_columns", "next_field_id"]
