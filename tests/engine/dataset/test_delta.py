"""Change data feed, pylance-compatible part: ``delta()`` agrees with pylance on real histories.

The history is written by pylance (append, update, delete, merge_insert with delete-by-source,
compaction, add_columns, index creation, config update, whole-fragment delete, drop_columns,
restore, overwrite) and every method is compared for every version range and two base versions.
"""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format import InvalidInputError, VersionNotFoundError
from lance_format.dataset import fragment_reading as _fragment
from lance_format.io import object_store_for
from lance_format.table.naming import list_versions
from tests.compat import assert_tables_equal
from tests.type_matrix import type_matrix

# File versions the histories are written with: 2.0, plus pylance's default 2.2 wherever this
# build's fragment reader supports it.
STORAGE_VERSIONS = ["2.0"] + (["2.2"] if (2, 2) in _fragment._SUPPORTED_FILE_VERSIONS else [])


def build_history(uri: str, storage_version: str) -> int:
    """Write the reference history with pylance; returns its latest version (17)."""
    n = 30
    table = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "v": [f"s{i}" if i % 7 else None for i in range(n)],
            "f": pa.array(np.arange(n) * 0.5),
        }
    )

    def rows(ids, v, f=0.0, x=None):
        cols = {"id": pa.array(ids, pa.int64()), "v": [v] * len(ids), "f": pa.array([f] * len(ids))}
        if x is not None:
            cols["x"] = pa.array([x] * len(ids), pa.int64())
        return pa.table(cols)

    lance.write_dataset(
        table, uri, data_storage_version=storage_version, enable_stable_row_ids=True, max_rows_per_file=10
    )  # v1
    lance.write_dataset(rows(range(100, 105), "a", 1.0), uri, mode="append")  # v2
    lance.dataset(uri).update({"v": "'upd'"}, where="id % 4 = 1")  # v3
    lance.dataset(uri).delete("id = 2 or id = 101")  # v4
    source = pa.table(
        {"id": pa.array([3, 12, 200, 201], pa.int64()), "v": ["m3", "m12", "m200", "m201"], "f": pa.array([9.0] * 4)}
    )
    (
        lance.dataset(uri)
        .merge_insert("id")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .when_not_matched_by_source_delete("id >= 20 AND id < 23")
        .execute(source)
    )  # v5
    lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=1000)  # v6 ReserveFragments, v7 Rewrite
    lance.dataset(uri).add_columns({"x": "id * 2"})  # v8 Merge
    lance.dataset(uri).update({"x": "-1"}, where="id < 5")  # v9
    lance.dataset(uri).create_scalar_index("id", "BTREE")  # v10
    lance.dataset(uri).update_config({"k": "v"})  # v11
    lance.write_dataset(rows(range(300, 320), "n", 2.0, 0), uri, mode="append", max_rows_per_file=10)  # v12
    lance.dataset(uri).delete("id >= 300 AND id < 310")  # v13: a whole fragment goes
    lance.dataset(uri).drop_columns(["f"])  # v14 Project
    lance.dataset(uri, version=9).restore()  # v15
    lance.write_dataset(rows([1, 2], "o", 0.0, 1), uri, mode="overwrite")  # v16
    lance.write_dataset(rows([3], "o3", 0.0, 1), uri, mode="append")  # v17
    return lance.dataset(uri).version


@pytest.fixture(scope="module", params=STORAGE_VERSIONS)
def history(request, tmp_path_factory) -> tuple[str, int]:
    uri = str(tmp_path_factory.mktemp(f"delta_{request.param}") / "t.lance")
    return uri, build_history(uri, request.param)


def _same(ours: pa.Table, theirs: pa.Table, context: str) -> None:
    assert ours.schema.equals(theirs.schema, check_metadata=True), f"{context}\n{ours.schema}\n!=\n{theirs.schema}"
    assert ours.equals(theirs), f"{context}\nours={ours.to_pydict()}\ntheirs={theirs.to_pydict()}"


def _compare_range(uri: str, base: int, begin: int, end: int) -> None:
    ours = lance_format.dataset(uri, version=base).delta(begin_version=begin, end_version=end)
    theirs = lance.dataset(uri, version=base).delta(begin_version=begin, end_version=end)
    context = f"base v{base}, range ({begin}, {end}]"
    for method in ("get_inserted_rows", "get_updated_rows", "get_deleted_row_ids"):
        _same(getattr(ours, method)().read_all(), getattr(theirs, method)().read_all(), f"{method} {context}")
    ours_txns, theirs_txns = ours.list_transactions(), theirs.list_transactions()
    assert [t.uuid for t in ours_txns] == [t.uuid for t in theirs_txns], context
    assert [t.read_version for t in ours_txns] == [t.read_version for t in theirs_txns], context


