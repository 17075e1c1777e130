"""LABEL_LIST and NGRAM against pylance 14.0.2, both directions.

Our files equal pylance's on tags lists (nulls, empty lists, null items) and on URLs / e-mails
with accents and mixed case; pylance answers array_has_any / array_has_all / array_contains /
contains / LIKE from our indices exactly as its full scan; pylance's indices answer here; stable
row ids (entries are ``_rowid``s) after updates move rows.
"""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
import lance_format.index.scalar.queries as q
from lance_format.errors import ArgumentTypeError, InvalidInputError
from lance_format.index.scalar.ngram_text import query_tokens, trigrams
from tests.index_types.helpers import assert_same_index_file, pylance_segment

LIST_FILTERS = [
    "array_has_any(tags, ['red', 'blue'])", "array_has_all(tags, ['red', 'blue'])", "array_contains(tags, 'urgent')",
    "array_has(tags, 'näive')", "array_has_any(tags, ['nope'])", "array_has_all(tags, ['red', 'nope'])",
    "NOT array_has_any(tags, ['red'])", "array_has_any(tags, ['white']) AND id < 5000",
    "array_has_any(tags, ['black']) OR array_has_all(tags, ['green', 'yellow'])", "tags IS NULL",
]
TEXT_FILTERS = [
    "contains(url, 'example')", "contains(url, 'Example')", "contains(url, 'MÜNSTER')", "contains(url, 'straße1')",
    "contains(url, 'zzz')", "contains(url, 'ex')", "url LIKE 'https://shop%'", "url LIKE '%google%'",
    "contains(email, 'élodie@')", "contains(email, 'o_brien')", "starts_with(email, 'user50')",
    "contains(url, '/p/1') AND id > 100",
]


def _ids(ds, flt: str, **kwargs) -> np.ndarray:
    return np.sort(ds.to_table(columns=["id"], filter=flt, **kwargs).column("id").to_numpy())


@pytest.mark.parametrize("column,kind,file", [
    ("tags", "LABEL_LIST", "bitmap_page_lookup.lance"),
    ("url", "NGRAM", "ngram_postings.lance"),
    ("email", "NGRAM", "ngram_postings.lance"),
])
def test_files_equal_pylance(dataset_uri, column, kind, file):
    lance.dataset(dataset_uri).create_scalar_index(column, kind, name="theirs")
    lance_format.dataset(dataset_uri).create_scalar_index(column, kind, name="ours")
    assert_same_index_file(dataset_uri, "ours", "theirs", file)
    ds = lance.dataset(dataset_uri)
    assert ds.stats.index_stats("ours")["indices"] == ds.stats.index_stats("theirs")["indices"]
    described = {d.name: d for d in ds.describe_indices()}
    assert described["ours"].type_url == described["theirs"].type_url
    assert described["ours"].num_rows_indexed == described["theirs"].num_rows_indexed


def test_pylance_answers_from_our_indices(dataset_uri):
    ours = lance_format.dataset(dataset_uri)
    ours.create_scalar_index("tags", "LABEL_LIST")
    ours.create_scalar_index("url", "NGRAM")
    ours.create_scalar_index("email", "NGRAM")
    ds = lance.dataset(dataset_uri)
    for flt in LIST_FILTERS + TEXT_FILTERS:
        assert np.array_equal(_ids(ds, flt), _ids(ds, flt, use_scalar_index=False)), flt
    assert "tags_idx(LabelList)" in ds.scanner(filter=LIST_FILTERS[0]).explain_plan()
    assert "url_idx(NGram)" in ds.scanner(filter=TEXT_FILTERS[0]).explain_plan()


def test_we_answer_from_pylance_indices(dataset_uri):
    ds = lance.dataset(dataset_uri)
    ds.create_scalar_index("tags", "LABEL_LIST")
    ds.create_scalar_index("url", "NGRAM")
    ds.create_scalar_index("email", "NGRAM")
    ours = lance_format.dataset(dataset_uri)
    for flt in LIST_FILTERS + TEXT_FILTERS:
        expected = _ids(lance.dataset(dataset_uri), flt, use_scalar_index=False)
        assert np.array_equal(_ids(ours, flt), expected), flt
        assert ours.count_rows(flt) == len(expected), flt
    assert "ScalarIndexQuery" in ours.scanner(filter=LIST_FILTERS[0]).explain_plan()
    assert "ScalarIndexQuery" in ours.scanner(filter=TEXT_FILTERS[0]).explain_plan()


def _true_ids(uri: str, flt: str) -> np.ndarray:
    table = lance.dataset(uri).to_table(columns=[], filter=flt, with_row_id=True, use_scalar_index=False)
    return np.sort(table.column("_rowid").to_numpy())


