"""pylance's commit API: ``LanceOperation.*``, ``Transaction``, ``LanceDataset.commit`` /
``commit_batch`` and the ``read_transaction`` / ``get_transactions`` readers.

Operations are plain values (:mod:`lance_operations`; messages: :mod:`lance_operations`). A
commit converts the operation into the transaction message of the manifest format and runs the
engine's commit loop (:func:`lance_format.table.commit.commit_transaction`), so conflict
detection, rebasing and retries are the same as for every other write; reading a transaction
converts the message back. Operations this engine cannot apply
(``DataReplacement``, ``Clone``) are carried as data: they read back from pylance's tables,
but committing them raises :class:`UnsupportedFeatureError`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from lance_format.dataset.fragment_metadata import FragmentMetadata
from lance_format.dataset.lance_operations import (
    BulkCommitResult,
    Index,
    LanceOperation,
    Transaction,
    operation_from_proto,
    operation_to_proto,
    transaction_from_proto,
    transaction_to_proto,
)
from lance_format.errors import ArgumentTypeError, CommitOptionError, InvalidInputError, UnsupportedFeatureError
from lance_format.io import ObjectStore, object_store_for
from lance_format.proto import transaction_pb2
from lance_format.schema import LanceSchema
from lance_format.table.base_paths import check_base_store_params
from lance_format.table.commit import (
    DEFAULT_MAX_RETRIES,
    DETACHED_VERSION_BIT,
    CommittedVersion,
    commit_detached,
    commit_lock_held_by,
    commit_transaction,
    detached_manifest_path,
    latest_manifest,
)
from lance_format.table.manifest import read_manifest
from lance_format.table.naming import ManifestNaming
from lance_format.table.transaction import BuildOptions, OperationKind, operation_name

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset


def _store_of(base_uri: Any, storage_options: dict[str, str] | None) -> ObjectStore:
    from lance_format.dataset.dataset import LanceDataset

    if isinstance(base_uri, LanceDataset):
        return base_uri.object_store
    if not isinstance(base_uri, (str, os.PathLike, ObjectStore)):
        raise ArgumentTypeError(f"base_uri must be str, Path, or LanceDataset, got {type(base_uri)}")
    return object_store_for(base_uri, storage_options)


# pylance keywords this engine accepts only at their defaults (namespaces, per-base store options)
_DEFAULT_ONLY = {"namespace_client": None, "table_id": None, "namespace_client_managed_versioning": False,
                 "base_store_params": None}


def _check_timeout(timeout: Any) -> None:
    """pylance's checks of ``commit_timeout`` (a timedelta, positive, or None for none); a commit
    here never waits on a lock of its own, so the value bounds nothing further."""
    if timeout is None:
        return
    if not isinstance(timeout, timedelta):
        raise ArgumentTypeError(f"argument 'commit_timeout': {type(timeout).__name__!r} object is not an instance "
                                "of 'timedelta'")
    if timeout < timedelta(0):
        raise InvalidInputError("It is not possible to convert a negative timedelta to a commit timeout")
    if timeout == timedelta(0):
        raise CommitOptionError("Invalid user input: CommitBuilder timeout must be non-zero; pass `None` to disable")


def _refuse_unsupported(kwargs: dict[str, Any]) -> None:
    _check_timeout(kwargs.get("commit_timeout"))
    if kwargs.get("base_store_params"):
        check_base_store_params(kwargs["base_store_params"], table="")
    kwargs = {k: v for k, v in kwargs.items() if k not in ("commit_timeout", "base_store_params")}
    unknown = sorted(k for k in kwargs if k not in _DEFAULT_ONLY)
    if unknown:
        raise InvalidInputError(f"unexpected commit arguments: {unknown}")
    used = sorted(k for k, v in kwargs.items() if v != _DEFAULT_ONLY[k])
    if used:
        raise UnsupportedFeatureError(f"commit arguments not supported by this engine: {used}")


def commit(
    base_uri: str | os.PathLike[str] | LanceDataset,
    operation: LanceOperation.BaseOperation | Transaction,
    read_version: int | None = None,
    commit_lock: Callable[..., Any] | None = None,
    storage_options: dict[str, str] | None = None,
    enable_v2_manifest_paths: bool | None = None,
    detached: bool | None = False,
    max_retries: int = DEFAULT_MAX_RETRIES,
    *,
    commit_message: str | None = None,
    enable_stable_row_ids: bool | None = None,
    **kwargs: Any,
) -> LanceDataset:
    """pylance's ``LanceDataset.commit``: apply ``operation`` as the next version of the table.

    Raises
    ------
    InvalidInputError
        No ``read_version`` for an operation that needs one, or an invalid operation.
    CommitConflictError
        A version committed after ``read_version`` conflicts (or the retries ran out).
    UnsupportedFeatureError
        An operation this engine cannot apply.
    """
    from lance_format.dataset.dataset import LanceDataset
    from lance_format.table.transaction import COMMIT_MESSAGE_KEY

    if commit_lock is not None and not callable(commit_lock):
        raise ArgumentTypeError(f"commit_lock must be a function, got {type(commit_lock)}")
    _refuse_unsupported(kwargs)
    store = _store_of(base_uri, storage_options)
    if isinstance(operation, Transaction):
        if commit_message is not None:
            raise InvalidInputError("commit_message is not supported when calling commit with a Transaction.  "
                                    "Set the message on the transaction properties instead.")
        transaction = operation
    elif isinstance(operation, LanceOperation.BaseOperation):
        if read_version is None and not isinstance(operation, (LanceOperation.Overwrite, LanceOperation.Restore)):
            raise InvalidInputError("read_version is required for all operations except Overwrite and Restore")
        if read_version is None:
            existing = latest_manifest(store)
            read_version = existing[1].manifest.version if existing is not None else 0
        properties = {COMMIT_MESSAGE_KEY: commit_message} if commit_message is not None else {}
        transaction = Transaction(read_version=int(read_version), operation=operation,
                                  transaction_properties=properties)
    else:
        raise ArgumentTypeError(f"operation must be a LanceOperation.BaseOperation or Transaction, got "
                                f"{type(operation)}")
    with commit_lock_held_by(store, commit_lock):
        committed = commit_lance_transaction(store, transaction, enable_stable_row_ids=bool(enable_stable_row_ids),
                                             enable_v2_manifest_paths=enable_v2_manifest_paths is not False,
                                             max_retries=max_retries, detached=bool(detached))
    return LanceDataset(store, committed.version)


def commit_lance_transaction(
    store: ObjectStore,
    transaction: Transaction,
    *,
    enable_stable_row_ids: bool = False,
    data_storage_version: str | None = None,
    enable_v2_manifest_paths: bool = True,
    max_retries: int = DEFAULT_MAX_RETRIES,
    affected_rows: Mapping[int, np.ndarray] | None = None,
    detached: bool = False,
) -> CommittedVersion:
    """Commit a :class:`Transaction` through the engine's commit loop; returns the loop's result
    (version, retries). What :func:`commit` does, plus the settings an engine-side writer (the
    Spark data source) needs: the file version of a new table, and ``affected_rows`` (fragment
    id -> physical offsets an Update deleted) so an Update can be rebased over a concurrent one.
    ``detached``: commit a detached version built on the transaction's read version
    (:func:`lance_format.table.commit.commit_detached`)."""
    from lance_format.dataset.evolution.base import next_field_id_of

    existing = latest_manifest(store)
    if detached and transaction.read_version & DETACHED_VERSION_BIT:
        path = detached_manifest_path(transaction.read_version)
        existing = (path, read_manifest(store, path))
    current, first_new_id = None, None
    if existing is not None:
        manifest = existing[1].manifest
        current = LanceSchema.from_protos(list(manifest.fields), dict(manifest.schema_metadata))
        first_new_id = next_field_id_of(manifest)
    txn = transaction_to_proto(transaction, current, first_new_id)
    options = BuildOptions(enable_stable_row_ids=enable_stable_row_ids,
                           data_storage_version=data_storage_version or _overwrite_storage_version(txn))
    if detached:
        return commit_detached(store, txn, options=options)
    naming = ManifestNaming.V2 if enable_v2_manifest_paths else ManifestNaming.V1
    return commit_transaction(store, txn, options=options, new_table_naming=naming, max_retries=max_retries,
                              affected_rows=affected_rows if operation_name(txn) == OperationKind.UPDATE else None)


def _overwrite_storage_version(txn: transaction_pb2.Transaction) -> str | None:
    """An Overwrite's file version: that of the files it commits (the table records it)."""
    if operation_name(txn) != OperationKind.OVERWRITE:
        return None
    for fragment in txn.overwrite.fragments:
        for data_file in fragment.files:
            major, minor = data_file.file_major_version, data_file.file_minor_version
            if (major, minor) in ((0, 1), (0, 2)):
                return "0.1"
            if (major, minor) == (0, 3):
                return "2.0"
            return f"{major}.{minor}"
    return None


