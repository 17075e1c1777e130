"""The narrow set of ``lance_format`` calls the Dagster layer makes, in one place.

Every table operation the IO manager, resources, sensors and checks perform goes through these
functions: opening versions, writing (create / append / overwrite / replace-where), merging,
adding columns, reading change feeds, finding and summarizing versions, plus their Spark
counterparts from ``lance_format.spark``. This is the only module of ``lance_assets`` that
imports ``lance_format`` for table operations, and it imports only the package's public
top-level names (the import-linter contracts in pyproject.toml enforce both), so the rest of the
package is independent of where in the engine each operation lives.

``storage_options`` (Lance's object-store keys, e.g. for ``s3://``, ``gs://`` or ``az://`` tables) go to every call that
opens a table by URI; operations on an open dataset reuse its store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import pyarrow as pa

from lance_assets.config import MergeOptions
from lance_format import (
    LanceDataset,
    TableVersions,
    VersionSummary,
    checked_reader,
    publish_branch,
    replace_where,
    sql_expression_type,
    write_dataset,
    write_with_new_columns,
)
from lance_format.errors import DatasetNotFoundError, UnsupportedFeatureError

Options = Mapping[str, str] | None
# LanceDataset, TableVersions and VersionSummary are also the types the other modules
# annotate with (imported from here, not from lance_format).


def open_table(uri: str, version: int | str | None = None, *, storage_options: Options = None) -> LanceDataset:
    return LanceDataset(uri, version, storage_options=storage_options)


def try_open(uri: str, *, storage_options: Options = None) -> LanceDataset | None:
    """The latest version, or None when no table exists at ``uri``."""
    try:
        return LanceDataset(uri, storage_options=storage_options)
    except DatasetNotFoundError:
        return None


def write(
    uri: str,
    reader: pa.RecordBatchReader,
    *,
    mode: str,
    transaction_properties: Mapping[str, str],
    enable_stable_row_ids: bool,
    data_storage_version: str | None,
    storage_options: Options = None,
    max_rows_per_file: int | None = None,
    max_bytes_per_file: int | None = None,
) -> LanceDataset:
    """create / append / overwrite of a whole table."""
    kwargs: dict[str, Any] = _file_limits(max_rows_per_file, max_bytes_per_file)
    if data_storage_version:
        kwargs["data_storage_version"] = data_storage_version
    return write_dataset(
        reader, uri, mode=mode, transaction_properties=dict(transaction_properties),
        enable_stable_row_ids=enable_stable_row_ids, storage_options=storage_options, **kwargs,
    )


def replace(
    uri: str | LanceDataset,
    predicate: str,
    reader: pa.RecordBatchReader,
    *,
    transaction_properties: Mapping[str, str],
    enable_stable_row_ids: bool,
    data_storage_version: str | None,
    check_data: bool = True,
    storage_options: Options = None,
    max_rows_per_file: int | None = None,
    max_bytes_per_file: int | None = None,
) -> LanceDataset:
    """Replace exactly the rows matching ``predicate`` with ``reader``'s rows, in one commit."""
    return replace_where(
        uri, predicate, reader, transaction_properties=dict(transaction_properties), check_data=check_data,
        enable_stable_row_ids=enable_stable_row_ids, data_storage_version=data_storage_version,
        storage_options=None if isinstance(uri, LanceDataset) else storage_options,
        **_file_limits(max_rows_per_file, max_bytes_per_file),
    )


def _file_limits(max_rows_per_file: int | None, max_bytes_per_file: int | None) -> dict[str, Any]:
    limits = {"max_rows_per_file": max_rows_per_file, "max_bytes_per_file": max_bytes_per_file}
    return {k: v for k, v in limits.items() if v is not None}


def apply_table_config(ds: LanceDataset, config: Mapping[str, str], *,
                       transaction_properties: Mapping[str, str]) -> LanceDataset:
    """Set the table config keys whose value differs (one commit, only when something differs);
    returns the version that has them."""
    current = ds.config()
    changes = {k: v for k, v in config.items() if current.get(k) != v}
    if not changes:
        return ds
    ds.update_config(changes, transaction_properties=dict(transaction_properties))
    return ds.checkout_version(ds.version)  # update_config moved ds to the new version


