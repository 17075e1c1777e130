"""Branches (#12 part 2), checked both ways against pylance 14.

Branches made by pylance are read by this engine identically and branches made here are read
by pylance identically (rows, schema, versions, stable ``_rowid`` lineage), including writes,
mutations, tags and cleanup on either side.
"""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import BranchError, PathEscapeError
from lance_format.io import ObjectStore
from lance_format.table.manifest import read_manifest
from lance_format.table.naming import list_versions
from lance_format.table.transaction import load_transaction
from tests.compat import SYSTEM, assert_tables_equal


def _table(ids):
    return pa.table({"id": pa.array(ids, pa.int64()), "name": pa.array([f"n{i}" for i in ids], pa.string())})


def _base(uri: str, writer) -> None:
    writer.write_dataset(_table([1, 2, 3]), uri, enable_stable_row_ids=True)
    writer.write_dataset(_table([4, 5]), uri, mode="append")


def assert_same_branch_version(root: str, branch: str | None, version: int | None) -> None:
    theirs = lance.dataset(root).checkout_version((branch, version))
    ours = lance_format.dataset(root).checkout_version((branch, version))
    context = f"{branch}@{version}"
    assert ours.version == theirs.version, context
    assert ours.schema.equals(theirs.schema, check_metadata=True), context
    assert ours.count_rows() == theirs.count_rows(), context
    cols = ours.schema.names + SYSTEM
    assert_tables_equal(ours.to_table(columns=cols), theirs.to_table(columns=cols), context)


def assert_same_branches(root: str) -> None:
    ours = lance_format.dataset(root).branches.list()
    theirs = lance.dataset(root).branches.list()
    assert ours == theirs
    for name in ours:
        theirs_versions = [v["version"] for v in lance.dataset(root).checkout_version((name, None)).versions()]
        ours_versions = [v["version"] for v in lance_format.dataset(root).checkout_version((name, None)).versions()]
        assert ours_versions == theirs_versions, name
        for version in ours_versions:
            assert_same_branch_version(root, name, version)


# -- pylance writes, we read ----------------------------------------------------------------
def test_pylance_branches_read_identically(tmp_path):
    root = str(tmp_path / "t")
    _base(root, lance)
    ds = lance.dataset(root)
    dev = ds.create_branch("dev", 1)
    dev.insert(_table([10, 11]))
    dev.delete("id = 2")
    dev.update({"name": "'changed'"}, where="id = 10")
    dev.tags.create("dev-tag", ("dev", 3))
    sub = dev.create_branch("dev/sub", ("dev", 2))
    sub.insert(_table([20]))
    lance.write_dataset(_table([6]), root, mode="append")  # main moves on independently

    assert_same_branches(root)
    for version in (1, 2, 3):
        assert_same_branch_version(root, None, version)
    assert lance_format.dataset(root).tags.list() == lance.dataset(root).tags.list()
    by_tag = lance_format.dataset(root, version="dev-tag")
    assert by_tag.version == 3 and by_tag.manifest.branch == "dev"
    assert_tables_equal(by_tag.to_table(), lance.dataset(root, version="dev-tag").to_table())
    # a branch's tree opens like any table, in both engines
    assert_tables_equal(lance_format.dataset(f"{root}/tree/dev/sub").to_table(columns=["id", "_rowid"]),
                        lance.dataset(f"{root}/tree/dev/sub").to_table(columns=["id", "_rowid"]))


def _uris_seen(engine, root: str) -> list:
    """What ``uri`` reports, relative to the table's root, along a branch's life in ``engine``."""
    def rel(uri: str) -> str:
        return os.path.relpath(uri, root)

    ds = engine.write_dataset(_table([1, 2]), root)
    dev = ds.create_branch("dev")
    seen = [rel(ds.uri), rel(dev.uri), rel(engine.dataset(f"{root}/tree/dev").uri)]
    ds.tags.create("on-dev", ("dev", 1))
    checked_out = engine.dataset(root).checkout_version(("dev", None))
    seen += [rel(checked_out.uri), rel(engine.dataset(root, version="on-dev").uri),
             rel(engine.dataset(root).checkout_version("on-dev").uri)]
    appended = engine.write_dataset(_table([3]), checked_out, mode="append")
    seen += [rel(appended.uri), appended.version]
    checked_out.delete("id = 1")  # a mutation keeps the object's uri and stays on the branch
    seen += [rel(checked_out.uri), checked_out.version, checked_out.latest_version,
             sorted(checked_out.to_table()["id"].to_pylist()), sorted(checked_out.branches.list()),
             sorted(checked_out.tags.list())]
    seen.append(rel(checked_out.create_branch("dev2").uri))
    seen.append(rel(checked_out.checkout_version(1).uri))
    seen.append(engine.dataset(root).version)  # main never moved
    return seen


