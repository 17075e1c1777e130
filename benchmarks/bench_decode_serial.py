"""Serial decoding CPU of 2.2 files, column by column: lance_format against pylance.

The realistic table of ``bench_realistic.py`` plus further string shapes (16-hex-digit
high-cardinality strings, word text, half-null text, lists of 3 words) is written by both
engines at file version 2.2; each column of each copy is then read alone, serially
(``LANCE_CPU_THREADS=1`` for both engines, set before they load), ``--rounds`` times, the two
engines interleaved so that they see the same machine load. Prints the fastest CPU milliseconds
of each engine and their ratio (ours / pylance) per column, and the totals.

    python benchmarks/bench_decode_serial.py [--rows 1000000] [--rounds 7]

Our compiled kernels are loaded before the clock starts (see ``bench_realistic.py``).
"""

from __future__ import annotations

import os

os.environ["LANCE_CPU_THREADS"] = "1"  # before either engine starts its thread pool

import argparse  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import lance  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402

import lance_format  # noqa: E402
from lance_format.encodings.structural import accel  # noqa: E402

from bench_realistic import realistic_table  # noqa: E402

WORDS = np.array(["lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit", "sed", "do"])


def string_shapes(rows: int, seed: int = 5) -> pa.Table:
    rng = np.random.default_rng(seed)
    text = pc.binary_join_element_wise(pa.array(WORDS[rng.integers(0, 10, rows)]), " ",
                                       pa.array(WORDS[rng.integers(0, 10, rows)]), " ",
                                       pa.array(rng.integers(0, 100_000, rows)).cast(pa.string()), "")
    return pa.table({
        "hex": pa.array(np.char.mod("%016x", rng.integers(0, 2**62, rows))),
        "text": text,
        "half_null": pc.if_else(pa.array(rng.random(rows) < 0.5), pa.nulls(rows, pa.string()), text),
        "words": pa.ListArray.from_arrays(pa.array(np.arange(0, 3 * rows + 1, 3, dtype=np.int32)),
                                          pa.array(WORDS[rng.integers(0, 10, 3 * rows)])),
    })


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    accel.use_compiled(True)
    tables = {"realistic": realistic_table(args.rows), "shapes": string_shapes(args.rows)}
    root = tempfile.mkdtemp(prefix="bench-decode-")
    engines = {"ours": lance_format, "pylance": lance}
    try:
        print(f"{args.rows:,} rows, file version 2.2, serial decoding, best of {args.rounds} "
              f"(load {os.getloadavg()[0]:.1f})")
        print(f"{'column':24s} {'ours ms':>8s} {'pylance ms':>10s} {'cpu ratio':>9s}")
        totals = {name: 0.0 for name in engines}
        for table_name, table in tables.items():
            for writer, engine in engines.items():
                path = os.path.join(root, f"{table_name}-{writer}.lance")
                engine.write_dataset(table, path, data_storage_version="2.2")
                for column in table.column_names:
                    best = {name: float("inf") for name in engines}
                    for _ in range(args.rounds + 1):  # the first round warms up
                        for name, reader in engines.items():
                            start = time.process_time()
                            reader.dataset(path).to_table(columns=[column])
                            best[name] = min(best[name], time.process_time() - start)
                    for name in engines:
                        totals[name] += best[name]
                    print(f"{column + ', ' + writer + '-written':24s} {best['ours'] * 1e3:8.1f} "
                          f"{best['pylance'] * 1e3:10.1f} {best['ours'] / best['pylance']:9.2f}")
        print(f"{'total':24s} {totals['ours'] * 1e3:8.1f} {totals['pylance'] * 1e3:10.1f} "
              f"{totals['ours'] / totals['pylance']:9.2f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
