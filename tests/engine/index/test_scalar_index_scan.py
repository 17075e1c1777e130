"""Filters answered from indices inside the scan plan: more column types, scan options, and the
index step's choices (which fragments it narrows, what explain_plan says)."""

from __future__ import annotations

import decimal
from datetime import UTC, date, datetime, timedelta

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format

N = 2000


def _typed_table() -> pa.Table:
    rng = np.random.default_rng(3)
    f = rng.normal(size=N)
    f[::97] = np.nan
    f[5] = -0.0
    f[6] = 0.0
    start = datetime(2024, 3, 1, tzinfo=UTC)
    return pa.table({
        "f": pa.array(f, mask=np.arange(N) % 50 == 1),
        "d": pa.array([date(2024, 1, 1) + timedelta(days=int(i) % 60) for i in range(N)], pa.date32()),
        "tz": pa.array([start + timedelta(hours=int(i)) for i in range(N)], pa.timestamp("us", tz="UTC")),
        "dec": pa.array([decimal.Decimal(int(i) % 300) / 4 for i in range(N)], pa.decimal128(10, 2)),
        "flag": pa.array([None if i % 11 == 0 else bool(i % 3) for i in range(N)], pa.bool_()),
        "u8": pa.array(rng.integers(0, 255, N), pa.uint8()),
        "url": pa.array([f"https://example.com/{i % 41}/page" for i in range(N)]),
    })


FILTERS = {
    "f": ["f > 1.5", "f < -2", "f = 0.0", "f BETWEEN -0.1 AND 0.1", "f IS NULL", "f >= 0"],
    "d": ["d = DATE '2024-01-05'", "d > DATE '2024-02-25'", "d BETWEEN '2024-01-10' AND '2024-01-12'"],
    "tz": ["tz = TIMESTAMP '2024-03-02 01:00:00'", "tz < TIMESTAMP '2024-03-01 05:00:00'"],
    "dec": ["dec = 12.5", "dec > 74", "dec IN (1.25, 2.5)"],
    "flag": ["flag = true", "flag IS NULL", "NOT flag"],
    "u8": ["u8 = 7", "u8 > 250", "u8 IN (1, 2, 3)"],
    "url": ["url = 'https://example.com/7/page'", "url >= 'https://example.com/39'"],
}


def _rows(table: pa.Table) -> str:
    """The rows in row-id order, as text (NaN equals NaN here, unlike in ``Table.equals``)."""
    return repr(table.sort_by("_rowid").to_pylist())


@pytest.mark.parametrize("index_type", ["BTREE", "BITMAP"])
@pytest.mark.parametrize("builder", ["ours", "pylance"])
def test_typed_columns_answer_like_a_scan(tmp_path, index_type, builder):
    path = str(tmp_path / "t.lance")
    lance_format.write_dataset(_typed_table(), path, max_rows_per_file=700)
    lance_format.dataset(path).delete("u8 = 100")
    target = lance_format.dataset(path) if builder == "ours" else lance.dataset(path)
    for column in FILTERS:
        target.create_scalar_index(column, index_type)
    ours, theirs = lance_format.dataset(path), lance.dataset(path)
    for column, filters in FILTERS.items():
        for sql in filters:
            got = _rows(ours.to_table(filter=sql, with_row_id=True))
            assert got == _rows(ours.to_table(filter=sql, with_row_id=True, use_scalar_index=False)), sql
            try:
                expected = _rows(theirs.to_table(filter=sql, with_row_id=True))
            except ValueError as exc:  # pylance refuses some literals we coerce (a string for a date)
                assert "could not convert to literal" in str(exc)
                continue
            assert got == expected, sql
            if column in ("f", "u8", "url", "tz") and sql not in ("NOT flag",):
                assert "ScalarIndexQuery" in ours.scanner(filter=sql).explain_plan(), sql