def merge(
    ds: LanceDataset,
    reader: pa.RecordBatchReader,
    options: MergeOptions,
    *,
    delete_not_matched_by_source: bool | str,
    transaction_properties: Mapping[str, str],
) -> tuple[LanceDataset, dict[str, int]]:
    """Upsert ``reader`` into ``ds`` on ``options.on``; returns the new version and row counts.

    ``delete_not_matched_by_source``: delete target rows whose key is not in ``reader``
    (``True``), only those matching a SQL filter (a string), or none (``False``). It replaces
    ``options.delete_not_matched_by_source``, so that callers can scope it (to partitions).
    """
    builder = ds.merge_insert(list(options.on))
    if options.when_matched == "update_all":
        builder = builder.when_matched_update_all(options.update_condition)
    elif options.when_matched == "delete":
        builder = builder.when_matched_delete()
    elif options.when_matched == "fail":
        builder = builder.when_matched_fail()
    if options.when_not_matched == "insert_all":
        builder = builder.when_not_matched_insert_all()
    if delete_not_matched_by_source:
        condition = delete_not_matched_by_source if isinstance(delete_not_matched_by_source, str) else None
        builder = builder.when_not_matched_by_source_delete(condition)
    stats = builder.execute(reader, transaction_properties=dict(transaction_properties))
    new = ds.checkout_version(ds.version)  # execute moved ds to the new version (same store)
    return new, {
        "inserted": int(stats.get("num_inserted_rows", 0)),
        "updated": int(stats.get("num_updated_rows", 0)),
        "deleted": int(stats.get("num_deleted_rows", 0)),
    }


def add_columns(ds: LanceDataset, fields: Sequence[pa.Field], *, transaction_properties: Mapping[str, str]) -> LanceDataset:
    """Add all-null columns (one Merge commit); returns the new version."""
    ds.add_columns(pa.schema(list(fields)), transaction_properties=dict(transaction_properties))
    return ds.checkout_version(ds.version)  # add_columns moved ds to the new version


def write_adding_columns(
    ds: LanceDataset,
    reader: pa.RecordBatchReader,
    fields: Sequence[pa.Field],
    *,
    predicate: str | None,
    transaction_properties: Mapping[str, str],
    check_data: bool = True,
) -> LanceDataset:
    """Append ``reader`` (or replace the rows matching ``predicate``) and add ``fields``, as
    ONE Merge commit: the new columns never appear without the rows that fill them."""
    return write_with_new_columns(
        ds, reader, pa.schema(list(fields)), predicate=predicate, check_data=check_data,
        transaction_properties=dict(transaction_properties),
    )


def checked_rows(reader: pa.RecordBatchReader, predicate: str, *, table: str) -> pa.RecordBatchReader:
    """``reader``'s rows, refusing (InvalidInputError) the first batch with a row outside ``predicate``."""
    return checked_reader(reader, predicate, table=table)


def expression_type(sql: str, schema: pa.Schema) -> pa.DataType:
    """The Arrow type of a SQL expression over ``schema`` (InvalidInputError if it is not one)."""
    return sql_expression_type(sql, schema)


def table_versions(uri: str, *, storage_options: Options = None) -> TableVersions:
    """The table's versions (new ones after a cursor, the latest, summaries), without listing history."""
    return TableVersions(uri, storage_options=storage_options)


def summary_of(ds: LanceDataset) -> VersionSummary:
    """Commit time, operation and properties of an open version (its manifest and transaction)."""
    return VersionSummary.from_manifest(ds.manifest, ds.read_transaction_message())


def change_feed(
    uri: str, begin_version: int, end_version: int, *, columns: list[str] | None = None,
    storage_options: Options = None,
) -> pa.RecordBatchReader:
    """Changes of versions ``(begin_version, end_version]`` with ``_change_type`` etc."""
    ds = LanceDataset(uri, end_version, storage_options=storage_options)
    return ds.delta(begin_version=begin_version, end_version=end_version).get_changes(columns)


# -- branches (write-audit-publish) -------------------------------------------------------------
def branches(ds: LanceDataset) -> dict[str, dict[str, Any]]:
    """The table's branches by name: ``parent_branch``, ``parent_version``, ``create_at`` (epoch
    seconds), ``metadata``."""
    return ds.branches.list()


def create_branch(ds: LanceDataset, name: str, metadata: Mapping[str, str] | None = None) -> LanceDataset:
    """A new branch taken from the version ``ds`` is at (its dataset, at its first version)."""
    branch = ds.create_branch(name)
    if metadata:
        ds.branches.replace_metadata(name, dict(metadata))
    return branch


def set_branch_metadata(ds: LanceDataset, name: str, metadata: Mapping[str, str]) -> None:
    """Replace a branch's metadata."""
    ds.branches.replace_metadata(name, dict(metadata))


