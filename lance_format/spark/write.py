"""``write_dataframe``: a Spark DataFrame becomes one new version of a Lance table.

1. Plan on the driver (:func:`~lance_format.spark.write_plan.plan_write`): pin the read
   version, map the DataFrame's schema to the table's (or a new one), refuse incompatible
   schemas before any task runs, mint a write id, and look for an earlier commit with the
   same idempotency key (then nothing runs).
2. Tasks (``mapInArrow``) stream their rows into new data files (rolled by rows and bytes) in
   the table's file version and emit only the fragment descriptions; ``collect()`` brings
   those few bytes to the driver.
   For ``replace_where`` a first job writes, per fragment, the deletion vector of the rows
   matching the predicate.
3. Commit on the driver, in the caller's process (:func:`commit_write`): ONE transaction
   (Append, Overwrite, or Update for ``replace_where``) through the engine's commit loop, built
   with pylance's public protocol: the tasks report ``FragmentMetadata`` JSON, the driver commits
   a ``Transaction`` of ``LanceOperation.Append``/``Overwrite``/``Update`` (:func:`commit_written`).

If the job or the commit fails, the write's files are removed unless a manifest references
them (a commit that landed before an error was reported keeps its files), and no version
appears. The Python data source (:mod:`lance_format.spark.datasource`) reuses these pieces.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from lance_format.distributed import (
    DEFAULT_MAX_BYTES_PER_FILE,
    DEFAULT_MAX_ROWS_PER_FILE,
    IDEMPOTENCY_KEY,
    CommittedVersion,
    FragmentMetadata,
    LanceSchema,
    ObjectStore,
    PriorCommit,
    commit_fragments,
    discard_uncommitted,
    find_committed_version,
)
from lance_format.errors import DuplicateCommitError
from lance_format.spark.coalesce import (
    StagedOutput,
    coalesce_outputs,
    coalesce_to_target,
    delete_staged,
    estimated_size,
    planned_tasks,
)
from lance_format.spark.common import (
    CommitResult,
    JobScope,
    conf_flag,
    count_small_fragments,
    quoted,
    translate_task_error,
)
from lance_format.spark.compaction import auto_compaction, compact_after_write
from lance_format.spark.namespace_options import located_table
from lance_format.spark.tasks import (
    FRAGMENT_DDL,
    ROW_ID_COLUMN,
    write_task,
)
from lance_format.spark.write_plan import WritePlan, plan_write, prior_commit_result


@dataclass(frozen=True)
class TaskOutputs:
    """Fragments the write tasks produced; ``rewritten`` holds a merge's updated rows;
    ``staged``: the tasks' small outputs, for the commit to coalesce."""

    fragments: list[FragmentMetadata]
    rewritten_rows: int = 0
    staged: list[StagedOutput] = field(default_factory=list)

    @staticmethod
    def from_rows(rows: list) -> TaskOutputs:
        fragments, rewritten, staged = [], 0, []
        for row in rows:
            if row[0] is None:  # a staged output (FRAGMENT_DDL's last column)
                staged.append(StagedOutput(str(row[4]), int(row[1]), int(row[2])))
                continue
            fragment = FragmentMetadata.from_json(row[0])
            fragments.append(fragment)
            if row[3]:
                rewritten += fragment.physical_rows
        return TaskOutputs(fragments, rewritten, staged)


@dataclass(frozen=True)
class Deletions:
    """Deletion vectors written by tasks for an Update: fragment id -> new state."""

    updated: list[FragmentMetadata] = field(default_factory=list)
    removed: list[int] = field(default_factory=list)
    deleted_rows: int = 0
    affected: dict[int, np.ndarray] | None = field(default_factory=dict)

    @staticmethod
    def from_rows(rows: list) -> Deletions:
        updated, removed, affected, total = [], [], {}, 0
        complete = True
        for row in rows:
            fragment_id, blob, is_removed, deleted, offsets = row[0], row[1], row[2], row[3], row[4]
            total += int(deleted)
            if is_removed:
                removed.append(int(fragment_id))
            else:
                updated.append(FragmentMetadata.from_json(blob))
            if offsets is None:
                complete = False
            else:
                affected[int(fragment_id)] = np.frombuffer(bytes(offsets), dtype=np.uint32)
        return Deletions(updated, removed, total, affected if complete else None)

    def __bool__(self) -> bool:
        return bool(self.updated or self.removed)


def discard_write(plan: WritePlan) -> list[str]:
    """Remove the files of a write that did not commit (and only those)."""
    try:
        return discard_uncommitted(plan.store, plan.prefix, read_version=plan.read_version, write_id=plan.write_id,
                                   fragment_ids=plan.fragment_ids)
    except Exception:
        return []  # cleanup is best effort; the original error matters more


