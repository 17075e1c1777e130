"""pylance's ``base_tokenizer="icu"``: words by Unicode's word-break rules and ICU's dictionaries.

Segmentation comes from ICU itself (the ``icu4py`` package, in the ``fts`` extra). pylance
segments with ICU4X, this engine with ICU4C; both follow UAX #29 and ICU's dictionaries, so
Latin, Cyrillic, Greek, Arabic, Chinese, Thai and Korean text give the same words; Japanese
can be cut differently where the two dictionaries disagree (e.g. a katakana compound).
Only word-like segments (holding a character Rust counts as alphanumeric) are tokens, as
pylance keeps them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import UnsupportedFeatureError
from lance_format.index.scalar.fts_alphanumeric import word_char_class

# a hard word boundary under UAX #29 (rules WB3a/WB3b): documents joined with it are broken
# once, and no segment spans two documents
_SEPARATOR = "\n"


def _word_breaker() -> Any:
    try:
        from icu4py.breakers import WordBreaker
    except ImportError as exc:  # the optional extra `fts`
        raise UnsupportedFeatureError("the icu tokenizer needs the icu4py package: "
                                      "pip install 'lance-assets[fts]'") from exc
    return WordBreaker


def icu_words(texts: pa.Array) -> pa.ListArray:
    """Each document's words (a list<large_string> array, one list per input value; a null or
    empty document has none)."""
    breaker = _word_breaker()
    texts = texts.cast(pa.large_string()).fill_null("")
    # ICU reports UTF-16 offsets: a character beyond the BMP (an emoji) counts twice
    lengths = (pc.utf8_length(texts).to_numpy(zero_copy_only=False).astype(np.int64)
               + pc.count_substring_regex(texts, r"[\x{10000}-\x{10FFFF}]").to_numpy(zero_copy_only=False))
    doc_starts = np.zeros(len(texts) + 1, np.int64)
    np.cumsum(lengths + 1, out=doc_starts[1:])  # each document's UTF-16 offset in the joined text
    joined = _SEPARATOR.join(texts.to_pylist())
    # ICU walks the text in C; Python sees one (start, end) pair per segment
    bounds = np.fromiter((b for segment in breaker(joined, "en").segments() for b in segment), np.int64)
    starts, ends = bounds[0::2], bounds[1::2]
    utf16 = joined.encode("utf-16-le")
    segments = pa.array([utf16[2 * s:2 * e].decode("utf-16-le") for s, e in zip(starts.tolist(), ends.tolist())],
                        pa.large_string())
    wordlike = pc.match_substring_regex(segments, f"[{word_char_class()}]").to_numpy(zero_copy_only=False)
    words = pc.filter(segments, pa.array(wordlike))
    doc_of = np.searchsorted(doc_starts, starts[wordlike], side="right") - 1
    offsets = np.searchsorted(doc_of, np.arange(len(texts) + 1), side="left").astype(np.int64)
    return pa.LargeListArray.from_arrays(pa.array(offsets), words)
