"""Small task outputs coalesced in the commit of ``df.write.format("lance")`` and the streaming sink:
many small partitions make few fragments of the target size in ONE version, the rows are the
same (read by pylance), the counts are in the transaction, and no staged file is left behind."""

from __future__ import annotations

import os

import lance
import pyarrow as pa
import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from lance_format.errors import InvalidInputError
from lance_format.spark import datasource
from lance_format.spark.coalesce import COALESCED_KEY, FRAGMENTS_BEFORE_KEY, FRAGMENTS_KEY, StagingFile
from lance_format.spark.datasource import LanceWriter, commit_data_source_write

from .helpers import data_files, lance_rows, spark_rows

SCHEMA = StructType([StructField("id", LongType()), StructField("s", StringType())])


def _many_partitions(spark, rows: int = 10_000, partitions: int = 200):
    return spark.range(0, rows, 1, 4).select(
        "id", F.concat(F.lit("v"), F.col("id").cast("string")).alias("s")).repartition(partitions)


def _counts(uri: str, version: int | None = None) -> tuple[int, int, int]:
    ds = lance.dataset(uri)
    props = ds.read_transaction(version or ds.version).transaction_properties
    return int(props[FRAGMENTS_BEFORE_KEY]), int(props[FRAGMENTS_KEY]), int(props[COALESCED_KEY])


def _fragment_rows(uri: str) -> list[int]:
    return sorted(f.count_rows() for f in lance.dataset(uri).get_fragments())


def _referenced(uri: str) -> set[str]:
    return {d.path for f in lance.dataset(uri).get_fragments() for d in f.data_files()}


def test_many_small_partitions_make_one_fragment_in_one_version(spark, tmp_path):
    df = _many_partitions(spark)
    uri = str(tmp_path / "t.lance")
    df.write.format("lance").mode("append").save(uri)
    ds = lance.dataset(uri)
    assert ds.version == 1 and len(ds.get_fragments()) == 1
    assert _counts(uri) == (200, 1, 200)
    assert lance_rows(uri) == spark_rows(df)  # pylance reads the same rows
    assert data_files(uri) == _referenced(uri)  # the staged outputs are gone
    # appends too: one more version, one more fragment
    more = _many_partitions(spark).withColumn("id", F.col("id") + 10_000)
    more.write.format("lance").mode("append").save(uri)
    assert lance.dataset(uri).version == 2 and _fragment_rows(uri) == [10_000, 10_000]
    assert _counts(uri, 2) == (200, 1, 200)
    assert [r["id"] for r in lance_rows(uri)] == list(range(20_000))
    # and overwrites
    _many_partitions(spark, 3000, 50).write.format("lance").mode("overwrite").save(uri)
    assert lance.dataset(uri).version == 3 and _fragment_rows(uri) == [3000]
    assert data_files(uri) - _referenced(uri) == {d.path for v in (1, 2) for f in lance.dataset(uri, version=v)
                                                  .get_fragments() for d in f.data_files()}


def test_off_switch_keeps_one_fragment_per_task(spark, tmp_path):
    df = _many_partitions(spark)
    uri = str(tmp_path / "t.lance")
    df.write.format("lance").mode("append").option("coalesceSmallFragments", "false").save(uri)
    assert lance.dataset(uri).version == 1 and len(lance.dataset(uri).get_fragments()) == 200
    assert _counts(uri) == (200, 200, 0)
    assert lance_rows(uri) == spark_rows(df)
    with pytest.raises(Exception, match="coalesceSmallFragments"):
        df.write.format("lance").mode("append").option("coalesceSmallFragments", "sometimes").save(uri)
    assert lance.dataset(uri).version == 1


@pytest.mark.parametrize("option", ["maxRowsPerFile", "max_rows_per_file", "targetRowsPerFile"])
def test_row_target(spark, tmp_path, option):
    df = _many_partitions(spark)
    uri = str(tmp_path / "t.lance")
    df.write.format("lance").mode("append").option(option, "2000").save(uri)
    assert _fragment_rows(uri) == [2000] * 5 and lance.dataset(uri).version == 1
    assert _counts(uri) == (200, 5, 200)
    assert lance_rows(uri) == spark_rows(df)