def test_label_list_search_is_exact(dataset_uri):
    lance.dataset(dataset_uri).create_scalar_index("tags", "LABEL_LIST")
    segment = pylance_segment(dataset_uri, "tags_idx")
    any_of = segment.search(q.LabelListHasAny(pa.array(["red", "näive"])))
    assert any_of.exact
    assert np.array_equal(any_of.rows, _true_ids(dataset_uri, "array_has_any(tags, ['red', 'näive'])"))
    all_of = segment.search(q.LabelListHasAll(pa.array(["red", "blue"])))
    assert np.array_equal(all_of.rows, _true_ids(dataset_uri, "array_has_all(tags, ['red', 'blue'])"))
    assert segment.search(q.LabelListHasAll(pa.array(["red", "nope"]))).rows.size == 0
    assert np.array_equal(segment.search(q.IsNull()).rows, _true_ids(dataset_uri, "tags IS NULL"))
    assert segment.statistics() == {"num_bitmaps": 9}  # 8 tags and the null item


def test_ngram_search_is_a_superset(dataset_uri):
    lance.dataset(dataset_uri).create_scalar_index("url", "NGRAM")
    segment = pylance_segment(dataset_uri, "url_idx")
    for text, flt in (("MÜNSTER", "contains(url, 'Münster')"), ("shop.ex", "contains(url, 'shop.ex')")):
        result = segment.search(q.StringContains(text))
        truth = _true_ids(dataset_uri, flt)
        assert not result.exact and len(truth) and np.isin(truth, result.rows).all()
    assert segment.search(q.StringContains("qqqzzz")).rows.size == 0  # a trigram no row has
    assert segment.search(q.StringContains("ab")) is None  # too short: scanned
    assert segment.search(q.StringContains("/-/")) is None  # no trigram: scanned
    assert np.array_equal(segment.search(q.IsNull()).rows, _true_ids(dataset_uri, "url IS NULL"))


def test_stable_row_ids_after_updates(tmp_path, table):
    uri = str(tmp_path / "stable.lance")
    lance.write_dataset(table.slice(0, 6000), uri, max_rows_per_file=2500, enable_stable_row_ids=True)
    lance.dataset(uri).update({"score": "score + 1"}, where="id % 7 = 0")  # moves rows: ids != addresses
    lance.dataset(uri).create_scalar_index("tags", "LABEL_LIST", name="tags_theirs")
    lance.dataset(uri).create_scalar_index("url", "NGRAM", name="url_theirs")
    ours = lance_format.dataset(uri)
    ours.create_scalar_index("tags", "LABEL_LIST", name="tags_ours")
    ours.create_scalar_index("url", "NGRAM", name="url_ours")
    assert_same_index_file(uri, "tags_ours", "tags_theirs", "bitmap_page_lookup.lance")
    assert_same_index_file(uri, "url_ours", "url_theirs", "ngram_postings.lance")
    ds = lance.dataset(uri)
    ds.drop_index("tags_theirs")
    ds.drop_index("url_theirs")
    ds = lance.dataset(uri)
    for flt in ("array_has_any(tags, ['red'])", "contains(url, 'example')", "NOT array_has_all(tags, ['red', 'blue'])"):
        expected = _ids(ds, flt, use_scalar_index=False)
        assert np.array_equal(_ids(ds, flt), expected), flt
        assert np.array_equal(_ids(lance_format.dataset(uri), flt), expected), flt


def test_large_list_and_large_string(tmp_path):
    uri = str(tmp_path / "large.lance")
    data = pa.table({
        "id": pa.array(range(300), pa.int64()),
        "labels": pa.array([[i % 5, i % 7] if i % 9 else None for i in range(300)], pa.large_list(pa.int64())),
        "text": pa.array([f"Row-{i} ÜBER café" if i % 4 else None for i in range(300)], pa.large_string()),
    })
    lance.write_dataset(data, uri)
    lance.dataset(uri).create_scalar_index("labels", "LABEL_LIST", name="l_theirs")
    lance.dataset(uri).create_scalar_index("text", "NGRAM", name="t_theirs")
    lance_format.dataset(uri).create_scalar_index("labels", "LABEL_LIST", name="l_ours")
    lance_format.dataset(uri).create_scalar_index("text", "NGRAM", name="t_ours")
    assert_same_index_file(uri, "l_ours", "l_theirs", "bitmap_page_lookup.lance")
    assert_same_index_file(uri, "t_ours", "t_theirs", "ngram_postings.lance")
    ours = lance_format.dataset(uri)
    for flt in ("array_has_any(labels, [3, 6])", "array_has_all(labels, [1, 1])", "contains(text, 'uber caf')"):
        assert np.array_equal(_ids(ours, flt), _ids(lance.dataset(uri), flt, use_scalar_index=False)), flt


