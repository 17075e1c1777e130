"""Transactions: what a commit did, stored in ``_transactions/`` and inline in its manifest.

A transaction records the version it was built on (``read_version``) and one operation. The
commit loop uses the transactions of versions committed concurrently to decide whether a
commit can be rebased or must be refused.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from enum import StrEnum

from google.protobuf.message import DecodeError

from lance_format.errors import CorruptFileError
from lance_format.io import ObjectStore
from lance_format.proto import transaction_pb2
from lance_format.table.manifest import ManifestFile

TRANSACTIONS_DIR = "_transactions"
COMMIT_MESSAGE_KEY = "__lance_commit_message"
# A transaction property naming one logical write: the commit loop never publishes two
# transactions with the same key on top of each other (see table.commit).
IDEMPOTENCY_KEY = "idempotency_key"


class OperationKind(StrEnum):
    """The operations a transaction can carry: the field names of ``Transaction.operation`` (the
    protobuf oneof), which is what :func:`operation_name` returns; members equal those strings."""

    APPEND = "append"
    DELETE = "delete"
    OVERWRITE = "overwrite"
    CREATE_INDEX = "create_index"
    REWRITE = "rewrite"
    MERGE = "merge"
    RESTORE = "restore"
    RESERVE_FRAGMENTS = "reserve_fragments"
    UPDATE = "update"
    PROJECT = "project"
    UPDATE_CONFIG = "update_config"
    DATA_REPLACEMENT = "data_replacement"
    UPDATE_MEM_WAL_STATE = "update_mem_wal_state"
    CLONE = "clone"
    UPDATE_BASES = "update_bases"
    DATA_OVERLAY = "data_overlay"


def new_transaction(
    read_version: int,
    *,
    properties: Mapping[str, str] | None = None,
    commit_message: str | None = None,
) -> transaction_pb2.Transaction:
    """A transaction with a fresh uuid; the caller sets exactly one operation on it."""
    txn = transaction_pb2.Transaction(read_version=read_version, uuid=str(uuid.uuid4()))
    for key, value in (properties or {}).items():
        txn.transaction_properties[str(key)] = str(value)
    if commit_message is not None:
        txn.transaction_properties[COMMIT_MESSAGE_KEY] = commit_message
    return txn


def operation_name(txn: transaction_pb2.Transaction) -> str | None:
    """The transaction's operation (an :class:`OperationKind` value), or None if it has none."""
    return txn.WhichOneof("operation")


def transaction_file_name(txn: transaction_pb2.Transaction) -> str:
    return f"{txn.read_version}-{txn.uuid}.txn"


def load_transaction(store: ObjectStore, manifest_file: ManifestFile) -> transaction_pb2.Transaction | None:
    """The transaction that produced a version: inline if present, else its ``.txn`` file."""
    if manifest_file.transaction is not None:
        return manifest_file.transaction
    name = manifest_file.manifest.transaction_file
    if not name:
        return None
    path = f"{TRANSACTIONS_DIR}/{name}"
    if not store.exists(path):
        return None
    txn = transaction_pb2.Transaction()
    try:
        txn.ParseFromString(store.read_bytes(path))
    except DecodeError as exc:
        raise CorruptFileError(f"cannot decode transaction: {exc}", table=store.uri, path=path) from exc
    return txn
