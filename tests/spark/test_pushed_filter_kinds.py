"""Each kind of filter Spark pushes, answered over Lance exactly as over Spark's own parquet of the
same rows: with the session's ``lance`` source, pushdown on and off, and with a reader that
accepts the filters (what ``lance`` does on a Spark without the scan leak), whose accepted
filters the engine evaluates: integer widths, float32/float64 with NaN, -0.0 and infinities,
decimals (exact, 38 digits), strings (URLs, e-mails, quotes, LIKE wildcards, non-ASCII, empty),
booleans, dates, timestamps in several zones and without one, binary, nested struct fields, IN,
<=> and NOT, all with NULLs."""

from __future__ import annotations

import datetime
import decimal
import re

import pyarrow as pa
import pytest

import lance_format
from lance_format.spark.pushed_filters import PUSHDOWN_CONF
from tests.spark.pushdown_sources import register_variants

N = 60


def _table() -> pa.Table:
    def nulls(values, every):
        return [None if i % every == every - 1 else v for i, v in enumerate(values)]

    specials = [float("nan"), -0.0, 0.0, float("inf"), float("-inf"), 0.1, 0.5, 0.25]
    floats = [specials[i] if i < len(specials) else (i * 37 % 100) / 100 for i in range(N)]
    strings = [f"row {i}" for i in range(N)]
    strings[1:13] = ["it's", "a%b", "x_y", "a%", "", "https://example.com/a?q=1", "mail.user+tag@example.org",
                     "Zürich ü", "ROW 3", "row 5a", "https://example.org/", "C:\\temp\\new"]
    utc = datetime.UTC
    base = datetime.datetime(2024, 1, 1, 12, 0, 0, tzinfo=utc)
    instants = [base + datetime.timedelta(hours=(i % 13) - 6, microseconds=i % 3) for i in range(N)]
    return pa.table({
        "id": pa.array(range(N), pa.int64()),
        "i8": pa.array(nulls([(i * 7) % 50 - 25 for i in range(N)], 11), pa.int8()),
        "i16": pa.array(nulls([i * 1000 - 30000 for i in range(N)], 9), pa.int16()),
        "i32": pa.array(nulls([(i % 5) - 2 for i in range(N)], 13), pa.int32()),
        "i64": pa.array(nulls([i if i % 4 else 2**62 + i for i in range(N)], 8), pa.int64()),
        "u32": pa.array(nulls([4_000_000_000 + i * 4_000_000 if i % 2 else i for i in range(N)], 10), pa.uint32()),
        "f32": pa.array(nulls(floats, 7), pa.float32()),
        "f64": pa.array(nulls(floats, 9), pa.float64()),
        "dec": pa.array(nulls([decimal.Decimal((i * 7919) % 1_100_000 - 100_000).scaleb(-2) for i in range(N)], 6),
                        pa.decimal128(15, 2)),
        "big": pa.array(nulls([decimal.Decimal(f"{12345678901234567890 + i - 30}.1234567891") for i in range(N)], 5),
                        pa.decimal128(38, 10)),
        "s": pa.array(nulls(strings, 10), pa.string()),
        "b": pa.array(nulls([i % 3 == 0 for i in range(N)], 7), pa.bool_()),
        "d": pa.array(nulls([datetime.date(2024, 1, 1) + datetime.timedelta(days=i * 3) for i in range(N)], 8),
                      pa.date32()),
        "ts": pa.array(nulls(instants, 9), pa.timestamp("us", tz="UTC")),
        "ts_ny": pa.array(nulls(instants, 9), pa.timestamp("us", tz="America/New_York")),
        "ntz": pa.array(nulls([t.replace(tzinfo=None) for t in instants], 9), pa.timestamp("us")),
        "bin": pa.array(nulls([bytes([i % 4, 2]) for i in range(N)], 6), pa.binary()),
        "st": pa.array(nulls([{"a": i % 9, "b": "x" if i % 2 else None} for i in range(N)], 12),
                       pa.struct([("a", pa.int64()), ("b", pa.string())])),
    })


