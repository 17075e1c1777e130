"""Shallow and deep clones (#12 part 2), checked both ways against pylance 14.

A shallow clone shares the source's files through a base path; a deep clone copies them. Clones
made by either engine are read identically by both (rows, schema, versions, stable ``_rowid``),
take writes from both, and cleanup of a clone never touches the source's files.
"""

from __future__ import annotations

import os
import shutil
import time
from datetime import timedelta

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import DatasetAlreadyExistsError
from lance_format.io import ObjectStore
from lance_format.table.manifest import read_manifest
from lance_format.table.naming import list_versions
from lance_format.table.transaction import load_transaction
from tests.compat import SYSTEM, assert_tables_equal


def _table(ids):
    return pa.table({"id": pa.array(ids, pa.int64()), "name": pa.array([f"n{i}" for i in ids], pa.string())})


def _source(uri: str) -> None:
    """Main: v1 [1,2,3], v2 +[4,5], v3 deletes 1; branch dev from v2: +[10], deletes 4."""
    lance.write_dataset(_table([1, 2, 3]), uri, enable_stable_row_ids=True)
    lance.write_dataset(_table([4, 5]), uri, mode="append")
    lance.dataset(uri).delete("id = 1")
    dev = lance.dataset(uri).create_branch("dev", 2)
    dev.insert(_table([10]))
    dev.delete("id = 4")


def assert_same_table(uri: str) -> None:
    theirs, ours = lance.dataset(uri), lance_format.dataset(uri)
    assert [v["version"] for v in ours.versions()] == [v["version"] for v in theirs.versions()]
    for version in [v["version"] for v in ours.versions()]:
        t, o = theirs.checkout_version(version), ours.checkout_version(version)
        assert o.schema.equals(t.schema, check_metadata=True)
        cols = o.schema.names + SYSTEM
        assert_tables_equal(o.to_table(columns=cols), t.to_table(columns=cols), f"{uri}@{version}")


def _first(uri: str):
    store = ObjectStore(uri)
    listing = list_versions(store)
    mf = read_manifest(store, listing.versions[min(listing.versions)])
    return mf.manifest, load_transaction(store, mf)


def _assert_same_clone(ours_uri: str, theirs_uri: str) -> None:
    (mine, my_txn), (their, their_txn) = _first(ours_uri), _first(theirs_uri)
    for field in ("fragments", "fields", "reader_feature_flags", "writer_feature_flags",
                  "version", "max_fragment_id", "next_row_id", "data_format", "branch"):
        assert getattr(mine, field) == getattr(their, field), field
    # pylance keeps base paths in a hash map: their order in the manifest varies from run to run
    assert sorted(mine.base_paths, key=lambda b: b.id) == sorted(their.base_paths, key=lambda b: b.id)
    assert my_txn.read_version == their_txn.read_version
    assert my_txn.clone == their_txn.clone


REFERENCES = [2, 3, ("dev", 3), ("dev", None)]


@pytest.mark.parametrize("reference", REFERENCES, ids=str)
def test_shallow_clones_both_ways(tmp_path, reference):
    src = str(tmp_path / "src")
    _source(src)
    theirs = lance.dataset(src).shallow_clone(str(tmp_path / "theirs"), reference)
    ours = lance_format.dataset(src).shallow_clone(str(tmp_path / "ours"), reference)
    assert ours.version == theirs.version
    _assert_same_clone(str(tmp_path / "ours"), str(tmp_path / "theirs"))
    for uri in (str(tmp_path / "ours"), str(tmp_path / "theirs")):
        assert_same_table(uri)
        assert not os.path.exists(os.path.join(uri, "data"))  # nothing copied