def test_consecutive_versions_match_pylance(history):
    uri, latest = history
    for base in (latest, 9):
        for begin in range(0, latest):
            _compare_range(uri, base, begin, begin + 1)


def test_wide_ranges_match_pylance(history):
    uri, latest = history
    for base in (latest, 13):
        for begin in range(0, latest, 2):
            for end in range(begin + 2, latest + 1, 3):
                _compare_range(uri, base, begin, end)


def test_compared_against_matches_pylance(history):
    uri, latest = history
    for base, other in ((latest, 4), (5, 12), (9, 9)):
        ours = lance_format.dataset(uri, version=base).delta(compared_against=other)
        theirs = lance.dataset(uri, version=base).delta(compared_against=other)
        assert (ours.begin_version, ours.end_version) == (min(base, other), max(base, other))
        for method in ("get_inserted_rows", "get_updated_rows", "get_deleted_row_ids"):
            _same(getattr(ours, method)().read_all(), getattr(theirs, method)().read_all(), f"{method} {base}/{other}")
    # pylance ignores explicit versions when compared_against is given
    delta = lance_format.dataset(uri, version=latest).delta(compared_against=3, begin_version=1, end_version=2)
    assert (delta.begin_version, delta.end_version) == (3, latest)


def test_transactions_of_each_version_like_pylance(history):
    uri, latest = history
    txns = lance_format.dataset(uri).delta(begin_version=5, end_version=8).list_transactions()
    theirs = lance.dataset(uri).delta(begin_version=5, end_version=8).list_transactions()
    assert [type(t.operation).__name__ for t in txns] == [type(t.operation).__name__ for t in theirs]
    assert [type(t.operation).__name__ for t in txns[1:]] == ["Rewrite", "Merge"]
    assert [(t.uuid, t.read_version) for t in txns] == [(t.uuid, t.read_version) for t in theirs]
    assert lance_format.dataset(uri).delta(begin_version=3, end_version=3).list_transactions() == []


def test_restore_and_compaction_deleted_ids(history):
    uri, _ = history
    ds = lance_format.dataset(uri)
    # Compaction moves rows: nothing deleted. Restore brings rows back: not deleted either.
    assert ds.delta(begin_version=5, end_version=8).get_deleted_row_ids().read_all().num_rows == 0
    restored = ds.delta(begin_version=9, end_version=15).get_deleted_row_ids().read_all()
    assert restored.num_rows == 0
    assert ds.delta(begin_version=12, end_version=13).get_deleted_row_ids().read_all().column(0).to_pylist() == list(
        lance.dataset(uri, version=12).to_table(filter="id >= 300 AND id < 310", with_row_id=True)["_rowid"].to_pylist()
    )


# -- failure paths -----------------------------------------------------------------------------
def test_argument_errors_like_pylance(history):
    uri, _ = history
    ds = lance_format.dataset(uri)
    with pytest.raises(InvalidInputError, match="Must specify either compared_against_version"):
        ds.delta()
    with pytest.raises(InvalidInputError, match="Must specify both"):
        ds.delta(begin_version=1)
    with pytest.raises(InvalidInputError, match="Must specify both"):
        ds.delta(end_version=1)
    with pytest.raises(ValueError):  # InvalidInputError is a ValueError, like pylance's
        ds.delta(begin_version=-1, end_version=2)
    with pytest.raises(InvalidInputError, match="integer"):
        ds.delta(begin_version="1", end_version=2)


def test_begin_after_end_is_refused(history):
    uri, _ = history
    delta = lance_format.dataset(uri).delta(begin_version=4, end_version=2)
    for method in ("get_inserted_rows", "get_updated_rows", "get_deleted_row_ids", "list_transactions", "get_changes"):
        with pytest.raises(InvalidInputError, match="begin version 4 is newer than end version 2"):
            getattr(delta, method)()


def test_missing_versions_are_refused(history):
    uri, latest = history
    ds = lance_format.dataset(uri)
    for begin, end in ((1, latest + 3), (latest + 1, latest + 2)):
        delta = ds.delta(begin_version=begin, end_version=end)
        for method in ("get_deleted_row_ids", "list_transactions", "get_changes"):
            with pytest.raises(VersionNotFoundError, match=r"Can not find version \d+"):
                getattr(delta, method)()
    # (0, missing]: the end must exist even though nothing is live at version 0
    with pytest.raises(VersionNotFoundError):
        ds.delta(begin_version=0, end_version=latest + 5).get_deleted_row_ids()


