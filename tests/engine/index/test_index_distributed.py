"""Distributed scalar index builds: segments per fragment group (``create_index_uncommitted``),
committed once (``commit_existing_index_segments`` or ``LanceOperation.CreateIndex`` through
``LanceDataset.commit``), read by pylance like its full scan."""

from __future__ import annotations

import uuid

import lance as pylance
import numpy as np
import pyarrow as pa
import pytest

import lance_format as lance
from lance_format.errors import LanceError

FILTERS = ["id = 12345", "id > 29000", "id IN (5, 7000, 29999)", "cat = 'b'", "cat IS NULL",
           "email = 'user17@example.com'"]


@pytest.fixture
def table_uri(tmp_path):
    n = 30000
    rng = np.random.default_rng(7)
    cats = pa.array(rng.choice(np.array(["a", "b", "c", "d"], dtype=object), n, p=[.7, .2, .05, .05]))
    cats = pa.compute.if_else(pa.array(rng.random(n) < 0.03), pa.scalar(None, pa.string()), cats)
    t = pa.table({"id": np.arange(n), "cat": cats, "email": [f"user{i % 5000}@example.com" for i in range(n)]})
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(t, uri, max_rows_per_file=7000)
    return uri


def _check_pylance(uri, names, planned="id = 12345"):
    p = pylance.dataset(uri)
    assert sorted(d.name for d in p.describe_indices()) == sorted(names)
    for flt in FILTERS:
        with_index = p.to_table(filter=flt).sort_by("id")
        assert with_index.equals(p.to_table(filter=flt, use_scalar_index=False).sort_by("id")), flt
        ours = lance.dataset(uri).to_table(filter=flt).sort_by("id")
        assert ours.equals(with_index), flt
    assert "ScalarIndexQuery" in p.scanner(filter=planned).explain_plan()


def test_segments_per_fragment_commit_once(table_uri):
    ds = lance.dataset(table_uri)
    frags = [f.fragment_id for f in ds.get_fragments()]
    assert len(frags) == 5
    version = ds.version
    for col, typ in (("id", "BTREE"), ("cat", "BITMAP"), ("email", "BTREE")):
        segments = [ds.create_index_uncommitted(col, typ, fragment_ids=frags[i:i + 2]) for i in range(0, 5, 2)]
        assert lance.dataset(table_uri).version == version  # nothing committed by workers
        ds.commit_existing_index_segments(f"{col}_idx", col, segments)
        version += 1
        assert ds.version == version
    desc = {d.name: d for d in ds.describe_indices()}
    assert len(desc["id_idx"].segments) == 3 and desc["id_idx"].num_rows_indexed == 30000
    _check_pylance(table_uri, ["id_idx", "cat_idx", "email_idx"])


def test_create_index_operation_through_commit(table_uri):
    ds = lance.dataset(table_uri)
    segments = [ds.create_index_uncommitted("id", "BTREE", fragment_ids=[f.fragment_id])
                for f in ds.get_fragments()]
    for s in segments:
        s.name = "id_idx"
    op = lance.LanceOperation.CreateIndex(new_indices=segments, removed_indices=[])
    committed = lance.LanceDataset.commit(table_uri, op, read_version=ds.version)
    assert committed.version == ds.version + 1
    _check_pylance(table_uri, ["id_idx"])
    # the transaction reads back as the same segments
    txn = committed.read_transaction(committed.version)
    assert sorted(i.uuid for i in txn.operation.new_indices) == sorted(s.uuid for s in segments)
    # drop through the same operation: removing every segment
    current = lance.dataset(table_uri)
    op = lance.LanceOperation.CreateIndex(new_indices=[], removed_indices=segments)
    lance.LanceDataset.commit(table_uri, op, read_version=current.version)
    assert pylance.dataset(table_uri).describe_indices() == []


def test_pylance_segments_committed_here(table_uri):
    p = pylance.dataset(table_uri)
    segments = [p.create_index_uncommitted("cat", "BITMAP", fragment_ids=[f.fragment_id])
                for f in p.get_fragments()]
    ours = lance.dataset(table_uri)
    ours.commit_existing_index_segments("cat_idx", "cat", segments)
    _check_pylance(table_uri, ["cat_idx"], planned="cat = 'b'")


def test_bad_inputs(table_uri):
    ds = lance.dataset(table_uri)
    with pytest.raises(LanceError, match="requires fragment_ids"):
        ds.create_index_uncommitted("id", "BTREE")
    with pytest.raises(LanceError, match=r"fragments \[99\]"):
        ds.create_index_uncommitted("id", "BTREE", fragment_ids=[99])
    seg = ds.create_index_uncommitted("id", "BTREE", fragment_ids=[0, 1])
    dup = ds.create_index_uncommitted("id", "BTREE", fragment_ids=[1])
    with pytest.raises(LanceError, match="more than once"):
        ds.commit_existing_index_segments("id_idx", "id", [seg, dup])
    with pytest.raises(LanceError, match="not column cat"):
        ds.commit_existing_index_segments("cat_idx", "cat", [seg])
    with pytest.raises(LanceError, match="no segments"):
        ds.commit_existing_index_segments("id_idx", "id", [])
    assert ds.describe_indices() == []


