"""Compaction of small fragments after a write (``compact_small_fragments``, off by default like
Delta's auto compaction): write_dataframe, merge_dataframe, ``df.write.format("lance")`` and
the streaming sink; the rows, stable row ids and the change feed stay as they were."""

from __future__ import annotations

import lance
import pytest
from pyspark.sql import functions as F

from lance_format.errors import InvalidInputError
from lance_format.spark import merge_dataframe, read_changes, write_dataframe
from lance_format.spark.common import CommitResult
from lance_format.spark.compaction import AutoCompaction, _rows_per_file, auto_compaction

from .helpers import lance_rows


def _frame(spark, start: int, stop: int, partitions: int, label: str = "v"):
    return spark.range(start, stop, 1, 2).select(
        "id", F.concat(F.lit(label), F.col("id").cast("string")).alias("s")).repartition(partitions)


def test_off_by_default_and_compacts_when_asked(spark, tmp_path):
    df = _frame(spark, 0, 6000, 60)
    plain = write_dataframe(df, str(tmp_path / "plain.lance"), coalesce=False)
    assert (plain.fragments, plain.small_fragments, plain.table_fragments) == (60, 60, 60)
    assert plain.compaction_version is None and plain.fragments_compacted == 0

    uri = str(tmp_path / "t.lance")
    result = write_dataframe(df, uri, coalesce=False, compact_small_fragments=True)  # 60 >= 50 small files
    assert (result.version, result.fragments, result.small_fragments) == (1, 60, 60)
    # version 2 reserves the new fragment ids, version 3 swaps the files (like compact_files)
    assert (result.compaction_version, result.fragments_compacted, result.fragments_from_compaction) == (3, 60, 1)
    assert result.table_fragments == 1
    ds = lance.dataset(uri)
    assert ds.version == 3 and len(ds.get_fragments()) == 1
    assert len(lance.dataset(uri, version=1).get_fragments()) == 60  # the write's own version is kept
    assert lance_rows(uri) == lance_rows(uri, version=1) == lance_rows(str(tmp_path / "plain.lance"))
    assert ds.read_transaction(3).operation.__class__.__name__ == "Rewrite"


