"""A writer killed with SIGKILL at any point never leaves a table that fails to open or shows a
partial version; ``cleanup_old_versions`` removes what the dead writer left behind.

Writers are forked from a preloaded fork server so each one starts in milliseconds. They die at
named points (the child wraps the engine function that reaches the point, :func:`_crash_at`),
half-way through writing a manifest (a patched ``put_if_not_exists``), and at random moments of
a busy loop.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
from datetime import timedelta

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.dataset.maintenance import compaction
from lance_format.dataset.mutations import base as mutation_base
from lance_format.io import ObjectStore
from lance_format.table import commit
from lance_format.table.deletion import deletion_file_path
from lance_format.table.manifest import read_manifest
from lance_format.table.naming import VERSIONS_DIR, list_versions
from lance_format.table.transaction import operation_name
from tests.compat import SYSTEM, assert_tables_equal

POINTS = [
    "mutation:after_data_files",
    "mutation:before_commit",
    "commit:after_transaction_file",
    "commit:before_publish",
    "manifest:half_written",
    "commit:after_publish",
    "compaction:after_reserve",
]
# Points after which the killed writer's version is visible.
PUBLISHED_POINTS = {"commit:after_publish", "compaction:after_reserve"}
OPS = ["delete", "update", "merge_insert", "add_columns", "append", "compact", "update_config", "restore"]


def _context():
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["lance_format", "pyarrow", "pyarrow.dataset", "numpy", "tests.engine.table.test_crash_safety"])
    return ctx


def _run_op(uri: str, op: str, i: int) -> None:
    ds = lance_format.dataset(uri)
    if op == "delete":
        ds.delete(f"id = {i}")
    elif op == "update":
        ds.update({"x": "x + 1"}, where=f"id < {i + 5}")
    elif op == "merge_insert":
        src = pa.table({"id": pa.array([i, 1000 + i], pa.int64()), "x": pa.array([-i, -i], pa.int64())})
        ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(src)
    elif op == "add_columns":
        ds.add_columns({f"c{i}": "x * 2"})
    elif op == "append":
        row = ds.to_table(limit=1)
        if row.num_rows:
            row = row.set_column(0, "id", pa.array([2000 + i], pa.int64()))
            lance_format.write_dataset(row, uri, mode="append")
    elif op == "compact":
        ds.optimize.compact_files(target_rows_per_fragment=1000, materialize_deletions_threshold=0.0)
    elif op == "update_config":
        ds.update_config({f"k{i}": "v"})
    elif op == "restore":
        ds.checkout_version(max(1, ds.version - 2)).restore()


def _half_written_manifests() -> None:
    """Make the next manifest publish die after writing half of the staging file."""
    original = ObjectStore.put_if_not_exists

    def dying(self, relative, data):
        full = self.full_path(relative)
        with open(f"{os.path.dirname(full)}/.tmp_{os.path.basename(full)}_crash", "wb") as f:
            f.write(data[: len(data) // 2])
        os.kill(os.getpid(), signal.SIGKILL)
        return original(self, relative, data)

    ObjectStore.put_if_not_exists = dying


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)  # no cleanup, no finally blocks


def _die_after(owner, name: str, when=lambda *args, **kwargs: True) -> None:
    """Make ``owner.name`` kill the process once it has returned (if ``when(*args)``)."""
    original = getattr(owner, name)

    def dying(*args, **kwargs):
        result = original(*args, **kwargs)
        if when(*args, **kwargs):
            _die()
        return result

    setattr(owner, name, dying)


def _die_before(owner, name: str) -> None:
    def dying(*args, **kwargs):
        _die()

    setattr(owner, name, dying)


def _die_around_manifest_publish(before: bool) -> None:
    """Die just before a manifest's put-if-not-exists, or just after it published one."""
    original = ObjectStore.put_if_not_exists

    def publishing(self, relative, data):
        manifest = relative.startswith(f"{VERSIONS_DIR}/") and relative.endswith(".manifest")
        if manifest and before:
            _die()
        published = original(self, relative, data)
        if manifest and published:
            _die()
        return published

    ObjectStore.put_if_not_exists = publishing


def _crash_at(point: str) -> None:
    """Kill this (child) process at ``point`` of the next write."""
    if point == "manifest:half_written":
        _half_written_manifests()
    elif point == "mutation:after_data_files":  # a mutation wrote its new data files
        _die_after(mutation_base, "write_fragment_files")
    elif point == "mutation:before_commit":  # prepared (data and deletion files), not committed
        _die_before(mutation_base, "commit_prepared")
    elif point == "commit:after_transaction_file":
        _die_after(commit._Commit, "write_transaction")
    elif point in ("commit:before_publish", "commit:after_publish"):
        _die_around_manifest_publish(before=point == "commit:before_publish")
    elif point == "compaction:after_reserve":  # ReserveFragments committed, the Rewrite not yet
        _die_after(compaction, "commit_transaction",
                   when=lambda store, txn, **kw: operation_name(txn) == "reserve_fragments")
    else:
        raise ValueError(f"unknown crash point {point!r}")


