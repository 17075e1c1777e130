"""``merge_insert``: join source rows to the table on key columns and upsert / insert / delete.

Semantics follow pylance 14:

* source columns must be a subset of the table's with identical types (keys included); a
  partial source updates only its columns and inserts nulls for the others;
* null keys never match; a target row matched by two source rows is ambiguous and refused
  (:class:`InvalidInputError`) while duplicate keys among *unmatched* source rows are inserted;
* updated rows are rewritten in target order, then inserted rows in source order, all into new
  fragments of one ``Update`` transaction; old copies and deleted rows get deletion files;
* with stable row ids the updated rows keep their ids (the new fragments carry them as a
  prefix; inserted rows get fresh ids at commit).

``execute`` returns ``{"num_inserted_rows", "num_updated_rows", "num_deleted_rows"}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.dataset.mutations.base import (
    DEFAULT_CONFLICT_RETRIES,
    DEFAULT_RETRY_TIMEOUT,
    Prepared,
    _prepare,
    apply_deletions,
    attach_row_ids,
    batches_of,
    concat,
    run_mutation,
    split_addresses,
    storage_version_of,
    table_context,
    transaction_for,
    write_new_fragments,
)
from lance_format.dataset.sql.filter import to_expression
from lance_format.dataset.writing.arrow_input import as_reader
from lance_format.dataset.writing.fragment_sink import DATA_DIR, WriteTarget, resolve_storage_version
from lance_format.errors import InvalidInputError, SchemaMismatchError, UnsupportedFeatureError
from lance_format.schema.blob import bytes_as_blob_v2_storage, is_blob_field
from lance_format.schema.extensions import same_stored_type
from lance_format.table.base_paths import BaseStores, target_bases_of

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset

_ADDR = "_rowaddr"
_ROWID = "_rowid"
_POS = "__lance_target_pos"
_SRC = "__lance_source_pos"


class MergeInsertBuilder:
    """Configures and runs one merge-insert (mirrors pylance's ``MergeInsertBuilder``).

    Made by :meth:`LanceDataset.merge_insert`. The ``when_*`` methods and the retry settings
    each return the builder, so calls chain; :meth:`execute` runs it.

    Raises
    ------
    InvalidInputError
        No key column is given, or a key column does not exist.
    """

    def __init__(self, dataset: LanceDataset, on: str | Iterable[str] | None = None) -> None:
        """``on``: the key column(s); None: the table's unenforced primary key (fields marked
        ``lance-schema:unenforced-primary-key``), as in pylance."""
        self._dataset = dataset
        if on is None:
            marked = [f for f in dataset.lance_schema.fields if f.is_unenforced_primary_key]
            if not marked:
                raise InvalidInputError("A merge insert operation requires join keys: specify `on` columns "
                                        "explicitly or configure a primary key in the dataset schema",
                                        table=dataset.uri)
            on = [f.name for f in sorted(marked, key=lambda f: (f.primary_key_position, f.id))]
        keys = [on] if isinstance(on, str) else list(on or [])
        if not keys:
            raise InvalidInputError("merge_insert needs at least one key column", table=dataset.uri)
        for key in keys:
            if key not in dataset.schema.names:
                raise InvalidInputError(f"Merge insert key column {key!r} does not exist in schema",
                                        table=dataset.uri, column=key)
        self._on = keys
        self._matched: str | None = None  # "update" | "delete" | "fail"
        self._matched_condition: str | None = None
        self._insert = False
        self._delete_unmatched = False
        self._delete_unmatched_expr: str | pc.Expression | None = None
        self._retries = DEFAULT_CONFLICT_RETRIES
        self._timeout = DEFAULT_RETRY_TIMEOUT
        # (target_bases, target_all_bases) for the new data files; (None, None): the table's root
        self._targets: tuple[list[str] | None, bool | None] = (None, None)

    # -- configuration (each returns the builder) --------------------------------------------
    def when_matched_update_all(self, condition: str | None = None) -> MergeInsertBuilder:
        """Overwrite matched target rows with their source rows (only the source's columns).

        Parameters
        ----------
        condition
            A SQL predicate over ``target.<col>`` and ``source.<col>``; only matched rows for
            which it is true are updated. Checked when :meth:`execute` runs.

        Returns
        -------
        MergeInsertBuilder
            This builder.
        """
        self._matched, self._matched_condition = "update", condition
        return self

    def when_matched_delete(self) -> MergeInsertBuilder:
        """Delete target rows that a source row matches.

        Returns
        -------
        MergeInsertBuilder
            This builder.
        """
        self._matched, self._matched_condition = "delete", None
        return self

    def when_matched_fail(self) -> MergeInsertBuilder:
        """Make :meth:`execute` raise :class:`InvalidInputError` if any source row matches.

        Returns
        -------
        MergeInsertBuilder
            This builder.
        """
        self._matched, self._matched_condition = "fail", None
        return self

    def when_not_matched_insert_all(self) -> MergeInsertBuilder:
        """Insert source rows that match no target row (missing columns become null).

        Returns
        -------
        MergeInsertBuilder
            This builder.
        """
        self._insert = True
        return self

    def when_not_matched_by_source_delete(self, expr: str | pc.Expression | None = None) -> MergeInsertBuilder:
        """Delete target rows that no source row matches.

        Parameters
        ----------
        expr
            A SQL predicate or pyarrow expression over the target's columns; only unmatched
            rows satisfying it are deleted. Every unmatched row if None.

        Returns
        -------
        MergeInsertBuilder
            This builder.
        """
        self._delete_unmatched, self._delete_unmatched_expr = True, expr
        return self

    def conflict_retries(self, max_retries: int) -> MergeInsertBuilder:
        """How often :meth:`execute` redoes the merge after a retryable concurrent commit (default 10).

        Parameters
        ----------
        max_retries
            The number of retries; 0 disables retrying.

        Returns
        -------
        MergeInsertBuilder
            This builder.
        """
        self._retries = int(max_retries)
        return self

    def retry_timeout(self, timeout: timedelta) -> MergeInsertBuilder:
        """How long :meth:`execute` keeps retrying after conflicts (default 30 seconds).

        Parameters
        ----------
        timeout
            The time limit for retries.

        Returns
        -------
        MergeInsertBuilder
            This builder.
        """
        self._timeout = timeout
        return self

    def use_index(self, use_index: bool) -> MergeInsertBuilder:
        """Accepted for pylance compatibility; this engine always joins by scanning the table.

        Parameters
        ----------
        use_index
            Ignored.

        Returns
        -------
        MergeInsertBuilder
            This builder.
        """
        return self  # this engine always scans the table

    def write_mode(self, mode: str) -> MergeInsertBuilder:
        """How matched rows are written: ``"auto"`` or ``"rewrite_rows"`` (this engine always
        rewrites whole rows); ``"rewrite_columns"`` (column patches) is not supported here."""
        if mode not in _WRITE_MODES:
            raise InvalidInputError(f"Invalid write_mode: {mode}. Expected one of 'auto', 'rewrite_rows', "
                                    "'rewrite_columns'", table=self._dataset.uri)
        if mode == "rewrite_columns":
            raise UnsupportedFeatureError("merge_insert write_mode 'rewrite_columns' is not supported",
                                          table=self._dataset.uri)
        return self

    def target_bases(self, bases: list[str]) -> MergeInsertBuilder:
        """Write the merge's new data files to these registered bases (names or paths), file by
        file in turn, as ``write_dataset(target_bases=...)`` does."""
        self._targets = (bases, None)
        return self

    def target_all_bases(self, include_primary: bool = True) -> MergeInsertBuilder:
        """Write the merge's new data files to every registered base in turn (after the table's own
        storage when ``include_primary``); not combinable with :meth:`target_bases`."""
        self._targets = (None, include_primary)
        return self

    def _write_targets(self, ds: LanceDataset) -> list[WriteTarget] | None:
        bases, include_primary = self._targets
        if bases is None and include_primary is None:
            return None
        manifest = ds.manifest
        ids = target_bases_of(manifest.base_paths, bases, include_primary, table=ds.uri)
        stores = BaseStores(ds.object_store, manifest)
        return [WriteTarget(stores.store(i), i, DATA_DIR if stores.is_dataset_root(i) else "") for i in ids]

    def data_storage_version(self, version: str) -> MergeInsertBuilder:
        """The file version of the files the merge writes; only the table's own is supported."""
        ds = self._dataset
        if resolve_storage_version(version, None, table=ds.uri) != ds.data_storage_version:
            raise UnsupportedFeatureError(f"writing {version} files into a {ds.data_storage_version} table "
                                          "is not supported", table=ds.uri)
        return self

    # -- execution -----------------------------------------------------------------------------
    def execute(
        self,
        data_obj: Any,
        *,
        schema: pa.Schema | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        commit_message: str | None = None,
    ) -> dict[str, int]:
        """Run the merge against the dataset's version and commit it; the dataset moves on.

        Parameters
        ----------
        data_obj
            The source rows: a pyarrow Table, RecordBatch or RecordBatchReader, a pandas
            DataFrame, an Arrow stream, or an iterable of batches.
        schema
            The schema to read ``data_obj`` with (needed for an empty iterable).
        transaction_properties
            Key/value pairs recorded in the transaction.
        commit_message
            A message recorded in the transaction.

        Returns
        -------
        dict
            ``{"num_inserted_rows", "num_updated_rows", "num_deleted_rows"}``.

        Raises
        ------
        InvalidInputError
            Nothing is configured, a condition is invalid, a target row is matched by two
            source rows, or a row matches under :meth:`when_matched_fail`.
        SchemaMismatchError
            The source's columns or types do not fit the table.
        CommitConflictError
            A concurrent commit is incompatible, or the retries ran out.
        """
        ds = self._dataset
        source = self._checked_source(data_obj, schema)

        def prepare(current: LanceDataset) -> Prepared:
            return _Run(self, current, source, transaction_properties, commit_message).prepare()

        result: dict[str, int] = run_mutation(ds, prepare, conflict_retries=self._retries,
                                              retry_timeout=self._timeout)
        return result

    def execute_uncommitted(self, data_obj: Any, *, schema: pa.Schema | None = None) -> tuple[Any, dict[str, int]]:
        """Write the merge's new files but commit nothing (pylance's ``execute_uncommitted``).

        Returns
        -------
        (Transaction, dict)
            The transaction to pass to ``LanceDataset.commit(uri, transaction)``, and the row
            counts :meth:`execute` would report. Files of a transaction that is never committed
            are removed by ``cleanup_old_versions`` once old enough.
        """
        prepared = self._prepared_without_commit(data_obj, schema)
        return self._dataset.transaction_of(prepared.txn), prepared.result

    def _prepared_without_commit(self, data_obj: Any, schema: pa.Schema | None) -> Prepared:
        source = self._checked_source(data_obj, schema)
        return _prepare(lambda current: _Run(self, current, source, None, None).prepare(), self._dataset)

    def explain_plan(self, schema: pa.Schema | None = None, verbose: bool = False) -> str:
        """A readable description of what :meth:`execute` will do (this engine's plan)."""
        ds = self._dataset
        matched = {None: "keep", "update": "update all columns", "delete": "delete", "fail": "fail"}.get(
            self._matched, str(self._matched))
        lines = [
            f"MergeInsert: uri={ds.uri}, version={ds.version}, on={self._on}",
            f"  when matched: {matched}"
            + (f" if {self._matched_condition}" if self._matched_condition is not None else ""),
            f"  when not matched: {'insert' if self._insert else 'skip'}",
            "  when not matched by source: "
            + ("delete" + (f" if {self._delete_unmatched_expr}" if self._delete_unmatched_expr else "")
               if self._delete_unmatched else "keep"),
            f"  reads: the source into memory, then every fragment of the table, joining on {self._on}",
            "  writes: changed rows as new fragments, deletion vectors for the rows they replace; one commit",
        ]
        if verbose and schema is not None:
            lines.append(f"  source schema: {schema.to_string(show_schema_metadata=False)!r}")
        return "\n".join(lines) + "\n"

    def analyze_plan(self, data_obj: Any, *, schema: pa.Schema | None = None) -> str:
        """Run the merge without committing and report the plan with what it would change: the
        first line gains pylance's ``metrics=[...]`` (``bytes_written``, ``num_files_written``
        and the row counts), then a line of the same with the elapsed time."""
        import time

        started = time.perf_counter()
        prepared = self._prepared_without_commit(data_obj, schema)
        elapsed = time.perf_counter() - started
        body = getattr(prepared.txn, prepared.txn.WhichOneof("operation") or "update")
        data_files = [f for fragment in [*getattr(body, "new_fragments", []), *getattr(body, "fragments", [])]
                      for f in fragment.files]
        prepared.discard(self._dataset.object_store)  # an analysis leaves nothing behind
        counts = ", ".join(f"{k}={v}" for k, v in prepared.result.items())
        metrics = (f"bytes_written={sum(f.file_size_bytes for f in data_files)}, "
                   f"num_files_written={len(data_files)}, {counts}")
        first, rest = self.explain_plan(schema).split("\n", 1)
        return (f"{first}, metrics=[{metrics}]\n{rest}"
                f"Metrics: elapsed={elapsed * 1000:.3f}ms, {metrics}\n")

    # pylance's *_batches variants take materialized sources; this engine materializes every
    # source anyway, so they are the plain methods
    def execute_batches(self, new_data: Any) -> dict[str, int]:
        """:meth:`execute` for in-memory data (pylance's ``execute_batches``)."""
        return self.execute(new_data)

    def execute_uncommitted_batches(self, new_data: Any) -> tuple[Any, dict[str, int]]:
        """:meth:`execute_uncommitted` for in-memory data (pylance's ``execute_uncommitted_batches``)."""
        return self.execute_uncommitted(new_data)

    def analyze_plan_batches(self, new_data: Any) -> str:
        """:meth:`analyze_plan` for in-memory data (pylance's ``analyze_plan_batches``)."""
        return self.analyze_plan(new_data)

    def _checked_source(self, data_obj: Any, schema: pa.Schema | None) -> pa.Table:
        ds = self._dataset
        if self._matched is None and not self._insert and not self._delete_unmatched:
            raise InvalidInputError("The merge insert job is not configured to change the data in any way",
                                    table=ds.uri)
        with table_context(ds):
            source = as_reader(data_obj, schema).read_all()
            self._check_source(source)
            if self._delete_unmatched and self._delete_unmatched_expr is not None:
                to_expression(self._delete_unmatched_expr, ds.schema)
            if self._matched_condition is not None:
                _check_condition(self._matched_condition, ds.schema, source.schema)
        return source

    def _check_source(self, source: pa.Table) -> None:
        ds = self._dataset
        table = ds.schema
        problems = []
        unexpected = [n for n in source.schema.names if n not in table.names]
        if unexpected:
            problems.append(f"unexpected columns {unexpected}")
        for field in source.schema:
            if field.name in table.names and not same_stored_type(field.type, table.field(field.name).type):
                problems.append(f"{field.name!r} should have type {table.field(field.name).type} "
                                f"but type was {field.type}")
        missing_keys = [k for k in self._on if k not in source.schema.names]
        if missing_keys:
            problems.append(f"the source lacks the key column(s) {missing_keys}")
        if self._insert:
            for field in table:
                if field.name not in source.schema.names and not field.nullable:
                    problems.append(f"non-nullable column {field.name!r} is missing, so rows cannot be inserted")
        if problems:
            raise SchemaMismatchError("merge_insert source does not match the table schema: " + "; ".join(problems),
                                      table=ds.uri, version=ds.version)


