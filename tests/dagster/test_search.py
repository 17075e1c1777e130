"""``LanceTableResource.search`` from downstream assets on a real Dagster instance: vector search
(the engine's ``nearest``, equal to pylance's exact search), full-text search over a
pylance-built INVERTED index, a filter, each output kind, typed errors; and the Spark batch
variant ``SparkSessionResource.search_batch`` (``lance_format.spark.nearest``)."""

from __future__ import annotations

import dagster as dg
import lance
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import lance_format
from lance_assets import LanceIOManager, LanceTableResource, SparkSessionResource
from lance_format.errors import DatasetNotFoundError, InvalidInputError

DIM = 6
N = 120
CATEGORIES = ["audio"] * 6 + ["sport"] * 3 + ["home"]
WORDS = ["wireless", "headphones", "battery", "running", "shoes", "kettle", "bottle", "usb-c"]
WEIGHTS = [0.05, 0.2, 0.1, 0.2, 0.2, 0.1, 0.1, 0.05]  # skewed: some words rare


def product_rows() -> pa.Table:
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(N, DIM)).astype(np.float32)
    return pa.table({
        "id": pa.array(range(N), pa.int64()),
        "category": [CATEGORIES[i % len(CATEGORIES)] for i in range(N)],  # skewed
        "url": [f"https://shop.example.com/p/{i}" if i % 13 else None for i in range(N)],
        "description": [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 6)), p=WEIGHTS)) for _ in range(N)],
        "embedding": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM),
    })


@dg.asset
def products() -> pa.Table:
    return product_rows()


QUERY = np.linspace(-1, 1, DIM).astype(np.float32)


@pytest.fixture
def lake(instance, root):
    """The upstream asset materialized, plus pylance's INVERTED index on its descriptions."""
    result = dg.materialize([products], instance=instance, resources={"io_manager": LanceIOManager(base_uri=root)})
    assert result.success
    lance.dataset(f"{root}/products.lance").create_scalar_index("description", "INVERTED")
    return root


def _run(asset, instance, root, **resources):
    return dg.materialize([products, asset], selection=[asset], instance=instance,
                          resources={"io_manager": LanceIOManager(base_uri=root),
                                     "lance": LanceTableResource(base_uri=root), **resources})


def test_downstream_vector_search_is_stored_and_equals_pylance(lake, instance):
    @dg.asset(deps=[products])
    def similar_products(lance: LanceTableResource) -> pa.Table:
        return lance.search("products", vector=QUERY, k=5, filter="category = 'audio'", prefilter=True,
                            columns=["id", "url", "category"], metric="cosine")

    result = _run(similar_products, instance, lake)
    assert result.success
    stored = lance_format.dataset(f"{lake}/similar_products.lance").to_table()
    assert stored.column_names == ["id", "url", "category", "_distance"]
    assert stored.num_rows == 5 and set(stored["category"].to_pylist()) == {"audio"}
    expected = lance.dataset(f"{lake}/products.lance").to_table(
        nearest={"column": "embedding", "q": QUERY, "k": 5, "metric": "cosine"}, filter="category = 'audio'",
        prefilter=True, columns=["id"])
    assert stored["id"].to_pylist() == expected["id"].to_pylist()
    np.testing.assert_allclose(stored["_distance"].to_numpy(), expected["_distance"].to_numpy(), rtol=1e-5)


@pytest.mark.parametrize(("output", "kind"), [("pyarrow", pa.Table), ("pandas", pd.DataFrame),
                                              ("polars", pl.DataFrame)])
def test_each_output_kind(lake, instance, output, kind):
    seen = {}

    @dg.asset(deps=[products])
    def searched(lance: LanceTableResource) -> dg.MaterializeResult:
        vectors = lance.search("products", QUERY, k=4, columns=["id"], output=output)
        text = lance.search("products", full_text="battery", k=3, columns=["id", "description"], output=output)
        seen["vector"], seen["text"] = vectors, text
        return dg.MaterializeResult(metadata={"rows": len(vectors) + len(text)})

    assert _run(searched, instance, lake).success
    vectors, text = seen["vector"], seen["text"]
    assert isinstance(vectors, kind) and isinstance(text, kind)
    as_arrow = {"pyarrow": lambda t: t, "pandas": pa.Table.from_pandas, "polars": lambda t: t.to_arrow()}[output]
    ids = as_arrow(vectors).column("id").to_pylist()
    exact = lance.dataset(f"{lake}/products.lance").to_table(
        nearest={"column": "embedding", "q": QUERY, "k": 4}, columns=["id"])
    assert ids == exact["id"].to_pylist()
    text_rows = as_arrow(text)
    assert text_rows.num_rows == 3 and all("battery" in d for d in text_rows.column("description").to_pylist())
    assert "_score" in text_rows.column_names


