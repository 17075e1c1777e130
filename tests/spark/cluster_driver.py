"""The driver of the cluster tests (tests/spark/test_cluster.py runs it as its own process).

``python cluster_driver.py <master-url> <project-root> <work-dir> <executor-python>``

A second SparkContext cannot live in the test process (the suite's ``local[2]`` session), so
this script is the cluster application. It puts the project on its own ``sys.path`` only (its
Python workers do not inherit it), ships lance_format with ``ship_to_executors`` and runs the
scenarios: write / data source append / merge / read / change feed / streaming sink and
change-feed source, an executor JVM killed mid-write, and task attempts that fail once. It
records facts (versions, counts, files) in ``<work-dir>/report.json``; the test asserts on them.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

MASTER, ROOT, WORK, EXECUTOR_PYTHON = sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4]
sys.path.insert(0, ROOT)
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ["PYSPARK_PYTHON"] = EXECUTOR_PYTHON  # every Python worker (executors and driver-side ones)

import lance  # noqa: E402  (pylance: the oracle)
from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

JAVA_OPTS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData"
report: dict = {}


def session() -> SparkSession:
    spark = (
        SparkSession.builder.master(MASTER).appName("lance-format-cluster-tests")
        .config("spark.pyspark.python", EXECUTOR_PYTHON)
        .config("spark.pyspark.driver.python", sys.executable)
        .config("spark.driver.memory", "512m").config("spark.executor.memory", "512m")
        .config("spark.executor.cores", "1").config("spark.cores.max", "2")
        .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
        .config("spark.sql.adaptive.enabled", "false").config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "500")  # small batches: tasks finish files early
        .config("spark.task.maxFailures", "4").config("spark.excludeOnFailure.enabled", "false")
        .config("spark.python.task.killTimeout", "500ms")
        .config("spark.local.dir", str(WORK / "local")).config("spark.sql.warehouse.dir", str(WORK / "warehouse"))
        .config("spark.driver.extraJavaOptions", f"{JAVA_OPTS} -Djava.io.tmpdir={WORK} -Dderby.system.home={WORK}")
        .config("spark.executor.extraJavaOptions", JAVA_OPTS)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    wait_for_executors(spark)
    return spark


def wait_for_executors(spark, count: int = 2) -> None:
    """Until ``count`` executors run (after a kill the master starts a new one)."""
    deadline = time.monotonic() + 90
    while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() < count + 1:  # + the driver
        if time.monotonic() > deadline:
            raise TimeoutError("the executors did not register")
        time.sleep(0.2)


def importable_on_executors(spark) -> list:
    def probe(_):
        import importlib.util
        import sys

        spec = importlib.util.find_spec("lance_format")
        yield [None if spec is None else spec.origin, sys.executable, sys.prefix, importlib.util.find_spec("pyarrow") is not None]

    return spark.sparkContext.parallelize(range(2), 2).mapPartitions(probe).collect()


def frame(spark, start: int, stop: int, label: str = "v", partitions: int = 2):
    return spark.range(start, stop, 1, partitions).select(
        "id", (F.col("id") % 7).alias("k"), F.concat(F.lit(label), F.col("id").cast("string")).alias("s"))


def table_facts(uri: str) -> dict:
    """What official Lance sees: version, rows, distinct ids, referenced and present data files."""
    ds = lance.dataset(uri)
    ids = ds.to_table(columns=["id"]).column("id").to_pylist()
    referenced = sorted(d.path for f in ds.get_fragments() for d in f.data_files())
    present = sorted(os.listdir(os.path.join(uri, "data")))
    return dict(version=ds.version, rows=len(ids), distinct=len(set(ids)), min=min(ids), max=max(ids),
                fragments=len(ds.get_fragments()), referenced=referenced, present=present)


def scenario_ship(spark) -> None:
    from lance_format.spark import ship_to_executors

    report["before_ship"] = importable_on_executors(spark)
    report["shipped"] = str(ship_to_executors(spark, WORK))
    report["after_ship"] = importable_on_executors(spark)


def scenario_batch(spark) -> None:
    from lance_format.spark import merge_dataframe, read_changes, read_dataframe, register, write_dataframe

    uri = str(WORK / "batch.lance")
    created = write_dataframe(frame(spark, 0, 20_000, partitions=4), uri, enable_stable_row_ids=True)
    register(spark)
    frame(spark, 20_000, 25_000).write.format("lance").mode("append").save(uri)
    merged = merge_dataframe(frame(spark, 24_000, 26_000, "m"), uri, "id")
    read = read_dataframe(spark, uri).agg(F.count("*").alias("n"), F.countDistinct("id").alias("d"),
                                          F.sum("id").alias("sum")).first()
    source = spark.read.format("lance").load(uri).where("s LIKE 'm%'").count()
    changes = read_changes(spark, uri, begin_version=2, end_version=3).groupBy("_change_type").count().collect()
    compacted = str(WORK / "compacted.lance")  # compaction in Spark's commit worker, from the zip
    for i in range(2):
        frame(spark, i * 400, (i + 1) * 400, partitions=4).write.format("lance").mode("append") \
            .option("coalesceSmallFragments", "false").option("compactSmallFragments", "6").save(compacted)
    coalesced = str(WORK / "coalesced.lance")  # small outputs staged by executors, coalesced by the commit
    frame(spark, 0, 2000, partitions=40).write.format("lance").mode("append").save(coalesced)
    report["batch"] = dict(compacted=table_facts(compacted), coalesced=table_facts(coalesced),
        coalesced_counts=dict(lance.dataset(coalesced).read_transaction(1).transaction_properties),
        created=[created.version, created.rows], merged=[merged.version, merged.rows_updated, merged.rows_inserted],
        read=[read["n"], read["d"], read["sum"]], source_updated=source,
        changes={r["_change_type"]: r["count"] for r in changes}, table=table_facts(uri))


def scenario_streams(spark) -> None:
    folder = WORK / "stream-in"
    for n in range(2):
        frame(spark, n * 1000, (n + 1) * 1000, partitions=1).write.parquet(str(folder / f"part{n}"))
    uri = str(WORK / "stream.lance")
    sink = (spark.readStream.schema("id long, k long, s string").option("maxFilesPerTrigger", 1)
            .option("recursiveFileLookup", "true").parquet(str(folder)).repartition(2)
            .writeStream.format("lance").option("checkpointLocation", str(WORK / "ck-sink"))
            .option("enable_stable_row_ids", "true")
            .trigger(availableNow=True).start(uri))
    sink.awaitTermination()
    feed = (spark.readStream.format("lance").option("readChangeFeed", "true").option("startingVersion", 1)
            .load(uri).writeStream.format("memory").queryName("feed")
            .option("checkpointLocation", str(WORK / "ck-feed")).trigger(availableNow=True).start())
    feed.awaitTermination()
    rows = spark.sql("SELECT _commit_version, _change_type, count(*) AS n, count(DISTINCT id) AS d "
                     "FROM feed GROUP BY 1, 2 ORDER BY 1").collect()
    # a micro-batch whose task fails once: the retried batch commits once, the failed files go
    wait_for_executors(spark)
    retry_uri = str(WORK / "stream-retry.lance")
    retry_in = WORK / "stream-retry-in"
    frame(spark, 0, 20_000, partitions=1).write.parquet(str(retry_in / "part0"))
    markers = WORK / "stream-retry"
    markers.mkdir()
    retried = (spark.readStream.schema("id long, k long, s string").option("recursiveFileLookup", "true")
               .parquet(str(retry_in)).repartition(2)
               .mapInArrow(_fail_once(retry_uri, markers, 0), "id long, k long, s string")
               .writeStream.format("lance").option("checkpointLocation", str(WORK / "ck-retry"))
               .option("max_rows_per_file", "1000").trigger(availableNow=True).start(retry_uri))
    retried.awaitTermination()
    report["stream_retry"] = dict(
        error=str(retried.exception()) if retried.exception() else None,
        failed_attempt_files=_failed_files(markers),
        table=table_facts(retry_uri))
    report["streams"] = dict(sink_error=str(sink.exception()) if sink.exception() else None,
                             feed=[[r[0], r[1], r[2], r[3]] for r in rows], table=table_facts(uri))


def _java_ancestor(pid: int) -> int | None:
    while pid > 1:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        parent = int(fields[1])
        with open(f"/proc/{parent}/comm") as f:
            if f.read().strip() == "java":
                return parent
        pid = parent
    return None


def scenario_kill_executor(spark) -> None:
    """Partition 0's first attempt blocks once its task has written a file; the driver then
    SIGKILLs that executor's JVM. Spark re-runs the task elsewhere; the write commits once."""
    from lance_format.spark import write_dataframe

    wait_for_executors(spark)
    uri = str(WORK / "kill.lance")
    write_dataframe(frame(spark, 0, 1000), uri)
    markers = WORK / "kill-markers"
    markers.mkdir()
    facts: dict = {}

    def hook(batches):
        from pyspark import TaskContext

        context = TaskContext.get()
        first = context.partitionId() == 0 and context.attemptNumber() == 0 and not (markers / "killed").exists()
        if context.partitionId() != 0:
            _wait_for(markers / "killed")  # so the files on disk at the kill are the killed attempt's
        for n, batch in enumerate(batches):
            yield batch
            if first and n == 10:  # past the worker's output buffer: the write task has files
                (markers / "ready").write_text(str(os.getpid()))
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    time.sleep(0.1)  # the driver kills this executor meanwhile
                raise RuntimeError("the executor was not killed")

    def killer() -> None:
        deadline = time.monotonic() + 120
        while not (markers / "ready").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        pid = int((markers / "ready").read_text())
        referenced = set(table_facts(uri)["referenced"])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # the task's first file is complete
            new = set(os.listdir(os.path.join(uri, "data"))) - referenced
            if new:
                break
            time.sleep(0.05)
        facts["files_at_kill"] = sorted(new)
        java = _java_ancestor(pid)
        facts["killed_jvm"] = java is not None
        facts["version_before_kill"] = lance.dataset(uri).version
        (markers / "killed").touch()
        if java is not None:
            os.kill(java, signal.SIGKILL)

    observed: set = set()
    done = threading.Event()

    def observer() -> None:
        """What a pylance reader sees while the job runs, is killed and retried: whole versions."""
        while not done.is_set():
            ds = lance.dataset(uri)
            observed.add((ds.version, ds.count_rows()))
            time.sleep(0.02)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    watcher = threading.Thread(target=observer, daemon=True)
    watcher.start()
    df = frame(spark, 1000, 41_000).mapInArrow(hook, "id long, k long, s string")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
    try:
        result = write_dataframe(df, uri, mode="append", max_rows_per_file=1000)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    thread.join(30)
    done.set()
    watcher.join(30)
    facts["observed"] = sorted(observed)
    facts["result"] = [result.version, result.rows, result.fragments]
    facts["table"] = table_facts(uri)
    report["kill_executor"] = facts