def discard_failed_attempts(spark: Any, plan: WritePlan, scope: JobScope) -> None:
    """After a commit: remove the files of task attempts that failed or lost (a retried task,
    a lost executor, a losing speculative attempt). Spark retried them, so the commit holds
    each row once, but the failed attempt's finished files are on disk; the files the commit
    references are kept. One listing of the table's data directory, only when needed."""
    if scope.had_failed_tasks() or conf_flag(spark, "spark.speculation"):
        discard_write(plan)


def fail_write(plan: WritePlan, scope: JobScope, exc: BaseException) -> None:
    """After a failed job: remove the write's files once no task can still create any, and
    raise the error (as the engine's typed error when a task raised one)."""
    discard_write(plan)
    scope.settle()
    discard_write(plan)
    error = translate_task_error(exc)
    if error is exc:
        raise exc
    raise error from exc


def commit_written(
    store: ObjectStore,
    kind: str,
    *,
    read_version: int,
    fragments: list[FragmentMetadata],
    schema: LanceSchema,
    properties: Mapping[str, str],
    commit_message: str | None,
    deletions: Deletions | None = None,
    enable_stable_row_ids: bool = False,
    storage_version: str | None = None,
) -> CommittedVersion:
    """Commit what the tasks wrote as ONE transaction (:func:`lance_format.distributed.commit_fragments`,
    pylance's ``LanceOperation`` protocol): ``append``, ``overwrite`` (a new table or
    ``mode="overwrite"``), ``update`` (new rows plus the deletion vectors of ``replace_where``) or
    ``merge`` (the same, adding columns), carrying the write's properties."""
    return commit_fragments(
        store, kind, read_version=read_version, fragments=fragments, schema=schema,
        removed_fragment_ids=deletions.removed if deletions is not None else (),
        updated_fragments=deletions.updated if deletions is not None else (),
        affected_rows=deletions.affected if deletions is not None and kind == "update" else None,
        properties=properties, commit_message=commit_message, enable_stable_row_ids=enable_stable_row_ids,
        storage_version=storage_version)


def commit_write(
    plan: WritePlan,
    fragments: list[FragmentMetadata],
    deletions: Deletions = Deletions(),
    *,
    operation: str | None = None,
    rows_updated: int = 0,
    extra_properties: Mapping[str, str] | None = None,
) -> CommitResult:
    """Commit the fragments (and deletion vectors) of a planned write as one transaction
    (``extra_properties`` join the plan's transaction properties)."""
    op = operation or plan.operation
    rows = sum(f.physical_rows for f in fragments)
    size = sum(d.file_size_bytes or 0 for f in fragments for d in f.files)
    read_version = plan.read_version
    properties = {**plan.properties, **(extra_properties or {})}
    key = plan.properties.get(IDEMPOTENCY_KEY)
    try:
        if key is not None and read_version:
            prior = find_committed_version(plan.store, key)
            if prior is not None:  # a concurrent run with the same key won: ours is redundant
                discard_write(plan)
                return prior_commit_result(prior, read_version)
        if op in ("append", "replace") and not fragments and not deletions:
            discard_write(plan)  # nothing to commit: no new version
            return CommitResult(version=read_version, rows=0, fragments=0, bytes=0, read_version=read_version,
                                operation="none", skipped=True)
        # One transaction: a Merge when the write adds columns (new columns, new rows and any
        # deletions land in one version), else an Overwrite, Update or Append.
        kind = ("merge" if plan.adds_columns and op != "overwrite" else
                "overwrite" if op == "overwrite" else "update" if deletions else "append")
        committed = commit_written(plan.store, kind, read_version=read_version, fragments=fragments,
                                   schema=plan.schema, properties=properties,
                                   commit_message=plan.commit_message, deletions=deletions,
                                   enable_stable_row_ids=plan.enable_stable_row_ids,
                                   storage_version=plan.storage_version)
    except DuplicateCommitError as duplicate:  # a concurrent run with the same key won the race
        discard_write(plan)
        # the commit loop raises it with the winning commit's version
        return prior_commit_result(PriorCommit(duplicate.version, duplicate.transaction),  # type: ignore[arg-type]
                             read_version)
    except BaseException:
        discard_write(plan)
        raise
    name = {"overwrite": "overwrite", "append": "append"}.get(op, "update" if deletions else "append")
    if plan.adds_columns and op != "overwrite":
        name = "merge"
    return CommitResult(
        version=committed.version, rows=rows, fragments=len(fragments), bytes=size, retries=committed.retries,
        read_version=plan.read_version, operation=name, rows_inserted=rows - rows_updated, rows_updated=rows_updated,
        rows_deleted=deletions.deleted_rows - rows_updated,
        small_fragments=count_small_fragments(fragments, plan.target_rows_per_file, plan.target_bytes_per_file),
        table_fragments=len(committed.manifest_file.manifest.fragments), fragments_before_coalescing=len(fragments),
    )


