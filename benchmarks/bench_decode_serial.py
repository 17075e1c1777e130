"""Serial decoding CPU of 2.2 files, column by column: lance_format against pylance.

Four tables are written by both engines at file version 2.2: the realistic table of
``bench_realistic.py``; string shapes (16-hex-digit high-cardinality strings, word text,
half-null text, lists of 3 words); nested shapes (nullable int64/float64/bool/timestamp, a bool,
large_string, list<int64> and nullable list<float32> of 0-8 items, a struct of a list and a
struct, a list of structs); vectors (fixed_size_list<float32> of 128, nullable 128 and 768
dimensions, ``--rows / --vector-divisor`` rows). Each column of each copy is then read alone,
serially (``LANCE_CPU_THREADS=1`` for both engines, set before they load), ``--rounds`` times,
the two engines interleaved so that they see the same machine load. Every byte of what each
engine returns is read inside the clock (:func:`touch_buffers`): mapped, zero-copy reads must
not look free. Prints the fastest CPU milliseconds of each engine and their ratio (ours /
pylance) per column, and the totals.

    python benchmarks/bench_decode_serial.py [--rows 1000000] [--rounds 7]
        [--tables realistic,shapes,nested,vectors] [--columns a,b] [--vector-divisor 10]

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
from bench_realistic import realistic_table  # noqa: E402

import lance_format  # noqa: E402
from lance_format.encodings.structural import accel  # noqa: E402

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


def _touch_bytes(buf: pa.Buffer | None, start: int, stop: int) -> int:
    if buf is None or stop <= start:
        return 0
    raw = np.frombuffer(buf, np.uint8)[start:stop]
    words = len(raw) // 8
    return int(raw[: words * 8].view(np.uint64).sum(dtype=np.uint64)) + int(raw[words * 8:].sum())


def touch_array(array: pa.Array) -> int:
    """Read every byte of ``array``'s own rows: validity, offsets, values, children's (a chunk can
    be a slice of larger buffers, which ``Array.buffers()`` would hand out whole)."""
    kind, off, n = array.type, array.offset, len(array)
    buffers = array.buffers()
    total = _touch_bytes(buffers[0], off // 8, (off + n + 7) // 8)
    if pa.types.is_struct(kind):
        return total + sum(touch_array(array.field(i)) for i in range(kind.num_fields))
    if pa.types.is_fixed_size_list(kind):
        return total + touch_array(array.values.slice(off * kind.list_size, n * kind.list_size))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_map(kind):
        width = 8 if pa.types.is_large_list(kind) else 4
        offsets = np.frombuffer(buffers[1], np.int64 if width == 8 else np.int32)[off: off + n + 1]
        total += _touch_bytes(buffers[1], off * width, (off + n + 1) * width)
        return total + touch_array(array.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0])))
    if pa.types.is_string(kind) or pa.types.is_binary(kind) or pa.types.is_large_string(kind) \
            or pa.types.is_large_binary(kind):
        width = 8 if pa.types.is_large_string(kind) or pa.types.is_large_binary(kind) else 4
        offsets = np.frombuffer(buffers[1], np.int64 if width == 8 else np.int32)[off: off + n + 1]
        total += _touch_bytes(buffers[1], off * width, (off + n + 1) * width)
        return total + _touch_bytes(buffers[2], int(offsets[0]), int(offsets[-1]))
    bits = kind.bit_width
    return total + _touch_bytes(buffers[1], off * bits // 8, ((off + n) * bits + 7) // 8)


def touch_buffers(table: pa.Table) -> int:
    """Read every byte of what a scan returned: our reader maps local files and hands out
    zero-copy views, so a scan that only builds arrays would not have read the bytes yet. Both
    engines pay the same per byte."""
    return sum(touch_array(chunk) for column in table.columns for chunk in column.chunks)


def _lengths_to_offsets(lengths: np.ndarray) -> pa.Array:
    offsets = np.zeros(len(lengths) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.array(offsets)


def _with_nulls(array: pa.Array, null_mask: np.ndarray) -> pa.Array:
    return pc.if_else(pa.array(null_mask), pa.nulls(len(array), array.type), array)


def nested_shapes(rows: int, seed: int = 7) -> pa.Table:
    """Nullable primitives, variable lists, nested structs and lists of structs, large strings,
    timestamps with nulls; about a tenth of them null where nullable, lists of 0-8 items (some empty)."""
    rng = np.random.default_rng(seed)
    nulls = rng.random(rows) < 0.1
    lengths = rng.integers(0, 9, rows)
    items = int(lengths.sum())
    offsets = _lengths_to_offsets(lengths)
    list_nulls = pa.array(~(rng.random(rows) < 0.1)).to_numpy(zero_copy_only=False)
    small_lengths = rng.integers(0, 4, rows)
    small_items = int(small_lengths.sum())
    inner = pa.StructArray.from_arrays(
        [pa.array(rng.integers(0, 1 << 40, rows)), pa.array(np.char.mod("k%05d", rng.integers(0, 50_000, rows)))],
        ["c", "d"])
    text = pc.binary_join_element_wise(pa.array(WORDS[rng.integers(0, 10, rows)]), " ",
                                       pa.array(rng.integers(0, 1_000_000, rows)).cast(pa.string()), "")
    ts = pa.array(1_700_000_000_000_000 + rng.integers(0, 10**12, rows), pa.timestamp("us"))
    return pa.table({
        "int_null": _with_nulls(pa.array(rng.integers(-(1 << 40), 1 << 40, rows)), nulls),
        "float_null": _with_nulls(pa.array(rng.standard_normal(rows)), rng.random(rows) < 0.1),
        "bool": pa.array(rng.random(rows) < 0.5),
        "bool_null": _with_nulls(pa.array(rng.random(rows) < 0.5), rng.random(rows) < 0.1),
        "ts_null": _with_nulls(ts, rng.random(rows) < 0.1),
        "large_text": text.cast(pa.large_string()),
        "ints": pa.ListArray.from_arrays(offsets, pa.array(rng.integers(0, 1 << 40, items))),
        "floats": pa.ListArray.from_arrays(offsets, pa.array(rng.random(items).astype(np.float32)),
                                           mask=pa.array(~list_nulls)),
        "nested": pa.StructArray.from_arrays(
            [pa.ListArray.from_arrays(_lengths_to_offsets(small_lengths),
                                      pa.array(rng.integers(0, 1000, small_items).astype(np.int32))), inner],
            ["a", "b"]),
        "points": pa.ListArray.from_arrays(
            _lengths_to_offsets(small_lengths),
            pa.StructArray.from_arrays([pa.array(rng.standard_normal(small_items)),
                                        pa.array(rng.integers(0, 1000, small_items).astype(np.int32))], ["x", "y"])),
    })


def vector_shapes(rows: int, seed: int = 11) -> pa.Table:
    """Embeddings: fixed-size lists of float32 of 128 and 768 dimensions, the 128 ones also nullable."""
    rng = np.random.default_rng(seed)

    def vectors(dim: int) -> pa.Array:
        return pa.FixedSizeListArray.from_arrays(pa.array(rng.random(rows * dim, np.float32)), dim)

    return pa.table({
        "vec128": vectors(128),
        "vec128_null": _with_nulls(vectors(128), rng.random(rows) < 0.1),
        "vec768": vectors(768),
    })


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--tables", help="comma-separated subset of realistic,shapes,nested,vectors")
    parser.add_argument("--columns", help="comma-separated subset of the columns")
    parser.add_argument("--vector-divisor", type=int, default=10, help="vector tables have rows / this many rows")
    args = parser.parse_args()
    accel.use_compiled(True)
    tables = {"realistic": realistic_table(args.rows), "shapes": string_shapes(args.rows),
              "nested": nested_shapes(args.rows), "vectors": vector_shapes(max(args.rows // args.vector_divisor, 1))}
    if args.tables:
        tables = {name: tables[name] for name in args.tables.split(",")}
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
                    if args.columns and column not in args.columns.split(","):
                        continue
                    best = {name: float("inf") for name in engines}
                    for _ in range(args.rounds + 1):  # the first round warms up
                        for name, reader in engines.items():
                            start = time.process_time()
                            touch_buffers(reader.dataset(path).to_table(columns=[column]))
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
