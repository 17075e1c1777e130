"""``lance_format.spark.create_index``: vector indices trained on a Spark-drawn sample, built by
the tasks (one segment per fragment group), committed once, read by pylance 14."""

from __future__ import annotations

import warnings

import lance as pylance
import numpy as np
import pyarrow as pa
import pytest

import lance_format as lance
from lance_format.errors import (
    ArgumentTypeError,
    CorruptFileError,
    IndexColumnNotFoundError,
    IndexExistsError,
    InvalidInputError,
    UnsupportedFeatureError,
)
from lance_format.index.vector import kmeans, pq
from lance_format.spark import create_index

N, DIM, PARTS = 5000, 16, 8


def _data(seed: int = 7) -> tuple[pa.Table, np.ndarray]:
    """5k clustered 16-d vectors (a few null, one with a NaN), URLs and skewed categories."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(24, DIM)).astype(np.float32) * 4
    x = (centers[rng.zipf(1.6, N) % 24] + rng.normal(size=(N, DIM))).astype(np.float32)
    x[17, 3] = np.nan
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), DIM)
    nulls = np.zeros(N, bool)
    nulls[rng.choice(N, 40, replace=False)] = True
    nulls[17] = False
    vectors = pa.array([None if m else v for m, v in zip(nulls, vectors.to_pylist())], vectors.type)
    table = pa.table({"id": np.arange(N), "vec": vectors,
                      "url": [f"https://shop{i % 13}.example.com/p/{i}" for i in range(N)],
                      "cat": rng.choice(np.array(["a", "b", "c"], dtype=object), N, p=[.8, .15, .05])})
    return table, x


@pytest.fixture(scope="module")
def data():
    return _data()


def _table(tmp_path, data, name="t.lance", rows=N) -> str:
    uri = str(tmp_path / name)
    lance.write_dataset(data[0].slice(0, rows), uri, max_rows_per_file=rows // 4)  # 4 fragments
    return uri


def _queries(x: np.ndarray) -> np.ndarray:
    return x[np.array([3, 555, 1200, 2500, 4999]) * len(x) // N] + np.float32(0.05)


def _ids(ds, q, **nearest) -> list[int]:
    return ds.to_table(columns=["id"], nearest={"column": "vec", "q": q, "k": 10, **nearest}).column("id").to_pylist()


@pytest.mark.parametrize("index_type,metric,extra", [
    ("IVF_FLAT", "l2", {}),
    ("IVF_FLAT", "cosine", {}),
    ("IVF_PQ", "dot", {"num_sub_vectors": 4}),
    ("IVF_SQ", "l2", {}),
    ("IVF_HNSW_PQ", "cosine", {"num_sub_vectors": 4}),
])
def test_built_by_tasks_committed_once_and_exact_with_every_partition(spark, tmp_path, data, index_type, metric,
                                                                       extra):
    rows = N if "HNSW" not in index_type else 1600  # HNSW graphs are slow to build: a smaller table
    uri = _table(tmp_path, data, rows=rows)
    before = lance.dataset(uri).version
    ds = create_index(spark, uri, "vec", index_type, metric=metric, num_partitions=PARTS, **extra)
    assert ds.version == before + 1 == lance.dataset(uri).version
    p = pylance.dataset(uri)
    (desc,) = p.describe_indices()
    assert (desc.name, desc.index_type, desc.field_names) == ("vec_idx", index_type, ["vec"])
    assert len(desc.segments) == 4 and desc.num_rows_indexed == rows  # one segment per fragment, all covered
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        stats = p.stats.index_stats("vec_idx")
        ours = lance.dataset(uri).index_statistics("vec_idx")
    assert stats["index_type"] == ours["index_type"] and stats["num_indexed_fragments"] == 4
    assert stats["num_unindexed_rows"] == 0 and stats["num_indices"] == 4
    exact = {"nprobes": PARTS, "refine_factor": 50, "ef": 1000} if index_type != "IVF_FLAT" else {"nprobes": PARTS}
    for q in _queries(data[1][:rows]):
        want = p.to_table(columns=["id"], nearest={"column": "vec", "q": q, "k": 10, "metric": metric,
                                                   "use_index": False})
        for engine in (p, lance.dataset(uri)):
            got = engine.to_table(columns=["id"], nearest={"column": "vec", "q": q, "k": 10, **exact})
            assert got.column("id").to_pylist() == want.column("id").to_pylist()
            np.testing.assert_allclose(got.column("_distance").to_numpy(), want.column("_distance").to_numpy(),
                                       rtol=1e-4, atol=1e-4)


def test_same_centroids_same_results_as_one_process_and_pylance(spark, tmp_path, data):
    """Given the same centroids and codebook, the Spark build (4 segments) answers exactly as
    ``LanceDataset.create_index`` (one segment) and as pylance's own build, with 2 probes."""
    x = data[1]
    finite = x[~np.isnan(x).any(axis=1)]
    centroids = kmeans.train(finite[::3], PARTS, max_iters=20, seed=1).centroids
    residuals = finite[::2] - centroids[kmeans.assign(finite[::2], centroids, "l2")[0]]
    codebook = pq.train(residuals, 4, max_iters=10, seed=1).codebook
    params = {"num_partitions": PARTS, "num_sub_vectors": 4, "ivf_centroids": centroids, "pq_codebook": codebook}
    spark_uri, local_uri, py_uri = (_table(tmp_path, data, n) for n in ("s.lance", "l.lance", "p.lance"))
    create_index(spark, spark_uri, "vec", "IVF_PQ", **params)
    lance.dataset(local_uri).create_index("vec", "IVF_PQ", **params)
    pylance.dataset(py_uri).create_index("vec", "IVF_PQ", **params)
    recall = {}
    for name, uri in (("spark", spark_uri), ("local", local_uri), ("pylance", py_uri)):
        p = pylance.dataset(uri)
        hits = 0
        for q in _queries(x):
            truth = set(_ids(p, q, use_index=False))
            got = _ids(p, q, nprobes=2)
            hits += len(truth & set(got))
            if name == "spark":  # the same partitions probed, the same codes: the same answer
                assert got == _ids(pylance.dataset(local_uri), q, nprobes=2)
                assert _ids(lance.dataset(uri), q, nprobes=2) == got
        recall[name] = hits / 50
    assert recall["spark"] == recall["local"] >= recall["pylance"] - 0.1, recall
    assert recall["spark"] >= 0.5, recall


