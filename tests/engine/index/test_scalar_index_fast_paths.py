"""The fast paths of scalar indices give the answers of the general ones: the packed integer sort
BTREE training uses, the binary search of sorted integer pages (read page by page, or the whole
segment once held), the one-take read of index candidates, and ``plan_scan`` choosing the index."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_format
from lance_format.dataset.scan import FragmentRange, ScanExecutor, plan_scan
from lance_format.index.scalar.btree import _sorted_positions
from lance_format.index.scalar.common import _packed_order, matches, sort_order
from lance_format.index.scalar.queries import Equals, IsIn, Range

N = 3000


@pytest.mark.parametrize("values", [
    pa.array([5, None, -3, 5, 2, None, -3, 0], pa.int64()),
    pa.array(np.random.default_rng(1).integers(-40, 40, 500), pa.int8()),
    pa.array(np.random.default_rng(2).integers(0, 2**63, 300, dtype=np.uint64), pa.uint64()),  # too wide to pack
    pa.array([np.iinfo(np.int64).min, 0, np.iinfo(np.int64).max, 0], pa.int64()),
    pa.array(np.random.default_rng(3).integers(0, 10**6, 400), pa.timestamp("us")),
    pa.array([True, False, None, True, False], pa.bool_()),
])
def test_sort_order_is_a_stable_sort_with_nulls_first(values):
    expected = np.asarray(pc.array_sort_indices(values, null_placement="at_start"))  # stable
    assert sort_order(values).tolist() == expected.tolist()


def test_packed_order_refuses_floats_and_spans_that_do_not_fit():
    assert _packed_order(np.array([1.5, 0.5])) is None
    assert _packed_order(np.array([0, 2**62, 1], dtype=np.int64)) is None  # 63 bits of span + 2 of position
    assert _packed_order(np.array([2**62, 0], dtype=np.int64)).tolist() == [1, 0]  # 63 + 1 bits fit
    assert _packed_order(np.array([3, 1, 3, 2], dtype=np.int64)).tolist() == [1, 3, 0, 2]


def _plain(value: pa.Scalar) -> int:
    return value.as_py()


def _points(query: Equals | IsIn) -> np.ndarray:
    array = pa.array([query.value.as_py()]) if isinstance(query, Equals) else query.values
    return np.sort(array.drop_null().to_numpy())


@pytest.mark.parametrize("query", [
    Equals(pa.scalar(7)), Equals(pa.scalar(1000)), IsIn(pa.array([7, 7, -2, 999, None, 3])),
    IsIn(pa.array([], pa.int64())), Range(pa.scalar(3), pa.scalar(9), True, False),
    Range(pa.scalar(3), pa.scalar(9), False, True), Range(None, pa.scalar(-1), True, True),
    Range(pa.scalar(50), None, False, True), Range(pa.scalar(9), pa.scalar(3), True, True),
])
def test_binary_search_of_sorted_pages_selects_what_a_comparison_does(query):
    values = pa.array(np.sort(np.random.default_rng(4).integers(-5, 60, 2000)), pa.int64())
    found = _sorted_positions(values, query, _plain, _points)
    assert found is not None
    assert np.unique(found).tolist() == np.flatnonzero(matches(values, query)).tolist()


def test_binary_search_leaves_nulls_and_other_types_to_comparisons():
    assert _sorted_positions(pa.array([None, 1, 2]), Equals(pa.scalar(1)), _plain, _points) is None
    assert _sorted_positions(pa.array([1.0, 2.0]), Equals(pa.scalar(1.0)), _plain, _points) is None
    assert _sorted_positions(pa.array(["a", "b"]), Equals(pa.scalar("a")), _plain, _points) is None


@pytest.fixture(scope="module")
def uri(tmp_path_factory) -> str:
    """Three fragments; ``k`` has duplicates, negatives and nulls; some rows deleted; a BTREE on
    ``k`` and a BITMAP on ``host`` built by this engine."""
    rng = np.random.default_rng(30)
    k = rng.integers(-200, 200, N)
    table = pa.table({
        "k": pa.array(k, mask=np.arange(N) % 37 == 0),
        "host": pa.array([f"https://host{i % 9}.example.com/p?u=user{i}@mail.org" for i in range(N)]),
        "x": rng.random(N),
    })
    path = str(tmp_path_factory.mktemp("fast") / "t.lance")
    lance.write_dataset(table, path, max_rows_per_file=1000)
    lance.dataset(path).delete("x < 0.05")
    ds = lance_format.dataset(path)
    ds.create_scalar_index("k", "BTREE")
    ds.create_scalar_index("host", "BITMAP")
    return path


FILTERS = ["k = 17", "k IN (17, -200, 17, 5000)", "k >= -3 AND k < 4", "k > 150", "k <= -190",
           "k BETWEEN 10 AND 12 AND host = 'https://host3.example.com/p?u=user3@mail.org'",
           "k = 17 OR k = 18", "k IS NULL", "host = 'https://host4.example.com/p?u=user13@mail.org'"]


@pytest.mark.parametrize("prewarm", [False, True])
def test_indexed_filters_match_a_scan_and_pylance(uri, prewarm):
    ds = lance_format.dataset(uri)
    if prewarm:  # the whole segment in memory: the binary search runs over all of it
        ds.prewarm_index("k_idx")
    theirs = lance.dataset(uri)
    for sql in FILTERS:
        got = ds.to_table(filter=sql, with_row_id=True)
        plain = ds.to_table(filter=sql, with_row_id=True, use_scalar_index=False)
        assert got.equals(plain), sql
        assert got.equals(theirs.to_table(filter=sql, with_row_id=True)), sql
        assert got.column_names == ["k", "host", "x", "_rowid"]


def test_plan_scan_chooses_the_index(uri):
    ds = lance_format.dataset(uri)
    plan = plan_scan(ds, filter="k = 17")
    assert plan.index is not None and "k_idx" in plan.index.describe()
    assert plan_scan(ds, filter="k = 17", options={"use_scalar_index": False}).index is None
    assert plan_scan(ds, filter="x > 0.5").index is None  # no index on x
    assert plan_scan(ds, filter=pc.field("k") == 17).index is None  # only SQL text is matched to indices
    assert plan_scan(ds, filter="k = 17", with_row_id=True, include_deleted_rows=True).index is None
    assert "ScalarIndexQuery" in ds.scanner(filter="k = 17").explain_plan()


def test_plan_scan_index_with_row_ranges(uri):
    """A Spark split's plan (physical row ranges) uses the index and keeps to its ranges."""
    ds = lance_format.dataset(uri)
    ranges = [FragmentRange(f, (100, 700)) for f in ds.get_fragments()]
    for sql in ("k > 150", "k IN (17, -200)"):
        indexed = plan_scan(ds, columns=["k", "x"], filter=sql, with_row_address=True, fragments=ranges)
        assert indexed.index is not None
        plain = plan_scan(ds, columns=["k", "x"], filter=sql, with_row_address=True, fragments=ranges,
                          options={"use_scalar_index": False})
        got = pa.Table.from_batches(list(ScanExecutor(ds, indexed).batches()))
        want = pa.Table.from_batches(list(ScanExecutor(ds, plain).batches()))
        assert got.num_rows and got.equals(want)
        offsets = np.asarray(got["_rowaddr"]) & 0xFFFFFFFF
        assert offsets.min() >= 100 and offsets.max() < 700


