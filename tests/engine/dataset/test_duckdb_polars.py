"""DuckDB and Polars query a lance_format dataset as they query pylance's (a pyarrow Dataset
with projection and filter pushdown), with the same answers as over pylance's dataset of the
same table and over pyarrow's in-memory table."""

from __future__ import annotations

import datetime as dt
import decimal
import pickle

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pytest

import lance_format
from lance_format.dataset.sql.pushdown import split_arrow_filter
from lance_format.errors import UnsupportedFeatureError

duckdb = pytest.importorskip("duckdb")
pl = pytest.importorskip("polars")
lance = pytest.importorskip("lance")

ROWS = 3000
UTC = dt.UTC


def _table() -> pa.Table:
    """Realistic columns with nulls: ids, skewed categories, e-mails and URLs with LIKE's special
    characters, zoned and naive timestamps, dates, decimals, floats, booleans, a nested struct."""
    ids = list(range(ROWS))
    categories = ["web" if i % 10 < 6 else "store" if i % 10 < 9 else "partner_x%" for i in ids]
    emails = [None if i % 7 == 0 else f"user{i % 97}@{'example' if i % 3 else 'mail'}.com" for i in ids]
    urls = [f"https://shop.example.com/p/{i}?q=it's_{i % 5}\\x" for i in ids]
    start = dt.datetime(2024, 1, 1, tzinfo=UTC)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "qty": pa.array([None if i % 11 == 0 else i % 50 for i in ids], pa.int32()),
        "category": categories,
        "email": emails,
        "url": pa.array(urls, pa.large_string()),
        "ts": pa.array([None if i % 13 == 0 else start + dt.timedelta(minutes=37 * i, microseconds=i)
                        for i in ids], pa.timestamp("us", tz="UTC")),
        "ts_ny": pa.array([start + dt.timedelta(hours=i) for i in ids], pa.timestamp("ms", tz="America/New_York")),
        "naive": pa.array([dt.datetime(2024, 3, 1) + dt.timedelta(seconds=i * 61) for i in ids], pa.timestamp("ns")),
        "day": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i % 400) for i in ids], pa.date32()),
        "price": pa.array([None if i % 17 == 0 else decimal.Decimal(i % 1000) / 4 for i in ids], pa.decimal128(10, 2)),
        "score": pa.array([None if i % 19 == 0 else (i % 200) / 8 - 5 for i in ids], pa.float64()),
        "flag": pa.array([None if i % 23 == 0 else i % 2 == 0 for i in ids], pa.bool_()),
        "info": pa.array([None if i % 29 == 0 else {"plan": "pro" if i % 4 else None, "level": i % 6,
                                                    "address": {"city": ["Oslo", "Lima", "Pune"][i % 3]}}
                          for i in ids]),
    })


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    table = _table()
    path = str(tmp_path_factory.mktemp("duck") / "t.lance")
    lance.write_dataset(table, path, max_rows_per_file=1000)  # three fragments
    return {"ours": lance_format.dataset(path), "pylance": lance.dataset(path), "arrow": table}


# filters DuckDB pushes into the scan (comparisons, IN, IS [NOT] NULL, AND/OR, strings,
# timestamps with time zones, dates, decimals, booleans) and ones it evaluates itself
DUCKDB_FILTERS = [
    "id = 1000", "id > 2500", "id BETWEEN 100 AND 130", "id != 5 AND id < 40", "qty >= 45",
    "qty IS NULL", "qty IS NOT NULL AND id < 50", "id IN (1, 5, 700, 2999)", "qty IN (1, 2, 3)",
    "category = 'partner_x%'", "category > 'store'", "email = 'user5@example.com'", "email IS NULL",
    "email IS NOT NULL AND email < 'user2'", "(id < 10 OR id > 2990) AND qty IS NOT NULL",
    "ts > TIMESTAMPTZ '2024-01-20 10:00:00+00'", "ts <= TIMESTAMPTZ '2024-01-01 06:00:00.000009+02'",
    "ts_ny >= TIMESTAMPTZ '2024-02-01 00:00:00-05'", "naive < TIMESTAMP '2024-03-01 02:00:00'",
    "day = DATE '2024-02-29'", "day >= DATE '2024-12-25'", "price > 200.5", "price = 12.25", "price IS NULL",
    "flag", "NOT flag", "flag IS NULL", "flag = false AND qty < 3",
    "email LIKE 'user1%'", "ts::DATE = DATE '2024-01-02'", "qty + 1 > 49", "score > 10",
    "score = 0.0", "score < -4.5", "score IS NULL",
]
# filters pylance 14 refuses to push down (its Substrait conversion): struct fields, which
# DuckDB pushes as nested field references, and large_string literals
PYLANCE_REFUSES = {
    "info.level = 3": "nested references", "info.plan IS NULL AND id < 100": "nested references",
    "info.address.city = 'Lima' AND id < 30": "nested references",
    "url = 'https://shop.example.com/p/7?q=it''s_2\\x'": "not yet supported by Substrait",
}