@pytest.mark.parametrize("reference", REFERENCES, ids=str)
def test_deep_clones_both_ways(tmp_path, reference):
    src = str(tmp_path / "src")
    _source(src)
    lance.dataset(src).deep_clone(str(tmp_path / "theirs"), reference)
    lance_format.dataset(src).deep_clone(str(tmp_path / "ours"), reference)
    (mine, _), (their, _) = _first(str(tmp_path / "ours")), _first(str(tmp_path / "theirs"))
    assert len(mine.base_paths) == 0 and len(their.base_paths) == 0
    _assert_same_clone(str(tmp_path / "ours"), str(tmp_path / "theirs"))
    for name in ("ours", "theirs"):
        assert sorted(os.listdir(tmp_path / name / "data")) == sorted(os.listdir(tmp_path / "theirs" / "data"))
    expected = lance.dataset(str(tmp_path / "theirs")).to_table()
    shutil.rmtree(src)  # a deep clone stands on its own
    for uri in (str(tmp_path / "ours"), str(tmp_path / "theirs")):
        assert_same_table(uri)
        assert_tables_equal(lance_format.dataset(uri).to_table(), expected)


def test_engines_write_to_each_others_shallow_clones(tmp_path):
    src = str(tmp_path / "src")
    _source(src)
    for maker, writer in ((lance, lance_format), (lance_format, lance)):
        uri = str(tmp_path / f"clone-{maker.__name__}")
        maker.dataset(src).shallow_clone(uri, ("dev", None))
        writer.write_dataset(_table([30]), uri, mode="append")
        writer.dataset(uri).delete("id = 2")  # a fragment whose data stays in the source
        writer.dataset(uri).update({"name": "'u'"}, where="id = 10")
        assert_same_table(uri)
        assert sorted(lance.dataset(uri).to_table()["id"].to_pylist()) == [1, 3, 5, 10, 30]
    assert_same_table(src)  # the source never changes
    assert sorted(lance.dataset(src).checkout_version(("dev", None)).to_table()["id"].to_pylist()) == [1, 2, 3, 5, 10]


@pytest.mark.parametrize("cleaner", [lance, lance_format], ids=["pylance", "ours"])
def test_cleanup_of_a_shallow_clone_leaves_the_source_alone(tmp_path, cleaner):
    src = str(tmp_path / "src")
    _source(src)
    before = sorted(os.path.relpath(os.path.join(r, f), src) for r, _, fs in os.walk(src) for f in fs)
    uri = str(tmp_path / "clone")
    lance_format.dataset(src).shallow_clone(uri, 3)
    lance_format.write_dataset(_table([40]), uri, mode="overwrite")
    time.sleep(0.05)
    stats = cleaner.dataset(uri).cleanup_old_versions(older_than=timedelta(0))
    assert stats.old_versions == 1
    after = sorted(os.path.relpath(os.path.join(r, f), src) for r, _, fs in os.walk(src) for f in fs)
    assert after == before
    assert_same_table(src)
    assert_same_table(uri)


def test_clone_refuses_an_existing_table(tmp_path):
    src = str(tmp_path / "src")
    _source(src)
    lance_format.write_dataset(_table([1]), str(tmp_path / "there"))
    with pytest.raises(DatasetAlreadyExistsError):
        lance_format.dataset(src).shallow_clone(str(tmp_path / "there"), 2)
    with pytest.raises(DatasetAlreadyExistsError):
        lance_format.dataset(src).deep_clone(str(tmp_path / "there"), 2)
    assert lance.dataset(str(tmp_path / "there")).count_rows() == 1


def test_clones_carry_indices(tmp_path):
    src = str(tmp_path / "src")
    lance.write_dataset(_table(list(range(100))), src)
    lance.dataset(src).create_scalar_index("id", "BTREE")
    lance_format.dataset(src).shallow_clone(str(tmp_path / "shallow"), 2)
    lance_format.dataset(src).deep_clone(str(tmp_path / "deep"), 2)
    shutil.copytree(src, str(tmp_path / "src-copy"))
    for name in ("shallow", "deep"):
        clone = lance.dataset(str(tmp_path / name))
        assert [i.name for i in clone.describe_indices()] == ["id_idx"]
        assert clone.to_table(filter="id = 42")["id"].to_pylist() == [42]
        assert "ScalarIndexQuery" in clone.scanner(filter="id = 42").explain_plan()
    shutil.rmtree(src)
    deep = lance.dataset(str(tmp_path / "deep"))
    assert deep.to_table(filter="id = 7")["id"].to_pylist() == [7]


