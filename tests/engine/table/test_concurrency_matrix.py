"""The conflict matrix (notes section 5) for every pair of operations, with and without an
overlap of the fragments both transactions touch; merges and projects preserve nullability, and
the ones that may not are checked against row writes below."""

from __future__ import annotations

import pytest
from pyroaring import BitMap

from lance_format.proto import table_pb2, transaction_pb2
from lance_format.table.conflicts import COMPATIBLE, INCOMPATIBLE, REBASE, RETRYABLE, check

OPS = ["append", "delete", "update", "overwrite", "restore", "rewrite", "merge", "project", "create_index",
       "reserve_fragments", "update_config", "data_replacement", "update_mem_wal_state", "update_bases", "clone"]
C, B, R, X = COMPATIBLE, REBASE, RETRYABLE, INCOMPATIBLE

# Row: our operation; columns in OPS order: the concurrent one. Touching the same fragment and,
# for config, the same key. More conservative than Lance where Lance depends on MemWAL details.
MATRIX = {
    "append":               [C, C, C, X, X, C, C, C, C, C, C, C, X, C, C],
    "delete":               [C, B, B, X, X, R, R, C, C, C, C, R, X, C, C],
    "update":               [C, B, B, X, X, R, R, C, C, C, C, R, X, C, C],
    "overwrite":            [C, C, C, X, C, C, C, C, C, C, X, C, X, C, C],
    "restore":              [C, C, C, C, C, C, C, C, C, C, C, C, X, C, C],
    "rewrite":              [C, R, R, X, X, R, R, C, R, C, C, R, C, C, C],
    "merge":                [R, R, R, X, X, R, R, X, C, C, C, R, X, C, C],
    "project":              [C, C, C, X, X, C, R, R, C, C, C, C, X, C, C],
    "create_index":         [C, C, C, X, X, R, C, C, C, C, C, R, X, C, C],
    "reserve_fragments":    [C, C, C, X, X, C, C, C, C, C, C, C, C, C, C],
    "update_config":        [C, C, C, X, C, C, C, C, C, C, X, C, C, C, C],
    "data_replacement":     [C, C, C, X, X, R, C, C, R, C, C, R, X, C, C],
    "update_mem_wal_state": [X, X, X, X, X, C, X, X, C, C, C, X, X, C, X],
    "update_bases":         [C, C, C, C, C, C, C, C, C, C, C, C, C, X, C],
    "clone":                [C] * 15,
}
# Entries that only hold because the fragments (or keys, or indexed fields) overlap.
OVERLAP_ONLY = {
    ("delete", "delete"), ("delete", "update"), ("delete", "rewrite"), ("delete", "data_replacement"),
    ("update", "delete"), ("update", "update"), ("update", "rewrite"), ("update", "data_replacement"),
    ("overwrite", "update_config"), ("update_config", "update_config"),
    ("rewrite", "delete"), ("rewrite", "update"), ("rewrite", "rewrite"), ("rewrite", "data_replacement"),
    ("rewrite", "create_index"), ("create_index", "rewrite"), ("create_index", "data_replacement"),
    ("data_replacement", "rewrite"), ("data_replacement", "create_index"),
    ("data_replacement", "data_replacement"), ("update_bases", "update_bases"),
}


def _fragment(fragment_id: int, deleted: int = 0) -> table_pb2.DataFragment:
    fragment = table_pb2.DataFragment(id=fragment_id, physical_rows=10)
    fragment.files.add(path=f"f{fragment_id}.lance", fields=[0], column_indices=[0])
    if deleted:
        fragment.deletion_file.num_deleted_rows = deleted
        fragment.deletion_file.id = deleted
    return fragment


def txn(op: str, fragment_id: int = 0, key: str = "k") -> transaction_pb2.Transaction:
    t = transaction_pb2.Transaction(read_version=1, uuid="u")
    if op == "append":
        t.append.fragments.append(_fragment(0))
    elif op == "delete":
        t.delete.updated_fragments.append(_fragment(fragment_id, deleted=fragment_id + 2))
    elif op == "update":
        t.update.updated_fragments.append(_fragment(fragment_id, deleted=fragment_id + 3))
        t.update.new_fragments.append(_fragment(0))
    elif op == "overwrite":
        t.overwrite.config_upsert_values[key] = "v"
    elif op == "restore":
        t.restore.version = 1
    elif op == "rewrite":
        group = t.rewrite.groups.add()
        group.old_fragments.append(_fragment(fragment_id))
        group.new_fragments.append(_fragment(99))
    # merges and projects that preserve nullability (pylance's flag, fields 4 and 2), as this
    # engine's own are unless they add a non-null column; the others: test_nullability_claims.py
    elif op == "merge":
        t.merge.fragments.append(_fragment(fragment_id))
        t.merge.MergeFromString(b"\x20\x01")
    elif op == "project":
        t.project.MergeFromString(b"\x10\x01")
    elif op == "create_index":
        index = t.create_index.new_indices.add(name="idx", fields=[fragment_id])
        index.fragment_bitmap = BitMap([fragment_id]).serialize()
    elif op == "reserve_fragments":
        t.reserve_fragments.num_fragments = 1
    elif op == "update_config":
        entry = t.update_config.config_updates.update_entries.add()
        entry.key, entry.value = key, "v"
    elif op == "data_replacement":
        group = t.data_replacement.replacements.add(fragment_id=fragment_id)
        group.new_file.fields.append(fragment_id)
    elif op == "update_mem_wal_state":
        t.update_mem_wal_state.SetInParent()
    elif op == "update_bases":
        t.update_bases.new_bases.add(id=1, path=f"/p{fragment_id}", name=key)
    elif op == "clone":
        t.clone.SetInParent()
    return t


