"""Spark's Python workers freeze their imported objects (``gc.freeze``), a user's process never."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader

import lance_format
from lance_format.spark import read_dataframe
from lance_format.spark.worker_heap import freeze_imported_objects, is_spark_worker


def test_the_test_process_is_not_frozen(spark, tmp_path):
    before = gc.get_freeze_count()
    lance_format.write_dataset(pa.table({"id": pa.array(range(10), pa.int64())}), tmp_path / "t.lance")
    assert read_dataframe(spark, tmp_path / "t.lance").count() == 10  # plans in this process
    assert not is_spark_worker()
    assert freeze_imported_objects() is False
    assert gc.get_freeze_count() == before


def test_a_worker_freezes_again_only_after_new_imports():
    script = textwrap.dedent("""
        import gc, sys, types
        sys.modules["__main__"].__spec__ = types.SimpleNamespace(name="pyspark.daemon")
        from lance_format.spark.worker_heap import freeze_imported_objects
        first = freeze_imported_objects()
        frozen = gc.get_freeze_count()
        again = freeze_imported_objects()
        import fractions, statistics  # new modules, as the numba kernels are imported late
        print(first, frozen > 1000, again, freeze_imported_objects())
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["True", "True", "False", "True"]


def _probe(batches):
    import gc as worker_gc

    for _ in batches:
        yield pa.record_batch([pa.array([worker_gc.get_freeze_count()], pa.int64())], names=["frozen"])


class FreezeProbe(DataSource):
    """Reports, as its column's name, how many objects the planning worker has frozen."""

    @classmethod
    def name(cls):
        return "lance_freeze_probe"

    def schema(self):
        import gc as planner_gc

        return f"frozen_{planner_gc.get_freeze_count()} long"

    def reader(self, schema):
        return DataSourceReader()


def test_workers_that_read_have_frozen_their_objects(spark, tmp_path):
    path = tmp_path / "t.lance"
    lance_format.write_dataset(pa.table({"id": pa.array(range(200_000), pa.int64())}), path)
    assert spark.read.format("lance").load(str(path)).count() == 200_000
    # the task workers (mapInArrow over two tasks: the read's two workers)
    frozen = spark.range(0, 2, 1, 2).mapInArrow(_probe, "frozen long").collect()
    assert max(row.frozen for row in frozen) > 1000
    # the planning worker that ran the data source's schema() (one create_data_source worker)
    spark.dataSource.register(FreezeProbe)
    column = spark.read.format("lance_freeze_probe").load().schema.fieldNames()[0]
    assert int(column.removeprefix("frozen_")) > 1000
