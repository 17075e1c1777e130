"""Building INVERTED indices: the files are pylance 14.0.2's (byte for byte but the FST's node
layout), pylance answers full-text queries on our index exactly as on its own, and so does
this engine; the index follows appends, compaction and distributed builds."""

from __future__ import annotations

import os
import uuid
import warnings

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.dataset.lance_operations import Index, LanceOperation
from lance_format.errors import ArgumentTypeError, InvalidInputError, UnsupportedFeatureError
from lance_format.index.scalar.fst import fst_items

pytest.importorskip("Stemmer")

PRODUCTS = ("wireless noise-cancelling headphones with 30h battery, USB-C charging & café-grade sound; "
            "the stainless steel bottle keeps drinks cold for 24 hours! visit https://shop.example.com/p?id=7 "
            "or e-mail support@example.com. Über-comfortable running shoes, naïve résumé jumping jumped "
            "ergonomic office chair lumbar support mesh back adjustable armrests 数据 格式 runs ran").split()
GERMAN_FRENCH = ("Die schönen Häuser stehen an der Straße, les maisons sont belles et très grandes; "
                 "Qualität und Größe überzeugen, la qualité du café est excellente à Paris — "
                 "Kühlschrank Geschirrspüler élégant fenêtre château").split()


def _texts(words: tuple[str, ...] | list[str], n: int, seed: int) -> list[str | None]:
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, len(words) + 1)  # skewed: frequent words fill 128-doc blocks
    weights /= weights.sum()
    out: list[str | None] = []
    for i in range(n):
        if i % 47 == 0:
            out.append(None)
        elif i % 59 == 0:
            out.append("")
        elif i % 71 == 0:
            out.append("the and of")  # only stop words: no document
        else:
            out.append(" ".join(rng.choice(words, size=int(rng.integers(1, 20)), p=weights)))
    out[5] = " ".join(rng.choice(words, size=3000))  # a very long document
    return out


def _pair(tmp_path, data: pa.Table, max_rows_per_file: int = 400, **params):
    """The same data twice: indexed by this engine (ours) and by pylance (theirs)."""
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    lance.write_dataset(data, ours, max_rows_per_file=max_rows_per_file)
    lance.write_dataset(data, theirs, max_rows_per_file=max_rows_per_file)
    lance_format.dataset(str(ours)).create_scalar_index("text", "INVERTED", **params)
    lance.dataset(theirs).create_scalar_index("text", "INVERTED", **params)
    return ours, theirs


def _agree(got: pa.Table, want: pa.Table, query: str) -> None:
    """Same rows with the same scores (rows tied at the limit's cut may differ: pylance's order
    among equal scores is its search heap's)."""
    assert got.num_rows == want.num_rows, query
    a, b = got.column("_score").to_numpy(), want.column("_score").to_numpy()
    # float32 sums of many terms (n-gram queries) may differ in the last bit: relative 1e-6
    np.testing.assert_allclose(np.sort(a), np.sort(b), rtol=1e-6, atol=1e-6)
    mine = dict(zip(got.column("id").to_pylist(), a.tolist()))
    other = dict(zip(want.column("id").to_pylist(), b.tolist()))
    cut = float(a.min()) * (1 + 1e-6) + 1e-6 if len(a) else 0.0
    assert {i for i, v in mine.items() if v > cut} == {i for i, v in other.items() if v > cut}, query
    for i in set(mine) & set(other):
        assert abs(mine[i] - other[i]) <= 1e-6 * max(1.0, abs(other[i])), query


def _check_queries(ours, theirs, queries, limit=15):
    for query in queries:
        want = lance.dataset(theirs).to_table(full_text_query=query, limit=limit)
        _agree(lance.dataset(ours).to_table(full_text_query=query, limit=limit), want, query)
        _agree(lance_format.dataset(str(ours)).to_table(full_text_query=query, limit=limit), want, query)


def _files(uri):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        (index,) = lance.dataset(uri).list_indices()
    directory = f"{uri}/_indices/{index['uuid']}"
    return {f: lance.file.LanceFileReader(f"{directory}/{f}").read_all().to_table() for f in os.listdir(directory)}


@pytest.fixture(scope="module")
def products():
    texts = _texts(PRODUCTS, 1200, 3)
    return pa.table({"id": np.arange(len(texts)), "text": pa.array(texts, pa.string())})


