"""Spark Structured Streaming with Lance: the sink, and the change feed / appended rows as sources.

Input: ``--files`` parquet files of ``--rows / --files`` rows each (id int64, x float64, s
string). The sink run reads them as a stream, ``--files-per-trigger`` files per micro-batch
(``maxFilesPerTrigger``: one task per file, so 2 use both cores; ``Trigger.AvailableNow``), and ``writeStream.format("lance")`` commits
one version per batch; it is compared with ONE batch write of the same rows
(``write_dataframe(spark.read.parquet(...))``). Both read the same parquet files, so the ratio
is what streaming costs: one Spark job, one commit and the per-batch fixed costs per file.

The sources then read the table the sink made (stable row ids on, one version per batch):
``readChangeFeed`` from version 1 with ``--versions-per-trigger`` versions per micro-batch, and
the plain stream of appended rows, both into Spark's ``noop`` sink; compared with one batch
``read_changes`` of the same versions.

Each measurement runs ``--repeat`` times on fresh tables/checkpoints; the first run warms up
(JIT, Python workers) and the best of the others is reported. The sink runs with
``spark.sql.execution.arrow.maxBytesPerBatch=2147483647`` (the README's advice; Spark otherwise
re-measures every Arrow batch after each row), and once more at Spark's default for comparison.

    python benchmarks/bench_streaming.py [--rows 2000000] [--files 10] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_spark import best, frame, session, timed

ARROW_BYTES = "spark.sql.execution.arrow.maxBytesPerBatch"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--files-per-trigger", type=int, default=2)
    parser.add_argument("--versions-per-trigger", type=int, default=2)  # 400k rows per source micro-batch
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    base = tempfile.mkdtemp(prefix="bench_streaming_")
    try:
        spark = session(base)
        from pyspark.sql import functions as F

        from lance_format.spark import read_changes, register, write_dataframe

        register(spark)
        source = f"{base}/in"
        per_file = args.rows // args.files
        for i in range(args.files):
            frame(spark, per_file).withColumn("id", F.col("id") + i * per_file) \
                .coalesce(1).write.parquet(f"{source}/part{i:04d}")
        schema = spark.read.parquet(f"{source}/part0000").schema
        rows = per_file * args.files
        runs = {"n": 0}

        def fresh(name: str) -> str:
            runs["n"] += 1
            return f"{base}/{name}{runs['n']}"

        def sink(uri: str, tuned: bool = True) -> None:
            if tuned:
                spark.conf.set(ARROW_BYTES, str(2**31 - 1))
            stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", args.files_per_trigger) \
                .option("recursiveFileLookup", "true").parquet(source)
            query = stream.writeStream.format("lance").option("enable_stable_row_ids", "true") \
                .option("checkpointLocation", fresh("ck")).trigger(availableNow=True).start(uri)
            query.awaitTermination()
            spark.conf.unset(ARROW_BYTES)
            return query

        def batch_write(uri: str) -> None:
            write_dataframe(spark.read.schema(schema).option("recursiveFileLookup", "true").parquet(source), uri,
                            enable_stable_row_ids=True)

        def change_feed(uri: str) -> None:
            stream = spark.readStream.format("lance").option("readChangeFeed", "true") \
                .option("startingVersion", 1).option("maxVersionsPerTrigger", args.versions_per_trigger).load(uri)
            return run_noop(stream)

        def run_noop(stream):
            query = stream.writeStream.format("noop").option("checkpointLocation", fresh("ck")) \
                .trigger(availableNow=True).start()
            query.awaitTermination()
            return query

        def appended(uri: str) -> None:
            stream = spark.readStream.format("lance").option("startingVersion", 1) \
                .option("maxVersionsPerTrigger", args.versions_per_trigger).load(uri)
            return run_noop(stream)

        def batch_changes(uri: str, end: int) -> None:
            read_changes(spark, uri, 0, end).write.format("noop").mode("overwrite").save()

        times: dict[str, list[float]] = {k: [] for k in ("sink", "sink_default_conf", "batch_write", "change_feed",
                                                          "appended_rows", "batch_read_changes")}
        in_batches: dict[str, list[float]] = {k: [] for k in ("sink", "sink_default_conf", "change_feed",
                                                               "appended_rows")}

        def streamed(key: str, run) -> None:
            """Wall time of the whole query (start to stop) and the time inside its micro-batches."""
            start = time.perf_counter()
            query = run()
            times[key].append(time.perf_counter() - start)
            in_batches[key].append(sum(p["durationMs"]["triggerExecution"] for p in query.recentProgress) / 1000)
            assert query.exception() is None
        table = None
        for _ in range(args.repeat):
            uri = fresh("sink.lance")
            streamed("sink", lambda uri=uri: sink(uri))
            streamed("sink_default_conf", lambda: sink(fresh("sink_default.lance"), tuned=False))
            times["batch_write"].append(timed(lambda: batch_write(fresh("batch.lance"))))
            table = uri
        import lance_format

        versions = lance_format.dataset(table).version
        micro_batches = -(-args.files // args.files_per_trigger)
        assert versions == micro_batches, versions
        assert lance_format.dataset(table).count_rows() == rows
        for _ in range(args.repeat):
            streamed("change_feed", lambda: change_feed(table))
            streamed("appended_rows", lambda: appended(table))
            times["batch_read_changes"].append(timed(lambda: batch_changes(table, versions)))
        spark.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)

    fastest = {k: best(v) for k, v in times.items()}
    rate = {k: rows / v for k, v in fastest.items()}
    batches_best = {k: best(v) for k, v in in_batches.items()}
    batch_rate = {k: rows / v for k, v in batches_best.items()}
    results = {
        "rows": rows, "micro_batches": micro_batches, "versions_per_trigger": args.versions_per_trigger,
        "seconds": {k: [round(x, 3) for x in v] for k, v in times.items()},
        "seconds_in_micro_batches": {k: [round(x, 3) for x in v] for k, v in in_batches.items()},
        "rows_per_second_in_micro_batches": {k: round(v) for k, v in batch_rate.items()},
        "rows_per_second": {k: round(v) for k, v in rate.items()},
        "sink_to_batch_write_rate": round(rate["sink"] / rate["batch_write"], 2),
        "sink_in_batches_to_batch_write_rate": round(batch_rate["sink"] / rate["batch_write"], 2),
        "change_feed_to_batch_read_changes_rate": round(rate["change_feed"] / rate["batch_read_changes"], 2),
    }
    print(f"rows={rows}  sink micro-batches={micro_batches} ({per_file * args.files_per_trigger} rows each)  "
          f"source: {args.versions_per_trigger} versions per trigger  best warm of {args.repeat}")
    print(f"{'':34}{'seconds':>9}{'rows/s':>12}{'in batches':>12}{'rows/s':>12}")
    for key, label in (("sink", "sink (writeStream lance)"), ("sink_default_conf", "sink, Spark's default Arrow conf"),
                       ("batch_write", "batch write_dataframe"), ("change_feed", "change-feed source"),
                       ("appended_rows", "appended-rows source"), ("batch_read_changes", "batch read_changes")):
        extra = f"{batches_best[key]:>12.2f}{batch_rate[key]:>12,.0f}" if key in batches_best else ""
        print(f"{label:34}{fastest[key]:>9.2f}{rate[key]:>12,.0f}{extra}")
    print("seconds: the whole query, start to stop; in batches: the sum of its micro-batches' triggerExecution")
    print(f"sink / batch write (rows/s): {results['sink_to_batch_write_rate']:.2f} whole query, "
          f"{results['sink_in_batches_to_batch_write_rate']:.2f} in micro-batches")
    print(f"change-feed source / batch read_changes (rows/s): {results['change_feed_to_batch_read_changes_rate']:.2f}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
