"""pylance's text analyzer for INVERTED indices and full-text queries ("simple" base tokenizer).

The chain, in pylance's order: split on characters that are not alphanumeric, drop tokens of
``max_token_length`` bytes or more, lower-case, Snowball-stem, drop stop words (pylance's lists:
fts_stop_words.py), fold to ASCII. Splitting and lower-casing run in pyarrow over whole columns;
stemming, stop words and folding run once per distinct token.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import InvalidInputError, UnsupportedFeatureError
from lance_format.index.scalar.fts_alphanumeric import ALPHANUMERIC_MARK_SET, word_char_class
from lance_format.index.scalar.fts_folding import FOLDED
from lance_format.index.scalar.fts_icu import icu_words
from lance_format.index.scalar.fts_ngram import ngrams
from lance_format.index.scalar.fts_stop_words import ICU_STOP_WORDS, STOP_WORDS

_WHITESPACE = r"[ \t\n\x0C\r]+"


@lru_cache(maxsize=1)
def _split_pattern() -> str:
    """Rust's ``char::is_alphanumeric`` negated, as an RE2 class."""
    return f"[^{word_char_class()}]+"



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
    # replaces the language's list when given (pylance's custom_stop_words)
    custom_stop_words: tuple[str, ...] | None = None
    min_ngram_length: int = 3
    max_ngram_length: int = 3
    prefix_only: bool = False

    @staticmethod
    def from_json(text: str) -> TokenizerParams:
        raw: Mapping[str, Any] = json.loads(text) if text else {}
        defaults = TokenizerParams()
        values = {k: raw.get(k, getattr(defaults, k)) for k in (
            "base_tokenizer", "language", "max_token_length", "lower_case", "stem", "remove_stop_words",
            "ascii_folding", "with_position", "min_ngram_length", "max_ngram_length", "prefix_only")}
        custom = raw.get("custom_stop_words")
        return TokenizerParams(**values, custom_stop_words=tuple(custom) if custom is not None else None)

    def check(self) -> None:
        if self.base_tokenizer not in BASE_TOKENIZERS:
            raise UnsupportedFeatureError(f"base_tokenizer {self.base_tokenizer!r} is not supported yet "
                                          f"(only {', '.join(BASE_TOKENIZERS)})")
        if self.language not in LANGUAGES:
            raise InvalidInputError(f"unknown tokenizer language {self.language!r}: expected one of "
                                    f"{', '.join(LANGUAGES)}")
        if (self.remove_stop_words and self.custom_stop_words is None and self.language not in STOP_WORDS
                and not self.base_tokenizer.startswith("icu")):
            raise UnsupportedFeatureError(f"the stop words of language {self.language!r} are not known here: "
                                          "pass remove_stop_words=False or custom_stop_words")

    def stop_words(self) -> frozenset[str]:
        if self.custom_stop_words is not None:
            return frozenset(self.custom_stop_words)
        # pylance's icu analyzer removes every language's stop words (text mixes scripts)
        return ICU_STOP_WORDS if self.base_tokenizer.startswith("icu") else STOP_WORDS[self.language]


# the languages pylance 14 accepts (its stemmers' and stop-word lists' names)
LANGUAGES = ("Arabic", "Danish", "Dutch", "English", "Finnish", "French", "German", "Greek", "Hungarian",
             "Italian", "Norwegian", "Portuguese", "Romanian", "Russian", "Spanish", "Swedish", "Tamil", "Turkish")


# base tokenizers and the pattern each splits on (raw: none); whitespace is Rust's
# char::is_ascii_whitespace
BASE_TOKENIZERS = ("simple", "whitespace", "raw", "ngram", "icu", "icu/split")


@lru_cache(maxsize=8)
def _stemmer(language: str) -> Any:
    try:
        import Stemmer  # PyStemmer: the Snowball stemmers, as pylance's tantivy uses
    except ImportError as exc:  # the optional extra `fts`
        raise UnsupportedFeatureError("full-text search with stemming needs the PyStemmer package: "
                                      "pip install 'lance-assets[fts]'") from exc
    return Stemmer.Stemmer(language.lower())


