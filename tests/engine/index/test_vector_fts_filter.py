"""A full-text query as the filter of a vector search (``filter=MatchQuery(...)`` or
``filter={"expr_filter": ..., "search_filter": ...}``) against pylance 14.0.2 on the same tables:
the same ids in the same order with ``prefilter`` True and False, on an indexed table and on one
with appended (unindexed) rows and deleted rows; pylance's refusals (a phrase as a post-filter, a
search filter without a vector search or with a full-text search)."""

from __future__ import annotations

import shutil

import lance as pylance
import numpy as np
import pyarrow as pa
import pytest
from lance.dataset import ScannerBuilder as PyScannerBuilder
from lance.query import BooleanQuery as PyBooleanQuery
from lance.query import FullTextOperator as PyOperator
from lance.query import MatchQuery as PyMatch
from lance.query import Occur as PyOccur
from lance.query import PhraseQuery as PyPhrase

import lance_format as lance
from lance_format.dataset.scanner_builder import ScannerBuilder
from lance_format.errors import InvalidInputError
from lance_format.query import BooleanQuery, FullTextOperator, MatchQuery, Occur, PhraseQuery

ROWS, DIM = 900, 8
WORDS = ["lance", "vector", "index", "search", "spark", "arrow", "table", "format", "query", "delta"]
CATEGORIES = ["news", "news", "news", "news", "blog", "blog", "shop", "wiki"]  # skewed


