"""Spark reads of a realistic table: ``lance_format.spark`` against Spark's built-in parquet.

The table is ``bench_realistic.realistic_table`` (int64 id, float64, a 10-value category, a
skewed high-cardinality category, an e-mail/URL-like string, JSON-ish text, a nullable string,
a timestamp, a list of tags, a struct), written once as a Lance table per file version (by this
engine) and once as parquet by Spark itself (its defaults: snappy, dictionary pages). Every
query then runs on both, in one local[2] session, interleaved (parquet, lance, lance, ... per
round), ``--repeat`` rounds; the first round warms up (JIT, Python workers), the median of the
others counts. Printed: median wall seconds and median CPU seconds (this process and its
descendants: the JVM and its Python workers; steadier than wall time on a shared machine),
each with the ratio lance / parquet; ``paired``, the median of each round's CPU against the
same round's parquet read (load that drifts between rounds moves both sides of a pair); and
``py cpu s``, the part of the CPU spent in Spark's Python workers (the rest is the JVM's and a
few milliseconds of this driver's). Both sides' answers are compared before timing.
``--conf KEY=VALUE`` (repeatable) sets a Spark setting for the session, e.g. the read settings
the README suggests (``spark.driver.extraJavaOptions`` is added to the benchmark's own).

Queries (each touches every byte it reads: an aggregate over each selected column, so neither
side can return before decoding; Spark's ``noop`` sink would let parquet skip decoding its
dictionary-encoded strings):

* ``full``: all columns, aggregated;
* ``filter``: ``cat = 'echo' AND x > 0.5``, then all columns aggregated (``read_dataframe``: the
  engine evaluates the filter in the tasks; the data source: Spark filters the rows it reads,
  except on a Spark whose filter pushdown keeps each scan's filters to that scan, 5.0 on, where
  the session turns pushdown on and the engine evaluates it);
* ``project``: the URL-like column alone (Lance: ``columns=[...]``; the data source: option
  ``columns``, since Python data sources get no column pruning from Spark).

Lance is read two ways: ``read_dataframe`` (``df``) and ``spark.read.format("lance")`` (``ds``).
A third line, ``arrow floor``, is what any reader written in Python costs at the least: the same
query's rows, decoded beforehand (by this engine, outside the clock) into uncompressed Arrow IPC
files, one per split, and handed to Spark through ``mapInArrow`` straight from a memory map, with
no decoding at all. Its distance to parquet is the price of Spark's Python interface (the Arrow
stream over the worker's socket, and the JVM turning every Arrow value into an ``UnsafeRow``);
a Lance line's distance to it is what decoding Lance in the workers adds.

    python benchmarks/bench_spark_read.py [--rows 3000000] [--repeat 5] [--versions 2.2 2.0]
        [--only full,filter,project] [--json out.json] [--conf KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

FILTER = "cat = 'echo' AND x > 0.5"
PROJECTED = ["url"]


def _pin_workers_to_this_engine(base: str) -> None:
    """Make Spark's Python workers import the ``lance_format`` this process imports.

    Workers start with ``python -m pyspark.daemon`` in the driver's working directory, which
    therefore comes first on their ``sys.path``, before ``PYTHONPATH``: run from another
    checkout's root, the workers would time that checkout's engine. The driver moves to the
    benchmark's scratch directory and puts its engine's root first on ``PYTHONPATH``.
    """
    import lance_format

    root = os.path.dirname(os.path.dirname(os.path.abspath(lance_format.__file__)))
    os.environ["PYTHONPATH"] = os.pathsep.join([root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                                         if p and p != root])
    os.chdir(base)


def _check_worker_engine(spark) -> None:
    import pyarrow as pa

    import lance_format

    def probe(batches):
        import lance_format as worker_engine

        for _ in batches:
            yield pa.record_batch([pa.array([os.path.abspath(worker_engine.__file__)])], names=["file"])

    seen = {row.file for row in spark.range(0, 2, 1, 2).mapInArrow(probe, "file string").collect()}
    if seen != {os.path.abspath(lance_format.__file__)}:
        raise SystemExit(f"Spark's workers import {seen}, this process {lance_format.__file__}")


def session(base: str, conf: dict[str, str] | None = None):
    _pin_workers_to_this_engine(base)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    settings = dict(conf or {})
    # local mode runs one JVM: the driver's Java options are the executor's
    extra_java = settings.pop("spark.driver.extraJavaOptions", "")
    builder = (
        SparkSession.builder.master("local[2]").appName("bench_spark_read")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC").config("spark.driver.memory", "4g")
        .config("spark.local.dir", f"{base}/local").config("spark.sql.warehouse.dir", f"{base}/warehouse")
        .config("spark.driver.extraJavaOptions",
                f"-Djava.io.tmpdir={base} -Dderby.system.home={base} {extra_java}".strip())
    )
    if _pushdown_is_safe():
        builder = builder.config("spark.sql.python.filterPushdown.enabled", "true")
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    _check_worker_engine(spark)
    return spark


def _pushdown_is_safe() -> bool:
    """Whether this Spark keeps each scan's pushed filters to that scan: only then does the
    ``lance`` source accept them (Spark 4.1-4.3 would let one scan read with another's filter,
    see ``lance_format.spark.pushed_filters``), so only then is the setting turned on."""
    import pyspark

    from lance_format.spark.pushed_filters import pushdown_leaks

    return not pushdown_leaks(pyspark.__version__)


def aggregates(df):
    """One aggregate per column (every value decoded), collected to the driver."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    exprs = []
    for field in df.schema:
        c = F.col(field.name)
        t = field.dataType
        if isinstance(t, T.StringType):
            exprs.append(F.sum(F.length(c)))
        elif isinstance(t, (T.TimestampType, T.TimestampNTZType)):
            exprs.append(F.max(c))
        elif isinstance(t, T.ArrayType):
            exprs.append(F.sum(F.size(c)))
        elif isinstance(t, T.StructType):
            exprs.extend(F.sum(c.getField(f.name)) for f in t)
        else:
            exprs.append(F.sum(c))
        exprs.append(F.count(c))
    return df.agg(*exprs).collect()[0]


