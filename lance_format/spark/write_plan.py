"""Planning a Spark write on the driver: the ``WritePlan`` every task and the commit share.

:func:`plan_write` pins the read version, maps the DataFrame's schema to the table's (or a new
one), refuses incompatible schemas and unwritable tables before any task runs, mints the write
id and finds an earlier commit with the same idempotency key (then nothing runs). No data is
touched here; :mod:`lance_format.spark.write` runs the tasks and commits.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lance_format.distributed import (
    DEFAULT_IDEMPOTENCY_WINDOW,
    DEFAULT_MAX_BYTES_PER_FILE,
    DEFAULT_MAX_ROWS_PER_FILE,
    IDEMPOTENCY_KEY,
    WRITE_ID_KEY,
    LanceSchema,
    ObjectStore,
    PriorCommit,
    check_file_schema,
    check_writable,
    find_committed_version,
    has_stable_row_ids,
    latest_manifest,
    new_write_id,
    next_field_id_of,
    object_store_for,
    resolve_storage_version,
    to_expression,
    write_prefix,
)
from lance_format.errors import DatasetAlreadyExistsError, InvalidInputError, SchemaMismatchError
from lance_format.spark.coalesce import (
    staging_limits,
)
from lance_format.spark.common import (
    DEFAULT_TARGET_BYTES_PER_FILE,
    DEFAULT_TARGET_ROWS_PER_FILE,
    CommitResult,
    StorageOptions,
    pack_options,
    table_location,
)
from lance_format.spark.tasks import (
    WriteSpec,
    schema_to_bytes,
)
from lance_format.spark.types import lance_arrow_schema, same_spark_type, spark_field

MODES = ("create", "append", "overwrite", "error", "ignore")
SCHEMA_MODES = ("error", "add_columns", "overwrite")


@dataclass
class WritePlan:
    """Everything decided on the driver before the tasks run (picklable: the data source ships it)."""

    uri: str
    operation: str  # "overwrite" (create too), "append" or "replace"
    read_version: int  # 0: no table yet
    schema: LanceSchema  # the fields the new files hold, with the table's field ids
    storage_version: str
    write_id: str
    properties: dict[str, str]
    commit_message: str | None = None
    enable_stable_row_ids: bool = False
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE
    max_bytes_per_file: int = DEFAULT_MAX_BYTES_PER_FILE
    target_rows_per_file: int = DEFAULT_TARGET_ROWS_PER_FILE
    target_bytes_per_file: int = DEFAULT_TARGET_BYTES_PER_FILE
    replace_where: str | None = None
    adds_columns: bool = False  # schema_mode="add_columns" added fields: one Merge commit
    columns: list[str] = field(default_factory=list)  # DataFrame columns, in file order
    fragment_ids: list[int] = field(default_factory=list)  # fragments at read_version
    stable_row_ids: bool = False
    skipped: CommitResult | None = None
    storage_options: dict[str, str] = field(default_factory=dict, repr=False)  # may hold credentials
    _store: ObjectStore | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def prefix(self) -> str:
        return write_prefix(self.write_id)

    @property
    def store(self) -> ObjectStore:
        """The table's store, opened once per process (it is re-opened where the plan is unpickled)."""
        if self._store is None:
            self._store = object_store_for(self.uri, self.storage_options)
        return self._store

    @property
    def packed_options(self) -> StorageOptions:
        return pack_options(self.storage_options)

    def spec(self, *, split_rewritten: bool = False, stage_small_outputs: bool = False) -> WriteSpec:
        """What the tasks need; ``stage_small_outputs``: a task whose rows stay below 1/8 of the
        target file size hands them to the commit to coalesce (:mod:`lance_format.spark.coalesce`)."""
        stage_rows, stage_bytes = (staging_limits(self.target_rows_per_file, self.target_bytes_per_file)
                                   if stage_small_outputs else (0, 0))
        return WriteSpec(
            uri=self.uri, write_id=self.write_id, schema=schema_to_bytes(self.schema),
            storage_version=self.storage_version, max_rows_per_file=self.max_rows_per_file,
            max_bytes_per_file=self.max_bytes_per_file, check_filter=self.replace_where,
            split_rewritten=split_rewritten, keep_row_ids=split_rewritten and self.stable_row_ids,
            stage_rows=stage_rows, stage_bytes=stage_bytes, storage_options=self.packed_options,
        )