def _duckdb(source: object, where: str) -> list[tuple[object, ...]]:
    con = duckdb.connect()
    con.register("t", source)
    try:
        return con.sql(f"SELECT id, qty, email, ts, price, info FROM t WHERE {where} ORDER BY id").fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("where", DUCKDB_FILTERS)
def test_duckdb_filters_agree_with_pylance_and_pyarrow(sources: dict[str, object], where: str) -> None:
    ours = _duckdb(sources["ours"], where)
    assert ours == _duckdb(sources["arrow"], where)
    assert ours == _duckdb(sources["pylance"], where)
    assert ours, "every filter here matches some rows"


@pytest.mark.parametrize("where", sorted(PYLANCE_REFUSES))
def test_duckdb_filters_pylance_refuses(sources: dict[str, object], where: str) -> None:
    ours = _duckdb(sources["ours"], where)
    assert ours and ours == _duckdb(sources["arrow"], where)
    with pytest.raises(duckdb.Error, match=PYLANCE_REFUSES[where]):
        _duckdb(sources["pylance"], where)


def test_duckdb_aggregates_and_replacement_scans(sources: dict[str, object]) -> None:
    ds = sources["ours"]
    sql = ("SELECT category, count(*), sum(qty), min(ts), max(price) FROM ds WHERE email IS NOT NULL "
           "AND id >= 500 GROUP BY category ORDER BY category")
    ours = duckdb.sql(sql).fetchall()  # a replacement scan of the local variable `ds`
    ds = sources["arrow"]
    assert ours == duckdb.sql(sql).fetchall()
    ds = sources["ours"]
    assert duckdb.arrow(ds).filter("id < 10").aggregate("count(*)").fetchall() == [(10,)]
    assert duckdb.from_arrow(ds).filter("qty = 3").count("*").fetchall() == [(sum(
        1 for i in range(ROWS) if i % 11 and i % 50 == 3),)]
    scanner = ds.scanner(columns=["id"], filter="id < 5")  # noqa: F841  (a Scanner replacement scan)
    assert duckdb.sql("SELECT sum(id) FROM scanner").fetchall() == [(10,)]


