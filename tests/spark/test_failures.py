"""Atomicity, idempotency and concurrent writers of Spark writes."""

from __future__ import annotations

import os

import lance
import pyarrow as pa
import pytest
from pyspark.sql import functions as F

import lance_format
from lance_format.errors import CommitConflictError
from lance_format.spark import IDEMPOTENCY_KEY, merge_dataframe, write_dataframe

from .helpers import data_files, deletion_files, lance_rows


def _frame(spark, start: int, stop: int, label: str = "v"):
    return spark.range(start, stop, 1, 2).select("id", F.concat(F.lit(label), F.col("id").cast("string")).alias("s"))


def _fail_in_python(spark, start: int, stop: int):
    """Rows whose second partition raises after yielding some batches."""
    middle = (start + stop) // 2

    def explode(batches):
        for batch in batches:
            yield batch
            if batch.column(0)[0].as_py() >= middle + 500:
                raise RuntimeError("task failed on purpose")

    return _frame(spark, start, stop).mapInArrow(explode, "id long, s string")


def _fail_in_jvm(spark, start: int, stop: int):
    bad = (start + stop) // 2 + 700
    return _frame(spark, start, stop).withColumn(
        "id", F.when(F.col("id") == bad, F.raise_error(F.lit("row failed on purpose"))).otherwise(F.col("id")))


@pytest.mark.parametrize("failing", [_fail_in_python, _fail_in_jvm])
def test_failed_task_leaves_no_version_and_no_files(spark, tmp_path, session_conf, failing):
    uri = str(tmp_path / "t.lance")
    write_dataframe(_frame(spark, 0, 100), uri)
    before = data_files(uri)
    with session_conf({"spark.sql.execution.arrow.maxRecordsPerBatch": "200"}):
        with pytest.raises(Exception, match="on purpose"):
            # small files: both tasks finish files before one of them fails
            write_dataframe(failing(spark, 1000, 5000), uri, mode="append", max_rows_per_file=300)
        with pytest.raises(Exception, match="on purpose"):
            write_dataframe(failing(spark, 1000, 5000), uri, mode="overwrite", replace_where="id >= 1000",
                            max_rows_per_file=300)
    assert lance.dataset(uri).version == 1
    assert data_files(uri) == before
    assert lance_rows(uri) == lance_rows(uri, version=1)


