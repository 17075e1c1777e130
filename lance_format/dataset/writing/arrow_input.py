"""The inputs the write APIs accept (tables, batches, readers, Arrow streams, iterables of
batches or tables, pandas frames, dicts of columns, lists of row dicts or of pydantic models, datasets, scanners) turned into one
``RecordBatchReader``, without materializing what streams; anything else is refused by type."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyarrow as pa

from lance_format.errors import InvalidInputError
from lance_format.schema.arrow_checks import check_field_names, check_table, checked_batches

_WHAT = "the data given to write"


def as_reader(data: Any, schema: pa.Schema | None) -> pa.RecordBatchReader:
    """Turn any supported input into a RecordBatchReader without materializing it; refuse
    column names official Lance cannot read back (empty, repeated)."""
    reader = _as_reader(data, schema)
    check_field_names(reader.schema)
    return reader


def _as_reader(data: Any, schema: pa.Schema | None) -> pa.RecordBatchReader:
    """Arrow data made elsewhere (tables, batches, readers, Arrow streams, iterables) is checked
    for malformed arrays (:mod:`lance_format.schema.arrow_checks`) before anything computes on
    it; what pyarrow builds here from pandas or Python objects is well formed."""
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency
        pd = None
    if pd is not None and isinstance(data, pd.DataFrame):
        data = pa.Table.from_pandas(data, schema=schema)
    if isinstance(data, (str, bytes)) or data is None:
        raise InvalidInputError(f"cannot write data of type {type(data).__name__} to a Lance table: pass a "
                                "pyarrow Table/RecordBatch/reader, a pandas DataFrame, a dict of columns or "
                                "a list of row dicts")
    if isinstance(data, dict):
        data = _arrow_from_python(pa.Table.from_pydict, data, schema)
    elif isinstance(data, list) and data and isinstance(data[0], dict):
        data = _arrow_from_python(pa.Table.from_pylist, data, schema)
    elif isinstance(data, list) and data and _is_pydantic_model(data[0]):
        # the schema comes from the model class, so a field that is None in every row keeps its type
        from lance_format.pydantic import models_to_table

        data = models_to_table(type(data[0]), data, schema)
    elif not isinstance(data, (pa.Table, pa.RecordBatch, pa.RecordBatchReader)) and callable(
        getattr(data, "scanner", None)
    ):
        # Datasets (pyarrow's, Lance's, ours): stream their batches.
        data = data.scanner().to_reader()
    elif not isinstance(data, (pa.Table, pa.RecordBatch, pa.RecordBatchReader)) and callable(
        getattr(data, "to_reader", None)
    ):
        # Scanners (pyarrow's, Lance's, ours): stream what they scan.
        data = data.to_reader()
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if isinstance(data, pa.Table):
        check_table(data, what=_WHAT)  # before the cast: a cast of malformed offsets aborts
        if schema is not None and not data.schema.equals(schema):
            data = data.cast(schema)
        return data.to_reader()
    if isinstance(data, pa.RecordBatchReader):
        return checked_batches(data, what=_WHAT)
    if hasattr(data, "__arrow_c_stream__"):
        return checked_batches(pa.RecordBatchReader.from_stream(data, schema=schema), what=_WHAT)
    if isinstance(data, Iterable):
        iterator = _record_batches(iter(data))
        if schema is None:
            first = next(iterator, None)
            if first is None:
                raise InvalidInputError("cannot infer a schema from an empty iterable; pass schema=")
            schema = first.schema

            def chain(head: pa.RecordBatch = first,
                      rest: Iterator[pa.RecordBatch] = iterator) -> Iterator[pa.RecordBatch]:
                yield head
                yield from rest

            iterator = chain()
        return checked_batches(pa.RecordBatchReader.from_batches(schema, iterator), what=_WHAT)
    raise InvalidInputError(f"cannot write data of type {type(data).__name__} to a Lance table")


def _is_pydantic_model(item: Any) -> bool:
    """Whether ``item`` is a pydantic model instance (without importing pydantic when nobody has)."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(item, pydantic.BaseModel)


def _arrow_from_python(build: Callable[..., pa.Table], data: Any, schema: pa.Schema | None) -> pa.Table:
    try:
        return build(data, schema=schema)
    except (pa.ArrowException, TypeError, ValueError) as err:
        raise InvalidInputError(f"cannot convert the {type(data).__name__} to Arrow: {err}") from None


def _record_batches(items: Iterator[Any]) -> Iterator[pa.RecordBatch]:
    """An iterable's batches (tables are split into theirs); anything else is refused by type."""
    for item in items:
        if isinstance(item, pa.RecordBatch):
            yield item
        elif isinstance(item, pa.Table):
            yield from item.to_batches()
        else:
            raise InvalidInputError(
                f"an iterable written to a Lance table must yield pyarrow RecordBatches, got {type(item).__name__}"
            )


__all__ = ["as_reader"]
