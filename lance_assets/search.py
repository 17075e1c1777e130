"""Searching Lance tables from downstream assets: what ``LanceTableResource.search`` and
``SparkSessionResource.search_batch`` check and run.

One search is one engine call (``to_table`` with pylance's ``nearest`` dict, or with
``full_text_query``), so its rows, ``_distance``/``_score`` and errors are the engine's (and
pylance's). :func:`check_request` refuses what the engine would accept but a downstream asset
almost never means (no query at all, both kinds at once) with a typed error naming the table;
:func:`as_output` hands the pyarrow result over as pandas or polars.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from lance_assets import engine
from lance_assets.engine import LanceDataset
from lance_format.errors import InvalidInputError, UnsupportedFeatureError

OUTPUTS = ("pyarrow", "pandas", "polars")


def check_request(uri: str, *, vector: Any, full_text: Any, k: int, output: str) -> None:
    """One query kind, a positive ``k`` and a known output, or a typed error naming the table."""
    if vector is None and full_text is None:
        raise InvalidInputError("search needs a query: vector= (nearest-neighbour search) or full_text= (BM25); "
                                "for a plain filter use read(filter=...)", table=uri)
    if vector is not None and full_text is not None:
        raise InvalidInputError("search takes vector= or full_text=, not both (hybrid search is not supported)",
                                table=uri)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidInputError(f"k must be a positive integer, got {k!r}", table=uri)
    if output not in OUTPUTS:
        raise InvalidInputError(f"output must be one of {list(OUTPUTS)}, got {output!r}", table=uri)


def vector_column(ds: LanceDataset, column: str | None) -> str:
    """``column``, else the table's one vector (fixed-size list) column."""
    if column is not None:
        return column
    vectors = [f.name for f in ds.schema if pa.types.is_fixed_size_list(
        f.type.storage_type if isinstance(f.type, pa.ExtensionType) else f.type)]
    if len(vectors) != 1:
        raise InvalidInputError(f"give column=: the table has {len(vectors)} vector columns {vectors}, "
                                "search needs exactly one", table=ds.uri)
    return vectors[0]


def nearest_query(column: str, vector: Any, k: int, *, metric: str | None, nprobes: int | None,
                  refine_factor: int | None) -> dict[str, Any]:
    """pylance's ``nearest`` dict (only the options given)."""
    query: dict[str, Any] = {"column": column, "q": vector, "k": k}
    for key, value in (("metric", metric), ("nprobes", nprobes), ("refine_factor", refine_factor)):
        if value is not None:
            query[key] = value
    return query


def as_output(table: pa.Table, output: str, uri: str) -> Any:
    """The result as a pyarrow Table, a pandas DataFrame or a polars DataFrame."""
    if output == "pandas":
        return table.to_pandas()
    if output == "polars":
        try:
            import polars
        except ImportError:
            raise UnsupportedFeatureError("output='polars' needs polars (pip install 'lance-assets[polars]')",
                                          table=uri) from None
        return polars.from_arrow(table)
    return table


def search_table(ds: LanceDataset, *, vector: Any, column: str | None, k: int, filter: str | None,
                 full_text: str | Mapping[str, Any] | None, columns: Sequence[str] | None, metric: str | None,
                 nprobes: int | None, refine_factor: int | None, prefilter: bool | None,
                 with_row_id: bool, output: str) -> Any:
    """Run one checked search on an open version (see ``LanceTableResource.search``)."""
    uri = ds.uri
    check_request(uri, vector=vector, full_text=full_text, k=k, output=output)
    if vector is not None:
        nearest = nearest_query(vector_column(ds, column), vector, k, metric=metric, nprobes=nprobes,
                                refine_factor=refine_factor)
        table = engine.search(ds, nearest=nearest, columns=columns, filter=filter, prefilter=prefilter,
                              with_row_id=with_row_id)
    else:
        if metric is not None or nprobes is not None or refine_factor is not None:
            raise InvalidInputError("metric, nprobes and refine_factor apply to vector searches only", table=uri)
        query = full_text if column is None or not isinstance(full_text, str) else {"query": full_text,
                                                                                     "columns": [column]}
        table = engine.search(ds, full_text=query, limit=k, columns=columns, filter=filter, prefilter=prefilter,
                              with_row_id=with_row_id)
    return as_output(table, output, uri)


__all__ = ["OUTPUTS", "as_output", "check_request", "nearest_query", "search_table", "vector_column"]