def _crash_child(uri: str, op: str, point: str, i: int) -> None:
    _crash_at(point)
    _run_op(uri, op, i)


def _busy_child(uri: str, seed: int) -> None:
    rng = random.Random(seed)
    for i in range(10_000):
        _run_op(uri, rng.choice(OPS), 100 + seed * 10_000 + i)


def _make_table(uri: str) -> None:
    t = pa.table({"id": pa.array(np.arange(30), pa.int64()), "x": pa.array(np.zeros(30, np.int64))})
    lance_format.write_dataset(t, uri, enable_stable_row_ids=True, max_rows_per_file=10)


def _check_consistent(uri: str) -> int:
    """Every committed version opens and reads fully, identically in both engines."""
    store = ObjectStore(uri)
    listing = list_versions(store)
    first = min(listing.versions)
    assert sorted(listing.versions) == list(range(first, listing.latest + 1)), "versions must stay contiguous"
    for version in sorted(listing.versions)[-3:]:
        ours = lance_format.dataset(uri, version=version)
        theirs = lance.dataset(uri, version=version)
        columns = theirs.schema.names + SYSTEM
        assert_tables_equal(ours.to_table(columns=columns), theirs.to_table(columns=columns), f"v{version}")
        assert ours.read_transaction() is not None
    return listing.latest


def _referenced(uri: str) -> set[str]:
    store = ObjectStore(uri)
    listing = list_versions(store)
    found = set(listing.versions.values())
    for path in listing.versions.values():
        m = read_manifest(store, path).manifest
        found.add(f"_transactions/{m.transaction_file}")
        for fragment in m.fragments:
            found.update(f"data/{f.path}" for f in fragment.files)
            if fragment.HasField("deletion_file"):
                found.add(deletion_file_path(fragment.id, fragment.deletion_file))
    return found


def _on_disk(uri: str) -> set[str]:
    files = set()
    for root, _dirs, names in os.walk(uri):
        for name in names:
            rel = os.path.relpath(os.path.join(root, name), uri)
            if not rel.startswith("_refs") and name != "latest_version_hint.json":
                files.add(rel)
    return files


def test_writer_killed_at_every_commit_point(tmp_path):
    ctx = _context()
    uri = str(tmp_path / "t")
    _make_table(uri)
    rng = random.Random(7)
    crashed = 0
    for n, point in enumerate(POINTS):
        forced = ["compact"] if point in ("commit:before_publish", "compaction:after_reserve") else []
        for op in rng.sample(OPS, 3) + forced:
            before = _check_consistent(uri)
            child = ctx.Process(target=_crash_child, args=(uri, op, point, n))
            child.start()
            child.join(60)
            assert child.exitcode in (0, -signal.SIGKILL), (op, point, child.exitcode)
            crashed += child.exitcode == -signal.SIGKILL
            after = _check_consistent(uri)
            if child.exitcode == 0:  # the operation did not pass that point (e.g. nothing to compact)
                assert after >= before, (op, point)
            else:  # killed: the version appears exactly when the manifest was published
                assert after == before + (point in PUBLISHED_POINTS), (op, point)
    assert crashed >= len(POINTS) * 2
    leftovers = _on_disk(uri) - _referenced(uri)
    assert leftovers, "the killed writers should have left unreferenced files"
    lance_format.dataset(uri).cleanup_old_versions(older_than=timedelta(0), delete_unverified=True)
    assert _on_disk(uri) == _referenced(uri)
    _check_consistent(uri)


def test_writer_killed_at_random_moments(tmp_path):
    ctx = _context()
    uri = str(tmp_path / "t")
    _make_table(uri)
    rng = random.Random(11)
    for round_ in range(6):
        before = _check_consistent(uri)
        child = ctx.Process(target=_busy_child, args=(uri, round_))
        child.start()
        time.sleep(rng.uniform(0.05, 0.6))
        child.kill()
        child.join(30)
        assert child.exitcode == -signal.SIGKILL, "the busy writer must not fail on its own"
        assert _check_consistent(uri) >= before
    stats = lance_format.dataset(uri).cleanup_old_versions(retain_versions=1, delete_unverified=True)
    assert stats.old_versions >= 0
    assert _on_disk(uri) == _referenced(uri)
    latest = lance_format.dataset(uri)
    assert latest.count_rows() == lance.dataset(uri).count_rows()


@pytest.mark.parametrize("point", ["commit:after_transaction_file", "manifest:half_written"])
def test_stale_staging_files_do_not_confuse_readers_or_writers(tmp_path, point):
    ctx = _context()
    uri = str(tmp_path / "t")
    _make_table(uri)
    child = ctx.Process(target=_crash_child, args=(uri, "delete", point, 3))
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL
    # both engines keep writing on top of the debris
    lance.dataset(uri).delete("id = 4")
    lance_format.dataset(uri).delete("id = 5")
    assert lance_format.dataset(uri).version == lance.dataset(uri).version == 3
    assert sorted(lance.dataset(uri).to_table().column("id").to_pylist()) == [i for i in range(30) if i not in (4, 5)]