def _fold_char(char: str) -> str:
    if unicodedata.category(char) == "Zs":  # no-break and other spaces fold to a space, as pylance's
        return " "
    return FOLDED.get(ord(char), char)


def _fold(token: str) -> str:
    if token.isascii():
        return token
    return "".join(_fold_char(c) for c in token)


# per analyzer, the final form of the raw tokens seen lately: a build analyzes batch after batch
# of one vocabulary, and stemming each batch's distinct tokens again would dominate
_SEEN: dict[TokenizerParams, dict[str, str | None]] = {}
_SEEN_LIMIT = 1 << 20


def _normalize_distinct(tokens: list[str], params: TokenizerParams) -> list[str | None]:
    """The final form of each distinct raw token (None: dropped)."""
    seen = _SEEN.setdefault(params, {})
    if len(seen) > _SEEN_LIMIT:
        seen.clear()
    missing = [t for t in tokens if t not in seen]
    if missing:
        seen.update(zip(missing, _normalize_uncached(missing, params)))
    return [seen[t] for t in tokens]


def _normalize_uncached(tokens: list[str], params: TokenizerParams) -> list[str | None]:
    out: list[str | None] = list(tokens)
    if params.stem:
        out = list(_stemmer(params.language).stemWords(tokens))
    if params.remove_stop_words:
        stop = params.stop_words()
        out = [None if t in stop else t for t in out]
    if params.ascii_folding:
        out = [None if t is None else _fold(t) for t in out]
    return out


def analyze(texts: pa.Array | pa.ChunkedArray, params: TokenizerParams
            ) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """Every kept token of the documents, in document order: (tokens as large_string, each
    token's document index, its position in the document: its rank among the base tokenizer's
    tokens, so long tokens and stop words leave gaps, as pylance's positions do)."""
    params.check()
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks else pa.array([], pa.string())
    texts = _documents(texts, params)
    valid_doc = texts.is_valid()
    texts = texts.fill_null("")
    # split, then drop long tokens, then lower-case (pylance's order: "İ" lower-cases to "i" and
    # a combining dot, which would split a word if lower-cased first)
    if params.base_tokenizer == "ngram":
        parts = ngrams(texts, params.min_ngram_length, params.max_ngram_length, params.prefix_only)
        nonempty = None
    elif params.base_tokenizer == "raw":
        # the whole text is the token, an empty one too (a null document has none)
        parts = pa.ListArray.from_arrays(pa.array(np.arange(len(texts) + 1, dtype=np.int32)), texts)
        nonempty = valid_doc
    elif params.base_tokenizer in ("icu", "icu/split"):
        parts = icu_words(texts)
        if params.base_tokenizer == "icu/split":  # each ICU word cut again where the simple tokenizer cuts
            parts = _split_each(parts, _split_pattern())
        nonempty = None
    elif params.base_tokenizer == "simple" and len(texts) == 1 and len(texts[0].as_py()) <= _SHORT:
        # one short text (a query): split in Python, sparing RE2 the compile of the class
        parts = pa.array([_split_words(texts[0].as_py()) or [""]], pa.list_(pa.large_string()))
    else:
        parts = pc.split_pattern_regex(texts, _split_pattern() if params.base_tokenizer == "simple" else _WHITESPACE)
    flat = pc.list_flatten(parts)
    doc_of = pc.list_parent_indices(parts).to_numpy(zero_copy_only=False).astype(np.int64)
    if params.base_tokenizer in ("simple", "whitespace"):
        nonempty = pc.greater(pc.binary_length(flat), 0)
    if nonempty is not None:
        flat = pc.filter(flat, nonempty)
        doc_of = doc_of[nonempty.to_numpy(zero_copy_only=False)]
    # each token's rank in its document: its index minus the index of the document's first token
    # (every n-gram is at position 0, as pylance records them)
    starts = np.searchsorted(doc_of, np.arange(len(texts)))
    positions = np.arange(len(doc_of), dtype=np.int64) - starts[doc_of] if len(doc_of) else doc_of
    if params.base_tokenizer == "ngram":
        positions = np.zeros(len(doc_of), np.int64)
    keep = None
    if params.max_token_length is not None:
        keep = pc.less(pc.binary_length(flat), int(params.max_token_length))
    if params.lower_case:
        # per character, as pylance: "İ" -> "i" + combining dot (Rust's full mapping), "Σ" -> "σ"
        # even at a word's end
        flat = pc.replace_substring(flat, "İ", "I\u0307")
        flat = pc.utf8_lower(flat)
    if params.stem or params.remove_stop_words or params.ascii_folding:
        distinct = pc.unique(flat)
        mapped = pa.array(_normalize_distinct(distinct.to_pylist(), params), pa.large_string())
        flat = pc.take(mapped, pc.index_in(flat, distinct))
        valid = pc.is_valid(flat)
        keep = valid if keep is None else pc.and_(keep, valid)
    if keep is None:
        return flat, doc_of, positions
    mask = keep.fill_null(False).to_numpy(zero_copy_only=False)
    return pc.filter(flat, keep.fill_null(False)), doc_of[mask], positions[mask]