# -- multi-base tables: files written to other base paths ---------------------------------------
def _multi_base(tmp_path) -> str:
    uri = str(tmp_path / "mb")
    bases = [lance.DatasetBasePath(str(tmp_path / "flat"), name="flat"),
             lance.DatasetBasePath(str(tmp_path / "rooted"), name="rooted", is_dataset_root=True)]
    lance.write_dataset(_table(list(range(10))), uri, initial_bases=bases, target_bases=["flat"],
                        enable_stable_row_ids=True)
    lance.write_dataset(_table([100, 101]), uri, mode="append", target_bases=["rooted"])
    lance.dataset(uri).delete("id = 3")
    return uri


def test_multi_base_tables_both_ways(tmp_path):
    uri = _multi_base(tmp_path)
    assert_same_table(uri)
    ours = lance_format.dataset(uri)
    assert {b.name for b in ours.base_paths().values()} == {b.name for b in lance.dataset(uri).base_paths().values()}
    lance_format.write_dataset(_table([200]), uri, mode="append")
    ours = lance_format.dataset(uri)
    ours.delete("id = 100 OR id = 4")
    ours.update({"name": "'x'"}, where="id = 5")
    assert_same_table(uri)
    lance.write_dataset(_table([300]), uri, mode="append", target_bases=["rooted"])
    assert_same_table(uri)
    assert sorted(lance_format.dataset(uri).to_table()["id"].to_pylist()) == [
        0, 1, 2, 5, 6, 7, 8, 9, 101, 200, 300]


def test_multi_base_cleanup_only_touches_the_primary_root(tmp_path):
    uri = _multi_base(tmp_path)
    others = sorted(str(p) for p in tmp_path.rglob("*") if p.is_file() and "mb" not in p.parts)
    lance_format.write_dataset(_table([1]), uri, mode="overwrite")
    time.sleep(0.05)
    lance_format.dataset(uri).cleanup_old_versions(older_than=timedelta(0))
    assert sorted(str(p) for p in tmp_path.rglob("*") if p.is_file() and "mb" not in p.parts) == others
    assert_same_table(uri)


def test_relative_base_paths_are_refused(tmp_path):
    uri = _multi_base(tmp_path)
    store = ObjectStore(uri)
    path = list_versions(store).versions[3]
    mf = read_manifest(store, path)
    mf.manifest.base_paths[0].path = "../../etc"
    from lance_format.errors import PathEscapeError
    from lance_format.table.manifest import encode_manifest

    store.replace_bytes(path, encode_manifest(mf.manifest, mf.transaction, mf.index_section))
    with pytest.raises(PathEscapeError, match="not an absolute path"):
        lance_format.dataset(uri).to_table()


# -- multi-base writes: initial_bases, target_bases, target_all_bases, add_bases -----------------
def _bases_history(engine, tmp_path, name: str) -> str:
    """One history in ``engine``: every way a write picks its bases, then a delete."""
    uri, here = str(tmp_path / name / "t"), tmp_path / name
    base = engine.DatasetBasePath
    engine.write_dataset(_table(list(range(6))), uri, enable_stable_row_ids=True, max_rows_per_file=4,
                         initial_bases=[base(str(here / "flat"), name="flat"),
                                        base(str(here / "rooted"), name="rooted", is_dataset_root=True, id=7)],
                         target_bases=["flat", "rooted"])
    engine.write_dataset(_table([10, 11]), uri, mode="append", target_bases=[str(here / "rooted")])
    engine.write_dataset(_table(list(range(20, 26))), uri, mode="append", target_all_bases=True, max_rows_per_file=2)
    engine.dataset(uri).add_bases([engine.DatasetBasePath(str(here / "extra"), name="extra")])
    engine.write_dataset(_table([30, 31, 32]), uri, mode="append", target_all_bases=False, max_rows_per_file=1)
    engine.write_dataset(_table([40]), uri, mode="append")
    engine.dataset(uri).delete("id = 1 OR id = 21")
    return uri


