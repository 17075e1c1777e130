"""pylance's ``batch_udf``: a function of a record batch that ``add_columns`` runs per batch.

``@batch_udf(output_schema=...)`` wraps the function in a :class:`BatchUDF`, which checks each
output against the declared schema (names and types, cast where Arrow casts safely). pylance's
``checkpoint_file`` (resuming a failed ``add_columns``) is not supported: a failed
``add_columns`` here commits nothing, and running it again recomputes every batch.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import pyarrow as pa

from lance_format.errors import SchemaMismatchError, UnsupportedFeatureError


class BatchUDF:
    """A batch function for ``LanceDataset.add_columns`` (pylance's ``BatchUDF``)."""

    def __init__(self, func: Callable[[pa.RecordBatch], Any], output_schema: pa.Schema | None = None,
                 checkpoint_file: str | os.PathLike[str] | None = None) -> None:
        if checkpoint_file is not None:
            raise UnsupportedFeatureError("batch_udf(checkpoint_file=...) is not supported: a failed add_columns "
                                          "commits nothing and is simply run again")
        self.func = func
        self.output_schema = output_schema
        self.checkpoint_file = None
        self.__name__ = getattr(func, "__name__", "batch_udf")

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        out = self.func(batch)
        if not isinstance(out, pa.RecordBatch):
            out = pa.RecordBatch.from_pandas(out, preserve_index=False) if hasattr(out, "to_numpy") else \
                pa.RecordBatch.from_pydict(out)
        if self.output_schema is None:
            return out
        if out.schema.names != self.output_schema.names:
            raise SchemaMismatchError(f"the UDF returned columns {out.schema.names}, its output_schema declares "
                                      f"{self.output_schema.names}")
        if not out.schema.equals(self.output_schema):
            try:
                return pa.RecordBatch.from_arrays([c.cast(f.type) for c, f in zip(out.columns, self.output_schema)],
                                                  schema=self.output_schema)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise SchemaMismatchError(f"the UDF's output does not fit its output_schema: {exc}") from None
        return out


def batch_udf(output_schema: pa.Schema | None = None,
              checkpoint_file: str | os.PathLike[str] | None = None) -> Callable[[Callable[..., Any]], BatchUDF]:
    """Decorate a batch function for ``add_columns`` (pylance's ``lance.batch_udf``)."""

    def inner(func: Callable[[pa.RecordBatch], Any]) -> BatchUDF:
        return BatchUDF(func, output_schema, checkpoint_file)

    return inner


__all__ = ["BatchUDF", "batch_udf"]