def test_trained_on_spark_recall_close_to_one_process(spark, tmp_path, data):
    """Centroids and codebook trained from the Spark-drawn sample do as well as the engine's own."""
    x = data[1]
    spark_uri, local_uri = _table(tmp_path, data, "s.lance"), _table(tmp_path, data, "l.lance")
    for uri in (spark_uri, local_uri):  # deleted rows are neither sampled nor indexed
        lance.dataset(uri).delete("id % 10 = 3")
    ds = create_index(spark, spark_uri, "vec", "IVF_PQ", num_partitions=PARTS, num_sub_vectors=4,
                      max_iters=10, fragments_per_task=2, name="emb")
    (desc,) = ds.describe_indices()
    assert len(desc.segments) == 2 and desc.num_rows_indexed == N - N // 10
    lance.dataset(local_uri).create_index("vec", "IVF_PQ", num_partitions=PARTS, num_sub_vectors=4, max_iters=10)
    recall = {}
    for uri in (spark_uri, local_uri):
        p = pylance.dataset(uri)
        qs = x[np.arange(0, N, 97)]
        qs = qs[~np.isnan(qs).any(axis=1)]
        found = [(_ids(p, q, use_index=False), _ids(p, q, nprobes=3), _ids(lance.dataset(uri), q, nprobes=3))
                 for q in qs]
        assert not [i for _, theirs, ours in found for i in theirs + ours if i % 10 == 3]
        recall[uri] = np.mean([len(set(truth) & set(got)) / 10 for truth, got, _ in found])
    assert recall[spark_uri] >= recall[local_uri] - 0.1 and recall[spark_uri] > 0.5, recall


def test_refusals_are_typed_and_commit_nothing(spark, tmp_path, data):
    uri = _table(tmp_path, data)
    version = lance.dataset(uri).version
    with pytest.raises(IndexColumnNotFoundError, match="nope"):
        create_index(spark, uri, "nope", "IVF_FLAT")
    with pytest.raises(ArgumentTypeError, match="url"):
        create_index(spark, uri, "url", "IVF_FLAT")
    with pytest.raises(UnsupportedFeatureError, match="IVF_FOO"):
        create_index(spark, uri, "vec", "IVF_FOO")
    with pytest.raises(InvalidInputError, match="num_sub_vectors"):
        create_index(spark, uri, "vec", "IVF_PQ", num_partitions=4)
    with pytest.raises(InvalidInputError, match="fragments_per_task"):
        create_index(spark, uri, "vec", "IVF_FLAT", fragments_per_task=0)
    assert lance.dataset(uri).version == version
    empty = str(tmp_path / "empty.lance")
    lance.write_dataset(data[0].slice(0, 0), empty)
    with pytest.raises(InvalidInputError, match="no rows"):
        create_index(spark, empty, "vec", "IVF_FLAT")
    nulls = str(tmp_path / "nulls.lance")
    t = data[0].slice(0, 300)
    lance.write_dataset(t.set_column(1, "vec", pa.nulls(300, t.schema.field("vec").type)), nulls)
    with pytest.raises(InvalidInputError, match="null or NaN"):
        create_index(spark, nulls, "vec", "IVF_FLAT", num_partitions=2)
    assert lance.dataset(nulls).describe_indices() == []


