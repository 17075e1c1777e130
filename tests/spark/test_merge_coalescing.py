"""``merge_dataframe`` coalesces its tasks' small outputs in its one Update commit: a merge
from many small partitions adds few fragments, and every row keeps exactly the id and lineage
(``_rowid``, ``_row_created_at_version``, ``_row_last_updated_at_version``, change feed) it
gets with coalescing off, as pylance reads them."""

from __future__ import annotations

import shutil

import lance
import pytest
from pyspark.sql import functions as F

import lance_format
from lance_format.spark import merge_dataframe, read_changes, write_dataframe
from lance_format.spark.coalesce import COALESCED_KEY, FRAGMENTS_BEFORE_KEY, FRAGMENTS_KEY

from .helpers import data_files

LINEAGE = ["id", "s", "_rowid", "_row_created_at_version", "_row_last_updated_at_version"]
CHANGE_KEY = ["_commit_version", "_change_type", "_rowid"]


def _rows(spark, start: int, end: int, tag: str, partitions: int):
    return spark.range(start, end, 1, partitions).select(
        "id", F.concat(F.lit(tag), F.col("id").cast("string")).alias("s"))


def _table(spark, uri: str, stable: bool) -> int:
    """A table of two versions (so rows differ in ``_row_created_at_version``)."""
    write_dataframe(_rows(spark, 0, 1500, "a", 2), uri, enable_stable_row_ids=stable, max_rows_per_file=600)
    write_dataframe(_rows(spark, 1500, 2000, "b", 1), uri, mode="append")
    return lance.dataset(uri).version


def _lineage(uri: str) -> list[dict]:
    table = lance.dataset(uri).to_table(columns=LINEAGE)
    return table.sort_by([("id", "ascending")]).to_pylist()


def _new_fragments(uri: str, before: set[int]) -> list[int]:
    return sorted(f.count_rows() for f in lance.dataset(uri).get_fragments() if f.fragment_id not in before)


@pytest.mark.parametrize("stable", [True, False], ids=["stable_row_ids", "address_row_ids"])
def test_merge_of_many_small_partitions_makes_few_fragments_with_the_same_lineage(spark, tmp_path, stable):
    on, off = str(tmp_path / "on.lance"), str(tmp_path / "off.lance")
    start = _table(spark, on, stable)
    shutil.copytree(on, off)
    before = {f.fragment_id for f in lance.dataset(on).get_fragments()}
    # 1,000 updates (ids 1000-1999) and 1,000 inserts (2000-2999) from 100 tasks
    source = _rows(spark, 1000, 3000, "m", 100)
    coalesced = merge_dataframe(source, on, "id")
    plain = merge_dataframe(source, off, "id", coalesce=False)
    for result in (coalesced, plain):
        assert (result.version, result.rows_updated, result.rows_inserted) == (start + 1, 1000, 1000)
    assert lance.dataset(on).version == lance.dataset(off).version == start + 1
    # one fragment of inserted rows, one of updated rows, instead of ~two per task
    assert _new_fragments(on, before) == [1000, 1000]
    assert len(_new_fragments(off, before)) >= 100
    assert (coalesced.fragments_before_coalescing, coalesced.small_outputs_coalesced) == (100, 100)
    assert coalesced.fragments == 2 and plain.fragments >= 100
    props = lance.dataset(on).read_transaction(start + 1).transaction_properties
    assert (props[FRAGMENTS_BEFORE_KEY], props[FRAGMENTS_KEY], props[COALESCED_KEY]) == ("100", "2", "100")
    props = lance.dataset(off).read_transaction(start + 1).transaction_properties
    assert props[COALESCED_KEY] == "0"
    # the rows and their lineage are the same; with stable row ids the row ids too (addresses
    # differ by construction: fewer fragments)
    got, expected = _lineage(on), _lineage(off)
    assert len(got) == 3000
    if not stable:
        got = [{k: v for k, v in r.items() if k != "_rowid"} for r in got]
        expected = [{k: v for k, v in r.items() if k != "_rowid"} for r in expected]
    assert got == expected
    updated = [r for r in _lineage(on) if 1000 <= r["id"] < 2000]
    assert {r["s"][0] for r in updated} == {"m"}
    if stable:  # updated rows keep their ids and creation versions
        assert {r["_row_last_updated_at_version"] for r in updated} == {start + 1}
        old = {r["id"]: r for r in lance.dataset(on, version=start).to_table(columns=LINEAGE).to_pylist()}
        assert all(r["_rowid"] == old[r["id"]]["_rowid"] for r in updated)
        assert {r["_row_created_at_version"] for r in updated} == {1, 2}
        assert all(r["_row_created_at_version"] == old[r["id"]]["_row_created_at_version"] for r in updated)
        feeds = [read_changes(spark, uri, start, start + 1).drop("_commit_timestamp").toArrow()
                 .sort_by([(k, "ascending") for k in CHANGE_KEY]).to_pylist() for uri in (on, off)]
        assert feeds[0] == feeds[1] and len(feeds[0]) == 3000  # pre/post images of 1,000 updates, 1,000 inserts
    # the engine reads what pylance reads, row ids included
    engine = lance_format.dataset(on).to_table(columns=LINEAGE).sort_by([("id", "ascending")]).to_pylist()
    assert engine == _lineage(on)
    # no staged output is left behind
    referenced = {d.path for f in lance.dataset(on).get_fragments() for d in f.data_files()}
    assert {name for name in data_files(on) if name.startswith(".tmp")} == set()
    assert referenced <= data_files(on)


def test_merge_keeps_large_task_outputs_and_coalesces_only_small_ones(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    start = _table(spark, uri, True)
    before = {f.fragment_id for f in lance.dataset(uri).get_fragments()}
    # target 800 rows: a task output of >= 100 rows is written as it is, smaller ones are staged
    source = _rows(spark, 1000, 3000, "m", 4).union(_rows(spark, 3000, 3200, "n", 40))
    result = merge_dataframe(source, uri, "id", target_rows_per_file=800)
    assert (result.version, result.rows_updated, result.rows_inserted) == (start + 1, 1000, 1200)
    assert result.small_outputs_coalesced == 40
    assert sorted(_new_fragments(uri, before))[-1] <= 800
    rows = lance.dataset(uri).to_table(columns=LINEAGE).to_pylist()
    assert sorted(r["id"] for r in rows) == list(range(3200))
    assert len({r["_rowid"] for r in rows}) == 3200
    old = {r["id"]: r for r in lance.dataset(uri, version=start).to_table(columns=LINEAGE).to_pylist()}
    assert all(r["_rowid"] == old[r["id"]]["_rowid"] and r["_row_created_at_version"] ==
               old[r["id"]]["_row_created_at_version"] for r in rows if 1000 <= r["id"] < 2000)
