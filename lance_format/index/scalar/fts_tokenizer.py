"""pylance's text analyzer for INVERTED indices and full-text queries ("simple" base tokenizer).

The chain, in pylance's order: split on characters that are not alphanumeric, drop tokens of
``max_token_length`` bytes or more, lower-case, Snowball-stem, drop stop words (Snowball's
lists), fold to ASCII. Splitting and lower-casing run in pyarrow over whole columns; stemming,
stop words and folding run once per distinct token.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import InvalidInputError, UnsupportedFeatureError

# Snowball's English stop-word list (the one pylance's default analyzer removes)
ENGLISH_STOP_WORDS = frozenset("""
i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she
her hers herself it its itself they them their theirs themselves what which who whom this that
these those am is are was were be been being have has had having do does did doing would should
could ought i'm you're he's she's it's we're they're i've you've we've they've i'd you'd he'd
she'd we'd they'd i'll you'll he'll she'll we'll they'll isn't aren't wasn't weren't hasn't
haven't hadn't doesn't don't didn't won't wouldn't shan't shouldn't can't cannot couldn't
mustn't let's that's who's what's here's there's when's where's why's how's a an the and but if
or because as until while of at by for with about against between into through during before
after above below to from up down in out on off over under again further then once here there
when where why how all any both each few more most other some such no nor not only own same so
than too very""".split())

# letters NFKD does not decompose that Lucene's ASCII folding maps
_FOLD_EXTRA = str.maketrans({"ß": "ss", "æ": "ae", "Æ": "AE", "ø": "o", "Ø": "O", "œ": "oe", "Œ": "OE",
                             "đ": "d", "Đ": "D", "ł": "l", "Ł": "L", "þ": "th", "Þ": "TH", "ð": "d",
                             "Ð": "D", "ı": "i"})


def _alphabetic_marks() -> str:
    """An RE2 class body of the combining marks Unicode counts as alphabetic (vowel signs and
    the like: spacing or non-spacing marks of combining class 0; viramas, nuktas and accents
    have a non-zero class and split words, as in Rust's ``char::is_alphanumeric``)."""
    ranges: list[tuple[int, int]] = []
    for code in range(0x300, 0x110000):
        char = chr(code)
        if unicodedata.category(char) in ("Mn", "Mc") and unicodedata.combining(char) == 0:
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1] = (ranges[-1][0], code)
            else:
                ranges.append((code, code))
    return "".join(f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in ranges)


_SPLIT = r"[^\p{L}\p{N}" + _alphabetic_marks() + "]+"  # Rust's char::is_alphanumeric, as an RE2 class
# Latin letters, ligatures and super/subscript digits: what ASCII folding touches (other scripts
# keep their accents, as Lucene's folding table does)
_LATIN = ((0x00B2, 0x00B3), (0x00B9, 0x00B9), (0x00BC, 0x00BE), (0x00C0, 0x024F), (0x1E00, 0x1EFF),
          (0x2070, 0x209F), (0x2150, 0x215F), (0xFB00, 0xFB06))


@dataclass(frozen=True)
class TokenizerParams:
    """The index parameters that decide tokens (pylance's ``params`` JSON, its defaults)."""

    base_tokenizer: str = "simple"
    language: str = "English"
    max_token_length: int | None = 40
    lower_case: bool = True
    stem: bool = True
    remove_stop_words: bool = True
    ascii_folding: bool = True
    with_position: bool = False

    @staticmethod
    def from_json(text: str) -> TokenizerParams:
        raw: Mapping[str, Any] = json.loads(text) if text else {}
        defaults = TokenizerParams()
        return TokenizerParams(**{k: raw.get(k, getattr(defaults, k)) for k in (
            "base_tokenizer", "language", "max_token_length", "lower_case", "stem", "remove_stop_words",
            "ascii_folding", "with_position")})

    def check(self) -> None:
        if self.base_tokenizer != "simple":
            raise UnsupportedFeatureError(f"base_tokenizer {self.base_tokenizer!r} is not supported yet "
                                          "(only 'simple')")
        if (self.stem or self.remove_stop_words) and self.language != "English":
            raise UnsupportedFeatureError(f"language {self.language!r} is not supported yet (only English)")


@lru_cache(maxsize=8)
def _stemmer(language: str) -> Any:
    try:
        import Stemmer  # PyStemmer: the Snowball stemmers, as pylance's tantivy uses
    except ImportError as exc:  # the optional extra `fts`
        raise UnsupportedFeatureError("full-text search with stemming needs the PyStemmer package: "
                                      "pip install 'lance-assets[fts]'") from exc
    return Stemmer.Stemmer(language.lower())


def _fold_char(char: str) -> str:
    code = ord(char)
    if not any(a <= code <= b for a, b in _LATIN):
        return char
    decomposed = unicodedata.normalize("NFKD", char.translate(_FOLD_EXTRA))
    # vulgar fractions fold to their digits ("½" -> "12", as pylance's tokens show)
    return "".join(c for c in decomposed if not unicodedata.combining(c) and c != "\u2044")


def _fold(token: str) -> str:
    if token.isascii():
        return token
    return "".join(_fold_char(c) for c in token)


def _normalize_distinct(tokens: list[str], params: TokenizerParams) -> list[str | None]:
    """The final form of each distinct raw token (None: dropped)."""
    out: list[str | None] = list(tokens)
    if params.stem:
        out = list(_stemmer(params.language).stemWords(tokens))
    if params.remove_stop_words:
        out = [None if t in ENGLISH_STOP_WORDS else t for t in out]
    if params.ascii_folding:
        out = [None if t is None else _fold(t) for t in out]
    return out


