"""pyarrow filter expressions through the SQL filter layer (``sql.pushdown``): what translates,
what stays a pyarrow residual, and that either way the rows kept are pyarrow's own."""

from __future__ import annotations

import datetime as dt
import decimal
import math

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lance_format.dataset.sql.arrow_expressions import UnreadableExpression, read_expression, rebuild
from lance_format.dataset.sql.filter import to_expression
from lance_format.dataset.sql.pushdown import split_arrow_filter

UTC = dt.UTC
N = 40


def _table() -> pa.Table:
    i = list(range(N))
    return pa.table({
        "id": pa.array(i, pa.int64()),
        "small": pa.array([None if k % 5 == 0 else k % 7 - 3 for k in i], pa.int8()),
        "big": pa.array([2**64 - 1 - k if k % 3 else k for k in i], pa.uint64()),
        "f": pa.array([[math.nan, -0.0, 0.0, None, 1.5, -2.0, math.inf, -math.inf][k % 8] for k in i], pa.float64()),
        "f32": pa.array([k / 10 for k in i], pa.float32()),
        "s": [None if k % 6 == 0 else ["a%b", "a_b", "it's", "x\\y", "Ünï", "abc", "ab"][k % 7] for k in i],
        "ls": pa.array([f"v{k % 4}" for k in i], pa.large_string()),
        "bin": pa.array([bytes([k % 3]) if k % 4 else None for k in i], pa.binary()),
        "b": pa.array([None if k % 4 == 0 else k % 3 == 0 for k in i], pa.bool_()),
        "ts": pa.array([None if k % 9 == 0 else dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=k, microseconds=k)
                        for k in i], pa.timestamp("us", tz="UTC")),
        "tz": pa.array([dt.datetime(2024, 3, 10, 6, tzinfo=UTC) + dt.timedelta(minutes=15 * k) for k in i],
                       pa.timestamp("s", tz="America/New_York")),
        "naive": pa.array([dt.datetime(2024, 1, 1) + dt.timedelta(milliseconds=k) for k in i], pa.timestamp("ms")),
        "d": pa.array([dt.date(2024, 2, 27) + dt.timedelta(days=k % 5) for k in i], pa.date32()),
        "dec": pa.array([None if k % 8 == 0 else decimal.Decimal(k) / 4 for k in i], pa.decimal128(6, 2)),
        "st": pa.array([None if k % 10 == 0 else {"x": k % 4, "inner": {"name": None if k % 3 == 0 else f"n{k % 2}"}}
                        for k in i]),
    })


def _is_in(values: list[object], behaviour: int) -> pc.Expression:
    """``is_in`` with a null-matching behaviour pyarrow's Python API cannot set (2: emit_null,
    3: inconclusive): its serialized options edited, then read back by pyarrow."""
    node = read_expression(pc.is_in(pc.field("small"), value_set=pa.array(values, pa.int8())))
    (index,) = [int(v) for k, v in node.source.entries if k == "options"]
    options = node.source.columns[index]
    fields = {f.name: options.field(f.name) for f in options.type}
    fields["null_matching_behavior"] = pa.array([behaviour], pa.uint32())
    node.source.columns[index] = pa.StructArray.from_arrays(list(fields.values()), names=list(fields))
    return rebuild(node)


TABLE = _table()
SCHEMA = TABLE.schema
F = pc.field
TS = pa.scalar(dt.datetime(2024, 1, 1, 0, 0, 20, 20, tzinfo=UTC), pa.timestamp("us", tz="UTC"))