def _placement(uri: str) -> list:
    """(base name, whether the file is where the base's layout puts it) of every data file."""
    ds = lance.dataset(uri)
    bases = ds.base_paths()
    out = []
    for fragment in ds.get_fragments():
        for data_file in fragment.metadata.files:
            if data_file.base_id is None:
                out.append((None, os.path.exists(os.path.join(uri, "data", data_file.path))))
                continue
            base = bases[data_file.base_id]
            folder = os.path.join(base.path, "data") if base.is_dataset_root else base.path
            out.append((base.name, os.path.exists(os.path.join(folder, data_file.path))))
    return out


def _registered(ds) -> list:
    return sorted((b.id, b.name, os.path.basename(b.path), b.is_dataset_root) for b in ds.base_paths().values())


def test_multi_base_writes_like_pylance_both_ways(tmp_path):
    ours, theirs = _bases_history(lance_format, tmp_path, "ours"), _bases_history(lance, tmp_path, "theirs")
    assert _registered(lance_format.dataset(ours)) == _registered(lance.dataset(theirs)) == [
        (1, "flat", "flat", False), (2, "extra", "extra", False), (7, "rooted", "rooted", True)]
    expected = ([("flat", True), ("rooted", True)] + [("rooted", True)] + [(None, True), ("flat", True),
                ("rooted", True)] + [("flat", True), ("extra", True), ("rooted", True)] + [(None, True)])
    assert _placement(ours) == _placement(theirs) == expected
    assert_same_table(ours)
    assert_same_table(theirs)
    for version in range(1, lance.dataset(theirs).version + 1):
        mine, their = (lance_format.dataset(ours, version=version).manifest,
                       lance_format.dataset(theirs, version=version).manifest)
        assert mine.reader_feature_flags == their.reader_feature_flags and mine.base_paths
        assert [[f.base_id for f in fr.files] for fr in mine.fragments] == [[f.base_id for f in fr.files]
                                                                           for fr in their.fragments]
    (mine, my_txn), (their, their_txn) = _first(ours), _first(theirs)
    assert [(b.id, b.name, b.is_dataset_root) for b in my_txn.overwrite.initial_bases] == [
        (b.id, b.name, b.is_dataset_root) for b in their_txn.overwrite.initial_bases]
    # each engine keeps writing to the other's multi-base table
    lance_format.write_dataset(_table([50]), theirs, mode="append", target_bases=["extra"])
    lance.write_dataset(_table([50]), ours, mode="append", target_bases=["extra"])
    lance_format.dataset(theirs).add_bases([lance_format.DatasetBasePath(str(tmp_path / "theirs" / "more"))])
    lance.dataset(ours).add_bases([lance.DatasetBasePath(str(tmp_path / "ours" / "more"))])
    lance.write_dataset(_table([60]), theirs, mode="append", target_bases=[str(tmp_path / "theirs" / "more")])
    lance_format.write_dataset(_table([60]), ours, mode="append", target_bases=[str(tmp_path / "ours" / "more")])
    assert _registered(lance.dataset(ours)) == _registered(lance_format.dataset(theirs))
    assert _placement(ours) == _placement(theirs)
    assert_same_table(ours)
    assert_same_table(theirs)
    assert sorted(lance_format.dataset(ours).to_table()["id"].to_pylist()) == sorted(
        lance.dataset(theirs).to_table()["id"].to_pylist())


