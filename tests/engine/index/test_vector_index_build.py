"""Vector indices built by this engine (IVF_FLAT, IVF_PQ, IVF_SQ) in pylance 14.0.2's format.

Real pylance is the oracle: it opens and searches our indices, describes them as it describes its
own, and its own builds at equal parameters give the recall ours must reach.
"""

from __future__ import annotations

import warnings

import lance as pylance
import numpy as np
import pyarrow as pa
import pytest

import lance_format as lance
from lance_format.errors import (
    ArgumentTypeError,
    IndexColumnNotFoundError,
    IndexExistsError,
    InvalidInputError,
    LanceError,
    UnsupportedFeatureError,
)
from lance_format.index.vector import kmeans, pq, sq

ROWS, DIM, PARTS = 2_000, 16, 4
METRICS = ("l2", "cosine", "dot")


def _clustered(rows: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=4.0, size=(12, dim))
    return (centers[rng.integers(0, 12, rows)] + rng.normal(size=(rows, dim))).astype(np.float32)


def _table(vectors: np.ndarray) -> pa.Table:
    n = len(vectors)
    column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), vectors.shape[1])
    urls = [f"https://example.com/item/{i}?ref=mail{i % 7}@example.org" for i in range(n)]
    return pa.table({"id": np.arange(n), "url": urls, "vec": column})


@pytest.fixture(scope="module")
def vectors() -> np.ndarray:
    return _clustered(ROWS, DIM, 3)


@pytest.fixture(scope="module")
def queries(vectors) -> np.ndarray:
    rng = np.random.default_rng(11)
    return vectors[rng.choice(ROWS, 40, replace=False)] + rng.normal(scale=0.3, size=(40, DIM)).astype(np.float32)


def _params(index_type: str, metric: str) -> dict:
    params = {"num_partitions": PARTS, "metric": metric}
    if "PQ" in index_type:
        params["num_sub_vectors"] = 4
    return params


def _build(tmp_path, vectors, who: str, index_type: str, metric: str) -> str:
    uri = str(tmp_path / f"{who}_{index_type}_{metric}.lance")
    pylance.write_dataset(_table(vectors), uri)
    module = lance if who == "ours" else pylance
    module.dataset(uri).create_index("vec", index_type, **_params(index_type, metric))
    return uri


def _ids(ds, q, metric: str, **options) -> list[int]:
    query = {"column": "vec", "q": q, "k": 10, "metric": metric, **options}
    return ds.to_table(columns=["id"], nearest=query).column("id").to_pylist()


def _recall(uri: str, queries: np.ndarray, metric: str) -> float:
    ds = pylance.dataset(uri)
    hits = [len(set(_ids(ds, q, metric, use_index=False)) & set(_ids(ds, q, metric, nprobes=2))) for q in queries]
    return float(np.mean(hits)) / 10


def _stats_without_centroids(stats: dict) -> dict:
    out = {k: v for k, v in stats.items() if k not in ("updated_at_timestamp_ms", "indices", "segments")}
    out["segments"] = [{k: v for k, v in s.items() if k not in ("centroids", "loss", "sub_index")}
                       for s in stats["segments"]]
    return out


# -- pylance opens and describes our indices ------------------------------------------------------