def test_files_are_pylances(tmp_path, products):
    ours, theirs = _pair(tmp_path, products, max_rows_per_file=10_000, with_position=True)
    mine, other = _files(ours), _files(theirs)
    assert sorted(mine) == sorted(other) == ["metadata.lance", "part_0_docs.lance", "part_0_invert.lance",
                                             "part_0_tokens.lance"]
    for name in ("part_0_docs.lance", "part_0_invert.lance", "metadata.lance"):
        assert mine[name].schema.metadata == other[name].schema.metadata, name
        assert mine[name].equals(other[name]), name  # postings, impacts, positions, scores: same bytes
    assert mine["part_0_invert.lance"].column("_length").to_numpy().max() > 128  # full bit-packed blocks
    tokens, want = mine["part_0_tokens.lance"], other["part_0_tokens.lance"]
    assert tokens.drop_columns(["_token_fst_bytes"]).equals(want.drop_columns(["_token_fst_bytes"]))
    assert fst_items(tokens.column(0)[0].as_py()) == fst_items(want.column(0)[0].as_py())


QUERIES = ["wireless", "headphones battery", "running shoes", "café résumé", "the bottle", "数据",
           "support@example.com", "nothingmatches", "USB-C 24 hours"]


@pytest.mark.parametrize("params", [
    {},
    {"with_position": True},
    {"stem": False, "remove_stop_words": False, "ascii_folding": False, "lower_case": False},
    {"max_token_length": 6},
    {"base_tokenizer": "whitespace"},
    {"custom_stop_words": ["the", "with", "steel"], "stem": False},
    {"base_tokenizer": "ngram", "min_ngram_length": 2, "max_ngram_length": 4, "with_position": True},
    {"base_tokenizer": "ngram", "prefix_only": True, "max_ngram_length": 5},
    {"base_tokenizer": "icu", "with_position": True},
], ids=["default", "positions", "plain", "short-tokens", "whitespace", "custom-stop", "ngram", "ngram-prefix", "icu"])
def test_same_results_as_pylance(tmp_path, products, params):
    if params.get("base_tokenizer") == "icu":
        pytest.importorskip("icu4py")
    ours, theirs = _pair(tmp_path, products, **params)
    _check_queries(ours, theirs, QUERIES)


def test_long_posting_lists_are_pylances(tmp_path):
    """A token in 4,500 documents: 36 blocks, so two groups of impacts; long position streams."""
    rng = np.random.default_rng(4)
    words = np.array("apple apple apple pie crust banana split cherry the".split(), dtype=object)
    texts = [" ".join(rng.choice(words, size=int(rng.integers(1, 30)))) for _ in range(4500)]
    data = pa.table({"id": np.arange(len(texts)), "text": pa.array(texts, pa.string())})
    ours, theirs = _pair(tmp_path, data, max_rows_per_file=10_000, with_position=True)
    mine, other = _files(ours), _files(theirs)
    assert mine["part_0_invert.lance"].equals(other["part_0_invert.lance"])
    assert max(len(i) for i in mine["part_0_invert.lance"].column("_impacts").to_pylist()) > 33


def test_ngram_files_are_pylances(tmp_path, products):
    ours, theirs = _pair(tmp_path, products.slice(0, 300), max_rows_per_file=10_000, base_tokenizer="ngram",
                         min_ngram_length=2, max_ngram_length=4, with_position=True)
    mine, other = _files(ours), _files(theirs)
    for name in ("part_0_docs.lance", "part_0_invert.lance", "metadata.lance"):
        assert mine[name].equals(other[name]), name


def test_german_french_corpus(tmp_path):
    texts = _texts(GERMAN_FRENCH, 600, 11)
    data = pa.table({"id": np.arange(len(texts)), "text": pa.array(texts, pa.large_string())})
    ours, theirs = _pair(tmp_path, data, language="German", remove_stop_words=False)
    _check_queries(ours, theirs, ["Häuser", "schön Straße", "qualité café", "Größe Kühlschrank", "chateau"])


