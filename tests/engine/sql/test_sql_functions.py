"""SQL functions and literals of Lance's filter dialect, filter for filter against pylance.

Each filter runs on the same table through both engines and must select the same rows;
the table has the values that make functions differ (nulls, NaN, empty lists, non-ASCII).
"""

from __future__ import annotations

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("sqlfn") / "t.lance")
    lance.write_dataset(pa.table({
        "i": [1, 2, 3, None, 5],
        "s": ["apple", "banana", "cherry", None, "Ünïcode straße"],
        "b": [b"abc", b"x", None, b"abd", b""],
        "l": [[1, 2], [3], [], None, [5, 5, 1]],
        "ls": [["a", "b"], ["c"], [], None, ["a"]],
        "f": [1.5, 2.5, None, float("nan"), -0.5],
        "ts": pa.array([0, 10**6, 2 * 10**6, None, 86_400 * 10**6 * 400], pa.timestamp("us")),
        "url": ["https://example.com/a?x=1", "http://shop.example.org/cart", None, "ftp://files.example.net/x",
                "https://example.com/b"],
    }), path)
    return path


FILTERS = [
    "b = X'616263'", "b = x'6162'", "b = X''",
    "regexp_match(s, 'an+')", "regexp_match(url, '^https://')", "regexp_like(s, '^b')",
    "starts_with(url, 'https')", "ends_with(s, 'y')", "contains(s, 'err')",
    "concat(s, 'x') = 'applex'", "concat(s, 'x') = 'x'", "concat(s, '-', i) = 'apple-1'",
    "replace(s, 'a', 'o') = 'bonono'", "regexp_replace(s, 'a', 'o') = 'bonana'",
    "regexp_replace(s, 'a', 'o', 'g') = 'bonono'", "regexp_replace(s, '(a)(p)', '${2}${1}') = 'paple'",
    "left(s, 2) = 'ap'", "right(s, 2) = 'na'", "strpos(s, 'an') = 2", "strpos(s, 'zz') = 0", "strpos(s, 'straße') = 9",
    "reverse(s) = 'elppa'", "lpad(s, 6, 'x') = 'xapple'", "lpad(s, 3, 'x') = 'app'", "rpad(s, 7, 'x') = 'applexx'",
    "octet_length(s) > 6", "btrim(s) = 'apple'", "initcap(s) = 'Apple'",
    "isnan(f)", "NOT isnan(f)", "coalesce(i, 0) = 0", "nullif(i, 1) IS NULL", "greatest(i, 2) = 2", "least(i, 2) = 1",
    "round(f) = 2", "round(f) = 3", "round(f) = -1", "round(f, 1) = 1.5", "power(i, 2) = 4", "sqrt(i) = 1",
    "ln(i) = 0", "log10(i) = 0", "log(i) = 0", "log(2, i) = 1", "exp(i) > 2",
    "array_has_any(l, [1, 3])", "array_has_any(ls, ['a', 'z'])", "array_has_all(l, [1, 5])",
    "array_contains(l, 3)", "array_has(ls, 'c')", "array_length(l) > 0", "cardinality(l) = 1",
    "array_position(l, 5) = 1", "array_element(l, 1) = 1", "l[1] = 1", "l[-1] = 1", "l[9] IS NULL",
    "date_part('year', ts) = 1970", "ts < now()", "to_timestamp(i) > timestamp '1970-01-01'",
]


@pytest.mark.parametrize("sql", FILTERS)
def test_filter_like_pylance(table, sql):
    theirs = lance.dataset(table).to_table(filter=sql, columns=["i", "s"])
    ours = lance_format.dataset(table).to_table(filter=sql, columns=["i", "s"])
    assert ours.to_pydict() == theirs.to_pydict()


@pytest.mark.parametrize("expression", ["concat(s, '!')", "round(f)", "l[1]", "array_length(l)", "strpos(s, 'a')",
                                        "coalesce(i, -1)", "regexp_replace(url, '^[a-z]+://', '')"])
def test_functions_as_column_expressions(table, expression):
    theirs = lance.dataset(table).to_table(columns={"v": expression})
    ours = lance_format.dataset(table).to_table(columns={"v": expression})
    assert str(ours.column("v").to_pylist()) == str(theirs.column("v").to_pylist())  # (nan == nan)


@pytest.mark.parametrize("sql", ["lpad(s, 8, 'xy') = 'x'", "array_has_any(i, [1])", "X'6g' = b",
                                 "array_has_any(l, [i])", "no_such_function(s)"])
def test_refused_with_a_clear_error(table, sql):
    with pytest.raises(InvalidInputError):
        lance_format.dataset(table).to_table(filter=sql)
