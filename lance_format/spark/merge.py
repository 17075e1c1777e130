"""Row-level writes computed on the executors: ``merge_dataframe`` (upsert by key) and the
deletion half of ``write_dataframe(replace_where=...)``.

Both end in ONE ``Update`` transaction like pylance's ``merge_insert``: fragments that lost
rows get new deletion files (written by the tasks, holding old plus new deletions), fragments
that lost every row are removed, and new rows arrive in new fragments.

Merge, against the version pinned when it starts:

1. duplicate keys in the source are refused (a Spark aggregation over the key columns);
2. the table's keys are read through :func:`read_dataframe` with ``_rowaddr`` (and ``_rowid``
   on tables with stable row ids) and joined with the source on the executors;
3. matched target rows (updates) and, with ``when_not_matched_by_source="delete"``, target
   rows without a source row are grouped by fragment (``applyInArrow``), and each group's task
   writes that fragment's deletion vector;
4. the source rows to write (updates and inserts) go through the write tasks; updated rows are
   written to fragments of their own that carry the matched rows' stable row ids, so an update
   keeps a row's identity (its ``_row_created_at_version`` is restored at commit).

An update condition (``when_matched_update_condition``) is validated on the driver before any
job runs; the target columns it reads join the keys in step 2, and an Arrow UDF evaluates it on
the executors with the engine's SQL (:func:`tasks.condition_udf`). Matched rows where it is not
TRUE are neither deleted nor rewritten: they keep their row ids and versions untouched.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads

from lance_format.distributed import ROW_ADDRESS, ROW_ID, LanceDataset, latest_manifest, object_store_for, to_expression
from lance_format.errors import DatasetNotFoundError, InvalidInputError
from lance_format.spark.common import (
    CommitResult,
    JobScope,
    conf_bytes,
    functions_for,
    is_connect,
    parallelism,
    quoted,
)
from lance_format.spark.compaction import auto_compaction, compact_after_write
from lance_format.spark.read import DEFAULT_ROWS_PER_SPLIT, read_dataframe
from lance_format.spark.tasks import (
    DELETION_DDL,
    ROW_ID_COLUMN,
    ConditionSpec,
    DeleteSpec,
    arrow_schema_to_bytes,
    condition_pair_schema,
    condition_task,
    condition_udf,
    delete_addresses_task,
    delete_matching_task,
    manifest_identity,
)
from lance_format.spark.write import (
    Deletions,
    commit_coalesced,
    discard_failed_attempts,
    fail_write,
    run_write_job,
)
from lance_format.spark.write_plan import WritePlan, plan_write

WHEN_MATCHED = ("update_all", "do_nothing", "delete", "fail")
WHEN_NOT_MATCHED = ("insert_all", "do_nothing")
WHEN_NOT_MATCHED_BY_SOURCE = (None, "do_nothing", "delete")
_ADDRESS = "__lance_rowaddr"
_SOURCE = "__lance_source"
_FRAGMENT = "__lance_fragment"
_SCOPE = "__lance_scope"
_UPDATE = "__lance_update"
_MATCHED = "__lance_matched"
_TARGET = "__lance_target_"  # + the column's index: a target column the update condition reads
_INTEGER_TYPES = ("byte", "short", "integer", "long")


def _fragment_groups(ds, target: int) -> list[list[int]]:
    """Whole fragments packed into about ``target`` groups (a fragment's deletions are one task's)."""
    fragments = [(f.id, f.physical_rows) for f in ds.manifest.fragments]
    total = sum(rows for _, rows in fragments)
    size = min(DEFAULT_ROWS_PER_SPLIT, max(1, math.ceil(total / max(1, target))))
    groups: list[list[int]] = []
    current: list[int] = []
    rows = 0
    for fragment_id, count in fragments:
        if current and rows + count > size:
            groups.append(current)
            current, rows = [], 0
        current.append(fragment_id)
        rows += count
    if current:
        groups.append(current)
    return groups


def delete_matching(spark: Any, plan: WritePlan, predicate: str) -> Deletions:
    """Tasks delete the rows of the pinned version matching ``predicate``, one fragment at a time."""
    ds = LanceDataset(plan.store, plan.read_version)
    groups = _fragment_groups(ds, parallelism(spark))
    if not groups:
        return Deletions()
    spec = DeleteSpec(uri=plan.uri, version=plan.read_version, write_id=plan.write_id, predicate=predicate,
                      identity=manifest_identity(ds.manifest), storage_options=plan.packed_options)
    n = len(groups)
    rows = spark.range(0, n, 1, n).mapInArrow(delete_matching_task(spec, groups), DELETION_DDL).collect()
    return Deletions.from_rows(rows)


def _binds(expr: Any, schema: pa.Schema) -> bool:
    try:
        pads.dataset(schema.empty_table()).to_table(columns={"v": expr})
    except (pa.ArrowException, TypeError, ValueError):
        return False
    return True


def _condition_columns(expr: Any, table: pa.Schema) -> dict[str, list[str]]:
    """The columns of each side (``source``, ``target``) that a translated condition reads, in
    table order: found by binding it with fields removed (binding only breaks when a field it
    reads is missing), so the parsing stays the engine's own."""
    keep = {side: set(table.names) for side in ("source", "target")}

    def pair() -> pa.Schema:
        sides = {side: pa.schema([f for f in table if f.name in keep[side]]) for side in keep}
        return condition_pair_schema(sides["source"], sides["target"])

    groups = [(side, list(table.names)) for side in keep]
    while groups:
        side, group = groups.pop()
        kept = keep[side]
        keep[side] = kept - set(group)
        if _binds(expr, pair()):
            continue  # none of the group is read
        keep[side] = kept
        if len(group) > 1:
            mid = len(group) // 2
            groups.extend([(side, group[:mid]), (side, group[mid:])])
    return {side: [n for n in table.names if n in keep[side]] for side in keep}