def test_multi_base_write_arguments_are_refused_like_pylance(tmp_path):
    uri = _bases_history(lance_format, tmp_path, "t")
    flat = lance_format.DatasetBasePath(str(tmp_path / "t" / "flat"), name="flat")
    for engine, error in ((lance_format, lance_format.InvalidInputError), (lance, (OSError, ValueError))):
        with pytest.raises(error, match="Cannot register new bases in Append mode"):  # by create only
            engine.write_dataset(_table([1]), uri, mode="append",
                                 initial_bases=[engine.DatasetBasePath(str(tmp_path / "x"), name="x")])
        with pytest.raises(error, match="'no-such-base' not found"):
            engine.write_dataset(_table([1]), uri, mode="append", target_bases=["no-such-base"])
        with pytest.raises(error):
            engine.write_dataset(_table([1]), uri, mode="append", target_bases=["flat"], target_all_bases=True)
        with pytest.raises(error):  # a name or path registered already
            engine.dataset(uri).add_bases([engine.DatasetBasePath(str(tmp_path / "y"), name="flat")])
        with pytest.raises(error):
            engine.dataset(uri).add_bases([engine.DatasetBasePath(flat.path, name="other")])
        with pytest.raises(error):
            engine.write_dataset(_table([1]), str(tmp_path / "new"), initial_bases=[flat], target_bases=["nope"])
        assert not os.path.exists(tmp_path / "new")
    with pytest.raises(lance_format.InvalidInputError, match="absolute"):  # pylance would resolve it per reader
        lance_format.write_dataset(_table([1]), str(tmp_path / "rel"),
                                   initial_bases=[lance_format.DatasetBasePath("relative/dir", name="r")])
    assert lance_format.dataset(uri).version == lance.dataset(uri).version == 7  # nothing was committed
    # pylance's own tests (and some users) read the bases through the private native handle
    ours, theirs = lance_format.dataset(uri)._ds.base_paths(), lance.dataset(uri)._ds.base_paths()
    assert {i: (b.name, b.is_dataset_root) for i, b in ours.items()} == {
        i: (b.name, b.is_dataset_root) for i, b in theirs.items()}


@pytest.mark.parametrize("cleaner", [lance_format, lance], ids=["ours", "pylance"])
def test_cleanup_keeps_what_a_table_sharing_the_base_references(tmp_path, cleaner):
    """Two tables write into one shared base folder; one overwrites and cleans up everything it
    can: the other's files (and its own old ones in the base, like pylance) stay."""
    shared = lance_format.DatasetBasePath(str(tmp_path / "shared"), name="shared")
    first, second = str(tmp_path / "first"), str(tmp_path / "second")
    lance_format.write_dataset(_table([1, 2]), first, initial_bases=[shared], target_bases=["shared"])
    lance.write_dataset(_table([3, 4]), second, initial_bases=[lance.DatasetBasePath(shared.path, name="shared")],
                        target_bases=["shared"])
    lance_format.write_dataset(_table([5]), first, mode="append", target_bases=["shared"])
    in_base = sorted(os.listdir(shared.path))
    assert len(in_base) == 3
    lance_format.write_dataset(_table([9]), first, mode="overwrite")
    time.sleep(0.05)
    stats = cleaner.dataset(first).cleanup_old_versions(older_than=timedelta(0), delete_unverified=True)
    assert stats.old_versions == 2 and stats.data_files_removed == 0
    assert sorted(os.listdir(shared.path)) == in_base
    assert sorted(lance.dataset(second).to_table()["id"].to_pylist()) == [3, 4]
    assert_same_table(second)
    assert_same_table(first)


def test_a_write_that_fails_to_commit_leaves_nothing_in_the_bases(tmp_path, monkeypatch):
    uri = _bases_history(lance_format, tmp_path, "t")
    before = sorted(str(p) for p in tmp_path.rglob("*.lance"))
    module = __import__("sys").modules["lance_format.dataset.writing.write_dataset"]

    def refuse(*args, **kwargs):
        raise lance_format.CommitConflictError("simulated conflict")

    monkeypatch.setattr(module, "commit_transaction", refuse)
    with pytest.raises(lance_format.CommitConflictError):
        lance_format.write_dataset(_table(list(range(9))), uri, mode="append", target_all_bases=True,
                                   max_rows_per_file=2)
    assert sorted(str(p) for p in tmp_path.rglob("*.lance")) == before
