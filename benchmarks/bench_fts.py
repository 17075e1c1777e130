"""Full-text search benchmark: building an INVERTED index and querying it, lance_format vs pylance.

Writes ``--rows`` short documents (generated deterministically: 4 to 16 words drawn from a
Zipf-like vocabulary of ``--vocab`` synthetic words, plus an integer ``category``) twice with
pylance, then:

* build: ``create_scalar_index("text", "INVERTED", with_position=True)`` with each engine on its
  own copy (best of ``--build-repeat``);
* query latency (best of ``--repeat``, dataset opened once, index loaded by a warm-up query) of
  each engine on the index *it* built, and of pylance on the index lance_format built: a term, a
  3-term OR, a phrase (positions) and a prefiltered term (``category = 3``), top 10.

Query kinds this engine does not answer yet are skipped with a note, never faked. Prints the
ratios ours / pylance (lower is better for ours).

    python benchmarks/bench_fts.py [--rows 1000000] [--vocab 20000] [--repeat 5] [--keep DIR]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa

import lance_format
from lance_format.errors import LanceError

SYLLABLES = ["ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "ve", "da", "gu", "zo", "fi", "be", "xa", "qu"]


def _vocabulary(size: int) -> np.ndarray:
    rng = np.random.default_rng(1)
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES, size=int(rng.integers(2, 5)))))
    return np.array(sorted(words), dtype=object)


def _batches(rows: int, vocab: np.ndarray, batch: int = 100_000):
    rng = np.random.default_rng(7)
    weights = 1.0 / np.arange(1, len(vocab) + 1) ** 1.05
    weights /= weights.sum()
    for start in range(0, rows, batch):
        n = min(batch, rows - start)
        lengths = rng.integers(4, 17, size=n)
        words = vocab[rng.choice(len(vocab), size=int(lengths.sum()), p=weights)]
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        docs = [" ".join(words[offsets[i]:offsets[i + 1]]) for i in range(n)]
        yield pa.record_batch({"id": np.arange(start, start + n), "category": rng.integers(0, 10, size=n),
                               "text": pa.array(docs, pa.string())})


def _best(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--vocab", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--build-repeat", type=int, default=1)
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench_fts_"))
    vocab = _vocabulary(args.vocab)
    schema = next(_batches(1, vocab)).schema
    uris = {}
    for who in ("ours", "pylance"):
        uris[who] = root / who
        shutil.rmtree(uris[who], ignore_errors=True)
        lance.write_dataset(pa.RecordBatchReader.from_batches(schema, _batches(args.rows, vocab)), uris[who],
                            max_rows_per_file=250_000)
    print(f"{args.rows:,} documents, vocabulary {args.vocab:,}, at {root}")

    def build(who: str) -> None:
        mod = lance_format if who == "ours" else lance
        mod.dataset(str(uris[who])).create_scalar_index("text", "INVERTED", with_position=True, replace=True)

    build_times = {who: _best(lambda w=who: build(w), args.build_repeat) for who in ("ours", "pylance")}
    print(f"build  ours {build_times['ours']:.2f} s  pylance {build_times['pylance']:.2f} s  "
          f"ratio {build_times['ours'] / build_times['pylance']:.2f}")

    common = [str(w) for w in vocab[:3]]
    rare = str(vocab[500])
    queries: dict[str, dict[str, Any]] = {
        "term": {"full_text_query": rare},
        "3-term OR": {"full_text_query": f"{common[2]} {rare} {vocab[900]}"},
        "phrase": {"full_text_query": ("phrase", f"{common[0]} {common[1]}")},
        "prefiltered term": {"full_text_query": rare, "filter": "category = 3", "prefilter": True},
    }
    engines = {"ours": (lance_format, uris["ours"]), "pylance": (lance, uris["pylance"]),
               "pylance on ours": (lance, uris["ours"])}
    for kind, spec in queries.items():
        times: dict[str, float] = {}
        for label, (mod, uri) in engines.items():
            ds = mod.dataset(str(uri))
            kwargs = dict(spec)
            if isinstance(kwargs["full_text_query"], tuple):
                kwargs["full_text_query"] = _phrase(mod, kwargs["full_text_query"][1])
            if kwargs["full_text_query"] is None:
                print(f"  {kind}: {label} skipped (phrase queries are not supported by this engine yet)")
                continue
            try:
                ds.to_table(limit=10, **kwargs)  # warm-up: loads the index
            except (LanceError, NotImplementedError, TypeError) as exc:
                print(f"  {kind}: {label} skipped ({type(exc).__name__}: {str(exc)[:100]})")
                continue
            times[label] = _best(lambda d=ds, k=kwargs: d.to_table(limit=10, **k), args.repeat)
        shown = "  ".join(f"{k} {v * 1000:.1f} ms" for k, v in times.items())
        ratio = f"  ratio ours/pylance {times['ours'] / times['pylance']:.2f}" if len(times) == 3 or (
            "ours" in times and "pylance" in times) else ""
        print(f"{kind:17s} {shown}{ratio}")
    if args.keep is None:
        shutil.rmtree(root, ignore_errors=True)


def _phrase(mod: Any, text: str) -> Any:
    """A phrase query object of engine ``mod`` (None when it has none)."""
    if mod is lance:
        from lance.query import PhraseQuery

        return PhraseQuery(text, "text")
    try:
        from lance_format.query import PhraseQuery  # type: ignore[import-not-found]
    except ImportError:
        return None
    return PhraseQuery(text, "text")


if __name__ == "__main__":
    main()