def test_byte_target(spark, tmp_path):
    """The byte target is pylance's ``max_bytes_per_file``: a file is cut once the bytes its writer
    has written reach it (pages are written when a column buffers 8 MiB), so the coalesced files
    roll once they have written the target (where pylance's writer flushes its pages differently,
    it cuts at other rows: see #13)."""
    payload = F.concat(*[F.sha2(F.concat(F.col("id").cast("string"), F.lit(str(salt))), 512) for salt in range(12)])
    df = spark.range(0, 10_000, 1, 4).select("id", payload.alias("s")).repartition(200)  # ~15 MB of text
    uri = str(tmp_path / "t.lance")
    target = 3 * 1024 * 1024
    df.write.format("lance").mode("append").option("maxBytesPerFile", str(target)).save(uri)
    sizes = [f.count_rows() for f in lance.dataset(uri).get_fragments()]
    assert sum(sizes) == 10_000 and len(sizes) >= 2, sizes  # a page flush (8 MiB) cuts a file
    assert _counts(uri)[1:] == (len(sizes), 200)
    files = [os.path.getsize(os.path.join(uri, "data", d.path)) for f in lance.dataset(uri).get_fragments()
             for d in f.data_files()]
    assert all(size >= target for size in files[:-1]), files  # cut only once the target is written
    assert all(size < target + 9 * 1024 * 1024 for size in files), files  # and then at once (one page)
    assert lance_rows(uri) == spark_rows(df)
    with pytest.raises(Exception, match="disagree"):
        df.write.format("lance").mode("append").option("maxBytesPerFile", "1000") \
            .option("max_bytes_per_file", "2000").save(str(tmp_path / "u.lance"))


def _batch(ids) -> pa.RecordBatch:
    ids = list(ids)
    return pa.record_batch([pa.array(ids, pa.int64()), pa.array([f"v{i}" for i in ids])], names=["id", "s"])


def test_large_outputs_are_written_by_the_tasks_small_ones_coalesced(spark, tmp_path):
    """A task whose rows reach 1/8 of the target writes its own files (its staged rows replayed
    into them); the small outputs are coalesced by the commit, in one version."""
    uri = str(tmp_path / "t.lance")
    options = {"path": uri, "targetRowsPerFile": "800"}  # small: below 100 rows
    writer = LanceWriter(options, SCHEMA, False)
    large = writer.write(iter([_batch(range(0, 60)), _batch(range(60, 900))]))  # spills at 900 rows
    assert large.staged is None and len(large.fragments) == 1  # tasks roll files at max_rows_per_file
    small = [writer.write(iter([_batch(range(start, start + 90))])) for start in range(900, 1800, 90)]
    assert all(m.staged is not None and not m.fragments for m in small)
    assert sum(1 for name in data_files(uri) if name.startswith(".tmp")) == 10  # staged, not Lance files
    result = commit_data_source_write(writer, [large, *small])
    assert (result.version, result.rows, result.fragments) == (1, 1800, 3)
    assert (result.fragments_before_coalescing, result.small_outputs_coalesced) == (11, 10)
    assert _fragment_rows(uri) == [100, 800, 900]
    assert _counts(uri) == (11, 3, 10)
    assert [r["id"] for r in lance_rows(uri)] == list(range(1800))
    assert data_files(uri) == _referenced(uri)


def test_a_retried_task_commits_its_rows_once(spark, tmp_path, monkeypatch):
    """Attempt 0 of a task failed after staging rows (its worker was killed: the staged file
    stays); attempt 1 succeeded. The commit holds the rows once and removes attempt 0's file."""
    uri = str(tmp_path / "t.lance")
    writer = LanceWriter({"path": uri}, SCHEMA, False)
    first = writer.write(iter([_batch(range(0, 100))]))

    def failing():
        yield _batch(range(100, 150))
        raise RuntimeError("task failed on purpose")

    with pytest.raises(RuntimeError, match="on purpose"):
        writer.write(failing())  # a failing task removes its own staged file
    killed = StagingFile(writer.plan.store, writer.plan.prefix, writer.plan.schema.to_arrow())
    killed.write(_batch(range(100, 150)))  # ... a killed one cannot
    monkeypatch.setattr(datasource, "task_retried", lambda: True)
    retried = writer.write(iter([_batch(range(100, 200))]))
    assert retried.retried and retried.staged is not None
    commit_data_source_write(writer, [first, retried])
    assert lance.dataset(uri).version == 1 and len(lance.dataset(uri).get_fragments()) == 1
    assert [r["id"] for r in lance_rows(uri)] == list(range(200))
    assert data_files(uri) == _referenced(uri)  # the killed attempt's staged file is gone