def test_duckdb_pushes_projection_and_filter_down(sources: dict[str, object],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    ds = sources["ours"]
    calls, streamed = [], []
    scanner = type(ds).scanner

    def spy(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(kwargs)
        made = scanner(self, *args, **kwargs)
        batches = made.to_batches

        def counted():  # type: ignore[no-untyped-def]
            for batch in batches():
                streamed.append(batch.num_rows)
                yield batch
        made.to_batches = counted
        return made

    monkeypatch.setattr(type(ds), "scanner", spy)
    assert duckdb.sql("SELECT email FROM ds WHERE id BETWEEN 10 AND 19 AND email IS NOT NULL").fetchall()
    (call,) = calls
    assert call["columns"] == ["email"]
    assert isinstance(call["filter"], pc.Expression)
    split = split_arrow_filter(call["filter"], ds.schema)
    assert split.sql is not None and split.residual is None  # all of it reached the SQL layer
    assert "`id` >= 10" in split.sql and "`email` IS NOT NULL" in split.sql
    assert sum(streamed) == sum(1 for i in range(10, 20) if i % 7)  # only matching rows left the scan


POLARS_FILTERS = [
    pl.col("id") > 2900, pl.col("id").is_in([3, 4, 1500]), pl.col("email").is_null(),
    pl.col("email").is_not_null() & (pl.col("id") < 30), ~pl.col("flag") & (pl.col("id") < 40),
    (pl.col("qty") < 2) | pl.col("id").is_between(10, 12), pl.col("category") == "partner_x%",
    pl.col("email").str.starts_with("user1"), pl.col("url").str.contains("it's_3", literal=True),
    pl.col("ts") > dt.datetime(2024, 1, 30, tzinfo=UTC), pl.col("day") >= dt.date(2024, 12, 1),
    pl.col("price") > decimal.Decimal("240.5"), pl.col("info").struct.field("level") == 2,
    pl.col("qty") != 7, pl.col("score") < -4, pl.col("email").is_in(["user3@example.com", "user4@mail.com"]),
]


@pytest.mark.parametrize("predicate", POLARS_FILTERS, ids=[str(p) for p in POLARS_FILTERS])
def test_polars_scan_pyarrow_dataset_agrees(sources: dict[str, object], predicate: object) -> None:
    def run(dataset: object) -> object:
        return pl.scan_pyarrow_dataset(dataset).filter(predicate).select("id", "email", "ts", "price").sort("id").collect()

    ours = run(sources["ours"])
    assert ours.height > 0
    assert ours.equals(run(pads.dataset(sources["arrow"])))
    assert ours.equals(run(sources["pylance"]))


def test_polars_naive_nanosecond_timestamps(sources: dict[str, object]) -> None:
    predicate = pl.col("naive") < dt.datetime(2024, 3, 1, 1)
    frame = pl.scan_pyarrow_dataset(sources["ours"]).filter(predicate).select("id").collect()
    assert frame.equals(pl.scan_pyarrow_dataset(pads.dataset(sources["arrow"])).filter(predicate).select("id").collect())
    assert frame["id"].to_list() == list(range(60))  # one row a minute and a second
    with pytest.raises(Exception, match="substrait"):  # pylance 14 cannot push this literal
        pl.scan_pyarrow_dataset(sources["pylance"]).filter(predicate).collect()


def test_polars_head_and_projection(sources: dict[str, object]) -> None:
    frame = pl.scan_pyarrow_dataset(sources["ours"]).select("id", "category").head(5).collect()
    assert frame["id"].to_list() == [0, 1, 2, 3, 4] and frame.columns == ["id", "category"]


def test_official_lance_test_duckdb(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Official Lance's test_filter.py::test_duckdb, on a smaller table."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(3)
    n = 2000
    tbl = pa.table({"vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.standard_normal(n * 8)), 8),
                    "price": pa.array((rng.random(n) + 1) * 100),
                    "meta": pa.array(rng.choice(["a", "b", "c", "aa"], n)), "id": pa.array(range(n))})
    ds = lance_format.write_dataset(tbl, str(tmp_path / "t"))  # noqa: F841  (DuckDB finds it by name)
    everything = duckdb.query("SELECT id, meta, price FROM ds").to_df()
    for where, keep in [("id==1000", everything.id == 1000), ("id=1000", everything.id == 1000),
                        ("price>20.0 and price<=90", (everything.price > 20.0) & (everything.price <= 90)),
                    ("price>120.0 and price<=190", (everything.price > 120.0) & (everything.price <= 190)),
                        ("meta=='aa'", everything.meta == "aa")]:
        actual = duckdb.query(f"SELECT id, meta, price FROM ds WHERE {where}").to_df()
        expected = everything[keep].reset_index(drop=True)
        assert len(actual) == len(keep[keep]) and len(actual) < n
        pd.testing.assert_frame_equal(actual, expected, check_dtype=False)


def test_arrow_stream_interface(sources: dict[str, object]) -> None:
    ds = sources["ours"]
    assert isinstance(ds, pads.Dataset) and isinstance(ds.scanner(), pads.Scanner)
    assert pa.table(ds).equals(sources["arrow"])
    reader = pa.RecordBatchReader.from_stream(ds.scanner(columns=["id", "email"], filter="id < 3"))
    assert reader.read_all().to_pydict() == {"id": [0, 1, 2], "email": [None, "user1@example.com", "user2@example.com"]}
    # a requested schema the stream can be cast to
    wanted = pa.schema([pa.field("id", pa.int32()), pa.field("email", pa.large_string())])
    cast = pa.RecordBatchReader.from_stream(ds.scanner(columns=["id", "email"], filter="id < 2"), schema=wanted)
    assert cast.read_all().schema == wanted
    assert pl.from_arrow(pa.table(ds.scanner(columns=["id"], filter=pc.field("id") < 4)))["id"].to_list() == [0, 1, 2, 3]


def test_pyarrow_dataset_surface(sources: dict[str, object]) -> None:
    ds = sources["ours"]
    assert ds.count_rows(filter=pc.field("qty") == 3) == sources["arrow"].filter(pc.field("qty") == 3).num_rows
    assert ds.head(3, columns=["id"], filter=pc.field("id") > 10).to_pydict() == {"id": [11, 12, 13]}
    assert ds.to_table(filter=pc.field("info", "address", "city") == "Pune").num_rows == \
        sources["arrow"].filter(pc.field("info", "address", "city") == "Pune").num_rows
    assert ds.filter(pc.field("id") < 3).to_table().num_rows == 3  # pyarrow's relational methods run
    assert ds.sort_by([("id", "descending")]).head(1)["id"].to_pylist() == [ROWS - 1]
    with pytest.raises(UnsupportedFeatureError, match="replace_schema"):
        pads.dataset([ds])  # a union of datasets needs pyarrow's native ones, as with pylance
    with pytest.raises(UnsupportedFeatureError):
        ds._get_fragments()
    with pytest.raises(TypeError):
        pads.dataset(ds)  # as with pylance


def test_dataset_pickles_after_scans(sources: dict[str, object]) -> None:
    ds = lance_format.dataset(sources["ours"].uri)
    ds.to_table(filter="id < 10")  # fills the fragment caches, which hold open files
    copy = pickle.loads(pickle.dumps(ds))
    assert copy.version == ds.version and copy.count_rows(filter=pc.field("id") < 10) == 10
    frame = pickle.loads(pickle.dumps(pl.scan_pyarrow_dataset(ds).filter(pl.col("id") < 3))).collect()
    assert frame["id"].to_list() == [0, 1, 2]
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(ds.scanner())
