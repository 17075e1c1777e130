"""pylance's ``batch_udf``: a function of a record batch that ``add_columns`` runs per batch.

``@batch_udf(output_schema=...)`` wraps the function in a :class:`BatchUDF`; ``add_columns``
checks that each output has exactly that schema. Without one, the schema of the function's
output for the table's first row becomes the BatchUDF's ``output_schema`` (as in pylance).

``checkpoint_file`` (pylance's :class:`BatchUDFCheckpoint`, the same SQLite tables): ``add_columns``
saves each batch's result, and each fragment's finished new data file, as it goes; run again
after a failure with the same file, it reuses them instead of calling the function again, and
removes the file once the commit succeeded. The data files of finished fragments are kept when
an ``add_columns`` fails so that the next run can use them.
"""

from __future__ import annotations

import os
import pickle
import sqlite3
from collections.abc import Callable
from contextlib import closing
from typing import Any, NamedTuple

import pyarrow as pa

from lance_format import dependencies
from lance_format.dependencies import pandas as pd
from lance_format.errors import NewColumnDataError
from lance_format.schema.arrow_checks import check_batch


class BatchUDFCheckpoint:
    """Results of a :class:`BatchUDF` saved while ``add_columns`` runs (pylance's class of the
    same name and tables: ``batches(fragment_id, batch_index, result)`` holds pickled record
    batches, ``fragments(fragment_id, data)`` a finished fragment's metadata as JSON)."""

    class BatchInfo(NamedTuple):
        fragment_id: int
        batch_index: int

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = path
        with closing(self._connect()) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS batches (fragment_id INT, batch_index INT, result BLOB)")
            conn.execute("CREATE TABLE IF NOT EXISTS fragments (fragment_id INT, data BLOB)")
            conn.commit()

    def _connect(self) -> sqlite3.Connection:
        # a connection per call: sqlite3 connections may not cross threads
        return sqlite3.connect(self.path)

    def cleanup(self) -> None:
        """Remove the checkpoint file (after a successful commit)."""
        os.remove(self.path)

    def get_batch(self, info: BatchUDFCheckpoint.BatchInfo) -> pa.RecordBatch | None:
        with closing(self._connect()) as conn:
            row = conn.execute("SELECT result FROM batches WHERE fragment_id = ? AND batch_index = ?",
                               (info.fragment_id, info.batch_index)).fetchone()
        return None if row is None else pickle.loads(row[0])

    def insert_batch(self, info: BatchUDFCheckpoint.BatchInfo, batch: pa.RecordBatch) -> None:
        with closing(self._connect()) as conn:
            conn.execute("INSERT INTO batches (fragment_id, batch_index, result) VALUES (?, ?, ?)",
                         (info.fragment_id, info.batch_index, pickle.dumps(batch)))
            conn.commit()

    def get_fragment(self, fragment_id: int) -> str | None:
        """A finished fragment's metadata (JSON), if saved."""
        with closing(self._connect()) as conn:
            row = conn.execute("SELECT data FROM fragments WHERE fragment_id = ?", (fragment_id,)).fetchone()
        return None if row is None else row[0]

    def insert_fragment(self, fragment_id: int, fragment: str) -> None:
        """Save a finished fragment; its batches are no longer needed."""
        with closing(self._connect()) as conn:
            conn.execute("INSERT INTO fragments (fragment_id, data) VALUES (?, ?)", (fragment_id, fragment))
            conn.execute("DELETE FROM batches WHERE fragment_id = ?", (fragment_id,))
            conn.commit()


class BatchUDF:
    """A batch function for ``LanceDataset.add_columns`` (pylance's ``BatchUDF``)."""

    def __init__(self, func: Callable[[pa.RecordBatch], Any], output_schema: pa.Schema | None = None,
                 checkpoint_file: str | os.PathLike[str] | None = None) -> None:
        self.func = func
        self.output_schema = output_schema
        self.cache = BatchUDFCheckpoint(checkpoint_file) if checkpoint_file is not None else None
        self.__name__ = getattr(func, "__name__", "batch_udf")

    def __call__(self, batch: pa.RecordBatch) -> Any:
        # the function itself, unchecked (as pylance's BatchUDF is called): users test it directly
        return self.func(batch)


def as_record_batch(out: Any) -> pa.RecordBatch:
    """A UDF's result as a record batch: pandas frames (as pylance converts them) and dicts."""
    if isinstance(out, pa.RecordBatch):
        return out
    # the flag first: without pandas, ``pd`` is a proxy whose attributes raise
    if dependencies._PANDAS_AVAILABLE and isinstance(out, pd.DataFrame):
        return pa.RecordBatch.from_pandas(out)
    return pa.RecordBatch.from_pydict(out)


def checked_output(out: Any, expected: pa.Schema) -> pa.RecordBatch:
    """``out`` as a record batch if its schema is exactly ``expected`` (pylance casts nothing)
    and its arrays are well formed."""
    batch = as_record_batch(out)
    check_batch(batch, what="the output of the UDF")
    if batch.schema != expected:
        raise NewColumnDataError("Output schema of function does not match the expected schema. "
                                 f"Expected:\n{expected}\nGot:\n{batch.schema}")
    return batch


def batch_udf(output_schema: pa.Schema | None = None,
              checkpoint_file: str | os.PathLike[str] | None = None) -> Callable[[Callable[..., Any]], BatchUDF]:
    """Decorate a batch function for ``add_columns`` (pylance's ``lance.batch_udf``)."""

    def inner(func: Callable[[pa.RecordBatch], Any]) -> BatchUDF:
        return BatchUDF(func, output_schema, checkpoint_file)

    return inner


__all__ = ["BatchUDF", "BatchUDFCheckpoint", "as_record_batch", "batch_udf", "checked_output"]
