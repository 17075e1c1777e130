"""``nearest`` scans (exact flat k-NN) against pylance 14.0.2's flat search on the same tables:
the same rows in the same order, ``_distance`` within float tolerance, pylance's columns and
error texts."""

from __future__ import annotations

import lance as pylance
import numpy as np
import pyarrow as pa
import pytest

import lance_format as lance
from lance_format.errors import InvalidInputError, LanceError

DIM = 64


def _clustered(rows: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=4.0, size=(32, dim))
    return (centers[rng.integers(0, 32, rows)] + rng.normal(size=(rows, dim))).astype(np.float32)


def _vectors(values: np.ndarray, dtype: pa.DataType) -> pa.FixedSizeListArray:
    return pa.FixedSizeListArray.from_arrays(pa.array(values.ravel(), type=dtype), values.shape[1])


@pytest.fixture(scope="module")
def embeddings(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, np.ndarray]:
    """20k x 64 clustered float32 embeddings in 4 fragments, with URLs and skewed categories,
    some rows deleted and one fragment appended."""
    vectors = _clustered(20_000, DIM, 7)
    rows = len(vectors)
    category = np.where(np.arange(rows) % 10 < 7, "news", np.where(np.arange(rows) % 10 < 9, "blog", "shop"))
    table = pa.table({
        "id": np.arange(rows),
        "url": [f"https://example.com/{i % 977}/page?x={i}" for i in range(rows)],
        "category": category,
        "vec": _vectors(vectors, pa.float32()),
    })
    uri = str(tmp_path_factory.mktemp("nearest") / "emb.lance")
    pylance.write_dataset(table.slice(0, 18_000), uri, max_rows_per_file=6_000)
    pylance.write_dataset(table.slice(18_000), uri, mode="append")
    pylance.dataset(uri).delete("id % 97 = 3 OR id = 12")
    return uri, vectors


def _both(uri: str, **kwargs) -> tuple[pa.Table, pa.Table]:
    return lance.dataset(uri).to_table(**kwargs), pylance.dataset(uri).to_table(**kwargs)


