"""The commit protocol under concurrent writers: nothing lost, conflicts refused."""

from __future__ import annotations

import multiprocessing
import os

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import CommitConflictError
from lance_format.io import ObjectStore
from lance_format.proto import table_pb2
from lance_format.table.commit import commit_transaction
from lance_format.table.transaction import new_transaction


def _append(args) -> int:
    uri, value = args
    ds = lance_format.write_dataset(pa.table({"v": pa.array([value] * 3, pa.int64())}), uri, mode="append")
    return ds.version


def test_concurrent_appends_all_land(tmp_path):
    uri = str(tmp_path / "t")
    lance_format.write_dataset(pa.table({"v": pa.array([-1], pa.int64())}), uri, enable_stable_row_ids=True)
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        versions = pool.map(_append, [(uri, i) for i in range(12)])
    assert sorted(versions) == list(range(2, 14))
    theirs = lance.dataset(uri)
    values = theirs.to_table().column("v").to_pylist()
    assert sorted(values) == [-1] + sorted(list(range(12)) * 3)
    # stable row ids stay unique across the racing commits
    row_ids = theirs.to_table(with_row_id=True).column("_rowid").to_pylist()
    assert sorted(row_ids) == list(range(37))
    assert lance_format.dataset(uri).to_table(with_row_id=True).equals(theirs.to_table(with_row_id=True))


def _stale_append_txn(read_version: int) -> table_pb2.DataFragment:
    txn = new_transaction(read_version)
    txn.append.SetInParent()
    return txn


def test_append_over_concurrent_overwrite_is_refused(tmp_path):
    uri = str(tmp_path / "t")
    lance_format.write_dataset(pa.table({"v": [1]}), uri)
    lance_format.write_dataset(pa.table({"v": [2]}), uri, mode="overwrite")  # version 2, by "another writer"
    store = ObjectStore(uri)
    before = sorted(os.listdir(os.path.join(uri, "_versions")))
    with pytest.raises(CommitConflictError, match="conflicts with version 2"):
        commit_transaction(store, _stale_append_txn(read_version=1))
    assert sorted(os.listdir(os.path.join(uri, "_versions"))) == before


def test_append_over_concurrent_append_is_rebased(tmp_path):
    uri = str(tmp_path / "t")
    lance_format.write_dataset(pa.table({"v": [1]}), uri)
    lance_format.write_dataset(pa.table({"v": [2]}), uri, mode="append")
    committed = commit_transaction(ObjectStore(uri), _stale_append_txn(read_version=1))
    assert committed.version == 3
    assert lance.dataset(uri).to_table().column("v").to_pylist() == [1, 2]


def test_missing_transaction_counts_as_conflict(tmp_path):
    uri = str(tmp_path / "t")
    lance_format.write_dataset(pa.table({"v": [1]}), uri)
    lance_format.write_dataset(pa.table({"v": [2]}), uri, mode="append")
    # version 2's transaction disappears (inline section stripped and file removed)
    from lance_format.table.manifest import encode_manifest, read_manifest
    from lance_format.table.naming import list_versions

    store = ObjectStore(uri)
    path = list_versions(store).versions[2]
    mf = read_manifest(store, path)
    with open(os.path.join(uri, path), "wb") as f:
        f.write(encode_manifest(mf.manifest))
    os.remove(os.path.join(uri, "_transactions", mf.manifest.transaction_file))
    with pytest.raises(CommitConflictError, match="no readable transaction"):
        commit_transaction(store, _stale_append_txn(read_version=1))


def test_refused_commit_leaves_no_transaction_file(tmp_path):
    uri = str(tmp_path / "t")
    lance_format.write_dataset(pa.table({"v": [1]}), uri)
    lance_format.write_dataset(pa.table({"v": [2]}), uri, mode="overwrite")
    txns = sorted(os.listdir(os.path.join(uri, "_transactions")))
    with pytest.raises(CommitConflictError):
        commit_transaction(ObjectStore(uri), _stale_append_txn(read_version=1))
    assert sorted(os.listdir(os.path.join(uri, "_transactions"))) == txns
