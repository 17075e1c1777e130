"""full_text_query with pylance's query objects (lance_format.query): the same rows and BM25
scores as pylance 14 on pylance-built INVERTED indices, for every query kind, with filters,
appended fragments, deletions and segmented indices; bad queries give typed errors."""

from __future__ import annotations

import itertools
import shutil

import lance
import lance.query as LQ
import numpy as np
import pyarrow as pa
import pytest

import lance_format
import lance_format.query as OQ
from lance_format.errors import ArgumentTypeError, InvalidInputError

PRODUCTS = [
    "Wireless noise-cancelling headphones with 30h battery life; USB-C fast charging.",
    "Stainless steel water bottle keeps drinks cold for 24 hours! BPA-free.",
    "Running shoes with breathable mesh and a cushioned sole (size 42).",
    "Wireless charging pad for phones & earbuds - see https://shop.example.com/p?id=7",
    "Noise cancelling earbuds with wireless charging case, e-mail support@example.com",
    "Cold-brew coffee maker with stainless steel filter - café quality.",
    "Headphones stand made of steel",
    "Kabellose Kopfhörer mit Geräuschunterdrückung und langer Akkulaufzeit",
    "Laufschuhe mit atmungsaktivem Netz, Größe 42 — für Straßenläufe",
    "Édition limitée : café moulu, 250 g — prix réduit! Déjà vu?",
    None,
    "",
    "battery battery battery pack",
    "long running battery headphones wireless",
    "shoes for running in cold weather… naïve résumé",
    "wireless wireless headphones headphones",
    "Bluetooth speaker, waterproof (IPX7), 数据 格式",
]
NOTES = ["gift", "sale", None, "new arrival", "Sale", "", "clearance sale"]


def _table(n: int, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + n)
    desc = [PRODUCTS[(i * 5) % len(PRODUCTS)] for i in ids]
    return pa.table({
        "id": ids,
        "title": [(d.split()[0] if d else d) for d in desc],
        "desc": desc,
        "note": [NOTES[i % len(NOTES)] for i in ids],
        "price": (ids % 13).astype(np.float64) * 2.5,
    })


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    uri = tmp_path_factory.mktemp("fts") / "products"
    ds = lance.write_dataset(_table(102), uri, max_rows_per_file=40)
    ds.create_scalar_index("desc", "INVERTED", with_position=True)
    ds.create_scalar_index("title", "INVERTED")
    return uri


@pytest.fixture()
def table(built, tmp_path):
    uri = tmp_path / "copy"
    shutil.copytree(built, uri)
    return uri


COMPOUND = (LQ.BooleanQuery, LQ.BoostQuery, LQ.MultiMatchQuery)


def _same(uri, build, **options):
    """Run ``build(module)`` with pylance's and our query classes; same rows and scores."""
    theirs = lance.dataset(str(uri)).to_table(full_text_query=build(LQ), **options)
    ours = lance_format.dataset(str(uri)).to_table(full_text_query=build(OQ), **options)
    assert ours.schema == theirs.schema
    assert ours.num_rows == theirs.num_rows
    mine, other = ours.column("_score").to_numpy(), theirs.column("_score").to_numpy()
    np.testing.assert_allclose(mine, other, atol=1e-6)
    limited = options.get("limit") is not None
    # pylance returns a flat search (a column without an index) without a limit in row order
    in_row_order = not limited and "note" in repr(build(OQ))
    if not in_row_order:
        assert (np.diff(mine) <= 0).all()
    if "id" not in ours.column_names or not ours.num_rows:
        return ours
    ids, their_ids = ours.column("id").to_pylist(), theirs.column("id").to_pylist()
    if isinstance(build(LQ), COMPOUND) or in_row_order:  # pylance sorts these by score, then row id
        assert ids == their_ids
    # rows tied at the limit's cut may differ (pylance's WAND heap picks among them)
    cut = float(mine.min()) + 1e-6
    assert {i for i, s in zip(ids, mine) if s > cut} == {i for i, s in zip(their_ids, other) if s > cut}
    if not limited:
        assert dict(zip(ids, mine.tolist())).keys() == dict(zip(their_ids, other.tolist())).keys()
    return ours


