"""``nearest``: a k-nearest-neighbour join of a DataFrame of query vectors against a Lance table,
for batch jobs (recommendations, deduplication), exact and distributed over the table's rows.

How it runs (neither the table nor the queries pass through the driver):

1. the driver pins the version, checks the request with the engine's own planner (column,
   metric, filter, projection: the typed errors of ``LanceDataset.to_table(nearest=...)``) and
   runs one aggregate job over the queries (their count, and any vector that is null, holds a
   null or has another dimension than the table's column: refused before anything else runs);
2. the table's live rows are cut into splits (:func:`~lance_format.spark.read.plan_splits`, as
   a read cuts them) and the queries into buckets of about ``queries_per_task``; every
   (split, bucket) pair is one call of :func:`nearest_task` (``crossJoin`` with the broadcast
   split ids, then ``groupBy(split, bucket).applyInArrow``): it plans the engine's exact flat
   search over the split's row ranges for the bucket's queries at once (batched matrix products,
   the prefilter applied while the vectors are read, deleted rows skipped) and returns each
   query's k best rows of that split with the requested columns, ``_distance`` and ``_rowid``;
3. the per-split candidates are merged into each query's global top k by a window
   (``row_number`` over the query, ordered by ``(_distance, _rowid)``: the engine's order, so
   ties go to the smaller row id as in ``to_table(nearest=...)``).

The k best rows of a query over the whole table are among the union of its k best rows of
each split, so the merge is exact. The result equals ``to_table(nearest={..., "k": k},
filter=filter, prefilter=True)`` per query (distances as float32, as the engine returns them).
One caveat: float64 vectors are measured in float64 but merged on the float32 ``_distance``, so
two rows whose float64 distances differ by less than float32 resolution tie on row id here
(float16/float32 vectors are measured in float32: no difference).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from lance_format.distributed import ROW_ID, FragmentRange, LanceDataset, ObjectStore, ScanExecutor, plan_scan
from lance_format.errors import ArgumentTypeError, CorruptFileError, InvalidInputError
from lance_format.spark.common import (
    StorageOptions,
    functions_for,
    is_connect,
    pack_options,
    parallelism,
    quoted,
    table_location,
    use_driver_python,
)
from lance_format.spark.read import DEFAULT_ROWS_PER_SPLIT, _arrow_output_schema, _output_columns, plan_splits
from lance_format.spark.tasks import (
    Split,
    arrow_schema_from_bytes,
    arrow_schema_to_bytes,
    manifest_identity,
    open_version,
)

DISTANCE = "_distance"
DEFAULT_QUERIES_PER_TASK = 4096
_KEY = "__lance_query_key"  # a unique id per query row (the user's ids may repeat)
_VECTOR = "__lance_query_vector"
_SPLIT = "__lance_split"
_BUCKET = "__lance_query_bucket"
_RANK = "__lance_rank"
_INTERNAL = (_KEY, _VECTOR, _SPLIT, _BUCKET, _RANK)


@dataclass(frozen=True)
class NearestSpec:
    """What every search task needs: the pinned version, the search, the output's Arrow types."""

    uri: str
    version: int
    column: str
    k: int
    metric: str | None
    filter: str | None
    columns: tuple[str, ...]  # the table's columns returned, then _rowid
    carried: tuple[str, ...]  # the queries' columns passed through
    target: bytes  # the Arrow schema of the task's output (serialized)
    identity: str | None = None
    batch_size: int | None = None
    storage_options: StorageOptions = field(default=(), repr=False)


def _query_matrix(vectors: pa.ChunkedArray | pa.Array, count: int) -> np.ndarray:
    """The queries' vectors (Spark ``array<float>``, checked on the driver) as a (count, dim) matrix."""
    if isinstance(vectors, pa.ChunkedArray):
        vectors = vectors.combine_chunks()
    values = np.asarray(vectors.flatten().to_numpy(zero_copy_only=False), dtype=np.float32)
    return values.reshape(count, -1)


