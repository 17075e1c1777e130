"""TPC-H on Spark: the 22 queries over Lance tables against the same queries over Spark's parquet.

Data: ``tpchgen-cli`` (PyPI, the ``test`` extra) generates the 8 tables as parquet; Spark reads
them and writes each table twice, with ``df.write.format("lance")`` and with
``df.write.parquet`` (Spark's defaults: snappy), both timed (the write ratio). Each query then
runs over temp views of ``spark.read.format("lance").load(...)`` and of
``spark.read.parquet(...)`` (one DataFrame per table and format, created once and queried
repeatedly, as a user's views are), in one ``local[2]`` session with the README's recommended
settings (``--no-readme-settings`` leaves them out), interleaved per round (parquet, then lance);
the first round warms up. Both answers are compared before any timing counts: rows as sets
(decimals exactly, doubles to 1e-9), in order where the query orders its whole result.

Printed per query: the best warm wall time of each format, their ratio, and the CPU ratio
(this process and its descendants: the JVM and its Python workers, from ``/proc``); then the
geometric mean of the ratios. ``spark.sql.python.filterPushdown.enabled`` is set only where
the ``lance`` source accepts filters (a Spark without the scan leak, see
:mod:`lance_format.spark.pushed_filters`).

``--lance-source python`` reads the Lance tables with the Python data source instead of the JVM
source (:mod:`lance_format.spark.jvm`, which ``register`` enables where ``javac`` exists).

Run it with the engine under test first on the path (``PYTHONPATH=$PWD``, see
``bench_spark_read.session``); at scale factor 1 it takes a long while on 2 cores.

    PYTHONPATH=$PWD python benchmarks/bench_tpch.py [--scale 1] [--repeat 3] [--queries 1,6,22] [--json out.json]
        [--conf KEY=VALUE ...] [--data DIR] [--no-readme-settings] [--lance-source jvm|python]
"""

from __future__ import annotations

import argparse
import decimal
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tpch_queries import QUERIES, TABLES, ordered  # noqa: E402

# The README's read settings (its Spark section), and its setting for df.write.format("lance").
README_JAVA = "-Darrow.enable_unsafe_memory_access=true -Darrow.enable_null_check_for_get=false"
README_SETTINGS = {
    "spark.python.unix.domain.socket.enabled": "true",
    "spark.driver.extraJavaOptions": README_JAVA,
    "spark.executor.extraJavaOptions": README_JAVA,
    "spark.sql.execution.arrow.maxBytesPerBatch": "2147483647",
}


def tpchgen() -> str:
    """The ``tpchgen-cli`` executable (beside this Python, or on PATH)."""
    beside = os.path.join(os.path.dirname(sys.executable), "tpchgen-cli")
    found = beside if os.path.exists(beside) else shutil.which("tpchgen-cli")
    if not found:
        raise SystemExit("tpchgen-cli is missing: pip install tpchgen-cli (the test extra has it)")
    return found


def generate(scale: float, out: str) -> str:
    """The 8 tables at ``scale`` as parquet files ``out/<table>.parquet`` (kept if present)."""
    if all(os.path.exists(os.path.join(out, f"{t}.parquet")) for t in TABLES):
        return out
    os.makedirs(out, exist_ok=True)
    subprocess.run([tpchgen(), "parquet", "-s", str(scale), "-o", out, "--overwrite"], check=True,
                   stdout=subprocess.DEVNULL)
    return out


def write_tables(spark, generated: str, base: str) -> dict[str, float]:
    """Each generated table written as Lance (``format("lance")``) and as parquet by Spark;
    seconds per format. Returns the time each format took in total."""
    seconds = {"lance": 0.0, "parquet": 0.0}
    for table in TABLES:
        df = spark.read.parquet(os.path.join(generated, f"{table}.parquet"))
        for fmt in ("parquet", "lance"):
            start = time.perf_counter()
            writer = df.write.mode("overwrite")
            if fmt == "lance":
                writer.format("lance").save(os.path.join(base, "lance", table))
            else:
                writer.parquet(os.path.join(base, "parquet", table))
            seconds[fmt] += time.perf_counter() - start
    return seconds