@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("index_type", ["IVF_FLAT", "IVF_PQ", "IVF_SQ"])
def test_pylance_opens_describes_and_searches_ours(tmp_path, vectors, queries, index_type, metric) -> None:
    ours = _build(tmp_path, vectors, "ours", index_type, metric)
    theirs = _build(tmp_path, vectors, "pylance", index_type, metric)
    ours_in_pylance = pylance.dataset(ours).describe_indices()[0]
    their_desc = pylance.dataset(theirs).describe_indices()[0]
    assert ours_in_pylance.index_type == their_desc.index_type == index_type
    assert ours_in_pylance.details == their_desc.details
    assert ours_in_pylance.num_rows_indexed == ROWS
    assert ours_in_pylance.segments[0].index_version == their_desc.segments[0].index_version == 1
    # this engine describes our index and pylance's alike, as pylance does
    for uri in (ours, theirs):
        ours_desc = lance.dataset(uri).describe_indices()[0]
        pylance_desc = pylance.dataset(uri).describe_indices()[0]
        assert (ours_desc.index_type, ours_desc.details, ours_desc.type_url) == (
            pylance_desc.index_type, pylance_desc.details, pylance_desc.type_url)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            listed = lance.dataset(uri).list_indices()
            assert [(i["name"], i["type"], i["fields"]) for i in listed] == [
                (i["name"], i["type"], i["fields"]) for i in pylance.dataset(uri).list_indices()]
        mine, oracle = lance.dataset(uri).stats.index_stats("vec_idx"), pylance.dataset(uri).stats.index_stats("vec_idx")
        assert _stats_without_centroids(mine) == _stats_without_centroids(oracle)
        segment, expected = mine["segments"][0], oracle["segments"][0]
        np.testing.assert_allclose(segment["centroids"], expected["centroids"], rtol=1e-6)
        bounds = segment["sub_index"].pop("bounds", None)
        expected_bounds = expected["sub_index"].pop("bounds", None)
        assert segment["sub_index"] == expected["sub_index"]
        if bounds is not None:
            assert bounds == pytest.approx(expected_bounds, rel=1e-12)
    if index_type == "IVF_FLAT":  # every partition probed: exactly pylance's flat search
        ds = pylance.dataset(ours)
        for q in queries[:15]:
            assert _ids(ds, q, metric, nprobes=PARTS) == _ids(ds, q, metric, use_index=False)
    else:  # recall@10 of ours in pylance at least that of pylance's own index at equal parameters
        ours_recall, their_recall = _recall(ours, queries, metric), _recall(theirs, queries, metric)
        assert ours_recall >= their_recall - 0.08, (ours_recall, their_recall)
        assert ours_recall >= (0.8 if index_type == "IVF_SQ" else 0.3)


def test_this_engine_searches_our_ivf_flat_exactly(tmp_path, vectors, queries) -> None:
    ds = lance.dataset(_build(tmp_path, vectors, "ours", "IVF_FLAT", "l2"))
    for q in queries[:10]:
        for nprobes in (1, PARTS):
            probed = _ids(ds, q, "l2", nprobes=nprobes)
            assert set(probed) <= set(range(ROWS))
        assert _ids(ds, q, "l2", nprobes=PARTS) == _ids(ds, q, "l2", use_index=False)


# -- what the files hold --------------------------------------------------------------------------

def test_partitions_hold_every_non_null_row_once(tmp_path) -> None:
    base = _clustered(600, 8, 5)
    values = pa.FixedSizeListArray.from_arrays(pa.array(base.ravel()), 8)
    mask = np.zeros(600, bool)
    mask[::50] = True  # 12 null vectors
    base_nan = base.copy()
    base_nan[7, 3] = np.nan  # a NaN vector: left out too, as pylance's filter_nan does
    values = pa.FixedSizeListArray.from_arrays(pa.array(base_nan.ravel()), 8, mask=pa.array(mask))
    uri = str(tmp_path / "nulls.lance")
    pylance.write_dataset(pa.table({"id": np.arange(600), "vec": values}), uri)
    lance.dataset(uri).create_index("vec", "IVF_SQ", num_partitions=3)
    stats = pylance.dataset(uri).stats.index_stats("vec_idx")
    assert sum(p["size"] for p in stats["indices"][0]["partitions"]) == 600 - 12 - 1
    # the nearest rows pylance finds through our index are real rows, never the null ones
    found = _ids(pylance.dataset(uri), base[101], "l2", nprobes=3)
    assert 101 in found and not set(found) & set(np.flatnonzero(mask))


