"""publish_branch: main moves to a branch's commits atomically, and pylance reads the result.

Every data write a branch can hold (append, overwrite, delete, update, merge_insert, a write
adding columns) is published; the published table equals the branch's (rows, stable row ids,
row versions), stays readable by pylance after the branch is deleted, and a main that moved
since the branch was taken is refused without touching either side. A branch of several
commits (writes, columns added, config set) is published as ONE commit whose rows carry the
publishing version; rebasing it over main's compatible commits moves its row ids past main's.
"""

from __future__ import annotations

import lance
import pyarrow as pa
import pyarrow.compute as pc
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


@pytest.mark.parametrize("commits", [1, 3])
def test_racing_publishers_of_one_branch_agree(tmp_path, commits):
    """Two consumers of one run (the publish asset and a downstream asset) publish at once."""
    from concurrent.futures import ThreadPoolExecutor

    root = _root(tmp_path)
    lance_format.dataset(root).create_branch("audit/race")
    for i in range(commits):
        lance_format.write_dataset(_table([7 + i]), lance_format.dataset(root).checkout_version(("audit/race", None)),
                                   mode="append")
    with ThreadPoolExecutor(4) as pool:
        versions = list(pool.map(lambda _: publish_branch(lance_format.dataset(root), "audit/race").version,
                                 range(4)))
    assert versions == [3, 3, 3, 3]
    assert lance.dataset(root).version == 3 and lance.dataset(root).count_rows() == 5 + commits


def _restamped(table: pa.Table, parent: int, version: int) -> pa.Table:
    """``table`` with every row version the branch made (> ``parent``) replaced by ``version``."""
    for name in ("_row_created_at_version", "_row_last_updated_at_version"):
        column = table.column(name)
        table = table.set_column(table.schema.get_field_index(name), name,
                                 pc.if_else(pc.greater(column, parent), pa.scalar(version, column.type), column))
    return table


SEVERAL = {
    "appends": [lambda b: lance_format.write_dataset(_table([7, 8]), b, mode="append"),
                lambda b: lance_format.write_dataset(_table([9]), b, mode="append")],
    "mixed": [lambda b: lance_format.write_dataset(_table([7, 8]), b, mode="append"),
              lambda b: b.delete("id = 2 OR id = 8"),
              lambda b: b.update({"name": "'changed'"}, where="id >= 4"),
              lambda b: b.merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
              .execute(_table([3, 9])),
              lambda b: b.update_config({"audit.owner": "qa"})],
    "deletes": [lambda b: b.delete("id = 1"), lambda b: b.delete("id >= 4")],
    "columns": [lambda b: lance_format.replace_where(b, "id > 3", _table([4, 6])),
                lambda b: b.add_columns(pa.schema([pa.field("score", pa.float64())])),
                lambda b: lance_format.write_dataset(
                    _table([10]).append_column("score", pa.array([0.5])), b, mode="append")],
    "overwrite": [lambda b: lance_format.write_dataset(_table([7, 8]), b, mode="overwrite"),
                  lambda b: lance_format.write_dataset(_table([9]), b, mode="append")],
}


@pytest.mark.parametrize("writes", sorted(SEVERAL))
def test_several_commits_publish_as_one(tmp_path, writes):
    root = _root(tmp_path)
    before = lance.dataset(root).to_table(columns=["_rowid"])["_rowid"].to_pylist()
    lance_format.dataset(root).create_branch("audit/run-n")
    for write in SEVERAL[writes]:
        write(lance_format.dataset(root).checkout_version(("audit/run-n", None)))
    staged = lance_format.dataset(root).checkout_version(("audit/run-n", None))
    assert staged.version == 2 + len(SEVERAL[writes]) and lance_format.dataset(root).version == 2
    audited = staged.to_table(columns=[f.name for f in staged.schema] + SYSTEM)

    published = publish_branch(lance_format.dataset(root), "audit/run-n", transaction_properties={"who": "test"})
    assert published.version == 3  # one commit, whatever the branch held
    assert publish_branch(lance_format.dataset(root), "audit/run-n").version == 3  # idempotent
    props = published.read_transaction().transaction_properties
    assert props["lance/published_commits"] == str(len(SEVERAL[writes])) and props["who"] == "test"
    lance_format.dataset(root).branches.delete("audit/run-n")
    theirs = lance.dataset(root)  # the oracle reads main alone
    assert theirs.version == 3 and theirs.schema == staged.schema
    expected = _restamped(audited, 2, 3)
    assert_tables_equal(theirs.to_table(columns=expected.column_names), expected, writes)
    assert theirs.config() == staged.config()
    # main's change feed of the publish: the branch's net effect, by stable row id
    changes = lance_format.dataset(root).delta(begin_version=2, end_version=3).get_changes().read_all()
    after = audited["_rowid"].to_pylist()
    kinds = dict(zip(changes["_rowid"].to_pylist(), changes["_change_type"].to_pylist()))
    assert {r for r, k in kinds.items() if k == "insert"} == set(after) - set(before)
    assert {r for r, k in kinds.items() if k == "delete"} == set(before) - set(after)
    changed = {r for r, v in zip(after, audited["_row_last_updated_at_version"].to_pylist()) if v > 2}
    assert {r for r, k in kinds.items() if k == "update_postimage"} == changed & set(before)
    lance.write_dataset(_table([11]), root, mode="append")  # pylance writes on top of it
    ours = lance_format.dataset(root)
    assert ours.count_rows() == audited.num_rows + 1
    assert len(set(ours.to_table(columns=["_rowid"])["_rowid"].to_pylist())) == ours.count_rows()


