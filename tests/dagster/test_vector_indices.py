"""Vector (IVF_PQ) and full-text (INVERTED) indices declared on an asset: the IO manager builds
them, keeps them up to date over appends and merges, the maintenance policy compacts and
optimizes them, and after every run pylance answers the same searches exactly as this engine."""

from __future__ import annotations

import dagster as dg
import lance
import numpy as np
import pyarrow as pa

import lance_format
from lance_assets import LanceIOManager, LanceMaintenancePolicy, lance_asset, maintain_table
from lance_assets.indices import INDICES

DIM = 16
SPECS = [{"column": "vec", "type": "IVF_PQ", "params": {"num_partitions": 2, "num_sub_vectors": 4}},
         {"column": "text", "type": "INVERTED"}]
WORDS = ["red", "shoe", "rain", "jacket", "wool", "hat", "https://shop.example.com/p", "ada@example.com"]


def rows(start: int, count: int, *, version: int = 0) -> pa.Table:
    ids = np.arange(start, start + count)
    vectors = np.random.default_rng(start + 1000 * version).standard_normal((count, DIM)).astype(np.float32)
    text = [f"{WORDS[i % 8]} {WORDS[(i * 3 + version) % 8]}" if i % 13 else None for i in ids.tolist()]
    return pa.table({"id": pa.array(ids, pa.int64()), "text": pa.array(text, pa.string()),
                     "vec": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM)})


def assert_searches_agree(uri: str) -> None:
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    assert {d.name: d.index_type for d in ours.describe_indices()} == {
        d.name: d.index_type for d in theirs.describe_indices()} == {"vec_idx": "IVF_PQ", "text_idx": "Inverted"}
    for name in ("vec_idx", "text_idx"):
        mine, official = ours.stats.index_stats(name), theirs.stats.index_stats(name)
        assert (mine["num_indexed_rows"], mine["num_unindexed_rows"]) == (
            official["num_indexed_rows"], official["num_unindexed_rows"]) == (ours.count_rows(), 0)
    queries = ours.to_table(columns=["vec"]).column("vec").to_numpy(zero_copy_only=False)[:3]
    for q in queries:
        nearest = {"column": "vec", "q": np.asarray(q, np.float32), "k": 5, "nprobes": 2}
        a = ours.to_table(nearest=nearest, columns=["id"])
        b = theirs.to_table(nearest=nearest, columns=["id"])
        assert a.column("id").to_pylist() == b.column("id").to_pylist()
        assert np.allclose(a.column("_distance").to_numpy(), b.column("_distance").to_numpy(), rtol=1e-5)
    for query in ("jacket", "wool hat"):  # every match (a top-k cut would split ties of equal scores)
        a = ours.to_table(full_text_query=query, limit=1000, columns=["id"])
        b = theirs.to_table(full_text_query=query, limit=1000, columns=["id"])
        assert sorted(a.column("id").to_pylist()) == sorted(b.column("id").to_pylist()) and a.num_rows > 0, query
        assert np.allclose(np.sort(a.column("_score").to_numpy()), np.sort(b.column("_score").to_numpy()), rtol=1e-4)


def test_vector_and_full_text_indices_answer_as_pylance_over_runs(instance, root):
    state = {"batch": rows(0, 120), "mode": "overwrite"}

    def make(mode: str):
        @lance_asset(name="docs", metadata={INDICES: SPECS, "lance/write_mode": mode, "lance/merge_on": "id"})
        def docs() -> pa.Table:
            return state["batch"]
        return docs

    uri = f"{root}/docs.lance"

    def run(mode: str, **io) -> dict:
        asset = make(mode)
        result = dg.materialize([asset], instance=instance,
                                resources={"io_manager": LanceIOManager(base_uri=root, **io)})
        assert result.success
        return result.asset_materializations_for_node("docs")[-1].metadata

    meta = run("overwrite")
    assert {e["name"]: e["action"] for e in meta[INDICES].value} == {"vec_idx": "created", "text_idx": "created"}
    assert_searches_agree(uri)
    state["batch"] = rows(120, 30, version=1)
    meta = run("append")
    assert all(e["unindexed_rows"] == 0 for e in meta[INDICES].value)
    assert_searches_agree(uri)
    state["batch"] = pa.concat_tables([rows(10, 20, version=2), rows(150, 10, version=2)])  # 20 updated, 10 new
    meta = run("merge", maintenance_min_small_fragments=2, maintenance_target_rows_per_fragment=1000)
    assert all(e["unindexed_rows"] == 0 for e in meta[INDICES].value)
    assert lance_format.dataset(uri).count_rows() == 160
    assert_searches_agree(uri)
    # rows written by someone else: the maintenance policy alone brings both indices up to date
    lance_format.write_dataset(rows(500, 9, version=3), uri, mode="append")
    assert lance.dataset(uri).stats.index_stats("vec_idx")["num_unindexed_rows"] == 9
    out = maintain_table(uri, LanceMaintenancePolicy(min_small_fragments=2, cleanup_older_than=None))
    assert out["lance/maintenance/unindexed_rows_before"].value == 18
    assert out["lance/maintenance/unindexed_rows_after"].value == 0
    assert_searches_agree(uri)
