"""The index API with pylance's names, results and errors; unknown index types; writes after indexing."""

from __future__ import annotations

import warnings

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import (
    IndexColumnNotFoundError,
    IndexExistsError,
    IndexNotFoundError,
)


def _table(n: int = 600) -> pa.Table:
    rng = np.random.default_rng(7)
    return pa.table({
        "id": pa.array(np.arange(n), pa.int64()),
        "cat": pa.array(rng.choice(["a", "b", "c"], n).tolist()),
        "text": pa.array([f"the quick fox {i} jumps over https://example.com/{i % 5}" for i in range(n)]),
        "tags": pa.array([["x", "y"] if i % 2 else ["z"] for i in range(n)]),
    })


@pytest.fixture
def path(tmp_path):
    uri = str(tmp_path / "t.lance")
    lance_format.write_dataset(_table(), uri, max_rows_per_file=200)
    return uri


def _indices(ds) -> list[tuple[str, str]]:
    return [(d.name, d.index_type) for d in ds.describe_indices()]


def _both_raise(path, call, ours_type, theirs_type, match):
    with pytest.raises(ours_type, match=match):
        call(lance_format.dataset(path))
    with pytest.raises(theirs_type, match=match):
        call(lance.dataset(path))


def test_names_replace_and_drop_like_pylance(path):
    twin = path + ".twin"
    lance_format.write_dataset(_table(), twin, max_rows_per_file=200)
    for uri, module in ((path, lance_format), (twin, lance)):
        ds = module.dataset(uri)
        ds.create_scalar_index("id", "BTREE", replace=False)
        ds.create_scalar_index("id", "BITMAP", replace=False)  # default name taken by another type: id_idx_2
        ds.create_scalar_index("cat", "bitmap", name="by_cat")
        ds.create_scalar_index("cat", "BTREE", name="by_cat", replace=True)  # replaces: one segment, new type
    ours, theirs = lance_format.dataset(path), lance.dataset(twin)
    assert _indices(ours) == _indices(theirs) == [("by_cat", "BTree"), ("id_idx", "BTree"), ("id_idx_2", "Bitmap")]
    assert ours.version == theirs.version == 5
    assert ours.has_index and theirs.has_index
    # each engine reads the other's
    assert _indices(lance.dataset(path)) == _indices(lance_format.dataset(twin))
    lance_format.dataset(path).drop_index("id_idx_2")
    lance.dataset(twin).drop_index("id_idx_2")
    assert _indices(lance.dataset(path)) == _indices(lance_format.dataset(twin)) == [("by_cat", "BTree"),
                                                                                     ("id_idx", "BTree")]
    txn = lance.dataset(path).read_transaction(6)
    assert type(txn.operation).__name__ == "CreateIndex" and len(txn.operation.removed_indices) == 1
    assert not txn.operation.new_indices


def test_failure_paths_match_pylance(path):
    lance_format.dataset(path).create_scalar_index("id", "BTREE")
    _both_raise(path, lambda ds: ds.create_scalar_index("id", "BTREE", replace=False), RuntimeError,
                RuntimeError, "Index name 'id_idx' already exists, please specify a different name or use replace=True")
    _both_raise(path, lambda ds: ds.create_scalar_index("cat", "BTREE", name="id_idx"), IndexExistsError,
                RuntimeError, "already exists with different fields")
    _both_raise(path, lambda ds: ds.create_scalar_index("nope", "BTREE"), IndexColumnNotFoundError, KeyError,
                "nope not found in schema")
    _both_raise(path, lambda ds: ds.create_scalar_index("tags", "BTREE"), TypeError, TypeError,
                "BTREE/BITMAP index column tags must be int")
    _both_raise(path, lambda ds: ds.create_scalar_index("id", "FOO"), NotImplementedError, NotImplementedError,
                "Received FOO")
    _both_raise(path, lambda ds: ds.drop_index("zzz"), IndexNotFoundError, RuntimeError,
                "Lance index not found: name=zzz")
    _both_raise(path, lambda ds: ds.prewarm_index("zzz"), IndexNotFoundError, RuntimeError,
                "Lance index not found: name=zzz")
    _both_raise(path, lambda ds: ds.stats.index_stats("zzz"), KeyError, KeyError, 'Index "zzz" not found')
    _both_raise(path, lambda ds: ds.create_scalar_index("id", "BTREE", fragment_ids=[0]), ValueError, ValueError,
                "create_index_uncommitted")
    # a vector index on a scalar column: pylance's TypeError
    _both_raise(path, lambda ds: ds.create_index("id", "IVF_PQ"), TypeError, TypeError,
                "Vector column id must be FixedSizeListArray")
    # nothing was committed by the failures
    assert lance_format.dataset(path).version == lance.dataset(path).version == 2