def test_uri_of_a_checked_out_branch_is_the_root_like_pylance(tmp_path):
    ours = _uris_seen(lance_format, str(tmp_path / "ours"))
    theirs = _uris_seen(lance, str(tmp_path / "theirs"))
    assert ours == theirs
    assert ours[3] == "." and ours[1] == "tree/dev"  # checked out: the root; created: the branch's tree


# -- we write, pylance reads ----------------------------------------------------------------
def test_our_branches_read_identically_by_pylance(tmp_path):
    root = str(tmp_path / "t")
    _base(root, lance_format)
    ds = lance_format.dataset(root)
    dev = ds.create_branch("dev", 1)
    assert dev.version == 1 and dev.uri == f"{root}/tree/dev"
    dev = lance_format.write_dataset(_table([10, 11]), dev, mode="append")
    dev.delete("id = 2")
    dev.update({"name": "'changed'"}, where="id = 10")
    dev.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(_table([11, 12]))
    dev.tags.create("dev-tag", 3)  # an int names a version of the dataset's own branch
    sub = dev.create_branch("dev/sub", ("dev", 2))
    lance_format.write_dataset(_table([20]), sub, mode="append")
    lance_format.write_dataset(_table([6]), root, mode="append")

    assert_same_branches(root)
    for version in (1, 2, 3):
        assert_same_branch_version(root, None, version)
    theirs_tags = lance.dataset(root).tags.list()
    assert theirs_tags["dev-tag"]["branch"] == "dev" and theirs_tags["dev-tag"]["version"] == 3
    assert lance.dataset(root, version="dev-tag").version == 3
    assert_tables_equal(lance_format.dataset(root, version="dev-tag").to_table(),
                        lance.dataset(root, version="dev-tag").to_table())


def test_our_branch_manifest_matches_pylance(tmp_path):
    """Both engines branch the same version: same fragments, base paths, flags, version, clone."""
    root = str(tmp_path / "t")
    _base(root, lance)
    lance.dataset(root).delete("id = 1")  # a deletion file that the branch must reach via its base
    lance.dataset(root).create_branch("theirs", 3)
    lance_format.dataset(root).create_branch("ours", 3)

    def first(name):
        store = ObjectStore(f"{root}/tree/{name}")
        mf = read_manifest(store, list_versions(store).versions[3])
        return mf.manifest, load_transaction(store, mf)

    (mine, my_txn), (their, their_txn) = first("ours"), first("theirs")
    for field in ("fragments", "fields", "reader_feature_flags", "writer_feature_flags",
                  "version", "max_fragment_id", "next_row_id", "data_format", "config"):
        assert getattr(mine, field) == getattr(their, field), field
    # pylance keeps base paths in a hash map: their order in the manifest varies from run to run
    assert sorted(mine.base_paths, key=lambda b: b.id) == sorted(their.base_paths, key=lambda b: b.id)
    assert (mine.branch, their.branch) == ("ours", "theirs")
    assert my_txn.read_version == their_txn.read_version == 3
    for field in ("is_shallow", "ref_version", "ref_path"):
        assert getattr(my_txn.clone, field) == getattr(their_txn.clone, field), field
    assert not my_txn.clone.HasField("ref_name") and not their_txn.clone.HasField("ref_name")
    refs = {n: json.loads(open(f"{root}/_refs/branches/{n}.json").read()) for n in ("ours", "theirs")}
    assert refs["ours"].keys() == refs["theirs"].keys()
    assert refs["ours"]["manifestSize"] == os.path.getsize(
        os.path.join(root, "tree/ours", list_versions(ObjectStore(f"{root}/tree/ours")).versions[3]))


