"""Change data feed, ``get_changes()``: checked against full snapshots, pruning, batching.

The oracle here is independent of the engine: for every version it scans the previous and the
current version in full with pylance (``_rowid`` and lineage columns included) and derives the
inserts, deletes and updates (with pre-images) by comparing row-id sets, lineage and values.
"""

from __future__ import annotations

from datetime import datetime

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_format
from lance_format.dataset import fragment_reading as fragment_module
from lance_format.dataset.changes import plan as delta_plan
from lance_format.dataset.fragment import LanceFragment
from lance_format.errors import CorruptFileError
from lance_format.file.reader import LanceFileReader
from tests.engine.dataset.test_delta import STORAGE_VERSIONS, build_history

LINEAGE = ["_rowid", "_row_created_at_version", "_row_last_updated_at_version"]
SORT_KEYS = [("_commit_version", "ascending"), ("_change_type", "ascending"), ("_rowid", "ascending")]


@pytest.fixture(scope="module", params=STORAGE_VERSIONS)
def history(request, tmp_path_factory) -> tuple[str, int]:
    uri = str(tmp_path_factory.mktemp(f"changes_{request.param}") / "t.lance")
    return uri, build_history(uri, request.param)


# -- the independent oracle --------------------------------------------------------------------
def _snapshot(uri: str, version: int) -> pa.Table | None:
    if version == 0:
        return None
    ds = lance.dataset(uri, version=version)
    return ds.to_table(columns=ds.schema.names + LINEAGE)


def _project(table: pa.Table, rows: np.ndarray, out: pa.Schema, change: str, version: int) -> pa.Table:
    picked = table.take(pa.array(rows, pa.int64()))
    arrays = [
        picked.column(f.name) if f.name in picked.column_names else pa.nulls(len(rows), f.type) for f in out
    ]
    arrays += [picked.column(n) for n in LINEAGE]
    arrays += [pa.array([change] * len(rows), pa.string()), pa.array([version] * len(rows), pa.uint64())]
    names = out.names + LINEAGE + ["_change_type", "_commit_version"]
    return pa.Table.from_arrays(arrays, names=names)


def expected_changes(uri: str, version: int, out: pa.Schema) -> pa.Table:
    """The changes of one commit, from full scans of the version before and the version itself."""
    old, new = _snapshot(uri, version - 1), _snapshot(uri, version)
    operation = type(lance.dataset(uri, version=version).read_transaction(version).operation).__name__
    old_ids = old["_rowid"].to_numpy() if old is not None else np.empty(0, np.uint64)
    new_ids = new["_rowid"].to_numpy()
    parts = []
    if operation == "Overwrite":
        if old is not None:
            parts.append(_project(old, np.arange(old.num_rows), out, "delete", version))
        parts.append(_project(new, np.arange(new.num_rows), out, "insert", version))
    else:
        deleted = np.flatnonzero(~np.isin(old_ids, new_ids))
        inserted = np.flatnonzero(~np.isin(new_ids, old_ids))
        _, oi, ni = np.intersect1d(old_ids, new_ids, return_indices=True)
        old_lu = old["_row_last_updated_at_version"].to_numpy()[oi] if old is not None else np.empty(0)
        updated = old_lu != new["_row_last_updated_at_version"].to_numpy()[ni]
        # Rows whose lineage did not change must have kept every value they had.
        common = [n for n in new.schema.names if old is not None and n in old.column_names and n not in LINEAGE]
        for name in common:
            before = old[name].take(pa.array(oi[~updated]))
            after = new[name].take(pa.array(ni[~updated]))
            assert before.equals(after), f"v{version}: column {name} changed without a lineage update"
        if old is not None:
            parts.append(_project(old, deleted, out, "delete", version))
            parts.append(_project(old, oi[updated], out, "update_preimage", version))
        parts.append(_project(new, ni[updated], out, "update_postimage", version))
        parts.append(_project(new, inserted, out, "insert", version))
    return pa.concat_tables(parts)


def _ours(uri: str, begin: int, end: int, **kwargs) -> pa.Table:
    return lance_format.dataset(uri).delta(begin_version=begin, end_version=end).get_changes(**kwargs).read_all()


def _check(ours: pa.Table, expected: pa.Table, context: str) -> None:
    ours = ours.drop_columns(["_commit_timestamp"]).sort_by(SORT_KEYS)
    expected = expected.cast(ours.schema).sort_by(SORT_KEYS)
    assert ours.num_rows == expected.num_rows, f"{context}: {ours.to_pydict()} != {expected.to_pydict()}"
    assert ours.equals(expected), f"{context}:\nours={ours.to_pydict()}\nexpected={expected.to_pydict()}"