def _table(rows: int):
    """``realistic_table`` built in pieces of at most 1M rows (pyarrow chunks larger numpy
    string conversions, which the list column's constructor refuses), ids made global."""
    import numpy as np
    import pyarrow as pa
    from bench_realistic import realistic_table

    step = 1_000_000
    table = pa.concat_tables([realistic_table(min(step, rows - s), seed=3 + s // step)
                              for s in range(0, rows, step)]).combine_chunks()
    ids = np.arange(rows, dtype=np.int64)
    table = table.set_column(0, "id", pa.array(ids))
    return table.set_column(table.schema.get_field_index("ts"), "ts",
                            pa.array(1_700_000_000_000_000 + ids * 1_000_000, pa.timestamp("us")))


def _replay_files(files: list[str]):
    """``mapInArrow`` over ``spark.range(len(files))``: task ``i`` yields the batches of Arrow IPC
    file ``i`` from a memory map (zero-copy: nothing is decoded)."""

    def run(batches):
        import pyarrow as pa

        for batch in batches:
            for index in batch.column(0).to_pylist():
                reader = pa.ipc.open_file(pa.memory_map(files[index]))
                for k in range(reader.num_record_batches):
                    yield reader.get_batch(k)

    return run


def floor_dataframe(spark, path: str, base: str, **read_options):
    """The ``arrow floor`` DataFrame of a read: the rows ``read_dataframe(spark, path,
    **read_options)`` returns, split as it splits them, decoded now into Arrow IPC files under
    ``base`` and replayed by the tasks without decoding."""
    import pyarrow as pa

    from lance_format.spark.common import parallelism
    from lance_format.spark.read import plan_read
    from lance_format.spark.tasks import read_split

    plan = plan_read(path, target_splits=parallelism(spark), **read_options)
    os.makedirs(base, exist_ok=True)
    files = []
    for index, split in enumerate(plan.splits):
        files.append(f"{base}/split{index}.arrow")
        with pa.OSFile(files[-1], "wb") as sink:
            writer = None
            for batch in read_split(plan.spec, split):
                if writer is None:
                    writer = pa.ipc.new_file(sink, batch.schema)
                writer.write_batch(batch)
            if writer is None:
                writer = pa.ipc.new_file(sink, pa.schema([]))
            writer.close()
    n = len(files)
    return spark.range(0, n, 1, n).mapInArrow(_replay_files(files), plan.schema)


def tree_cpu() -> dict[str, float]:
    """CPU seconds used so far by this process and all its descendants, by role: ``driver``
    (this process), ``jvm`` (Spark's JVM) and ``python`` (the JVM's descendants: Spark's Python
    workers and their daemon). Steadier than wall time when other work shares the machine.
    Python workers are reused across tasks, so their counters keep growing between two
    readings; workers that exited count in their parent (cutime + cstime)."""
    ticks = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    stats: dict[int, float] = {}
    java: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                head, tail = f.read().rsplit(")", 1)
        except OSError:
            continue
        fields = tail.split()
        pid = int(entry)
        children.setdefault(int(fields[1]), []).append(pid)
        # utime + stime, and cutime + cstime: workers that exited count in their parent
        stats[pid] = sum(int(v) for v in fields[11:15]) / ticks
        if head.endswith("(java"):
            java.add(pid)
    totals = {"driver": 0.0, "jvm": 0.0, "python": 0.0}
    todo = [(os.getpid(), "driver")]
    while todo:
        pid, role = todo.pop()
        if role == "driver" and pid in java:
            role = "jvm"
        elif role == "jvm" and pid not in java:
            role = "python"
        totals[role] += stats.get(pid, 0.0)
        todo.extend((child, role) for child in children.get(pid, ()))
    return totals


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9)
    return a == b


