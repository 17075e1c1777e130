"""Spark write and full read: ``lance_format.spark`` against Spark's built-in parquet.

One local[2] session, one DataFrame of ``--rows`` rows (id int64, x float64, s string),
cached and materialized first so neither side pays for generating it. Each measurement is
repeated; the first repetition warms up (JIT, Python workers) and the best of the others is
reported. Reads feed Spark's ``noop`` sink, which forces every row and column. ``write_floor``
receives the rows in Python exactly like the write path (``mapInArrow`` with row-bounded Arrow
batches) and drops them: what Spark's JVM -> Python Arrow transfer alone costs. Driver memory:
the peak RSS of this (driver) Python process during a write + read, measured at
``--small-rows`` and at ``--rows``; it should not grow with the data (rows never reach the
driver, only fragment metadata).

    python benchmarks/bench_spark.py [--rows 5000000] [--small-rows 1000000] [--repeat 3]
        [--file-version 2.0]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time


def session(base: str):
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]").appName("bench_spark")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC").config("spark.driver.memory", "4g")
        .config("spark.local.dir", f"{base}/local").config("spark.sql.warehouse.dir", f"{base}/warehouse")
        .config("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={base} -Dderby.system.home={base}")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def frame(spark, rows: int):
    from pyspark.sql import functions as F

    return spark.range(0, rows, 1, 2).select(
        "id",
        (F.col("id") * F.lit(1.5)).cast("double").alias("x"),
        F.concat(F.lit("user_"), (F.col("id") % 100_000).cast("string")).alias("s"),
    )


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    return 0


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM (peak RSS) on Linux
    except OSError:
        pass


def timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def best(values: list[float]) -> float:
    warm = values[1:] or values
    return min(warm)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--small-rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--file-version", default=None, help="Lance file version of the table (default: engine's)")
    args = parser.parse_args()

    base = tempfile.mkdtemp(prefix="bench_spark_")
    try:
        spark = session(base)
        from lance_format.spark import read_dataframe, write_dataframe

        parquet, table = f"{base}/data.parquet", f"{base}/data.lance"
        extra = {"data_storage_version": args.file_version} if args.file_version else {}

        def write_parquet(df):
            shutil.rmtree(parquet, ignore_errors=True)
            df.write.mode("overwrite").parquet(parquet)

        def write_lance(df):
            shutil.rmtree(table, ignore_errors=True)
            write_dataframe(df, table, **extra)

        from lance_format.spark.common import RowBoundedArrowBatches

        def drop(batches):  # the write path's transfer (mapInArrow) with no writing
            for _ in batches:
                pass
            return iter(())

        def write_floor(df):
            with RowBoundedArrowBatches(spark):
                df.mapInArrow(drop, "n long").collect()

        def read_parquet():
            spark.read.parquet(parquet).write.format("noop").mode("overwrite").save()

        def read_lance():
            read_dataframe(spark, table).write.format("noop").mode("overwrite").save()

        results: dict = {"rows": args.rows, "repeat": args.repeat}
        df = frame(spark, args.rows).cache()
        df.count()
        names = ("write_parquet", "write_lance", "write_floor", "read_parquet", "read_lance")
        times: dict[str, list[float]] = {k: [] for k in names}
        for _ in range(args.repeat):
            times["write_parquet"].append(timed(lambda: write_parquet(df)))
            times["write_lance"].append(timed(lambda: write_lance(df)))
            times["write_floor"].append(timed(lambda: write_floor(df)))
            times["read_parquet"].append(timed(read_parquet))
            times["read_lance"].append(timed(read_lance))
        df.unpersist()
        results["seconds"] = {k: [round(v, 3) for v in vs] for k, vs in times.items()}
        results["best"] = {k: round(best(vs), 3) for k, vs in times.items()}
        results["write_ratio"] = round(best(times["write_lance"]) / best(times["write_parquet"]), 2)
        results["read_ratio"] = round(best(times["read_lance"]) / best(times["read_parquet"]), 2)
        results["write_floor_ratio"] = round(best(times["write_floor"]) / best(times["write_parquet"]), 2)

        import lance_format

        ds = lance_format.dataset(table)
        results["lance_fragments"] = len(ds.get_fragments())
        results["lance_file_version"] = ds.data_storage_version
        results["bytes"] = {
            "parquet": sum(os.path.getsize(os.path.join(parquet, f)) for f in os.listdir(parquet)),
            "lance": sum(d.file_size_bytes for f in ds.manifest.fragments for d in f.files),
        }

        # Driver memory at two sizes: peak RSS growth of this process over a write + full read.
        memory = {}
        for rows in (args.small_rows, args.rows):
            data = frame(spark, rows)
            write_lance(data)  # warm, so both sizes start from the same state
            before = _rss_kib("VmRSS")
            _reset_peak()
            write_lance(data)
            read_lance()
            memory[rows] = {"rss_before_mib": round(before / 1024, 1),
                            "peak_growth_mib": round((_rss_kib("VmHWM") - before) / 1024, 1)}
        results["driver_memory"] = memory
        spark.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)

    print(f"rows={args.rows}  file version={results['lance_file_version']}  fragments={results['lance_fragments']}")
    print(f"{'':16}{'parquet':>10}{'lance':>10}{'ratio':>8}   (best warm seconds; all: see JSON)")
    print(f"{'write':16}{results['best']['write_parquet']:>10.2f}{results['best']['write_lance']:>10.2f}"
          f"{results['write_ratio']:>8.2f}   target <= 1.3")
    print(f"{'write floor':16}{'':>10}{results['best']['write_floor']:>10.2f}{results['write_floor_ratio']:>8.2f}"
          "   (rows handed to Python and dropped)")
    print(f"{'full read':16}{results['best']['read_parquet']:>10.2f}{results['best']['read_lance']:>10.2f}"
          f"{results['read_ratio']:>8.2f}   target <= 1.5")
    for rows, m in results["driver_memory"].items():
        print(f"driver peak RSS growth at {rows:>9} rows: {m['peak_growth_mib']:6.1f} MiB "
              f"(RSS before {m['rss_before_mib']} MiB)")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