def prior_commit_result(prior: PriorCommit, read_version: int) -> CommitResult:
    """What an earlier commit with the same idempotency key wrote (the write is skipped)."""
    fragments = prior.new_fragments
    return CommitResult(
        version=prior.version, rows=sum(f.physical_rows for f in fragments), fragments=len(fragments),
        bytes=sum(d.file_size_bytes for f in fragments for d in f.files), retries=0, read_version=read_version,
        operation=prior.transaction.WhichOneof("operation") or "", skipped=True,
    )


def _conform_to_table(table: LanceSchema, df_schema: Any, schema_mode: str, uri: str,
                      first_id: int | None = None) -> tuple[LanceSchema, bool]:
    """The schema new files get when writing ``df_schema`` into ``table`` (append, replace);
    added fields get ids from ``first_id`` (default: above the schema's)."""
    table_fields = {f.name: spark_field(f) for f in table.to_arrow()}
    df_fields = {f.name: f for f in df_schema}
    missing = [n for n in table_fields if n not in df_fields]
    extra = [n for n in df_fields if n not in table_fields]
    wrong = [
        f"{n!r} is {df_fields[n].dataType.simpleString()}, the table has {table_fields[n].dataType.simpleString()}"
        for n in table_fields if n in df_fields and not same_spark_type(df_fields[n].dataType, table_fields[n].dataType)
    ]
    problems = []
    if missing:
        problems.append(f"the data lacks columns {missing}")
    if wrong:
        problems.append("column " + "; column ".join(wrong))
    if extra and schema_mode != "add_columns":
        problems.append(f"the data has columns the table lacks {extra} (use schema_mode='add_columns')")
    if problems:
        column = (missing or extra or [w.split("'")[1] for w in wrong] or [None])[0]
        raise SchemaMismatchError("the DataFrame does not match the table schema: " + "; ".join(problems),
                                  table=uri, column=column)
    if not extra:
        return table, False
    from pyspark.sql.types import StructType

    new_arrow = lance_arrow_schema(StructType([df_fields[n] for n in extra]))
    new_arrow = pa.schema([f.with_nullable(True) for f in new_arrow])  # old rows read as null
    added = LanceSchema.from_arrow(new_arrow, first_id=table.max_field_id() + 1 if first_id is None else first_id)
    return LanceSchema(table.fields + added.fields, dict(table.metadata)), True


def _checked(plan: WritePlan) -> WritePlan:
    """A plan that writes files, its schema checked against its file version (no file opened)."""
    if plan.storage_version != "0.1":  # legacy files check their types when a task opens one
        check_file_schema(plan.schema, plan.storage_version, table=plan.uri)
    return plan