def test_compile_filter_translates_once_and_keeps_clock_filters_fresh():
    from lance_format.dataset.sql.filter import compile_filter, referenced_columns, to_expression
    from lance_format.errors import InvalidInputError

    schema = pa.schema([("k", pa.int64()), ("host", pa.string()), ("ts", pa.timestamp("us")), ("_rowid", pa.uint64())])
    sql = "host LIKE 'https://%' AND k > 3 OR _rowid = 2"
    first, columns = compile_filter(sql, schema)
    assert compile_filter(sql, schema)[0] is first  # cached
    assert first.equals(to_expression(sql, schema))
    assert list(columns) == referenced_columns(sql, schema) == ["k", "host", "_rowid"]
    clock = "ts < now()"
    assert compile_filter(clock, schema)[0] is not compile_filter(clock, schema)[0]
    with pytest.raises(InvalidInputError, match="Invalid user input"):
        compile_filter("k >", schema)
    with pytest.raises(InvalidInputError):
        compile_filter("nope = 1", schema)


def test_small_pages_read_page_by_page_answer_like_a_scan(tmp_path):
    """Pages of 64 rows: a point or small IN query reads a few pages (not the whole segment)."""
    rng = np.random.default_rng(5)
    table = pa.table({"k": pa.array(rng.integers(-50, 50, N), mask=np.arange(N) % 41 == 0),
                      "s": pa.array([f"user{i}@example.org" for i in range(N)])})
    path = str(tmp_path / "t.lance")
    lance.write_dataset(table, path, max_rows_per_file=1000)
    lance_format.dataset(path).create_scalar_index("k", "BTREE", batch_size=64)
    theirs = lance.dataset(path)
    for sql in ["k = 7", "k IN (-50, 3, 3)", "k > 48", "k >= -1 AND k <= 1", "k = 7 AND s LIKE 'user1%'"]:
        ds = lance_format.dataset(path)
        got = ds.to_table(filter=sql, with_row_id=True)
        assert got.equals(ds.to_table(filter=sql, with_row_id=True, use_scalar_index=False)), sql
        assert got.equals(theirs.to_table(filter=sql, with_row_id=True)), sql