TRANSLATED = [
    F("id") == 3, F("id") != 3, F("id") < 3, F("id") <= 3, F("id") > 30, F("id") >= 30, pc.scalar(5) > F("id"),
    F("small") == -1, F("small") > pa.scalar(1, pa.int8()), F("small").is_null(), F("small").is_valid(),
    ~(F("small") > 0), (F("small") > 0) | F("b"), (F("small") > 0) & F("b"), ~F("b"), F("b"),
    F("big") == pa.scalar(7, pa.uint64()),
    F("f") == 0.0, F("f") == -0.0, F("f") != 1.5, F("f") < 0, F("f") <= -2.0, F("f") == 1,
    F("s") == "it's", F("s") == "x\\y", F("s") > "ab", F("s") == "Ünï", F("ls") == pa.scalar("v2", pa.large_string()),
    F("s") == F("s"), (F("id") > F("id")) | (F("id") > 35),
    pc.starts_with(F("s"), "a%"), pc.starts_with(F("s"), "a_"), pc.ends_with(F("s"), "'s"),
    pc.match_substring(F("s"), "\\"), pc.match_substring(F("s"), "ün", ignore_case=True), pc.match_like(F("s"), "a_b"),
    F("bin") == pa.scalar(b"\x01"), F("b") == True,  # noqa: E712  (a pyarrow expression)
    F("ts") > TS, F("ts") >= TS, F("ts") == TS, F("ts") < pa.scalar(dt.datetime(2024, 1, 1, 0, 0, 5, tzinfo=UTC)),
    F("ts") > pa.scalar(20 * 10**9 + 20_000, pa.timestamp("ns", tz="UTC")),  # finer, but a whole microsecond
    F("ts") > pa.scalar(dt.datetime(2024, 1, 1, 0, 0, 20, tzinfo=UTC), pa.timestamp("s", tz="UTC")),
    F("tz") >= pa.scalar(dt.datetime(2024, 3, 10, 7, 30, tzinfo=UTC), pa.timestamp("s", tz="UTC")),
    F("tz") < pa.scalar(dt.datetime(2024, 3, 10, 12, tzinfo=UTC), pa.timestamp("us", tz="Asia/Tokyo")),
    F("naive") > pa.scalar(dt.datetime(2024, 1, 1, 0, 0, 0, 17000), pa.timestamp("ms")),
    F("naive") <= pa.scalar(dt.datetime(2024, 1, 1, 0, 0, 0, 9000), pa.timestamp("us")),
    F("d") == pa.scalar(dt.date(2024, 2, 29)), F("d") > pa.scalar(dt.date(2024, 2, 29)),
    F("dec") > pa.scalar(decimal.Decimal("4.5")), F("dec") == pa.scalar(decimal.Decimal("2.250")),
    F("dec") < pa.scalar(decimal.Decimal(3)), F("st", "x") == 2, F("st", "inner", "name") == "n1", F("st", "inner", "name").is_null(),
    F("id").isin([1, 2, 50]), F("small").isin([1, 2, None]), F("small").isin([1, 2]),
    pc.is_in(F("small"), value_set=pa.array([1, None], pa.int8()), skip_nulls=True),
    ~pc.is_in(F("small"), value_set=pa.array([1, None], pa.int8()), skip_nulls=True),
    _is_in([1, None], 2), ~_is_in([1, None], 2), _is_in([1, None], 3), ~_is_in([1, None], 3), ~_is_in([1], 3),
    ~F("small").isin([1, 2]), ~F("small").isin([1, None]),
    pc.if_else(F("small").is_valid(), F("small").isin([1, 2]), pa.scalar(None, pa.bool_())),
    ~pc.if_else(F("small").is_valid(), F("small").isin([1, 2]), pa.scalar(None, pa.bool_())),
    F("s").isin(["ab", "it's"]), F("d").isin([dt.date(2024, 2, 28)]), F("dec").isin([decimal.Decimal("0.25")]),
    F("id") > pc.scalar(4).cast(pa.int8()),  # a cast of a literal is folded first
    F("id") < pc.add(pc.scalar(2), pc.scalar(3)),
    F("ts") > pc.scalar("2024-01-01T00:00:10Z").cast(pa.timestamp("us", tz="UTC")),
    F("big") >= pa.scalar(2**64 - 3, pa.uint64()),
]

RESIDUAL = [  # left to pyarrow, entirely
    F("f") > 0, F("f") >= -0.0, F("f") == math.nan, F("f32") == 0.1, F("f").isin([1.5]),
    F("id").cast(pa.float64()) > 2.5, pc.add(F("id"), 1) > 3, F("big") > -1,
    pc.match_substring_regex(F("s"), "a.b"), F("f").is_nan(), F("f").is_null(nan_is_null=True),
    F("ts") > pa.scalar(20 * 10**9 + 20_001, pa.timestamp("ns", tz="UTC")),  # finer than the column holds
    F("naive") > pa.scalar(dt.datetime(2024, 1, 1, tzinfo=UTC)),  # zoned literal, naive column: pyarrow decides
    F("d") > pa.scalar(dt.datetime(2024, 2, 28)), F("id") == pa.scalar(None, pa.int64()),
    pc.and_(F("b"), F("small") > 0), F("id") == pc.scalar(3.0),
]


def _rows(expr: pc.Expression) -> list[int]:
    return TABLE.filter(expr)["id"].to_pylist()


@pytest.mark.parametrize("expr", TRANSLATED, ids=[str(e)[:80] for e in TRANSLATED])
def test_translated_exactly(expr: pc.Expression) -> None:
    split = split_arrow_filter(expr, SCHEMA)
    assert split.sql is not None and split.residual is None, split
    assert _rows(to_expression(expr, SCHEMA)) == _rows(expr)
    assert _rows(to_expression(split.sql, SCHEMA)) == _rows(expr)


@pytest.mark.parametrize("expr", RESIDUAL, ids=[str(e)[:80] for e in RESIDUAL])
def test_residual_left_to_pyarrow(expr: pc.Expression) -> None:
    split = split_arrow_filter(expr, SCHEMA)
    assert split.sql is None and split.residual is not None
    try:
        expected = _rows(expr)
    except pa.ArrowException as err:  # pyarrow refuses it: so does the scan, with pyarrow's error
        with pytest.raises(type(err)):
            _rows(to_expression(expr, SCHEMA))
        return
    assert _rows(to_expression(expr, SCHEMA)) == expected