@pytest.mark.parametrize("language", ["French", "German", "English"])
def test_stop_words_of_the_language_as_pylance(tmp_path, language):
    """pylance's lists: French keeps "ne"/"pas", English keeps "not"/"could" and drops "can"."""
    words = {"French": "je ne sais pas si nous étions déjà là mais elle n'a rien dit sans raison le la les",
             "German": "ich habe nicht gewusst dass keine Kinder ohne ihre Eltern kommen würden die der",
             "English": "we could not say that it can just go now but you are right no nor would the"}[language]
    texts = _texts(words.split(), 500, 5)
    data = pa.table({"id": np.arange(len(texts)), "text": pa.array(texts, pa.string())})
    ours, theirs = _pair(tmp_path, data, language=language)
    _check_queries(ours, theirs, {"French": ["ne pas", "sans raison", "les enfants", "étions"],
                                  "German": ["nicht", "keine Kinder", "ohne", "die Eltern"],
                                  "English": ["not", "could say", "can just", "right now"]}[language])


def test_raw_tokenizer_and_list_column(tmp_path):
    tags = ["Red Shoe", "blue shoe", "", "Red Shoe", None, "green hat"] * 40
    data = pa.table({"id": np.arange(len(tags)), "text": pa.array(tags, pa.string())})
    ours, theirs = _pair(tmp_path / "raw", data, base_tokenizer="raw")
    _check_queries(ours, theirs, ["red shoe", "green hat", "shoe"])
    lists = [["Wireless mouse", "USB receiver"], [], None, ["the", "mouse pad"], ["keyboard", None]] * 30
    data = pa.table({"id": np.arange(len(lists)), "text": pa.array(lists, pa.list_(pa.string()))})
    ours, theirs = _pair(tmp_path / "lists", data, with_position=True)
    assert _files(ours)["part_0_invert.lance"].equals(_files(theirs)["part_0_invert.lance"])
    _check_queries(ours, theirs, ["mouse", "usb keyboard", "pad"])


def test_describe_list_and_statistics_agree(tmp_path, products):
    ours, theirs = _pair(tmp_path, products, name="fts", with_position=True)
    warnings.simplefilter("ignore", DeprecationWarning)
    mine, other = lance.dataset(ours), lance.dataset(theirs)
    (a,), (b,) = mine.describe_indices(), other.describe_indices()
    assert (a.name, a.type_url, a.num_rows_indexed, a.fields, len(a.segments)) == \
        (b.name, b.type_url, b.num_rows_indexed, b.fields, len(b.segments))
    assert [{k: v for k, v in i.items() if k != "uuid"} for i in mine.list_indices()] == \
        [{k: v for k, v in i.items() if k != "uuid"} for i in other.list_indices()]
    stats, want = mine.stats.index_stats("fts"), other.stats.index_stats("fts")
    stats.pop("updated_at_timestamp_ms")
    want.pop("updated_at_timestamp_ms")
    assert stats == want
    ours_engine = lance_format.dataset(str(ours)).index_statistics("fts")
    ours_engine.pop("updated_at_timestamp_ms")
    assert ours_engine == want
    assert lance_format.dataset(str(ours)).list_indices()[0]["type"] == "Inverted"


def test_appends_then_optimize(tmp_path, products):
    ours, theirs = _pair(tmp_path, products.slice(0, 800))
    more = products.slice(800)
    for uri in (ours, theirs):
        lance.write_dataset(more, uri, mode="append")
    _check_queries(ours, theirs, ["wireless", "running shoes"])  # unindexed rows searched flat
    lance_format.dataset(str(ours)).optimize.optimize_indices()
    lance.dataset(theirs).optimize.optimize_indices()
    (index,) = lance_format.dataset(str(ours)).describe_indices()
    assert index.num_rows_indexed == products.num_rows and len(index.segments) == 1
    _check_queries(ours, theirs, QUERIES)


def test_compaction_keeps_the_index_valid(tmp_path, products):
    ours, theirs = _pair(tmp_path, products, max_rows_per_file=150)
    for uri in (ours, theirs):
        lance.dataset(uri).delete("id % 5 = 0")
    lance_format.dataset(str(ours)).optimize.compact_files(target_rows_per_fragment=600)
    lance.dataset(theirs).optimize.compact_files(target_rows_per_fragment=600)
    ds = lance_format.dataset(str(ours))
    assert len(ds.get_fragments()) == len(lance.dataset(theirs).get_fragments()) < 8  # rewritten
    (index,) = ds.describe_indices()
    assert index.num_rows_indexed == ds.count_rows()
    _check_queries(ours, theirs, ["wireless", "headphones battery", "chair"])


