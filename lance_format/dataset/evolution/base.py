"""Shared pieces of schema evolution: field lookup by path, new field ids, one new data file
per fragment for new column values, and the ``Merge`` / ``Project`` transactions pylance writes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from lance_format.dataset.mutations.base import Prepared, write_new_fragments
from lance_format.errors import InvalidInputError, SchemaMismatchError
from lance_format.file.legacy_v0_1_writer import batches_like
from lance_format.proto import file_pb2, table_pb2
from lance_format.schema import LanceSchema
from lance_format.table.legacy_manifest import fragment_batch_rows

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset
    from lance_format.dataset.fragment import LanceFragment

# pylance 14 sets unnamed varint fields on Merge (4) and Project (2) to 1 ("preserves_nullability");
# Project leaves its field unset when the alteration changes nullability, Merge when it adds a
# non-null field.
_MERGE_FLAG = b"\x20\x01"
_PROJECT_FLAG = b"\x10\x01"


def next_field_id_of(manifest: table_pb2.Manifest) -> int:
    """One above every field id of the schema and of every data file (a dropped column's id is
    never reused while its data is on disk)."""
    ids = [f.id for f in manifest.fields]
    ids += [i for frag in manifest.fragments for d in frag.files for i in d.fields]
    return max(ids, default=-1) + 1


_RUST_NAMES = {"string": "Utf8", "large_string": "LargeUtf8", "bool": "Boolean", "binary": "Binary",
               "large_binary": "LargeBinary", "halffloat": "Float16", "float": "Float32", "double": "Float64"}


def _rust_name(data_type: pa.DataType) -> str:
    """A type as Arrow's Rust library prints it (``Int64``, ``Float32``, ``Utf8``), which pylance's
    messages show; other types as pyarrow prints them."""
    text = str(data_type)
    if text in _RUST_NAMES:
        return _RUST_NAMES[text]
    if pa.types.is_integer(data_type):
        return text.capitalize().replace("Uint", "UInt")
    return text


def new_columns_schema(ds: LanceDataset, arrow: pa.Schema) -> LanceSchema:
    """The schema of columns to add: new names only, ids above every id in use."""
    for field in arrow:
        if field.name not in ds.schema.names:
            continue
        existing = ds.schema.field(field.name).type
        if existing != field.type:  # pylance's wording, with Arrow's Rust type names
            raise SchemaMismatchError(f"Type conflicts between {field.name}({_rust_name(existing)}) and "
                                      f"{field.name}({_rust_name(field.type)})", table=ds.uri, column=field.name)
        raise InvalidInputError(f"Column {field.name} already exists in the dataset", table=ds.uri, column=field.name)
    return LanceSchema.from_arrow(arrow, first_id=next_field_id_of(ds.manifest))


def resolve_field(ds: LanceDataset, path: str) -> file_pb2.Field:
    """The schema field at a dotted ``path`` (``a.b`` is field ``b`` of struct ``a``)."""
    fields = list(ds.manifest.fields)
    parent = -1
    found = None
    for part in path.split("."):
        found = next((f for f in fields if f.parent_id == parent and f.name == part), None)
        if found is None:
            raise InvalidInputError(f'Column "{path}" does not exist in the dataset', table=ds.uri, column=path)
        parent = found.id
    return found  # type: ignore[return-value]  # split() yields at least one part


def set_merge(ds: LanceDataset, prepared: Prepared, fragments, fields: list[file_pb2.Field]) -> None:
    body = prepared.txn.merge
    body.SetInParent()
    body.fragments.extend(fragments)
    body.schema.extend(fields)
    # like pylance, a merge that brings a non-null field does not claim to preserve nullability:
    # rows committed concurrently (a stale append) would read as nulls in it
    existing = {f.id for f in ds.manifest.fields}
    if all(f.nullable for f in fields if f.id not in existing):
        body.MergeFromString(_MERGE_FLAG)


def set_project(prepared: Prepared, fields: list[file_pb2.Field], preserves_nullability: bool = True) -> None:
    body = prepared.txn.project
    body.SetInParent()
    body.schema.extend(fields)
    if preserves_nullability:
        body.MergeFromString(_PROJECT_FLAG)


# -- physical alignment ------------------------------------------------------------------------
def _to_physical(fragment: LanceFragment, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
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


def new_column_file(ds: LanceDataset, fragment: LanceFragment, schema: LanceSchema,
                   batches: Iterable[pa.RecordBatch], prepared: Prepared) -> table_pb2.DataFragment:
    arrow = schema.to_arrow()
    # a legacy (0.1) fragment's new file must have the same row groups as its existing files
    with batches_like(fragment_batch_rows(ds.object_store, fragment.proto)):
        written = write_new_fragments(ds, arrow, _to_physical(fragment, batches), prepared, lance_schema=schema,
                                      max_rows_per_file=max(1, fragment.physical_rows))
    if len(written) != 1 or written[0].physical_rows != fragment.physical_rows:
        raise InvalidInputError(f"new column data does not cover the {fragment.physical_rows} rows of fragment "
                                f"{fragment.fragment_id}", table=ds.uri, version=ds.version)
    updated = table_pb2.DataFragment()
    updated.CopyFrom(fragment.proto)
    updated.files.add().CopyFrom(written[0].files[0])
    return updated


__all__ = ["next_field_id_of", "resolve_field", "set_merge", "set_project", "new_column_file"]