def test_scan_options_with_an_index(tmp_path):
    path = str(tmp_path / "t.lance")
    table = pa.table({"id": pa.array(np.arange(N), pa.int64()), "s": pa.array([f"v{i % 7}" for i in range(N)])})
    lance_format.write_dataset(table, path, max_rows_per_file=500)
    ds = lance_format.dataset(path)
    ds.delete("id % 5 = 0")
    ds.create_scalar_index("id", "BTREE")
    ds = lance_format.dataset(path)
    sql = "id > 1200 AND id < 1230"

    def both(**kwargs):
        indexed = ds.to_table(filter=sql, **kwargs)
        assert indexed.equals(ds.to_table(filter=sql, use_scalar_index=False, **kwargs)), kwargs
        return indexed

    assert both(columns=["s", "_rowoffset"])["_rowoffset"].to_pylist()[:3] == [960, 961, 962]
    assert both(with_row_address=True)["_rowaddr"].to_pylist()[0] == (2 << 32) + 201
    assert both(limit=3, offset=2)["id"].to_pylist() == [1203, 1204, 1206]
    assert both(fragments=[ds.get_fragment(2)]).num_rows == 24
    assert both(fragments=[ds.get_fragment(0)]).num_rows == 0
    assert both(order_by=["s"]).num_rows == 24
    assert both(columns={"twice": "id * 2"})["twice"].to_pylist()[0] == 2402
    assert ds.count_rows(sql) == 24
    # deleted rows with include_deleted_rows: the index step is left out (every row is read)
    deleted = ds.to_table(filter="id = 1205", with_row_id=True, include_deleted_rows=True)
    assert deleted.num_rows == 1 and deleted["_rowid"][0].as_py() is None
    assert "ScalarIndexQuery" not in ds.scanner(filter="id = 1205", with_row_id=True,
                                                include_deleted_rows=True).explain_plan()
    # a pyarrow expression filter scans (no SQL to take index terms from)
    import pyarrow.compute as pc
    assert ds.to_table(filter=pc.field("id") == 1201).num_rows == 1


def test_the_index_step_narrows_only_what_it_covers(tmp_path):
    path = str(tmp_path / "t.lance")
    table = pa.table({"id": pa.array(np.arange(N), pa.int64()), "cat": pa.array(["a"] * (N - 10) + ["b"] * 10)})
    lance_format.write_dataset(table, path, max_rows_per_file=500)
    ds = lance_format.dataset(path)
    ds.create_scalar_index("id", "BTREE")
    ds.create_scalar_index("cat", "BITMAP")
    lance_format.write_dataset(pa.table({"id": pa.array([5, 2500], pa.int64()), "cat": ["b", "a"]}), path,
                               mode="append")
    ds = lance_format.dataset(path)
    step = ds.scanner(filter="id = 5").plan.index
    assert step is not None and step.covered == {0, 1, 2, 3}
    fragments = {f.fragment_id: f for f in ds.get_fragments()}
    assert step.candidates(fragments[0]).tolist() == [5]
    assert step.candidates(fragments[1]).tolist() == []
    assert step.candidates(fragments[4]) is None  # the appended fragment is scanned
    assert ds.to_table(filter="id = 5")["cat"].to_pylist() == ["a", "b"]
    # too many candidates in a fragment: it is scanned rather than taken row by row
    dense = ds.scanner(filter="cat = 'a'").plan.index
    assert dense.candidates(fragments[0]) is None
    assert ds.count_rows("cat = 'a'") == N - 10 + 1
    sparse = ds.scanner(filter="cat = 'b'").plan.index
    assert sparse.candidates(fragments[3]).tolist() == list(range(490, 500))
    plan = ds.scanner(filter="cat = 'b' AND (id < 3 OR id > 1995)").explain_plan()
    assert "ScalarIndexQuery: query=AND([cat = b]@cat_idx(Bitmap),OR([id < 3]@id_idx(BTree),[id > 1995]@id_idx(BTree)))" \
        in plan
    assert ds.to_table(filter="cat = 'b' AND (id < 3 OR id > 1995)")["id"].to_pylist() == [1996, 1997, 1998, 1999]