def test_a_threshold_of_small_fragments(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    results = [write_dataframe(_frame(spark, i * 100, (i + 1) * 100, 2), uri, mode="append", coalesce=False,
                               compact_small_fragments=5) for i in range(3)]
    assert [r.table_fragments for r in results] == [2, 4, 1]  # the third write makes 6 >= 5 small files
    assert [r.compaction_version for r in results] == [None, None, 5]
    assert results[2].fragments_compacted == 6
    assert sorted(r["id"] for r in lance_rows(uri)) == list(range(300))


def test_large_fragments_are_left_alone(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    write_dataframe(_frame(spark, 0, 4000, 1), uri, target_rows_per_file=8000)  # 4,000 >= 8,000 / 8: not small
    result = write_dataframe(_frame(spark, 4000, 4400, 4), uri, mode="append", coalesce=False,
                             target_rows_per_file=8000, compact_small_fragments=2)
    assert (result.fragments_compacted, result.fragments_from_compaction, result.table_fragments) == (4, 1, 2)
    sizes = sorted(f.count_rows() for f in lance.dataset(uri).get_fragments())
    assert sizes == [400, 4000]


def test_stable_row_ids_and_the_change_feed_do_not_change(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    write_dataframe(_frame(spark, 0, 100, 1), uri, enable_stable_row_ids=True)
    result = write_dataframe(_frame(spark, 100, 400, 3), uri, mode="append", coalesce=False,
                             compact_small_fragments=3)
    assert (result.version, result.compaction_version, result.table_fragments) == (2, 4, 1)
    before = lance.dataset(uri, version=2).to_table(with_row_id=True).sort_by("id")
    after = lance.dataset(uri, version=4).to_table(with_row_id=True).sort_by("id")
    assert before.equals(after)  # rows and their stable row ids
    assert read_changes(spark, uri, begin_version=2, end_version=4).count() == 0
    changes = read_changes(spark, uri, begin_version=1, end_version=4)
    assert sorted(r["id"] for r in changes.collect()) == list(range(100, 400))
    assert {r["_change_type"] for r in changes.collect()} == {"insert"}


def test_merge_compacts_its_small_fragments(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    write_dataframe(_frame(spark, 0, 100, 2), uri, coalesce=False)
    result = merge_dataframe(_frame(spark, 50, 150, 2, "m"), uri, "id", compact_small_fragments=3)
    assert (result.rows_updated, result.rows_inserted) == (50, 50)
    assert result.compaction_version == result.version + 2 and result.table_fragments == 1
    rows = lance_rows(uri)
    assert [r["id"] for r in rows] == list(range(150))
    assert [r["s"][0] for r in rows] == ["v"] * 50 + ["m"] * 100


def test_data_source_option(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    # without coalescing in the commit: one small fragment per task
    _frame(spark, 0, 400, 4).write.format("lance").mode("append").option("coalesceSmallFragments", "false").save(uri)
    assert len(lance.dataset(uri).get_fragments()) == 4
    _frame(spark, 400, 800, 4).write.format("lance").mode("append").option("coalesceSmallFragments", "false") \
        .option("compactSmallFragments", "true").option("compactMinSmallFragments", "6").save(uri)
    ds = lance.dataset(uri)
    assert ds.version == 4 and len(ds.get_fragments()) == 1 and ds.count_rows() == 800
    assert sorted(ds.to_table(columns=["id"]).column("id").to_pylist()) == list(range(800))


def test_streaming_sink_option(spark, tmp_path):
    source = tmp_path / "in"
    for n in range(2):
        spark.range(n * 100, (n + 1) * 100, 1, 1).selectExpr("id", "cast(id as string) AS s") \
            .write.parquet(str(source / f"part{n}"))
    uri = str(tmp_path / "t.lance")
    query = (spark.readStream.schema("id long, s string").option("maxFilesPerTrigger", 1)
             .option("recursiveFileLookup", "true").parquet(str(source)).repartition(2)
             .writeStream.format("lance").option("checkpointLocation", str(tmp_path / "ck"))
             .option("compactSmallFragments", "3").option("coalesceSmallFragments", "false")
             .trigger(availableNow=True).start(uri))
    query.awaitTermination()
    assert query.exception() is None
    ds = lance.dataset(uri)
    # batch 0 (version 1, 2 small files), batch 1 (version 2, 4 small files), compaction (3 and 4)
    assert ds.version == 4 and len(ds.get_fragments()) == 1
    assert sorted(ds.to_table(columns=["id"]).column("id").to_pylist()) == list(range(200))


@pytest.mark.parametrize("setting, expected", [
    (None, None), (False, None), ("false", None), ("", None),
    (True, 50), ("true", 50), ("TRUE", 50), (7, 7), ("12", 12),
])
def test_settings(setting, expected):
    policy = auto_compaction(setting, 1000, 10_000)
    assert (policy.min_small_fragments if policy else None) == expected


@pytest.mark.parametrize("setting", ["often", 0, "-3"])
def test_bad_settings_are_refused(spark, tmp_path, setting):
    with pytest.raises(InvalidInputError):
        auto_compaction(setting, 1000, 10_000)
    uri = str(tmp_path / "t.lance")
    with pytest.raises(InvalidInputError):  # before any job runs: no table appears
        write_dataframe(spark.range(3), uri, compact_small_fragments=setting)
    assert not (tmp_path / "t.lance").exists()


def test_wide_rows_are_compacted_to_the_byte_target():
    class File:
        def __init__(self, size):
            self.file_size_bytes = size

    class Fragment:
        def __init__(self, rows, size):
            self.physical_rows, self.files = rows, [File(size)]

    policy = AutoCompaction(2, target_rows=1_000_000, target_bytes=1_000_000)
    assert _rows_per_file([Fragment(100, 50_000), Fragment(100, 50_000)], policy) == 2000  # 500 bytes a row
    assert _rows_per_file([Fragment(100, 100)], policy) == 1_000_000  # narrow rows: the row target
    assert CommitResult(version=1, rows=0, fragments=0, bytes=0).compaction_version is None


def test_a_failed_compaction_keeps_the_write_and_warns(tmp_path, monkeypatch):
    import pyarrow as pa

    import lance_format
    from lance_format.errors import CommitConflictError
    from lance_format.io import object_store_for
    from lance_format.spark import compaction

    uri = str(tmp_path / "t.lance")
    for i in range(3):
        lance_format.write_dataset(pa.table({"id": [i]}), uri, mode="append")
    written = CommitResult(version=3, rows=1, fragments=1, bytes=1)

    def conflict(*args, **kwargs):
        raise CommitConflictError("a concurrent commit won")

    monkeypatch.setattr(compaction, "compact_files", conflict)
    with pytest.warns(RuntimeWarning, match="a concurrent commit won"):
        result = compaction.compact_after_write(object_store_for(uri), written, AutoCompaction(3, 1000, 10**6))
    assert result.compaction_version is None and result.table_fragments == 3
    assert lance.dataset(uri).version == 3
    monkeypatch.undo()
    result = compaction.compact_after_write(object_store_for(uri), written, AutoCompaction(3, 1000, 10**6))
    assert (result.compaction_version, result.table_fragments) == (5, 1)
    assert sorted(lance.dataset(uri).to_table().column("id").to_pylist()) == [0, 1, 2]
