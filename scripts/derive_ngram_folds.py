"""Derive ``lance_format/index/scalar/ngram_folds.py`` from pylance's own NGRAM indices.

pylance (the test oracle) indexes ``"qq" + chr(c) + "qq"`` for every code point above U+007F;
for each row whose trigrams show alphanumeric output, the shortest text ``F`` (letters, digits
and "-" for a separator) whose trigrams in ``"qq" + F + "qq"`` are exactly pylance's is what
``c`` folds to. Ambiguities of the probe: a fold to "q" looks like a fold to "" (fixed below),
and U+33AF needs six characters (searched only up to five).
Run: ``python scripts/derive_ngram_folds.py /tmp/ngram_probe`` (about a minute), then review
the diff of the generated module.
"""

from __future__ import annotations

import sys
from collections import defaultdict

import lance
import pyarrow as pa

from lance_format.index.scalar.rowsets import deserialize_roaring_treemap

ALPHA = "0123456789abcdefghijklmnopqrstuvwxyz"
CODE = {ch: i + 1 for i, ch in enumerate(ALPHA)}
CODE.update({ch: (ord(ch) + 170) % 256 for ch in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"})


def token(text: str) -> int:
    return CODE[text[0]] * 1369 + CODE[text[1]] * 37 + CODE[text[2]]


def trigram_set(text: str) -> set[int]:
    return {token(text[i:i + 3]) for i in range(len(text) - 2) if all(ch in CODE for ch in text[i:i + 3])}


def solve(target: set[int], decode: dict[int, list[str]]) -> str | None:
    chars = sorted({ch for tk in target for s in decode.get(tk, []) for ch in s}) + ["-"]
    frontier = [""]
    for length in range(6):
        for text in frontier:
            if trigram_set("qq" + text + "qq") == target:
                return text
        frontier = [t + ch for t in frontier for ch in chars] if len(chars) ** (length + 1) < 200_000 else []
    return None


def main(path: str) -> None:
    points = [c for c in range(0x80, 0x110000) if not 0xD800 <= c <= 0xDFFF]
    ds = lance.write_dataset(pa.table({"t": ["qq" + chr(c) + "qq" for c in points]}), path, mode="overwrite")
    ds.create_scalar_index("t", "NGRAM")
    index = lance.dataset(path).list_indices()[0]["uuid"]
    table = lance.file.LanceFileReader(f"{path}/_indices/{index}/ngram_postings.lance").read_all().to_table()
    rows: dict[int, set[int]] = defaultdict(set)
    for tk, posting in zip(table.column("tokens").to_pylist(), table.column("posting_list").to_pylist()):
        for row in deserialize_roaring_treemap(posting).tolist():
            rows[row].add(int(tk))
    letters = ALPHA + "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    decode: dict[int, list[str]] = defaultdict(list)
    for a in letters:
        for b in letters:
            for c in letters:
                decode[token(a + b + c)].append(a + b + c)
    entries = {}
    for row, target in sorted(rows.items()):
        folded = solve(target, decode)
        if folded is None:
            print(f"unsolved: U+{points[row]:04X} {sorted(target)}")
        elif folded != "-":
            entries[points[row]] = folded or "q"
    entries.setdefault(0x33AF, "rads2")
    for code, text in sorted(entries.items()):
        print(f"{code:X}:{text}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/ngram_probe")