# where-clauses the accepting reader takes whole: the engine answers them, Spark filters nothing after
ACCEPTED = [
    "i8 = -4", "i16 > 1000", "i32 <= 0", "i64 IN (1, 5, 7, 4611686018427387904)", "i64 <=> 5", "NOT (i64 <=> 5)",
    "NOT (i32 = 0)", "u32 > 4100000000", "f32 > 0.3", "f32 = float(0.1)", "f32 = 0.5", "f32 <= 0", "f64 > 0.5", "f64 = 0",
    "f64 < 0", "NOT (f64 > 0.5)", "f64 IN (0.25, 0.5)", "dec > 2000", "dec = -920.81", "dec IN (1.00, -920.81, 0)", "dec > -920.805", "dec IN (-920.810, 7)",
    "big > 0", "s = 'it''s'", "s > 'row 5'",
    "s IN ('a%b', 'x_y', '')", "s LIKE 'https://%'", "s LIKE '%.org'", "s LIKE '%@%'", "s LIKE '%ü%'", "s = ''",
    "s = 'C:\\\\temp\\\\new'", "s > 'Z'",
    "s IS NULL", "s IS NOT NULL", "NOT (s LIKE 'row%')", "b", "NOT b", "b = false", "b IS NULL",
    "d >= DATE '2024-02-10'", "d IN (DATE '2024-01-04', DATE '2024-02-29')", "d < '2024-01-20'",
    "i64 > 3 AND s LIKE 'row%' AND f64 < 0.9", "st IS NULL",
]
# where-clauses that stay with Spark (in part or whole): wildcards in a string value, NaN and
# infinite literals, timestamps, binary, nested fields, OR across columns
KEPT = [
    "startswith(s, 'a%')", "contains(s, '_')", "f64 = double('NaN')", "f32 > float('-inf')", "f64 < double('inf')",
    "ts > TIMESTAMP '2024-01-01 12:00:00'", "ts_ny = TIMESTAMP '2024-01-01 14:00:00.000002'",
    "ntz >= TIMESTAMP_NTZ '2024-01-01 12:00:00'", "ts IN (TIMESTAMP '2024-01-01 10:00:00.000001')",
    # 30 digits (the last one too, as Spark widens the literal to the column's decimal(38, 10)):
    # PySpark rounds pushed decimals to 28 digits, so only Spark has the exact value
    "big > 12345678901234567890.1234567891", "big <= 12345678901234567870.1234567891",
    "big = 12345678901234567875.1234567891", "big > 12345678901234567875", "bin = X'0102'", "st.a > 3", "st.b = 'x'", "i64 < 3 OR s > 'row 5'", "i64 IN (1, NULL)",
]


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("filter_kinds")
    uri = str(base / "t.lance")
    lance_format.write_dataset(_table(), uri, max_rows_per_file=25)
    parquet = str(base / "t.parquet")
    spark.read.format("lance").load(uri).write.parquet(parquet)
    register_variants(spark)
    return uri, parquet


def _ids(df) -> list[int]:
    return sorted(r.id for r in df.select("id").collect())


def _spark_filters(df) -> bool:
    """Whether Spark filters rows after the scan (a Filter node above it)."""
    return bool(re.search(r"(?<!Runtime)Filter ", df._jdf.queryExecution().executedPlan().toString()))


@pytest.mark.parametrize("where", ACCEPTED + KEPT)
def test_each_filter_answers_as_parquet(spark, tables, session_conf, where):
    uri, parquet = tables
    expected = _ids(spark.read.parquet(parquet).where(where))
    assert 0 < len(expected) < N or where in ("s IS NULL", "st IS NULL", "b IS NULL"), (where, expected)
    for pushdown in ("true", "false"):
        with session_conf({PUSHDOWN_CONF: pushdown}):
            assert _ids(spark.read.format("lance").load(uri).where(where)) == expected, (where, pushdown)
    accepting = spark.read.format("lance_accepting").load(uri).where(where)
    assert _ids(accepting) == expected, where
    assert _spark_filters(accepting) == (where in KEPT), where


@pytest.mark.parametrize("zone", ["America/Los_Angeles", "Asia/Kolkata"])
def test_timestamp_filters_in_other_session_zones(spark, tables, session_conf, zone):
    uri, parquet = tables
    for where in ("ts > TIMESTAMP '2024-01-01 04:00:00'", "ts_ny <= TIMESTAMP '2024-01-01 17:30:00'",
                  "ntz = TIMESTAMP_NTZ '2024-01-01 09:00:00.000001'", "ts = '2024-01-01 12:00:00'"):
        with session_conf({"spark.sql.session.timeZone": zone}):
            expected = _ids(spark.read.parquet(parquet).where(where))
            assert _ids(spark.read.format("lance").load(uri).where(where)) == expected, (zone, where)
            assert _ids(spark.read.format("lance_accepting").load(uri).where(where)) == expected, (zone, where)