# -- correctness -------------------------------------------------------------------------------
def test_each_version_matches_snapshot_diff(history):
    uri, latest = history
    for version in range(1, latest + 1):
        out = lance.dataset(uri, version=version).schema
        _check(_ours(uri, version - 1, version), expected_changes(uri, version, out), f"v{version}")


def test_whole_history_in_one_stream(history):
    uri, latest = history
    out = lance.dataset(uri, version=latest).schema
    expected = pa.concat_tables([expected_changes(uri, v, out) for v in range(1, latest + 1)])
    ours = _ours(uri, 0, latest)
    _check(ours, expected, "(0, latest]")
    # Versions ascend through the stream; each version's changes are contiguous.
    versions = ours["_commit_version"].to_numpy()
    assert np.all(np.diff(versions.astype(np.int64)) >= 0)


def test_sub_ranges_and_column_selection(history):
    uri, latest = history
    for begin, end in ((2, 5), (7, 13), (12, 16)):
        out = lance.dataset(uri, version=end).schema
        columns = ["v", "id"]
        selected = pa.schema([out.field(n) for n in columns])
        expected = pa.concat_tables([expected_changes(uri, v, selected) for v in range(begin + 1, end + 1)])
        _check(_ours(uri, begin, end, columns=columns), expected, f"({begin}, {end}] columns")
    # No data columns at all: lineage and change columns only, the same rows.
    bare = _ours(uri, 0, latest, columns=[])
    assert bare.column_names[0] == "_rowid" and bare.num_rows == _ours(uri, 0, latest).num_rows


def test_preimages_carry_old_values(history):
    uri, _ = history
    changes = _ours(uri, 2, 3)
    pre = changes.filter(pc.equal(changes["_change_type"], "update_preimage"))
    post = changes.filter(pc.equal(changes["_change_type"], "update_postimage"))
    assert pre["_rowid"].equals(post["_rowid"])  # pre/post pair up row by row
    assert set(post["v"].to_pylist()) == {"upd"}
    assert "upd" not in pre["v"].to_pylist()
    assert pre["_row_last_updated_at_version"].to_pylist() != post["_row_last_updated_at_version"].to_pylist()
    deleted = _ours(uri, 3, 4)
    assert deleted["_change_type"].to_pylist() == ["delete", "delete"]
    assert sorted(deleted["id"].to_pylist()) == [2, 101]


def test_data_preserving_versions_have_no_changes(history):
    uri, _ = history
    # 6-7 compaction, 10 index, 11 config, 14 drop_columns
    for begin, end in ((5, 7), (9, 11), (13, 14)):
        assert _ours(uri, begin, end).num_rows == 0, (begin, end)


def test_add_columns_is_an_update_of_every_row(history):
    # pylance stamps every row's _row_last_updated_at_version on add_columns (its own
    # get_updated_rows reports them), so the feed shows pre-images without the new column.
    uri, _ = history
    changes = _ours(uri, 7, 8)
    pre = changes.filter(pc.equal(changes["_change_type"], "update_preimage"))
    post = changes.filter(pc.equal(changes["_change_type"], "update_postimage"))
    assert pre.num_rows == post.num_rows == lance.dataset(uri, version=7).count_rows()
    assert pre["x"].null_count == pre.num_rows
    assert post["x"].to_pylist() == [i * 2 for i in post["id"].to_pylist()]
    theirs = lance.dataset(uri, version=8).delta(begin_version=7, end_version=8).get_updated_rows().read_all()
    assert sorted(theirs["_rowid"].to_pylist()) == sorted(post["_rowid"].to_pylist())


def test_commit_version_and_timestamp(history):
    uri, latest = history
    ours = _ours(uri, 0, latest)
    stamps = {v["version"]: v["timestamp"] for v in lance.dataset(uri).versions()}
    for version, stamp in zip(ours["_commit_version"].to_pylist(), ours["_commit_timestamp"].to_pylist()):
        local = datetime.fromtimestamp(stamp.timestamp())
        assert abs((local - stamps[version]).total_seconds()) < 1e-3


def test_batches_are_bounded_and_pairs_aligned(history):
    uri, latest = history
    reader = lance_format.dataset(uri).delta(begin_version=0, end_version=latest).get_changes(batch_size=3)
    batches = list(reader)
    assert batches and all(b.num_rows <= 3 for b in batches)
    for pre, post in zip(batches, batches[1:]):
        kinds = set(pre["_change_type"].to_pylist())
        if kinds == {"update_preimage"}:
            assert set(post["_change_type"].to_pylist()) == {"update_postimage"}
            assert pre["_rowid"].equals(post["_rowid"])
    default = _ours(uri, 0, latest)
    _check(pa.Table.from_batches(batches), default.drop_columns(["_commit_timestamp"]), "batch_size=3 vs default")


