"""``LanceDataset`` and ``LanceScanner`` as pyarrow's ``Dataset`` and ``Scanner`` (as in pylance).

DuckDB's replacement scans (``duckdb.sql("SELECT ... FROM ds")``, ``duckdb.arrow(ds)``) and
Polars' ``scan_pyarrow_dataset`` take any ``pyarrow.dataset.Dataset``: they call its ``schema``,
then ``scanner(columns=..., filter=<pc.Expression>)`` / ``to_batches(...)`` / ``head(...)``
with the projection and the filter pushed down, and read the result as an Arrow stream. pylance
makes its dataset a subclass of pyarrow's (without the native dataset behind it); so do we.
``LanceDataset``'s own methods replace pyarrow's; the few pyarrow methods that would read the
missing native dataset are refused here instead of crashing the interpreter.

Both also speak the Arrow PyCapsule stream protocol (``__arrow_c_stream__``): ``pa.table(ds)``,
``pl.from_arrow``-style consumers and DuckDB read the whole scan as a stream.
"""

from __future__ import annotations

import functools
from typing import Any

import pyarrow.dataset as pads

from lance_format.errors import UnsupportedFeatureError

__all__ = ["ArrowDatasetBase", "ArrowScannerBase"]


def _new(cls: Any) -> Any:
    """An instance of ``cls`` without ``__init__`` (its state is set right after)."""
    return cls.__new__(cls)


def _refuse(what: str) -> UnsupportedFeatureError:
    return UnsupportedFeatureError(f"{what} needs a native pyarrow dataset; a Lance dataset is not one "
                                   "(use its scanner(), to_table() or to_batches())")


class ArrowDatasetBase(pads.Dataset):  # type: ignore[misc]  # pyarrow ships no stubs
    """The last base of ``LanceDataset``: a ``pyarrow.dataset.Dataset`` to ``isinstance``."""

    def _get_fragments(self, filter: Any = None) -> Any:
        raise _refuse("pyarrow's fragment listing")

    def _scanner_options(self, options: Any) -> Any:
        raise _refuse("pyarrow.dataset.Scanner.from_dataset")

    #: attributes that are caches of open files (fragments and their readers), not state
    _UNPICKLED: tuple[str, ...] = ()

    # pyarrow's base pickles the native dataset (and refuses, having none): pickle the
    # attributes, as a plain Python object would, without the caches (Polars pickles the
    # dataset into its plan; Spark ships it to tasks)
    def __reduce__(self) -> tuple[Any, ...]:
        cls = type(self)
        state = {key: value for key, value in self.__dict__.items() if key not in self._UNPICKLED
                 and not isinstance(getattr(cls, key, None), functools.cached_property)}
        return _new, (cls,), state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        """The whole table (its default scan) as an Arrow C stream (PyCapsule protocol)."""
        return self.scanner().to_reader().__arrow_c_stream__(requested_schema)


class ArrowScannerBase(pads.Scanner):  # type: ignore[misc]  # pyarrow ships no stubs
    """The base of ``LanceScanner``: a ``pyarrow.dataset.Scanner`` (DuckDB reads one as a table)."""

    def __reduce__(self) -> tuple[Any, ...]:
        raise TypeError("a LanceScanner cannot be pickled; pickle its dataset and the scan's arguments")

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        """The scan's output as an Arrow C stream (PyCapsule protocol)."""
        return self.to_reader().__arrow_c_stream__(requested_schema)
