"""``add_columns`` with a batch UDF: the new columns' batches and data files, and the checkpoint.

A :class:`~lance_format.udf.BatchUDF` with a ``checkpoint_file`` saves each computed batch and
each finished fragment in pylance's SQLite tables; the fragment is saved as the JSON pylance's
Rust core writes there (serde's shape of its ``Fragment``: compact, absent optional members left
out, its own member order), so either engine resumes a run the other one started.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lance_format.dataset.evolution.base import new_column_file, new_columns_schema
from lance_format.dataset.fragment_metadata import FragmentMetadata, fragment_from_proto, fragment_to_proto
from lance_format.dataset.mutations.base import Prepared
from lance_format.errors import InvalidInputError
from lance_format.schema import LanceSchema
from lance_format.udf import BatchUDF, as_record_batch, checked_output

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset


def udf_output_schema(source: Any, udf: Callable, reads: list[str] | None) -> pa.Schema:
    """The schema every output of ``udf`` must have: a BatchUDF's declared ``output_schema``, else
    that of its output for the first row of ``source`` (a dataset or fragment), which a BatchUDF
    then keeps as its ``output_schema`` (as pylance does)."""
    declared = getattr(udf, "output_schema", None)
    if declared is not None:
        return declared
    sample = next(iter(source.to_batches(limit=1, columns=reads)), None)
    if sample is None:
        raise InvalidInputError("cannot add columns with a UDF to a table without rows")
    schema = as_record_batch(udf(sample)).schema
    if isinstance(udf, BatchUDF):
        udf.output_schema = schema
    return schema


def udf_batches(ds, fragment, udf: Callable, reads: list[str] | None, batch_size, expected: pa.Schema):
    """The UDF's output for each batch of ``fragment``; a checkpointed batch is not computed again."""
    scanner = ds.scanner(columns=reads, fragments=[fragment], batch_size=batch_size)
    cache: Any = getattr(udf, "cache", None)  # a BatchUDF's checkpoint (pylance's BatchUDFCheckpoint)
    for index, batch in enumerate(scanner.to_batches()):
        info = None if cache is None else cache.BatchInfo(fragment.fragment_id, index)
        saved = None if info is None else cache.get_batch(info)
        if saved is not None:
            yield saved
            continue
        out = checked_output(udf(batch), expected)
        if out.num_rows != batch.num_rows:
            raise InvalidInputError(f"the UDF returned {out.num_rows} rows for a batch of {batch.num_rows}",
                                    table=ds.uri)
        if info is not None:
            cache.insert_batch(info, out)
        yield out


def checkpoint_fragment_json(meta: FragmentMetadata) -> str:
    """``meta`` as pylance's core stores a finished fragment in a checkpoint's ``fragments`` table."""
    plain = meta.to_json()
    out: dict[str, Any] = {"id": plain["id"], "files": [
        {"path": f["path"], "fields": f["fields"], "column_indices": f["column_indices"],
         "file_major_version": f["file_major_version"], "file_minor_version": f["file_minor_version"],
         "file_size_bytes": f["file_size_bytes"], "base_id": f["base_id"]} for f in plain["files"]]}
    for key in ("deletion_file", "row_id_meta"):
        if plain[key] is not None:
            out[key] = plain[key]
    out["physical_rows"] = plain["physical_rows"]
    for key in ("last_updated_at_version_meta", "created_at_version_meta"):
        if plain[key] is not None:
            out[key] = plain[key]
    if plain["overlays"]:
        out["overlays"] = plain["overlays"]
    return json.dumps(out, separators=(",", ":"))


def udf_fragment_files(current: LanceDataset, udf: Callable, read_columns: list[str] | None, batch_size,
                       prepared: Prepared) -> tuple[list, LanceSchema]:
    """Each fragment with a new data file of the UDF's columns, and the new fields' schema.

    With a checkpoint, a fragment finished by an earlier, failed run (of either engine) is taken
    from it, and a fragment finished now is saved to it; its data file is then no longer removed
    if this run fails (the next run needs it)."""
    cache: Any = getattr(udf, "cache", None)
    metas: list = []
    try:
        expected = udf_output_schema(current, udf, read_columns)
    except InvalidInputError as exc:
        raise exc.with_context(table=current.uri) from None
    new = new_columns_schema(current, expected)
    for fragment in current.get_fragments():
        saved = None if cache is None else cache.get_fragment(fragment.fragment_id)
        if saved is not None:
            metas.append(fragment_to_proto(FragmentMetadata.from_json(saved)))
            continue
        kept = len(prepared.aborts)
        batches = udf_batches(current, fragment, udf, read_columns, batch_size, expected)
        metas.append(new_column_file(current, fragment, new, batches, prepared))
        if cache is not None:
            cache.insert_fragment(fragment.fragment_id, checkpoint_fragment_json(fragment_from_proto(metas[-1])))
            del prepared.aborts[kept:]
    return metas, new


__all__ = ["checkpoint_fragment_json", "udf_batches", "udf_fragment_files", "udf_output_schema"]