def search_split(spec: NearestSpec, split: Split, queries: pa.Table) -> pa.Table:
    """Each query's k nearest live rows of one split: the carried query columns, ``_KEY``, the
    table's columns, ``_distance`` and ``_rowid``, in the Arrow types of ``spec.target``."""
    from lance_format.spark.types import BatchConverter

    target = arrow_schema_from_bytes(spec.target)
    if queries.num_rows == 0:
        return target.empty_table()
    ds = open_version(spec.uri, spec.version, spec.identity, spec.storage_options)
    ranges = []
    for fragment_id, begin, end in split:
        fragment = ds.get_fragment(fragment_id)
        if fragment is None:
            raise CorruptFileError(f"fragment {fragment_id} is not in version {spec.version}", table=spec.uri,
                                   version=spec.version)
        ranges.append(FragmentRange(fragment, (begin, end)))
    matrix = _query_matrix(queries.column(_VECTOR), queries.num_rows)
    nearest: dict[str, Any] = {"column": spec.column, "q": matrix, "k": spec.k}
    if spec.metric is not None:
        nearest["metric"] = spec.metric
    # all the bucket's queries in one search: one read of the split's vectors, one matrix
    # product per batch of rows (the engine's TopK bounds the distances held at once)
    plan = plan_scan(ds, columns=list(spec.columns), filter=spec.filter, fragments=ranges,
                     batch_size=spec.batch_size,
                     options={"nearest": nearest, "prefilter": True, "batch_readahead": 0})
    executor = ScanExecutor(ds, plan)
    found = pa.Table.from_batches(list(executor.batches()), schema=executor.projected_schema)
    which = found.column("query_index").cast(pa.int64())
    carried = queries.select([*spec.carried, _KEY]).take(which)
    out = pa.Table.from_arrays([*carried.columns, *(found.column(n) for n in (*spec.columns, DISTANCE))],
                               names=[*carried.column_names, *spec.columns, DISTANCE])
    convert = BatchConverter(target, table=spec.uri, check_nulls=False)
    return pa.Table.from_batches([convert(b) for b in out.to_batches()], schema=target)


def nearest_task(spec: NearestSpec, splits: list[Split]) -> Callable[[pa.Table], pa.Table]:
    """``applyInArrow`` per (split, query bucket): the bucket's queries searched in that split."""

    def run(table: pa.Table) -> pa.Table:
        if table.num_rows == 0:
            return arrow_schema_from_bytes(spec.target).empty_table()
        split = splits[int(table.column(_SPLIT)[0].as_py())]
        return search_split(spec, split, table)

    return run


def _window(df: Any) -> Any:
    """``Window`` for classic DataFrames, its Spark Connect twin for Connect ones."""
    if is_connect(df):
        from pyspark.sql.connect.window import Window
    else:
        from pyspark.sql.window import Window  # type: ignore[assignment]
    return Window


def _vector_dimension(ds: LanceDataset, column: str) -> int:
    """The list size of the table's vector column (1 when not a vector: the planner then says why)."""
    table_field = next((f for f in ds.schema if f.name.lower() == column.lower()), None)
    if table_field is None:
        raise InvalidInputError(f"vector column {column!r} is not in the table; columns are {ds.schema.names}",
                                table=ds.uri, column=column)
    storage = table_field.type
    storage = storage.storage_type if isinstance(storage, pa.ExtensionType) else storage
    return storage.list_size if pa.types.is_fixed_size_list(storage) else 1


def _query_columns(queries_df: Any, query_column: str, query_id_column: str | None, output: list[str],
                   table: str) -> list[str]:
    """The queries' columns the result carries (checked: present, a numeric array vector, no clash)."""
    from pyspark.sql import types as T

    fields = {f.name: f for f in queries_df.schema.fields}
    if query_column not in fields:
        raise InvalidInputError(f"the queries have no column {query_column!r} (query_column); their columns are "
                                f"{list(fields)}", table=table, column=query_column)
    vector_type = fields[query_column].dataType
    if not (isinstance(vector_type, T.ArrayType) and isinstance(vector_type.elementType, T.NumericType)):
        raise ArgumentTypeError(f"query column {query_column!r} must be an array of numbers, got "
                                f"{vector_type.simpleString()}", table=table, column=query_column)
    if query_id_column is not None and query_id_column not in fields:
        raise InvalidInputError(f"the queries have no column {query_id_column!r} (query_id_column); their "
                                f"columns are {list(fields)}", table=table, column=query_id_column)
    carried = [query_id_column] if query_id_column is not None else [n for n in fields if n != query_column]
    clash = sorted((set(carried) & set(output)) | (set(carried) & set(_INTERNAL)))
    if clash:
        raise InvalidInputError(f"query columns {clash} clash with the result's columns {output}; rename them or "
                                "pass query_id_column", table=table, column=clash[0])
    return carried