def _assert_same(ours: pa.Table, theirs: pa.Table, key: str = "id") -> None:
    assert ours.schema == theirs.schema
    assert ours.column(key).to_pylist() == theirs.column(key).to_pylist()
    np.testing.assert_allclose(ours.column("_distance").to_numpy(), theirs.column("_distance").to_numpy(),
                               rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("metric", ["l2", "cosine", "dot", "L2", "euclidean"])
def test_every_metric_matches_pylance(embeddings, metric) -> None:
    uri, vectors = embeddings
    for query in (vectors[12], vectors[5] + 0.5, vectors[19_999]):  # a deleted row's vector, near ones
        ours, theirs = _both(uri, nearest={"column": "vec", "q": query, "k": 25, "metric": metric,
                                           "use_index": False})
        assert ours.num_rows == 25
        assert 12 not in ours.column("id").to_pylist()  # deleted rows never come back
        _assert_same(ours, theirs)


def test_ties_broken_by_row_id_as_pylance(tmp_path) -> None:
    vectors = np.repeat(np.eye(8, dtype=np.float32), 5, axis=0)  # every vector five times
    uri = str(tmp_path / "ties.lance")
    pylance.write_dataset(pa.table({"id": np.arange(40)[::-1].copy(), "vec": _vectors(vectors, pa.float32())}), uri,
                          max_rows_per_file=7)
    for k in (3, 7, 12):
        ours, theirs = _both(uri, nearest={"column": "vec", "q": vectors[9], "k": k})
        _assert_same(ours, theirs)


@pytest.mark.parametrize("prefilter", [True, False])
def test_filters_before_or_after_the_search(embeddings, prefilter) -> None:
    uri, vectors = embeddings
    for sql in ("category = 'shop'", "url LIKE '%/5%' AND id > 1000", "id < 0"):
        ours, theirs = _both(uri, nearest={"column": "vec", "q": vectors[40], "k": 30}, filter=sql,
                             prefilter=prefilter)
        _assert_same(ours, theirs)
        if prefilter and sql != "id < 0":
            assert ours.num_rows == 30
    # postfilter: the top 30 first, then the filter (fewer rows)
    post = lance.dataset(uri).to_table(nearest={"column": "vec", "q": vectors[40], "k": 30},
                                       filter="category = 'shop'", prefilter=False)
    assert post.num_rows < 30


def test_limit_offset_k_and_columns(embeddings) -> None:
    uri, vectors = embeddings
    q = vectors[77]
    cases = [
        dict(limit=5),  # limit below k
        dict(limit=50),  # above k: k rows
        dict(limit=4, offset=3),
        dict(offset=9),
        dict(limit=7, k=None),  # k defaults to the limit
        dict(k=None),  # ... else 10
        dict(columns=["id"], with_row_id=True),
        dict(columns=["_distance", "url"]),
        dict(columns=[], limit=3),
        dict(columns=["_rowid", "id"], disable_scoring_autoprojection=False),
        dict(columns=["id", "_rowaddr"], disable_scoring_autoprojection=True),
        dict(columns=["id", "category"], with_row_id=True, with_row_address=True, filter="category != 'news'",
             prefilter=True, limit=6, offset=2),
    ]
    for case in cases:
        k = case.pop("k", 20)
        nearest = {"column": "vec", "q": q} | ({"k": k} if k else {})
        ours, theirs = _both(uri, nearest=nearest, **case)
        key = next((n for n in ("id", "url") if n in theirs.schema.names), None)
        if "_distance" not in theirs.schema.names:
            assert ours.schema == theirs.schema and ours.column(key).to_pylist() == theirs.column(key).to_pylist()
            continue
        if key is None:  # only distances: compare them
            assert ours.schema == theirs.schema and ours.num_rows == theirs.num_rows
            np.testing.assert_allclose(ours.column("_distance").to_numpy(), theirs.column("_distance").to_numpy(),
                                       rtol=1e-4)
            continue
        _assert_same(ours, theirs, key)
        if "_rowid" in theirs.schema.names:
            assert ours.column("_rowid").to_pylist() == theirs.column("_rowid").to_pylist()
    scanner = lance.dataset(uri).scanner(nearest={"column": "vec", "q": q, "k": 8}, filter="id > 5")
    assert scanner.count_rows() == pylance.dataset(uri).scanner(nearest={"column": "vec", "q": q, "k": 8},
                                                               filter="id > 5").count_rows()


def test_batch_of_queries(embeddings) -> None:
    uri, vectors = embeddings
    queries = vectors[[3, 500, 9_000]] + 0.25
    for kwargs in (dict(), dict(limit=20), dict(filter="category = 'blog'", prefilter=True)):
        ours, theirs = _both(uri, nearest={"column": "vec", "q": queries, "k": 10}, **kwargs)
        assert ours.schema.names[0] == "query_index"
        assert ours.column("query_index").to_pylist() == theirs.column("query_index").to_pylist()
        _assert_same(ours, theirs)


def test_appends_are_searched(tmp_path) -> None:
    vectors = _clustered(3_000, 16, 3)
    uri = str(tmp_path / "grow.lance")
    table = pa.table({"id": np.arange(3_000), "vec": _vectors(vectors, pa.float32())})
    lance.write_dataset(table.slice(0, 2_000), uri)
    lance.write_dataset(table.slice(2_000), uri, mode="append")
    lance.dataset(uri).delete("id >= 2500 AND id < 2600")
    for query in (vectors[2_550], vectors[2_700]):
        ours, theirs = _both(uri, nearest={"column": "vec", "q": query, "k": 15})
        _assert_same(ours, theirs)


@pytest.mark.parametrize("dtype", [pa.float16(), pa.float64()])
def test_float16_and_float64_vectors(tmp_path, dtype) -> None:
    vectors = _clustered(400, 24, 11)
    uri = str(tmp_path / "floats.lance")
    pylance.write_dataset(pa.table({"id": np.arange(400), "vec": _vectors(vectors.astype(dtype.to_pandas_dtype()),
                                                                          dtype)}), uri)
    for metric in ("l2", "cosine", "dot"):
        ours, theirs = _both(uri, nearest={"column": "vec", "q": vectors[7] + 0.1, "k": 12, "metric": metric})
        assert ours.schema.field("_distance").type == pa.float32()
        _assert_same(ours, theirs)


def test_uint8_hamming_with_ties(tmp_path) -> None:
    rng = np.random.default_rng(5)
    codes = rng.integers(0, 256, size=(300, 8)).astype(np.uint8)
    uri = str(tmp_path / "bits.lance")
    pylance.write_dataset(pa.table({"id": np.arange(300), "vec": _vectors(codes, pa.uint8())}), uri,
                          max_rows_per_file=100)
    for k in (1, 9, 40):
        ours, theirs = _both(uri, nearest={"column": "vec", "q": codes[17], "k": k, "metric": "hamming"})
        _assert_same(ours, theirs)  # integer distances: many ties, broken by row id
    ours, theirs = _both(uri, nearest={"column": "vec", "q": codes[4], "k": 5})  # hamming: uint8's default
    _assert_same(ours, theirs)
    for metric in ("l2", "cosine"):
        with pytest.raises(InvalidInputError, match=f"Distance type {metric} does not support UInt8 vectors"):
            lance.dataset(uri).to_table(nearest={"column": "vec", "q": codes[4], "metric": metric})


def test_bfloat16_vectors_refused_as_pylance_14(tmp_path) -> None:
    from lance.arrow import bfloat16_array

    values = bfloat16_array([0.5, 1.0, -2.0, 3.0] * 4)
    uri = str(tmp_path / "bf16.lance")
    pylance.write_dataset(pa.table({"id": np.arange(4), "vec": pa.FixedSizeListArray.from_arrays(values, 4)}), uri)
    with pytest.raises(ValueError, match="vector element is not expected type"):
        pylance.dataset(uri).to_table(nearest={"column": "vec", "q": [1.0, 0, 0, 0], "k": 2})
    with pytest.raises(InvalidInputError, match="vector element is not expected type"):
        lance.dataset(uri).to_table(nearest={"column": "vec", "q": [1.0, 0, 0, 0], "k": 2})


def test_null_and_nan_vectors_are_skipped(tmp_path) -> None:
    vectors = _clustered(60, 4, 2)
    vectors[8, 1] = np.nan
    mask = np.zeros(60, bool)
    mask[[3, 5, 7]] = True
    uri = str(tmp_path / "nulls.lance")
    column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 4, mask=pa.array(mask))
    pylance.write_dataset(pa.table({"id": np.arange(60), "vec": column}), uri)
    ours, theirs = _both(uri, nearest={"column": "vec", "q": vectors[3], "k": 100})
    assert ours.num_rows == 56
    _assert_same(ours, theirs)