QUERIES = {
    "match": lambda m: m.MatchQuery("wireless headphones", "desc"),
    "match_boost": lambda m: m.MatchQuery("wireless headphones", "desc", boost=2.5),
    "match_and": lambda m: m.MatchQuery("wireless headphones", "desc", operator=m.FullTextOperator.AND),
    "match_unicode": lambda m: m.MatchQuery("Kopfhörer café Größe naïve 数据", "desc"),
    "match_punctuation": lambda m: m.MatchQuery("USB-C e-mail: support@example.com!", "desc"),
    "fuzzy": lambda m: m.MatchQuery("wirless hedphone", "desc", fuzziness=1),
    "fuzzy_prefix": lambda m: m.MatchQuery("wirless hedphones", "desc", fuzziness=2, prefix_length=2),
    "fuzzy_expansions": lambda m: m.MatchQuery("stel shoe", "desc", fuzziness=2, max_expansions=2),
    "fuzzy_auto": lambda m: m.MatchQuery("wireless", "desc", fuzziness=None),
    "phrase": lambda m: m.PhraseQuery("noise cancelling", "desc"),
    "phrase_stop_word": lambda m: m.PhraseQuery("made of steel", "desc"),
    "phrase_slop": lambda m: m.PhraseQuery("wireless headphones", "desc", slop=2),
    "phrase_order": lambda m: m.PhraseQuery("headphones wireless", "desc", slop=1),
    "phrase_one_word": lambda m: m.PhraseQuery("Wireless!", "desc"),
    "boolean": lambda m: m.BooleanQuery([(m.Occur.MUST, m.MatchQuery("wireless", "desc")),
                                         (m.Occur.SHOULD, m.PhraseQuery("noise cancelling", "desc")),
                                         (m.Occur.MUST_NOT, m.MatchQuery("pad", "desc"))]),
    "boolean_should": lambda m: m.BooleanQuery([(m.Occur.SHOULD, m.MatchQuery("steel", "title")),
                                                (m.Occur.SHOULD, m.MatchQuery("running cold", "desc"))]),
    "and_or": lambda m: (m.MatchQuery("wireless", "desc") & m.MatchQuery("charging", "desc"))
    | m.MatchQuery("running", "title"),
    "boost": lambda m: m.BoostQuery(m.MatchQuery("wireless headphones", "desc"),
                                    m.MatchQuery("charging", "desc"), negative_boost=0.3),
    "multi_match": lambda m: m.MultiMatchQuery("wireless steel running", ["desc", "title"], boosts=[1.0, 2.0]),
    "multi_match_and": lambda m: m.MultiMatchQuery("wireless headphones", ["desc", "title"],
                                                   operator=m.FullTextOperator.AND),
    "unindexed_column": lambda m: m.MatchQuery("sale Sale", "note"),
    "string_all_columns": lambda m: "wireless steel",
    "dict_one_column": lambda m: {"query": "wireless", "columns": ["title"]},
}


@pytest.mark.parametrize("limit", [None, 7])
@pytest.mark.parametrize("name", sorted(QUERIES))
def test_query_kinds_as_pylance(built, name, limit):
    got = _same(built, QUERIES[name], columns=["id", "desc"], limit=limit)
    if name not in ("fuzzy_auto",):
        assert got.num_rows > 0, name  # each query finds rows: the comparison is not vacuous


@pytest.mark.parametrize("name", ["match", "phrase", "boolean", "boost", "multi_match", "unindexed_column"])
@pytest.mark.parametrize("prefilter", [True, False])
def test_filters_before_or_after_the_search(built, name, prefilter):
    options = dict(columns=["id", "price"], filter="price < 15", prefilter=prefilter, limit=6)
    got = _same(built, QUERIES[name], **options)
    assert all(p < 15 for p in got.column("price").to_pylist())


