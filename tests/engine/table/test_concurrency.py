"""Concurrent writers: rebased where Lance rebases, retried where it retries, refused where the
rules say, and never a lost update. Several processes (including pylance) commit to one table
at the same time and every successful commit's effect is in the final table."""

from __future__ import annotations

import multiprocessing
import os

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import CommitConflictError
from lance_format.table.deletion import read_deletion_file
from tests.compat import assert_same_history

N = 40


def _table(uri: str, *, stable: bool = True, rows_per_file: int = N) -> None:
    t = pa.table({"id": pa.array(np.arange(N), pa.int64()), "x": pa.array(np.zeros(N, np.int64))})
    lance_format.write_dataset(t, uri, enable_stable_row_ids=stable, max_rows_per_file=rows_per_file)


def _ids(uri: str) -> list[int]:
    return sorted(lance_format.dataset(uri).to_table(columns=["id"]).column("id").to_pylist())


def test_overlapping_deletes_merge_their_deletion_vectors(tmp_path):
    uri = str(tmp_path / "t")
    _table(uri)
    a, b = lance_format.dataset(uri), lance_format.dataset(uri)  # both read version 1
    a.delete("id = 3")
    assert b.delete("id = 5 OR id = 6") == {"num_deleted_rows": 2}
    assert b.version == 3 and _ids(uri) == [i for i in range(N) if i not in (3, 5, 6)]
    fragment = lance_format.dataset(uri).get_fragments()[0].proto
    assert sorted(read_deletion_file(a.object_store, 0, fragment.deletion_file).tolist()) == [3, 5, 6]
    # rebased like Lance: re-stamped with the version it was applied to, deletion file named after it
    txn = lance_format.dataset(uri).read_transaction_message(3)
    assert txn.read_version == 2 and txn.delete.updated_fragments[0].deletion_file.read_version == 2
    assert os.path.exists(os.path.join(uri, "_transactions", f"2-{txn.uuid}.txn"))
    assert not [n for n in os.listdir(os.path.join(uri, "_transactions")) if n.startswith(f"1-{txn.uuid}")]
    assert_same_history(uri)


def test_update_and_delete_of_one_fragment_both_land(tmp_path):
    uri = str(tmp_path / "t")
    _table(uri)
    a, b, c = (lance_format.dataset(uri) for _ in range(3))
    a.update({"x": "x + 1"}, where="id < 5")
    b.delete("id >= 30")
    c.update({"x": "x + 10"}, where="id >= 10 AND id < 12")
    table = lance_format.dataset(uri).to_table(columns=["id", "x", "_rowid"]).sort_by("id")
    assert table.column("id").to_pylist() == list(range(30))
    assert table.column("x").to_pylist() == [1] * 5 + [0] * 5 + [10, 10] + [0] * 18
    assert table.column("_rowid").to_pylist() == list(range(30))
    assert_same_history(uri)


def test_same_row_conflicts_are_redone_on_the_latest_version(tmp_path):
    uri = str(tmp_path / "t")
    _table(uri)
    a, b = lance_format.dataset(uri), lance_format.dataset(uri)
    a.update({"x": "x + 1"}, where="id = 7")
    b.update({"x": "x + 1"}, where="id = 7")  # retried on version 2: no lost update
    assert lance_format.dataset(uri).to_table(filter="id = 7").column("x").to_pylist() == [2]
    c, d = lance_format.dataset(uri), lance_format.dataset(uri)
    c.delete("id = 8")
    assert d.delete("id = 8 OR id = 9") == {"num_deleted_rows": 1}  # redone: 8 was already gone
    assert 8 not in _ids(uri) and 9 not in _ids(uri)
    assert_same_history(uri)


def test_compaction_and_mutations_race(tmp_path):
    uri = str(tmp_path / "t")
    _table(uri, rows_per_file=10)
    stale = lance_format.dataset(uri)
    lance_format.dataset(uri).optimize.compact_files(target_rows_per_fragment=40)
    stale.delete("id = 1")  # its fragment was rewritten: the delete is redone on the new one
    assert 1 not in _ids(uri)
    again = lance_format.dataset(uri)
    compaction_base = lance_format.dataset(uri)
    again.delete("id >= 35")
    again.update({"x": "1"}, where="id = 2")
    compaction_base.delete("id = 20")
    with pytest.raises(CommitConflictError):  # a Rewrite is not redone automatically
        from lance_format.dataset.maintenance.compaction import compact_files

        stale_plan = lance_format.dataset(uri, version=4)
        compact_files(stale_plan, target_rows_per_fragment=10, materialize_deletions_threshold=0.0)
    assert_same_history(uri)