def test_explain_shows_the_knn_step(embeddings) -> None:
    uri, vectors = embeddings
    text = lance.dataset(uri).scanner(nearest={"column": "vec", "q": vectors[0], "k": 5}, filter="id > 3",
                                      prefilter=True).explain_plan()
    assert "KNNVectorDistance: k=5, metric=l2" in text
    assert "SortExec: TopK(fetch=5)" in text
    assert text.index("KNNVectorDistance") < text.index("full_filter=(id > 3)")


def test_index_built_by_pylance_is_searched_exactly(tmp_path) -> None:
    vectors = _clustered(3_000, 16, 9)
    uri = str(tmp_path / "indexed.lance")
    ds = pylance.write_dataset(pa.table({"id": np.arange(3_000), "vec": _vectors(vectors, pa.float32())}), uri)
    ds.create_index("vec", "IVF_FLAT", num_partitions=4)
    # pylance probes adaptively without nprobes; searched flat here
    ours = lance.dataset(uri).to_table(nearest={"column": "vec", "q": vectors[10], "k": 10, "ef": 30})
    exact = pylance.dataset(uri).to_table(nearest={"column": "vec", "q": vectors[10], "k": 10, "use_index": False})
    _assert_same(ours, exact)  # recall 1.0


@pytest.mark.parametrize(("nearest", "message"), [
    ({"q": np.zeros(5)}, "Query vector size 5 does not match index column size 64"),
    ({"column": "url"}, "Query column url must be a vector. Got string."),
    ({"column": "nope"}, "Embedding column nope is not in the dataset"),
    ({"k": 0}, "Nearest-K must be > 0 but got 0"),
    ({"metric": "manhattan"}, "Metric type 'manhattan' is not supported"),
    ({"metric": "hamming"}, "Distance type hamming does not support Float32 vectors"),
    ({"nprobes": 0}, "Nprobes must be > 0 but got 0"),
    ({"refine_factor": 0}, "Refine factor must be 1 or more got 0"),
    ({"minimum_nprobes": 5, "maximum_nprobes": 2}, "minimum_nprobes must be <= maximum_nprobes"),
])
def test_errors_as_pylance(embeddings, nearest, message) -> None:
    uri, vectors = embeddings
    query = {"column": "vec", "q": vectors[0], "k": 3} | nearest
    with pytest.raises((ValueError, TypeError)) as theirs:
        pylance.dataset(uri).to_table(nearest=query)
    assert message in str(theirs.value)
    with pytest.raises(LanceError) as ours:
        lance.dataset(uri).to_table(nearest=query)
    assert message in str(ours.value)
    assert isinstance(ours.value, type(theirs.value)) or isinstance(ours.value, InvalidInputError)