def _table(first: int, rows: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(first, first + rows)
    # skewed words: "lance" in most texts, "delta" in few; some URLs, e-mails and nulls
    picks = rng.zipf(1.6, size=(rows, 4)) % len(WORDS)
    texts: list[str | None] = [" ".join(WORDS[w] for w in row) for row in picks]
    for i in range(rows):
        if i % 23 == 0:
            texts[i] = None
        elif i % 17 == 0:
            texts[i] = f"see https://example.org/{WORDS[i % 10]}/page{i} or mail user{i}@example.com"
    centers = rng.normal(scale=3.0, size=(12, DIM))
    vectors = (centers[rng.integers(0, 12, rows)] + rng.normal(size=(rows, DIM))).astype(np.float32)
    return pa.table({
        "id": ids,
        "text": pa.array(texts, pa.string()),
        "category": [CATEGORIES[int(c)] for c in rng.integers(0, len(CATEGORIES), rows)],
        "vec": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM),
    })


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Two pylance-built tables: indexed (IVF_PQ and INVERTED with positions), and a copy with
    deleted rows and appended rows no index covers."""
    root = tmp_path_factory.mktemp("vector_fts_filter")
    indexed = str(root / "indexed")
    ds = pylance.write_dataset(_table(0, ROWS, 3), indexed, max_rows_per_file=400)
    ds.create_index("vec", "IVF_PQ", num_partitions=4, num_sub_vectors=4)
    ds.create_scalar_index("text", "INVERTED", with_position=True)
    changed = str(root / "changed")
    shutil.copytree(indexed, changed)
    ds = pylance.dataset(changed)
    ds.delete("id % 7 = 3 OR category = 'wiki' AND id < 300")
    pylance.write_dataset(_table(ROWS, 250, 4), changed, mode="append")
    return {"indexed": indexed, "changed": changed}


QUERY = np.random.default_rng(9).normal(scale=3.0, size=DIM).astype(np.float32)


def _nearest(k: int = 10, **extra: object) -> dict:
    return {"column": "vec", "q": QUERY, "k": k, "minimum_nprobes": 4, **extra}


# (label, our filter, pylance's filter): each run with prefilter True and False
FILTERS = [
    ("match", MatchQuery("lance", "text"), PyMatch("lance", "text")),
    ("rare", MatchQuery("delta", "text"), PyMatch("delta", "text")),
    ("and", MatchQuery("lance search", "text", operator=FullTextOperator.AND),
     PyMatch("lance search", "text", operator=PyOperator.AND)),
    ("or", MatchQuery("spark delta example", "text"), PyMatch("spark delta example", "text")),
    ("dict", {"expr_filter": "category = 'news'", "search_filter": MatchQuery("vector", "text")},
     {"expr_filter": "category = 'news'", "search_filter": PyMatch("vector", "text")}),
    ("dict_urls", {"expr_filter": "id >= 100 AND category <> 'shop'", "search_filter": MatchQuery("example", "text")},
     {"expr_filter": "id >= 100 AND category <> 'shop'", "search_filter": PyMatch("example", "text")}),
]


@pytest.mark.parametrize("table", ["indexed", "changed"])
@pytest.mark.parametrize("prefilter", [True, False])
@pytest.mark.parametrize(("label", "ours", "theirs"), FILTERS, ids=[f[0] for f in FILTERS])
def test_same_rows_as_pylance(tables: dict[str, str], table: str, prefilter: bool, label: str, ours: object,
                              theirs: object) -> None:
    uri = tables[table]
    expected = pylance.dataset(uri).scanner(nearest=_nearest(), filter=theirs, prefilter=prefilter,
                                            columns=["id", "text"]).to_table()
    got = lance.dataset(uri).scanner(nearest=_nearest(), filter=ours, prefilter=prefilter,
                                     columns=["id", "text"]).to_table()
    assert got["id"].to_pylist() == expected["id"].to_pylist()
    assert got.column_names == expected.column_names == ["id", "text", "_distance"]
    if prefilter:  # the query's rows fill all k places
        assert got.num_rows == 10


@pytest.mark.parametrize("table", ["indexed", "changed"])
def test_prefilter_keeps_only_matching_rows(tables: dict[str, str], table: str) -> None:
    ds = lance.dataset(tables[table])
    got = ds.scanner(nearest=_nearest(k=40), filter=MatchQuery("delta", "text"), prefilter=True).to_table()
    assert got.num_rows == 40
    assert all("delta" in text for text in got["text"].to_pylist())
    distances = got["_distance"].to_numpy()
    assert (np.diff(distances) >= 0).all()


@pytest.mark.parametrize("prefilter", [True, False])
def test_phrase_and_boolean_queries(tables: dict[str, str], prefilter: bool) -> None:
    """A phrase or boolean query filters before the search as in pylance; after it, pylance
    refuses it (when the scan runs, not when it is built)."""
    uri = tables["changed"]
    for ours, theirs in [
        (PhraseQuery("lance vector", "text"), PyPhrase("lance vector", "text")),
        (BooleanQuery([(Occur.MUST, MatchQuery("lance", "text")), (Occur.MUST_NOT, MatchQuery("arrow", "text"))]),
         PyBooleanQuery([(PyOccur.MUST, PyMatch("lance", "text")), (PyOccur.MUST_NOT, PyMatch("arrow", "text"))])),
    ]:
        theirs_scan = pylance.dataset(uri).scanner(nearest=_nearest(), filter=theirs, prefilter=prefilter)
        ours_scan = lance.dataset(uri).scanner(nearest=_nearest(), filter=ours, prefilter=prefilter)
        if prefilter:
            assert ours_scan.to_table()["id"].to_pylist() == theirs_scan.to_table()["id"].to_pylist()
        else:
            with pytest.raises(ValueError):
                theirs_scan.to_table()
            with pytest.raises(InvalidInputError, match="Only Match queries are supported"):
                ours_scan.to_table()


def test_refusals(tables: dict[str, str]) -> None:
    ds = lance.dataset(tables["indexed"])
    with pytest.raises(InvalidInputError, match="can only be used with full text search or vector search"):
        ds.scanner(filter=MatchQuery("lance", "text"))
    with pytest.raises(InvalidInputError, match="can't be used with fts search"):
        ds.scanner(full_text_query="lance", filter=MatchQuery("lance", "text"))
    with pytest.raises(InvalidInputError, match="'nosuch' does not exist"):
        ds.scanner(nearest=_nearest(), filter=MatchQuery("lance", "nosuch")).to_table()
    with pytest.raises(InvalidInputError, match="search_filter must be a full-text query"):
        ds.scanner(nearest=_nearest(), filter={"search_filter": "text = 'lance'"})
    with pytest.raises(InvalidInputError, match=r"\['filter'\]"):
        ds.scanner(nearest=_nearest(), filter={"filter": "id > 3"})


def test_dict_with_expression_only(tables: dict[str, str]) -> None:
    """A dict without a search filter is its expression filter alone (as pylance)."""
    uri = tables["changed"]
    expected = pylance.dataset(uri).scanner(nearest=_nearest(), filter={"expr_filter": "category = 'blog'"},
                                            prefilter=True).to_table()
    got = lance.dataset(uri).scanner(nearest=_nearest(), filter={"expr_filter": "category = 'blog'"},
                                     prefilter=True).to_table()
    assert got["id"].to_pylist() == expected["id"].to_pylist()
    assert set(got["category"].to_pylist()) == {"blog"}


def test_scanner_builder_keeps_both_kinds(tables: dict[str, str]) -> None:
    """``ScannerBuilder.filter`` called with SQL then a query keeps both, as pylance's."""
    uri = tables["indexed"]
    theirs = PyScannerBuilder(pylance.dataset(uri))
    expected = (theirs.nearest(**_nearest()).filter("category = 'blog'").filter(PyMatch("lance", "text"))
                .prefilter(True).to_scanner().to_table())
    got = (ScannerBuilder(lance.dataset(uri)).nearest(**_nearest()).filter("category = 'blog'")
           .filter(MatchQuery("lance", "text")).prefilter(True).to_scanner().to_table())
    assert got["id"].to_pylist() == expected["id"].to_pylist()
    assert set(got["category"].to_pylist()) == {"blog"}


