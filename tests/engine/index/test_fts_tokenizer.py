"""The default analyzer's tokens equal the ones pylance 14.0.2 stores in its INVERTED index."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.dataset.scan.fts_sources import column_source
from lance_format.index.scalar.fts_tokenizer import TokenizerParams, query_tokens, tokenize

TEXTS = [
    "Größenverhältnisse der Straßenbahn in München — Übermäßig schön!",
    "L'été dernier, nous sommes allés à Paris; c'était magnifique. Œuvre, cœur, naïveté.",
    "Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο. ΟΔΥΣΣΕΥΣ ΣΟΦΟΣ",
    "Быстрая коричневая лиса прыгает через ленивую собаку, 2024 год.",
    "हिन्दी भाषा में परीक्षण किया जा रहा है।",
    "العربية لغة جميلة ١٢٣",
    "日本語のテキストも試します。東京タワー",
    "emoji 😀 test ﬁnancial ½ ² ℃ Ǆ ǅ İstanbul ıi",
    "snake_case camelCase kebab-case 3.14159 1,000,000 v2.0-beta user@mail.org https://a.example.com/x?y=1",
    "Ølbryggeri på Ærø, Łódź, Đakovo, þorn, ðe",
    "x" * 39 + " " + "y" * 40 + " " + "é" * 20 + " " + "é" * 19,
    "running runner runs ran easily fairly generously happiness relational conditional",
    # marks Rust counts as alphanumeric and Python's categories do not (Thai vowels, Hebrew points,
    # Devanagari/Tamil/Bengali signs, circled letters)
    # folded by Lucene's table, not by Unicode decomposition (Maltese, Sami, ligatures, fullwidth)
    "Ħaġar ħobż ŋuolla Ŧ ǽsc ŀl ﬀ ｆｕｌｌｗｉｄｔｈ Ｗｉｄｅ x⁵ H₂O ʰat ª º ⑴ ⒜ ① ㉑ ℡ ǅemal",
    "ยินดีต้อนรับสู่ประเทศไทย בְּרֵאשִׁית בָּרָא नमस्ते दुनिया வணக்கம் উপকরণ Ⓐⓑⓒ test ⓧyz",
    None,
    "",
]


def _pylance_partition(tmp_path, texts, **params):
    uri = str(tmp_path / "m")
    lance.write_dataset(pa.table({"text": pa.array(texts, pa.string())}), uri).create_scalar_index(
        "text", "INVERTED", **params)
    ours = lance_format.dataset(uri)
    return column_source(ours, "text").indices[0].partitions[0]


def test_multilingual_tokens_equal_pylance(tmp_path):
    part = _pylance_partition(tmp_path, TEXTS)
    ours = tokenize(pa.array(TEXTS, pa.string()), TokenizerParams()).to_pylist()
    assert {t for doc in ours for t in doc} == set(part.tokens)
    assert [len(d) for d in ours if d] == part.num_tokens.tolist()


def test_token_counts_per_document(tmp_path):
    rng = np.random.default_rng(3)
    words = " ".join(TEXTS[:12]).split()
    texts = [" ".join(rng.choice(words, size=int(rng.integers(0, 30)))) for _ in range(400)]
    part = _pylance_partition(tmp_path, texts)
    ours = tokenize(pa.array(texts, pa.string()), TokenizerParams()).to_pylist()
    assert [len(d) for d in ours if d] == part.num_tokens.tolist()
    assert {t for doc in ours for t in doc} == set(part.tokens)


def test_query_tokens():
    assert query_tokens("The Running FOXES, naïve!", TokenizerParams()) == ["run", "fox", "naiv"]
    assert query_tokens("", TokenizerParams()) == []


# ICU segments CJK and Thai with dictionaries; pylance (ICU4X) and icu4py (ICU4C) agree on these
ICU_TEXTS = [t for t in TEXTS if t is None or "東京" not in t] + [
    "我们在北京大学学习计算机科学。数据格式很重要",
    "สวัสดีครับ ยินดีต้อนรับสู่ประเทศไทย",
    "안녕하세요 세계, 그리고 데이터베이스",
    "the cat and le chat et der Hund und ikke can not 的 ある 그리고 και",
    "emoji 😀😀 between words😀here, e-mail user@mail.org v2.0-beta 3.14 1,000",
]


@pytest.mark.parametrize("params", [{}, {"language": "French", "with_position": True},
                                    {"stem": False, "lower_case": False, "ascii_folding": False},
                                    {"base_tokenizer": "icu/split", "with_position": True}])
def test_icu_tokens_equal_pylance(tmp_path, params):
    pytest.importorskip("icu4py")
    params = {"base_tokenizer": "icu", **params}
    texts = ICU_TEXTS + ["hello_world foo_bar__baz-alpha.beta snake_case 3.14 v2.0-beta"]
    part = _pylance_partition(tmp_path, texts, **params)
    ours = tokenize(pa.array(texts, pa.string()), TokenizerParams(**params)).to_pylist()
    assert {t for doc in ours for t in doc} == set(part.tokens)
    assert [len(d) for d in ours if d] == part.num_tokens.tolist()


def test_unsupported_settings_are_refused():
    with pytest.raises(lance_format.errors.UnsupportedFeatureError, match="base_tokenizer"):
        query_tokens("a", TokenizerParams(base_tokenizer="jieba/default"))
    with pytest.raises(lance_format.errors.UnsupportedFeatureError, match="Tamil"):
        query_tokens("a", TokenizerParams(language="Tamil"))
    assert query_tokens("a", TokenizerParams(language="Tamil", remove_stop_words=False)) == ["a"]
    with pytest.raises(lance_format.errors.InvalidInputError, match="Klingon"):
        query_tokens("a", TokenizerParams(language="Klingon"))


# per language: sentences with its common function words, negations and inflected words
LANGUAGE_TEXTS = {
    "English": ["I could not say that we will just go now, but you're right: it can't be done.",
                "No, nor would they ought to; the cats were running across their gardens.",
                "She's here and there; should've known that'll happen."],
    "French": ["Je ne sais pas si nous étions déjà là, mais elle n'a rien dit sans raison.",
               "Les enfants jouaient dans le jardin avec leurs chiens pendant que nous mangions."],
    "German": ["Ich habe nicht gewusst, dass keine Kinder ohne ihre Eltern kommen würden.",
               "Die Häuser der Stadt waren größer als wir dachten, aber nichts war machen."],
    "Spanish": ["No sé si ellos estaban aquí, pero nada de eso fue sin razón, ni uno solo.",
                "Los niños jugaban en el jardín con sus perros mientras comíamos."],
    "Italian": ["Non so se loro erano qui, ma sei sicuro che gli amici siano arrivati?",
                "I bambini giocavano nel giardino con i loro cani."],
    "Portuguese": ["Não sei se eles estavam aqui, mas nem tudo foi sem motivo.",
                   "As crianças brincavam no jardim com os seus cães."],
    "Dutch": ["Ik weet niet of zij hier waren, maar niets gebeurde zonder reden, geen enkele.",
              "De kinderen speelden in de tuin met hun honden."],
    "Danish": ["Jeg ved ikke om de var her, men børnene legede i haven med deres hunde."],
    "Norwegian": ["Jeg vet ikke om de var her, men ingen kom uten grunn; barna lekte i hagen."],
    "Swedish": ["Jag vet inte om de var här, men ingen kom utan anledning; barnen lekte i trädgården."],
    "Finnish": ["En tiedä olivatko he täällä, mutta lapset leikkivät puutarhassa koiriensa kanssa."],
    "Hungarian": ["Nem tudom, hogy itt voltak-e, de a gyerekek a kertben játszottak a kutyáikkal."],
    "Russian": ["Я не знаю, были ли они здесь, но дети играли в саду со своими собаками. Нет, никогда."],
    "Greek": ["Δεν ξέρω αν ήταν εδώ, αλλά τα παιδιά έπαιζαν στον κήπο με τα σκυλιά τους και το γατάκι."],
    "Turkish": ["Onların burada olup olmadığını bilmiyorum, ama çocuklar bahçede ve evde oynuyordu."],
    "Romanian": ["Nu știu dacă au fost aici, dar copiii se jucau în grădină cu câinii lor și acesta este."],
    "Arabic": ["لا أعرف إذا كانوا هنا، لكن الأطفال كانوا يلعبون في الحديقة مع كلابهم."],
}


@pytest.mark.parametrize("language", sorted(LANGUAGE_TEXTS))
def test_each_languages_stop_words_and_stems_equal_pylance(tmp_path, language):
    """pylance's own lists (not Snowball's: English keeps "not", "could"; drops "can", "just")."""
    texts = LANGUAGE_TEXTS[language]
    part = _pylance_partition(tmp_path, texts, language=language, base_tokenizer="whitespace")
    ours = tokenize(pa.array(texts, pa.string()),
                    TokenizerParams(language=language, base_tokenizer="whitespace")).to_pylist()
    assert {t for doc in ours for t in doc} == set(part.tokens)
    assert [len(d) for d in ours] == part.num_tokens.tolist()


def test_query_split_in_python_cuts_words_as_the_column_split():
    """A query string is split in Python (no RE2 compile per query): the same words as the
    regular expression that splits column values, on Latin, combining marks, Devanagari, CJK,
    Arabic and punctuation."""
    import random

    import pyarrow.compute as pc

    from lance_format.index.scalar import fts_tokenizer
    rng = random.Random(1)
    pool = [chr(c) for c in [*range(32, 0x250), *range(0x300, 0x370), *range(0x900, 0x980), *range(0x4E00, 0x4E20),
                             *range(0x600, 0x660), 0x2014, 0x2026, 0x00A0, 0x3000]]
    for _ in range(200):
        text = "".join(rng.choice(pool) for _ in range(rng.randint(0, 40)))
        pieces = pc.split_pattern_regex(pa.array([text], pa.large_string()), fts_tokenizer._split_pattern())[0].as_py()
        assert fts_tokenizer._split_words(text) == [p for p in pieces if p], text