def test_offset_limit_and_projection(built):
    got = _same(built, QUERIES["boolean_should"], columns=["_score", "id"], limit=5, offset=3)
    assert got.column_names == ["_score", "id"]
    _same(built, QUERIES["match"], with_row_id=True, limit=4)


def test_appended_fragments_and_deletions(table):
    extra = _table(35, start=1000)
    lance.write_dataset(extra, table, mode="append")  # searched flat, scored with the index's statistics
    lance.dataset(str(table)).delete("id % 7 = 3 OR id = 1013")
    for name in ["match", "match_and", "fuzzy", "phrase", "phrase_slop", "boolean", "boost", "multi_match",
                 "unindexed_column", "string_all_columns"]:
        got = _same(table, QUERIES[name], columns=["id"])
        ids = got.column("id").to_pylist()
        assert not any(i % 7 == 3 or i == 1013 for i in ids), name
        if name in ("match", "phrase", "boolean"):
            assert any(i >= 1000 for i in ids), name
    # a prefilter keeps some appended rows: the flat rows' statistics count only those
    _same(table, QUERIES["match"], columns=["id"], filter="id < 1020", prefilter=True)


def test_segmented_index_answers_as_one(tmp_path):
    uri = tmp_path / "seg"
    ds = lance.write_dataset(_table(90), uri, max_rows_per_file=30)
    segments = [ds.create_index_uncommitted("desc", "INVERTED", fragment_ids=[f.fragment_id], with_position=True)
                for f in ds.get_fragments()]
    ds.commit_existing_index_segments("desc_idx", "desc", segments)
    assert len(lance.dataset(str(uri)).list_indices()) == 3
    for name in ["match", "phrase", "fuzzy", "boolean", "string_all_columns"]:
        assert _same(uri, QUERIES[name], columns=["id"]).num_rows


def test_query_objects_like_pylance():
    assert set(LQ.__dict__) >= {"MatchQuery", "PhraseQuery"}
    for name in ["BooleanQuery", "BoostQuery", "FullTextOperator", "FullTextQuery", "FullTextQueryType",
                 "MatchQuery", "MultiMatchQuery", "Occur", "PhraseQuery", "DocumentGranularity"]:
        assert hasattr(OQ, name) and hasattr(LQ, name), name
    assert [m.value for m in OQ.Occur] == [m.value for m in LQ.Occur]
    query = OQ.MatchQuery("a", "desc") | OQ.PhraseQuery("b c", "desc")
    assert query.query_type() is OQ.FullTextQueryType.BOOLEAN and query.inner is query
    assert lance_format.query is OQ


def test_bad_queries_give_typed_errors(built):
    ds = lance_format.dataset(str(built))
    theirs = lance.dataset(str(built))
    cases = [
        (lambda m: m.MatchQuery("x", "nope"), "does not exist"),
        (lambda m: m.MatchQuery("x", "price"), "must resolve to Utf8"),
        (lambda m: m.PhraseQuery("wireless charging", "title"), "position is not found"),
        (lambda m: m.BooleanQuery([(m.Occur.MUST_NOT, m.MatchQuery("x", "desc"))]), "at least one should/must"),
        (lambda m: m.MatchQuery("x", "desc", boost=-1.0), "finite and non-negative"),
    ]
    for build, message in cases:
        with pytest.raises(ValueError):
            theirs.to_table(full_text_query=build(LQ))
        with pytest.raises(InvalidInputError, match=message):
            ds.to_table(full_text_query=build(OQ))
    with pytest.raises(InvalidInputError, match="does not exist"):
        ds.to_table(full_text_query={"query": "x", "columns": ["nope"]})
    for bad in [lambda m: m.MatchQuery(42, "desc"), lambda m: m.MatchQuery("x", ["desc"]),
                lambda m: m.PhraseQuery("x", "desc", slop="2")]:
        with pytest.raises(TypeError):
            bad(LQ)
        with pytest.raises(ArgumentTypeError):
            bad(OQ)
    with pytest.raises(ValueError):
        LQ.MultiMatchQuery("x", ["desc", "title"], boosts=[1.0])
    with pytest.raises(InvalidInputError, match="number of boosts"):
        OQ.MultiMatchQuery("x", ["desc", "title"], boosts=[1.0])
    with pytest.raises(ArgumentTypeError):  # pylance ignores it and returns every row
        ds.to_table(full_text_query=42)
    with pytest.raises(ArgumentTypeError):
        ds.to_table(full_text_query=OQ.BooleanQuery([("MUST", OQ.MatchQuery("x", "desc"))]))


