"""Failure paths of the mutations: typed errors, no new version, no files left behind."""

from __future__ import annotations

import os
import shutil

import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import (
    CommitConflictError,
    CommitOptionError,
    DatasetNotFoundError,
    InvalidInputError,
    RetryableCommitConflictError,
    SchemaMismatchError,
    TagError,
    VersionNotFoundError,
)
from lance_format.io import ObjectStore
from lance_format.table.commit import commit_transaction
from lance_format.table.transaction import new_transaction
from tests.mutation_compat import base_table


def _files(uri: str) -> set[str]:
    found = set()
    for root, _dirs, names in os.walk(uri):
        for name in names:
            if name != "latest_version_hint.json":
                found.add(os.path.relpath(os.path.join(root, name), uri))
    return found


@pytest.fixture
def table(tmp_path):
    uri = str(tmp_path / "t")
    lance_format.write_dataset(base_table(20), uri, max_rows_per_file=8, enable_stable_row_ids=True)
    return uri


BAD_CALLS = {
    "delete syntax": (lambda ds: ds.delete("id = = 1"), InvalidInputError, "Invalid SQL"),
    "delete unknown column": (lambda ds: ds.delete("nope = 1"), InvalidInputError, "nope"),
    "delete non-boolean": (lambda ds: ds.delete("id + 1"), InvalidInputError, "boolean"),
    "update unknown column": (lambda ds: ds.update({"nope": "1"}), InvalidInputError, "does not exist"),
    "update bad cast": (lambda ds: ds.update({"x": "'abc'"}), InvalidInputError, "cannot cast"),
    "update unknown name": (lambda ds: ds.update({"x": "text"}), InvalidInputError, "text"),
    "merge bad condition": (lambda ds: ds.merge_insert("id").when_matched_update_all("target.nope > 1").execute(
        base_table(2)), InvalidInputError, "nope"),
    "update bad where": (lambda ds: ds.update({"x": "1"}, where="nope > 1"), InvalidInputError, "nope"),
    "update overflow": (lambda ds: ds.update({"x": "3000000000"}), InvalidInputError, "cast"),
    "update empty": (lambda ds: ds.update({}), InvalidInputError, "non-empty"),
    "merge key missing": (lambda ds: ds.merge_insert("nope"), InvalidInputError, "does not exist in schema"),
    "merge wrong type": (lambda ds: ds.merge_insert("id").when_matched_update_all().execute(
        pa.table({"id": pa.array([1], pa.int64()), "x": pa.array(["zz"])})), SchemaMismatchError, "type"),
    "merge castable type": (lambda ds: ds.merge_insert("id").when_matched_update_all().execute(
        pa.table({"id": pa.array([1], pa.int32())})), SchemaMismatchError, "int32"),
    "merge extra column": (lambda ds: ds.merge_insert("id").when_matched_update_all().execute(
        pa.table({"id": pa.array([1], pa.int64()), "zz": [1]})), SchemaMismatchError, "unexpected"),
    "merge source lacks key": (lambda ds: ds.merge_insert("id").when_matched_update_all().execute(
        pa.table({"x": pa.array([1], pa.int32())})), SchemaMismatchError, "key"),
    "merge duplicate keys": (lambda ds: ds.merge_insert("id").when_matched_update_all().execute(
        pa.table({"id": pa.array([3, 3], pa.int64())})), InvalidInputError, "Ambiguous"),
    "merge nothing to do": (lambda ds: ds.merge_insert("id").execute(base_table(1)), InvalidInputError,
                            "not configured"),
    "add existing column": (lambda ds: ds.add_columns({"x": "id"}), SchemaMismatchError, "Type conflicts between x"),
    "add too few rows": (lambda ds: ds.add_columns(pa.table({"r": pa.array(range(19))})), InvalidInputError,
                         "Stream ended"),
    "add too many rows": (lambda ds: ds.add_columns(pa.table({"r": pa.array(range(21))})), InvalidInputError,
                          "more values"),
    "add bad sql": (lambda ds: ds.add_columns({"r": "nope * 2"}), InvalidInputError, "nope"),
    "drop missing": (lambda ds: ds.drop_columns(["nope"]), InvalidInputError, "does not exist"),
    "drop all": (lambda ds: ds.drop_columns(["id", "v", "x", "tags", "st"]), InvalidInputError, "all columns"),
    "alter missing": (lambda ds: ds.alter_columns({"path": "nope", "name": "q"}), InvalidInputError,
                      "does not exist"),
    "alter bad cast": (lambda ds: ds.alter_columns({"path": "x", "data_type": pa.string()}), InvalidInputError,
                       "Cannot cast"),
    "alter rename clash": (lambda ds: ds.alter_columns({"path": "x", "name": "v"}), InvalidInputError, "exists"),
    "restore unknown tag": (lambda ds: ds.checkout_version("nope"), TagError, "nope"),
    "checkout missing version": (lambda ds: ds.checkout_version(99), VersionNotFoundError, "99"),
    # pylance 14 raises OSError (official Lance's test_cleanup_with_retain_versions expects it)
    "cleanup bad retain": (lambda ds: ds.cleanup_old_versions(retain_versions=0), CommitOptionError,
                           "retain_versions must be greater than 0, got 0"),
}


