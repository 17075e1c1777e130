"""``lance_format.spark.create_scalar_index``: segments built by Spark tasks, one commit, read by pylance."""

from __future__ import annotations

import lance as pylance
import numpy as np
import pyarrow as pa
import pytest

import lance_format as lance
from lance_format.errors import LanceError
from lance_format.spark import create_scalar_index


@pytest.fixture
def table_uri(tmp_path):
    n = 20000
    rng = np.random.default_rng(3)
    t = pa.table({"id": np.arange(n),
                  "host": pa.array(rng.choice(np.array(["a.com", "b.org", "c.net", None], dtype=object), n,
                                              p=[.6, .3, .07, .03]))})
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(t, uri, max_rows_per_file=3000)
    return uri


def test_spark_builds_segments_and_commits_once(spark, table_uri):
    before = lance.dataset(table_uri).version
    ds = create_scalar_index(spark, table_uri, "id", "BTREE", fragments_per_task=2)
    assert ds.version == before + 1
    ds = create_scalar_index(spark, table_uri, "host", "BITMAP", name="host_bitmap")
    assert ds.version == before + 2
    p = pylance.dataset(table_uri)
    desc = {d.name: d for d in p.describe_indices()}
    assert set(desc) == {"id_idx", "host_bitmap"}
    assert len(desc["id_idx"].segments) == 4 and len(desc["host_bitmap"].segments) == 7
    assert desc["id_idx"].num_rows_indexed == 20000
    for flt in ("id = 4321", "id BETWEEN 100 AND 180", "host = 'c.net'", "host IS NULL"):
        got = p.to_table(filter=flt).sort_by("id")
        assert got.equals(p.to_table(filter=flt, use_scalar_index=False).sort_by("id")), flt
        assert got.num_rows > 0
        assert lance.dataset(table_uri).to_table(filter=flt).sort_by("id").equals(got)
    assert "ScalarIndexQuery" in p.scanner(filter="host = 'c.net'").explain_plan()


def test_spark_index_bad_input(spark, table_uri):
    with pytest.raises(LanceError, match="nope not found"):
        create_scalar_index(spark, table_uri, "nope", "BTREE")
    with pytest.raises(LanceError, match="fragments_per_task"):
        create_scalar_index(spark, table_uri, "id", "BTREE", fragments_per_task=0)
    assert lance.dataset(table_uri).describe_indices() == []


def test_spark_builds_a_full_text_index(spark, tmp_path):
    pytest.importorskip("Stemmer")
    rng = np.random.default_rng(5)
    words = np.array("wireless headphones battery café résumé steel bottle running shoes the and".split(), dtype=object)
    texts = [" ".join(rng.choice(words, size=int(rng.integers(1, 12)))) if i % 17 else None for i in range(3000)]
    t = pa.table({"id": np.arange(len(texts)), "text": pa.array(texts, pa.string())})
    ours, theirs = str(tmp_path / "ours.lance"), str(tmp_path / "theirs.lance")
    for uri in (ours, theirs):
        pylance.write_dataset(t, uri, max_rows_per_file=700)
    before = lance.dataset(ours).version
    ds = create_scalar_index(spark, ours, "text", "INVERTED", fragments_per_task=2, with_position=True)
    assert ds.version == before + 1
    pylance.dataset(theirs).create_scalar_index("text", "INVERTED", with_position=True)
    (desc,) = pylance.dataset(ours).describe_indices()
    assert len(desc.segments) == 1 and desc.num_rows_indexed == 3000
    for query in ("wireless", "café running", "steel bottle shoes"):
        want = pylance.dataset(theirs).to_table(full_text_query=query)
        for got in (pylance.dataset(ours).to_table(full_text_query=query),
                    lance.dataset(ours).to_table(full_text_query=query)):
            assert got.num_rows == want.num_rows > 0
            scores = dict(zip(got.column("id").to_pylist(), got.column("_score").to_pylist()))
            for i, s in zip(want.column("id").to_pylist(), want.column("_score").to_pylist()):
                assert abs(scores[i] - s) < 1e-6, query