@pytest.fixture(scope="module")
def ranked_table(tmp_path_factory: pytest.TempPathFactory) -> str:
    """400 rows; every fifth text holds "delta" with a length (so a score) shared by at most 3
    rows, so the best matches are the same rows whichever way equal scores are ordered."""
    uri = str(tmp_path_factory.mktemp("vector_fts_ranked") / "t")
    ids = np.arange(400)
    texts = [("delta " + "filler " * (i % 37)).strip() if i % 5 == 0 else f"other text {i}" for i in ids]
    vectors = np.random.default_rng(2).normal(size=(400, DIM)).astype(np.float32)
    table = pa.table({"id": ids, "text": texts,
                      "vec": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM)})
    ds = pylance.write_dataset(table, uri)
    ds.create_index("vec", "IVF_FLAT", num_partitions=2)
    ds.create_scalar_index("text", "INVERTED")
    return uri


@pytest.mark.parametrize(("limit", "offset", "expr"), [(3, None, None), (2, 1, None), (5, None, None),
                                                       (4, 1, None), (2, None, None), (3, None, "id > 0 AND id <> 185"),
                                                       (None, 2, None)])
def test_prefilter_limit_keeps_best_matches(ranked_table: str, limit: int | None, offset: int | None,
                                            expr: str | None) -> None:
    """pylance pushes a scan's limit into the full-text prefilter: only the ``limit + offset``
    best-scoring matching rows are searched."""
    kwargs: dict = {"nearest": _nearest(), "prefilter": True, "limit": limit, "offset": offset, "columns": ["id"]}
    expected = pylance.dataset(ranked_table).scanner(
        filter={"expr_filter": expr, "search_filter": PyMatch("delta", "text")}, **kwargs).to_table()
    got = lance.dataset(ranked_table).scanner(
        filter={"expr_filter": expr, "search_filter": MatchQuery("delta", "text")}, **kwargs).to_table()
    assert got["id"].to_pylist() == expected["id"].to_pylist()
    if limit is not None:
        assert set(got["id"].to_pylist()) <= {0, 185, 370, 75, 260}
