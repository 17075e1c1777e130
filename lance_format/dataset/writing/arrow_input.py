"""The inputs the write APIs accept (tables, batches, readers, Arrow streams, iterables of
batches, pandas frames) turned into one ``RecordBatchReader``, without materializing them."""

from __future__ import annotations

from typing import Iterable, Iterator

import pyarrow as pa

from lance_format.errors import InvalidInputError


def as_reader(data, schema: pa.Schema | None) -> pa.RecordBatchReader:
    """Turn any supported input into a RecordBatchReader without materializing it."""
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency
        pd = None
    if pd is not None and isinstance(data, pd.DataFrame):
        data = pa.Table.from_pandas(data, schema=schema)
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if isinstance(data, pa.Table):
        if schema is not None and not data.schema.equals(schema):
            data = data.cast(schema)
        return data.to_reader()
    if isinstance(data, pa.RecordBatchReader):
        return data
    if hasattr(data, "__arrow_c_stream__"):
        return pa.RecordBatchReader.from_stream(data, schema=schema)
    if isinstance(data, Iterable):
        iterator = iter(data)
        if schema is None:
            first = next(iterator, None)
            if first is None:
                raise InvalidInputError("cannot infer a schema from an empty iterable; pass schema=")
            schema = first.schema

            def chain(head=first, rest=iterator) -> Iterator[pa.RecordBatch]:
                yield head
                yield from rest

            iterator = chain()
        return pa.RecordBatchReader.from_batches(schema, iterator)
    raise InvalidInputError(f"cannot write data of type {type(data).__name__} to a Lance table")


__all__ = ["as_reader"]