def tokenize(texts: pa.Array | pa.ChunkedArray, params: TokenizerParams) -> pa.ListArray:
    """Each document's tokens (a null or empty document has none), as a list<string> array."""
    return tokenize_with_positions(texts, params)[0]


def tokenize_with_positions(texts: pa.Array | pa.ChunkedArray, params: TokenizerParams,
                            ) -> tuple[pa.ListArray, Any]:
    """:func:`tokenize`, and each kept token's position (a numpy array aligned with the lists'
    values): its word's place among the document's words, counting the words the analyzer
    drops (stop words, long words), as pylance's positions do."""
    import numpy as np
    params.check()
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks else pa.array([], pa.string())
    texts = texts.cast(pa.large_string()).fill_null("")
    if len(texts) == 1 and len(texts[0].as_py()) <= _SHORT:
        # one short text (a query): split in Python, sparing RE2 the compile of _SPLIT's class
        pieces = _split_words(texts[0].as_py())
        parts = pa.array([pieces or [""]], pa.list_(pa.large_string()))
    else:
        parts = pc.split_pattern_regex(texts, _SPLIT)
    # split, then drop long tokens, then lower-case (pylance's order: "İ" lower-cases to "i" and
    # a combining dot, which would split a word if lower-cased first)
    flat = pc.list_flatten(parts)
    keep = pc.greater(pc.binary_length(flat), 0)
    # a word's position: the non-empty pieces before it in its document
    doc_of = pc.list_parent_indices(parts)
    words = np.cumsum(keep.to_numpy(zero_copy_only=False).astype(np.int64))
    doc_np = doc_of.to_numpy(zero_copy_only=False).astype(np.int64)
    firsts = np.searchsorted(doc_np, np.arange(len(texts)), side="left")
    before = np.concatenate([[0], words])[firsts]  # words before each document's first piece
    positions = words - 1 - before[doc_np] if len(doc_np) else words
    if params.max_token_length is not None:
        keep = pc.and_(keep, pc.less(pc.binary_length(flat), int(params.max_token_length)))
    if params.lower_case:
        # per character, as pylance: "İ" -> "i" + combining dot (Rust's full mapping), "Σ" -> "σ"
        # even at a word's end
        flat = pc.replace_substring(flat, "İ", "I\u0307")
        flat = pc.utf8_lower(flat)
    if params.stem or params.remove_stop_words or params.ascii_folding:
        distinct = pc.unique(flat)
        mapped = pa.array(_normalize_distinct(distinct.to_pylist(), params), pa.large_string())
        flat = pc.take(mapped, pc.index_in(flat, distinct))
        keep = pc.and_(keep, pc.is_valid(flat))
    keep = keep.fill_null(False)
    kept_flat = pc.filter(flat, keep)
    kept_doc = pc.filter(doc_of, keep)
    counts = pa.array(_bincount(kept_doc, len(texts)), pa.int64())
    offsets = pa.array([0] + list(_cumsum(counts)), pa.int32())
    kept_positions = positions[keep.to_numpy(zero_copy_only=False)].astype(np.uint32)
    return pa.ListArray.from_arrays(offsets, kept_flat.cast(pa.string())), kept_positions


_SHORT = 4096  # characters: texts up to this long are split in Python (see _split_words)


def _is_word_char(char: str) -> bool:
    """``_SPLIT``'s complement: a letter, a number, or an alphabetic combining mark."""
    category = unicodedata.category(char)
    return category[0] in "LN" or (category in ("Mn", "Mc") and unicodedata.combining(char) == 0)


def _split_words(text: str) -> list[str]:
    """``text``'s words as ``_SPLIT`` cuts them (a loop over one short query's characters)."""
    words: list[str] = []
    start = None
    for at, char in enumerate(text):
        if _is_word_char(char):
            if start is None:
                start = at
        elif start is not None:
            words.append(text[start:at])
            start = None
    if start is not None:
        words.append(text[start:])
    return words


def _bincount(doc: pa.Array, n: int) -> Any:
    import numpy as np
    return np.bincount(doc.to_numpy(zero_copy_only=False).astype(np.int64), minlength=n)[:n]


def _cumsum(counts: pa.Array) -> Any:
    import numpy as np
    return np.cumsum(counts.to_numpy())


def query_tokens(text: str, params: TokenizerParams) -> list[str]:
    """A query string's tokens, in order."""
    if not isinstance(text, str):
        raise InvalidInputError(f"a full-text query must be a string, got {type(text).__name__}")
    return tokenize(pa.array([text], pa.string()), params)[0].as_py() or []


def query_tokens_with_positions(text: str, params: TokenizerParams) -> tuple[list[str], list[int]]:
    """A query string's tokens, in order, and their positions (see :func:`tokenize_with_positions`)."""
    if not isinstance(text, str):
        raise InvalidInputError(f"a full-text query must be a string, got {type(text).__name__}")
    lists, positions = tokenize_with_positions(pa.array([text], pa.string()), params)
    return lists[0].as_py() or [], positions.tolist()


# the analyzer pylance uses for a column without an index, and for a fuzzy match query's words:
# tantivy's simple tokenizer alone (no lower-casing, stemming, stop words or folding)
RAW_WORDS = TokenizerParams(max_token_length=None, lower_case=False, stem=False, remove_stop_words=False,
                            ascii_folding=False)
