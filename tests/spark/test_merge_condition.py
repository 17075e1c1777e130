"""Conditional updates in Spark merges (``when_matched_update_condition``) against pylance's
``merge_insert(...).when_matched_update_all(condition=...)`` on copies of the same table."""

from __future__ import annotations

import os
import shutil

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError
from lance_format.spark import merge_dataframe

from .helpers import data_files, deletion_files, lance_rows

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), False),
    pa.field("v", pa.int32()),
    pa.field("s", pa.string()),
    pa.field("ts", pa.timestamp("us")),
])
LINEAGE = ["_row_created_at_version", "_row_last_updated_at_version"]
DDL = "id long not null, v int, s string, ts timestamp_ntz"


def _frame(session, table: pa.Table):
    return session.createDataFrame(table, schema=DDL)


def _rows(ids, v, s, ts_days) -> pa.Table:
    ts = [None if d is None else 86_400_000_000 * d for d in ts_days]
    return pa.table([pa.array(ids, pa.int64()), pa.array(v, pa.int32()), pa.array(s, pa.string()),
                     pa.array(ts, pa.timestamp("us"))], schema=SCHEMA)


def _target() -> pa.Table:
    ids = list(range(30))
    return _rows(ids, [None if i % 7 == 3 else i for i in ids], [None if i % 5 == 1 else f"t{i}" for i in ids],
                 [None if i % 6 == 2 else i for i in ids])


def _source() -> pa.Table:
    ids = list(range(20, 40))  # 20..29 match, 30..39 are new
    return _rows(ids, [None if i % 4 == 0 else (i + 1 if i % 3 else i - 1) for i in ids],
                 [None if i % 5 == 2 else f"s{i}" for i in ids], [None if i % 6 == 5 else i + i % 2 for i in ids])


def _pair(tmp_path, stable: bool) -> tuple[str, str]:
    ours, theirs = str(tmp_path / "ours.lance"), str(tmp_path / "theirs.lance")
    lance_format.write_dataset(_target(), ours, max_rows_per_file=8, enable_stable_row_ids=stable)
    shutil.copytree(ours, theirs)
    return ours, theirs


def _pylance(uri: str, source: pa.Table, condition: str, delete: bool = False) -> dict:
    builder = lance.dataset(uri).merge_insert("id").when_matched_update_all(condition=condition)
    builder = builder.when_not_matched_insert_all()
    if delete:
        builder = builder.when_not_matched_by_source_delete()
    return builder.execute(source)


def _read(uri: str) -> list[dict]:
    return lance_rows(uri, columns=list(SCHEMA.names) + LINEAGE, with_row_id=True)


def _assert_same(ours: str, theirs: str, stable: bool, rewritten: set[int]) -> None:
    mine, reference = _read(ours), _read(theirs)
    assert [r["id"] for r in mine] == [r["id"] for r in reference]
    if stable:
        assert mine == reference  # values, stable row ids and both version columns
        return
    # Without stable row ids ``_rowid`` is the row address: rows left in place keep theirs;
    # rewritten rows land in new fragments, laid out per Spark task (not pylance's layout).
    for a, b in zip(mine, reference):
        if a["id"] in rewritten:
            a.pop("_rowid"), b.pop("_rowid")
        assert a == b


def _counts(result) -> dict:
    return {"num_inserted_rows": result.rows_inserted, "num_updated_rows": result.rows_updated,
            "num_deleted_rows": result.rows_deleted}