def test_search_is_the_plans_search_step(built):
    scanner = lance_format.dataset(str(built)).scanner(
        full_text_query=OQ.BoostQuery(OQ.MatchQuery("wireless", "desc"), OQ.MatchQuery("pad", "desc")),
        columns=["id"], filter="price > 3", prefilter=True, limit=5)
    assert type(scanner.plan.search).__name__ == "FullTextSearch"
    plan = scanner.explain_plan()
    assert "CompoundFtsScorer: query=Boosting(positive=Match(MatchQuery" in plan
    assert "SortExec: TopK(fetch=5), expr=[_score DESC" in plan
    assert "full_filter=" in plan and "price" in plan
    assert scanner.projected_schema.names == ["id", "_score"]
    assert scanner.to_table().num_rows == 5
    assert scanner.count_rows() == 5


def test_combined_fields_query_is_refused_clearly(built):
    from lance_format.errors import UnsupportedFeatureError
    query = OQ.CombinedFieldsQuery("wireless", ["desc", "title"])
    assert query.query_type() is OQ.FullTextQueryType.COMBINED_FIELDS
    with pytest.raises(UnsupportedFeatureError, match="CombinedFieldsQuery"):
        lance_format.dataset(str(built)).to_table(full_text_query=query)


def test_positions_decode_as_pylance_wrote_them(tmp_path):
    """Each token's positions read from a with_position index (packed groups of 128 deltas and
    varint tails, posting blocks of 128 documents) equal the analyzer's positions."""
    from lance_format.dataset.scan.fts_sources import column_source
    from lance_format.index.scalar.fts_tokenizer import tokenize_with_positions
    rng = np.random.default_rng(5)
    words = ["steel", "bottle", "the", "of", "café", "Größe", "wireless", "x" * 45]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(0, 60)))) for _ in range(300)] + [None, ""]
    uri = tmp_path / "pos"
    lance.write_dataset(pa.table({"text": pa.array(texts)}), uri).create_scalar_index(
        "text", "INVERTED", with_position=True)
    index = column_source(lance_format.dataset(str(uri)), "text").indices[0]
    part = index.partitions[0]
    lists, positions = tokenize_with_positions(pa.array(texts), index.params)
    offsets = lists.offsets.to_numpy()
    tokens = lists.flatten().to_numpy(zero_copy_only=False)
    rows = np.repeat(np.arange(len(texts)), np.diff(offsets))
    doc_of_row = {int(r): d for d, r in enumerate(part.row_ids.tolist())}
    for token in ["steel", "bottl", "wireless", "cafe", "grosse"]:
        _, docs, freqs = next(iter(index.postings(token)))
        assert freqs.sum() > 128  # packed groups of 128 deltas, not only varint tails
        got = index.positions(part, token, freqs)
        mine = tokens == token
        expected = {}
        for row, position in zip(rows[mine].tolist(), positions[mine].tolist()):
            expected.setdefault(doc_of_row[row], []).append(position)
        starts = np.concatenate([[0], np.cumsum(freqs)]).astype(int).tolist()
        assert {int(d): got[starts[i]:starts[i + 1]].tolist() for i, d in enumerate(docs)} == expected