def _wait_for(marker: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def _data_files(uri: str) -> set:
    folder = os.path.join(uri, "data")
    return set(os.listdir(folder)) if os.path.isdir(folder) else set()


def _fail_once(uri: str, markers: Path, partition: int = 1, wait_for_files: bool = True):
    """A mapInArrow function whose ``partition``'s first attempt raises (once its write task
    has finished a file, so that the failed attempt leaves files behind)."""

    def hook(batches):
        from pyspark import TaskContext

        context = TaskContext.get()
        failing = context.partitionId() == partition and context.attemptNumber() == 0
        if context.partitionId() != partition:
            _wait_for(markers / "released")  # so the files on disk at the failure are the failing attempt's
        before = _data_files(uri)
        for n, batch in enumerate(batches):
            yield batch
            if failing and n == 10:  # past the worker's output buffer: the write task has files
                new: set = set()
                deadline = time.monotonic() + (20 if wait_for_files else 0)
                while time.monotonic() < deadline:
                    new = _data_files(uri) - before
                    if new:
                        break
                    time.sleep(0.05)
                (markers / f"failed-{context.stageId()}").write_text(json.dumps(sorted(new)))
                (markers / "released").touch()
                raise RuntimeError("first attempt fails on purpose")

    return hook


def _failed_files(markers: Path) -> list:
    return sorted({f for m in markers.glob("failed-*") for f in json.loads(m.read_text())})


def scenario_task_retries(spark) -> None:
    """spark.task.maxFailures=4: one task attempt of each write fails after writing a file."""
    from lance_format.spark import merge_dataframe, write_dataframe

    wait_for_executors(spark)  # the tasks of one stage wait for each other: both must run at once
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
    facts: dict = {}
    try:
        for path in ("write_dataframe", "data_source", "data_source_coalesced"):
            uri = str(WORK / f"retry-{path}.lance")
            write_dataframe(frame(spark, 0, 1000), uri)
            markers = WORK / f"retry-{path}"
            markers.mkdir()
            df = frame(spark, 1000, 21_000).mapInArrow(_fail_once(uri, markers), "id long, k long, s string")
            if path == "write_dataframe":
                result = write_dataframe(df, uri, mode="append", max_rows_per_file=1000)
                facts[path] = dict(result=[result.version, result.rows])
            elif path == "data_source":
                df.write.format("lance").mode("append").option("max_rows_per_file", "1000").save(uri)
                facts[path] = {}
            else:  # each task's 10,000 rows stay below 1/8 of the target: staged, coalesced by the commit
                df.write.format("lance").mode("append").option("targetRowsPerFile", "100000").save(uri)
                facts[path] = dict(counts=dict(lance.dataset(uri).read_transaction(2).transaction_properties))
            facts[path]["failed_attempt_files"] = _failed_files(markers)
            facts[path]["table"] = table_facts(uri)
        uri = str(WORK / "retry-merge.lance")
        write_dataframe(frame(spark, 0, 1000), uri)
        markers = WORK / "retry-merge"
        markers.mkdir()
        source = frame(spark, 500, 21_000, "m").mapInArrow(_fail_once(uri, markers, 0, wait_for_files=False),
                                                             "id long, k long, s string")
        merged = merge_dataframe(source, uri, "id")
        facts["merge"] = dict(result=[merged.version, merged.rows_updated, merged.rows_inserted],
                              updated=lance.dataset(uri).to_table(filter="s LIKE 'm%'").num_rows,
                              counts=dict(lance.dataset(uri).read_transaction(2).transaction_properties),
                              table=table_facts(uri))
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    report["task_retries"] = facts


def main() -> None:
    spark = session()
    try:
        for scenario in (scenario_ship, scenario_batch, scenario_streams, scenario_kill_executor,
                         scenario_task_retries):
            started = time.monotonic()
            try:
                scenario(spark)
            except Exception:
                report.setdefault("errors", {})[scenario.__name__] = traceback.format_exc()[-4000:]
            report.setdefault("seconds", {})[scenario.__name__] = round(time.monotonic() - started, 1)
            (WORK / "report.json").write_text(json.dumps(report, indent=1))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