def test_replace_name_clash_and_namespace(spark, tmp_path, data):
    pytest.importorskip("lance_namespace")
    from lance_format.namespace.tables import locate_table

    config = {"impl": "dir", "root": str(tmp_path / "ns")}
    uri = locate_table(config, "emb", create=True).uri
    lance.write_dataset(data[0], uri, max_rows_per_file=N // 2)
    ds = create_index(spark, None, "vec", "IVF_SQ", num_partitions=4, namespace=config, table_id="emb")
    first = ds.version
    with pytest.raises(IndexExistsError, match="vec_idx"):
        create_index(spark, uri, "vec", "IVF_FLAT", num_partitions=4)
    ds = create_index(spark, uri, "vec", "IVF_FLAT", num_partitions=4, replace=True)
    assert ds.version == first + 1
    (desc,) = pylance.dataset(uri).describe_indices()
    assert desc.index_type == "IVF_FLAT" and len(desc.segments) == 2


def test_failed_task_commits_nothing_and_removes_its_segments(spark, tmp_path, data, monkeypatch):
    from lance_format.spark import vector_index

    removed: list[list[str]] = []
    remove = vector_index._remove_segments

    def spy(ds, segments):
        removed.append(list(segments))
        remove(ds, segments)

    monkeypatch.setattr(vector_index, "_remove_segments", spy)
    uri = _table(tmp_path, data)
    ds = lance.dataset(uri)
    version = ds.version
    # a damaged data file in the third fragment: its build task fails, the other three succeed
    (bad,) = ds.get_fragments()[2].data_files()
    path = tmp_path / "t.lance" / "data" / bad.path
    raw = bytearray(path.read_bytes())
    raw[-40:] = b"\x00" * 40  # the footer
    path.write_bytes(bytes(raw))
    centroids = data[1][:PARTS]  # given centroids: no sample job, straight to the build tasks
    with pytest.raises(CorruptFileError, match=bad.path):
        create_index(spark, uri, "vec", "IVF_FLAT", ivf_centroids=centroids)
    # every task's segment (the ones that finished wrote theirs: how many did is up to Spark) removed
    assert len(removed) == 1 and len(set(removed[0])) == 4
    assert lance.dataset(uri).version == version and pylance.dataset(uri).version == version
    assert pylance.dataset(uri).describe_indices() == []
    indices = tmp_path / "t.lance" / "_indices"
    assert not indices.exists() or not any(indices.rglob("*.idx"))



def test_spark_connect_session(spark_connect, tmp_path, data):
    """The same build from a Spark Connect client (no SparkContext on the client side)."""
    uri = _table(tmp_path, data, rows=2000)
    ds = create_index(spark_connect, uri, "vec", "IVF_SQ", num_partitions=4, fragments_per_task=2)
    (desc,) = pylance.dataset(uri).describe_indices()
    assert ds.version == 2 and len(desc.segments) == 2 and desc.num_rows_indexed == 2000


def test_sample_quotas_and_task_groups():
    from lance_format.spark.vector_index import _groups, _quotas

    quotas = _quotas([1000, 3000, 0, 6000], 2000)
    assert quotas == [200, 600, 0, 1200] and sum(quotas) == 2000
    assert _quotas([10, 20], 2000) == [10, 20]  # a small table: every row
    assert _quotas([7, 7, 7], 10) == [4, 4, 4]  # rounded up, never more than a fragment holds
    # fragments without live rows ride with the first task: covered, no task of their own
    assert _groups([(0, 5), (1, 0), (2, 5), (3, 5)], 2) == [[0, 1, 2], [3]]
    assert _groups([(4, 1), (9, 1), (12, 1)], 1) == [[4], [9], [12]]


def test_refused_commit_removes_the_segments(spark, tmp_path, data, monkeypatch):
    from lance_format.dataset.dataset import LanceDataset

    uri = _table(tmp_path, data, rows=2000)

    def refuse(self, *args, **kwargs):
        raise InvalidInputError("commit refused on purpose", table=self.uri)

    monkeypatch.setattr(LanceDataset, "commit_existing_index_segments", refuse)
    with pytest.raises(InvalidInputError, match="on purpose"):
        create_index(spark, uri, "vec", "IVF_FLAT", num_partitions=4, fragments_per_task=2)
    indices = tmp_path / "t.lance" / "_indices"
    assert indices.is_dir() and len(list(indices.iterdir())) == 2  # both tasks wrote their segment...
    assert not any(indices.rglob("*.idx"))  # ...and its files are gone
    assert pylance.dataset(uri).version == 1 and pylance.dataset(uri).describe_indices() == []