def _check_queries(queries_df: Any, query_column: str, dim: int, table: str, column: str) -> int:
    """One job over the queries: their count; refuses null vectors, null elements and vectors
    of another dimension than the table's column (before the search runs)."""
    F = functions_for(queries_df)
    vector = F.col(quoted(query_column))
    bad = vector.isNull() | (F.size(vector) != F.lit(dim)) | F.exists(vector, lambda x: x.isNull())
    row = queries_df.agg(
        F.count(F.lit(1)).alias("n"),
        F.sum(F.when(bad, 1).otherwise(0)).alias("bad"),
        F.first(F.when(bad & vector.isNotNull(), F.size(vector)), ignorenulls=True).alias("size"),
    ).collect()[0]
    if row["bad"]:
        example = f" (e.g. a vector of {row['size']} values)" if row["size"] is not None and row["size"] != dim else ""
        raise InvalidInputError(f"{row['bad']} query vectors of column {query_column!r} are null, hold nulls or do "
                                f"not have the dimension {dim} of the table's column {column!r}{example}",
                                table=table, column=column)
    return int(row["n"])


def nearest(
    spark: Any,
    uri: str | os.PathLike[str] | ObjectStore,
    queries_df: Any,
    column: str,
    k: int = 10,
    *,
    metric: str | None = None,
    filter: str | None = None,
    columns: Sequence[str] | None = None,
    query_column: str = "vector",
    query_id_column: str | None = None,
    with_row_id: bool = False,
    version: int | str | None = None,
    rows_per_split: int = DEFAULT_ROWS_PER_SPLIT,
    queries_per_task: int = DEFAULT_QUERIES_PER_TASK,
    storage_options: Mapping[str, str] | None = None,
) -> Any:
    """The ``k`` nearest rows of the table at ``uri`` to each query vector of ``queries_df``
    (exact search), as a DataFrame computed by the executors.

    Parameters
    ----------
    spark
        The SparkSession.
    uri
        The table (a path every executor reaches, or an object-store URI).
    queries_df
        A DataFrame with a ``query_column`` of numeric arrays (the query vectors).
    column
        The table's vector column.
    k
        Rows per query (fewer when the table, after ``filter``, has fewer).
    metric
        ``"l2"`` (squared Euclidean), ``"cosine"``, ``"dot"`` or ``"hamming"``; default: the
        engine's (``l2``, ``hamming`` for uint8 vectors).
    filter
        A SQL predicate on the table (the engine's dialect), applied *before* the search
        (``prefilter=True``): each query gets the k nearest rows that match.
    columns
        The table's columns returned (default: all of them).
    query_column
        The queries' vector column.
    query_id_column
        The queries' column identifying a query in the result; default: every column of the
        queries except the vector (a join).
    with_row_id
        Return ``_rowid`` too.
    version
        The table's version or tag (default: the latest, pinned when this is called).
    rows_per_split, queries_per_task
        About how many table rows and queries one task searches.
    storage_options
        Object-store settings, shipped to the executors.

    Returns
    -------
    pyspark.sql.DataFrame
        One row per (query, neighbour): the query's columns, the table's ``columns``,
        ``_distance`` (float) and, with ``with_row_id``, ``_rowid``; in no particular order.

    Raises
    ------
    DatasetNotFoundError, VersionNotFoundError
        No table at ``uri``, or no such version.
    InvalidInputError
        An unknown column (of the table or the queries), a query vector of another dimension
        than ``column``'s (or null), a bad ``k``/``metric``/``filter``, clashing column names.
    ArgumentTypeError
        ``column`` is not a vector column, or ``query_column`` not an array of numbers.
    """
    ds = LanceDataset(table_location(uri), version, storage_options=storage_options)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidInputError(f"k must be a positive integer, got {k!r}", table=ds.uri, column=column)
    if rows_per_split < 1 or queries_per_task < 1:
        raise InvalidInputError("rows_per_split and queries_per_task must be positive", table=ds.uri)
    wanted = _output_columns(ds, columns, with_row_id=False, with_row_address=False)
    wanted = [n for n in wanted if n != ROW_ID] + [ROW_ID]  # the merge orders ties by row id
    dim = _vector_dimension(ds, column)
    probe: dict[str, Any] = {"column": column, "q": np.zeros((1, dim), np.float32), "k": k}
    if metric is not None:
        probe["metric"] = metric
    # the engine's planner checks the rest as to_table(nearest=...) would (typed errors, now)
    plan_scan(ds, columns=wanted, filter=filter, options={"nearest": probe, "prefilter": True})
    output = [*wanted, DISTANCE]
    carried = _query_columns(queries_df, query_column, query_id_column, output, ds.uri)

    from pyspark.sql import types as T

    from lance_format.spark.types import spark_arrow_schema, spark_schema

    table_schema = spark_schema(_arrow_output_schema(ds, wanted))
    query_fields = {f.name: f for f in queries_df.schema.fields}
    stage = T.StructType([query_fields[n] for n in carried] + [T.StructField(_KEY, T.LongType(), False)]
                         + list(table_schema.fields) + [T.StructField(DISTANCE, T.FloatType(), True)])
    final = [quoted(n) for n in carried] + [quoted(n) for n in wanted if n != ROW_ID or with_row_id
                                            ] + [quoted(DISTANCE)]
    n_queries = _check_queries(queries_df, query_column, dim, ds.uri, column)
    splits = plan_splits(ds, target_splits=parallelism(spark), rows_per_split=rows_per_split)
    if not splits or not n_queries:
        return spark.createDataFrame([], stage).select(*final)

    use_driver_python(spark)
    F = functions_for(queries_df)
    spec = NearestSpec(uri=ds.object_store.uri, version=ds.version, column=column, k=k, metric=metric, filter=filter,
                       columns=tuple(wanted), carried=tuple(carried),
                       target=arrow_schema_to_bytes(spark_arrow_schema(stage)), identity=manifest_identity(ds.manifest),
                       storage_options=pack_options(ds.object_store.storage_options))
    buckets = max(1, math.ceil(n_queries / queries_per_task))
    keyed = queries_df.select(*[F.col(quoted(n)) for n in carried],
                              F.monotonically_increasing_id().alias(_KEY),
                              F.col(quoted(query_column)).cast("array<float>").alias(_VECTOR))
    keyed = keyed.withColumn(_BUCKET, F.pmod(F.xxhash64(F.col(_KEY)), F.lit(buckets)))
    split_ids = spark.range(len(splits)).withColumnRenamed("id", _SPLIT)
    pairs = keyed.crossJoin(F.broadcast(split_ids))  # each query once per split; the queries are read once
    # one shuffle partition per (split, bucket), by number: adaptive execution would coalesce
    # this small shuffle (vectors, not rows) into one task, and the search is the costly part
    tasks = len(splits) * buckets
    pairs = pairs.repartition(tasks, F.col(_SPLIT), F.col(_BUCKET))
    found = pairs.groupBy(_SPLIT, _BUCKET).applyInArrow(nearest_task(spec, splits), stage)
    window = _window(found).partitionBy(_KEY).orderBy(F.col(DISTANCE).asc_nulls_last(), F.col(ROW_ID).asc())
    return found.withColumn(_RANK, F.row_number().over(window)).where(F.col(_RANK) <= F.lit(k)).select(*final)


__all__ = ["DEFAULT_QUERIES_PER_TASK", "NearestSpec", "nearest", "nearest_task", "search_split"]