@pytest.mark.parametrize("name", sorted(BAD_CALLS))
def test_bad_calls_change_nothing(table, name):
    call, error, pattern = BAD_CALLS[name]
    ds = lance_format.dataset(table)
    before = _files(table)
    with pytest.raises(error, match=pattern) as info:
        call(ds)
    assert info.value.table is not None or error is TagError
    assert _files(table) == before, "a failed mutation must not leave files behind"
    assert lance_format.dataset(table).version == 1 and ds.version == 1


def test_non_nullable_column_refuses_nulls(tmp_path):
    uri = str(tmp_path / "t")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
    ds = lance_format.write_dataset(pa.table({"id": [1, 2], "v": ["a", None]}, schema=schema), uri)
    with pytest.raises(SchemaMismatchError, match="contained null values even though the field is marked non-null"):
        ds.update({"id": "NULL"})
    with pytest.raises(InvalidInputError, match="contains nulls"):
        ds.alter_columns({"path": "v", "nullable": False})
    with pytest.raises(SchemaMismatchError, match="non-nullable"):
        ds.merge_insert("v").when_not_matched_insert_all().execute(pa.table({"v": ["z"]}))
    assert ds.version == 1 and _files(uri) == _files(uri)


def test_lossy_cast_is_refused(tmp_path):
    uri = str(tmp_path / "t")
    ds = lance_format.write_dataset(pa.table({"id": pa.array([1, 300, -5], pa.int64())}), uri)
    before = _files(uri)
    with pytest.raises(InvalidInputError, match="cast") as info:
        ds.alter_columns({"path": "id", "data_type": pa.uint8()})
    assert info.value.table == ds.uri and info.value.column == "id"
    assert _files(uri) == before and lance_format.dataset(uri).version == 1


def test_missing_table(tmp_path):
    uri = str(tmp_path / "t")
    ds = lance_format.write_dataset(base_table(3), uri)
    with pytest.raises(DatasetNotFoundError):
        lance_format.dataset(str(tmp_path / "nothing"))
    shutil.rmtree(uri)
    for call in (lambda: ds.delete("id = 1"), lambda: ds.update({"x": "1"}),
                 lambda: ds.merge_insert("id").when_not_matched_insert_all().execute(base_table(1)),
                 lambda: ds.update_config({"a": "b"}), lambda: ds.restore()):
        with pytest.raises(DatasetNotFoundError):
            call()
    assert not os.path.exists(uri) or not os.listdir(os.path.join(uri, "_versions"))


def _stale(op: str, read_version: int):
    txn = new_transaction(read_version)
    if op == "update_config":
        entry = txn.update_config.config_updates.update_entries.add()
        entry.key, entry.value = "k", "mine"
    else:
        getattr(txn, op).SetInParent()
    return txn


@pytest.mark.parametrize("concurrent,ours,error", [
    ("overwrite", "delete", CommitConflictError),
    ("restore", "update", CommitConflictError),
    ("overwrite", "merge", CommitConflictError),
    ("append", "merge", RetryableCommitConflictError),
    ("drop", "project", RetryableCommitConflictError),
    ("config", "update_config", CommitConflictError),
])
def test_conflicting_writes_are_refused(table, concurrent, ours, error):
    ds = lance_format.dataset(table)
    if concurrent == "overwrite":
        lance_format.write_dataset(base_table(2), table, mode="overwrite")
    elif concurrent == "restore":
        ds.delete("id = 1")
        lance_format.dataset(table, version=1).restore()
    elif concurrent == "append":
        lance_format.write_dataset(base_table(2, 50), table, mode="append")
    elif concurrent == "drop":
        lance_format.dataset(table).drop_columns(["v"])
    else:
        lance_format.dataset(table).update_config({"k": "theirs"})
    latest = lance_format.dataset(table).version
    txns = set(os.listdir(os.path.join(table, "_transactions")))
    with pytest.raises(error) as info:
        commit_transaction(ObjectStore(table), _stale(ours, ds.version))
    assert info.type is error or error is CommitConflictError and not isinstance(info.value,
                                                                                RetryableCommitConflictError)
    assert lance_format.dataset(table).version == latest
    assert set(os.listdir(os.path.join(table, "_transactions"))) == txns
