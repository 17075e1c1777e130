"""``benchmarks/bench_spark_read.py``'s building blocks give the answers its ratios stand on.

The benchmark refuses to time a read whose answer differs from parquet's; these tests hold the
same check on a small table in the suite's session, and check that the ``arrow floor`` replays
files decoded beforehand instead of reading the Lance table (else it would not be a floor).
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

import lance_format
from lance_format.spark import read_dataframe

_BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_spark_read.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_spark_read", _BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def _queries(bench):
    return {
        "full": ({}, lambda df: df),
        "filter": ({"filter": bench.FILTER}, lambda df: df.where(bench.FILTER)),
        "project": ({"columns": bench.PROJECTED}, lambda df: df.select(*bench.PROJECTED)),
    }


@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_lance_and_floor_answer_as_parquet(spark, tmp_path, bench, version):
    table = bench._table(3000)
    path = str(tmp_path / "t.lance")
    lance_format.write_dataset(table, path, data_storage_version=version, max_rows_per_file=1000)
    parquet = str(tmp_path / "t.parquet")
    read_dataframe(spark, path).write.parquet(parquet)
    for name, (options, shape) in _queries(bench).items():
        options = {**options, "rows_per_split": 700}  # several splits, so several replayed files
        parquet_df = shape(spark.read.parquet(parquet))
        expected = bench.aggregates(parquet_df)
        # one sum or max per column and one count per column: every column is decoded
        assert len(expected) >= 2 * len(parquet_df.columns), name
        lance = bench.aggregates(read_dataframe(spark, path, **options))
        floor = bench.aggregates(bench.floor_dataframe(spark, path, str(tmp_path / f"floor_{name}"), **options))
        assert bench.answers_agree(lance, expected), (name, lance, expected)
        assert bench.answers_agree(floor, expected), (name, floor, expected)
        assert len(list((tmp_path / f"floor_{name}").glob("split*.arrow"))) >= 3, name


def test_floor_replays_without_the_table(spark, tmp_path, bench):
    table = bench._table(2000)
    path = str(tmp_path / "t.lance")
    lance_format.write_dataset(table, path, data_storage_version="2.2")
    expected = bench.aggregates(read_dataframe(spark, path))
    floor = bench.floor_dataframe(spark, path, str(tmp_path / "floor"), rows_per_split=500)
    shutil.rmtree(path)
    assert bench.answers_agree(bench.aggregates(floor), expected)