def test_appended_fragments_stay_unindexed_and_are_found(tmp_path, vectors) -> None:
    uri = str(tmp_path / "append.lance")
    pylance.write_dataset(_table(vectors[:1500]), uri)
    lance.dataset(uri).create_index("vec", "IVF_FLAT", num_partitions=PARTS)
    tail = _table(vectors[1500:])
    tail = tail.set_column(0, "id", pa.array(np.arange(1500, ROWS)))
    pylance.write_dataset(tail, uri, mode="append")
    for module in (lance, pylance):
        stats = module.dataset(uri).stats.index_stats("vec_idx")
        assert (stats["num_indexed_rows"], stats["num_unindexed_rows"]) == (1500, 500)
    ds = pylance.dataset(uri)
    assert _ids(ds, vectors[1800], "l2", nprobes=1)[0] == 1800  # unindexed rows are searched flat


def test_replace_and_name_and_defaults(tmp_path, vectors) -> None:
    uri = str(tmp_path / "replace.lance")
    pylance.write_dataset(_table(vectors), uri)
    ds = lance.dataset(uri)
    ds.create_index("vec", "ivf_flat")  # default partitions: rows // 4096, at least 1
    with pytest.raises(IndexExistsError, match="vec_idx"):
        ds.create_index("vec", "IVF_PQ", num_partitions=2, num_sub_vectors=4)
    ds.create_index("vec", "IVF_PQ", num_partitions=2, num_sub_vectors=4, replace=True)
    ds.create_index("vec", "IVF_SQ", name="sq_idx", num_partitions=3, distance_type="cosine")
    described = {d.name: d for d in pylance.dataset(uri).describe_indices()}
    assert described["vec_idx"].index_type == "IVF_PQ" and described["sq_idx"].details["metric_type"] == "COSINE"
    assert pylance.dataset(uri).stats.index_stats("sq_idx")["indices"][0]["num_partitions"] == 3


def test_user_centroids_and_codebook(tmp_path, vectors) -> None:
    uri = str(tmp_path / "given.lance")
    pylance.write_dataset(_table(vectors), uri)
    centroids = kmeans.train(vectors, PARTS, max_iters=10, seed=1).centroids
    residuals = vectors - centroids[kmeans.assign(vectors, centroids, "l2")[0]]
    codebook = pq.train(residuals, 4, max_iters=5, seed=1).codebook
    lance.dataset(uri).create_index("vec", "IVF_PQ", ivf_centroids=centroids, pq_codebook=codebook,
                                    num_sub_vectors=4)
    stats = pylance.dataset(uri).stats.index_stats("vec_idx")["indices"][0]
    np.testing.assert_allclose(stats["centroids"], centroids, rtol=1e-6)
    assert _ids(pylance.dataset(uri), vectors[5], "l2", nprobes=PARTS)[0] == 5


def test_num_partitions_above_row_count_is_clamped_as_in_pylance(tmp_path, vectors) -> None:
    uri = str(tmp_path / "small.lance")
    pylance.write_dataset(_table(vectors[:50]), uri)
    lance.dataset(uri).create_index("vec", "IVF_FLAT", num_partitions=80)
    pylance.dataset(uri).create_index("vec", "IVF_FLAT", num_partitions=80, name="theirs")
    stats = {n: pylance.dataset(uri).stats.index_stats(n)["indices"][0]["num_partitions"] for n in ("vec_idx", "theirs")}
    assert stats == {"vec_idx": 50, "theirs": 50}