def test_full_text_with_filter_equals_pylance(lake, instance):
    @dg.asset(deps=[products])
    def battery_audio(lance: LanceTableResource) -> pa.Table:
        return lance.search("products", full_text="wireless battery", k=10, filter="category = 'audio'",
                            prefilter=True, columns=["id", "description"])

    assert _run(battery_audio, instance, lake).success
    ours = lance_format.dataset(f"{lake}/battery_audio.lance").to_table()
    theirs = lance.dataset(f"{lake}/products.lance").to_table(
        full_text_query="wireless battery", limit=10, filter="category = 'audio'", prefilter=True,
        columns=["id", "description"])
    assert ours.num_rows == theirs.num_rows > 0
    assert sorted(ours["id"].to_pylist()) == sorted(theirs["id"].to_pylist())
    np.testing.assert_allclose(sorted(ours["_score"].to_pylist()), sorted(theirs["_score"].to_pylist()), atol=1e-5)


def test_query_batches_and_text_column(lake):
    """A batch of vectors answers per query (``query_index``); ``column=`` picks the text column."""
    tables = LanceTableResource(base_uri=lake)
    batch = np.stack([QUERY, -QUERY])
    t = tables.search("products", batch, k=3, columns=["id"], metric="dot")
    assert t.column_names[0] == "query_index" and t["query_index"].to_pylist() == [0, 0, 0, 1, 1, 1]
    for i in range(2):
        one = tables.search("products", batch[i], k=3, columns=["id"], metric="dot")
        assert t.filter(pa.compute.equal(t["query_index"], i))["id"].to_pylist() == one["id"].to_pylist()
    text = tables.search("products", full_text="kettle", column="description", k=50, columns=["description"])
    assert text.num_rows > 0 and all("kettle" in d for d in text["description"].to_pylist())
    with pytest.raises(InvalidInputError, match="vector searches only"):
        tables.search("products", full_text="kettle", metric="l2")


def test_errors_are_typed(lake, instance):
    tables = LanceTableResource(base_uri=lake)
    with pytest.raises(DatasetNotFoundError):
        tables.search("no_such_table", vector=QUERY)
    with pytest.raises(InvalidInputError, match="needs a query: vector= .* or full_text="):
        tables.search("products", filter="id > 3")
    with pytest.raises(InvalidInputError, match="not both"):
        tables.search("products", vector=QUERY, full_text="battery")
    with pytest.raises(InvalidInputError, match="output must be one of"):
        tables.search("products", vector=QUERY, output="csv")
    with pytest.raises(InvalidInputError, match="Query vector size 3 does not match"):
        tables.search("products", vector=[1.0, 2.0, 3.0])
    with pytest.raises(InvalidInputError, match="k must be a positive"):
        tables.search("products", vector=QUERY, k=0)

    @dg.asset(deps=[products])
    def broken(lance: LanceTableResource) -> pa.Table:
        return lance.search("missing/table", vector=QUERY)

    with pytest.raises(DatasetNotFoundError, match="missing/table.lance"):
        _run(broken, instance, lake)
    result = dg.materialize(
        [products, broken], selection=[broken], instance=instance, raise_on_error=False,
        resources={"io_manager": LanceIOManager(base_uri=lake), "lance": LanceTableResource(base_uri=lake)})
    assert not result.success


def test_spark_batch_search_from_an_asset(spark, lake, instance):
    rng = np.random.default_rng(9)
    queries = rng.normal(size=(40, DIM)).astype(np.float32)

    @dg.asset(deps=[products])
    def neighbours(lance: LanceTableResource, spark: SparkSessionResource) -> dg.MaterializeResult:
        q = pa.table({"user": [f"user{i}@example.com" for i in range(len(queries))],
                      "vector": pa.FixedSizeListArray.from_arrays(pa.array(queries.ravel()), DIM)})
        df = spark.search_batch(lance, "products", q, k=3, query_id_column="user", columns=["id"],
                                filter="url IS NOT NULL", rows_per_split=40)
        t = df.toArrow()
        return dg.MaterializeResult(metadata={"pairs": t.num_rows,
                                              "first": sorted(t.filter(pa.compute.equal(t["user"], "user0@example.com"))
                                                              ["id"].to_pylist())})

    result = _run(neighbours, instance, lake, spark=SparkSessionResource())
    assert result.success
    meta = result.asset_materializations_for_node("neighbours")[-1].metadata
    assert meta["pairs"].value == 120
    expected = lance_format.dataset(f"{lake}/products.lance").to_table(
        nearest={"column": "embedding", "q": queries[0], "k": 3}, filter="url IS NOT NULL", prefilter=True,
        columns=["id"])
    assert meta["first"].value == sorted(expected["id"].to_pylist())
