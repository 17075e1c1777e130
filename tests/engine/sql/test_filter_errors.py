"""Bad filters and SQL expressions get errors in the user's terms: the filter text, where the
syntax breaks, the column and its type; never sqlglot's class names, pyarrow's kernel names or a
RecursionError. pylance refuses the same filters."""

from __future__ import annotations

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError


@pytest.fixture(scope="module")
def orders(tmp_path_factory):
    uri = str(tmp_path_factory.mktemp("filters") / "orders.lance")
    table = pa.table({
        "order_id": pa.array([1, 2, 3, 4], pa.int64()),
        "customer": ["ada@example.com", "bob@example.org", None, "ada@example.com"],
        "amount": [12.5, None, 3.0, 99.99],
        "day": pa.array([19723, 19724, 19724, None], pa.date32()),
    })
    lance_format.write_dataset(table, uri)
    return uri


def _error(uri: str, call) -> InvalidInputError:
    with pytest.raises(InvalidInputError) as info:
        call(lance_format.dataset(uri))
    with pytest.raises((OSError, ValueError)):
        call(lance.dataset(uri))  # pylance refuses it as well (count_rows: OSError, scans: ValueError)
    return info.value


@pytest.mark.parametrize("text, expected", [
    ("order_id ==== 1", "syntax error at line 1, column 12, near 'order_id ====': '=' has no right-hand operand"),
    ("order_id >", "'>' has no right-hand operand"),
    ("AND order_id = 1", "'AND' has no left-hand operand"),
    ("order_id BETWEEN 1", "'BETWEEN' has no upper bound"),
    ("(order_id = 1", "Expecting )"),
    ("order_id + * 2 > 1", "unexpected"),
    ("customer = 'ada", "an unclosed quote"),
])
def test_syntax_errors_say_where_and_what(orders, text, expected):
    error = _error(orders, lambda ds: ds.count_rows(text))
    assert repr(text) in str(error) and expected in str(error)
    assert "sqlglot" not in str(error) and "<class" not in str(error) and "Required keyword" not in str(error)


@pytest.mark.parametrize("text, expected, column", [
    ("customer > 5", "cannot compare column customer (string) with 5 (int64) (to compare as text, quote the value: '5')",
     "customer"),
    ("order_id > 'x'", "cannot compare column order_id (int64) with 'x' (string)", "order_id"),
    ("amount >= 1 AND customer = 2.5", "cannot compare column customer (string) with 2.5 (double)", "customer"),
    ("customer + 1 > 2", "cannot apply '+' to column customer (string) and 1 (int64)", "customer"),
    ("customer BETWEEN 1 AND 3", "cannot compare column customer (string) with 1 (int64)", "customer"),
    ("customer IN (1, 2)", "cannot compare column customer (string) with 1 (int64)", "customer"),
    ("order_id IN ('1', '2')", "cannot compare column order_id (int64) with '1' (string)", "order_id"),
])
def test_type_errors_name_the_column_and_its_type(orders, text, expected, column):
    error = _error(orders, lambda ds: ds.to_table(filter=text))
    assert str(error).startswith(f"Invalid user input: Invalid SQL filter {text!r}: ")
    assert expected in str(error) and error.column == column
    assert "kernel" not in str(error) and "greater" not in str(error)


def test_functions_are_named_as_written(orders):
    error = _error(orders, lambda ds: ds.count_rows("lower(order_id) = 'x'"))
    assert "function lower cannot take arguments of types (int64)" in str(error)
    assert "utf8_lower" not in str(error)


def test_good_filters_of_the_same_shapes_still_answer(orders):
    ds = lance_format.dataset(orders)
    assert ds.count_rows("customer > '5'") == 3
    assert ds.count_rows("customer IN ('ada@example.com', NULL)") == 2
    assert ds.count_rows("order_id IN (1, 2, NULL)") == 2
    assert ds.count_rows("day IN ('2024-01-01')") == lance.dataset(orders).count_rows("day = date '2024-01-01'") == 1


@pytest.mark.parametrize("text", [
    "(" * 3000 + "order_id = 1" + ")" * 3000,
    "NOT " * 3000 + "order_id = 1",
    "-(" * 3000 + "order_id" + ")" * 3000 + " = 1",
])
def test_filters_nested_too_deeply_get_a_typed_error(orders, text):
    ds = lance_format.dataset(orders)
    with pytest.raises(InvalidInputError, match="nests parentheses or operators too deeply") as info:
        ds.count_rows(text)
    assert len(str(info.value)) < 400  # the 6,000-character filter is abbreviated
    with pytest.raises(InvalidInputError, match="too deeply"):
        ds.to_table(filter=text)


def test_long_flat_filters_are_not_too_deep(orders):
    ds = lance_format.dataset(orders)
    wide = " OR ".join(f"order_id = {i}" for i in range(3000))
    assert ds.count_rows(wide) == lance.dataset(orders).count_rows(wide) == 4
    assert ds.count_rows("(" * 40 + "order_id = 1" + ")" * 40) == lance.dataset(orders).count_rows("(" * 40 + "order_id = 1" + ")" * 40) == 1


def test_sql_expressions_of_updates_and_new_columns_get_the_same_errors(tmp_path, orders):
    ds = lance_format.dataset(orders)
    with pytest.raises(InvalidInputError, match=r"cannot apply '\+' to column customer \(string\) and 1 \(int64\)"):
        ds.update({"order_id": "customer + 1"})
    with pytest.raises(InvalidInputError, match="has no right-hand operand"):
        ds.update({"order_id": "order_id +"})
    with pytest.raises(InvalidInputError, match="too deeply"):
        ds.update({"order_id": "(" * 3000 + "1" + ")" * 3000})
    assert lance_format.dataset(orders).version == 1  # nothing was committed