# -- bad requests ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("column", "index_type", "params", "error", "message"), [
    ("vec", "IVF_PQ", {"num_partitions": 2, "num_sub_vectors": 5}, InvalidInputError,
     "dimension (16) must be divisible by num_sub_vectors (5)"),
    ("url", "IVF_FLAT", {"num_partitions": 2}, ArgumentTypeError, "Vector column url must be FixedSizeListArray"),
    ("id", "IVF_PQ", {"num_partitions": 2}, ArgumentTypeError, "Vector column id must be FixedSizeListArray"),
    ("nope", "IVF_FLAT", {}, IndexColumnNotFoundError, "nope not found in schema"),
    ("vec", "IVF_FOO", {}, UnsupportedFeatureError, "index types supported. Got IVF_FOO"),
    ("vec", "IVF_FLAT", {"metric": "manhattan"}, InvalidInputError, "Metric manhattan not supported."),
    ("vec", "IVF_PQ", {"num_partitions": 2}, InvalidInputError, "num_sub_vectors are required for IVF_PQ"),
    ("vec", "IVF_PQ", {"num_partitions": 2, "num_sub_vectors": 4, "num_bits": 5}, InvalidInputError,
     "num_bits 5 not supported"),
    ("vec", "IVF_FLAT", {"num_partitions": 0}, InvalidInputError, "num_partitions must be set and positive"),
    ("vec", "IVF_FLAT", {"num_partitions": "4"}, ArgumentTypeError, "num_partitions must be int"),
    ("vec", "IVF_PQ", {"num_partitions": 2, "num_sub_vectors": 4, "accelerator": "cuda"}, UnsupportedFeatureError,
     "accelerator='cuda'"),
    ("vec", "IVF_HNSW_FLAT", {"num_partitions": 2}, UnsupportedFeatureError, "building IVF_HNSW_FLAT indices"),
    ("vec", "IVF_FLAT", {"pq_codebook": np.zeros((4, 256, 4), np.float32)}, InvalidInputError,
     "ivf_centroids must be specified when pq_codebook is provided"),
    ("vec", "IVF_FLAT", {"ivf_centroids": np.zeros((3, 16), np.float32), "num_partitions": 4}, InvalidInputError,
     "Ivf centroids has 3 clusters, but num_partitions=4"),
])
def test_bad_requests_are_typed_and_named(tmp_path, vectors, column, index_type, params, error, message) -> None:
    uri = str(tmp_path / "bad.lance")
    pylance.write_dataset(_table(vectors[:300]), uri)
    ds = lance.dataset(uri)
    with pytest.raises(error) as raised:
        ds.create_index(column, index_type, **params)
    assert message in str(raised.value) and isinstance(raised.value, LanceError)
    assert uri in str(raised.value)  # the table is named
    assert not ds.describe_indices() and ds.version == 1


def test_pylance_raises_the_same_kind_of_error(tmp_path, vectors) -> None:
    uri = str(tmp_path / "same.lance")
    pylance.write_dataset(_table(vectors[:300]), uri)
    for column, index_type, params in [("vec", "IVF_PQ", {"num_partitions": 2, "num_sub_vectors": 5}),
                                       ("url", "IVF_FLAT", {}), ("vec", "IVF_FOO", {}), ("nope", "IVF_FLAT", {})]:
        with pytest.raises(Exception) as theirs:
            pylance.dataset(uri).create_index(column, index_type, **params)
        with pytest.raises(LanceError) as ours:
            lance.dataset(uri).create_index(column, index_type, **params)
        assert isinstance(ours.value, type(theirs.value))


# -- the training pieces ---------------------------------------------------------------------------

def test_kmeans_finds_separated_clusters_and_dot_centroids_are_unit() -> None:
    rng = np.random.default_rng(0)
    centers = np.eye(8, dtype=np.float32) * 20
    labels = rng.integers(0, 8, 4000)
    x = centers[labels] + rng.normal(size=(4000, 8)).astype(np.float32)
    fitted = kmeans.train(x, 8, seed=2)
    ids, _ = kmeans.assign(x, fitted.centroids, "l2")
    # every true cluster maps to one trained centroid
    assert all(len(np.unique(ids[labels == c])) == 1 for c in range(8))
    assert len(np.unique(ids)) == 8
    spherical = kmeans.train(x, 8, "dot", seed=2).centroids
    np.testing.assert_allclose(np.linalg.norm(spherical, axis=1), 1.0, rtol=1e-5)


