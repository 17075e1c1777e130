"""``lance_format.spark.nearest``: a distributed k-NN join equal, query by query, to the engine's
``to_table(nearest=...)`` (exact search, the engine's tie order, deletions, the prefilter)."""

from __future__ import annotations

import lance as pylance
import numpy as np
import pyarrow as pa
import pytest

import lance_format as lance
import lance_format.spark.read
from lance_format.errors import ArgumentTypeError, DatasetNotFoundError, InvalidInputError, LanceError
from lance_format.spark import nearest

DIM = 8
ROWS = 600


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """600 rows in 5 fragments: skewed categories, URLs/e-mails with nulls, a few null vectors,
    duplicated vectors (ties), 30 deleted rows."""
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(ROWS, DIM)).astype(np.float32)
    vectors[400:410] = vectors[10:20]  # exact duplicates: equal distances, ordered by row id
    vec = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM)
    valid = np.ones(ROWS, bool)
    valid[[3, 77, 250]] = False
    vec = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM, mask=pa.array(~valid))
    category = rng.choice(np.array(["news", "sport", "shop", "rare"], dtype=object), ROWS, p=[.6, .25, .13, .02])
    url = pa.array([f"https://example.com/item/{i}?ref=mail" if i % 9 else None for i in range(ROWS)])
    email = pa.array([f"user{i % 37}@example.org" for i in range(ROWS)])
    t = pa.table({"id": np.arange(ROWS), "category": category, "url": url, "email": email, "vec": vec})
    uri = str(tmp_path_factory.mktemp("nearest") / "items.lance")
    lance.write_dataset(t, uri, max_rows_per_file=130)
    lance.dataset(uri).delete("id % 20 = 5")
    return uri, vectors


@pytest.fixture(scope="module")
def queries(table):
    """200 queries: random ones, and copies of table rows (distance 0, some of them duplicated)."""
    _, vectors = table
    rng = np.random.default_rng(11)
    q = rng.normal(size=(200, DIM)).astype(np.float32)
    q[:20] = vectors[[10, 11, 12, 405, 25, 3, 45, 60, 61, 62, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109]]
    return q


def _queries_df(spark, q, ids=None):
    ids = [f"q-{i:03d}" for i in range(len(q))] if ids is None else ids
    return spark.createDataFrame([(i, [float(x) for x in row], len(i)) for i, row in zip(ids, q)],
                                 "qid string, vector array<double>, weight int")


def _expected(uri, q, k, **kw):
    """The engine's batch search, as {query index: [(row id, distance, id), ...]}."""
    nearest_kw = {"column": "vec", "q": q, "k": k}
    if "metric" in kw:
        nearest_kw["metric"] = kw.pop("metric")
    t = lance.dataset(uri).to_table(nearest=nearest_kw, with_row_id=True, prefilter=True, **kw)
    out: dict[int, list] = {}
    for qi, rid, dist, row_id in zip(t["query_index"].to_pylist(), t["_rowid"].to_pylist(),
                                     t["_distance"].to_pylist(), t["id"].to_pylist()):
        out.setdefault(qi, []).append((rid, dist, row_id))
    return out


def _got(df, id_column="qid"):
    t = df.toArrow()
    out: dict = {}
    for qid, rid, dist, row_id in zip(t[id_column].to_pylist(), t["_rowid"].to_pylist(), t["_distance"].to_pylist(),
                                      t["id"].to_pylist()):
        out.setdefault(qid, []).append((rid, dist, row_id))
    return {key: sorted(rows, key=lambda r: (r[1], r[0])) for key, rows in out.items()}