def test_fast_search_and_distance_range(tmp_path) -> None:
    vectors = _clustered(3_000, 16, 4)
    uri = str(tmp_path / "fast.lance")
    table = pa.table({"id": np.arange(3_000), "vec": _vectors(vectors, pa.float32())})
    ds = pylance.write_dataset(table.slice(0, 2_000), uri)
    query = vectors[2_500]
    # no vector index: fast_search finds nothing, as pylance
    ours, theirs = _both(uri, nearest={"column": "vec", "q": query, "k": 5}, fast_search=True)
    assert ours.num_rows == theirs.num_rows == 0
    ds.create_index("vec", "IVF_FLAT", num_partitions=2)
    pylance.write_dataset(table.slice(2_000), uri, mode="append")
    # with one: only the indexed fragments (IVF_FLAT probing both partitions is exact)
    ours, theirs = _both(uri, nearest={"column": "vec", "q": query, "k": 8, "nprobes": 2}, fast_search=True)
    assert max(ours.column("id").to_pylist()) < 2_000
    _assert_same(ours, theirs)
    for bounds in ((None, 60.0), (20.0, None), (10.0, 40.0)):
        ours, theirs = _both(uri, nearest={"column": "vec", "q": query, "k": 8, "distance_range": bounds,
                                           "use_index": False})
        _assert_same(ours, theirs)


def test_builder_default_options_and_tensor_vectors(tmp_path) -> None:
    vectors = _clustered(200, 4, 8)
    uri = str(tmp_path / "tensor.lance")
    tensor = pa.ExtensionArray.from_storage(pa.fixed_shape_tensor(pa.float32(), [4]), _vectors(vectors, pa.float32()))
    pylance.write_dataset(pa.table({"id": np.arange(200), "t": tensor}), uri)
    query = pa.ExtensionArray.from_storage(pa.fixed_shape_tensor(pa.float32(), [4]),
                                           _vectors(vectors[:1] + 0.2, pa.float32()))[0]
    ours, theirs = _both(uri, nearest={"column": "t", "q": query, "k": 6})
    _assert_same(ours, theirs)
    from lance_format.dataset import ScannerBuilder

    built = ScannerBuilder(lance.dataset(uri)).nearest("t", vectors[9], k=4, metric="cosine").to_scanner().to_table()
    _assert_same(built, pylance.dataset(uri).to_table(nearest={"column": "t", "q": vectors[9], "k": 4,
                                                               "metric": "cosine"}))
    defaults = {"nearest": {"column": "t", "q": vectors[3], "k": 5}}
    ours = lance.dataset(uri, default_scan_options=defaults).to_table()
    _assert_same(ours, pylance.dataset(uri, default_scan_options=defaults).to_table())