def test_pq_and_sq_round_trip_closely() -> None:
    x = _clustered(1200, 16, 8)
    quantizer = pq.train(x, 4, max_iters=8, seed=0)
    codes = quantizer.encode(x)
    decoded = np.concatenate([quantizer.codebook[j][codes[:, j]] for j in range(4)], axis=1)
    assert ((decoded - x) ** 2).sum(1).mean() < 0.2 * ((x - x.mean(0)) ** 2).sum(1).mean()
    transposed = pq.transpose_partition(codes[:5])
    assert transposed.shape == (5, 4) and list(transposed.ravel()[:5]) == list(codes[:5, 0])
    scalar = sq.train(x)
    step = (scalar.end - scalar.start) / 255
    decoded = scalar.start + scalar.encode(x).astype(np.float64) * step
    assert np.abs(decoded - x).max() <= step * 1.0001


# -- optimize_indices ------------------------------------------------------------------------------

@pytest.mark.parametrize(("index_type", "metric"), [("IVF_FLAT", "cosine"), ("IVF_PQ", "l2"), ("IVF_SQ", "dot")])
def test_optimize_adds_appended_fragments_as_pylance_does(tmp_path, vectors, index_type, metric) -> None:
    tail = _table(vectors[1500:]).set_column(0, "id", pa.array(np.arange(1500, ROWS)))
    uris = {}
    for who, module in (("ours", lance), ("pylance", pylance)):
        uri = uris[who] = str(tmp_path / f"opt_{who}.lance")
        pylance.write_dataset(_table(vectors[:1500]), uri)
        module.dataset(uri).create_index("vec", index_type, **_params(index_type, metric))
        pylance.write_dataset(tail, uri, mode="append")
        # pylance 14.0.2 appends a delta segment on the index's centroids (its default rebalances
        # small indices instead; this engine always appends)
        module.dataset(uri).optimize.optimize_indices(num_indices_to_merge=0)
    shapes = {}
    for who, uri in uris.items():
        described = pylance.dataset(uri).describe_indices()[0]
        shapes[who] = [(list(s.fragment_ids), s.dataset_version_at_last_update) for s in described.segments]
        stats = pylance.dataset(uri).stats.index_stats("vec_idx")
        assert stats["num_unindexed_rows"] == 0 and stats["num_indexed_rows"] == ROWS
        centroids = [s["centroids"] for s in stats["indices"]]
        np.testing.assert_allclose(centroids[0], centroids[1])  # the delta reuses the centroids
    assert shapes["ours"] == shapes["pylance"] == [([0], 1), ([1], 3)]
    ds = pylance.dataset(uris["ours"])
    for q in vectors[1800:1805]:  # the appended rows are found through the delta segment
        found, exact = _ids(ds, q, metric, nprobes=PARTS), _ids(ds, q, metric, use_index=False)
        assert len(set(found) & set(exact)) >= 4 and max(found) >= 1500


def test_optimize_retrain_rebuilds_one_segment(tmp_path, vectors, queries) -> None:
    uri = str(tmp_path / "retrain.lance")
    pylance.write_dataset(_table(vectors[:1000]), uri)
    lance.dataset(uri).create_index("vec", "IVF_FLAT", num_partitions=PARTS)
    tail = _table(vectors[1000:]).set_column(0, "id", pa.array(np.arange(1000, ROWS)))
    pylance.write_dataset(tail, uri, mode="append")
    lance.dataset(uri).optimize.optimize_indices(retrain=True)
    described = pylance.dataset(uri).describe_indices()[0]
    assert [list(s.fragment_ids) for s in described.segments] == [[0, 1]]
    assert pylance.dataset(uri).stats.index_stats("vec_idx")["indices"][0]["num_partitions"] == PARTS
    ds = pylance.dataset(uri)
    for q in queries[:5]:
        assert _ids(ds, q, "l2", nprobes=PARTS) == _ids(ds, q, "l2", use_index=False)