def _assert_same(got, expected, n_queries, ids=None):
    ids = ids or [f"q-{i:03d}" for i in range(n_queries)]
    assert set(got) == {ids[i] for i in expected}
    for i, rows in expected.items():
        mine = got[ids[i]]
        assert [r[0] for r in mine] == [r[0] for r in rows], ids[i]  # same rows, same (tie) order
        assert [r[2] for r in mine] == [r[2] for r in rows]
        np.testing.assert_allclose([r[1] for r in mine], [r[1] for r in rows], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("metric", ["l2", "cosine", "dot"])
def test_join_equals_engine_per_query(spark, table, queries, metric):
    uri, _ = table
    df = nearest(spark, uri, _queries_df(spark, queries), "vec", k=7, metric=metric, query_id_column="qid",
                 with_row_id=True, rows_per_split=100, queries_per_task=100)
    assert df.columns == ["qid", "id", "category", "url", "email", "vec", "_rowid", "_distance"]
    expected = _expected(uri, queries, 7, metric=metric)
    _assert_same(_got(df), expected, len(queries))
    # the same rows as pylance finds (exact search over the same table)
    p = pylance.dataset(uri).to_table(nearest={"column": "vec", "q": queries[5], "k": 7, "metric": metric},
                                      with_row_id=True)
    assert p["_rowid"].to_pylist() == [r[0] for r in expected[5]]


def test_ties_deletions_and_prefilter(spark, table, queries):
    uri, _ = table
    q = queries[:40]
    flt = "category IN ('sport', 'rare') AND url IS NOT NULL"
    df = nearest(spark, uri, _queries_df(spark, q), "vec", k=5, filter=flt, columns=["id", "email"],
                 query_id_column="qid", with_row_id=True, rows_per_split=90)
    assert df.columns == ["qid", "id", "email", "_rowid", "_distance"]
    got = _got(df)
    _assert_same(got, _expected(uri, q, 5, filter=flt, columns=["id", "email", "category", "url"]), len(q))
    ids = {r[2] for rows in got.values() for r in rows}
    assert not {i for i in ids if i % 20 == 5}  # deleted rows never come back
    rows = df.where("qid = 'q-000'").toArrow()
    assert rows.num_rows == 5


def test_duplicates_tie_on_row_id(spark, table, queries):
    """Query 0 is row 10's vector, also stored at row 400 (another split): both at distance 0,
    and k=1 keeps the smaller row id, as the engine does; query 3 is row 405's (= row 15's)."""
    uri, _ = table
    df = nearest(spark, uri, _queries_df(spark, queries[:4]), "vec", k=1, columns=["id"], query_id_column="qid",
                 rows_per_split=60)
    assert "_rowid" not in df.columns
    t = df.toArrow().sort_by("qid")
    assert t["qid"].to_pylist() == ["q-000", "q-001", "q-002", "q-003"]
    assert t["id"].to_pylist() == [10, 11, 12, 15] and t["_distance"].to_pylist() == [0.0] * 4


def test_default_carries_query_columns_and_repeated_ids(spark, table, queries):
    """Without query_id_column every query column but the vector comes back; repeated ids are
    still separate queries."""
    uri, _ = table
    q = queries[:6]
    ids = ["dup", "dup", "a", "b", "c", "d"]
    df = nearest(spark, uri, _queries_df(spark, q, ids), "vec", k=3, columns=["id"], with_row_id=True)
    assert df.columns == ["qid", "weight", "id", "_rowid", "_distance"]
    t = df.toArrow()
    assert t.num_rows == 18
    assert t.filter(pa.compute.equal(t["qid"], "dup")).num_rows == 6
    assert set(t["weight"].to_pylist()) == {1, 3}


def test_queries_and_table_stay_on_executors(spark, table, queries):
    """The plan searches in applyInArrow tasks and merges with a window (no collect)."""
    uri, _ = table
    df = nearest(spark, uri, _queries_df(spark, queries[:10]), "vec", k=3, query_id_column="qid",
                 rows_per_split=100)
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "FlatMapGroupsInArrow" in plan and "Window" in plan
    # one shuffle partition per (split, query bucket), fixed by number (never coalesced)
    splits = len(lance_format.spark.read.plan_splits(lance.dataset(uri), target_splits=2, rows_per_split=100))
    assert splits > 1 and "REPARTITION_BY_NUM" in plan and "__lance_query_bucket#" in plan
    assert f", {splits})" in plan.split("REPARTITION_BY_NUM")[0].rsplit("hashpartitioning", 1)[1]


def test_empty_queries_and_k_above_rows(spark, table):
    uri, _ = table
    empty = spark.createDataFrame([], "qid string, vector array<float>")
    df = nearest(spark, uri, empty, "vec", k=3, query_id_column="qid")
    assert df.count() == 0 and df.columns[0] == "qid"
    one = spark.createDataFrame([("x", [0.0] * DIM)], "qid string, vector array<float>")
    t = nearest(spark, uri, one, "vec", k=1000, columns=["id"], query_id_column="qid").toArrow()
    live_with_vectors = lance.dataset(uri).count_rows("vec IS NOT NULL")
    assert t.num_rows == live_with_vectors


def test_bad_inputs_are_typed(spark, table, tmp_path):
    uri, _ = table
    good = spark.createDataFrame([("a", [0.5] * DIM)], "qid string, vector array<float>")
    with pytest.raises(InvalidInputError, match=r"dimension 8 .*'vec'.*3 values"):
        nearest(spark, uri, spark.createDataFrame([("a", [1.0, 2.0, 3.0])], "qid string, vector array<float>"), "vec")
    with pytest.raises(InvalidInputError, match="null"):
        nearest(spark, uri, spark.createDataFrame([("a", None)], "qid string, vector array<float>"), "vec")
    with pytest.raises(InvalidInputError, match="'nope' is not in the table"):
        nearest(spark, uri, good, "nope")
    with pytest.raises(InvalidInputError, match="no column 'embedding'"):
        nearest(spark, uri, good, "vec", query_column="embedding")
    with pytest.raises(InvalidInputError, match="no column 'key'"):
        nearest(spark, uri, good, "vec", query_id_column="key")
    with pytest.raises(ArgumentTypeError, match="array of numbers"):
        nearest(spark, uri, spark.createDataFrame([("a", "x")], "qid string, vector string"), "vec")
    with pytest.raises(ArgumentTypeError, match="must be a vector"):
        nearest(spark, uri, spark.createDataFrame([("a", [1.0])], "qid string, vector array<float>"), "email")
    with pytest.raises(InvalidInputError, match="k must be a positive"):
        nearest(spark, uri, good, "vec", k=0)
    with pytest.raises(InvalidInputError, match="Metric type 'manhattan'"):
        nearest(spark, uri, good, "vec", metric="manhattan")
    with pytest.raises(InvalidInputError, match="unknown column 'price'"):
        nearest(spark, uri, good, "vec", columns=["price"])
    with pytest.raises(LanceError):
        nearest(spark, uri, good, "vec", filter="category ===")
    with pytest.raises(InvalidInputError, match="clash"):
        nearest(spark, uri, spark.createDataFrame([("a", [0.5] * DIM)], "id string, vector array<float>"), "vec")
    with pytest.raises(DatasetNotFoundError):
        nearest(spark, str(tmp_path / "missing.lance"), good, "vec")


def test_spark_connect_session(spark_connect, table, queries):
    """The same join from a Spark Connect client (its functions and Window; tasks as in classic)."""
    uri, _ = table
    q = queries[:12]
    df = nearest(spark_connect, uri, _queries_df(spark_connect, q), "vec", k=4, query_id_column="qid",
                 with_row_id=True, rows_per_split=150)
    _assert_same(_got(df), _expected(uri, q, 4), len(q))