def location_of(ds: LanceDataset) -> str:
    """Where a dataset's own files are: a branch's folder (``tree/<name>``) for a branch checked
    out by reference, whose ``uri`` reports the table root like pylance's."""
    return ds.object_store.uri


def open_branch(uri: str, name: str, *, storage_options: Options = None) -> LanceDataset:
    """The latest version of branch ``name`` of the table at ``uri``."""
    latest_of_branch: Any = (name, None)  # a (branch, version) reference, which checkout_version takes
    return LanceDataset(uri, storage_options=storage_options).checkout_version(latest_of_branch)


def delete_branch(ds: LanceDataset, name: str) -> None:
    """Delete a branch (BranchError when tags or other branches still reference it)."""
    ds.branches.delete(name)


def publish(main: LanceDataset, branch: str, *, transaction_properties: Mapping[str, str],
            rebase: bool = False) -> LanceDataset:
    """Move main to ``branch``'s latest version in one atomic commit, however many commits the
    branch holds (CommitConflictError when main moved since the branch was taken, unless
    ``rebase`` and the commits are compatible); idempotent. Returns main's publishing version."""
    return publish_branch(main, branch, transaction_properties=dict(transaction_properties), rebase=rebase)


# -- maintenance ---------------------------------------------------------------------------------
def small_fragment_count(ds: LanceDataset, target_rows_per_fragment: int) -> int:
    """Fragments with fewer physical rows than ``target_rows_per_fragment`` (read from the manifest)."""
    return sum(1 for fragment in ds.get_fragments() if fragment.physical_rows < target_rows_per_fragment)


def compact(ds: LanceDataset, *, target_rows_per_fragment: int,
            transaction_properties: Mapping[str, str]) -> tuple[LanceDataset, dict[str, int]]:
    """Merge small fragments (``optimize.compact_files``); the new version and Lance's metrics."""
    metrics = ds.optimize.compact_files(target_rows_per_fragment=target_rows_per_fragment,
                                        transaction_properties=dict(transaction_properties))
    new = ds.checkout_version(ds.version)  # compact_files moved ds to the new version (when it committed)
    return new, {
        "fragments_removed": metrics.fragments_removed, "fragments_added": metrics.fragments_added,
        "files_removed": metrics.files_removed, "files_added": metrics.files_added,
    }


def version_numbers(ds: LanceDataset) -> list[int]:
    """The table's listed versions, oldest first."""
    return [int(v["version"]) for v in ds.versions()]


def cleanup(ds: LanceDataset, *, older_than: timedelta | None, retain_versions: int | None,
            versions: list[int] | None) -> dict[str, int]:
    """``cleanup_old_versions``, which keeps tagged versions and those branches reference; with
    ``versions`` only those may go. Tagged old versions are kept silently, not an error."""
    stats = ds.cleanup_old_versions(older_than=older_than, retain_versions=retain_versions, versions=versions,
                                    error_if_tagged_old_versions=False)
    return {
        "versions_removed": stats.old_versions,
        "bytes_removed": stats.bytes_removed,
        "files_removed": stats.data_files_removed + stats.deletion_files_removed + stats.transaction_files_removed
        + stats.index_files_removed,
        "data_files_removed": stats.data_files_removed,
    }


# -- Spark ---------------------------------------------------------------------------------------
def spark_module() -> Any:
    try:
        import lance_format.spark as spark
    except ImportError as exc:
        raise UnsupportedFeatureError(f"lance_format.spark is not available: {exc}") from None
    return spark


def spark_new_table_schema(df: Any) -> pa.Schema:
    """The Arrow schema of a new table the engine's Spark writer makes from ``df`` (no job runs)."""
    return spark_module().lance_arrow_schema(df.schema)


def spark_write(df: Any, uri: str, **kwargs: Any) -> Any:
    return spark_module().write_dataframe(df, uri, **kwargs)


def spark_merge(df: Any, uri: str, options: MergeOptions, *, delete_not_matched_by_source: bool | str,
                transaction_properties: Mapping[str, str], storage_options: Options = None) -> tuple[Any, dict[str, int]]:
    """Upsert a Spark DataFrame on the executors (``merge_dataframe``); returns the commit and
    the row counts. Like :func:`merge`, the update condition only qualifies ``update_all``."""
    result = spark_module().merge_dataframe(
        df, uri, on=list(options.on), when_matched=options.when_matched, when_not_matched=options.when_not_matched,
        delete_not_matched_by_source=delete_not_matched_by_source or None,
        when_matched_update_condition=options.update_condition if options.when_matched == "update_all" else None,
        transaction_properties=dict(transaction_properties), storage_options=storage_options,
    )
    return result, {"inserted": result.rows_inserted, "updated": result.rows_updated, "deleted": result.rows_deleted}


