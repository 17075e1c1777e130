"""The ``LanceDataset`` methods that commit a new version: mutations, schema evolution,
restore, compaction and cleanup, table config and metadata.

Each one commits and then moves the dataset object to the new version, like pylance. The
operations themselves live in the subpackages below (``mutations``, ``evolution``,
``maintenance``); these methods are their documented, typed entry points. ``LanceDataset``
inherits them, so they are kept apart from the reading API only to keep each module readable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.dataset.evolution.columns import add_columns, alter_columns, drop_columns
from lance_format.dataset.maintenance.compaction import DatasetOptimizer
from lance_format.dataset.maintenance.metadata_commits import (
    delete_config_keys,
    restore,
    update_config,
    update_field_metadata,
    update_metadata,
    update_schema_metadata,
)
from lance_format.dataset.mixin import DatasetMixin
from lance_format.dataset.mutations.base import DEFAULT_CONFLICT_RETRIES, DEFAULT_RETRY_TIMEOUT
from lance_format.dataset.mutations.delete_update import delete, merge_insert, update
from lance_format.table.cleanup import cleanup_old_versions
from lance_format.table.naming import migrate_to_v2_names

if TYPE_CHECKING:
    from lance_format.dataset.maintenance.compaction import DatasetOptimizer
    from lance_format.dataset.mutations.merge_insert import MergeInsertBuilder
    from lance_format.table.cleanup import CleanupStats


class CommittingMethods(DatasetMixin):
    """Mixed into ``LanceDataset``: every method here commits a new version of the table."""

    def delete(
        self,
        predicate: str | pc.Expression,
        *,
        conflict_retries: int = DEFAULT_CONFLICT_RETRIES,
        retry_timeout: timedelta = DEFAULT_RETRY_TIMEOUT,
        transaction_properties: Mapping[str, str] | None = None,
        commit_message: str | None = None,
    ) -> dict[str, int]:
        """Delete the rows matching a predicate and commit; this object moves to the new version.

        Parameters
        ----------
        predicate
            A SQL predicate or a pyarrow expression.
        conflict_retries
            How often to redo the delete after a retryable concurrent commit.
        retry_timeout
            Give up retrying after this long.
        transaction_properties
            Key/value pairs recorded in the transaction.
        commit_message
            A message recorded in the transaction.

        Returns
        -------
        dict
            ``{"num_deleted_rows": n}``.

        Raises
        ------
        InvalidInputError
            The predicate is not valid for the table.
        CommitConflictError
            A concurrent commit is incompatible, or the retries ran out.

        Examples
        --------
        >>> import tempfile, pyarrow as pa, lance_format as lance
        >>> uri = tempfile.mkdtemp() + "/people.lance"
        >>> ds = lance.write_dataset(pa.table({"id": [1, 2, 3]}), uri)
        >>> ds.delete("id >= 2")
        {'num_deleted_rows': 2}
        >>> ds.version, ds.count_rows()
        (2, 1)
        """

        return delete(self._as_dataset(), predicate, conflict_retries=conflict_retries, retry_timeout=retry_timeout,
                      transaction_properties=transaction_properties, commit_message=commit_message)

    def update(
        self,
        updates: Mapping[str, Any],
        where: str | pc.Expression | None = None,
        conflict_retries: int = DEFAULT_CONFLICT_RETRIES,
        retry_timeout: timedelta = DEFAULT_RETRY_TIMEOUT,
        data_storage_version: str | None = None,
        *,
        transaction_properties: Mapping[str, str] | None = None,
        commit_message: str | None = None,
    ) -> dict[str, int]:
        """Set columns on the rows matching ``where`` and commit; this object moves to the new version.

        Parameters
        ----------
        updates
            Column name -> SQL expression (a string) or literal value.
        where
            A SQL predicate or pyarrow expression; every row if None.
        conflict_retries
            How often to redo the update after a retryable concurrent commit.
        retry_timeout
            Give up retrying after this long.
        data_storage_version
            The file version of the rewritten rows; only the table's own version is accepted.
        transaction_properties
            Key/value pairs recorded in the transaction.
        commit_message
            A message recorded in the transaction.

        Returns
        -------
        dict
            ``{"num_rows_updated": n}``.

        Raises
        ------
        InvalidInputError
            An unknown column, an invalid expression or a value that does not fit the column.
        UnsupportedFeatureError
            ``data_storage_version`` differs from the table's.
        CommitConflictError
            A concurrent commit is incompatible, or the retries ran out.

        Examples
        --------
        >>> import tempfile, pyarrow as pa, lance_format as lance
        >>> uri = tempfile.mkdtemp() + "/people.lance"
        >>> ds = lance.write_dataset(pa.table({"id": [1, 2], "name": ["ann", "bo"]}), uri)
        >>> ds.update({"name": "upper(name)"}, where="id = 2")
        {'num_rows_updated': 1}
        >>> ds.to_table().to_pydict()
        {'id': [1, 2], 'name': ['ann', 'BO']}
        """

        return update(self._as_dataset(), updates, where, conflict_retries=conflict_retries, retry_timeout=retry_timeout,
                      data_storage_version=data_storage_version, transaction_properties=transaction_properties,
                      commit_message=commit_message)

    def merge_insert(self, on: str | Iterable[str] | None = None) -> MergeInsertBuilder:
        """Start a merge-insert (upsert) keyed on ``on``; configure it, then call ``execute``.

        Parameters
        ----------
        on
            The key column, or several key columns; the table's unenforced primary key (fields
            marked ``lance-schema:unenforced-primary-key``) when None, like pylance.

        Returns
        -------
        MergeInsertBuilder
            The builder of the operation.

        Raises
        ------
        InvalidInputError
            No key is given, or a key column does not exist.

        Examples
        --------
        >>> import tempfile, pyarrow as pa, lance_format as lance
        >>> uri = tempfile.mkdtemp() + "/people.lance"
        >>> ds = lance.write_dataset(pa.table({"id": [1, 2], "name": ["ann", "bo"]}), uri)
        >>> changes = pa.table({"id": [2, 3], "name": ["bea", "cy"]})
        >>> (ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
        ...    .execute(changes))
        {'num_inserted_rows': 1, 'num_updated_rows': 1, 'num_deleted_rows': 0}
        >>> ds.to_table().sort_by("id").to_pydict()
        {'id': [1, 2, 3], 'name': ['ann', 'bea', 'cy']}
        """

        return merge_insert(self._as_dataset(), on)

    def add_columns(
        self,
        transforms: Any,
        read_columns: list[str] | None = None,
        reader_schema: pa.Schema | None = None,
        batch_size: int | None = None,
        *,
        transaction_properties: Mapping[str, str] | None = None,
        commit_message: str | None = None,
    ) -> None:
        """Add columns and commit; this object moves to the new version.

        Parameters
        ----------
        transforms
            A dict of column name -> SQL expression, a batch UDF, aligned Arrow data (a reader,
            table or batches), or ``pa.Field``/list of fields/``pa.Schema`` for all-null columns.
        read_columns
            The columns a UDF reads; all columns if None.
        reader_schema
            The schema of ``transforms`` when it is an iterable of batches.
        batch_size
            The batch size a UDF is called with.
        transaction_properties
            Key/value pairs recorded in the transaction.
        commit_message
            A message recorded in the transaction.

        Raises
        ------
        InvalidInputError
            A column already exists, a new column without data is not nullable, or the data does
            not cover the table's rows.
        CommitConflictError
            A concurrent commit is incompatible.
        """

        add_columns(self._as_dataset(), transforms, read_columns, reader_schema, batch_size,
                    transaction_properties=transaction_properties, commit_message=commit_message)

    def drop_columns(
        self,
        columns: list[str],
        *,
        transaction_properties: Mapping[str, str] | None = None,
        commit_message: str | None = None,
    ) -> None:
        """Remove columns (top-level or nested ``a.b``) from the schema and commit.

        The data stays in the files until compaction; this object moves to the new version.

        Parameters
        ----------
        columns
            The column paths to remove.
        transaction_properties
            Key/value pairs recorded in the transaction.
        commit_message
            A message recorded in the transaction.

        Raises
        ------
        InvalidInputError
            A column does not exist, or every column would be dropped.
        CommitConflictError
            A concurrent commit is incompatible.
        """

        drop_columns(self._as_dataset(), columns, transaction_properties=transaction_properties, commit_message=commit_message)

    def alter_columns(
        self,
        *alterations: Mapping[str, Any],
        transaction_properties: Mapping[str, str] | None = None,
        commit_message: str | None = None,
    ) -> None:
        """Rename columns, change their nullability or cast them, and commit.

        Parameters
        ----------
        *alterations
            Dicts with a ``path`` and any of ``name``, ``nullable``, ``data_type``.
        transaction_properties
            Key/value pairs recorded in the transaction.
        commit_message
            A message recorded in the transaction.

        Raises
        ------
        InvalidInputError
            An unknown column or key, a name clash, nulls in a column made non-nullable, or an
            unsafe cast.
        UnsupportedFeatureError
            Casting a nested column.
        CommitConflictError
            A concurrent commit is incompatible.
        """

        alter_columns(self._as_dataset(), *alterations, transaction_properties=transaction_properties,
                      commit_message=commit_message)

    def restore(
        self,
        *,
        transaction_properties: Mapping[str, str] | None = None,
        commit_message: str | None = None,
    ) -> None:
        """Commit the checked-out version as the newest version.

        Parameters
        ----------
        transaction_properties
            Key/value pairs recorded in the transaction.
        commit_message
            A message recorded in the transaction.

        Raises
        ------
        CommitConflictError
            A concurrent commit is incompatible.
        """

        restore(self._as_dataset(), transaction_properties=transaction_properties, commit_message=commit_message)

    @property
    def optimize(self) -> DatasetOptimizer:
        """Table maintenance (pylance's ``ds.optimize``): ``compact_files(...)``."""

        return DatasetOptimizer(self._as_dataset())

    def cleanup_old_versions(
        self,
        older_than: timedelta | None = None,
        retain_versions: int | None = None,
        *,
        delete_unverified: bool = False,
        error_if_tagged_old_versions: bool = True,
        delete_rate_limit: int | None = None,
        versions: list[int] | None = None,
        delete_concurrency: int | None = None,
    ) -> CleanupStats:
        """Remove old versions and the files only they reference (pylance's semantics).

        Parameters
        ----------
        older_than
            Remove versions older than this; 14 days if no criterion is given.
        retain_versions
            Keep at least this many of the newest versions.
        delete_unverified
            Also remove unreferenced files younger than 7 days (they may be a running write's).
        error_if_tagged_old_versions
            Raise instead of skipping when a tagged version would be removed.
        delete_rate_limit
            At most this many files deleted per second (positive).
        versions
            Remove exactly these versions.
        delete_concurrency
            Accepted for pylance compatibility; deletes run one at a time.

        Returns
        -------
        CleanupStats
            What was removed.

        Raises
        ------
        InvalidInputError
            ``retain_versions`` is not positive.
        TagError
            A version to remove is tagged and ``error_if_tagged_old_versions`` is set.
        """

        return cleanup_old_versions(
            self._as_dataset(), older_than, retain_versions, delete_unverified=delete_unverified,
            error_if_tagged_old_versions=error_if_tagged_old_versions, delete_rate_limit=delete_rate_limit,
            versions=versions, delete_concurrency=delete_concurrency,
        )

    def update_config(
        self,
        values: Mapping[str, str | None],
        *,
        replace: bool = False,
        transaction_properties: Mapping[str, str] | None = None,
        commit_message: str | None = None,
    ) -> dict[str, str]:
        """Set (or, with None, remove) table config keys and commit.

        Parameters
        ----------
        values
            Key -> new value, or None to remove the key.
        replace
            Replace the whole config with ``values`` instead of merging.
        transaction_properties
            Key/value pairs recorded in the transaction.
        commit_message
            A message recorded in the transaction.

        Returns
        -------
        dict
            The config of the new version.

        Raises
        ------
        InvalidInputError
            ``values`` is not a dict of str -> str | None.
        CommitConflictError
            A concurrent commit changed the same keys.
        """

        return update_config(self._as_dataset(), values, replace=replace, transaction_properties=transaction_properties,
                             commit_message=commit_message)

    def migrate_manifest_paths_v2(self) -> None:
        """Rename the table's manifests from V1 names (``{version}.manifest``) to V2 names
        (``{u64::MAX - version:020}.manifest``) as pylance's ``migrate_manifest_paths_v2`` does,
        then move this object to the latest version. Idempotent; must not run while other
        processes write the table. Later commits keep the V2 names.

        Raises
        ------
        UnsupportedFeatureError
            The table commits through an external manifest store.
        """

        ds = self._as_dataset()
        migrate_to_v2_names(ds.object_store)
        ds._replace_version(ds.latest_version)

    def delete_config_keys(
        self,
        keys: list[str],
        *,
        transaction_properties: Mapping[str, str] | None = None,
        commit_message: str | None = None,
    ) -> None:
        """Remove table config keys and commit.

        Parameters
        ----------
        keys
            The keys to remove.
        transaction_properties
            Key/value pairs recorded in the transaction.
        commit_message
            A message recorded in the transaction.

        Raises
        ------
        InvalidInputError
            A key is not a string.
        CommitConflictError
            A concurrent commit changed the same keys.
        """

        delete_config_keys(self._as_dataset(), keys, transaction_properties=transaction_properties, commit_message=commit_message)

    def update_metadata(
        self,
        values: Mapping[str, str | None],
        *,
        replace: bool = False,
        transaction_properties: Mapping[str, str] | None = None,
        commit_message: str | None = None,
    ) -> dict[str, str]:
        """Set (or, with None, remove) table metadata keys and commit.

        Parameters
        ----------
        values
            Key -> new value, or None to remove the key.
        replace
            Replace all table metadata with ``values`` instead of merging.
        transaction_properties
            Key/value pairs recorded in the transaction.
        commit_message
            A message recorded in the transaction.

        Returns
        -------
        dict
            The table metadata of the new version.

        Raises
        ------
        InvalidInputError
            ``values`` is not a dict of str -> str | None.
        CommitConflictError
            A concurrent commit changed the same keys.
        """

        return update_metadata(self._as_dataset(), values, replace=replace, transaction_properties=transaction_properties,
                               commit_message=commit_message)

    def update_schema_metadata(
        self,
        values: Mapping[str, str | None],
        *,
        replace: bool = False,
        transaction_properties: Mapping[str, str] | None = None,
        commit_message: str | None = None,
    ) -> dict[str, str]:
        """Set (or, with None, remove) Arrow schema metadata keys and commit.

        Parameters
        ----------
        values
            Key -> new value, or None to remove the key.
        replace
            Replace all schema metadata with ``values`` instead of merging.
        transaction_properties
            Key/value pairs recorded in the transaction.
        commit_message
            A message recorded in the transaction.

        Returns
        -------
        dict
            The schema metadata of the new version.

        Raises
        ------
        InvalidInputError
            ``values`` is not a dict of str -> str | None.
        CommitConflictError
            A concurrent commit changed the same keys.
        """

        return update_schema_metadata(self._as_dataset(), values, replace=replace, transaction_properties=transaction_properties,
                                      commit_message=commit_message)

    def update_field_metadata(
        self,
        field_updates: Mapping[str, Mapping[str, str | None]],
        *,
        replace: bool = False,
        transaction_properties: Mapping[str, str] | None = None,
        commit_message: str | None = None,
    ) -> None:
        """Set (or, with None, remove) metadata keys of fields and commit.

        Parameters
        ----------
        field_updates
            Column path (``a.b`` for nested) -> key -> new value or None.
        replace
            Replace each named field's metadata instead of merging.
        transaction_properties
            Key/value pairs recorded in the transaction.
        commit_message
            A message recorded in the transaction.

        Raises
        ------
        InvalidInputError
            A column does not exist, or a value is not str | None.
        CommitConflictError
            A concurrent commit changed the same field.
        """

        update_field_metadata(self._as_dataset(), field_updates, replace=replace, transaction_properties=transaction_properties,
                              commit_message=commit_message)


__all__ = ["CommittingMethods"]