def test_distributed_build_one_commit(tmp_path, products):
    ours, theirs = _pair(tmp_path, products, max_rows_per_file=300)
    ds = lance_format.dataset(str(ours))
    fragments = [f.fragment_id for f in ds.get_fragments()]
    segments = [ds.create_index_uncommitted("text", "INVERTED", fragment_ids=[f], index_uuid=str(uuid.uuid4()))
                for f in fragments]
    merged = ds.merge_existing_index_segments(segments)
    ds.commit_existing_index_segments("text_idx", "text", [merged])
    (index,) = lance_format.dataset(str(ours)).describe_indices()
    assert len(index.segments) == 1 and index.num_rows_indexed == products.num_rows
    # the workers' partitions are copied, not rebuilt: one partition per fragment
    assert sorted(f for f in _files(ours) if f.endswith("docs.lance")) == [
        f"part_{i}_docs.lance" for i in range(len(fragments))]
    _check_queries(ours, theirs, ["wireless", "running shoes"])


def test_empty_and_null_documents_only(tmp_path):
    data = pa.table({"id": np.arange(6), "text": pa.array([None, "", "the", None, "a an", ""], pa.string())})
    ours, theirs = _pair(tmp_path, data)
    _check_queries(ours, theirs, ["the", "anything"])


def test_errors(tmp_path):
    data = pa.table({"id": np.arange(4), "n": [1.5, 2.0, None, 3.0], "text": ["a b", "c", None, "d"]})
    lance.write_dataset(data, tmp_path / "t")
    ds = lance_format.dataset(str(tmp_path / "t"))
    with pytest.raises(ArgumentTypeError, match="INVERTED index column n must be string"):
        ds.create_scalar_index("n", "INVERTED")
    with pytest.raises(ArgumentTypeError):
        ds.create_scalar_index("id", "FTS")
    with pytest.raises(InvalidInputError, match="max_token_length"):
        ds.create_scalar_index("text", "INVERTED", max_token_length=0)
    with pytest.raises(InvalidInputError, match="unknown parameters"):
        ds.create_scalar_index("text", "INVERTED", stemmer=True)
    with pytest.raises(UnsupportedFeatureError, match="block_size"):
        ds.create_scalar_index("text", "INVERTED", block_size=256)
    with pytest.raises(UnsupportedFeatureError, match="stop words of language 'Tamil'"):
        ds.create_scalar_index("text", "INVERTED", language="Tamil")
    with pytest.raises(InvalidInputError, match="Klingon"):
        ds.create_scalar_index("text", "INVERTED", language="Klingon")
    with pytest.raises(UnsupportedFeatureError, match="base_tokenizer 'jieba/default'"):
        ds.create_scalar_index("text", "INVERTED", base_tokenizer="jieba/default")
    from lance.query import DocumentGranularity

    with pytest.raises(UnsupportedFeatureError, match="document_granularity"):
        ds.create_scalar_index("text", "INVERTED", document_granularity=DocumentGranularity.LIST_ELEMENT)
    assert not ds.has_index
    ds.create_index("text", "INVERTED", language="French", custom_stop_words=["le"])
    assert lance.dataset(tmp_path / "t").to_table(full_text_query="c").column("id").to_pylist() == [1]


def test_pylance_style_staged_build(tmp_path, products):
    """create_scalar_index(fragment_ids=, index_uuid=) stages partitions without committing;
    merge_index_metadata makes the segment, committed by the caller (pylance's flow)."""
    ours, theirs = _pair(tmp_path, products, max_rows_per_file=300)
    ds = lance_format.dataset(str(ours))
    ds.drop_index("text_idx")
    ds = lance_format.dataset(str(ours))
    version, segment = ds.version, str(uuid.uuid4())
    for fragment in ds.get_fragments():
        ds.create_scalar_index("text", "INVERTED", fragment_ids=[fragment.fragment_id], index_uuid=segment)
    assert lance_format.dataset(str(ours)).version == version  # nothing committed yet
    ds.merge_index_metadata(segment, "INVERTED")
    files = sorted(os.listdir(ours / "_indices" / segment))
    assert "metadata.lance" in files and "part_3_docs.lance" in files
    meta = Index(uuid=segment, name="text_idx", fields=[1], dataset_version=version, fragment_ids={0, 1, 2, 3},
                 index_version=2, index_details=("/lance.table.InvertedIndexDetails", b""))
    lance_format.LanceDataset.commit(str(ours), LanceOperation.CreateIndex([meta], []), read_version=version)
    _check_queries(ours, theirs, ["wireless", "running shoes", "chair"])
    with pytest.raises(InvalidInputError, match="no staged"):
        ds.merge_index_metadata(str(uuid.uuid4()), "INVERTED")
    with pytest.raises(UnsupportedFeatureError, match="merge_index_metadata of BTREE"):
        ds.merge_index_metadata(segment, "BTREE")


