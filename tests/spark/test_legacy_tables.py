"""Spark reads legacy (0.1) tables and appends legacy files to them, as official Lance does."""

from __future__ import annotations

import lance
import pyarrow as pa
from pyspark.sql import functions as F

from .helpers import lance_rows, spark_rows


def test_spark_reads_and_appends_to_a_legacy_table(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"id": pa.array(range(30), pa.int64()), "s": [f"v{i}" for i in range(30)]}), uri,
                        data_storage_version="legacy", max_rows_per_file=12)
    lance.dataset(uri).delete("id % 5 = 0")
    assert spark_rows(spark.read.format("lance").load(uri)) == lance_rows(uri)
    frame = spark.range(100, 140, 1, 2).select("id", F.concat(F.lit("w"), F.col("id").cast("string")).alias("s"))
    frame.write.format("lance").mode("append").save(uri)
    versions = {(f.file_major_version, f.file_minor_version) for frag in lance.dataset(uri).get_fragments()
                for f in frag.metadata.files}
    assert versions == {(0, 2)}
    assert lance.dataset(uri).count_rows() == 24 + 40
    assert spark_rows(spark.read.format("lance").load(uri)) == lance_rows(uri)
