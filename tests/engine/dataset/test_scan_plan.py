"""``plan_scan``: what the plan of representative scans holds, and its executor's row ranges and
index step (candidate rows per fragment), against pylance's answers where one exists."""

from __future__ import annotations

import dataclasses

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_format
from lance_format.dataset.scan import ColumnSet, FragmentRange, ScanExecutor, ScanPlan, plan_scan
from lance_format.dataset.scan.explain import explain
from lance_format.dataset.scan_options import ColumnOrdering
from lance_format.errors import InvalidInputError
from tests.compat import assert_tables_equal

ROWS = 6_000
SKUS = np.array(["sku-1", "sku-2", "sku-3", "sku-17", "sku-404", "sku-9001"])


def _table() -> pa.Table:
    rng = np.random.default_rng(27)
    ids = np.arange(ROWS, dtype=np.int64)
    return pa.table({
        "id": ids,
        "x": rng.random(ROWS),
        # skewed: most rows are sku-1
        "sku": pa.array(SKUS[np.minimum(rng.zipf(2.0, ROWS) - 1, len(SKUS) - 1)]),
        "email": pa.array([f"user{i % 997}@example.{'org' if i % 3 else 'com'}" for i in range(ROWS)]),
        "url": pa.array([None if i % 5 == 0 else f"https://example.com/p/{i * 7919 % 10007}?ref=mail"
                         for i in range(ROWS)]),
    })


@pytest.fixture(scope="module")
def uri(tmp_path_factory) -> str:
    """Three fragments of 2,000 rows, some deleted, written by pylance."""
    path = str(tmp_path_factory.mktemp("plan") / "t.lance")
    lance.write_dataset(_table(), path, max_rows_per_file=2_000)
    lance.dataset(path).delete("id % 13 = 4")
    return path


def _names(columns: ColumnSet) -> list[str]:
    return columns.names


def test_projection_only(uri):
    plan = plan_scan(lance_format.dataset(uri), columns=["email", "id"])
    assert plan.output == ("email", "id")
    assert plan.output_schema.names == ["email", "id"]
    assert _names(plan.read) == ["email", "id"]
    assert plan.filter is None and plan.filter_columns == () and plan.late is None
    assert plan.limit is None and plan.offset == 0 and plan.order_by == ()
    assert [p.fragment.fragment_id for p in plan.fragments] == [0, 1, 2] and plan.whole_table
    assert all(p.row_range is None for p in plan.fragments)
    assert plan.index is None and plan.search is None
    assert plan.physical_rows == ROWS


def test_all_columns_by_default(uri):
    plan = plan_scan(lance_format.dataset(uri))
    assert plan.output == ("id", "x", "sku", "email", "url")
    assert plan.read.system == ()


def test_filter_splits_the_read_for_late_materialization(uri):
    plan = plan_scan(lance_format.dataset(uri), columns=["id", "url"], filter="sku = 'sku-404' AND x > 0.5")
    assert set(plan.filter_columns) == {"sku", "x"}
    assert _names(plan.read)[:2] == ["id", "url"] and sorted(_names(plan.read)[2:]) == ["sku", "x"]
    assert plan.late is not None
    assert sorted(plan.late.first.schema.names()) == ["sku", "x"]
    assert plan.late.first.system == ("_rowaddr",)  # to find the passing rows again
    assert _names(plan.late.rest) == ["id", "url"]
    assert plan.output == ("id", "url")
    assert "; then [id, url] for the passing rows only)" in explain(plan)


def test_filter_on_output_columns_only_needs_no_late_read(uri):
    plan = plan_scan(lance_format.dataset(uri), columns=["email"], filter="email LIKE '%.com'")
    assert plan.late is None and plan.filter_columns == ("email",)


def test_row_offsets_and_deleted_rows_are_not_late_materialized(uri):
    ds = lance_format.dataset(uri)
    plan = plan_scan(ds, columns=["id", "_rowoffset"], filter="x > 0.5")
    assert plan.late is None and plan.row_offsets and "_rowaddr" in plan.read.system
    plan = plan_scan(ds, columns=["id"], filter="x > 0.5", with_row_id=True, include_deleted_rows=True)
    assert plan.late is None and plan.include_deleted


