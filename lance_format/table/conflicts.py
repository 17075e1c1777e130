"""Which concurrently committed operations a transaction can be rebased over.

This follows official Lance's conflict matrix for the operations this engine produces
(Overwrite and Append here; the mutation operations extend it). Anything not known to be
compatible, including a missing or unreadable transaction, is a conflict: refusing a commit is
always safe, silently losing another writer's work is not.
"""

from __future__ import annotations

from lance_format.proto import transaction_pb2
from lance_format.table.transaction import operation_name

# (our operation, their operation) pairs that commute without any rebase work.
_COMPATIBLE: dict[str, set[str]] = {
    "append": {
        "append", "delete", "update", "rewrite", "merge", "project", "create_index",
        "reserve_fragments", "update_config", "data_replacement", "update_bases", "clone",
    },
    "overwrite": {
        "append", "delete", "update", "restore", "rewrite", "merge", "project", "create_index",
        "reserve_fragments", "data_replacement", "update_bases", "clone",
    },
    "restore": {
        "append", "delete", "update", "overwrite", "restore", "rewrite", "merge", "project",
        "create_index", "reserve_fragments", "update_config", "data_replacement", "update_bases", "clone",
    },
}


def _config_keys(txn: transaction_pb2.Transaction) -> set[str]:
    op = operation_name(txn)
    if op == "overwrite":
        return set(txn.overwrite.config_upsert_values)
    if op == "update_config":
        keys = {e.key for e in txn.update_config.config_updates.update_entries}
        return keys | set(txn.update_config.upsert_values) | set(txn.update_config.delete_keys)
    return set()


def conflict_reason(ours: transaction_pb2.Transaction, theirs: transaction_pb2.Transaction | None) -> str | None:
    """None if ``ours`` can be committed after ``theirs``; otherwise why not."""
    if theirs is None:
        return "the concurrent commit has no readable transaction"
    our_op, their_op = operation_name(ours), operation_name(theirs)
    if our_op == "overwrite" and their_op in ("overwrite", "update_config"):
        shared = _config_keys(ours) & _config_keys(theirs)
        return f"both change config keys {sorted(shared)}" if shared else None
    if their_op in _COMPATIBLE.get(our_op or "", set()):
        return None
    return f"{our_op} conflicts with a concurrent {their_op}"