# -- other vector types and partial builds ---------------------------------------------------------

@pytest.mark.parametrize("value_type", [pa.float16(), pa.float64()])
def test_half_and_double_vectors_keep_their_type(tmp_path, vectors, value_type) -> None:
    uri = str(tmp_path / "typed.lance")
    column = pa.FixedSizeListArray.from_arrays(pa.array(vectors[:800].ravel()).cast(value_type), DIM)
    pylance.write_dataset(pa.table({"id": np.arange(800), "vec": column}), uri)
    lance.dataset(uri).create_index("vec", "IVF_FLAT", num_partitions=3)
    ds = pylance.dataset(uri)
    q = vectors[10].astype(value_type.to_pandas_dtype())
    assert _ids(ds, q, "l2", nprobes=3) == _ids(ds, q, "l2", use_index=False)
    stats = ds.stats.index_stats("vec_idx")["indices"][0]
    assert stats["num_partitions"] == 3 and sum(p["size"] for p in stats["partitions"]) == 800


def test_tensor_column_and_fragment_subset(tmp_path, vectors) -> None:
    uri = str(tmp_path / "tensor.lance")
    storage = pa.FixedSizeListArray.from_arrays(pa.array(vectors[:1000].ravel()), DIM)
    tensor = pa.ExtensionArray.from_storage(pa.fixed_shape_tensor(pa.float32(), [DIM]), storage)
    table = pa.table({"id": np.arange(1000), "emb": tensor})
    pylance.write_dataset(table.slice(0, 600), uri)
    pylance.write_dataset(table.slice(600), uri, mode="append")
    lance.dataset(uri).create_index("emb", "IVF_SQ", num_partitions=2, fragment_ids=[0])
    described = pylance.dataset(uri).describe_indices()[0]
    assert [list(s.fragment_ids) for s in described.segments] == [[0]] and described.num_rows_indexed == 600
    found = pylance.dataset(uri).to_table(columns=["id"], nearest={"column": "emb", "q": vectors[700], "k": 3,
                                                                   "nprobes": 2})
    assert found.column("id")[0].as_py() == 700  # the uncovered fragment is searched flat


def test_distributed_build_with_shared_centroids(tmp_path, vectors) -> None:
    uri = str(tmp_path / "distributed.lance")
    pylance.write_dataset(_table(vectors[:1000]), uri)
    tail = _table(vectors[1000:]).set_column(0, "id", pa.array(np.arange(1000, ROWS)))
    pylance.write_dataset(tail, uri, mode="append")
    centroids = kmeans.train(vectors, PARTS, max_iters=10, seed=4).centroids
    ds = lance.dataset(uri)
    segments = [ds.create_index_uncommitted("vec", "IVF_FLAT", fragment_ids=[f], ivf_centroids=centroids)
                for f in (0, 1)]
    ds.commit_existing_index_segments("vec_idx", "vec", segments)
    described = pylance.dataset(uri).describe_indices()[0]
    assert [list(s.fragment_ids) for s in described.segments] == [[0], [1]]
    assert described.index_type == "IVF_FLAT" and described.num_rows_indexed == ROWS
    theirs = pylance.dataset(uri)
    q = vectors[1500]
    assert _ids(theirs, q, "l2", nprobes=PARTS) == _ids(theirs, q, "l2", use_index=False)