def test_schema_changes_and_appends_race(tmp_path):
    uri = str(tmp_path / "t")
    _table(uri)
    a, b, c = (lance_format.dataset(uri) for _ in range(3))
    lance_format.write_dataset(pa.table({"id": pa.array([100], pa.int64()), "x": pa.array([0])}), uri,
                               mode="append")
    a.add_columns({"y": "x + 1"})  # Merge after Append is retryable: redone, so the new row gets y too
    assert lance_format.dataset(uri).to_table(filter="id = 100").column("y").to_pylist() == [1]
    b.drop_columns(["x"])  # Project after Merge: redone on the latest schema
    assert lance_format.dataset(uri).schema.names == ["id", "y"]
    c.update_config({"k": "1"})
    assert lance_format.dataset(uri).config() == {"k": "1"}
    assert_same_history(uri)


# -- several processes ---------------------------------------------------------------------------
def _worker(args) -> list[tuple[str, int, int | None]]:
    uri, worker, engine_name, ops = args
    engine = lance if engine_name == "pylance" else lance_format
    done = []
    for i in range(ops):
        base = worker * 10 + i
        try:
            engine.write_dataset(pa.table({"id": pa.array([1000 + base], pa.int64()), "x": pa.array([0])}), uri,
                                 mode="append")
            done.append(("append", 1000 + base, None))
            engine.dataset(uri).delete(f"id = {base * 2 % N if worker % 2 else N - 1 - base}")
            done.append(("delete", base * 2 % N if worker % 2 else N - 1 - base, None))
            target = 200 + base
            engine.dataset(uri).update({"x": "x + 1"}, where=f"id = {target}")
            done.append(("update", target, None))
        except Exception as exc:  # noqa: BLE001 - reported to the parent
            done.append(("error", base, repr(exc)))
    if engine is lance_format:
        # Writers racing on one config key: Lance's rules make all but the first refuse.
        ds = lance_format.dataset(uri, version=1)
        try:
            ds.update_config({"owner": f"w{worker}"})
            done.append(("config", worker, ds.version))
        except CommitConflictError:
            done.append(("config-conflict", worker, None))
    return done


def test_processes_commit_concurrently_without_losing_anything(tmp_path):
    uri = str(tmp_path / "t")
    rows = pa.table({"id": pa.array(np.concatenate([np.arange(N), np.arange(200, 240)]), pa.int64()),
                     "x": pa.array(np.zeros(2 * N, np.int64))})
    lance_format.write_dataset(rows, uri, enable_stable_row_ids=True, max_rows_per_file=20)
    jobs = [(uri, w, "pylance" if w == 3 else "ours", 3) for w in range(4)]
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        results = pool.map(_worker, jobs)
    errors = [r for rs in results for r in rs if r[0] == "error"]
    assert not errors, errors
    ds = lance_format.dataset(uri)
    configs = [r for rs in results for r in rs if r[0].startswith("config")]
    winners = [r for r in configs if r[0] == "config"]
    assert len(configs) == 3 and len(winners) == 1, configs  # all built on version 1: one wins
    assert ds.config() == {"owner": f"w{winners[0][1]}"}
    assert ds.version == 1 + 4 * 3 * 3 + 1
    assert sorted(v["version"] for v in ds.versions()) == list(range(1, ds.version + 1))
    assert all(ds.read_transaction(v) is not None for v in range(1, ds.version + 1))
    table = ds.to_table(columns=["id", "x", "_rowid", "_row_created_at_version"]).sort_by("id")
    ids = table.column("id").to_pylist()
    for kind, key, _ in (r for rs in results for r in rs if not r[0].startswith("config")):
        if kind == "append":
            assert key in ids
        elif kind == "delete":
            assert key not in ids
        else:
            assert table.filter(pa.compute.equal(table.column("id"), key)).column("x").to_pylist() == [1]
    assert len(set(table.column("_rowid").to_pylist())) == table.num_rows
    updated = table.filter(pa.compute.greater_equal(table.column("id"), 200)).filter(
        pa.compute.less(pa.compute.field("id"), 240))
    assert updated.column("_rowid").to_pylist() == list(range(N, 2 * N))  # ids survived the updates
    assert set(updated.column("_row_created_at_version").to_pylist()) == {1}
    assert_same_history(uri)