def test_change_feed_argument_errors(history):
    uri, latest = history
    delta = lance_format.dataset(uri).delta(begin_version=0, end_version=latest)
    with pytest.raises(lance_format.InvalidInputError, match="unknown column 'nope'"):
        delta.get_changes(columns=["nope"])
    with pytest.raises(lance_format.InvalidInputError, match="batch_size"):
        delta.get_changes(batch_size=0)
    empty = lance_format.dataset(uri).delta(begin_version=0, end_version=0).get_changes().read_all()
    assert empty.num_rows == 0 and "_change_type" in empty.column_names


# -- pruning -----------------------------------------------------------------------------------
@pytest.fixture()
def wide_table(tmp_path) -> str:
    """10 fragments of 100 rows; v2 deletes one row of fragment 3, v3 updates one row of
    fragment 7, v4 appends a fragment, v5/v6 compact."""
    uri = str(tmp_path / "wide.lance")
    table = pa.table({"id": pa.array(range(1000), pa.int64()), "v": pa.array(np.arange(1000) * 1.5)})
    lance.write_dataset(table, uri, data_storage_version="2.0", enable_stable_row_ids=True, max_rows_per_file=100)
    lance.dataset(uri).delete("id = 342")
    lance.dataset(uri).update({"v": "-1.0"}, where="id = 777")
    lance.write_dataset(
        pa.table({"id": pa.array([5000], pa.int64()), "v": pa.array([0.5])}), uri, mode="append"
    )
    lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=100_000)
    return uri


@pytest.fixture()
def io_log(monkeypatch):
    """Record data-file opens, physical takes, range reads and deletion-file reads."""
    log = {"files": [], "takes": [], "ranges": [], "deletions": []}
    original_init = LanceFileReader.__init__
    original_take = LanceFragment.take_physical
    original_read = LanceFragment.read_batches
    original_deletions = fragment_module.read_deletion_file

    def init(self, store, path, **kwargs):
        log["files"].append(path)
        original_init(self, store, path, **kwargs)

    def take(self, schema, system, offsets):
        log["takes"].append((self.fragment_id, list(map(int, offsets))))
        return original_take(self, schema, system, offsets)

    def read(self, *args, **kwargs):
        log["ranges"].append(self.fragment_id)
        return original_read(self, *args, **kwargs)

    def deletions(store, fragment_id, deletion_file):
        log["deletions"].append(fragment_id)
        return original_deletions(store, fragment_id, deletion_file)

    monkeypatch.setattr(LanceFileReader, "__init__", init)
    monkeypatch.setattr(LanceFragment, "take_physical", take)
    monkeypatch.setattr(LanceFragment, "read_batches", read)
    monkeypatch.setattr(fragment_module, "read_deletion_file", deletions)
    return log


def test_delete_reads_only_the_deleted_row(wide_table, io_log):
    changes = _ours(wide_table, 1, 2)
    assert changes["id"].to_pylist() == [342] and changes["_change_type"].to_pylist() == ["delete"]
    assert io_log["takes"] == [(3, [42])]  # one take of the newly deleted offset, no scan
    assert len(io_log["files"]) == 1 and not io_log["ranges"]
    assert io_log["deletions"] == [3]  # only the changed fragment's new deletion file


def test_update_reads_only_the_changed_rows(wide_table, io_log):
    changes = _ours(wide_table, 2, 3)
    assert changes["_change_type"].to_pylist() == ["update_preimage", "update_postimage"]
    assert changes["v"].to_pylist() == [777 * 1.5, -1.0]
    assert sorted(io_log["takes"]) == [(7, [77]), (10, [0])]
    assert len(io_log["files"]) == 2 and not io_log["ranges"]
    assert sorted(io_log["deletions"]) == [7]


def test_append_and_compaction_prune(wide_table, io_log):
    delta = lance_format.dataset(wide_table).delta(begin_version=3, end_version=6)
    changes = delta.get_changes().read_all()
    assert changes["id"].to_pylist() == [5000] and changes["_commit_version"].to_pylist() == [4]
    assert io_log["takes"] == [(11, [0])]  # the appended fragment only; compaction read nothing
    assert len(io_log["files"]) == 1 and io_log["deletions"] == []


def test_lineage_methods_prune(wide_table, io_log):
    ds = lance_format.dataset(wide_table, version=4)
    inserted = ds.delta(begin_version=3, end_version=4).get_inserted_rows().read_all()
    assert inserted["id"].to_pylist() == [5000]
    assert io_log["takes"] == [(11, [0])]
    assert len(io_log["files"]) == 1 and io_log["deletions"] == []
    io_log["takes"].clear()
    updated = ds.delta(begin_version=2, end_version=3).get_updated_rows().read_all()
    assert updated["id"].to_pylist() == [777] and io_log["takes"] == [(10, [0])]