def spark_read(spark: Any, uri: str, **kwargs: Any) -> Any:
    return spark_module().read_dataframe(spark, uri, **kwargs)


def spark_changes(spark: Any, uri: str, begin_version: int, end_version: int, columns: list[str] | None,
                  *, storage_options: Options = None) -> Any:
    return spark_module().read_changes(spark, uri, begin_version, end_version, columns,
                                       storage_options=storage_options)


def spark_nearest(spark: Any, uri: str, queries: Any, column: str, k: int, **kwargs: Any) -> Any:
    """The distributed k-nearest-neighbour join (``lance_format.spark.nearest``)."""
    return spark_module().nearest(spark, uri, queries, column, k, **kwargs)


def locate_namespace_table(namespace: Mapping[str, Any], table_id: Sequence[str], *, create: bool,
                           storage_options: Options = None) -> tuple[str, dict[str, str] | None]:
    """``(location, storage options)`` of a Lance Namespace table; ``create`` declares a missing
    one (and its parent namespaces). Raises DatasetNotFoundError for a missing table otherwise."""
    # imported when used: the namespace package needs the ``namespace`` extra
    from lance_format.namespace import locate_table

    located = locate_table(namespace, list(table_id), create=create, storage_options=storage_options)
    return located.uri, located.storage_options


def storage_options_of(options: Mapping[str, str] | None) -> dict[str, str] | None:
    """Configured storage options as the engine takes them (None when there are none)."""
    return {str(k): str(v) for k, v in options.items()} if options else None


# -- search --------------------------------------------------------------------------------------
def search(ds: LanceDataset, *, nearest: Mapping[str, Any] | None = None, full_text: Any = None,
           limit: int | None = None, columns: Sequence[str] | None = None, filter: str | None = None,
           prefilter: bool | None = None, with_row_id: bool = False) -> pa.Table:
    """One vector (pylance's ``nearest`` dict) or full-text (``full_text_query``) search of a
    version, with its ``_distance`` / ``_score``; ``prefilter`` None leaves pylance's default."""
    kwargs: dict[str, Any] = {"columns": list(columns) if columns is not None else None, "filter": filter,
                              "with_row_id": with_row_id}
    if prefilter is not None:
        kwargs["prefilter"] = prefilter
    if nearest is not None:
        kwargs["nearest"] = dict(nearest)
    if full_text is not None:
        kwargs["full_text_query"] = full_text
        kwargs["limit"] = limit
    return ds.to_table(**kwargs)


# -- scalar indices ------------------------------------------------------------------------------
def describe_indices(ds: LanceDataset) -> list[Any]:
    """The version's indices (``name``, ``index_type`` like pylance's ``"BTree"``, ``field_names``)."""
    return list(ds.describe_indices())


def index_stats(ds: LanceDataset, name: str) -> dict[str, Any]:
    """pylance's ``stats.index_stats``: ``num_indexed_rows``, ``num_unindexed_rows``, ``index_type``, ..."""
    return ds.stats.index_stats(name)


def create_index(ds: LanceDataset, column: str, index_type: str, *, name: str, replace: bool,
                 params: Mapping[str, Any]) -> LanceDataset:
    """Build (or, with ``replace``, rebuild) an index in one commit; returns the new version.
    Vector types (``IVF_PQ``, ``IVF_FLAT``, ``IVF_SQ``) go through ``create_index`` with their
    training parameters (``num_partitions``, ``num_sub_vectors``, ``metric``, ...)."""
    if index_type.upper().startswith("IVF_"):
        ds.create_index(column, index_type.upper(), name=name, replace=replace, **dict(params))
    else:
        ds.create_scalar_index(column, index_type, name=name, replace=replace, **dict(params))
    return ds.checkout_version(ds.version)  # create_scalar_index moved ds to the new version


def optimize_indices(ds: LanceDataset, names: Sequence[str]) -> LanceDataset:
    """Extend ``names`` over the rows they do not cover (``optimize.optimize_indices``); returns the
    new version. UnsupportedFeatureError where the engine cannot optimize indices yet."""
    ds.optimize.optimize_indices(index_names=list(names))
    return ds.checkout_version(ds.version)
