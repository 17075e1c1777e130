"""publish_branch: main moves to a branch's one commit atomically, and pylance reads the result.

Every data write a branch can hold (append, overwrite, delete, update, merge_insert, a write
adding columns) is published; the published table equals the branch's (rows, stable row ids,
row versions), stays readable by pylance after the branch is deleted, and a main that moved
since the branch was taken is refused without touching either side.
"""

from __future__ import annotations

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format import publish_branch
from lance_format.errors import BranchError, CommitConflictError
from tests.compat import SYSTEM, assert_tables_equal


def _table(ids):
    return pa.table({"id": pa.array(ids, pa.int64()), "name": pa.array([f"n{i}" for i in ids], pa.string())})


def _root(tmp_path) -> str:
    root = str(tmp_path / "t")
    lance_format.write_dataset(_table([1, 2, 3]), root, enable_stable_row_ids=True)
    lance_format.write_dataset(_table([4, 5]), root, mode="append")
    return root


WRITES = {
    "append": lambda b: lance_format.write_dataset(_table([7, 8]), b, mode="append"),
    "overwrite": lambda b: lance_format.write_dataset(_table([7, 8]), b, mode="overwrite"),
    "delete": lambda b: b.delete("id = 2"),
    "update": lambda b: b.update({"name": "'changed'"}, where="id >= 4"),
    "merge_insert": lambda b: b.merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
    .execute(_table([3, 9])),
    "replace_where": lambda b: lance_format.replace_where(b, "id > 3", _table([4, 6])),
}


@pytest.mark.parametrize("write", sorted(WRITES))
def test_publish_replays_the_branch_commit_on_main(tmp_path, write):
    root = _root(tmp_path)
    branch = lance_format.dataset(root).create_branch("audit/run-1")
    WRITES[write](branch)
    staged = lance_format.dataset(root).checkout_version(("audit/run-1", None))
    columns = ["id", "name"] + SYSTEM
    audited = staged.to_table(columns=columns)
    branch_changes = staged.delta(begin_version=2, end_version=3).get_changes().read_all().drop(["_commit_timestamp"])
    assert lance_format.dataset(root).version == 2  # main untouched while audited

    published = publish_branch(lance_format.dataset(root), "audit/run-1", transaction_properties={"who": "test"})
    assert published.version == 3 == staged.version
    assert publish_branch(lance_format.dataset(root), "audit/run-1").version == 3  # idempotent
    txn = published.read_transaction()
    assert txn.transaction_properties["who"] == "test"
    assert txn.transaction_properties["lance/published_branch"] == "audit/run-1"

    main_changes = lance_format.dataset(root).delta(begin_version=2, end_version=3).get_changes().read_all()
    main_changes = main_changes.drop(["_commit_timestamp"])  # the publish commits later than the branch
    assert main_changes.sort_by("_rowid").equals(branch_changes.sort_by("_rowid")), write  # same change feed
    lance_format.dataset(root).branches.delete("audit/run-1")  # main no longer needs the branch's files
    theirs = lance.dataset(root)
    assert theirs.version == 3 and theirs.branches.list() == {}
    assert_tables_equal(theirs.to_table(columns=columns), audited, write)
    assert_tables_equal(lance_format.dataset(root).to_table(columns=columns), audited, write)
    lance.write_dataset(_table([10]), root, mode="append")  # pylance writes on top of it
    assert lance_format.dataset(root).count_rows() == audited.num_rows + 1


def test_publish_refuses_when_main_moved(tmp_path):
    root = _root(tmp_path)
    branch = lance_format.dataset(root).create_branch("audit/run-2")
    lance_format.write_dataset(_table([7]), branch, mode="append")
    lance.write_dataset(_table([6]), root, mode="append")  # a concurrent writer on main
    with pytest.raises(CommitConflictError, match="main has moved to version 3"):
        publish_branch(lance_format.dataset(root), "audit/run-2")
    assert sorted(lance_format.dataset(root).to_table()["id"].to_pylist()) == [1, 2, 3, 4, 5, 6]
    kept = lance_format.dataset(root).checkout_version(("audit/run-2", None))
    assert sorted(kept.to_table()["id"].to_pylist()) == [1, 2, 3, 4, 5, 7]


def test_publish_refusals(tmp_path):
    root = _root(tmp_path)
    ds = lance_format.dataset(root)
    with pytest.raises(BranchError, match="does not exist"):
        publish_branch(ds, "nope")
    empty = ds.create_branch("empty")
    assert publish_branch(ds, "empty").version == 2  # nothing written: nothing published
    two = ds.create_branch("two")
    lance_format.write_dataset(_table([7]), two, mode="append")
    lance_format.write_dataset(_table([8]), two, mode="append")
    with pytest.raises(BranchError, match="holds 2 commits"):
        publish_branch(ds, "two")
    child = empty.create_branch("child")
    lance_format.write_dataset(_table([9]), child, mode="append")
    with pytest.raises(BranchError, match="not from main"):
        publish_branch(ds, "child")
    assert lance_format.dataset(root).version == 2


def test_rebase_publishes_over_compatible_main_commits(tmp_path):
    root = _root(tmp_path)
    appended = lance_format.dataset(root).create_branch("audit/append")
    lance_format.write_dataset(_table([7, 8]), appended, mode="append")
    replaced = lance_format.dataset(root).create_branch("audit/replace")
    lance_format.replace_where(replaced, "id > 3", _table([4, 6]))  # the second fragment only
    overwritten = lance_format.dataset(root).create_branch("audit/overwrite")
    lance_format.write_dataset(_table([9]), overwritten, mode="overwrite")
    lance.write_dataset(_table([10]), root, mode="append")  # main moves to version 3

    published = publish_branch(lance_format.dataset(root), "audit/append", rebase=True)
    assert published.version == 4
    assert sorted(lance.dataset(root).to_table()["id"].to_pylist()) == [1, 2, 3, 4, 5, 7, 8, 10]
    changes = lance_format.dataset(root).delta(begin_version=3, end_version=4).get_changes().read_all()
    assert sorted(changes["id"].to_pylist()) == [7, 8]  # rows carry the version they were published at
    assert publish_branch(lance_format.dataset(root), "audit/append", rebase=True).version == 4  # idempotent

    publish_branch(lance_format.dataset(root), "audit/replace", rebase=True)
    assert sorted(lance.dataset(root).to_table()["id"].to_pylist()) == [1, 2, 3, 4, 6, 7, 8, 10]
    with pytest.raises(CommitConflictError, match="an overwrite is never rebased"):
        publish_branch(lance_format.dataset(root), "audit/overwrite", rebase=True)
    assert lance.dataset(root).version == 5


def test_racing_publishers_of_one_branch_agree(tmp_path):
    """Two consumers of one run (the publish asset and a downstream asset) publish at once."""
    from concurrent.futures import ThreadPoolExecutor

    root = _root(tmp_path)
    branch = lance_format.dataset(root).create_branch("audit/race")
    lance_format.write_dataset(_table([7]), branch, mode="append")
    with ThreadPoolExecutor(4) as pool:
        versions = list(pool.map(lambda _: publish_branch(lance_format.dataset(root), "audit/race").version,
                                 range(4)))
    assert versions == [3, 3, 3, 3]
    assert lance.dataset(root).version == 3 and lance.dataset(root).count_rows() == 6