def test_fst_round_trips():
    from lance_format.index.scalar.fst_build import build_fst

    rng = np.random.default_rng(9)
    alphabet = list("abcdéß数 -")
    words = {"".join(rng.choice(alphabet, size=int(rng.integers(1, 9)))).encode() for _ in range(3000)}
    words |= {bytes([b]) for b in range(1, 256)}  # a node with more than 32 transitions
    words.add(b"")  # the raw tokenizer's empty token: a final root
    keys = sorted(words)
    values = rng.permutation(len(keys)).tolist()
    assert fst_items(build_fst(list(zip(keys, values)))) == sorted(zip(keys, values))
    assert fst_items(build_fst([])) == []
    with pytest.raises(InvalidInputError, match="strictly increasing"):
        build_fst([(b"b", 0), (b"a", 1)])


def test_bit_packing_round_trips():
    from lance_format.index.scalar.bitpack import pack4x, varints
    from lance_format.index.scalar.inverted import _unpack4x_many, _varints

    rng = np.random.default_rng(2)
    for bits in (0, 1, 7, 13, 32):
        values = rng.integers(0, 2 ** bits, size=(3, 128), dtype=np.uint64).astype(np.uint32)
        words = pack4x(values, bits).view("<u4").reshape(3, 4 * bits)
        assert (_unpack4x_many(words, bits) == values).all()
    numbers = np.array([0, 1, 127, 128, 16383, 16384, 2 ** 32 - 1], np.uint64)
    data, lengths = varints(numbers)
    assert lengths.tolist() == [1, 1, 1, 2, 2, 3, 5]
    assert _varints(data.tobytes(), len(numbers), 0)[0] == numbers.tolist()


def test_stable_row_ids(tmp_path, products):
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for uri in (ours, theirs):
        lance.write_dataset(products, uri, max_rows_per_file=400, enable_stable_row_ids=True)
        lance.dataset(uri).delete("id < 100")
    lance_format.dataset(str(ours)).create_scalar_index("text", "INVERTED")
    lance.dataset(theirs).create_scalar_index("text", "INVERTED")
    assert _files(ours)["part_0_docs.lance"].equals(_files(theirs)["part_0_docs.lance"])
    _check_queries(ours, theirs, ["wireless", "headphones battery"])


@pytest.mark.parametrize("builder", ["ours", "pylance"])
def test_nested_struct_field(tmp_path, builder):
    """An INVERTED index on ``data.text`` (a struct's field): listed by its dotted path, searched
    with pre- and postfilters on a sibling field, unindexed appends searched flat."""
    texts = _texts(PRODUCTS, 300, 9)
    data = pa.table({"id": np.arange(300), "data": pa.StructArray.from_arrays(
        [pa.array(texts, pa.string()), pa.array([f"label_{i % 7}" for i in range(300)])], names=["text", "label"])})
    uri = str(tmp_path / "n.lance")
    lance.write_dataset(data, uri)
    (lance_format.dataset(uri) if builder == "ours" else lance.dataset(uri)).create_scalar_index(
        "data.text", "INVERTED", with_position=True)
    lance.dataset(uri).insert(data.slice(0, 50))
    assert [d.field_names for d in lance_format.dataset(uri).describe_indices()] == [["data.text"]]
    for query, options in (("headphones", {}), ("running shoes", {"filter": "data.label = 'label_3'"}),
                           ("bottle", {"filter": "data.label = 'label_2'", "prefilter": True}),
                           ('"noise-cancelling headphones"', {})):
        want = lance.dataset(uri).to_table(full_text_query=query, columns=["id", "_score"], **options)
        got = lance_format.dataset(uri).to_table(full_text_query=query, columns=["id", "_score"], **options)
        assert want.num_rows > 0, query
        _agree(got, want, query)
