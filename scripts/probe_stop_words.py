"""Regenerate ``lance_format/index/scalar/fts_stop_words.py`` from pylance's behaviour.

For each language, every candidate word (the Snowball lists as tantivy ships them, NLTK-style
English, and the ``stopwordsiso`` and ``stop-words`` packages' lists, all given as JSON
``{"English": [...], ...}``) is indexed by pylance (whitespace tokenizer, no stemming, no
lower-casing) and searched; the words pylance cannot find are the ones its analyzer removes.

    python scripts/probe_stop_words.py candidates.json > stop_words.json
"""

from __future__ import annotations

import json
import sys
import tempfile

import lance
import pyarrow as pa


def removed_words(language: str, candidates: list[str]) -> list[str]:
    words = sorted({w for w in candidates if w and not any(c.isspace() for c in w)})
    data = pa.table({"id": pa.array(range(len(words))), "text": pa.array([w + " qqqxyz" for w in words])})
    ds = lance.write_dataset(data, tempfile.mkdtemp())
    ds.create_scalar_index("text", "INVERTED", base_tokenizer="whitespace", language=language, stem=False,
                           remove_stop_words=True, lower_case=False)
    found = set()
    for i, word in enumerate(words):
        if i in ds.to_table(full_text_query=word, columns=["id", "_score"]).column("id").to_pylist():
            found.add(word)
    return sorted(set(words) - found)


if __name__ == "__main__":
    candidates = json.load(open(sys.argv[1]))
    json.dump({lang: removed_words(lang, words) for lang, words in candidates.items()}, sys.stdout,
              ensure_ascii=False, indent=0)