def test_idempotency_key_makes_a_rerun_a_no_op(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    write_dataframe(_frame(spark, 0, 10), uri)
    props = {IDEMPOTENCY_KEY: "run-42/partition-7", "job": "nightly"}
    first = write_dataframe(_frame(spark, 10, 20), uri, mode="append", transaction_properties=props)
    assert first.version == 2 and not first.skipped
    txn = lance.dataset(uri).read_transaction(2)  # pylance sees our properties
    assert txn.transaction_properties[IDEMPOTENCY_KEY] == "run-42/partition-7"
    files = data_files(uri)
    # The re-run finds the commit by its key before evaluating anything: even a DataFrame whose
    # tasks would fail writes nothing.
    again = write_dataframe(_fail_in_python(spark, 10, 20), uri, mode="append", transaction_properties=props)
    assert again.skipped and (again.version, again.rows, again.fragments) == (2, 10, first.fragments)
    replay = merge_dataframe(_frame(spark, 0, 5), uri, "id", transaction_properties=props)
    assert replay.skipped and replay.version == 2
    assert lance.dataset(uri).version == 2 and data_files(uri) == files
    created = write_dataframe(_frame(spark, 0, 5), str(tmp_path / "new.lance"), transaction_properties=props)
    rerun = write_dataframe(_frame(spark, 0, 5), str(tmp_path / "new.lance"), transaction_properties=props)
    assert rerun.skipped and rerun.version == created.version == 1  # no "already exists" on a re-run
    other = write_dataframe(_frame(spark, 20, 30), uri, mode="append",
                            transaction_properties={IDEMPOTENCY_KEY: "run-43/partition-7"})
    assert other.version == 3 and lance.dataset(uri).count_rows() == 30


def test_two_runs_with_one_idempotency_key_racing_commit_once(spark, tmp_path):
    """The other run commits after our up-front key lookup: the commit loop still sees it."""
    uri = str(tmp_path / "t.lance")
    write_dataframe(_frame(spark, 0, 10), uri)
    props = {IDEMPOTENCY_KEY: "run-7"}

    def other_run():
        rows = pa.table({"id": pa.array([10, 11], pa.int64()), "s": ["v10", "v11"]})
        lance_format.write_dataset(rows, uri, mode="append", transaction_properties=props)

    df = _with_concurrent_commit(_frame(spark, 10, 12), str(tmp_path / "marker"), other_run)
    result = write_dataframe(df, uri, mode="append", transaction_properties=props)
    assert result.skipped and (result.version, result.rows) == (2, 2)
    assert lance.dataset(uri).version == 2 and lance.dataset(uri).count_rows() == 12
    files = data_files(uri)
    assert len(files) == len(lance.dataset(uri).get_fragments())  # our run's files were removed
    # without a key the same race is an ordinary concurrent append: both land
    df = _with_concurrent_commit(_frame(spark, 20, 22), str(tmp_path / "marker2"),
                                 lambda: lance_format.write_dataset(pa.table({"id": pa.array([30], pa.int64()),
                                                                              "s": ["x"]}), uri, mode="append"))
    assert write_dataframe(df, uri, mode="append").version == 4


def _with_concurrent_commit(df, marker: str, commit):
    """``df``, whose evaluation commits ``commit()`` once (from inside a task: after our plan)."""

    def hook(batches):
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
            commit()
        except FileExistsError:
            pass
        yield from batches

    return df.mapInArrow(hook, df.schema)


def test_concurrent_append_is_rebased(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    write_dataframe(_frame(spark, 0, 10), uri)

    def other_writer():
        lance_format.write_dataset(pa.table({"id": pa.array([100], pa.int64()), "s": ["other"]}), uri, mode="append")

    df = _with_concurrent_commit(_frame(spark, 10, 20), str(tmp_path / "marker"), other_writer)
    result = write_dataframe(df, uri, mode="append")
    assert (result.read_version, result.version) == (1, 3)
    assert [r["id"] for r in lance_rows(uri)] == list(range(20)) + [100]


def test_merge_rebases_over_a_concurrent_delete_of_other_rows(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    write_dataframe(_frame(spark, 0, 10), uri)

    def other_writer():
        lance.dataset(uri).delete("id = 8")  # pylance, the same fragment as our update

    source = _with_concurrent_commit(_frame(spark, 1, 4, "m"), str(tmp_path / "marker"), other_writer)
    result = merge_dataframe(source, uri, "id")
    assert result.version == 3 and result.rows_updated == 3
    rows = lance_rows(uri)
    assert [r["id"] for r in rows] == [0, 1, 2, 3, 4, 5, 6, 7, 9]
    assert [r["s"] for r in rows[1:4]] == ["m1", "m2", "m3"]


def test_conflicting_commit_removes_the_write(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    write_dataframe(_frame(spark, 0, 10), uri)

    def other_writer():
        lance_format.write_dataset(pa.table({"id": pa.array([7], pa.int64()), "s": ["x"]}), uri, mode="overwrite")

    files_before = data_files(uri)
    source = _with_concurrent_commit(_frame(spark, 1, 4, "m"), str(tmp_path / "marker"), other_writer)
    with pytest.raises(CommitConflictError):
        merge_dataframe(source, uri, "id")
    assert lance.dataset(uri).version == 2  # only the other writer's overwrite
    overwrite_files = {f"{f.path}" for f in lance.dataset(uri).get_fragments()[0].data_files()}
    assert data_files(uri) == files_before | overwrite_files
    assert deletion_files(uri) == set()


def test_jobs_batch_by_rows_and_leave_the_session_as_it_was(spark, tmp_path, session_conf):
    """Our jobs lift the byte limit of Arrow batches only while they run, only when the user
    has not set one, and a failed write puts the session back too."""
    from lance_format.spark.common import ARROW_MAX_BYTES_PER_BATCH, RowBoundedArrowBatches

    assert spark.conf.get(ARROW_MAX_BYTES_PER_BATCH, None) is None
    with RowBoundedArrowBatches(spark):
        assert spark.conf.get(ARROW_MAX_BYTES_PER_BATCH) == str(2**31 - 1)
    assert spark.conf.get(ARROW_MAX_BYTES_PER_BATCH, None) is None

    uri = str(tmp_path / "t.lance")
    write_dataframe(_frame(spark, 0, 3000), uri)
    with pytest.raises(Exception, match="on purpose"):
        write_dataframe(_fail_in_python(spark, 3000, 60000), uri, mode="append")
    assert spark.conf.get(ARROW_MAX_BYTES_PER_BATCH, None) is None

    # A limit the user set is honoured (batches of a few rows here) and left in place.
    with session_conf({ARROW_MAX_BYTES_PER_BATCH: "4096"}):
        with RowBoundedArrowBatches(spark):
            assert spark.conf.get(ARROW_MAX_BYTES_PER_BATCH) == "4096"
        write_dataframe(_frame(spark, 3000, 6000), uri, mode="append")
        assert spark.conf.get(ARROW_MAX_BYTES_PER_BATCH) == "4096"
    assert lance.dataset(uri).count_rows() == 6000
    assert sorted(r["id"] for r in lance.dataset(uri).to_table(columns=["id"]).to_pylist()) == list(range(6000))


@pytest.mark.parametrize("text, expected", [
    ("10485760b", 10485760), ("10MB", 10 << 20), ("1g", 1 << 30), ("-1", -1), ("512k", 512 << 10),
])
def test_conf_bytes_reads_spark_sizes(spark, session_conf, text, expected):
    from lance_format.spark.common import conf_bytes

    with session_conf({"spark.sql.autoBroadcastJoinThreshold": text}):
        assert conf_bytes(spark, "spark.sql.autoBroadcastJoinThreshold", 7) == expected
    assert conf_bytes(spark, "spark.lance.no.such.setting", 7) == 7