def test_merge_existing_segments(table_uri):
    ds = lance.dataset(table_uri)
    parts = [ds.create_index_uncommitted("cat", "BITMAP", fragment_ids=[f.fragment_id]) for f in ds.get_fragments()]
    merged = ds.merge_existing_index_segments(parts[:3])
    assert sorted(merged.fragment_ids) == [0, 1, 2]
    ds.commit_existing_index_segments("cat_idx", "cat", [merged] + parts[3:])
    assert len(pylance.dataset(table_uri).describe_indices()[0].segments) == 3
    _check_pylance(table_uri, ["cat_idx"], planned="cat = 'b'")
    other = ds.create_index_uncommitted("id", "BTREE", fragment_ids=[0])
    with pytest.raises(LanceError, match="same column"):
        ds.merge_existing_index_segments([parts[0], other])


@pytest.mark.parametrize("engine", ["ours", "pylance"])
def test_segments_committed_without_details_are_inferred_as_pylance_does(tmp_path, engine):
    """pylance's own distributed FTS recipe commits ``Index(...)`` without ``index_details``: the
    type is inferred from the files (INVERTED, BITMAP, BTREE; ``index.idx``: a legacy vector
    index), so the index is listed with its type and searched."""
    from lance_format.dataset import Index, IndexFile

    words = ["lance", "database", "search", "vector", "columnar", "e-mail", "user@example.com"]
    rng = np.random.default_rng(3)
    data = pa.table({"id": np.arange(600), "text": [" ".join(rng.choice(words, 5)) for _ in range(600)],
                     "cat": rng.choice(np.array(["a", "b"], dtype=object), 600), "n": np.arange(600)})
    uri = str(tmp_path / "t.lance")
    ds = lance.write_dataset(data, uri, max_rows_per_file=200)
    build = ds if engine == "ours" else pylance.dataset(uri)
    frags = [f.fragment_id for f in ds.get_fragments()]
    indices = []
    for column, kind in (("text", "INVERTED"), ("cat", "BITMAP"), ("n", "BTREE")):
        index_id = str(uuid.uuid4())
        if kind == "INVERTED":
            for fragment in frags:
                build.create_scalar_index(column, kind, name=f"{column}_idx", replace=False, index_uuid=index_id,
                                          fragment_ids=[fragment])
            build.merge_index_metadata(index_id, index_type=kind)
        else:
            index_id = build.create_index_uncommitted(column, kind, name=f"{column}_idx", fragment_ids=frags).uuid
        indices.append(Index(uuid=index_id, name=f"{column}_idx", fields=[ds.schema.get_field_index(column)],
                             dataset_version=ds.version, fragment_ids=set(frags), index_version=0))
    indices.append(Index(uuid=str(uuid.uuid4()), name="legacy_vector_idx", fields=[0], dataset_version=ds.version,
                         fragment_ids=set(frags), index_version=0, files=[IndexFile(path="index.idx", size_bytes=0)]))
    committed = lance.LanceDataset.commit(uri, lance.LanceOperation.CreateIndex(new_indices=indices, removed_indices=[]),
                                          read_version=ds.version)
    # described as the manifest has them (pylance 14); their statistics and searches infer the type
    theirs = {d.name: (d.index_type, d.type_url) for d in pylance.dataset(uri).describe_indices()}
    ours = {d.name: (d.index_type, d.type_url) for d in committed.describe_indices()}
    assert ours == theirs
    assert {name: kind for name, (kind, _) in ours.items()} == {
        "text_idx": "Unknown", "cat_idx": "Unknown", "n_idx": "Unknown", "legacy_vector_idx": "Vector"}
    for name, kind in (("text_idx", "Inverted"), ("cat_idx", "Bitmap"), ("n_idx", "BTree")):
        assert committed.stats.index_stats(name)["index_type"] == kind
        assert pylance.dataset(uri).stats.index_stats(name)["index_type"] == kind
    assert committed.describe_indices()[0].segments[0].fragment_ids == set(frags)  # a set, as pylance's
    want = pylance.dataset(uri).to_table(full_text_query="columnar", columns=["id"]).column("id").to_pylist()
    got = committed.to_table(full_text_query="columnar", columns=["id"]).column("id").to_pylist()
    assert sorted(got) == sorted(want) and len(got) > 0
    assert "ScalarIndexQuery" in committed.scanner(filter="n = 5").explain_plan()


def test_create_index_returns_the_dataset_as_pylance(tmp_path):
    vectors = pa.FixedSizeListArray.from_arrays(np.random.default_rng(1).random(2000, np.float32), 2)
    ds = lance.write_dataset(pa.table({"vec": vectors, "id": np.arange(1000)}), str(tmp_path / "v.lance"))
    returned = ds.create_index("vec", index_type="IVF_PQ", num_partitions=4, num_sub_vectors=2)
    assert returned is ds and returned.version == 2
    assert ds.create_index("id", "BTREE") is ds and ds.version == 3