def test_several_commits_rebase_over_main(tmp_path):
    root = _root(tmp_path)
    branch = lance_format.dataset(root).create_branch("audit/two")
    lance_format.write_dataset(_table([7, 8]), branch, mode="append")
    lance_format.replace_where(lance_format.dataset(root).checkout_version(("audit/two", None)),
                               "id > 3 AND id < 7", _table([4, 6]))  # main's second fragment
    lance_format.write_dataset(_table([9, 12]), lance_format.dataset(root).checkout_version(("audit/two", None)),
                               mode="append")
    lance_format.dataset(root).checkout_version(("audit/two", None)).delete("id = 12")  # a new fragment's deletion
    lance.write_dataset(_table([10, 11]), root, mode="append")  # main moves to version 3
    with pytest.raises(CommitConflictError, match="main has moved to version 3"):
        publish_branch(lance_format.dataset(root), "audit/two")
    assert lance.dataset(root).version == 3

    published = publish_branch(lance_format.dataset(root), "audit/two", rebase=True)
    assert published.version == 4
    theirs = lance.dataset(root)
    table = theirs.to_table(columns=["id", "name"] + SYSTEM)
    assert sorted(table["id"].to_pylist()) == [1, 2, 3, 4, 6, 7, 8, 9, 10, 11]
    assert len(set(table["_rowid"].to_pylist())) == table.num_rows  # the branch's new rows moved past main's
    by_id = {i: (c, u) for i, c, u in zip(table["id"].to_pylist(), table["_row_created_at_version"].to_pylist(),
                                          table["_row_last_updated_at_version"].to_pylist())}
    assert by_id[10] == (3, 3) and by_id[7] == (4, 4) and by_id[1] == (1, 1)
    changes = lance_format.dataset(root).delta(begin_version=3, end_version=4).get_changes().read_all()
    kinds = {k: sorted(changes.filter(pc.equal(changes["_change_type"], k))["id"].to_pylist())
             for k in ("insert", "delete")}
    assert kinds == {"insert": [4, 6, 7, 8, 9], "delete": [4, 5]}  # replace_where replaces rows (new row ids)

    overwritten = lance_format.dataset(root).create_branch("audit/over")
    lance_format.write_dataset(_table([1]), overwritten, mode="overwrite")
    lance_format.write_dataset(_table([2]), lance_format.dataset(root).checkout_version(("audit/over", None)),
                               mode="append")
    lance.write_dataset(_table([12]), root, mode="append")
    with pytest.raises(CommitConflictError, match="an overwrite is never rebased"):
        publish_branch(lance_format.dataset(root), "audit/over", rebase=True)
    configured = lance_format.dataset(root).create_branch("audit/config")
    configured.update_config({"k": "branch"})
    configured.update_config({"other": "x"})
    lance_format.dataset(root).update_config({"k": "main"})
    with pytest.raises(CommitConflictError, match="changing \\['k'\\]"):
        publish_branch(lance_format.dataset(root), "audit/config", rebase=True)
    assert lance.dataset(root).version == 6 and lance.dataset(root).config()["k"] == "main"


def test_commits_after_a_publish_are_published_next(tmp_path):
    root = _root(tmp_path)
    branch = lance_format.dataset(root).create_branch("audit/again")
    lance_format.write_dataset(_table([7]), branch, mode="append")
    lance_format.write_dataset(_table([8]), lance_format.dataset(root).checkout_version(("audit/again", None)),
                               mode="append")
    assert publish_branch(lance_format.dataset(root), "audit/again").version == 3
    lance_format.dataset(root).checkout_version(("audit/again", None)).delete("id = 7")
    lance_format.write_dataset(_table([9]), lance_format.dataset(root).checkout_version(("audit/again", None)),
                               mode="append")
    assert publish_branch(lance_format.dataset(root), "audit/again").version == 4
    assert publish_branch(lance_format.dataset(root), "audit/again").version == 4
    staged = lance_format.dataset(root).checkout_version(("audit/again", None))
    expected = staged.to_table(columns=["id", "name", "_rowid"])
    assert_tables_equal(lance.dataset(root).to_table(columns=["id", "name", "_rowid"]), expected, "again")
    versions = dict(zip(*lance.dataset(root).to_table(columns=["id", "_row_created_at_version"]).to_pydict()
                        .values()))
    assert versions[8] == 3 and versions[9] == 4 and 7 not in versions


def test_several_commits_without_stable_row_ids(tmp_path):
    root = str(tmp_path / "plain")
    lance_format.write_dataset(_table([1, 2, 3]), root)
    branch = lance_format.dataset(root).create_branch("audit/plain")
    lance_format.write_dataset(_table([4, 5]), branch, mode="append")
    lance_format.dataset(root).checkout_version(("audit/plain", None)).delete("id = 1 OR id = 5")
    lance.write_dataset(_table([6]), root, mode="append")
    with pytest.raises(CommitConflictError):
        publish_branch(lance_format.dataset(root), "audit/plain")
    assert publish_branch(lance_format.dataset(root), "audit/plain", rebase=True).version == 3
    lance_format.dataset(root).branches.delete("audit/plain")
    assert sorted(lance.dataset(root).to_table()["id"].to_pylist()) == [2, 3, 4, 6]
    assert lance.dataset(root).version == 3