def test_statistics_list_and_prewarm(path):
    ds = lance_format.dataset(path)
    assert not ds.has_index and ds.describe_indices() == []
    ds.create_index("id", "BTREE", name="ids")  # create_index takes scalar types too
    ds.create_scalar_index("cat", "BITMAP", train=False, name="untrained")
    theirs = lance.dataset(path)
    for name in ("ids", "untrained"):
        assert ds.stats.index_stats(name) == theirs.stats.index_stats(name)
    untrained = ds.stats.index_stats("untrained")
    assert untrained["index_type"] == "N/A" and untrained["num_indexed_rows"] == 0
    assert untrained["num_unindexed_fragments"] == 3
    with pytest.warns(DeprecationWarning):
        listed = ds.list_indices()
    assert [(i["name"], i["type"], i["fields"], sorted(i["fragment_ids"])) for i in listed] == [
        ("ids", "BTree", ["id"], [0, 1, 2]), ("untrained", "Bitmap", ["cat"], [])]
    with pytest.warns(DeprecationWarning):
        assert ds.index_statistics("ids") == theirs.stats.index_stats("ids")
    ds.prewarm_index("ids")
    segment = ds.describe_indices()[0].segments[0].uuid
    ds.prewarm_index("ids", index_segments=[segment])
    # an untrained index answers nothing: its column's filters scan
    assert "ScalarIndexQuery" not in ds.scanner(filter="cat = 'a'").explain_plan()
    assert ds.count_rows("cat = 'a'") == theirs.count_rows("cat = 'a'", use_scalar_index=False)


def test_index_types_this_engine_does_not_know_are_scanned(path):
    theirs = lance.dataset(path)
    theirs.create_scalar_index("text", "INVERTED")
    theirs.create_scalar_index("id", "BTREE")
    ours = lance_format.dataset(path)
    assert _indices(ours) == _indices(lance.dataset(path)) == [("id_idx", "BTree"), ("text_idx", "Inverted")]
    stats = ours.stats.index_stats("text_idx")
    assert stats["index_type"] == "Inverted" and stats["num_indexed_rows"] == 600
    sql = "text = 'the quick fox 7 jumps over https://example.com/2' OR id = 3"
    assert "ScalarIndexQuery" not in ours.scanner(filter=sql).explain_plan()  # OR needs both sides
    assert ours.to_table(filter=sql)["id"].to_pylist() == [3, 7]
    sql = "text LIKE '%fox 1%' AND id < 30"
    plan = ours.scanner(filter=sql).explain_plan()
    assert "[id < 30]@id_idx(BTree)" in plan and "text_idx" not in plan
    assert ours.to_table(filter=sql).equals(ours.to_table(filter=sql, use_scalar_index=False))
    ours.prewarm_index("text_idx")  # nothing this engine could load: a no-op, not an error


def test_writes_after_our_index_keep_both_engines_exact(path):
    ds = lance_format.dataset(path)
    ds.create_scalar_index("id", "BTREE")
    ds.create_scalar_index("cat", "BITMAP")
    lance_format.write_dataset(_table(50), path, mode="append")  # uncovered until optimized
    ds = lance_format.dataset(path)
    ds.delete("id % 10 = 3")
    ds.update({"cat": "'d'"}, where="id < 5")  # rewrites rows of an indexed column
    ours, theirs = lance_format.dataset(path), lance.dataset(path)
    stats = ours.stats.index_stats("id_idx")
    assert stats == theirs.stats.index_stats("id_idx")
    assert stats["num_unindexed_fragments"] >= 1
    for sql in ("id = 13", "id < 8", "cat = 'd'", "cat = 'a' AND id > 590", "id IN (1, 2, 3, 44)"):
        expected = theirs.to_table(filter=sql, use_scalar_index=False).sort_by("id")
        assert theirs.to_table(filter=sql).sort_by("id").equals(expected), sql
        assert ours.to_table(filter=sql).sort_by("id").equals(expected), sql
    lance_format.write_dataset(_table(10), path, mode="overwrite")
    assert lance.dataset(path).describe_indices() == [] and not lance_format.dataset(path).has_index