def commit_batch(
    dest: str | os.PathLike[str] | LanceDataset,
    transactions: Sequence[Transaction],
    commit_lock: Callable[..., Any] | None = None,
    storage_options: dict[str, str] | None = None,
    enable_v2_manifest_paths: bool | None = None,
    detached: bool | None = False,
    max_retries: int = DEFAULT_MAX_RETRIES,
    **kwargs: Any,
) -> BulkCommitResult:
    """pylance's ``LanceDataset.commit_batch``: merge Append transactions into one and commit it.

    Returns ``{"dataset": ..., "merged": Transaction}``. Raises :class:`InvalidInputError` for
    an empty list or a transaction that is not an Append (pylance supports only those too).
    """
    transactions = list(transactions)
    if not transactions:
        raise InvalidInputError("commit_batch needs at least one transaction")
    fragments: list[FragmentMetadata] = []
    properties: dict[str, str] = {}
    for transaction in transactions:
        if not isinstance(transaction, Transaction) or not isinstance(transaction.operation, LanceOperation.Append):
            raise InvalidInputError("commit_batch only supports Append transactions")
        fragments.extend(transaction.operation.fragments)
        properties.update(transaction.transaction_properties or {})
    merged = Transaction(read_version=max(t.read_version for t in transactions),
                         operation=LanceOperation.Append(fragments), transaction_properties=properties)
    dataset = commit(dest, merged, commit_lock=commit_lock, storage_options=storage_options,
                     enable_v2_manifest_paths=enable_v2_manifest_paths, detached=detached, max_retries=max_retries,
                     **kwargs)
    return BulkCommitResult(dataset=dataset, merged=merged)


