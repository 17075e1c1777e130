"""Whether a transaction can be committed after another one committed concurrently.

This is official Lance's conflict matrix (``conflict_resolver.rs``). For our transaction T,
built at ``read_version``, and each transaction O committed since, the verdict is one of:

* ``compatible``: T commits on top of O unchanged;
* ``rebase``: T (a Delete or Update) touched a fragment whose deletion file O replaced; the
  commit merges O's deletions into T's deletion file (and refuses if both removed a same row);
* ``retryable``: T must be redone against the latest version (the mutation layer does that);
* ``incompatible``: T can never be applied after O (e.g. anything but a Restore after an
  Overwrite).

A missing or unreadable transaction, or an operation this engine does not know, is
incompatible: refusing a commit is always safe, silently losing another writer's work is not.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from google.protobuf import unknown_fields
from pyroaring import BitMap

from lance_format.errors import RetryableCommitConflictError
from lance_format.proto import table_pb2, transaction_pb2
from lance_format.table.transaction import OperationKind as Op  # the matrix below reads better short
from lance_format.table.transaction import operation_name

COMPATIBLE = "compatible"
REBASE = "rebase"
RETRYABLE = "retryable"
INCOMPATIBLE = "incompatible"
FRAG_REUSE_INDEX_NAME = "__lance_frag_reuse"

Txn = transaction_pb2.Transaction


@dataclass
class Verdict:
    outcome: str
    reason: str = ""
    rewrite: set[int] = field(default_factory=set)  # fragments whose deletion files must be merged


def _ok() -> Verdict:
    return Verdict(COMPATIBLE)


def _retry(ours: str | None, theirs: str | None, why: str = "") -> Verdict:
    return Verdict(RETRYABLE, f"{ours} was preempted by a concurrent {theirs}{': ' + why if why else ''}")


def _never(ours: str | None, theirs: str | None, why: str = "") -> Verdict:
    return Verdict(INCOMPATIBLE, f"{ours} is incompatible with a concurrent {theirs}{': ' + why if why else ''}")


# -- what an operation touches -----------------------------------------------------------------
def modified_fragment_ids(txn: Txn) -> set[int]:
    """Existing fragments a transaction changes or removes."""
    op = operation_name(txn)
    if op == Op.DELETE:
        return {f.id for f in txn.delete.updated_fragments} | set(txn.delete.deleted_fragment_ids)
    if op == Op.UPDATE:
        return {f.id for f in txn.update.updated_fragments} | set(txn.update.removed_fragment_ids)
    if op == Op.REWRITE:
        ids = {f.id for g in txn.rewrite.groups for f in g.old_fragments}
        return ids | {f.id for f in txn.rewrite.old_fragments}
    if op == Op.DATA_REPLACEMENT:
        return {r.fragment_id for r in txn.data_replacement.replacements}
    if op == Op.MERGE:
        return {f.id for f in txn.merge.fragments}
    return set()


def _updated_and_removed(txn: Txn) -> tuple[list[table_pb2.DataFragment], list[int]]:
    if operation_name(txn) == Op.DELETE:
        return list(txn.delete.updated_fragments), list(txn.delete.deleted_fragment_ids)
    return list(txn.update.updated_fragments), list(txn.update.removed_fragment_ids)


def _upserted_keys(txn: Txn) -> set[str]:
    op = operation_name(txn)
    if op == Op.OVERWRITE:
        return set(txn.overwrite.config_upsert_values)
    if op == Op.UPDATE_CONFIG:
        body = txn.update_config
        return {e.key for e in body.config_updates.update_entries if e.HasField("value")} | set(body.upsert_values)
    return set()


def _deleted_keys(txn: Txn) -> set[str]:
    if operation_name(txn) != Op.UPDATE_CONFIG:
        return set()
    body = txn.update_config
    return {e.key for e in body.config_updates.update_entries if not e.HasField("value")} | set(body.delete_keys)


def config_key_conflict(a: Txn, b: Txn) -> set[str]:
    """Config keys one transaction upserts and the other upserts or deletes."""
    up_a, up_b = _upserted_keys(a), _upserted_keys(b)
    return (up_a & (up_b | _deleted_keys(b))) | (up_b & _deleted_keys(a))


def _touches_schema_metadata(txn: Txn) -> bool:
    body = txn.update_config
    return body.HasField("schema_metadata_updates") or len(body.schema_metadata) > 0


def _field_metadata_ids(txn: Txn) -> set[int]:
    body = txn.update_config
    return set(body.field_metadata_updates) | set(body.field_metadata)


def _same_metadata(a: Txn, b: Txn) -> bool:
    if _touches_schema_metadata(a) and _touches_schema_metadata(b):
        return True
    if _field_metadata_ids(a) & _field_metadata_ids(b):
        return True
    # More conservative than Lance: concurrent writes of one table-metadata key conflict too.
    keys_a = {e.key for e in a.update_config.table_metadata_updates.update_entries}
    keys_b = {e.key for e in b.update_config.table_metadata_updates.update_entries}
    replace = a.update_config.table_metadata_updates.replace or b.update_config.table_metadata_updates.replace
    both = a.update_config.HasField("table_metadata_updates") and b.update_config.HasField("table_metadata_updates")
    return bool(keys_a & keys_b) or (replace and both)


def _index_bitmaps(indices) -> list[BitMap | None]:
    return [BitMap.deserialize(bytes(i.fragment_bitmap)) if i.fragment_bitmap else None for i in indices]


def _may_alter_nullability(txn: Txn) -> bool:
    """A Project or Merge without pylance's ``preserves_nullability`` flag (an unknown varint
    field of its body: 2 of Project, 4 of Merge): it may have made a field non-null, checked
    against the data of its read version only."""
    op = operation_name(txn)
    if op not in (Op.PROJECT, Op.MERGE):
        return False
    body, number = (txn.project, 2) if op == Op.PROJECT else (txn.merge, 4)
    return not any(f.field_number == number and f.data == 1 for f in unknown_fields.UnknownFieldSet(body))


def _supplies_values(txn: Txn) -> bool:
    """Writes rows whose values (or missing columns) may break such a non-null claim."""
    return operation_name(txn) in (Op.APPEND, Op.UPDATE, Op.DATA_REPLACEMENT, Op.DATA_OVERLAY)


# -- per-operation rules -------------------------------------------------------------------------
def _check_delete_update(
    ours: Txn, theirs: Txn, initial: dict[int, table_pb2.DataFragment] | None, has_affected_rows: bool
) -> Verdict:
    me, other = operation_name(ours), operation_name(theirs)
    mine = modified_fragment_ids(ours)
    if other in (Op.CREATE_INDEX, Op.RESERVE_FRAGMENTS, Op.CLONE, Op.PROJECT, Op.APPEND, Op.UPDATE_CONFIG,
                 Op.UPDATE_BASES):
        return _ok()
    if other in (Op.REWRITE, Op.DATA_REPLACEMENT):
        overlap = mine & modified_fragment_ids(theirs)
        return _retry(me, other, f"both touch fragments {sorted(overlap)}") if overlap else _ok()
    if other in (Op.DELETE, Op.UPDATE):
        updated, removed = _updated_and_removed(theirs)
        overlap = mine & ({f.id for f in updated} | set(removed))
        if not overlap:
            return _ok()
        if not has_affected_rows or initial is None:
            return _retry(me, other, f"both changed fragments {sorted(overlap)}")
        rewrite: set[int] = set()
        for fragment in updated:
            before = initial.get(fragment.id)
            if before is None:
                continue
            if list(before.files) != list(fragment.files):
                return _retry(me, other, f"fragment {fragment.id} got new data files")
            if before.deletion_file != fragment.deletion_file or before.HasField("deletion_file") != fragment.HasField(
                "deletion_file"
            ):
                rewrite.add(fragment.id)
        gone = [i for i in removed if i in initial]
        if gone:
            return _retry(me, other, f"fragments {gone} were removed")
        return Verdict(REBASE if rewrite else COMPATIBLE, rewrite=rewrite)
    if other == Op.MERGE:
        return _retry(me, other)
    return _never(me, other or "unknown operation")  # overwrite, restore, mem-wal, unknown


def _check_rewrite(ours: Txn, theirs: Txn) -> Verdict:
    other = operation_name(theirs)
    mine = modified_fragment_ids(ours)
    if other in (Op.APPEND, Op.RESERVE_FRAGMENTS, Op.PROJECT, Op.CLONE, Op.UPDATE_CONFIG, Op.UPDATE_MEM_WAL_STATE,
                 Op.UPDATE_BASES):
        return _ok()
    if other in (Op.DELETE, Op.UPDATE, Op.REWRITE, Op.DATA_REPLACEMENT):
        overlap = mine & modified_fragment_ids(theirs)
        return _retry(Op.REWRITE, other, f"both touch fragments {sorted(overlap)}") if overlap else _ok()
    if other == Op.MERGE:
        return _retry(Op.REWRITE, other)
    if other == Op.CREATE_INDEX:
        indices = list(theirs.create_index.new_indices)
        if any(i.name == FRAG_REUSE_INDEX_NAME for i in indices):
            return _retry(Op.REWRITE, other, "the fragment reuse index changed")
        for bitmap in _index_bitmaps(indices):
            if bitmap is None or any(i in bitmap for i in mine):
                return _retry(Op.REWRITE, other, "the new index covers rewritten fragments")
        return _ok()
    return _never(Op.REWRITE, other or "unknown operation")


def _check_create_index(ours: Txn, theirs: Txn) -> Verdict:
    other = operation_name(theirs)
    mine = list(ours.create_index.new_indices)
    if other in (Op.APPEND, Op.CLONE, Op.UPDATE_BASES, Op.DELETE, Op.UPDATE, Op.MERGE, Op.RESERVE_FRAGMENTS,
                 Op.PROJECT, Op.UPDATE_CONFIG):
        return _ok()
    if other == Op.CREATE_INDEX:
        both_fri = any(i.name == FRAG_REUSE_INDEX_NAME for i in mine) and any(
            i.name == FRAG_REUSE_INDEX_NAME for i in theirs.create_index.new_indices
        )
        return _retry(Op.CREATE_INDEX, other) if both_fri else _ok()
    if other == Op.REWRITE:
        rewritten = modified_fragment_ids(theirs)
        for bitmap in _index_bitmaps(mine):
            if bitmap is None or any(i in bitmap for i in rewritten):
                return _retry(Op.CREATE_INDEX, other, "indexed fragments were rewritten")
        return _ok()
    if other == Op.DATA_REPLACEMENT:
        indexed = {f for i in mine for f in i.fields}
        replaced = {f for r in theirs.data_replacement.replacements for f in r.new_file.fields}
        return _retry(Op.CREATE_INDEX, other) if indexed & replaced else _ok()
    return _never(Op.CREATE_INDEX, other or "unknown operation")


def _check_update_config(ours: Txn, theirs: Txn) -> Verdict:
    other = operation_name(theirs)
    if other == Op.OVERWRITE:
        if _touches_schema_metadata(ours) or _field_metadata_ids(ours) or config_key_conflict(ours, theirs):
            return _never(Op.UPDATE_CONFIG, other, "both change config or schema metadata")
        return _ok()
    if other == Op.UPDATE_CONFIG:
        keys = config_key_conflict(ours, theirs)
        if keys or _same_metadata(ours, theirs):
            return _never(Op.UPDATE_CONFIG, other, f"both change the same keys {sorted(keys)}" if keys else
                          "both change the same metadata")
        return _ok()
    return _ok() if other is not None else _never(Op.UPDATE_CONFIG, "unknown operation")


_SIMPLE: dict[str, dict[str, set[str]]] = {
    # our op -> {outcome: their ops}; ops not listed are incompatible.
    Op.APPEND: {COMPATIBLE: {Op.APPEND, Op.REWRITE, Op.CREATE_INDEX, Op.DELETE, Op.UPDATE, Op.RESERVE_FRAGMENTS,
                             Op.PROJECT, Op.UPDATE_BASES, Op.MERGE, Op.UPDATE_CONFIG, Op.CLONE, Op.DATA_REPLACEMENT,
                             Op.DATA_OVERLAY}},
    Op.RESTORE: {COMPATIBLE: {Op.APPEND, Op.DELETE, Op.OVERWRITE, Op.CREATE_INDEX, Op.REWRITE, Op.DATA_REPLACEMENT,
                              Op.MERGE, Op.RESTORE, Op.RESERVE_FRAGMENTS, Op.UPDATE_BASES, Op.UPDATE, Op.PROJECT,
                              Op.CLONE, Op.UPDATE_CONFIG}},
    Op.RESERVE_FRAGMENTS: {COMPATIBLE: {Op.APPEND, Op.DELETE, Op.CREATE_INDEX, Op.REWRITE, Op.DATA_REPLACEMENT,
                                        Op.MERGE, Op.RESERVE_FRAGMENTS, Op.UPDATE, Op.PROJECT, Op.CLONE,
                                        Op.UPDATE_CONFIG, Op.UPDATE_MEM_WAL_STATE, Op.UPDATE_BASES,
                                        Op.DATA_OVERLAY}},
    Op.PROJECT: {COMPATIBLE: {Op.APPEND, Op.UPDATE, Op.DELETE, Op.UPDATE_CONFIG, Op.CREATE_INDEX, Op.DATA_REPLACEMENT,
                              Op.REWRITE, Op.CLONE, Op.RESERVE_FRAGMENTS, Op.UPDATE_BASES},
                 RETRYABLE: {Op.MERGE, Op.PROJECT}},
    Op.MERGE: {COMPATIBLE: {Op.CREATE_INDEX, Op.RESERVE_FRAGMENTS, Op.CLONE, Op.UPDATE_CONFIG, Op.UPDATE_BASES},
               RETRYABLE: {Op.UPDATE, Op.APPEND, Op.DELETE, Op.REWRITE, Op.MERGE, Op.DATA_REPLACEMENT}},
    Op.DATA_REPLACEMENT: {COMPATIBLE: {Op.APPEND, Op.CLONE, Op.DELETE, Op.UPDATE, Op.MERGE, Op.UPDATE_CONFIG,
                                       Op.RESERVE_FRAGMENTS, Op.PROJECT, Op.UPDATE_BASES}},
    Op.CLONE: {COMPATIBLE: set()},
    # overlays are appended to the fragments of the version committed on (concurrent overlays
    # stay); a concurrent rewrite, deletion or update of the fragments is refused (conservative)
    Op.DATA_OVERLAY: {COMPATIBLE: {Op.APPEND, Op.DATA_OVERLAY, Op.RESERVE_FRAGMENTS, Op.UPDATE_CONFIG,
                                   Op.CREATE_INDEX, Op.PROJECT, Op.CLONE, Op.UPDATE_BASES}},
    # Never produced here; Lance's rules, without the MemWAL-id comparisons (conservative).
    Op.UPDATE_MEM_WAL_STATE: {COMPATIBLE: {Op.UPDATE_CONFIG, Op.REWRITE, Op.CREATE_INDEX, Op.RESERVE_FRAGMENTS,
                                           Op.UPDATE_BASES}},
}


def check(
    ours: Txn,
    theirs: Txn | None,
    *,
    initial_fragments: dict[int, table_pb2.DataFragment] | None = None,
    has_affected_rows: bool = False,
) -> Verdict:
    """The verdict for committing ``ours`` after ``theirs`` (None: its transaction is missing).

    ``initial_fragments`` are the fragments ``ours`` modifies as they were at its read version
    and ``has_affected_rows`` says whether the row addresses it deleted are known; a Delete or
    Update needs both to be rebased over another Delete or Update of the same fragments.
    """
    me = operation_name(ours) or "unknown operation"
    if theirs is None:
        return Verdict(INCOMPATIBLE, "the concurrent commit has no readable transaction")
    other = operation_name(theirs)
    if other is None:
        return _never(me, "operation this engine does not know")
    # either order: a nullability claim was checked without the other writer's rows
    if (_may_alter_nullability(ours) and _supplies_values(theirs)) or \
            (_supplies_values(ours) and _may_alter_nullability(theirs)):
        return _retry(me, other, "it may change which columns accept nulls")
    if me in (Op.DELETE, Op.UPDATE):
        return _check_delete_update(ours, theirs, initial_fragments, has_affected_rows)
    if me == Op.REWRITE:
        return _check_rewrite(ours, theirs)
    if me == Op.CREATE_INDEX:
        return _check_create_index(ours, theirs)
    if me == Op.UPDATE_CONFIG:
        return _check_update_config(ours, theirs)
    if me == Op.OVERWRITE:
        if other in (Op.OVERWRITE, Op.UPDATE_CONFIG):
            shared = config_key_conflict(ours, theirs)
            if shared:
                return _never(me, other, f"both change config keys {sorted(shared)}")
            # pylance 14 refuses an Overwrite over a concurrent one as retryable: the later
            # writer must decide again on top of the table the other one wrote
            return _retry(me, other) if other == Op.OVERWRITE else _ok()
        return _never(me, other) if other == Op.UPDATE_MEM_WAL_STATE else _ok()
    if me == Op.DATA_REPLACEMENT and other == Op.DATA_REPLACEMENT:
        mine = {(r.fragment_id, f) for r in ours.data_replacement.replacements for f in r.new_file.fields}
        their = {(r.fragment_id, f) for r in theirs.data_replacement.replacements for f in r.new_file.fields}
        return _retry(me, other) if mine & their else _ok()
    if me == Op.DATA_REPLACEMENT and other == Op.REWRITE:
        return _retry(me, other) if modified_fragment_ids(ours) & modified_fragment_ids(theirs) else _ok()
    if me == Op.DATA_REPLACEMENT and other == Op.CREATE_INDEX:
        indexed = {f for i in theirs.create_index.new_indices for f in i.fields}
        replaced = {f for r in ours.data_replacement.replacements for f in r.new_file.fields}
        return _retry(me, other) if indexed & replaced else _ok()
    if me == Op.UPDATE_BASES:
        if other != Op.UPDATE_BASES:
            return _ok()
        mine = {(b.name, b.path) for b in ours.update_bases.new_bases}
        their = {(b.name, b.path) for b in theirs.update_bases.new_bases}
        names = {n for n, _ in mine if n} & {n for n, _ in their if n}
        paths = {p for _, p in mine} & {p for _, p in their}
        return _never(me, other) if names or paths else _ok()
    rules = _SIMPLE.get(me)
    if rules is None:
        return _never(me, other)
    if me == Op.CLONE:
        return _ok()
    if other in rules.get(COMPATIBLE, set()):
        return _ok()
    if other in rules.get(RETRYABLE, set()):
        return _retry(me, other)
    return _never(me, other)


def conflict_reason(ours: Txn, theirs: Txn | None) -> str | None:
    """None if ``ours`` commits unchanged after ``theirs``; otherwise why it cannot."""
    verdict = check(ours, theirs)
    return None if verdict.outcome == COMPATIBLE else verdict.reason or verdict.outcome


__all__ = [
    "COMPATIBLE", "REBASE", "RETRYABLE", "INCOMPATIBLE", "Verdict", "RetryableCommitConflictError",
    "check", "conflict_reason", "modified_fragment_ids", "config_key_conflict",
]
