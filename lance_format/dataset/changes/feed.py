"""The change data feed: what changed between two versions of a Lance table.

``LanceDataset.delta(...)`` returns a :class:`DatasetDelta` with pylance 14's methods
(``list_transactions``, ``get_inserted_rows``, ``get_updated_rows``, ``get_deleted_row_ids``)
and one more, :meth:`DatasetDelta.get_changes`, a single stream of per-version changes with
pre-images. Planning is metadata-only (:mod:`lance_format.dataset.changes.plan`): fragments that
provably hold no change are never opened. Rows are read through ``LanceFragment.take_physical``
(:mod:`lance_format.dataset.changes.materialize`), in batches.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import pyarrow as pa

from lance_format.dataset.changes.materialize import ChangeWriter, change_schema, lineage_batches, lineage_schema
from lance_format.dataset.changes.plan import (
    NO_CHANGE_OPERATIONS,
    deleted_row_ids,
    lineage_candidates,
    lineage_offsets,
    plan_version,
    require_stable_row_ids,
)
from lance_format.dataset.fragment import ROW_ID
from lance_format.dataset.lance_operations import transaction_from_proto
from lance_format.dataset.scanner import DEFAULT_BATCH_SIZE
from lance_format.errors import InvalidInputError, VersionNotFoundError
from lance_format.table.manifest import read_manifest
from lance_format.table.naming import list_versions
from lance_format.table.transaction import load_transaction, operation_name

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset
    from lance_format.dataset.lance_operations import Transaction
    from lance_format.schema import LanceField


class DeltaRange(NamedTuple):
    """What a :class:`DatasetDelta` compares: ``dataset``'s table in ``(begin_version, end_version]``."""

    dataset: LanceDataset
    begin_version: int
    end_version: int