@pytest.mark.parametrize("stable", [False, True])
def test_conditional_merge_matches_pylance(spark, tmp_path, stable):
    ours, theirs = _pair(tmp_path, stable)
    source = _source()
    before = {r["id"]: r for r in _read(ours)}
    # NULL on either side makes the comparison NULL: those matched rows stay as they are
    condition = "source.v > target.v"
    result = merge_dataframe(_frame(spark, source), ours, "id", when_matched_update_condition=condition)
    expected = _pylance(theirs, source, condition)
    assert _counts(result) == expected
    assert 0 < result.rows_updated < 10 and result.rows_inserted == 10
    updated = {r["id"] for r in _read(ours) if r["id"] < 30 and r["v"] != before[r["id"]]["v"]}
    assert len(updated) == result.rows_updated
    _assert_same(ours, theirs, stable, updated | set(range(30, 40)))
    for row in _read(ours):  # matched rows the condition refused keep their identity and versions
        if row["id"] < 30 and row["id"] not in updated:
            assert row == before[row["id"]]

    # a condition over several columns (keys, strings, timestamps, IS NULL), with deletion of
    # the target rows missing from the source
    source = _source().slice(0, 15)
    condition = ("(target.s IS NULL OR source.s <> target.s) AND source.id % 2 = 0 "
                 "OR source.ts > target.ts AND target.v IS NULL")
    result = merge_dataframe(_frame(spark, source), ours, "id", when_not_matched_by_source="delete",
                             when_matched_update_condition=condition)
    expected = _pylance(theirs, source, condition, delete=True)
    assert _counts(result) == expected
    assert result.rows_updated > 0 and result.rows_deleted > 0
    _assert_same(ours, theirs, stable, set(range(20, 40)))
    assert lance.dataset(ours).version == lance.dataset(theirs).version == 3


def test_condition_reading_source_only_and_nothing_updated(spark, tmp_path):
    ours, theirs = _pair(tmp_path, True)
    source = _source()
    result = merge_dataframe(_frame(spark, source), ours, "id", when_matched_update_condition="source.v < 0",
                             when_not_matched="do_nothing")
    assert (result.rows_updated, result.rows_inserted, result.rows_deleted) == (0, 0, 0)
    # nothing to commit: no new version (pylance would commit an empty Update, so it is not asked)
    assert result.skipped and lance.dataset(ours).version == 1 and data_files(ours) == data_files(theirs)
    result = merge_dataframe(_frame(spark, source), ours, "id",
                             when_matched_update_condition="source.s IS NOT NULL AND TRUE")
    expected = _pylance(theirs, source, "source.s IS NOT NULL AND TRUE")
    assert _counts(result) == expected and result.rows_updated == 8
    assert _read(ours) == _read(theirs)


@pytest.mark.parametrize("condition, match", [
    ("source.nope > 1", "nope"),
    ("source.v >", "Invalid SQL"),
    ("v > 1", "Unknown column 'v'"),
    ("_rowid > 1", "source.<column>"),
    ("   ", "non-empty"),
])
def test_invalid_conditions_fail_before_any_file_is_written(spark, tmp_path, condition, match):
    uri = str(tmp_path / "t.lance")
    lance_format.write_dataset(_target(), uri)
    files = (data_files(uri), deletion_files(uri), set(os.listdir(os.path.join(uri, "_versions"))))
    with pytest.raises(InvalidInputError, match=match) as info:
        merge_dataframe(_frame(spark, _source()), uri, "id", when_matched_update_condition=condition)
    assert info.value.table is not None and uri.rstrip("/").split("/")[-1] in str(info.value)
    assert (data_files(uri), deletion_files(uri), set(os.listdir(os.path.join(uri, "_versions")))) == files


def test_condition_needs_update_all(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    lance_format.write_dataset(_target(), uri)
    with pytest.raises(InvalidInputError, match="update_all"):
        merge_dataframe(_frame(spark, _source()), uri, "id", when_matched="delete",
                        when_matched_update_condition="source.v > target.v")
    assert lance.dataset(uri).version == 1


def test_condition_failing_on_the_executors_leaves_no_files(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    lance_format.write_dataset(_target(), uri)
    files = (data_files(uri), deletion_files(uri))
    # integer division by zero raises (as in DataFusion) when a matched row is evaluated
    with pytest.raises(InvalidInputError, match="failed to evaluate") as info:
        merge_dataframe(_frame(spark, _source()), uri, "id",
                        when_matched_update_condition="source.id / (target.id - target.id) > 0")
    assert "divide by zero" in str(info.value)
    assert lance.dataset(uri).version == 1 and (data_files(uri), deletion_files(uri)) == files


def test_conditional_merge_from_spark_connect(spark_connect, tmp_path):
    ours, theirs = _pair(tmp_path, True)
    source = _source()
    frame = _frame(spark_connect, source)
    result = merge_dataframe(frame, ours, "id", when_matched_update_condition="source.v > target.v")
    assert _counts(result) == _pylance(theirs, source, "source.v > target.v")
    assert _read(ours) == _read(theirs)