def _plan_condition(condition: Any, plan: WritePlan, when_matched: str) -> tuple[ConditionSpec, dict[str, list[str]]]:
    """Validate an update condition against the table (before any job runs) and find the
    columns of each side the executors need to evaluate it."""
    where: dict[str, Any] = dict(table=plan.uri, version=plan.read_version)
    if when_matched != "update_all":
        raise InvalidInputError(f"when_matched_update_condition needs when_matched='update_all', got "
                                f"{when_matched!r}", **where)
    if not isinstance(condition, str) or not condition.strip():
        raise InvalidInputError(f"when_matched_update_condition must be a non-empty SQL string, got {condition!r}",
                                **where)
    table = plan.schema.to_arrow()
    pair = condition_pair_schema(table, table)
    try:
        expr = to_expression(condition, pair)
    except InvalidInputError as exc:
        raise InvalidInputError(f"invalid when_matched_update_condition {condition!r}: {exc.reason}",
                                column=exc.column, **where) from None
    if not _binds(expr, pair):
        raise InvalidInputError(f"when_matched_update_condition {condition!r} may only read source.<column> and "
                                "target.<column> values", **where)
    columns = _condition_columns(expr, table)
    return ConditionSpec(
        uri=plan.uri, version=plan.read_version, condition=condition,
        source=arrow_schema_to_bytes(pa.schema([table.field(n) for n in columns["source"]])),
        target=arrow_schema_to_bytes(pa.schema([table.field(n) for n in columns["target"]])),
    ), columns


def _with_condition(joined: Any, spec: ConditionSpec, matched: Any, columns: list[str]) -> Any:
    """``joined`` with the column ``_UPDATE``: the condition, evaluated on the executors."""
    F = functions_for(joined)
    if not is_connect(joined) and hasattr(F, "arrow_udf"):
        from pyspark.sql.pandas.functions import ArrowUDFType

        udf = F.arrow_udf(condition_udf(spec), "boolean", ArrowUDFType.SCALAR_ITER)
        return joined.withColumn(_UPDATE, udf(matched, *[F.col(c) for c in columns]))
    from pyspark.sql.types import BooleanType, StructField, StructType

    flagged = joined.withColumn(_MATCHED, matched)
    output = StructType(list(flagged.schema.fields) + [StructField(_UPDATE, BooleanType(), False)])
    names = [_MATCHED] + [c.strip("`").replace("``", "`") for c in columns]
    return flagged.mapInArrow(condition_task(spec, names, _UPDATE), output)


# Bytes a row of the table's side takes in a broadcast (keys, row address, row id), roughly.
_BROADCAST_ROW_BYTES = 64


