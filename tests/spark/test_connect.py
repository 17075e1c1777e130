"""The same API from a Spark Connect client (DataFrames of ``pyspark.sql.connect``)."""

from __future__ import annotations

import lance

from lance_format.spark import merge_dataframe, read_changes, read_dataframe, write_dataframe

from .helpers import lance_rows, spark_rows


def test_connect_dataframes(spark_connect, tmp_path):
    from pyspark.sql.connect import functions as F

    remote = spark_connect
    uri = str(tmp_path / "t.lance")
    frame = remote.range(0, 100, 1, 2).select("id", F.concat(F.lit("v"), F.col("id").cast("string")).alias("s"))
    created = write_dataframe(frame, uri, enable_stable_row_ids=True, max_rows_per_file=40)
    assert created.version == 1 and created.fragments == 4
    assert lance_rows(uri) == spark_rows(frame)
    update = remote.range(90, 110, 1, 2).select("id", F.lit("m").alias("s"))
    merged = merge_dataframe(update, uri, "id")
    assert (merged.rows_updated, merged.rows_inserted) == (10, 10)
    replaced = write_dataframe(frame.where("id < 10"), uri, mode="overwrite", replace_where="id < 10")
    assert replaced.rows_deleted == 10
    assert spark_rows(read_dataframe(remote, uri, filter="id >= 95")) == lance_rows(uri, filter="id >= 95")
    assert read_changes(remote, uri, 1, 3).count() == 10 + 10 + 10 + 10 + 10
    assert lance.dataset(uri).count_rows() == 110


def test_connect_sessions_get_row_bounded_batches_and_are_left_as_they_were(spark_connect):
    from lance_format.spark.common import ARROW_MAX_BYTES_PER_BATCH, RowBoundedArrowBatches

    remote = spark_connect
    assert remote.conf.get(ARROW_MAX_BYTES_PER_BATCH, None) is None
    with RowBoundedArrowBatches(remote):
        assert remote.conf.get(ARROW_MAX_BYTES_PER_BATCH) == str(2**31 - 1)
    assert remote.conf.get(ARROW_MAX_BYTES_PER_BATCH, None) is None