def test_an_aborted_write_leaves_no_staged_file(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    spark.range(3).selectExpr("id", "cast(id AS string) AS s").write.format("lance").mode("append").save(uri)
    before = data_files(uri)

    def explode(batches):
        for batch in batches:
            yield batch
            if 7000 in batch.column(0).to_pylist():
                raise RuntimeError("task failed on purpose")

    df = _many_partitions(spark).mapInArrow(explode, "id long, s string")
    with pytest.raises(Exception, match="on purpose"):
        df.write.format("lance").mode("append").save(uri)
    assert lance.dataset(uri).version == 1 and data_files(uri) == before


def _add_file(spark, folder, start: int, count: int) -> None:
    n = len(os.listdir(folder)) if os.path.isdir(folder) else 0
    spark.range(start, start + count, 1, 1).selectExpr("id", "concat('v', cast(id AS string)) AS s") \
        .write.parquet(os.path.join(folder, f"part{n:03d}"))


def test_streaming_micro_batches_coalesce(spark, tmp_path):
    folder, uri, checkpoint = str(tmp_path / "in"), str(tmp_path / "t.lance"), str(tmp_path / "ck")
    for start in (0, 1000, 2000):
        _add_file(spark, folder, start, 1000)

    def start(**options):
        writer = (spark.readStream.schema("id long, s string").option("maxFilesPerTrigger", 1)
                  .option("recursiveFileLookup", "true").parquet(folder).repartition(20)
                  .writeStream.format("lance").option("checkpointLocation", checkpoint))
        for key, value in options.items():
            writer = writer.option(key, value)
        query = writer.trigger(availableNow=True).start(uri)
        query.awaitTermination()
        assert query.exception() is None

    start()
    ds = lance.dataset(uri)
    assert ds.version == 3 and _fragment_rows(uri) == [1000, 1000, 1000]  # one fragment per micro-batch
    assert [_counts(uri, v) for v in (1, 2, 3)] == [(20, 1, 20)] * 3
    assert [r["id"] for r in lance_rows(uri)] == list(range(3000))
    assert data_files(uri) == _referenced(uri)
    # a row target, and the off switch, on the next batches
    _add_file(spark, folder, 3000, 1000)
    start(maxRowsPerFile="800")  # small: below 100 rows (the tasks have about 50)
    assert lance.dataset(uri).version == 4 and _counts(uri, 4) == (20, 2, 20)
    assert _fragment_rows(uri) == [200, 800, 1000, 1000, 1000]
    _add_file(spark, folder, 4000, 1000)
    start(coalesceSmallFragments="false")
    assert lance.dataset(uri).version == 5 and _counts(uri, 5) == (20, 20, 0)
    assert [r["id"] for r in lance_rows(uri)] == list(range(5000))
    assert data_files(uri) == _referenced(uri)


def test_bad_option_is_refused_before_any_task(tmp_path):
    with pytest.raises(InvalidInputError, match="coalesceSmallFragments"):
        LanceWriter({"path": str(tmp_path / "t.lance"), "coalesceSmallFragments": "maybe"}, SCHEMA, False)


def test_stream_commit_that_fails_or_dies_leaves_no_files(spark, tmp_path, monkeypatch):
    """The coalesced files of a micro-batch whose commit fails are removed by the commit, and
    those of a commit process that died are removed by Spark's abort (a new writer: the prefix
    comes from the messages and the batch id)."""
    from lance_format.distributed import write_prefix
    from lance_format.spark import streaming_sink
    from lance_format.spark.coalesce import coalesce_outputs
    from lance_format.spark.streaming_sink import LanceStreamWriter, commit_batch, commit_write_id

    uri = str(tmp_path / "t.lance")
    options = {"path": uri, "txnAppId": "app-1"}
    commit_batch(LanceStreamWriter(options, SCHEMA, False),
                 [LanceStreamWriter(options, SCHEMA, False).write(iter([_batch(range(10))]))], 0)
    before = data_files(uri)
    writer = LanceStreamWriter(options, SCHEMA, False)
    messages = [writer.write(iter([_batch(range(start, start + 10))])) for start in (10, 20, 30)]
    assert len(data_files(uri) - before) == 3  # three staged outputs

    def refuse(*args, **kwargs):
        raise OSError("the store refused the commit")

    monkeypatch.setattr(streaming_sink, "commit_written", refuse)
    with pytest.raises(OSError, match="refused"):
        commit_batch(LanceStreamWriter(options, SCHEMA, False), messages, 1)
    monkeypatch.undo()
    assert data_files(uri) == before and lance.dataset(uri).version == 1

    messages = [writer.write(iter([_batch(range(start, start + 10))])) for start in (10, 20, 30)]
    plan = writer.plan
    staged = [m.staged for m in messages]
    coalesce_outputs(plan.store, [], staged, plan.schema, plan.storage_version,  # a commit that then died
                     prefix=write_prefix(commit_write_id(messages, 1)), target_rows=1000, target_bytes=1 << 20)
    assert len(data_files(uri) - before) == 4
    LanceStreamWriter(options, SCHEMA, False).abort(messages, 1)
    assert data_files(uri) == before
    result = commit_batch(LanceStreamWriter(options, SCHEMA, False),
                          [writer.write(iter([_batch(range(start, start + 10))])) for start in (10, 20, 30)], 1)
    assert (result.version, result.fragments, result.small_outputs_coalesced) == (2, 1, 3)
    assert [r["id"] for r in lance_rows(uri)] == list(range(40))
    assert data_files(uri) == _referenced(uri)