def test_cleaned_up_version_is_reported(tmp_path):
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"id": [1, 2]}), uri, data_storage_version="2.0", enable_stable_row_ids=True)
    lance.dataset(uri).delete("id = 1")
    lance.dataset(uri).delete("id = 2")
    # Remove version 2's manifest, as cleanup_old_versions would.
    (tmp_path / "t.lance" / list_versions(object_store_for(uri)).versions[2]).unlink()
    delta = lance_format.dataset(uri).delta(begin_version=1, end_version=3)
    with pytest.raises(VersionNotFoundError, match="Can not find version 2"):
        delta.list_transactions()
    with pytest.raises(VersionNotFoundError, match="Can not find version 2"):
        delta.get_changes()
    # The endpoints exist, so deleted ids (begin vs end) still work, as in pylance.
    assert delta.get_deleted_row_ids().read_all().column(0).to_pylist() == [0, 1]


def test_without_stable_row_ids(tmp_path):
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"id": pa.array(range(6), pa.int64())}), uri, data_storage_version="2.0")
    lance.write_dataset(pa.table({"id": pa.array([10], pa.int64())}), uri, mode="append")
    lance.dataset(uri).update({"id": "100"}, where="id = 1")
    lance.dataset(uri).delete("id = 2")
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    # Degraded like pylance: every row reads as created and updated at version 1.
    for begin, end in ((0, 1), (1, 2), (2, 3), (0, 4), (1, 4)):
        a, b = ours.delta(begin_version=begin, end_version=end), theirs.delta(begin_version=begin, end_version=end)
        for method in ("get_inserted_rows", "get_updated_rows"):
            _same(getattr(a, method)().read_all(), getattr(b, method)().read_all(), f"{method} ({begin}, {end}]")
    _same(
        ours.delta(begin_version=0, end_version=4).get_deleted_row_ids().read_all(),
        theirs.delta(begin_version=0, end_version=4).get_deleted_row_ids().read_all(),
        "deleted from version 0",
    )
    with pytest.raises(InvalidInputError, match="deleted row ids require stable row ids, version 1"):
        ours.delta(begin_version=1, end_version=4).get_deleted_row_ids()
    with pytest.raises(InvalidInputError, match="the change feed requires stable row ids"):
        ours.delta(begin_version=0, end_version=4).get_changes()


@pytest.mark.parametrize("storage_version", STORAGE_VERSIONS)
def test_every_type_and_schema_metadata(tmp_path, storage_version):
    uri = str(tmp_path / "types.lance")
    table = type_matrix(40).append_column("key", pa.array(range(40), pa.int64()))
    table = table.replace_schema_metadata({"owner": "cdf"})
    lance.write_dataset(
        table, uri, data_storage_version=storage_version, enable_stable_row_ids=True, max_rows_per_file=15
    )
    lance.dataset(uri).delete("key = 3 OR key = 20")
    lance.write_dataset(table.slice(0, 5), uri, mode="append")
    lance.dataset(uri).update({"int64": "int64 + 1"}, where="key < 10")
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    for begin in range(0, 4):
        a, b = ours.delta(begin_version=begin, end_version=4), theirs.delta(begin_version=begin, end_version=4)
        for method in ("get_inserted_rows", "get_updated_rows", "get_deleted_row_ids"):
            mine, official = getattr(a, method)().read_all(), getattr(b, method)().read_all()
            assert mine.schema.equals(official.schema, check_metadata=True), method
            assert_tables_equal(mine, official, f"{method} ({begin}, 4]")
    # Inserts of version 1 are the whole first snapshot, every type read through takes.
    changes = ours.delta(begin_version=0, end_version=1).get_changes().read_all()
    assert changes.schema.metadata == {b"owner": b"cdf"}
    snapshot = theirs.checkout_version(1).to_table(
        columns=table.column_names + ["_rowid", "_row_created_at_version", "_row_last_updated_at_version"]
    )
    assert_tables_equal(changes.drop_columns(["_change_type", "_commit_version", "_commit_timestamp"]), snapshot)


def test_delta_keeps_its_base_version_when_the_dataset_moves(tmp_path):
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(
        pa.table({"id": pa.array(range(4), pa.int64())}), uri, data_storage_version="2.0", enable_stable_row_ids=True
    )
    lance.write_dataset(pa.table({"id": pa.array([9], pa.int64())}), uri, mode="append")
    ds = lance_format.dataset(uri)
    delta = ds.delta(begin_version=1, end_version=2)
    if not hasattr(ds, "delete"):
        pytest.skip("this build has no LanceDataset.delete")
    ds.delete("id = 9")  # moves ds to version 3, where the inserted row is gone
    assert ds.version == 3
    assert delta.get_inserted_rows().read_all()["id"].to_pylist() == [9]
    assert ds.delta(begin_version=1, end_version=2).get_inserted_rows().read_all().num_rows == 0