def test_engines_take_turns_on_one_branch(tmp_path):
    root = str(tmp_path / "t")
    _base(root, lance)
    theirs = lance.dataset(root).create_branch("b", 2)
    lance_format.write_dataset(_table([7]), lance_format.dataset(f"{root}/tree/b"), mode="append")
    theirs = lance.dataset(root).checkout_version(("b", None))
    theirs.delete("id = 3")
    ours = lance_format.dataset(root).checkout_version(("b", None))
    ours.update({"id": "id + 100"}, where="id = 7")
    ours.optimize.compact_files()
    lance.dataset(root).checkout_version(("b", None)).insert(_table([8]))
    assert_same_branches(root)
    latest = lance_format.dataset(root).checkout_version(("b", None))
    assert sorted(latest.to_table()["id"].to_pylist()) == [1, 2, 4, 5, 8, 107]


def test_checkout_references(tmp_path):
    root = str(tmp_path / "t")
    _base(root, lance_format)
    dev = lance_format.dataset(root).create_branch("dev")  # default: the version the dataset is at
    assert dev.version == 2 and lance.dataset(root).branches.list()["dev"]["parent_version"] == 2
    lance_format.write_dataset(_table([9]), dev, mode="append")
    on_dev = lance_format.dataset(root).checkout_version(("dev", 3))
    assert on_dev.checkout_version(2).manifest.branch == "dev"  # an int stays on the branch
    assert not on_dev.checkout_version(("main", 1)).manifest.HasField("branch")
    assert on_dev.checkout_version((None, None)).version == 2
    assert lance_format.dataset(root).checkout_version(("dev", None)).version == 3
    with pytest.raises(BranchError, match="does not exist"):
        lance_format.dataset(root).checkout_version(("nope", 1))
    v1 = lance_format.dataset(root, version=1).create_branch("from-v1")
    assert v1.version == 1 and v1.count_rows() == 3


def test_branch_names_and_duplicates(tmp_path):
    root = str(tmp_path / "t")
    _base(root, lance_format)
    ds = lance_format.dataset(root)
    for bad in ("main", "", "../x", "a/../b", "a//b", "/a", "x/", "x.lock", "a b", "a@b", "a:b", "a\\b", None, 3):
        with pytest.raises(BranchError):
            ds.create_branch(bad)
    for good in (".x", "-x", "é", "a.b", "a-b_c"):  # pylance accepts these too
        ds.create_branch(good)
        assert lance.dataset(root).checkout_version((good, None)).count_rows() == 5
    assert sorted(lance_format.dataset(root).branches.list()) == sorted(lance.dataset(root).branches.list())
    for good in (".x", "-x", "é", "a.b", "a-b_c"):
        ds.branches.delete(good)
    ds.create_branch("x")
    with pytest.raises(BranchError, match="already exists"):
        ds.create_branch("x")
    lance.dataset(root).create_branch("y")
    with pytest.raises(BranchError, match="already exists"):
        ds.create_branch("y")
    assert sorted(lance.dataset(root).branches.list()) == ["x", "y"]
    ds.checkout_version(1).create_branch("a")
    ds.create_branch("b")
    for order in (None, "asc", "desc"):
        assert [n for n, _ in ds.branches.list_ordered(order)] == \
            [n for n, _ in lance.dataset(root).branches.list_ordered(order)], order


def test_branch_metadata_both_ways(tmp_path):
    root = str(tmp_path / "t")
    _base(root, lance_format)
    lance_format.dataset(root).create_branch("m")
    lance.dataset(root).branches.replace_metadata("m", {"k": "v"})
    assert lance_format.dataset(root).branches.list()["m"]["metadata"] == {"k": "v"}
    lance_format.dataset(root).branches.replace_metadata("m", {"q": "1"})
    assert lance.dataset(root).branches.list()["m"] == lance_format.dataset(root).branches.list()["m"]
    assert lance.dataset(root).branches.list()["m"]["metadata"] == {"q": "1"}