def join_with_table(left: Any, table_rows: Any, keys: list[str], how: str, *, table_rows_count: int) -> Any:
    """``left`` joined with rows read from a table of about ``table_rows_count`` rows.

    Spark has no size estimate for a table read (a ``mapInArrow`` over a few task ids) and
    would always broadcast it, collecting the table's side on the driver. We decide from the
    table's row count instead: within ``spark.sql.autoBroadcastJoinThreshold`` it is broadcast
    (new rows then keep the source's order), above it both sides are shuffled and sort-merged.
    """
    threshold = conf_bytes(left.sparkSession, "spark.sql.autoBroadcastJoinThreshold", 10 << 20)
    small = 0 <= table_rows_count * _BROADCAST_ROW_BYTES <= threshold
    return left.join(table_rows.hint("broadcast" if small else "merge"), on=keys, how=how)


def _check_unique(source: Any, keys: list[str], uri: str) -> tuple[int, int] | None:
    """Refuse a source with duplicate keys. Returns the source's key range (lowest, highest)
    when the key is one integer column, computed by the same job, else None."""
    F = functions_for(source)
    not_null = None
    for key in keys:
        cond = F.col(quoted(key)).isNotNull()
        not_null = cond if not_null is None else not_null & cond
    counted = source.where(not_null).groupBy(*[quoted(k) for k in keys]).count()
    ranged = len(keys) == 1 and source.schema[keys[0]].dataType.typeName() in _INTEGER_TYPES
    summary = [F.max("count").alias("most")]
    if ranged:
        summary += [F.min(quoted(keys[0])).alias("lowest"), F.max(quoted(keys[0])).alias("highest")]
    row = counted.agg(*summary).collect()[0]
    if row["most"] is not None and row["most"] > 1:
        duplicate = counted.where(F.col("count") > 1).limit(1).collect()
        example = {k: duplicate[0][k] for k in keys}
        raise InvalidInputError(
            f"the source has {duplicate[0]['count']} rows with key {example}: merge keys must be unique "
            "in the source (deduplicate it first)",
            table=uri, column=keys[0],
        )
    if not ranged or row["lowest"] is None:
        return None
    return int(row["lowest"]), int(row["highest"])


