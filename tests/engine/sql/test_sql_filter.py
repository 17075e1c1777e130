"""Tests of the SQL filter translator (lance_format.dataset.sql.filter), cross-checked with pylance."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lance_format.dataset.sql.filter import referenced_columns, to_expression
from lance_format.errors import InvalidInputError

NY = "America/New_York"


def _table() -> pa.Table:
    ts = [dt.datetime(2024, 1, 1, 10), dt.datetime(2024, 1, 1, 9), None,
          dt.datetime(2023, 1, 1), dt.datetime(2024, 1, 1, 10, 0, 1), dt.datetime(2025, 1, 1)]
    return pa.table({
        "id": pa.array(range(6), pa.int64()),
        "i": pa.array([1, 2, None, 4, 5, -3], pa.int32()),
        "f": pa.array([1.5, None, 2.0, 3.25, -1.0, 0.0], pa.float64()),
        "s": pa.array(["apple", "Banana", None, "a%b", "a_c", "xyz"], pa.string()),
        "ls": pa.array(["it's", "b", "c", None, "e", "f"], pa.large_string()),
        "b": pa.array([True, False, None, True, False, True]),
        "my col": pa.array([1, 2, 3, 4, 5, 6], pa.int64()),
        "Up": pa.array([1, 2, 3, 4, 5, 6], pa.int64()),
        "d": pa.array([dt.date(2024, 1, 1), dt.date(2024, 1, 2), None, dt.date(2023, 12, 31),
                       dt.date(2024, 6, 1), dt.date(2024, 1, 1)], pa.date32()),
        "ts": pa.array(ts, pa.timestamp("us")),
        # Built from naive datetimes, so the stored instants are these times in UTC.
        "tz": pa.array(ts, pa.timestamp("us", tz=NY)),
        "tzu": pa.array(ts, pa.timestamp("ns", tz="UTC")),
        "dec": pa.array([Decimal("1.10"), Decimal("2.00"), None, Decimal("-3.5"), Decimal("10"),
                         Decimal("0")], pa.decimal128(10, 2)),
        "st": pa.array([{"x": 1, "y": "a"}, {"x": 2, "y": "b"}, {"x": 3, "y": None},
                        {"x": None, "y": "d"}, {"x": 5, "y": None}, {"x": 6, "y": "f"}],
                       pa.struct([("x", pa.int32()), ("y", pa.string())])),
        "u": pa.array([1, 2, 3, 4, 5, 6], pa.uint8()),
    })


TABLE = _table()


def ids(sql: str, table: pa.Table = TABLE) -> list[int]:
    return sorted(table.filter(to_expression(sql, table.schema))["id"].to_pylist())


# --------------------------------------------------------------------------- constructs
@pytest.mark.parametrize("sql, expected", [
    # comparisons, == alias, NULL comparisons never match
    ("i = 2", [1]), ("i == 2", [1]), ("i != 1", [1, 3, 4, 5]), ("i <> 1", [1, 3, 4, 5]),
    ("i < 2", [0, 5]), ("i <= 2", [0, 1, 5]), ("i > 2", [3, 4]), ("i >= 2", [1, 3, 4]),
    ("2 < i", [3, 4]), ("i = NULL", []), ("i > f", [3, 4]),
    # logic with three-valued semantics
    ("i > 1 AND f > 1", [3]), ("i > 4 OR f > 3", [3, 4]), ("NOT (i > 2)", [0, 1, 5]),
    ("NOT b", [1, 4]), ("b", [0, 3, 5]), ("b = true", [0, 3, 5]), ("b = FALSE", [1, 4]),
    ("i > 2 OR s IS NULL", [2, 3, 4]), ("(i > 1 OR i IS NULL) AND f IS NOT NULL", [2, 3, 4]),
    ("true", [0, 1, 2, 3, 4, 5]), ("1 = 1", [0, 1, 2, 3, 4, 5]), ("false", []),
    # IS [NOT] NULL / TRUE / FALSE, IS [NOT] DISTINCT FROM, legacy is_valid()
    ("s IS NULL", [2]), ("s IS NOT NULL", [0, 1, 3, 4, 5]), ("b IS TRUE", [0, 3, 5]),
    ("b IS NOT TRUE", [1, 2, 4]), ("b IS FALSE", [1, 4]), ("b IS NOT FALSE", [0, 2, 3, 5]),
    ("s IS NOT DISTINCT FROM 'apple'", [0]), ("i IS DISTINCT FROM 1", [1, 2, 3, 4, 5]),
    ("is_valid(s)", [0, 1, 3, 4, 5]),
    # IN / NOT IN with NULLs in the list and in the column
    ("i IN (1, 2)", [0, 1]), ("i IN (1, 2, NULL)", [0, 1]), ("i NOT IN (1, 2)", [3, 4, 5]),
    ("i NOT IN (1, 2, NULL)", []), ("s IN ('apple', 'xyz')", [0, 5]), ("i IN (i, 3)", [0, 1, 3, 4, 5]),
    ("f IN (1.5, 2)", [0, 2]), ("i IN (1, 2.5)", [0]), ("i IN (NULL)", []), ("NOT i IN (1)", [1, 3, 4, 5]),
    # BETWEEN
    ("i BETWEEN 2 AND 4", [1, 3]), ("i NOT BETWEEN 2 AND 4", [0, 4, 5]),
    ("f BETWEEN -1 AND 1.5", [0, 4, 5]),
    # LIKE / ILIKE, backslash escape (default), ESCAPE clause
    ("s LIKE 'a%'", [0, 3, 4]), ("s LIKE 'a_c'", [4]), ("s LIKE 'a\\%b'", [3]), ("s LIKE 'A%'", []),
    ("s NOT LIKE 'a%'", [1, 5]), ("s ILIKE 'b%'", [1]), ("s NOT ILIKE 'B%'", [0, 3, 4, 5]),
    ("s LIKE '%y%'", [5]), ("s LIKE NULL", []), ("s LIKE 'a!%b' ESCAPE '!'", [3]),
    ("s LIKE 'a!_c' ESCAPE '!'", [4]), ("ls LIKE 'it''s'", [0]),
    # arithmetic: integer division truncates, % takes the dividend's sign
    ("i + 1 = 3", [1]), ("1 + i = 3", [1]), ("i - 1 = 0", [0]), ("i * 2.5 > 5", [3, 4]),
    ("i / 2 = 1", [1]), ("i / 2 = -1", [5]), ("i % 2 = 1", [0, 4]), ("i % 2 = -1", [5]),
    ("-i > 0", [5]), ("-(i) = 3", [5]), ("i = -3", [5]), ("f / 0 > 1", [0, 2, 3]),
    ("i + f > 3", [3, 4]), ("f * 100 > 1e2", [0, 2, 3]), ("f > 1.5e0", [2, 3]), ("f > .5", [0, 2, 3]),
    ("i = 1 + 1", [1]), ("i = 2 * 2 - 1 + 2", [4]),
    # literals and identifiers: double quotes are strings (pylance), backticks identifiers
    ("s = 'it''s'", []), ("ls = 'it''s'", [0]), ("s = \"apple\"", [0]),
    ("\"my col\" IS NOT NULL", [0, 1, 2, 3, 4, 5]), ("`my col` > 3", [3, 4, 5]),
    ("`Up` > 3", [3, 4, 5]), ("up > 3", [3, 4, 5]), ("ID = 1", [1]),
    # nested struct fields
    ("st.x > 1", [1, 2, 4, 5]), ("st.y = 'a'", [0]), ("st.x IS NULL", [3]), ("st['x'] = 1", [0]),
    ("st IS NULL", []),
    # casts
    ("CAST(i AS string) = '4'", [3]), ("CAST(f AS int) = 3", [3]), ("CAST('5' AS int) = i", [4]),
    ("CAST(i AS double) = 1.0", [0]), ("CAST(i AS bigint) = 1", [0]), ("CAST(i AS tinyint) = 1", [0]),
    ("CAST(f AS decimal(10,2)) > 1", [0, 2, 3]), ("CAST(d AS string) = '2024-01-01'", [0, 5]),
    ("CAST(id AS int unsigned) = 4", [4]), ("CAST(s AS varchar) = 'xyz'", [5]),
    # other type mixes pyarrow just handles
    ("f = 2", [2]), ("u > 3", [3, 4, 5]), ("u > -1", [0, 1, 2, 3, 4, 5]), ("u = 300", []),
    ("i > 2.5", [3, 4]), ("dec > 1", [0, 1, 4]), ("dec > 1.5", [1, 4]), ("dec * 2 > 3", [1, 4]),
    ("dec + 1 > 2.5", [1, 4]), ("dec BETWEEN 1 AND 2", [0, 1]), ("dec IN (1.1, 2)", [0, 1]),
    # functions
    ("lower(s) = 'banana'", [1]), ("upper(s) = 'BANANA'", [1]), ("abs(i) = 3", [5]),
    ("length(s) = 3", [3, 4, 5]), ("s || 'x' = 'applex'", [0]),
])
def test_constructs(sql, expected):
    assert ids(sql) == expected


@pytest.mark.parametrize("sql, expected", [
    # typed literals
    ("d = date '2024-01-01'", [0, 5]), ("d = date '2024-1-1'", [0, 5]),
    ("d BETWEEN date '2024-01-01' AND date '2024-01-02'", [0, 1, 5]),
    ("ts < timestamp '2024-01-01 10:00:00'", [1, 3]), ("ts = timestamp '2024-01-01T10:00:00'", [0]),
    ("ts = timestamp '2024-01-01 10:00:00.000000'", [0]), ("ts = timestamp(3) '2024-01-01 10:00:00'", [0]),
    ("ts = timestamp '2024-01-01 12:00:00+02:00'", [0]), ("ts >= date '2024-01-01'", [0, 1, 4, 5]),
    ("d < timestamp '2024-01-01 12:00:00'", [0, 3, 5]),
    # plain strings coerced to the column type (pylance rejects these)
    ("d = '2024-01-01'", [0, 5]), ("d > '2024-01-01'", [1, 4]), ("d IN ('2024-01-01', '2024-06-01')", [0, 4, 5]),
    ("ts >= '2024-01-01'", [0, 1, 4, 5]), ("ts >= '2024-01-01 09:30:00'", [0, 4, 5]),
    ("ts BETWEEN '2024-01-01' AND '2024-01-01 10:00:00'", [0, 1]),
    ("dec = '2.00'", [1]), ("dec > '1.5'", [1, 4]), ("dec = '1.1'", [0]),
    # tz-aware: a naive literal is wall-clock time in the column's zone (pylance 14); the UTC
    # column therefore compares with UTC; an explicit offset in a plain string is an instant.
    ("tz = timestamp '2024-01-01 05:00:00'", [0]), ("tz = timestamp '2024-01-01 10:00:00'", []),
    ("tz >= timestamp '2022-12-31 19:00:00'", [0, 1, 3, 4, 5]),
    ("tz >= timestamp '2022-12-31 19:00:01'", [0, 1, 4, 5]),
    ("tz = '2024-01-01 05:00:00'", [0]), ("tz = '2024-01-01T10:00:00Z'", [0]),
    ("tz = '2024-01-01 12:00:00+02:00'", [0]), ("tz >= date '2023-01-01'", [0, 1, 3, 4, 5]),
    ("tzu = '2024-01-01 10:00:00'", [0]), ("tzu = timestamp '2024-01-01 10:00:00'", [0]),
    ("tzu > ts", []), ("tz = ts", []),
])
def test_temporal_and_decimal(sql, expected):
    assert ids(sql) == expected


def test_deep_struct_path_and_system_columns():
    inner = pa.array([{"c": {"d": {"e": i}}} for i in range(4)])
    table = pa.table({
        "id": pa.array(range(4), pa.int64()),
        "a": pa.StructArray.from_arrays([inner], ["b"]),
        "_rowid": pa.array([10, 11, 12, 13], pa.uint64()),
        "_rowaddr": pa.array([0, 1, 2, 3], pa.uint64()),
        "_row_created_at_version": pa.array([1, 1, 2, 2], pa.uint64()),
        "_row_last_updated_at_version": pa.array([1, 3, 2, 3], pa.uint64()),
    })
    schema = pa.schema([table.schema.field("id"), table.schema.field("a")])  # no system columns
    for sql, expected in [
        ("a.b.c.d.e >= 2", [2, 3]), ("a.b.c.d.e = 1 OR _rowid = 13", [1, 3]),
        ("_rowaddr < 2", [0, 1]), ("_row_created_at_version = 2", [2, 3]),
        ("_row_last_updated_at_version > _row_created_at_version", [1, 3]),
    ]:
        assert sorted(table.filter(to_expression(sql, schema))["id"].to_pylist()) == expected, sql
    assert referenced_columns("a.b.c.d.e = 1 OR _rowid = 13", schema) == ["a", "_rowid"]


def test_pyarrow_expressions_and_none():
    # a pyarrow expression goes through the SQL layer (sql.pushdown) and keeps pyarrow's rows;
    # one it cannot translate (a field by position) is evaluated as given
    for expr in (pc.field("i") > 1, pc.field(1) > 1):
        assert TABLE.filter(to_expression(expr, TABLE.schema)).equals(TABLE.filter(expr))
    assert to_expression(pc.field(1) > 1, TABLE.schema).equals(pc.field(1) > 1)
    assert to_expression(None, TABLE.schema) is None


def test_large_in_list_and_multiple_chunks():
    table = pa.concat_tables([pa.table({"id": pa.array(range(k * 10, k * 10 + 10), pa.int64())}) for k in range(3)])
    sql = "id IN (" + ", ".join(str(v) for v in range(0, 1000, 7)) + ", NULL)"
    assert ids(sql, table) == [v for v in range(30) if v % 7 == 0]
    assert ids("id NOT IN (" + ", ".join(str(v) for v in range(0, 1000, 7)) + ")", table) == [
        v for v in range(30) if v % 7 != 0]


# --------------------------------------------------------------------------- failures
@pytest.mark.parametrize("sql, fragments", [
    ("foo = 1", ["'foo'", "available columns", "id, i, f", "_rowid"]),
    ("`up` > 3", ["'up'", "Up"]),
    ("st.z = 1", ["'z'", "st"]),
])
def test_unknown_columns(sql, fragments):
    with pytest.raises(InvalidInputError) as info:
        to_expression(sql, TABLE.schema)
    for fragment in fragments:
        assert fragment in str(info.value)
    assert info.value.column is not None


@pytest.mark.parametrize("sql", ["i = 1 ==", "i > 1 AND", "(i > 1", "i > > 2", "i IN ()"])
def test_syntax_errors_name_the_filter(sql):
    with pytest.raises(InvalidInputError) as info:
        to_expression(sql, TABLE.schema)
    assert sql in str(info.value)


@pytest.mark.parametrize("sql, construct", [
    ("TRY_CAST(s AS int) IS NULL", "TRY_CAST"),
    ("i IN (SELECT 1)", "subquery"),
    ("s LIKE s", "non-literal pattern"),
    ("substr(s, 1, 2) = 'ap'", "function"),
    ("my_udf(s)", "function"),
    ("i > 1 y", "Alias"),
    ("i = 1; DROP TABLE t", "Block"),
    ("i BETWEEN SYMMETRIC 1 AND 2", "SYMMETRIC"),
    ("CAST(i AS decimal) = 1", "DECIMAL needs a precision"),
    ("CAST(ts AS timestamp(5)) = ts", "precision"),
])
def test_unsupported_constructs(sql, construct):
    with pytest.raises(InvalidInputError) as info:
        to_expression(sql, TABLE.schema)
    assert construct in str(info.value)


@pytest.mark.parametrize("sql, fragment", [
    ("i", "does not return a boolean"), ("NULL", "does not return a boolean"),
    ("s > 5", "Invalid SQL filter"), ("i > '3'", "Invalid SQL filter"),
    ("d = date 'garbage'", "garbage"), ("dec = 'abc'", "abc"), ("ts > 'yesterday'", "yesterday"),
    ("   ", "empty"),
])
def test_invalid_filters(sql, fragment):
    with pytest.raises(InvalidInputError) as info:
        to_expression(sql, TABLE.schema)
    assert fragment in str(info.value)


def test_wrong_filter_type():
    with pytest.raises(InvalidInputError):
        to_expression(42, TABLE.schema)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        referenced_columns(42, TABLE.schema)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- referenced_columns
def test_referenced_columns_sql():
    schema = TABLE.schema
    assert referenced_columns("s LIKE 'a%' AND i > 1", schema) == ["i", "s"]
    assert referenced_columns("st.x = 1 OR `my col` = 2 OR UP = 3", schema) == ["my col", "Up", "st"]
    assert referenced_columns("_rowid < 3 AND _row_last_updated_at_version = 2", schema) == [
        "_rowid", "_row_last_updated_at_version"]
    assert referenced_columns("s = \"i\"", schema) == ["s"]  # a double-quoted string is no column
    assert referenced_columns("1 = 1", schema) == []


def test_referenced_columns_expression():
    schema = TABLE.schema
    expr = (pc.field("i") > 1) & (pc.field("st", "y") == "f") | pc.field("_rowaddr").is_null()
    assert referenced_columns(expr, schema) == ["i", "st", "_rowaddr"]
    # A string literal that happens to name a column is not a reference.
    assert referenced_columns(pc.field("s") == pc.scalar("i"), schema) == ["s"]
    assert referenced_columns(pc.scalar(True), schema) == []
    with pytest.raises(InvalidInputError):
        referenced_columns(pc.field("nope") > 1, schema)


# --------------------------------------------------------------------------- pylance cross-check
CROSS_CHECK = [
    "i = 2", "i == 2", "i <> 1", "i >= 2 AND f < 3", "i > 4 OR f > 3", "NOT (i > 2)", "NOT b", "b",
    "i = NULL", "s IS NULL", "s IS NOT NULL", "b IS TRUE", "b IS NOT TRUE", "b IS FALSE", "b IS NOT FALSE",
    "i IN (1, 2, NULL)", "i NOT IN (1, 2, NULL)", "i NOT IN (1, 2)", "s IN ('apple', NULL)",
    "s NOT IN ('apple', NULL)", "i IN (i, 3)", "f IN (1.5, 2)", "i BETWEEN 2 AND 4", "i NOT BETWEEN 2 AND 4",
    "s LIKE 'a%'", "s LIKE 'a\\%b'", "s LIKE 'a_c'", "s ILIKE 'b%'", "s NOT LIKE 'a%'", "s NOT ILIKE 'B%'",
    "s LIKE 'A%'", "s LIKE NULL", "ls = 'it''s'", "i % 2 = 1", "i / 2 = 1", "-i > 0", "i + f > 3",
    "i + 1 = 3", "1 + i = 3", "i * 2.5 > 5", "f / 0 > 1", "1e2 < f * 100", "f = 2", "i > f",
    "s = \"apple\"", "\"my col\" IS NOT NULL", "`my col` > 3", "`Up` > 3", "up > 3", "ID = 1",
    "st.x > 1", "st.y = 'a'", "st.x IS NULL", "st['x'] = 1", "dec > 1", "dec * 2 > 3", "dec + 1 > 2.5",
    "dec BETWEEN 1 AND 2", "CAST(i AS string) = '4'", "CAST(f AS int) = 3", "CAST('5' AS int) = i",
    "CAST(f AS decimal(10,2)) > 1", "CAST(d AS string) = '2024-01-01'", "d = date '2024-01-01'",
    "d = date '2024-1-1'", "ts < timestamp '2024-01-01 10:00:00'", "ts = timestamp '2024-01-01T10:00:00'",
    "ts = timestamp '2024-01-01 12:00:00+02:00'", "ts >= date '2024-01-01'",
    "d < timestamp '2024-01-01 12:00:00'", "tz = timestamp '2024-01-01 05:00:00'",
    "tz >= timestamp '2022-12-31 19:00:00'", "tz >= timestamp '2022-12-31 19:00:01'",
    "tz >= date '2023-01-01'", "tzu = timestamp '2024-01-01 10:00:00'", "lower(s) = 'banana'",
    "abs(i) = 3", "is_valid(s)", "s IS NOT DISTINCT FROM 'apple'", "s || 'x' = 'applex'",
    "_rowid < 3", "_rowaddr >= 2 AND i > 0", "1 = 1", "true",
]


@pytest.fixture(scope="module")
def lance_dataset(tmp_path_factory):
    lance = pytest.importorskip("lance")
    return lance.write_dataset(TABLE, tmp_path_factory.mktemp("sqlf") / "t", data_storage_version="2.0")


@pytest.mark.parametrize("sql", CROSS_CHECK)
def test_matches_pylance(lance_dataset, sql):
    expected = sorted(lance_dataset.to_table(filter=sql, columns=["id"])["id"].to_pylist())
    # Give our filter the same system columns the pylance scanner exposes.
    table = lance_dataset.to_table(with_row_id=True, with_row_address=True)
    assert ids(sql, table) == expected


@pytest.mark.parametrize("sql", ["foo = 1", "i = 1 ==", "i", "`up` > 3", "st.z = 1", "s > 5"])
def test_errors_match_pylance(lance_dataset, sql):
    with pytest.raises(ValueError):
        lance_dataset.to_table(filter=sql)
    with pytest.raises(InvalidInputError):
        to_expression(sql, TABLE.schema)


def test_sql_expression_type_is_public():
    """``lance_format.sql_expression_type``: the type of a scalar expression over a schema (what
    lance_assets renders partition bounds for, e.g. ``CAST(ts AS DATE)``)."""
    import lance_format
    from lance_format.errors import InvalidInputError

    schema = pa.schema([("ts", pa.timestamp("us")), ("x", pa.int64()), ("s", pa.string())])
    assert lance_format.sql_expression_type("CAST(ts AS DATE)", schema) == pa.date32()
    assert lance_format.sql_expression_type("x", schema) == pa.int64()
    assert pa.types.is_string(lance_format.sql_expression_type("lower(s)", schema))
    with pytest.raises(InvalidInputError):
        lance_format.sql_expression_type("nope + 1", schema)
    with pytest.raises(InvalidInputError):
        lance_format.sql_expression_type("CAST(ts AS", schema)