def _split_each(parts: pa.LargeListArray, pattern: str) -> pa.LargeListArray:
    """Each document's words split on ``pattern``, the pieces still grouped by document."""
    words = pc.list_flatten(parts)
    word_doc = pc.list_parent_indices(parts).to_numpy(zero_copy_only=False).astype(np.int64)
    pieces = pc.split_pattern_regex(words, pattern)
    flat = pc.list_flatten(pieces)
    piece_doc = word_doc[pc.list_parent_indices(pieces).to_numpy(zero_copy_only=False).astype(np.int64)]
    keep = pc.greater(pc.binary_length(flat), 0)
    flat, piece_doc = pc.filter(flat, keep), piece_doc[keep.to_numpy(zero_copy_only=False)]
    offsets = np.searchsorted(piece_doc, np.arange(len(parts) + 1), side="left").astype(np.int64)
    return pa.LargeListArray.from_arrays(pa.array(offsets), flat)


_SHORT = 4096  # characters: texts up to this long are split in Python (see _split_words)


def _is_word_char(char: str) -> bool:
    """``_split_pattern``'s complement: a letter, a number, or another alphanumeric character."""
    return unicodedata.category(char)[0] in "LN" or ord(char) in ALPHANUMERIC_MARK_SET


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


def _documents(texts: pa.Array, params: TokenizerParams) -> pa.Array:
    """One text per document: a list of strings is its elements joined by a space (pylance
    indexes a row's elements as one document, positions running on across elements)."""
    if pa.types.is_list(texts.type) or pa.types.is_large_list(texts.type):
        if params.base_tokenizer in ("raw", "ngram"):
            raise UnsupportedFeatureError(f"the {params.base_tokenizer} tokenizer on a list<string> column is not "
                                          "supported yet")
        values = pc.list_flatten(texts).cast(pa.large_string()).fill_null("")
        offsets = np.zeros(len(texts) + 1, np.int64)
        np.cumsum(pc.list_value_length(texts).fill_null(0).to_numpy(zero_copy_only=False), out=offsets[1:])
        joined = pc.binary_join(pa.LargeListArray.from_arrays(pa.array(offsets), values), pa.scalar(" ", pa.large_string()))
        return pc.if_else(texts.is_valid(), joined, pa.scalar(None, pa.large_string()))
    return texts.cast(pa.large_string())


def tokenize(texts: pa.Array | pa.ChunkedArray, params: TokenizerParams) -> pa.ListArray:
    """Each document's tokens (a null or empty document has none), as a list<string> array."""
    return tokenize_with_positions(texts, params)[0]


def tokenize_with_positions(texts: pa.Array | pa.ChunkedArray, params: TokenizerParams,
                            ) -> tuple[pa.ListArray, np.ndarray]:
    """:func:`tokenize`, and each kept token's position (uint32, aligned with the lists' values):
    its word's place among the document's words, counting the words the analyzer drops (stop
    words, long words), as pylance's positions do."""
    flat, doc, positions = analyze(texts, params)
    counts = np.bincount(doc, minlength=len(texts))[:len(texts)]
    offsets = np.zeros(len(counts) + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    return (pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), flat.cast(pa.string())),
            positions.astype(np.uint32))


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