def test_limit_and_offset(uri):
    ds = lance_format.dataset(uri)
    plan = plan_scan(ds, columns=["id"], limit=7, offset=3)
    assert (plan.limit, plan.offset) == (7, 3)
    executor = ScanExecutor(ds, plan)
    assert pa.Table.from_batches(list(executor.batches())).column("id").to_pylist() == \
        lance.dataset(uri).to_table(columns=["id"], limit=7, offset=3).column("id").to_pylist()
    with pytest.raises(InvalidInputError, match="Limit must be non-negative"):
        plan_scan(ds, limit=-1, offset=-1)
    with pytest.raises(InvalidInputError, match="Offset must be non-negative"):
        plan_scan(ds, offset=-2)


def test_chosen_fragments_and_row_ranges(uri):
    ds = lance_format.dataset(uri)
    second = ds.get_fragment(1)
    plan = plan_scan(ds, fragments=[second])
    assert not plan.whole_table and [p.fragment.fragment_id for p in plan.fragments] == [1]
    assert "num_fragments=1 (chosen)" in explain(plan)
    ranged = plan_scan(ds, columns=["id"], filter="x < 0.2", fragments=[FragmentRange(second, (100, 700))])
    assert ranged.physical_rows == 600
    got = pa.Table.from_batches(list(ScanExecutor(ds, ranged).rows())).column("id").to_numpy()
    table = _table()
    ids, x = table.column("id").to_numpy(), table.column("x").to_numpy()
    wanted = ids[(ids >= 2_100) & (ids < 2_700) & (x < 0.2) & (ids % 13 != 4)]
    assert np.array_equal(np.sort(got), wanted)
    # a row range is not counted from metadata: its live rows are read
    assert ScanExecutor(ds, plan_scan(ds, columns=[], fragments=[FragmentRange(second, (0, 26))])).count() == 24


def test_system_columns(uri):
    ds = lance_format.dataset(uri)
    plan = plan_scan(ds, columns=["id"], with_row_id=True, with_row_address=True)
    assert plan.output == ("id", "_rowid", "_rowaddr")
    assert plan.read.system == ("_rowid", "_rowaddr")
    assert "row_id=true" in explain(plan) and "row_addr=true" in explain(plan)
    with pytest.raises(InvalidInputError, match="include_deleted_rows"):
        plan_scan(ds, include_deleted_rows=True)


def test_ordering(uri):
    ds = lance_format.dataset(uri)
    plan = plan_scan(ds, columns=["id"], order_by=[ColumnOrdering("url", ascending=False, nulls_first=True), "id"])
    assert plan.order_by == (ColumnOrdering("url", False, True), ColumnOrdering("id"))
    assert _names(plan.read) == ["id", "url"]  # the sort keys are read, not returned
    assert plan.output == ("id",)
    with pytest.raises(InvalidInputError, match="cannot order by unknown column 'nope'"):
        plan_scan(ds, order_by=["nope"])


def test_expressions_and_errors(uri):
    ds = lance_format.dataset(uri)
    plan = plan_scan(ds, columns={"double": "id * 2"})
    assert plan.output == ("double",) and list(plan.expressions) == ["double"]
    assert _names(plan.read) == ["id"]
    with pytest.raises(InvalidInputError, match="unknown column 'nope'"):
        plan_scan(ds, columns=["nope"])
    with pytest.raises(InvalidInputError, match="unknown scan option"):
        plan_scan(ds, options={"no_such_option": 1})
    with pytest.raises(InvalidInputError, match="unknown scan option 'index'"):
        ds.scanner(index=object())  # the index step is the engine's, not a scan option