def test_delete_branch_both_ways(tmp_path):
    root = str(tmp_path / "t")
    _base(root, lance_format)
    ds = lance_format.dataset(root)
    ds.create_branch("a")
    lance_format.write_dataset(_table([9]), ds.checkout_version(("a", None)), mode="append")
    ds.checkout_version(("a", None)).create_branch("a/child")
    with pytest.raises(BranchError, match="referenced"):
        ds.branches.delete("a")
    with pytest.raises(Exception, match="referenced"):
        lance.dataset(root).branches.delete("a")
    ds.branches.delete("a/child")
    assert not os.path.exists(f"{root}/tree/a/child")
    assert list(lance.dataset(root).branches.list()) == ["a"]
    lance.dataset(root).branches.delete("a")
    assert ds.branches.list() == {}
    lance.dataset(root).create_branch("p")
    ds.branches.delete("p")
    assert lance.dataset(root).branches.list() == {} and not os.path.exists(f"{root}/tree/p")
    with pytest.raises(BranchError, match="does not exist"):
        ds.branches.delete("p")
    ds.create_branch("tagged").tags.create("on-tagged", 2)
    with pytest.raises(BranchError, match="referenced by tags"):
        ds.branches.delete("tagged")
    with pytest.raises(Exception, match="referenced by tags"):
        lance.dataset(root).branches.delete("tagged")
    ds.tags.delete("on-tagged")
    ds.branches.delete("tagged")
    ds.create_branch("q")
    ds.create_branch("q/r")  # made from main, but its tree lies inside q's
    ds.branches.delete("q")
    assert lance.dataset(root).checkout_version(("q/r", None)).count_rows() == 5
    assert_same_branches(root)


def _cleanup_scenario(root: str, writer) -> tuple:
    writer.write_dataset(_table([1, 2, 3]), root)
    writer.write_dataset(_table([4]), root, mode="append")
    writer.dataset(root, version=1).create_branch("x")
    writer.write_dataset(_table([9]), writer.dataset(root).checkout_version(("x", None)), mode="append")
    writer.dataset(root).create_branch("y")
    writer.dataset(root).branches.delete("y")
    writer.dataset(root).tags.create("on-x", ("x", 2))  # tags a branch version, not main's version 2
    writer.write_dataset(_table([7]), root, mode="overwrite")
    time.sleep(0.05)
    stats = writer.dataset(root).cleanup_old_versions(older_than=timedelta(0))
    return stats.old_versions, stats.data_files_removed, sorted(os.listdir(f"{root}/data"))


def test_cleanup_keeps_what_branches_use_like_pylance(tmp_path):
    ours = _cleanup_scenario(str(tmp_path / "ours"), lance_format)
    theirs = _cleanup_scenario(str(tmp_path / "theirs"), lance)
    assert ours[:2] == theirs[:2] == (1, 1)
    assert len(ours[2]) == len(theirs[2]) == 2
    for root in (str(tmp_path / "ours"), str(tmp_path / "theirs")):
        assert_same_branches(root)
        assert_same_branch_version(root, None, 1)  # the version branch x was made from stays
        assert sorted(lance.dataset(root).checkout_version(("x", None)).to_table()["id"].to_pylist()) == [1, 2, 3, 9]


def _branch_cleanup_scenario(root: str, writer) -> tuple:
    _base(root, writer)
    writer.dataset(root).create_branch("dev", 1)
    for i in range(3):
        writer.write_dataset(_table([10 + i]), writer.dataset(root).checkout_version(("dev", None)), mode="append")
    dev = writer.dataset(root).checkout_version(("dev", None))
    dev.checkout_version(2).create_branch("dev/kid")
    writer.dataset(root).tags.create("main-2", 2)  # a main tag must not keep dev's version 2
    dev.tags.create("dev-3", 3)
    time.sleep(0.05)
    stats = dev.cleanup_old_versions(older_than=timedelta(0), error_if_tagged_old_versions=False)
    versions = [v["version"] for v in writer.dataset(root).checkout_version(("dev", None)).versions()]
    return stats.old_versions, stats.data_files_removed, versions