def test_order_by_and_batches_after_the_search(embeddings) -> None:
    uri, vectors = embeddings
    nearest = {"column": "vec", "q": vectors[99], "k": 40}
    ours, theirs = _both(uri, nearest=nearest, order_by=["url"], limit=12, offset=3)
    assert ours.column("url").to_pylist() == theirs.column("url").to_pylist()
    ours_batches = [b.num_rows for b in lance.dataset(uri).to_batches(nearest=nearest, batch_size=16)]
    assert ours_batches == [b.num_rows for b in pylance.dataset(uri).to_batches(nearest=nearest, batch_size=16)]
    batch = {"column": "vec", "q": vectors[[1, 2]], "k": 3}
    ours, theirs = _both(uri, nearest=batch, offset=2, limit=3, with_row_address=True)
    assert ours.column("_rowaddr").to_pylist() == theirs.column("_rowaddr").to_pylist()


def test_pylance_ivf_flat_index_probed_as_pylance(tmp_path) -> None:
    vectors = _clustered(6_000, 32, 21)
    uri = str(tmp_path / "ivf.lance")
    table = pa.table({"id": np.arange(6_000), "tag": np.where(np.arange(6_000) % 3 == 0, "a", "b"),
                      "vec": _vectors(vectors, pa.float32())})
    ds = pylance.write_dataset(table.slice(0, 5_000), uri, max_rows_per_file=2_500)
    ds.create_index("vec", "IVF_FLAT", num_partitions=16)
    pylance.write_dataset(table.slice(5_000), uri, mode="append")  # not indexed: searched flat
    pylance.dataset(uri).delete("id % 50 = 7")
    rng = np.random.default_rng(2)
    differs_from_exact = 0
    for row in rng.integers(0, 6_000, 8):
        # between clusters: the nearest rows spread over several partitions
        query = (vectors[row] + vectors[(row * 7 + 1) % 6_000]) / 2
        for nprobes in (1, 3):
            nearest = {"column": "vec", "q": query, "k": 50, "nprobes": nprobes}
            ours, theirs = _both(uri, nearest=nearest)
            _assert_same(ours, theirs)
            exact = pylance.dataset(uri).to_table(nearest=nearest | {"use_index": False})
            differs_from_exact += ours.column("id").to_pylist() != exact.column("id").to_pylist()
            ours, theirs = _both(uri, nearest=nearest, filter="tag = 'a'")  # postfilter
            _assert_same(ours, theirs)
    assert differs_from_exact  # the index was probed (an exact search would match flat)
    batch = {"column": "vec", "q": (vectors[[5, 900, 4_200]] + vectors[[77, 3_001, 5_500]]) / 2, "k": 30, "nprobes": 2}
    ours, theirs = _both(uri, nearest=batch)  # a batch of queries: each probes its own partitions
    assert ours.column("query_index").to_pylist() == theirs.column("query_index").to_pylist()
    _assert_same(ours, theirs)
    text = lance.dataset(uri).scanner(nearest={"column": "vec", "q": vectors[0], "k": 5, "nprobes": 2}).explain_plan()
    assert "ANNIvfPartition: name=vec_idx, nprobes=2" in text


def test_many_queries_are_measured_a_chunk_at_a_time(embeddings, monkeypatch) -> None:
    from lance_format.dataset.scan import knn

    uri, vectors = embeddings
    monkeypatch.setattr(knn, "DISTANCE_CELLS", 5_000)  # below one batch: one query per product
    queries = vectors[[10, 20, 30, 40, 50]] * 0.9
    ours, theirs = _both(uri, nearest={"column": "vec", "q": queries, "k": 7}, batch_size=3_000)
    assert ours.column("query_index").to_pylist() == theirs.column("query_index").to_pylist()
    _assert_same(ours, theirs)