def test_conjuncts_split_between_sql_and_residual() -> None:
    expr = (F("id") > 3) & (F("f") > 0) & F("s").is_valid() & (pc.add(F("id"), 1) < 30)
    split = split_arrow_filter(expr, SCHEMA)
    assert split.sql == "(`id` > 3) AND (`s` IS NOT NULL)"
    assert str(split.residual) == str((F("f") > 0) & (pc.add(F("id"), 1) < 30))
    assert _rows(to_expression(expr, SCHEMA)) == _rows(expr)
    # an OR with an untranslatable side cannot be split: it is residual as a whole
    assert split_arrow_filter((F("id") > 3) | (F("f") > 0), SCHEMA).sql is None


def test_integer_literal_against_decimal_column() -> None:
    # pyarrow refuses it (its int64 -> decimal promotion outgrows the precision); the SQL layer
    # compares exactly, as pylance does
    with pytest.raises(pa.ArrowInvalid):
        _rows(F("dec") < 3)
    assert _rows(to_expression(F("dec") < 3, SCHEMA)) == _rows(F("dec") < pa.scalar(decimal.Decimal(3)))


def test_sql_text() -> None:
    cases = [
        (F("s") == "it's", "`s` = 'it''s'"),
        (F("big") == pa.scalar(7, pa.uint64()), "`big` = arrow_cast('7', 'UInt64')"),
        (pc.starts_with(F("s"), "a_%\\"), "`s` LIKE 'a\\_\\%\\\\%'"),
        (F("st", "inner", "name") == "n1", "`st`.`inner`.`name` = 'n1'"),
        (F("ts") > TS, "`ts` > '2024-01-01T00:00:20.000020+00:00'"),
        (F("dec") > pa.scalar(decimal.Decimal("4.50")), "`dec` > '4.50'"),
        (pc.if_else(F("id").is_valid(), F("id").isin([1, 2]), pa.scalar(None, pa.bool_())), "`id` IN (1, 2)"),
        (F("id").isin([1, 2]), "`id` IS NOT NULL AND `id` IN (1, 2)"),
        (~F("b") | F("s").is_null(), "(NOT (`b`)) OR (`s` IS NULL)"),
    ]
    for expr, sql in cases:
        assert split_arrow_filter(expr, SCHEMA).sql == sql, expr


def test_long_or_chains_and_in_lists() -> None:
    chain = F("id") == 0
    for k in range(1, 3000):
        chain = chain | (F("id") == k)  # nested 3,000 deep, as engines build them
    split = split_arrow_filter(chain, SCHEMA)
    assert split.sql is not None and split.residual is None
    assert _rows(to_expression(chain, SCHEMA)) == list(range(N))
    big = F("id").isin(list(range(0, 100_000, 3)))  # long lists stay with pyarrow: cheaper
    assert split_arrow_filter(big, SCHEMA).sql is None
    assert _rows(to_expression(big, SCHEMA)) == _rows(big)
    listed = F("id").isin(list(range(0, 512, 2)))  # 256 values
    assert split_arrow_filter(listed, SCHEMA).sql is not None
    assert _rows(to_expression(listed, SCHEMA)) == _rows(listed)


def test_unknown_columns_and_odd_names() -> None:
    table = pa.table({"my col": [1, 2, 3], "we`ird": [1, 2, 3], "Up": [3, 2, 1]})
    for expr in (F("my col") > 1, F("we`ird") > 1, F("Up") > 1):
        assert table.filter(to_expression(expr, table.schema)).equals(table.filter(expr))
    assert split_arrow_filter(F("my col") > 1, table.schema).sql == "`my col` > 1"
    assert split_arrow_filter(F("we`ird") > 1, table.schema).sql is None
    assert split_arrow_filter(F("missing") > 1, table.schema).sql is None  # pyarrow reports it


def test_read_and_rebuild_round_trip() -> None:
    for expr in TRANSLATED + RESIDUAL:
        assert rebuild(read_expression(expr)).equals(expr)
    with pytest.raises(UnreadableExpression):
        read_expression(F(0) > 1)  # a field by position has no serialized form


def _acero_rows(batch: pa.RecordBatch, condition: pc.Expression) -> list[int]:
    positions = pa.array(range(batch.num_rows), pa.uint64())
    return pa.Table.from_batches([batch]).append_column("__p", positions).filter(condition)["__p"].to_pylist()


@pytest.mark.parametrize("expr", TRANSLATED + RESIDUAL, ids=[str(e)[:80] for e in TRANSLATED + RESIDUAL])
def test_direct_evaluation_matches_acero(expr: pc.Expression) -> None:
    """``matching_rows`` evaluates top-level predicates by kernel calls (``sql.evaluate``):
    the same rows as an Acero filter, for the pyarrow expression and for its translation."""
    from lance_format.dataset.sql.evaluate import compiled
    from lance_format.dataset.sql.filter import matching_rows

    batch = TABLE.combine_chunks().to_batches()[0]
    for condition in (expr, to_expression(expr, SCHEMA)):
        try:
            expected = _acero_rows(batch, condition)
        except pa.ArrowException as err:
            with pytest.raises(type(err)):
                matching_rows(batch, condition)
            continue
        assert matching_rows(batch, condition).to_pylist() == expected
    assert compiled(to_expression(F("id") > 3, SCHEMA)) is not None  # the fast path is taken