def test_cleanup_on_a_branch_like_pylance(tmp_path):
    ours = _branch_cleanup_scenario(str(tmp_path / "ours"), lance_format)
    theirs = _branch_cleanup_scenario(str(tmp_path / "theirs"), lance)
    assert ours == theirs
    assert ours[2] == [2, 3, 4]  # version 1 goes; 2 made dev/kid, 3 is tagged
    for root in (str(tmp_path / "ours"), str(tmp_path / "theirs")):
        assert_same_branches(root)
        for version in (1, 2):
            assert_same_branch_version(root, None, version)  # main's files are never touched


def test_branch_paths_are_checked(tmp_path):
    root = str(tmp_path / "t")
    _base(root, lance_format)
    dev = lance_format.dataset(root).create_branch("dev")
    store = ObjectStore(f"{root}/tree/dev")
    path = list_versions(store).versions[2]
    mf = read_manifest(store, path)
    mf.manifest.fragments[0].files[0].path = "../../../../etc/passwd"
    from lance_format.table.manifest import encode_manifest

    store.replace_bytes(path, encode_manifest(mf.manifest, mf.transaction, mf.index_section))
    with pytest.raises(PathEscapeError):
        lance_format.dataset(f"{root}/tree/dev").to_table()
    del dev


def test_restore_overwrite_and_schema_changes_on_a_branch(tmp_path):
    root = str(tmp_path / "t")
    _base(root, lance)
    lance.dataset(root).create_branch("b", 1)
    lance_format.write_dataset(_table([7]), lance_format.dataset(root).checkout_version(("b", None)), mode="append")
    lance_format.dataset(root).checkout_version(("b", 1)).restore()  # branch version 3 = version 1
    assert lance.dataset(root).checkout_version(("b", None)).version == 3
    ours = lance_format.dataset(root).checkout_version(("b", None))
    ours.add_columns({"twice": "id * 2"})
    lance.dataset(root).checkout_version(("b", None)).drop_columns(["name"])
    assert_same_branches(root)
    lance_format.write_dataset(pa.table({"z": [1.5]}), lance_format.dataset(root).checkout_version(("b", None)),
                               mode="overwrite")
    assert_same_branches(root)
    assert lance.dataset(root).checkout_version(("b", None)).to_table().to_pydict() == {"z": [1.5]}
    for version in (1, 2):
        assert_same_branch_version(root, None, version)  # main never moved


def test_concurrent_deletes_on_a_branch_rebase(tmp_path):
    root = str(tmp_path / "t")
    _base(root, lance)
    lance.dataset(root).delete("id = 1")  # fragment 0 has a deletion file in main's root
    lance.dataset(root).create_branch("b")
    first = lance_format.dataset(root).checkout_version(("b", None))
    second = lance_format.dataset(root).checkout_version(("b", None))
    first.delete("id = 2")
    second.delete("id = 3")  # same fragment, built on the same version: rebased over the first
    assert_same_branches(root)
    assert sorted(lance.dataset(root).checkout_version(("b", None)).to_table()["id"].to_pylist()) == [4, 5]
    assert sorted(lance.dataset(root).to_table()["id"].to_pylist()) == [2, 3, 4, 5]


def test_branches_and_clones_on_s3():
    from tests.s3_support import start_server

    server, s3 = start_server()
    try:
        opts = s3.options()
        root = f"s3://{s3.new_bucket()}/t.lance"
        lance_format.write_dataset(_table([1, 2, 3]), root, storage_options=opts, enable_stable_row_ids=True)
        ours = lance_format.dataset(root, storage_options=opts).create_branch("dev")
        lance_format.write_dataset(_table([4]), ours, mode="append")
        lance.dataset(root, storage_options=opts).create_branch("theirs").insert(_table([5]))
        lance_format.dataset(root, storage_options=opts).shallow_clone(root + "-clone", ("theirs", None))
        for branch, expected in (("dev", [1, 2, 3, 4]), ("theirs", [1, 2, 3, 5])):
            theirs_ds = lance.dataset(root, storage_options=opts).checkout_version((branch, None))
            ours_ds = lance_format.dataset(root, storage_options=opts).checkout_version((branch, None))
            cols = ["id", "name", "_rowid"]
            assert_tables_equal(ours_ds.to_table(columns=cols), theirs_ds.to_table(columns=cols), branch)
            assert sorted(ours_ds.to_table()["id"].to_pylist()) == expected
        bases = {b: [p.path for p in lance_format.dataset(root, storage_options=opts)
                     .checkout_version((b, None)).manifest.base_paths] for b in ("dev", "theirs")}
        assert bases["dev"] == bases["theirs"]  # the same URI text for the base
        clone = lance.dataset(root + "-clone", storage_options=opts)
        assert sorted(clone.to_table()["id"].to_pylist()) == [1, 2, 3, 5]
        assert lance_format.dataset(root, storage_options=opts).branches.list() == \
            lance.dataset(root, storage_options=opts).branches.list()
    finally:
        server.stop()