def merge_dataframe(
    df: Any,
    uri: str | os.PathLike[str],
    on: str | Sequence[str],
    *,
    when_matched: str = "update_all",
    when_not_matched: str = "insert_all",
    when_not_matched_by_source: str | None = None,
    not_matched_by_source_filter: str | None = None,
    when_matched_update_condition: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    commit_message: str | None = None,
    max_rows_per_file: int | None = None,
    delete_not_matched_by_source: bool | str | None = None,
    storage_options: Mapping[str, str] | None = None,
    target_rows_per_file: int | None = None,
    target_bytes_per_file: int | None = None,
    compact_small_fragments: bool | int = False,
    coalesce: bool = True,
) -> CommitResult:
    """Upsert ``df`` into the table at ``uri`` by the key columns ``on``, as one new version.

    Keys must be unique in ``df`` (null keys never match). The source is evaluated twice
    (duplicate check, then the merge): cache it if it is expensive or not deterministic. The
    table's keys are joined by broadcast only when the table is small
    (``spark.sql.autoBroadcastJoinThreshold``), else by sort-merge; with one integer key, only
    target rows within the source's key range are read into the join.

    Parameters
    ----------
    df
        The source rows.
    uri
        The table (it must exist).
    on
        The key column, or several.
    when_matched
        ``update_all`` (replace the matched rows), ``do_nothing``, ``delete`` (remove them) or
        ``fail`` (refuse the merge if any key matches).
    when_not_matched
        ``insert_all`` or ``do_nothing``.
    when_not_matched_by_source
        ``None``/``do_nothing``, or ``delete``: target rows whose key is not in ``df`` are
        removed (only those matching ``not_matched_by_source_filter`` when given).
    not_matched_by_source_filter
        A SQL filter restricting ``when_not_matched_by_source="delete"``.
    when_matched_update_condition
        With ``update_all``: a SQL condition over ``source.<column>`` and ``target.<column>``
        (e.g. ``source.ts > target.ts``), as pylance's ``when_matched_update_all(condition=...)``.
        Only matched rows where it is TRUE are updated (NULL counts as false); the others stay
        as they are, row ids and versions included, and are not counted in ``rows_updated``.
        It is checked before any job runs and evaluated on the executors.
    transaction_properties, commit_message
        Stored in the transaction (``idempotency_key`` as for :func:`write_dataframe`).
    max_rows_per_file
        Roll new files at this many rows.
    delete_not_matched_by_source
        An alias: ``True``, or a SQL filter (``when_not_matched_by_source="delete"`` with that filter).
    storage_options
        Object-store settings (Lance's keys) for ``s3://``, ``gs://`` or ``az://`` tables.
    target_rows_per_file, target_bytes_per_file, compact_small_fragments
        As for :func:`write_dataframe` (each merge adds small fragments; with
        ``compact_small_fragments`` they are compacted once the table holds enough of them).
    coalesce
        On by default: a write task whose new rows stay below 1/8 of the target file size hands
        them to the commit, which writes them in files of the target size (updated rows in files
        of their own, keeping their row ids and lineage) within the same single version.
        ``False`` keeps one set of fragments per task.

    Returns
    -------
    CommitResult
        The version committed, with ``rows_updated``, ``rows_inserted`` and ``rows_deleted``,
        and ``fragments_before_coalescing`` / ``small_outputs_coalesced``.

    Raises
    ------
    InvalidInputError
        No key, an unknown option value, an invalid condition or filter, or duplicate keys in
        ``df``.
    DatasetNotFoundError
        There is no table at ``uri``.
    CommitConflictError
        A concurrent commit conflicts with the merge.
    """
    from pyspark import StorageLevel

    F = functions_for(df)
    if delete_not_matched_by_source:
        when_not_matched_by_source = "delete"
        if isinstance(delete_not_matched_by_source, str):
            not_matched_by_source_filter = delete_not_matched_by_source
    keys = [on] if isinstance(on, str) else list(on)
    if not keys:
        raise InvalidInputError("merge_dataframe needs at least one key column in `on`")
    for name, value, allowed in (("when_matched", when_matched, WHEN_MATCHED),
                                 ("when_not_matched", when_not_matched, WHEN_NOT_MATCHED),
                                 ("when_not_matched_by_source", when_not_matched_by_source, WHEN_NOT_MATCHED_BY_SOURCE)):
        if value not in allowed:
            raise InvalidInputError(f"{name} must be one of {allowed}, got {value!r}")
    store = object_store_for(os.fspath(uri), storage_options)
    if latest_manifest(store) is None:
        raise DatasetNotFoundError("cannot merge into a table that does not exist (write it first)", table=store.uri)
    extra: dict[str, Any] = {} if max_rows_per_file is None else {"max_rows_per_file": max_rows_per_file}
    plan = plan_write(df.schema, store, mode="append", transaction_properties=transaction_properties,
                      commit_message=commit_message, target_rows_per_file=target_rows_per_file,
                      target_bytes_per_file=target_bytes_per_file, **extra)
    compaction = auto_compaction(compact_small_fragments, plan.target_rows_per_file, plan.target_bytes_per_file)
    if plan.skipped is not None:
        return plan.skipped
    for key in keys:
        if key not in plan.columns:
            raise InvalidInputError(f"merge key {key!r} is not a column of the table", table=plan.uri, column=key)
    delete_unmatched = when_not_matched_by_source == "delete"
    if not_matched_by_source_filter is not None:
        if not delete_unmatched:
            raise InvalidInputError("not_matched_by_source_filter needs when_not_matched_by_source='delete'")
        to_expression(not_matched_by_source_filter, plan.schema.to_arrow())  # fails here, not in a task
    condition: ConditionSpec | None = None
    condition_columns: dict[str, list[str]] = {"source": [], "target": []}
    if when_matched_update_condition is not None:
        condition, condition_columns = _plan_condition(when_matched_update_condition, plan, when_matched)
    position = {name: i for i, name in enumerate(plan.columns)}
    spark = df.sparkSession
    joined = None
    with JobScope(spark) as scope:
        try:
            source = df.select(*[quoted(n) for n in plan.columns])
            key_range = _check_unique(source, keys, plan.uri)
            read = keys + [n for n in condition_columns["target"] if n not in keys]
            # Only target rows that can match take part, unless unmatched ones are deleted: the
            # tasks drop rows outside the source's key range before Spark shuffles them.
            in_range = None
            if key_range is not None and not delete_unmatched:
                in_range = f"{quoted(keys[0])} >= {key_range[0]} AND {quoted(keys[0])} <= {key_range[1]}"
            target = read_dataframe(spark, plan.store, version=plan.read_version, columns=read, filter=in_range,
                                    with_row_address=True, with_row_id=plan.stable_row_ids)
            target = target.select(
                *[quoted(k) for k in keys],
                *[F.col(quoted(n)).alias(f"{_TARGET}{position[n]}") for n in condition_columns["target"]],
                F.col(ROW_ADDRESS).alias(_ADDRESS),
                *([F.col(ROW_ID).alias(ROW_ID_COLUMN)] if plan.stable_row_ids else []),
            )
            base = LanceDataset(plan.store, plan.read_version)
            table_rows_count = sum(f.physical_rows for f in base.manifest.fragments)
            joined = join_with_table(source.withColumn(_SOURCE, F.lit(True)), target, keys,
                                     "full_outer" if delete_unmatched else "left_outer",
                                     table_rows_count=table_rows_count)
            if not_matched_by_source_filter is not None:
                # The engine evaluates the filter (its SQL), Spark only joins the addresses.
                scoped = read_dataframe(spark, plan.store, version=plan.read_version, columns=[],
                                        filter=not_matched_by_source_filter, with_row_address=True)
                scope_flags = scoped.select(F.col(ROW_ADDRESS).alias(_ADDRESS), F.lit(True).alias(_SCOPE))
                joined = join_with_table(joined, scope_flags, [_ADDRESS], "left", table_rows_count=table_rows_count)
            matched = F.col(_SOURCE).isNotNull() & F.col(_ADDRESS).isNotNull()
            updated = matched
            if condition is not None:
                joined = _with_condition(joined, condition, matched, [quoted(n) for n in condition_columns["source"]]
                                         + [f"{_TARGET}{position[n]}" for n in condition_columns["target"]])
                updated = matched & F.col(_UPDATE)
            joined = joined.persist(StorageLevel.MEMORY_AND_DISK)
            if condition is not None:
                joined.count()  # evaluate the condition (its errors) before any file is written
            if when_matched == "fail" and joined.where(matched).limit(1).count():
                raise InvalidInputError("the source has keys that match target rows and when_matched='fail'",
                                        table=plan.uri, version=plan.read_version, column=keys[0])
            unmatched_target = F.col(_SOURCE).isNull()
            if not_matched_by_source_filter is not None:
                unmatched_target = unmatched_target & F.col(_SCOPE).isNotNull()
            gone = (updated if when_matched == "update_all" else matched if when_matched == "delete"
                    else F.lit(False)) | (
                unmatched_target if delete_unmatched else F.lit(False))
            spec = DeleteSpec(uri=plan.uri, version=plan.read_version, write_id=plan.write_id,
                              identity=manifest_identity(base.manifest),
                              storage_options=plan.packed_options)
            deletions = Deletions.from_rows(
                joined.where(gone)
                .select(F.col(_ADDRESS).alias(ROW_ADDRESS), F.shiftright(F.col(_ADDRESS), 32).alias(_FRAGMENT))
                .groupBy(_FRAGMENT)
                .applyInArrow(delete_addresses_task(spec), DELETION_DDL)
                .collect()
            )
            wanted = (updated if when_matched == "update_all" else F.lit(False)) | (
                (F.col(_SOURCE).isNotNull() & F.col(_ADDRESS).isNull()) if when_not_matched == "insert_all"
                else F.lit(False))
            rows = joined.where(wanted)
            if not plan.stable_row_ids:
                # The marker of a rewritten row: any non-null value (the ids are assigned anew).
                rows = rows.withColumn(ROW_ID_COLUMN, F.col(_ADDRESS))
            written = run_write_job(rows, plan, split_rewritten=True, stage_small_outputs=coalesce)
        except BaseException as exc:
            fail_write(plan, scope, exc)
        finally:
            if joined is not None:
                joined.unpersist()
    result = commit_coalesced(plan, written, deletions, operation="replace", split_rewritten=True)
    discard_failed_attempts(spark, plan, scope)
    return compact_after_write(plan.store, result, compaction)


__all__ = ["merge_dataframe", "delete_matching", "join_with_table", "WHEN_MATCHED", "WHEN_NOT_MATCHED", "WHEN_NOT_MATCHED_BY_SOURCE"]