def test_plan_is_frozen_and_the_scanner_shows_it(uri):
    scanner = lance_format.dataset(uri).scanner(columns=["id"], filter="x > 0.5", limit=4)
    assert isinstance(scanner.plan, ScanPlan)
    with pytest.raises(dataclasses.FrozenInstanceError):
        scanner.plan.limit = 5  # type: ignore[misc]
    assert scanner.explain_plan() == explain(scanner.plan)
    assert scanner.explain_plan(True) == explain(scanner.plan, True)


class _Candidates:
    """An index step answering with the rows where ``id % modulus == rest`` (a superset of what
    the test filters ask) or with None (cannot narrow) for the fragments listed."""

    def __init__(self, modulus: int, rest: int, unknown: tuple[int, ...] = ()) -> None:
        self.modulus, self.rest, self.unknown = modulus, rest, unknown
        self.asked: list[int] = []

    def candidates(self, fragment):
        self.asked.append(fragment.fragment_id)
        if fragment.fragment_id in self.unknown:
            return None
        ids = np.arange(fragment.physical_rows) + fragment.fragment_id * 2_000
        return np.flatnonzero(ids % self.modulus == self.rest).astype(np.uint64)

    def describe(self) -> str:
        return f"ScalarIndexQuery: id % {self.modulus} = {self.rest}"


@pytest.mark.parametrize("options", [{}, {"late_materialization": True}])  # batches regrouped or not
@pytest.mark.parametrize("columns", [["id", "email", "url"], ["id"]])  # late materialized or not
def test_index_step_narrows_the_read_and_the_filter_still_decides(uri, columns, options):
    ds = lance_format.dataset(uri)
    condition = "id % 6 = 0 AND x > 0.3"  # rows with id % 3 == 0 are the candidates
    expected = lance.dataset(uri).to_table(columns=columns, filter=condition)
    step = _Candidates(3, 0, unknown=(2,))
    plan = plan_scan(ds, columns=columns, filter=condition, index=step, batch_size=256, options=options)
    assert plan.index is step and "ScalarIndexQuery: id % 3 = 0" in explain(plan)
    executor = ScanExecutor(ds, plan)
    assert_tables_equal(pa.Table.from_batches(list(executor.batches()), schema=executor.projected_schema), expected)
    assert step.asked == [0, 1, 2]
    table = _table()
    ids = table.column("id").to_numpy()
    live = ids % 13 != 4
    # fragments 0 and 1 read their live candidates only, fragment 2 all its live rows
    assert executor.counts.rows == int((live & (ids < 4_000) & (ids % 3 == 0)).sum() + (live & (ids >= 4_000)).sum())


def test_index_step_with_no_candidates_and_on_a_row_range(uri):
    ds = lance_format.dataset(uri)
    nothing = plan_scan(ds, columns=["id"], filter="id % 6 = 1", index=_Candidates(6, 0))
    assert ScanExecutor(ds, nothing).count() == 0
    second = ds.get_fragment(1)
    plan = plan_scan(ds, columns=["id", "url"], filter="url IS NULL", index=_Candidates(5, 0),
                     fragments=[FragmentRange(second, (500, 900))])
    got = pa.Table.from_batches(list(ScanExecutor(ds, plan).rows())).column("id").to_numpy()
    ids = np.arange(2_500, 2_900)
    assert np.array_equal(np.sort(got), ids[(ids % 5 == 0) & (ids % 13 != 4)])


def test_index_step_is_dropped_where_it_cannot_serve(uri):
    ds = lance_format.dataset(uri)
    assert plan_scan(ds, index=_Candidates(3, 0)).index is None  # no filter to narrow
    plan = plan_scan(ds, filter="id < 10", with_row_id=True, include_deleted_rows=True, index=_Candidates(3, 0))
    assert plan.index is None  # deleted rows are read in full


def test_counts_with_pyarrow_expression_filter(uri):
    ds = lance_format.dataset(uri)
    plan = plan_scan(ds, columns=["email"], filter=pc.field("sku") == "sku-9001")
    assert plan.filter_columns == ("sku",)
    assert ScanExecutor(ds, plan).count() == lance.dataset(uri).count_rows(filter="sku = 'sku-9001'")