def test_distributed_sq_with_shared_bounds_needs_no_sample(tmp_path, vectors, monkeypatch) -> None:
    """``sq_bounds=`` (a distributed build's driver trained them): every segment stores the same
    bounds, and with centroids given too no task draws a training sample."""
    import json

    from lance.file import LanceFileReader

    from lance_format.dataset import index_vector

    uri = str(tmp_path / "sq.lance")
    pylance.write_dataset(_table(vectors), uri, max_rows_per_file=ROWS // 2)
    centroids = kmeans.train(vectors, PARTS, max_iters=10, seed=4).centroids
    monkeypatch.setattr(index_vector, "_sample", lambda *a, **k: pytest.fail("sampled with every artifact given"))
    ds = lance.dataset(uri)
    segments = [ds.create_index_uncommitted("vec", "IVF_SQ", fragment_ids=[f], ivf_centroids=centroids,
                                            sq_bounds=(-30.0, 30.0)) for f in (0, 1)]
    ds.commit_existing_index_segments("vec_idx", "vec", segments)
    for segment in segments:
        meta = LanceFileReader(f"{uri}/_indices/{segment.uuid}/auxiliary.idx").metadata().schema.metadata
        storage = json.loads(json.loads(meta[b"storage_metadata"])[0])
        assert storage["bounds"] == {"start": -30.0, "end": 30.0}
    theirs = pylance.dataset(uri)
    q = vectors[1500]
    assert _ids(theirs, q, "l2", nprobes=PARTS, refine_factor=50) == _ids(theirs, q, "l2", use_index=False)
    with pytest.raises(InvalidInputError, match="sq_bounds"):
        ds.create_index_uncommitted("vec", "IVF_FLAT", fragment_ids=[0], sq_bounds=(0.0, 1.0))
    with pytest.raises(InvalidInputError, match="sq_bounds"):
        ds.create_index_uncommitted("vec", "IVF_SQ", fragment_ids=[0], sq_bounds=(1.0, -1.0))


@pytest.mark.parametrize("stable_row_ids", [False, True])
def test_deleted_rows_and_stable_row_ids(tmp_path, vectors, queries, stable_row_ids) -> None:
    uri = str(tmp_path / "deleted.lance")
    pylance.write_dataset(_table(vectors[:1200]), uri, max_rows_per_file=500, enable_stable_row_ids=stable_row_ids)
    pylance.dataset(uri).delete("id % 3 = 0 OR url LIKE '%mail6@%'")
    lance.dataset(uri).create_index("vec", "IVF_FLAT", num_partitions=3)
    ds = pylance.dataset(uri)
    stats = ds.stats.index_stats("vec_idx")
    assert sum(p["size"] for p in stats["indices"][0]["partitions"]) == ds.count_rows() == stats["num_indexed_rows"]
    for q in queries[:8]:
        found = _ids(ds, q, "l2", nprobes=3)
        assert found == _ids(ds, q, "l2", use_index=False) and all(i % 3 for i in found)


# -- IVF_HNSW_SQ / IVF_HNSW_PQ ----------------------------------------------------------------------

@pytest.mark.parametrize(("index_type", "metric"), [("IVF_HNSW_SQ", "l2"), ("IVF_HNSW_SQ", "dot"),
                                                    ("IVF_HNSW_PQ", "cosine")])
def test_hnsw_indices_open_and_search_in_pylance(tmp_path, vectors, queries, index_type, metric) -> None:
    ours = _build(tmp_path, vectors, "ours", index_type, metric)
    theirs = _build(tmp_path, vectors, "pylance", index_type, metric)
    mine, oracle = pylance.dataset(ours).describe_indices()[0], pylance.dataset(theirs).describe_indices()[0]
    assert mine.index_type == oracle.index_type == index_type and mine.details == oracle.details
    ours_stats = lance.dataset(ours).stats.index_stats("vec_idx")["indices"][0]
    pylance_stats = pylance.dataset(ours).stats.index_stats("vec_idx")["indices"][0]
    assert ours_stats["sub_index"].keys() == pylance_stats["sub_index"].keys()
    assert ours_stats["partitions"] == pylance_stats["partitions"]
    ours_recall, their_recall = (np.mean([
        len(set(_ids(pylance.dataset(uri), q, metric, nprobes=2, ef=64))
            & set(_ids(pylance.dataset(uri), q, metric, use_index=False))) / 10 for q in queries[:25]])
        for uri in (ours, theirs))
    assert ours_recall >= their_recall - 0.1, (ours_recall, their_recall)