def frames(spark, base: str) -> dict[str, dict[str, Any]]:
    """One DataFrame per table and format (the views of each format are these, re-registered)."""
    return {
        "lance": {t: spark.read.format("lance").load(os.path.join(base, "lance", t)) for t in TABLES},
        "parquet": {t: spark.read.parquet(os.path.join(base, "parquet", t)) for t in TABLES},
    }


def use(tables: dict[str, Any]) -> None:
    for name, df in tables.items():
        df.createOrReplaceTempView(name)


def _value_key(value: Any) -> Any:
    if isinstance(value, float):
        return (2, round(value, 6)) if math.isfinite(value) else (3, str(value))
    if value is None:
        return (0, "")
    return (1, str(value)) if not isinstance(value, (int, decimal.Decimal)) else (1, value)


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) or (a != a and b != b)
    return a == b


def same_answer(got: list, expected: list, in_order: bool) -> bool:
    """Whether two query results are the same answer: rows in order when ``in_order``, else as
    multisets; doubles to 1e-9, everything else (decimals too) exactly."""
    if len(got) != len(expected):
        return False
    rows_got = [tuple(r) for r in got]
    rows_expected = [tuple(r) for r in expected]
    if not in_order:
        def key(row: tuple) -> tuple:
            return tuple(_value_key(v) for v in row)
        rows_got, rows_expected = sorted(rows_got, key=key), sorted(rows_expected, key=key)
    return all(len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
               for a, b in zip(rows_got, rows_expected))


def check_answers(spark, dataframes: dict[str, dict[str, Any]], queries: list[int]) -> dict[int, str]:
    """Every query over lance and over parquet; the queries whose answers differ, with why."""
    wrong = {}
    for q in queries:
        use(dataframes["parquet"])
        expected = spark.sql(QUERIES[q]).collect()
        use(dataframes["lance"])
        got = spark.sql(QUERIES[q]).collect()
        print(f"checked q{q}", file=sys.stderr, flush=True)
        if not same_answer(got, expected, ordered(q)):
            wrong[q] = f"lance {got[:3]} ... ({len(got)} rows) != parquet {expected[:3]} ... ({len(expected)} rows)"
    return wrong


def geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3, help="rounds; the first warms up")
    parser.add_argument("--queries", default=",".join(str(q) for q in QUERIES))
    parser.add_argument("--data", default=None, help="keep the generated parquet here (reused when present)")
    parser.add_argument("--json", default=None)
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--no-readme-settings", action="store_true")
    parser.add_argument("--lance-source", choices=("jvm", "python"), default="jvm",
                        help="the JVM DataSource V2 (where javac exists) or the Python data source")
    args = parser.parse_args()
    queries = [int(q) for q in args.queries.split(",")]

    from bench_spark_read import session, tree_cpu

    base = tempfile.mkdtemp(prefix="bench_tpch_")
    cwd = os.getcwd()
    generated = os.path.abspath(args.data) if args.data else os.path.join(base, "generated")
    conf = {} if args.no_readme_settings else dict(README_SETTINGS)
    conf.update(dict(c.split("=", 1) for c in args.conf))
    try:
        start = time.perf_counter()
        generate(args.scale, generated)
        generate_seconds = time.perf_counter() - start
        spark = session(base, conf)
        from lance_format.spark import register
        from lance_format.spark.pushed_filters import PUSHDOWN_CONF

        register(spark, jvm=args.lance_source == "jvm")
        from lance_format.spark.jvm import loaded

        source = "jvm" if loaded(spark) else "python"
        pushdown = spark.conf.get(PUSHDOWN_CONF, "false")
        write_cpu = tree_cpu()
        writes = write_tables(spark, generated, base)
        write_cpu_used = sum(tree_cpu().values()) - sum(write_cpu.values())
        dataframes = frames(spark, base)
        wrong = check_answers(spark, dataframes, queries)
        if wrong:
            for q, why in wrong.items():
                print(f"q{q} disagrees with parquet: {why}")
            raise SystemExit(f"{len(wrong)} queries answer differently over lance: {sorted(wrong)}")

        times: dict[str, dict[int, list[float]]] = {"parquet": {q: [] for q in queries}, "lance": {q: [] for q in queries}}
        cpu: dict[str, dict[int, list[float]]] = {"parquet": {q: [] for q in queries}, "lance": {q: [] for q in queries}}
        for round_ in range(args.repeat):
            print(f"round {round_ + 1} of {args.repeat}", file=sys.stderr, flush=True)
            for q in queries:
                for fmt in ("parquet", "lance"):
                    use(dataframes[fmt])
                    begin, begin_cpu = time.perf_counter(), tree_cpu()
                    spark.sql(QUERIES[q]).collect()
                    times[fmt][q].append(time.perf_counter() - begin)
                    cpu[fmt][q].append(sum(tree_cpu().values()) - sum(begin_cpu.values()))
        version = spark.version
        spark.stop()
    finally:
        os.chdir(cwd)
        shutil.rmtree(base, ignore_errors=True)

    def warm(values: list[float]) -> list[float]:
        return values[1:] or values

    best = {fmt: {q: min(warm(v)) for q, v in per.items()} for fmt, per in times.items()}
    best_cpu = {fmt: {q: min(warm(v)) for q, v in per.items()} for fmt, per in cpu.items()}
    ratios = {q: best["lance"][q] / best["parquet"][q] for q in queries}
    cpu_ratios = {q: best_cpu["lance"][q] / best_cpu["parquet"][q] for q in queries}
    print(f"TPC-H scale factor {args.scale}  Spark {version}  local[2]  rounds {args.repeat} (best warm)  "
          f"lance source {source}  filter pushdown {pushdown}  load average {os.getloadavg()[0]:.1f}  generated in {generate_seconds:.0f} s")
    print(f"settings: {' '.join(f'{k}={v}' for k, v in conf.items()) or '(none)'}")
    print(f"write: lance {writes['lance']:.1f} s  parquet {writes['parquet']:.1f} s  "
          f"ratio {writes['lance'] / writes['parquet']:.2f}  (cpu of both writes {write_cpu_used:.0f} s)")
    print(f"{'query':>6}{'parquet s':>11}{'lance s':>10}{'ratio':>8}{'cpu ratio':>11}")
    for q in queries:
        print(f"{'q' + str(q):>6}{best['parquet'][q]:>11.2f}{best['lance'][q]:>10.2f}{ratios[q]:>8.2f}"
              f"{cpu_ratios[q]:>11.2f}")
    print(f"{'geomean':>6}{'':>21}{geomean(list(ratios.values())):>8.2f}{geomean(list(cpu_ratios.values())):>11.2f}")
    print(f"{'total':>6}{sum(best['parquet'].values()):>11.1f}{sum(best['lance'].values()):>10.1f}"
          f"{sum(best['lance'].values()) / sum(best['parquet'].values()):>8.2f}"
          f"{sum(best_cpu['lance'].values()) / sum(best_cpu['parquet'].values()):>11.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"scale": args.scale, "spark": version, "lance_source": source, "conf": conf, "pushdown": pushdown, "writes": writes,
                       "seconds": times, "cpu": cpu, "ratios": ratios, "cpu_ratios": cpu_ratios,
                       "geomean": geomean(list(ratios.values())),
                       "geomean_cpu": geomean(list(cpu_ratios.values()))}, f, indent=1)


if __name__ == "__main__":
    main()