def plan_write(
    df_schema: Any,
    uri: str | os.PathLike[str] | ObjectStore,
    *,
    mode: str = "create",
    replace_where: str | None = None,
    schema_mode: str = "error",
    enable_stable_row_ids: bool = False,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    max_bytes_per_file: int = DEFAULT_MAX_BYTES_PER_FILE,
    target_rows_per_file: int | None = None,
    target_bytes_per_file: int | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    commit_message: str | None = None,
    data_storage_version: str | None = None,
    fixed_size_lists: Mapping[str, int] | None = None,
    idempotency_window: int = DEFAULT_IDEMPOTENCY_WINDOW,
    storage_options: Mapping[str, str] | None = None,
) -> WritePlan:
    """Decide how a DataFrame with Spark schema ``df_schema`` is written (no data touched).

    A schema the table's file version cannot store (e.g. maps before 2.2) is refused here, on
    the driver, before any task runs.
    """
    if mode not in MODES:
        raise InvalidInputError(f"mode must be one of {MODES}, got {mode!r}")
    if schema_mode not in SCHEMA_MODES:
        raise InvalidInputError(f"schema_mode must be one of {SCHEMA_MODES}, got {schema_mode!r}")
    if replace_where is not None and mode != "overwrite":
        raise InvalidInputError("replace_where needs mode='overwrite' (it replaces the matching rows)")
    if replace_where is not None and not str(replace_where).strip():
        raise InvalidInputError("replace_where needs a predicate; use mode='overwrite' alone for all rows")
    if max_rows_per_file <= 0 or max_bytes_per_file <= 0:
        raise InvalidInputError("max_rows_per_file and max_bytes_per_file must be positive")
    # A target above the limit could never be reached: the files roll at the limit.
    target_rows = min(int(target_rows_per_file or DEFAULT_TARGET_ROWS_PER_FILE), int(max_rows_per_file))
    target_bytes = min(int(target_bytes_per_file or DEFAULT_TARGET_BYTES_PER_FILE), int(max_bytes_per_file))
    if (target_rows_per_file is not None and target_rows_per_file <= 0) or (
            target_bytes_per_file is not None and target_bytes_per_file <= 0):
        raise InvalidInputError("target_rows_per_file and target_bytes_per_file must be positive")
    store = object_store_for(table_location(uri), storage_options)
    uri = store.uri
    existing = latest_manifest(store)
    properties = {str(k): str(v) for k, v in (transaction_properties or {}).items()}
    write_id = new_write_id()
    properties[WRITE_ID_KEY] = write_id
    base: dict[str, Any] = dict(uri=uri, write_id=write_id, properties=properties, commit_message=commit_message,
                max_rows_per_file=int(max_rows_per_file), max_bytes_per_file=int(max_bytes_per_file),
                target_rows_per_file=target_rows, target_bytes_per_file=target_bytes,
                storage_options=store.storage_options)

    if existing is None:
        arrow = lance_arrow_schema(df_schema, fixed_size_lists=fixed_size_lists)
        schema = LanceSchema.from_arrow(arrow)
        storage = resolve_storage_version(data_storage_version, None, table=uri)
        if replace_where is not None:
            to_expression(replace_where, schema.to_arrow())  # validate before any task runs
        return _checked(WritePlan(operation="overwrite", read_version=0, schema=schema, storage_version=storage,
                                  enable_stable_row_ids=enable_stable_row_ids, replace_where=replace_where,
                                  columns=arrow.names, stable_row_ids=enable_stable_row_ids, **base))

    path, manifest_file = existing
    manifest = manifest_file.manifest
    check_writable(manifest, table=uri, path=path)
    version = manifest.version
    table = LanceSchema.from_protos(list(manifest.fields), dict(manifest.schema_metadata))
    stable = has_stable_row_ids(manifest)
    fragment_ids = [f.id for f in manifest.fragments]
    skipped = CommitResult(version=version, rows=0, fragments=0, bytes=0, read_version=version, operation="none",
                           skipped=True)
    key = properties.get(IDEMPOTENCY_KEY)
    if key is not None:  # first: a re-run of a committed create must not fail on the table it made
        prior = find_committed_version(store, key, window=idempotency_window)
        if prior is not None:
            return WritePlan(operation="none", read_version=version, schema=table, storage_version="",
                             skipped=prior_commit_result(prior, version), **base)
    if mode in ("create", "error"):
        raise DatasetAlreadyExistsError("a table already exists here; use mode='append' or 'overwrite'",
                                        table=uri, version=version)
    if mode == "ignore":
        return WritePlan(operation="none", read_version=version, schema=table, storage_version="",
                         skipped=skipped, **base)
    storage = resolve_storage_version(None, manifest.data_format.version or "2.0", table=uri)

    if mode == "overwrite" and replace_where is None:
        if enable_stable_row_ids and not stable:
            raise InvalidInputError("stable row ids can only be enabled when a table is created", table=uri)
        try:
            schema, adds = _conform_to_table(table, df_schema, "add_columns" if schema_mode != "error" else "error",
                                             uri)
        except SchemaMismatchError:
            if schema_mode != "overwrite":
                raise
            schema, adds = LanceSchema.from_arrow(lance_arrow_schema(df_schema, fixed_size_lists=fixed_size_lists)), False
        if data_storage_version is not None:
            storage = resolve_storage_version(data_storage_version, None, table=uri)
        # An overwrite carries its whole schema, so added columns need no separate commit.
        return _checked(WritePlan(operation="overwrite", read_version=version, schema=schema, storage_version=storage,
                                  enable_stable_row_ids=stable, columns=[f.name for f in schema.fields],
                                  fragment_ids=fragment_ids, stable_row_ids=stable, **base))

    if schema_mode == "overwrite":
        raise InvalidInputError("schema_mode='overwrite' needs mode='overwrite' without replace_where", table=uri)
    # Above the data files' ids too: a dropped column's id is never reused while its data exists.
    schema, adds = _conform_to_table(table, df_schema, schema_mode, uri, first_id=next_field_id_of(manifest))
    if replace_where is not None:
        to_expression(replace_where, table.to_arrow())  # validate against the table before any task runs
    return _checked(WritePlan(operation="replace" if replace_where is not None else "append", read_version=version,
                              schema=schema, storage_version=storage, replace_where=replace_where, adds_columns=adds,
                              columns=[f.name for f in schema.fields], fragment_ids=fragment_ids, stable_row_ids=stable,
                              **base))


__all__ = ["MODES", "SCHEMA_MODES", "WritePlan", "plan_write", "prior_commit_result"]