def test_quoted_string_is_a_phrase(built, tmp_path):
    _same(built, lambda m: {"query": '"noise cancelling"', "columns": ["desc"]}, columns=["id"])
    ds = lance_format.dataset(str(built))
    with pytest.raises(InvalidInputError, match="column must be specified"):  # two indexed columns
        ds.to_table(full_text_query='"noise cancelling"')
    with pytest.raises(InvalidInputError, match="multiple columns"):
        ds.to_table(full_text_query={"query": '"noise cancelling"', "columns": ["desc", "title"]})
    uri = tmp_path / "one"
    lance.write_dataset(_table(30), uri).create_scalar_index("desc", "INVERTED", with_position=True)
    assert _same(uri, lambda m: '"noise cancelling"', columns=["id"]).num_rows


def test_deleted_rows_cannot_be_included(built):
    with pytest.raises(InvalidInputError, match="Cannot include deleted rows in an FTS search"):
        lance_format.dataset(str(built)).to_table(full_text_query="wireless", with_row_id=True,
                                                  include_deleted_rows=True)


def test_a_column_with_two_indices_searches_the_first(tmp_path):
    uri = tmp_path / "two"
    ds = lance.write_dataset(_table(30), uri)
    ds.create_scalar_index("desc", "INVERTED", name="z_positions", with_position=True)
    ds.create_scalar_index("desc", "INVERTED", name="a_plain", with_position=False)
    assert _same(uri, lambda m: '"noise cancelling"', columns=["id"]).num_rows  # z_positions answers


def test_equal_scores_in_row_id_order_with_stable_row_ids(tmp_path):
    """pylance orders a compound query's (and a several-column string's) equal scores by row
    id; with stable row ids an updated row's id no longer follows its address."""
    uri = tmp_path / "stable"
    ds = lance.write_dataset(_table(60), uri, max_rows_per_file=25, enable_stable_row_ids=True)
    ds.create_scalar_index("desc", "INVERTED", with_position=True)
    ds.create_scalar_index("title", "INVERTED")
    ds.update({"note": "'updated'"}, where="id < 8")  # rows move to a new fragment, keeping their ids
    ds.delete("id = 20")
    for name in ["boolean", "boost", "multi_match", "and_or"]:
        _same(uri, QUERIES[name], columns=["id"])
    got = _same(uri, QUERIES["string_all_columns"], columns=["id"])
    theirs = lance.dataset(str(uri)).to_table(full_text_query="wireless steel", columns=["id"])
    assert got.column("id").to_pylist() == theirs.column("id").to_pylist()
    assert 20 not in got.column("id").to_pylist()


def test_many_equal_scores_at_the_limit_pick_pylances_rows(tmp_path):
    """Hundreds of rows tie; a small limit keeps the same rows as pylance's WAND heap (the
    earliest documents: a later tie never displaces a kept one). Their order among themselves is
    the heap's and is not compared yet."""
    uri = tmp_path / "ties"
    texts = ["apple banana pie" if i % 3 == 0 else ("apple cherry" if i % 7 else None) for i in range(600)]
    ds = lance.write_dataset(pa.table({"id": np.arange(600), "text": texts}), uri, max_rows_per_file=250)
    ds.create_scalar_index("text", "INVERTED", with_position=True)
    for (kind, text), limit in itertools.product([("MatchQuery", "apple"), ("MatchQuery", "banana"),
                                                  ("MatchQuery", "apple cherry"), ("PhraseQuery", "banana pie")],
                                                 [1, 3, 10]):
        theirs = lance.dataset(str(uri)).to_table(full_text_query=getattr(LQ, kind)(text, "text"), limit=limit,
                                                  columns=["id", "_score"])
        ours = lance_format.dataset(str(uri)).to_table(full_text_query=getattr(OQ, kind)(text, "text"), limit=limit,
                                                       columns=["id", "_score"])
        assert ours.num_rows == theirs.num_rows == limit
        assert sorted(ours.column("id").to_pylist()) == sorted(theirs.column("id").to_pylist()), (kind, text)
        np.testing.assert_allclose(ours.column("_score").to_numpy(), theirs.column("_score").to_numpy(), atol=1e-6)