def answers_agree(got, expected) -> bool:
    """Whether two ``aggregates`` rows are the same answer (floats to 1e-9)."""
    return len(got) == len(expected) and all(_same(a, b) for a, b in zip(got, expected))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--versions", nargs="+", default=["2.2", "2.0"])
    parser.add_argument("--only", default="full,filter,project")
    parser.add_argument("--ways", default="df,ds,floor",
                        help="Lance entry points: df (read_dataframe), ds (format); floor: the arrow floor")
    parser.add_argument("--json", default=None)
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting for the session (repeatable), e.g. the read settings the README suggests")
    args = parser.parse_args()
    queries = args.only.split(",")
    ways = args.ways.split(",")

    import lance_format

    base = tempfile.mkdtemp(prefix="bench_spark_read_")
    cwd = os.getcwd()
    try:
        spark = session(base, dict(c.split("=", 1) for c in args.conf))
        from lance_format.spark import read_dataframe, register

        register(spark)
        table = _table(args.rows)
        paths = {}
        for version in args.versions:
            paths[version] = f"{base}/t{version}.lance"
            lance_format.write_dataset(table, paths[version], data_storage_version=version)
        parquet = f"{base}/t.parquet"
        read_dataframe(spark, paths[args.versions[0]]).write.parquet(parquet)
        del table

        def parquet_query(query: str):
            df = spark.read.parquet(parquet)
            if query == "filter":
                df = df.where(FILTER)
            elif query == "project":
                df = df.select(*PROJECTED)
            return aggregates(df)

        def read_options(query: str) -> dict:
            if query == "filter":
                return {"filter": FILTER}
            if query == "project":
                return {"columns": PROJECTED}
            return {}

        floors = {query: floor_dataframe(spark, paths[args.versions[0]], f"{base}/floor_{query}", **read_options(query))
                  for query in queries} if "floor" in ways else {}

        def lance_query(way: str, version: str, query: str):
            path = paths[version]
            if way == "df":
                df = read_dataframe(spark, path, **read_options(query))
            else:
                reader = spark.read.format("lance")
                if query == "project":
                    reader = reader.option("columns", ",".join(PROJECTED))
                df = reader.load(path)
                if query == "filter":
                    df = df.where(FILTER)
            return aggregates(df)

        cases: list[tuple[str, object]] = []
        for query in queries:
            cases.append((f"{query}/parquet", lambda q=query: parquet_query(q)))
            for version in args.versions:
                for way in ways:
                    if way != "floor":
                        cases.append((f"{query}/lance {version} {way}",
                                      lambda w=way, v=version, q=query: lance_query(w, v, q)))
            if query in floors:
                cases.append((f"{query}/arrow floor", lambda q=query: aggregates(floors[q])))

        # the answers must agree (a faster wrong read is no result)
        for query in queries:
            expected = parquet_query(query)
            for name, run in cases:
                if name.startswith(query + "/") and name != query + "/parquet":
                    got = run()
                    if not answers_agree(got, expected):
                        raise SystemExit(f"{name} disagrees with parquet: {got} != {expected}")

        times: dict[str, list[float]] = {name: [] for name, _ in cases}
        cpu: dict[str, list[float]] = {name: [] for name, _ in cases}
        python_cpu: dict[str, list[float]] = {name: [] for name, _ in cases}
        for _ in range(args.repeat):
            for name, run in cases:
                start, start_cpu = time.perf_counter(), tree_cpu()
                run()  # type: ignore[operator]
                times[name].append(time.perf_counter() - start)
                used = {role: seconds - start_cpu[role] for role, seconds in tree_cpu().items()}
                cpu[name].append(sum(used.values()))
                python_cpu[name].append(used["python"])
        spark.stop()
    finally:
        os.chdir(cwd)
        shutil.rmtree(base, ignore_errors=True)

    def warm(values: list[float]) -> list[float]:
        return values[1:] or values

    median = {k: statistics.median(warm(v)) for k, v in times.items()}
    median_cpu = {k: statistics.median(warm(v)) for k, v in cpu.items()}
    median_python = {k: statistics.median(warm(v)) for k, v in python_cpu.items()}
    # each round's CPU against the same round's parquet read: machine load that drifts between
    # rounds moves both sides of a pair alike
    paired = {k: statistics.median(a / b for a, b in zip(warm(v), warm(cpu[k.split("/")[0] + "/parquet"])))
              for k, v in cpu.items()}
    print(f"rows={args.rows}  repeat={args.repeat} (median of warm rounds)  local[2]  "
          f"load average {os.getloadavg()[0]:.1f}" + (f"  conf {' '.join(args.conf)}" if args.conf else ""))
    print(f"{'query':30}{'wall s':>9}{'ratio':>8}{'cpu s':>9}{'ratio':>8}{'paired':>8}{'py cpu s':>10}")
    for query in queries:
        reference, reference_cpu = median[f"{query}/parquet"], median_cpu[f"{query}/parquet"]
        for name in times:
            if name.startswith(query + "/"):
                print(f"{name:30}{median[name]:>9.3f}{median[name] / reference:>8.2f}"
                      f"{median_cpu[name]:>9.2f}{median_cpu[name] / reference_cpu:>8.2f}{paired[name]:>8.2f}"
                      f"{median_python[name]:>10.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": args.rows, "conf": args.conf, "seconds": times, "cpu": cpu,
                       "python_cpu": python_cpu, "median": median, "median_cpu": median_cpu,
                       "paired_cpu_ratio": paired}, f, indent=1)


if __name__ == "__main__":
    main()