def test_filters_without_usable_indices_and_limits(path):
    ds = lance_format.dataset(path)
    ds.create_scalar_index("id", "BTREE")
    cases = ["id > 590 AND cat = 'a'", "id < 3 OR cat = 'b'", "NOT (id < 595)", "id = 5.0", "id > NULL",
             "id IN (1, NULL, 3)", "id <> 4 AND id < 6", "3 > id", "id BETWEEN 10 AND 5"]
    for sql in cases:
        assert ds.to_table(filter=sql).equals(ds.to_table(filter=sql, use_scalar_index=False)), sql
        assert ds.count_rows(sql) == ds.scanner(filter=sql, use_scalar_index=False).count_rows(), sql
        if sql != "id = 5.0":  # pylance refuses a float literal against an int column
            assert ds.count_rows(sql) == lance.dataset(path).count_rows(sql), sql
    limited = ds.to_table(filter="id < 100", limit=5, offset=2)
    assert limited["id"].to_pylist() == [2, 3, 4, 5, 6]
    with_late = ds.to_table(columns=["text"], filter="id = 42")
    assert with_late["text"].to_pylist() == ["the quick fox 42 jumps over https://example.com/2"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "ScalarIndexQuery" in ds.scanner(filter="3 > id").explain_plan()


def test_a_missing_index_file_is_reported_not_misread(path):
    import glob
    import os

    from lance_format.errors import CorruptFileError

    lance_format.dataset(path).create_scalar_index("cat", "BITMAP")
    (index_file,) = glob.glob(os.path.join(path, "_indices", "*", "bitmap_page_lookup.lance"))
    os.remove(index_file)
    ds = lance_format.dataset(path)
    with pytest.raises(CorruptFileError, match="bitmap_page_lookup.lance"):
        ds.to_table(filter="cat = 'a'")
    with pytest.raises((OSError, pa.ArrowInvalid), match="bitmap_page_lookup.lance"):  # pylance fails too
        lance.dataset(path).to_table(filter="cat = 'a'")
    # a scan that does not use the index still answers
    assert ds.to_table(filter="cat = 'a'", use_scalar_index=False).num_rows == lance.dataset(path).to_table(
        filter="cat = 'a'", use_scalar_index=False).num_rows


def test_concurrent_indexed_scans_agree(path):
    from concurrent.futures import ThreadPoolExecutor

    ds = lance_format.dataset(path)
    ds.create_scalar_index("id", "BTREE", batch_size=64)  # many small pages, read and cached concurrently
    ds = lance_format.dataset(path)
    filters = [f"id BETWEEN {i * 37} AND {i * 37 + 20}" for i in range(16)]
    with ThreadPoolExecutor(4) as pool:
        counts = list(pool.map(lambda sql: ds.count_rows(sql), filters * 3))
    assert counts == [ds.scanner(filter=sql, use_scalar_index=False).count_rows() for sql in filters * 3]
    assert lance.dataset(path).stats.index_stats("id_idx")["indices"] == [{"min": "0", "max": "599",
                                                                          "num_pages": 10}]


LIST_FILTERS = ["array_has_any(labels, [NULL])", "array_has_all(labels, [NULL])", "array_contains(labels, NULL)",
                "NOT array_has_any(labels, [NULL])", "NOT array_has_all(labels, [NULL])",
                "NOT array_contains(labels, NULL)", "array_has_all(labels, ['foo', NULL])",
                "NOT array_has_all(labels, ['foo'])", "array_has_any(labels, ['bar', NULL])"]


def test_label_list_null_needles_match_null_items_as_pylance(tmp_path):
    """A NULL needle matches a null item (array_has_any/array_has_all), never in array_contains;
    with and without the LABEL_LIST index, in both engines."""
    data = pa.table({"labels": [["foo", None], ["bar", None], [None], ["foo"], ["bar"], [], None]})
    uri = str(tmp_path / "l.lance")
    theirs = lance.write_dataset(data, uri)
    want = {f: theirs.to_table(filter=f).column("labels").to_pylist() for f in LIST_FILTERS}
    assert want["array_has_all(labels, [NULL])"] == [["foo", None], ["bar", None], [None]]
    assert {f: lance_format.dataset(uri).to_table(filter=f).column("labels").to_pylist() for f in LIST_FILTERS} == want
    lance_format.dataset(uri).create_scalar_index("labels", "LABEL_LIST")
    assert {f: lance.dataset(uri).to_table(filter=f).column("labels").to_pylist() for f in LIST_FILTERS} == want
    assert {f: lance_format.dataset(uri).to_table(filter=f).column("labels").to_pylist() for f in LIST_FILTERS} == want


def test_indices_on_all_null_columns(tmp_path):
    data = pa.table({"btree": pa.array([None], pa.int64()), "bitmap": pa.array([None], pa.int64()),
                     "ngram": pa.array([None], pa.string())})
    uri = str(tmp_path / "n.lance")
    ds = lance_format.write_dataset(data, uri)
    for column, kind in (("btree", "BTREE"), ("bitmap", "BITMAP"), ("ngram", "NGRAM")):
        ds.create_scalar_index(column, index_type=kind)
    for engine in (lance_format, lance):
        opened = engine.dataset(uri)
        assert opened.to_table(filter="btree IS NULL").num_rows == 1
        assert opened.to_table(filter="bitmap IS NULL").num_rows == 1
    ds.insert(pa.table({"btree": [1], "bitmap": [2], "ngram": ["x"]}))
    ds.optimize.optimize_indices()
    assert lance.dataset(uri).to_table(filter="bitmap = 2").num_rows == 1


def test_index_uuid_arguments_are_checked_as_pylance(tmp_path):
    import uuid

    ds = lance_format.write_dataset(pa.table({"id": np.arange(100), "s": [str(i) for i in range(100)]}),
                                    str(tmp_path / "u.lance"))
    with pytest.raises(ValueError, match="Invalid UUID"):
        ds.create_scalar_index("id", "BTREE", index_uuid="not-a-uuid")
    for column, kind in (("id", "BTREE"), ("s", "NGRAM")):
        with pytest.raises(ValueError, match="index_uuid is no longer accepted"):
            ds.create_index_uncommitted(column, kind, fragment_ids=[0], index_uuid=str(uuid.uuid4()))
    segment = ds.create_index_uncommitted("id", "BITMAP", fragment_ids=[0], index_uuid=str(uuid.uuid4()))
    assert segment.fragment_ids == {0}