def test_type_refusals(dataset_uri, tmp_path):
    ours = lance_format.dataset(dataset_uri)
    with pytest.raises(ArgumentTypeError, match="LABEL_LIST index column id must be a list or large list"):
        ours.create_scalar_index("id", "LABEL_LIST")
    with pytest.raises(TypeError, match="NGRAM index column tags must be a string"):
        ours.create_scalar_index("tags", "NGRAM")
    nested = str(tmp_path / "nested.lance")
    lance.write_dataset(pa.table({"n": pa.array([[[1]], [[2, 3]]], pa.list_(pa.list_(pa.int64())))}), nested)
    with pytest.raises(InvalidInputError, match="LabelList index item type must be non-nested"):
        lance_format.dataset(nested).create_scalar_index("n", "LABEL_LIST")
    assert lance_format.dataset(nested).list_indices() == []


def test_trigram_tokens():
    # "000" is pylance's first real token (37**2 + 37 + 1); case and accents fold away
    assert query_tokens("000").tolist() == [1407]
    assert np.array_equal(query_tokens("CAFÉ"), query_tokens("cafe"))
    assert np.array_equal(query_tokens("Straße"), query_tokens("strasse"))
    tokens, positions = trigrams(pa.array(["abcd", None, "ab", "x-yz!q12"]))
    assert sorted(zip(positions.tolist(), tokens.tolist())) == sorted(
        [(0, 15516), (0, 16923), (1, 0), (3, 37040)])


def test_pylance_optimizes_our_indices_after_append(dataset_uri, table):
    ours = lance_format.dataset(dataset_uri)
    kinds = {"tags": "LABEL_LIST", "url": "NGRAM", "id": "ZONEMAP", "cat": "BLOOMFILTER"}
    for column, kind in kinds.items():
        ours.create_scalar_index(column, kind)
    lance.write_dataset(table.slice(100, 3000), dataset_uri, mode="append")
    lance.dataset(dataset_uri).optimize.optimize_indices()  # pylance extends our segments
    filters = ["array_has_any(tags, ['red'])", "contains(url, 'shop')", "id = 150", "cat = 'delta'"]
    for flt in filters:
        expected = _ids(lance.dataset(dataset_uri), flt, use_scalar_index=False)
        assert np.array_equal(_ids(lance.dataset(dataset_uri), flt), expected), flt
        assert np.array_equal(_ids(lance_format.dataset(dataset_uri), flt), expected), flt


def test_zone_indices_with_stable_row_ids(tmp_path, table):
    uri = str(tmp_path / "stable_zones.lance")
    lance.write_dataset(table.slice(0, 6000), uri, max_rows_per_file=2500, enable_stable_row_ids=True)
    lance.dataset(uri).update({"score": "score + 1"}, where="id % 5 = 0")
    ours = lance_format.dataset(uri)
    ours.create_scalar_index("score", "ZONEMAP")
    ours.create_scalar_index("cat", "BLOOMFILTER")
    for flt in ("score > 990", "cat = 'gamma'", "cat IS NULL"):
        expected = _ids(lance.dataset(uri), flt, use_scalar_index=False)
        assert np.array_equal(_ids(lance.dataset(uri), flt), expected), flt
        assert np.array_equal(_ids(lance_format.dataset(uri), flt), expected), flt


def test_float_labels_zero_and_nan(tmp_path):
    uri = str(tmp_path / "floats.lance")
    lists = [[1.5, float("nan")], [float("nan")], None, [], [2.0, None], [-0.0], [0.0, 1.5]] * 40
    lance.write_dataset(pa.table({"id": pa.array(range(len(lists)), pa.int64()),
                                  "f": pa.array(lists, pa.list_(pa.float64()))}), uri)
    lance.dataset(uri).create_scalar_index("f", "LABEL_LIST", name="theirs")
    lance_format.dataset(uri).create_scalar_index("f", "LABEL_LIST", name="ours")
    # pylance's keys: -0.0 and 0.0 apart, one NaN, sorted last
    assert_same_index_file(uri, "ours", "theirs", "bitmap_page_lookup.lance")
    lance.dataset(uri).drop_index("theirs")
    ours = lance_format.dataset(uri)
    for flt in ("array_has_any(f, [0.0])", "array_has_all(f, [1.5, 0.0])", "array_contains(f, 2.0)"):
        assert np.array_equal(_ids(ours, flt), _ids(ours, flt, use_scalar_index=False)), flt