class TransactionMethods:
    """Mixed into ``LanceDataset``: pylance's commit API and its transaction readers."""

    commit = staticmethod(commit)
    commit_batch = staticmethod(commit_batch)

    def transaction_of(self, txn: transaction_pb2.Transaction) -> Transaction:
        """A transaction message as pylance's ``Transaction`` (for operations that build one
        without committing it, e.g. ``MergeInsertBuilder.execute_uncommitted``)."""
        return transaction_from_proto(txn)

    def read_transaction(self, version: int | None = None) -> Transaction | None:
        """The transaction that produced ``version`` (this object's if None), pylance-shaped;
        None if the version recorded none. Raises :class:`VersionNotFoundError`."""
        message = cast("LanceDataset", self).read_transaction_message(version)
        return transaction_from_proto(message) if message is not None else None

    def get_transactions(self, recent_transactions: int = 10) -> list[Transaction | None]:
        """The transactions of the ``recent_transactions`` versions up to this one, newest first."""
        latest = cast("LanceDataset", self).version
        first = max(1, latest - int(recent_transactions) + 1)
        return [self.read_transaction(v) for v in range(latest, first - 1, -1)]


__all__ = [
    "TransactionMethods",
    "LanceOperation", "Transaction", "BulkCommitResult", "Index", "commit", "commit_batch", "commit_lance_transaction",
    "operation_to_proto", "operation_from_proto", "transaction_from_proto", "transaction_to_proto",
]