def _blob_v2_values(column: pa.Array, field: pa.Field) -> pa.Array:
    """A target column for ``field``: blob bytes read for a blob v2 column become its values."""
    data_type = field.type
    storage = data_type.storage_type if isinstance(data_type, pa.BaseExtensionType) else data_type
    if not (pa.types.is_large_binary(column.type) and pa.types.is_struct(storage)):
        return column
    values = bytes_as_blob_v2_storage(column, storage)
    return pa.ExtensionArray.from_storage(data_type, values) if storage is not data_type else values


def _pair_schema(target: pa.Schema, source: pa.Schema) -> pa.Schema:
    return pa.schema([pa.field("target", pa.struct(list(target))), pa.field("source", pa.struct(list(source)))])


def _check_condition(condition: str, target: pa.Schema, source: pa.Schema) -> None:
    to_expression(condition, _pair_schema(target, source))


_WRITE_MODES = ("auto", "rewrite_rows", "rewrite_columns")


class _Run:
    """One attempt of a merge-insert against one version of the table."""

    def __init__(self, builder: MergeInsertBuilder, ds: LanceDataset, source: pa.Table,
                 properties: Mapping[str, str] | None, commit_message: str | None) -> None:
        self.b = builder
        self.ds = ds
        self.source = source
        self.prepared = Prepared(transaction_for(ds, properties, commit_message), None,
                                 storage_version=storage_version_of(ds))
        self.matched_sources = np.zeros(source.num_rows, dtype=bool)
        self.updated_addresses: list[np.ndarray] = []
        self.updated_row_ids: list[np.ndarray] = []
        self.deleted_addresses: list[np.ndarray] = []
        self.keys_table = source.select(builder._on).append_column(_SRC, pa.array(np.arange(source.num_rows)))

    def _target_columns(self) -> list[str]:
        if self.b._matched == "update":
            names: list[str] = self.ds.schema.names
            return names
        needed = list(self.b._on)
        if self.b._delete_unmatched and self.b._delete_unmatched_expr is not None:
            from lance_format.dataset.sql.filter import referenced_columns

            for name in referenced_columns(self.b._delete_unmatched_expr, self.ds.schema):
                if name not in needed and name in self.ds.schema.names:
                    needed.append(name)
        return needed

    def _matches(self, batch: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray]:
        """(target positions, source positions) of the matched pairs, in target order."""
        left = pa.table([batch.column(k) for k in self.b._on] + [pa.array(np.arange(batch.num_rows))],
                        names=self.b._on + [_POS])
        joined = left.join(self.keys_table, self.b._on, join_type="inner")
        targets = joined.column(_POS).to_numpy().astype(np.int64)
        sources = joined.column(_SRC).to_numpy().astype(np.int64)
        order = np.lexsort((sources, targets))
        targets, sources = targets[order], sources[order]
        if self.b._matched is not None and targets.size > 1:
            dup = np.flatnonzero(targets[1:] == targets[:-1])
            if dup.size:
                row = batch.slice(int(targets[dup[0]]), 1)
                key = ", ".join(f"{k} = {row.column(k)[0].as_py()!r}" for k in self.b._on)
                raise InvalidInputError(
                    "Ambiguous merge inserts are prohibited: multiple source rows match the same target row "
                    f"on ({key}). Please ensure each target row is matched by at most one source row.",
                    table=self.ds.uri, version=self.ds.version)
        return targets, sources

    def _updated_rows(self, batch: pa.RecordBatch, targets: np.ndarray, sources: np.ndarray) -> pa.RecordBatch | None:
        schema = self.ds.schema
        target_rows = batch.take(pa.array(targets))
        source_rows = self.source.take(pa.array(sources))
        if self.b._matched_condition is not None:
            names = schema.names
            pair = pa.table({
                "target": pa.StructArray.from_arrays([target_rows.column(n) for n in names], names=names),
                "source": pa.StructArray.from_arrays(
                    [source_rows.column(n).combine_chunks() for n in source_rows.column_names],
                    names=source_rows.column_names),
                "__i": pa.array(np.arange(targets.size)),
            })
            # A matched row is updated only when the condition is TRUE (NULL counts as false).
            chosen = pair.filter(to_expression(self.b._matched_condition, pair.schema)).column("__i").to_numpy()
            mask = np.zeros(targets.size, dtype=bool)
            mask[chosen] = True
            targets, sources = targets[mask], sources[mask]
            target_rows = target_rows.filter(pa.array(mask))
            source_rows = source_rows.filter(pa.array(mask))
        if targets.size == 0:
            return None
        self.updated_addresses.append(batch.column(_ADDR).to_numpy(zero_copy_only=False)[targets])
        if self.ds.has_stable_row_ids:
            self.updated_row_ids.append(batch.column(_ROWID).to_numpy(zero_copy_only=False)[targets])
        columns = [
            source_rows.column(f.name).combine_chunks() if f.name in self.source.column_names
            else _blob_v2_values(target_rows.column(f.name), f)
            for f in schema
        ]
        return pa.RecordBatch.from_arrays(columns, schema=schema)

    def _unmatched_deletions(self, batch: pa.RecordBatch, matched: np.ndarray) -> None:
        unmatched = np.ones(batch.num_rows, dtype=bool)
        unmatched[matched] = False
        if self.b._delete_unmatched_expr is not None:
            flags = pa.Table.from_batches([batch]).append_column("__i", pa.array(np.arange(batch.num_rows)))
            chosen = flags.filter(to_expression(self.b._delete_unmatched_expr, flags.schema)).column("__i").to_numpy()
            selected = np.zeros(batch.num_rows, dtype=bool)
            selected[chosen] = True
            unmatched &= selected
        self.deleted_addresses.append(batch.column(_ADDR).to_numpy(zero_copy_only=False)[unmatched])

    def _scan(self) -> Iterator[pa.RecordBatch]:
        stable = self.ds.has_stable_row_ids
        # updated rows keep the target's blobs the source does not give: read their bytes
        carried = [f for f in self.ds.lance_schema.fields if is_blob_field(f) and f.name not in self.source.column_names]
        blobs = "all_binary" if carried and self.b._matched == "update" else None
        scanner = self.ds.scanner(columns=self._target_columns(), with_row_address=True, with_row_id=stable,
                                  blob_handling=blobs)
        for batch in scanner.to_batches():
            targets, sources = self._matches(batch)
            self.matched_sources[sources] = True
            if self.b._delete_unmatched:
                self._unmatched_deletions(batch, targets)
            if targets.size == 0:
                continue
            if self.b._matched == "fail":
                raise InvalidInputError("merge_insert found rows that match the source and was told to fail "
                                        "when a row matches (when_matched_fail)", table=self.ds.uri)
            if self.b._matched == "delete":
                self.deleted_addresses.append(batch.column(_ADDR).to_numpy(zero_copy_only=False)[targets])
            elif self.b._matched == "update":
                rows = self._updated_rows(batch, targets, sources)
                if rows is not None:
                    yield rows

    def _inserted(self) -> Iterator[pa.RecordBatch]:
        if not self.b._insert:
            return
        rows = self.source.filter(pa.array(~self.matched_sources))
        self.num_inserted = rows.num_rows
        schema = self.ds.schema
        columns = [
            rows.column(f.name) if f.name in rows.column_names else pa.nulls(rows.num_rows, f.type)
            for f in schema
        ]
        yield from batches_of(pa.Table.from_arrays(columns, schema=schema))

    def prepare(self) -> Prepared:
        ds, prepared = self.ds, self.prepared
        self.num_inserted = 0

        def all_rows() -> Iterator[pa.RecordBatch]:
            yield from self._scan()
            yield from self._inserted()

        if self.b._matched == "update" or self.b._insert:
            new_fragments = write_new_fragments(ds, ds.schema, all_rows(), prepared,
                                                targets=self.b._write_targets(ds))
        else:
            for _ in self._scan():
                pass
            new_fragments = []
        updated_addresses = concat(self.updated_addresses)
        if ds.has_stable_row_ids:
            attach_row_ids(new_fragments, concat(self.updated_row_ids))
        deleted_addresses = concat(self.deleted_addresses)
        offsets = split_addresses(np.concatenate([updated_addresses, deleted_addresses]))
        updated, removed = apply_deletions(ds, offsets, prepared)
        body = prepared.txn.update
        body.SetInParent()
        body.removed_fragment_ids.extend(removed)
        body.updated_fragments.extend(updated)
        body.new_fragments.extend(new_fragments)
        if self.b._matched == "update" or self.b._insert:
            body.fields_for_preserving_frag_bitmap.extend(ds.lance_schema.field_ids())
        else:
            body.fields_for_preserving_frag_bitmap.extend(f.id for f in ds.lance_schema.fields)
        prepared.affected_rows = offsets
        prepared.result = {
            "num_inserted_rows": int(self.num_inserted),
            "num_updated_rows": int(updated_addresses.size),
            "num_deleted_rows": int(deleted_addresses.size),
        }
        return prepared
