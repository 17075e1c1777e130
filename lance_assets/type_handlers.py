"""The Python types assets exchange with Lance tables, and how each converts to and from Arrow.

pyarrow ``Table`` / ``RecordBatchReader`` / ``RecordBatch``, pandas ``DataFrame`` and polars
``DataFrame`` / ``LazyFrame`` (the optional extra ``polars``) stream through Arrow record batches. PySpark DataFrames (classic or Connect) never pass through the
driver: they are written and read by ``lance_format.spark`` on the executors. pyspark and polars
are imported only when one of their objects or types shows up (a module that made one has
imported them already), so pyarrow/pandas users never import either.
"""

from __future__ import annotations

import sys
import typing
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from lance_format.errors import InvalidInputError

try:  # pandas is a dependency, but keep the type checks cheap and optional
    import pandas as pd
except ImportError:  # pragma: no cover
    pd = None  # type: ignore[assignment]

SUPPORTED = ("pyarrow.Table, pyarrow.RecordBatchReader, pyarrow.RecordBatch, pandas.DataFrame, "
             "polars.DataFrame, polars.LazyFrame, pyspark DataFrame")


def _polars() -> Any:
    """The polars module if something already imported it (a polars object or annotation
    cannot exist otherwise), else None: polars is an optional extra."""
    return sys.modules.get("polars")


def _spark_dataframe_class() -> type | None:
    if "pyspark" not in sys.modules and "pyspark.sql" not in sys.modules:
        return None
    try:
        from pyspark.sql import DataFrame
    except ImportError:  # pragma: no cover
        return None
    return DataFrame


def is_spark_dataframe(obj: Any) -> bool:
    cls = _spark_dataframe_class()
    return cls is not None and isinstance(obj, cls)


def is_spark_type(tp: Any) -> bool:
    """Whether an annotation asks for a PySpark DataFrame (classic or Connect)."""
    if not isinstance(tp, type):
        return False
    module = getattr(tp, "__module__", "") or ""
    if not module.startswith("pyspark"):
        return False
    cls = _spark_dataframe_class()
    return cls is not None and issubclass(tp, cls)


def _unwrap(tp: Any) -> Any:
    """``Optional[X]`` -> X; anything else unchanged."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (typing.Union, getattr(__import__("types"), "UnionType", None)) and len(args) == 1:
        return args[0]
    return tp


def load_kind(tp: Any) -> str:
    """``arrow`` | ``reader`` | ``pandas`` | ``polars`` | ``polars_lazy`` | ``spark`` for an input
    annotation (Any -> arrow)."""
    tp = _unwrap(tp)
    if tp in (None, Any, object, pa.Table) or tp is type(None):
        return "arrow"
    if tp is pa.RecordBatchReader:
        return "reader"
    if pd is not None and tp is pd.DataFrame:
        return "pandas"
    pl = _polars()
    if pl is not None and tp is pl.DataFrame:
        return "polars"
    if pl is not None and tp is pl.LazyFrame:
        return "polars_lazy"
    if is_spark_type(tp):
        return "spark"
    raise InvalidInputError(
        f"LanceIOManager cannot load an input annotated {tp!r}; supported: {SUPPORTED} "
        "(or lance_assets.LanceChangeFeed for change feeds)"
    )


def to_reader(obj: Any) -> pa.RecordBatchReader:
    """Arrow batches of a pyarrow or pandas object, without copying a pyarrow Table."""
    if isinstance(obj, pa.RecordBatchReader):
        return obj
    if isinstance(obj, pa.Table):
        return obj.to_reader()
    if isinstance(obj, pa.RecordBatch):
        return pa.Table.from_batches([obj]).to_reader()
    if pd is not None and isinstance(obj, pd.DataFrame):
        return pa.Table.from_pandas(obj, preserve_index=False).to_reader()
    pl = _polars()
    if pl is not None and isinstance(obj, pl.LazyFrame):
        obj = obj.collect()  # the plan runs once, here; its result streams like a DataFrame
    if pl is not None and isinstance(obj, pl.DataFrame):
        return obj.to_arrow().to_reader()
    raise InvalidInputError(f"LanceIOManager cannot store an object of type {type(obj).__name__}; supported: {SUPPORTED}")


def from_reader(reader: pa.RecordBatchReader, kind: str) -> Any:
    if kind == "reader":
        return reader
    table = reader.read_all()
    if kind == "pandas":
        return table.to_pandas()
    if kind in ("polars", "polars_lazy"):
        pl = _polars()
        assert pl is not None  # load_kind only returns these kinds when polars is imported
        frame = pl.from_arrow(table)
        return frame.lazy() if kind == "polars_lazy" else frame
    return table


class CountingReader:
    """Wraps a reader, counting rows and optionally transforming each batch as it streams."""

    def __init__(self, reader: pa.RecordBatchReader, transform: Callable[[pa.RecordBatch], pa.RecordBatch] | None = None,
                 schema: pa.Schema | None = None) -> None:
        self.rows = 0
        self._reader = reader
        self._transform = transform
        self.schema = schema or reader.schema

    def _batches(self) -> Iterator[pa.RecordBatch]:
        for batch in self._reader:
            if self._transform is not None:
                batch = self._transform(batch)
            self.rows += batch.num_rows
            yield batch

    def reader(self) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self.schema, self._batches())