def test_deleted_ids_read_no_data(wide_table, io_log):
    ds = lance_format.dataset(wide_table)
    assert ds.delta(begin_version=1, end_version=6).get_deleted_row_ids().read_all()["_rowid"].to_pylist() == [342]
    assert io_log["files"] == [] and io_log["takes"] == [] and not io_log["ranges"]


def test_untouched_fragments_are_decided_from_metadata(wide_table, monkeypatch):
    # Fragments whose descriptors are equal never reach the row-id or deletion readers.
    seen = []
    original = delta_plan._rows

    def rows(index, fragment, *args, **kwargs):
        seen.append(fragment.fragment_id)
        return original(index, fragment, *args, **kwargs)

    monkeypatch.setattr(delta_plan, "_rows", rows)
    _ours(wide_table, 1, 2)
    assert set(seen) == {3}


# -- randomized histories ----------------------------------------------------------------------
def _random_history(uri: str, seed: int, storage_version: str) -> int:
    rng = np.random.default_rng(seed)
    next_id = 40
    table = pa.table({"id": pa.array(range(next_id), pa.int64()), "s": [f"r{i}" for i in range(next_id)]})
    lance.write_dataset(
        table, uri, data_storage_version=storage_version, enable_stable_row_ids=True, max_rows_per_file=8
    )
    for step in range(12):
        ds = lance.dataset(uri)
        kind = rng.choice(["append", "update", "delete", "merge", "compact"], p=[0.2, 0.25, 0.2, 0.25, 0.1])
        lo = int(rng.integers(0, next_id))
        hi = lo + int(rng.integers(1, 12))
        if kind == "append":
            n = int(rng.integers(1, 10))
            ids = pa.array(range(next_id, next_id + n), pa.int64())
            lance.write_dataset(pa.table({"id": ids, "s": [f"a{step}"] * n}), uri, mode="append", max_rows_per_file=8)
            next_id += n
        elif kind == "update":
            ds.update({"s": f"'u{step}'"}, where=f"id >= {lo} AND id < {hi}")
        elif kind == "delete":
            ds.delete(f"id >= {lo} AND id < {hi}")
        elif kind == "merge":
            ids = [lo, lo + 1, next_id]
            next_id += 1
            source = pa.table({"id": pa.array(ids, pa.int64()), "s": [f"m{step}"] * 3})
            builder = ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
            if rng.random() < 0.5:
                builder = builder.when_not_matched_by_source_delete(f"id >= {hi} AND id < {hi + 3}")
            builder.execute(source)
        else:
            ds.optimize.compact_files(target_rows_per_fragment=20)
    return lance.dataset(uri).version


@pytest.mark.parametrize("storage_version", STORAGE_VERSIONS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_histories(tmp_path, seed, storage_version):
    uri = str(tmp_path / "r.lance")
    latest = _random_history(uri, seed, storage_version)
    out = lance.dataset(uri).schema
    expected = []
    for version in range(1, latest + 1):
        exp = expected_changes(uri, version, out)
        expected.append(exp)
        _check(_ours(uri, version - 1, version), exp, f"seed {seed} v{version}")
    _check(_ours(uri, 0, latest), pa.concat_tables(expected), f"seed {seed} whole history")
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    for begin in range(0, latest, 3):
        a = ours.delta(begin_version=begin, end_version=latest)
        b = theirs.delta(begin_version=begin, end_version=latest)
        for method in ("get_inserted_rows", "get_updated_rows", "get_deleted_row_ids"):
            assert getattr(a, method)().read_all().equals(getattr(b, method)().read_all()), (seed, begin, method)


def test_fragment_at_shares_objects_with_get_fragments(wide_table):
    ds = lance_format.dataset(wide_table, version=1)
    first = ds.fragment_at(2)
    assert ds.get_fragments()[2] is first and ds.fragment_at(2) is first
    other = lance_format.dataset(wide_table, version=1)
    listed = other.get_fragments()
    assert other.fragment_at(1) is listed[1] and listed[1].fragment_id == ds.get_fragments()[1].fragment_id


def test_corrupt_lineage_sequence_names_the_fragment(wide_table):
    ds = lance_format.dataset(wide_table, version=1)
    ds.manifest.fragments[4].inline_last_updated_at_versions = b"\xff\xff\xff"  # not a protobuf
    with pytest.raises(CorruptFileError, match="fragment 4: invalid last_updated_at version sequence") as info:
        delta_plan.lineage_candidates(ds, 0)
    assert info.value.table == ds.uri and info.value.version == 1
    with pytest.raises(CorruptFileError, match="fragment 4: invalid last_updated_at"):
        delta_plan.lineage_offsets(ds.fragment_at(4), 0, 1, False)