INITIAL = {0: _fragment(0), 5: _fragment(5)}


@pytest.mark.parametrize("ours", OPS)
def test_conflict_matrix(ours):
    for theirs, expected in zip(OPS, MATRIX[ours]):
        verdict = check(txn(ours), txn(theirs), initial_fragments=INITIAL, has_affected_rows=True)
        assert verdict.outcome == expected, f"{ours} after {theirs}: {verdict}"
        if (ours, theirs) in OVERLAP_ONLY:
            apart = check(txn(ours), txn(theirs, fragment_id=5, key="other"), initial_fragments=INITIAL,
                          has_affected_rows=True)
            assert apart.outcome == COMPATIBLE, f"{ours} after {theirs} (no overlap): {apart}"


def test_overwrite_after_overwrite_is_retryable_like_pylance():
    # sharing a config key makes it incompatible (the matrix); without one pylance 14 still
    # refuses it, as retryable
    apart = check(txn("overwrite"), txn("overwrite", key="other"))
    assert apart.outcome == RETRYABLE


def test_rebase_needs_known_rows_and_unchanged_files():
    assert check(txn("delete"), txn("delete"), initial_fragments=INITIAL).outcome == RETRYABLE
    assert check(txn("delete"), txn("delete"), initial_fragments=INITIAL, has_affected_rows=True).rewrite == {0}
    moved = txn("update")
    moved.update.updated_fragments[0].files[0].path = "rewritten.lance"
    assert check(txn("delete"), moved, initial_fragments=INITIAL, has_affected_rows=True).outcome == RETRYABLE
    gone = transaction_pb2.Transaction(read_version=1)
    gone.delete.deleted_fragment_ids.append(0)
    assert check(txn("update"), gone, initial_fragments=INITIAL, has_affected_rows=True).outcome == RETRYABLE


def test_missing_or_unknown_transactions_conflict():
    assert check(txn("append"), None).outcome == INCOMPATIBLE
    assert check(txn("append"), transaction_pb2.Transaction(read_version=1)).outcome == INCOMPATIBLE
    unknown = transaction_pb2.Transaction.FromString(b"\x08\x01\xa2\x0f\x00")  # operation field 500
    assert check(txn("delete"), unknown).outcome == INCOMPATIBLE


def test_update_config_metadata_conflicts():
    a, b = txn("update_config", key="x"), txn("update_config", key="y")
    assert check(a, b).outcome == COMPATIBLE
    a.update_config.schema_metadata_updates.SetInParent()
    assert check(a, txn("overwrite", key="z")).outcome == INCOMPATIBLE
    b.update_config.schema_metadata_updates.SetInParent()
    assert check(a, b).outcome == INCOMPATIBLE
    c, d = txn("update_config", key="x"), txn("update_config", key="y")
    c.update_config.field_metadata_updates[3].SetInParent()
    d.update_config.field_metadata_updates[3].SetInParent()
    assert check(c, d).outcome == INCOMPATIBLE


@pytest.mark.parametrize("writer", ["append", "update", "data_replacement"])
@pytest.mark.parametrize("claim", ["merge", "project"])
def test_nullability_claims_conflict_with_row_writes(writer, claim):
    """Without the preserves-nullability flag a merge or project is retryable against a
    concurrent write of rows, in either order; with it the matrix above holds."""
    bare = txn(claim)
    bare.ClearField(claim)
    getattr(bare, claim).SetInParent()
    if claim == "merge":
        bare.merge.fragments.append(_fragment(0))
    assert check(bare, txn(writer)).outcome == RETRYABLE
    assert check(txn(writer), bare).outcome == RETRYABLE
    assert check(txn(claim), txn("delete")).outcome == check(bare, txn("delete")).outcome