def commit_coalesced(plan: WritePlan, written: TaskOutputs, deletions: Deletions = Deletions(), *,
                     operation: str | None = None, split_rewritten: bool = False) -> CommitResult:
    """Commit the tasks' fragments and their small outputs coalesced to the target file size
    (:mod:`lance_format.spark.coalesce`) in ONE transaction recording the fragment counts, then
    remove the staged outputs. If anything fails, every file of the write is removed.
    ``split_rewritten``: a merge's outputs (updated rows keep fragments of their own and, on
    tables with stable row ids, their row ids)."""
    try:
        outputs = coalesce_outputs(plan.store, written.fragments, written.staged, plan.schema, plan.storage_version,
                                   prefix=plan.prefix, target_rows=plan.target_rows_per_file,
                                   target_bytes=plan.target_bytes_per_file, split_rewritten=split_rewritten,
                                   keep_row_ids=split_rewritten and plan.stable_row_ids)
    except BaseException:
        discard_write(plan)
        raise
    result = commit_write(plan, outputs.fragments, deletions, operation=operation,
                          rows_updated=written.rewritten_rows + outputs.rewritten_rows,
                          extra_properties=outputs.properties)
    delete_staged(plan.store, written.staged)
    return replace(result, fragments_before_coalescing=outputs.fragments_before,
                   small_outputs_coalesced=outputs.coalesced)


def run_write_job(df: Any, plan: WritePlan, *, split_rewritten: bool = False,
                  stage_small_outputs: bool = False) -> TaskOutputs:
    """The Spark job writing ``df``'s rows as fragments; returns their descriptions.

    ``split_rewritten``: ``df`` also has ``ROW_ID_COLUMN`` (set on a merge's updated rows).
    The tasks are ``mapInArrow`` (:func:`tasks.write_task`): Spark hands them the rows as Arrow
    batches and keeps nothing on its side. Run it inside a :class:`JobScope`: without its
    row-bounded batches Spark spends most of the job re-measuring each batch after every row.
    """
    names = tuple(plan.columns) + ((ROW_ID_COLUMN,) if split_rewritten else ())
    task = write_task(plan.spec(split_rewritten=split_rewritten, stage_small_outputs=stage_small_outputs), names)
    # Plain stand-in names: PySpark's classic mapInArrow cannot resolve names such as "a.b".
    columns = df.selectExpr(*[f"{quoted(n)} AS _c{i}" for i, n in enumerate(names)])
    return TaskOutputs.from_rows(columns.mapInArrow(task, FRAGMENT_DDL).collect())