class DatasetDelta:
    """The changes in the version range ``(begin_version, end_version]`` of a table.

    Created by :meth:`LanceDataset.delta`. pylance-compatible methods:

    * :meth:`get_inserted_rows` / :meth:`get_updated_rows` filter the rows of the dataset the
      delta was created from (its checked-out version, *not* ``end_version``) on the lineage
      columns, exactly like pylance: inserted = ``begin < _row_created_at_version <= end``;
      updated = ``_row_created_at_version <= begin < _row_last_updated_at_version <= end``.
      Rows inserted or updated in the range and deleted afterwards are therefore absent, and a
      row shows its current values. Tables without stable row ids report version 1 for every
      row (pylance's degraded behaviour): everything is "inserted" when ``begin == 0``.
    * :meth:`get_deleted_row_ids`: the ``_rowid`` s live at ``begin_version`` and not live at
      ``end_version`` (sorted); version 0 is the empty table; requires stable row ids.
    * :meth:`list_transactions`: the transactions of versions ``begin+1 .. end``.

    Unlike pylance, an invalid range is always an error: ``begin > end`` raises
    ``InvalidInputError`` (pylance returns empty results from some methods), and a method that
    needs a version that does not exist raises ``VersionNotFoundError``.
    """

    def __init__(self, delta: DeltaRange) -> None:
        # pylance's parameter name (there, its core's delta)
        dataset, begin_version, end_version = delta
        for name, value in (("begin_version", begin_version), ("end_version", end_version)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise InvalidInputError(f"{name} must be a non-negative integer, got {value!r}", table=dataset.uri)
        self._dataset = dataset
        # Mutations move a LanceDataset to the version they commit; the delta stays on this one.
        self._base_version = dataset.version
        self._begin = int(begin_version)
        self._end = int(end_version)

    @property
    def begin_version(self) -> int:
        return self._begin

    @property
    def end_version(self) -> int:
        return self._end

    def __repr__(self) -> str:
        return f"DatasetDelta(uri={self._dataset.uri!r}, begin_version={self._begin}, end_version={self._end})"

    # -- validation --------------------------------------------------------------------------
    def _check_order(self) -> None:
        if self._begin > self._end:
            raise InvalidInputError(
                f"begin version {self._begin} is newer than end version {self._end}", table=self._dataset.uri
            )

    def _manifest_paths(self, versions: Iterable[int]) -> dict[int, str]:
        listing = list_versions(self._dataset.object_store)
        for version in versions:
            if version not in listing.versions:
                raise VersionNotFoundError(
                    f"Can not find version {version}, please check if it has been cleaned up "
                    f"(latest is {listing.latest})",
                    table=self._dataset.uri,
                    version=version,
                )
        return {v: listing.versions[v] for v in versions}

    def _base(self) -> LanceDataset:
        """The dataset the delta was created from, at the version it had then."""
        if self._dataset.version != self._base_version:
            self._dataset = self._dataset.checkout_version(self._base_version)
        return self._dataset

    def _open(self, version: int) -> LanceDataset | None:
        if version == 0:
            return None  # the empty table before the first commit
        if version == self._base().version:
            return self._dataset
        return self._dataset.checkout_version(version)

    # -- pylance's API -----------------------------------------------------------------------
    def list_transactions(self) -> list[Transaction]:
        """Transactions of versions ``begin_version + 1 .. end_version`` as pylance's
        ``Transaction`` objects (versions without a recorded transaction are skipped, as in pylance)."""

        self._check_order()
        store = self._dataset.object_store
        result = []
        for _, path in sorted(self._manifest_paths(range(self._begin + 1, self._end + 1)).items()):
            txn = load_transaction(store, read_manifest(store, path))
            if txn is not None:
                result.append(transaction_from_proto(txn))
        return result

    def get_inserted_rows(self) -> pa.RecordBatchReader:
        """Rows of this dataset with ``begin < _row_created_at_version <= end``: every column,
        then ``_rowid``, ``_row_created_at_version``, ``_row_last_updated_at_version``."""
        return self._lineage_reader(updated=False)

    def get_updated_rows(self) -> pa.RecordBatchReader:
        """Rows of this dataset created at or before ``begin`` and last updated in the range."""
        return self._lineage_reader(updated=True)

    def _lineage_reader(self, updated: bool) -> pa.RecordBatchReader:
        self._check_order()
        dataset, begin, end = self._base(), self._begin, self._end

        def batches() -> Iterator[pa.RecordBatch]:
            fragments = dataset.get_fragments()
            # Lineage runs live in the manifest: most fragments are ruled out with no I/O.
            for index in lineage_candidates(dataset, begin):
                fragment = fragments[index]
                offsets = lineage_offsets(fragment, begin, end, updated)
                if offsets is not None:
                    yield from lineage_batches(dataset, fragment, offsets, DEFAULT_BATCH_SIZE)

        schema = lineage_schema(dataset.lance_schema.fields, dataset.schema.metadata)
        return pa.RecordBatchReader.from_batches(schema, batches())

    def get_deleted_row_ids(self) -> pa.RecordBatchReader:
        """One ``_rowid`` (uint64) column: ids live at ``begin_version``, gone at ``end_version``.

        Ids that moved (compaction), were updated, or came back (restore) are not deleted. Only
        deletion files that changed and fragments that left are looked at; no data file is read.
        """
        self._check_order()
        self._manifest_paths([v for v in (self._begin, self._end) if v > 0])
        begin_ds = self._open(self._begin)
        if begin_ds is None:
            ids = np.empty(0, np.uint64)  # nothing is live before the first commit
        else:
            end_ds = self._open(self._end)
            assert end_ds is not None
            require_stable_row_ids(begin_ds, "deleted row ids require")
            require_stable_row_ids(end_ds, "deleted row ids require")
            ids = deleted_row_ids(begin_ds, end_ds)
        schema = pa.schema([pa.field(ROW_ID, pa.uint64())])
        batches = [
            pa.RecordBatch.from_arrays([pa.array(ids[s : s + DEFAULT_BATCH_SIZE], pa.uint64())], schema=schema)
            for s in range(0, ids.size, DEFAULT_BATCH_SIZE)
        ]
        return pa.RecordBatchReader.from_batches(schema, iter(batches))

    # -- the change feed ---------------------------------------------------------------------
    def get_changes(self, columns: list[str] | None = None, *, batch_size: int | None = None) -> pa.RecordBatchReader:
        """Every row change of every version in ``(begin_version, end_version]``, as one stream.

        Columns: the requested columns of the ``end_version`` schema (default: all), then
        ``_rowid``, ``_row_created_at_version``, ``_row_last_updated_at_version``,
        ``_change_type`` (``insert``, ``update_preimage``, ``update_postimage``, ``delete``),
        ``_commit_version`` (the version whose commit made the change) and
        ``_commit_timestamp`` (that commit's time, UTC).

        * Versions come in ascending order; within one version: deletes, then updates as
          pre-image / post-image batches whose rows pair up in order, then inserts.
        * Deleted rows and pre-images carry their values (and lineage) as of the version before
          the change; inserts and post-images as of the change's version. Columns a version
          did not have read as nulls (matched by field id, so renamed columns follow).
        * An update is a row whose ``_rowid`` survives the commit with a new
          ``_row_last_updated_at_version``; rows only moved by compaction, and versions that
          cannot change rows (compaction's Rewrite/ReserveFragments, index creation, config
          updates, dropping columns) yield nothing. pylance stamps every row on
          ``add_columns``, so that commit is an update of every row (pre-images read the new
          columns as nulls), as in pylance's ``get_updated_rows``.
        * An overwrite inside the range is reported as every row of the previous version
          deleted plus every row of the new version inserted, even rows with equal values.
        * Requires stable row ids (``InvalidInputError`` otherwise); ``begin > end`` raises
          ``InvalidInputError``, a missing version ``VersionNotFoundError``.

        Only fragments that provably changed are read (see :mod:`lance_format.dataset.changes.plan`);
        memory is bounded by ``batch_size`` rows per batch (default 65536).
        """
        self._check_order()
        size = DEFAULT_BATCH_SIZE if batch_size is None else batch_size
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size <= 0:
            raise InvalidInputError(
                f"batch_size must be a positive integer, got {batch_size!r}", table=self._dataset.uri
            )
        self._manifest_paths(range(max(self._begin, 1), self._end + 1))
        begin_ds = self._open(self._begin)
        end_ds = self._open(self._end)
        for ds in (begin_ds, end_ds):
            if ds is not None:
                require_stable_row_ids(ds, "the change feed requires")
        if end_ds is None:  # (0, 0]: an empty range before the first commit
            return pa.RecordBatchReader.from_batches(change_schema([]), iter([]))
        out_fields = _output_fields(end_ds, columns)
        schema = change_schema(out_fields, end_ds.schema.metadata)
        return pa.RecordBatchReader.from_batches(schema, self._changes(schema, out_fields, begin_ds, end_ds, int(size)))

    def _changes(
        self,
        schema: pa.Schema,
        out_fields: list[LanceField],
        begin_ds: LanceDataset | None,
        end_ds: LanceDataset,
        batch_size: int,
    ) -> Iterator[pa.RecordBatch]:
        old = begin_ds
        for version in range(self._begin + 1, self._end + 1):
            new = end_ds if version == self._end else self._open(version)
            assert new is not None
            txn = new.read_transaction_message()
            operation = operation_name(txn) if txn is not None else None
            if operation not in NO_CHANGE_OPERATIONS:
                for ds in (old, new):
                    if ds is not None:
                        require_stable_row_ids(ds, "the change feed requires")
                changes = plan_version(old, new, operation)
                if not changes.is_empty():
                    yield from ChangeWriter(schema, out_fields, old, new, batch_size).batches(changes)
            old = new


def _output_fields(dataset: LanceDataset, columns: list[str] | None) -> list[LanceField]:
    schema = dataset.lance_schema
    if columns is None:
        return list(schema.fields)
    if isinstance(columns, str):
        raise InvalidInputError("columns must be a list of column names, not a string", table=dataset.uri)
    names = schema.names()
    for name in columns:
        if name not in names:
            raise InvalidInputError(
                f"unknown column {name!r}; columns of version {dataset.version} are {names}",
                table=dataset.uri,
                version=dataset.version,
                column=str(name),
            )
    return [schema.field(name) for name in columns]


def build_delta(
    dataset: LanceDataset,
    compared_against: int | None = None,
    *,
    begin_version: int | None = None,
    end_version: int | None = None,
) -> DatasetDelta:
    """Resolve pylance's ``delta()`` arguments into a version range.

    ``compared_against`` compares it with this dataset's version, whichever is older being the
    begin (explicit versions are then ignored, as in pylance); otherwise both ``begin_version``
    and ``end_version`` are required.
    """
    if compared_against is not None:
        current = dataset.version
        if isinstance(compared_against, bool) or not isinstance(compared_against, (int, np.integer)):
            raise InvalidInputError(f"compared_against must be an integer, got {compared_against!r}", table=dataset.uri)
        compared = int(compared_against)
        begin, end = (compared, current) if current > compared else (current, compared)
        return DatasetDelta(DeltaRange(dataset, begin, end))
    if begin_version is None and end_version is None:
        raise InvalidInputError(
            # pylance's wording, prefix included: callers match on it
            "Invalid user input: Must specify either compared_against_version or both with_begin_version and "
            "with_end_version",
            table=dataset.uri,
        )
    if begin_version is None or end_version is None:
        raise InvalidInputError("Invalid user input: Must specify both with_begin_version and with_end_version",
                                table=dataset.uri)
    return DatasetDelta(DeltaRange(dataset, begin_version, end_version))
