"""``replace_where``: one-commit partition replacement, cross-checked with pylance."""

from __future__ import annotations

import os

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.dataset.mutations.replace_where import replace_where
from lance_format.errors import CommitConflictError, DatasetNotFoundError, InvalidInputError, SchemaMismatchError
from tests.compat import assert_same_history


def _table(day: str, n: int, start: int = 0) -> pa.Table:
    return pa.table({"day": [day] * n, "id": list(range(start, start + n))})


@pytest.mark.parametrize("stable", [True, False])
def test_replace_one_partition_in_one_update_commit(tmp_path, stable):
    uri = str(tmp_path / "t.lance")
    lance_format.write_dataset(pa.concat_tables([_table("a", 3), _table("b", 2, 10)]), uri,
                               enable_stable_row_ids=stable)
    lance_format.write_dataset(_table("a", 2, 20), uri, mode="append")  # partition a spans 2 fragments
    ds = replace_where(uri, "day = 'a'", _table("a", 4, 100), transaction_properties={"k": "v"})
    assert ds.version == 3
    theirs = lance.dataset(uri)
    assert sorted(theirs.to_table().column("id").to_pylist()) == [10, 11, 100, 101, 102, 103]
    txn = theirs.read_transaction(3)
    assert type(txn.operation).__name__ == "Update"
    assert txn.transaction_properties == {"k": "v"}
    # The fully replaced second fragment is removed; the first keeps b's rows behind a deletion file.
    assert [f.fragment_id for f in theirs.get_fragments()] == [0, 2]
    assert theirs.get_fragments()[0].count_rows() == 2
    assert_same_history(uri)
    if stable:
        rows = theirs.to_table(columns=["id", "_row_created_at_version"], filter="id >= 100")
        assert set(rows.column("_row_created_at_version").to_pylist()) == {3}


def test_no_matching_rows_is_an_append_and_missing_table_is_created(tmp_path):
    uri = str(tmp_path / "t.lance")
    ds = replace_where(uri, "day = 'a'", _table("a", 2), enable_stable_row_ids=True)
    assert ds.version == 1 and ds.has_stable_row_ids
    ds = replace_where(uri, "day = 'b'", _table("b", 1))
    assert type(lance.dataset(uri).read_transaction(2).operation).__name__ == "Append"
    assert ds.count_rows() == 3
    with pytest.raises(DatasetNotFoundError):
        replace_where(str(tmp_path / "none.lance"), "day = 'a'", _table("a", 1), create_if_missing=False)
    assert_same_history(uri)


def test_rows_outside_the_predicate_are_refused_and_leave_no_files(tmp_path):
    uri = str(tmp_path / "t.lance")
    lance_format.write_dataset(_table("a", 2), uri)
    before = sorted(os.listdir(os.path.join(uri, "data")))
    with pytest.raises(InvalidInputError, match="do not satisfy the replace predicate"):
        replace_where(uri, "day = 'a'", pa.concat_tables([_table("a", 1), _table("b", 1)]))
    assert sorted(os.listdir(os.path.join(uri, "data"))) == before
    assert not os.path.exists(os.path.join(uri, "_deletions"))
    assert lance.dataset(uri).version == 1
    ds = replace_where(uri, "day = 'a'", _table("b", 1), check_data=False)  # explicitly allowed
    assert ds.to_table().column("day").to_pylist() == ["b"]


def test_bad_inputs(tmp_path):
    uri = str(tmp_path / "t.lance")
    lance_format.write_dataset(_table("a", 2), uri)
    with pytest.raises(InvalidInputError, match="needs a predicate"):
        replace_where(uri, "  ", _table("a", 1))
    with pytest.raises(SchemaMismatchError):
        replace_where(uri, "day = 'a'", pa.table({"day": ["a"]}))
    with pytest.raises(InvalidInputError):
        replace_where(uri, "nope = 1", _table("a", 1))
    assert lance.dataset(uri).version == 1


def test_concurrent_overwrite_conflicts_and_concurrent_delete_is_rebased(tmp_path):
    uri = str(tmp_path / "t.lance")
    lance_format.write_dataset(pa.concat_tables([_table("a", 3), _table("b", 3, 10)]), uri,
                               enable_stable_row_ids=True)
    stale = lance_format.dataset(uri)
    lance_format.dataset(uri).delete("id = 10")  # other rows of the same fragment
    ds = replace_where(stale, "day = 'a'", _table("a", 1, 50))
    assert sorted(ds.to_table().column("id").to_pylist()) == [11, 12, 50]
    assert_same_history(uri)

    stale = lance_format.dataset(uri)
    lance_format.write_dataset(_table("z", 1), uri, mode="overwrite")
    with pytest.raises(CommitConflictError):
        replace_where(stale, "day = 'b'", _table("b", 1))
    assert lance.dataset(uri).to_table().column("day").to_pylist() == ["z"]