def write_dataframe(
    df: Any,
    uri: str | os.PathLike[str] | None = None,
    *,
    mode: str = "create",
    replace_where: str | None = None,
    schema_mode: str = "error",
    enable_stable_row_ids: bool = False,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    max_bytes_per_file: int = DEFAULT_MAX_BYTES_PER_FILE,
    target_rows_per_file: int | None = None,
    target_bytes_per_file: int | None = None,
    coalesce: bool = True,
    compact_small_fragments: bool | int = False,
    transaction_properties: Mapping[str, str] | None = None,
    commit_message: str | None = None,
    data_storage_version: str | None = None,
    fixed_size_lists: Mapping[str, int] | None = None,
    storage_options: Mapping[str, str] | None = None,
    namespace: Any = None,
    table_id: str | Sequence[str] | None = None,
) -> CommitResult:
    """Write a Spark DataFrame as one new version of the Lance table at ``uri``.

    The executors write the data files; the driver commits once (an atomic, conflict-checked
    Lance commit). Rows never travel through the driver.

    Parameters
    ----------
    df
        The DataFrame to write.
    uri
        The table: a path every executor reaches, or an ``s3://``/``gs://``/``az://`` URI.
    mode
        ``create``/``error`` (fail if the table exists), ``append`` (creates a missing table),
        ``overwrite`` (all rows, or only those matching ``replace_where``), ``ignore`` (do
        nothing if the table exists).
    replace_where
        A SQL predicate: the matching rows are deleted and the DataFrame's rows (which must all
        match it) added in one atomic commit.
    schema_mode
        ``error`` (columns and types must match the table's), ``add_columns`` (new DataFrame
        columns become new nullable table columns), ``overwrite`` (a full overwrite may change
        the schema).
    enable_stable_row_ids, data_storage_version
        Apply when the table is created.
    max_rows_per_file, max_bytes_per_file
        Hard limits at which files roll (pylance's 1,048,576 rows and 90 GB).
    target_rows_per_file, target_bytes_per_file
        The size files aim at (default 1,048,576 rows / 256 MiB, capped by the ``max_*``
        limits).
    coalesce
        On by default: a DataFrame whose estimated size (Spark's plan statistics) fills fewer
        files than it has partitions is coalesced to that many write tasks, and a task whose
        output stays below 1/8 of both targets hands it to the commit, which coalesces such
        outputs into files of the target size (:mod:`lance_format.spark.coalesce`; one version).
    compact_small_fragments
        Off by default, like Delta's auto compaction. ``True``, or a number of small fragments
        (default 50): once the table holds that many small files, they are compacted to the
        targets in a second commit after the write (:mod:`lance_format.spark.compaction`).
    transaction_properties
        Stored in the transaction. The key ``"idempotency_key"`` makes a re-run of an already
        committed write return that commit without writing anything (found among the last
        ``idempotency_window`` versions); two runs racing with one key commit once, since the
        commit loop refuses a second transaction with a key that a concurrent commit already
        carries.
    commit_message
        Stored in the transaction.
    fixed_size_lists
        Column -> size: store array columns as fixed-size-list vectors (field metadata
        ``arrow.fixed-size-list.size`` does the same).
    storage_options
        Object-store settings (Lance's keys) for ``s3://``, ``gs://`` or ``az://`` tables; they
        are shipped to the executors, which open the table themselves.
    namespace, table_id
        Instead of ``uri``: a Lance Namespace (a ``LanceNamespace`` client or a config such as
        ``{"impl": "dir", "root": "/data/catalog"}``) and the table's id (``"sales.orders"`` or
        ``["sales", "orders"]``). A missing table is declared in the namespace (its parent
        namespaces created) before the write.

    Returns
    -------
    CommitResult
        The version committed and what it holds: ``rows``, ``fragments``, ``small_fragments``
        (new files below 1/8 of both targets), ``table_fragments`` (the table's fragments
        after the write), ``fragments_before_coalescing`` / ``small_outputs_coalesced``,
        ``compaction_version``; ``skipped`` for an idempotent re-run or ``mode="ignore"``.

    Raises
    ------
    DatasetAlreadyExistsError
        ``mode="create"`` and the table exists.
    SchemaMismatchError
        The DataFrame's columns do not match the table's (``schema_mode="error"``).
    InvalidInputError
        An invalid option, mode or predicate.
    CommitConflictError
        A concurrent commit conflicts with this write.

    Examples
    --------
    >>> import tempfile, lance_format as lance
    >>> from pyspark.sql import SparkSession
    >>> from lance_format.spark import read_dataframe, write_dataframe
    >>> spark = SparkSession.builder.master("local[2]").getOrCreate()
    >>> df = spark.createDataFrame([(1, "ann"), (2, "bo")], "id long, name string")
    >>> uri = tempfile.mkdtemp() + "/people.lance"
    >>> result = write_dataframe(df, uri)
    >>> result.version, result.rows
    (1, 2)
    >>> read_dataframe(spark, uri).orderBy("id").collect()[1].name
    'bo'
    """
    uri, storage_options = located_table(uri, namespace, table_id, create=True, storage_options=storage_options)
    plan = plan_write(
        df.schema, uri, mode=mode, replace_where=replace_where, schema_mode=schema_mode,
        enable_stable_row_ids=enable_stable_row_ids, max_rows_per_file=max_rows_per_file,
        max_bytes_per_file=max_bytes_per_file, target_rows_per_file=target_rows_per_file,
        target_bytes_per_file=target_bytes_per_file, transaction_properties=transaction_properties,
        commit_message=commit_message, data_storage_version=data_storage_version, fixed_size_lists=fixed_size_lists,
        storage_options=storage_options,
    )
    compaction = auto_compaction(compact_small_fragments, plan.target_rows_per_file, plan.target_bytes_per_file)
    if plan.skipped is not None:
        return plan.skipped
    spark = df.sparkSession
    if coalesce:
        df = coalesce_to_target(df, plan)
    with JobScope(spark) as scope:
        try:
            deletions = Deletions()
            if plan.operation == "replace":
                from lance_format.spark.merge import delete_matching

                # a "replace" plan always has its replace_where predicate
                deletions = delete_matching(spark, plan, plan.replace_where)  # type: ignore[arg-type]
            written = run_write_job(df, plan, stage_small_outputs=coalesce)
        except BaseException as exc:
            fail_write(plan, scope, exc)
    result = commit_coalesced(plan, written, deletions)
    discard_failed_attempts(spark, plan, scope)
    return compact_after_write(plan.store, result, compaction)


__all__ = ["TaskOutputs", "Deletions", "commit_write", "commit_written",
           "discard_write", "fail_write", "run_write_job", "write_dataframe", "discard_failed_attempts",
           "estimated_size", "planned_tasks", "coalesce_to_target", "commit_coalesced"]