def test_delta_on_a_branch_like_pylance(tmp_path):
    root = str(tmp_path / "t")
    _base(root, lance_format)
    lance_format.dataset(root).create_branch("d")
    lance_format.write_dataset(_table([9]), lance_format.dataset(root).checkout_version(("d", None)), mode="append")
    lance.dataset(root).checkout_version(("d", None)).update({"name": "'u'"}, where="id = 1")
    assert lance_format.dataset(root).checkout_version(("d", 2)).read_transaction_message().HasField("clone")
    ours = lance_format.dataset(root).checkout_version(("d", None)).delta(begin_version=2, end_version=4)
    theirs = lance.dataset(root).checkout_version(("d", None)).delta(begin_version=2, end_version=4)
    for method in ("get_inserted_rows", "get_updated_rows"):
        mine, their = getattr(ours, method)(), getattr(theirs, method)()
        mine = mine.read_all() if hasattr(mine, "read_all") else mine
        their = their.read_all() if hasattr(their, "read_all") else their
        assert mine.to_pydict() == their.to_pydict(), method
        assert mine.num_rows == 1


# -- a create that crashed between the branch's manifest and its ref -----------------------------
def _age_tree(folder: str, seconds: float) -> None:
    past = time.time() - seconds
    for directory, _, files in os.walk(folder):
        for name in files:
            os.utime(os.path.join(directory, name), (past, past))


def test_create_branch_recovers_the_tree_of_a_create_that_crashed(tmp_path, monkeypatch):
    root = str(tmp_path / "t")
    _base(root, lance_format)
    ds = lance_format.dataset(root)
    ds.create_branch("dev/sub", 1)  # a branch whose tree lies inside dev's: it is not dev's leftover
    branches_module = __import__("sys").modules["lance_format.dataset.branches"]

    def crash(*args, **kwargs):
        raise KeyboardInterrupt("the process died before the ref was written")

    monkeypatch.setattr(branches_module, "write_branch", crash)
    with pytest.raises(KeyboardInterrupt):
        ds.create_branch("dev", 1)
    monkeypatch.undo()
    assert os.listdir(f"{root}/tree/dev/_versions") and not os.path.exists(f"{root}/_refs/branches/dev.json")
    # both engines see no branch "dev"; pylance itself cannot create it again (an internal error)
    assert sorted(lance.dataset(root).branches.list()) == sorted(ds.branches.list()) == ["dev/sub"]
    with pytest.raises(OSError):
        lance.dataset(root).create_branch("dev", 2)
    # a fresh leftover may be a create in flight: refused with a clear error, nothing removed
    with pytest.raises(BranchError, match="without a ref"):
        ds.create_branch("dev", 2)
    _age_tree(f"{root}/tree/dev", 2 * branches_module.ORPHAN_TREE_AGE_SECONDS)
    dev = ds.create_branch("dev", 2)
    assert dev.version == 2 and sorted(dev.to_table()["id"].to_pylist()) == [1, 2, 3, 4, 5]
    # only the new create's transaction is left; the nested branch is untouched
    assert len(os.listdir(f"{root}/tree/dev/_transactions")) == 1
    assert sorted(lance.dataset(root).branches.list()) == ["dev", "dev/sub"]
    assert_same_branches(root)
    lance.write_dataset(_table([7]), lance.dataset(root).checkout_version(("dev", None)), mode="append")
    assert_same_branch_version(root, "dev", 3)
