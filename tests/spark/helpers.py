"""Helpers of the Spark tests: DataFrames and Lance tables as sorted Arrow tables; a block on
the Python ``lance`` source."""

from __future__ import annotations

import contextlib
import os

import lance
import pyarrow as pa


def sorted_table(table: pa.Table, key: str = "id") -> pa.Table:
    return table.sort_by([(key, "ascending")]) if table.num_rows else table


def spark_rows(df, key: str = "id") -> list[dict]:
    """A DataFrame's rows as dicts, sorted by ``key``."""
    return sorted_table(df.toArrow(), key).to_pylist()


def lance_rows(uri: str, version: int | None = None, key: str = "id", **kwargs) -> list[dict]:
    """A version's rows as read by official Lance (pylance), sorted by ``key``."""
    return sorted_table(lance.dataset(uri, version=version).to_table(**kwargs), key).to_pylist()


def data_files(uri: str) -> set[str]:
    path = os.path.join(uri, "data")
    return set(os.listdir(path)) if os.path.isdir(path) else set()


def deletion_files(uri: str) -> set[str]:
    path = os.path.join(uri, "_deletions")
    return set(os.listdir(path)) if os.path.isdir(path) else set()


def versions(uri: str) -> int:
    return lance.dataset(uri).version


@contextlib.contextmanager
def python_source(spark):
    """``format("lance")`` is the Python data source inside the block (this thread): the JVM
    source's jar is taken off the thread's class loader, as it is where ``javac`` is missing."""
    from lance_format.spark import jvm

    thread = spark._jvm.java.lang.Thread.currentThread()
    old = thread.getContextClassLoader()
    loader = old
    while loader is not None and jvm.loaded(spark):
        loader = loader.getParent()
        thread.setContextClassLoader(loader)
    try:
        assert not jvm.loaded(spark)
        yield
    finally:
        thread.setContextClassLoader(old)
