"""A table with a column of every Arrow type the engine stores, with and without nulls.

Shared by the compatibility tests in both directions and by the file-format tests.
"""

from __future__ import annotations

import datetime as dt
import decimal

import numpy as np
import pyarrow as pa


def _with_nulls(array: pa.Array, every: int = 3) -> pa.Array:
    mask = np.zeros(len(array), dtype=bool)
    mask[1::every] = True
    return pa.array(array.to_pylist(), array.type, mask=mask) if not pa.types.is_nested(array.type) else pa.array(
        [None if m else v for v, m in zip(array.to_pylist(), mask)], array.type
    )


def type_matrix(n: int = 50, *, nulls: bool = True, seed: int = 7) -> pa.Table:
    """``n`` rows; every second column of a type is the nullable variant when ``nulls``."""
    rng = np.random.default_rng(seed)
    ints = rng.integers(-1000, 1000, n)
    columns: dict[str, pa.Array] = {
        "bool": pa.array(rng.integers(0, 2, n).astype(bool)),
        "int8": pa.array(ints % 100, pa.int8()),
        "int16": pa.array(ints, pa.int16()),
        "int32": pa.array(ints * 1000, pa.int32()),
        "int64": pa.array(ints * 10**12, pa.int64()),
        "uint8": pa.array(np.abs(ints) % 200, pa.uint8()),
        "uint16": pa.array(np.abs(ints), pa.uint16()),
        "uint32": pa.array(np.abs(ints) * 10**6, pa.uint32()),
        "uint64": pa.array(np.abs(ints).astype(np.uint64) * np.uint64(10**15), pa.uint64()),
        "float16": pa.array(rng.random(n).astype(np.float16), pa.float16()),
        "float32": pa.array(rng.random(n).astype(np.float32)),
        "float64": pa.array(rng.standard_normal(n)),
        "string": pa.array([f"s{i}_" + "x" * (i % 7) for i in range(n)]),
        "large_string": pa.array([f"L{i}" * (i % 4) for i in range(n)], pa.large_string()),
        "binary": pa.array([bytes([i % 256]) * (i % 5) for i in range(n)], pa.binary()),
        "large_binary": pa.array([bytes([i % 256, 1]) * (i % 3) for i in range(n)], pa.large_binary()),
        "date32": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=int(i)) for i in ints], pa.date32()),
        "date64": pa.array([dt.datetime(2021, 1, 1) + dt.timedelta(days=int(i)) for i in range(n)], pa.date64()),
        "time32s": pa.array([i % 86400 for i in range(n)], pa.time32("s")),
        "time32ms": pa.array([i * 1000 for i in range(n)], pa.time32("ms")),
        "time64us": pa.array([i * 10**6 for i in range(n)], pa.time64("us")),
        "time64ns": pa.array([i * 10**9 for i in range(n)], pa.time64("ns")),
        "ts_s": pa.array(ints * 3600, pa.timestamp("s")),
        "ts_ms": pa.array(ints * 3600, pa.timestamp("ms")),
        "ts_us": pa.array(ints * 3600, pa.timestamp("us")),
        "ts_ns_utc": pa.array(ints * 3600, pa.timestamp("ns", "UTC")),
        "ts_us_tz": pa.array(ints * 3600, pa.timestamp("us", "America/New_York")),
        "duration_s": pa.array(ints, pa.duration("s")),
        "duration_ns": pa.array(ints, pa.duration("ns")),
        "decimal128": pa.array([decimal.Decimal(int(i)) / 100 for i in ints], pa.decimal128(10, 2)),
        "decimal256": pa.array([decimal.Decimal(int(i)) / 1000 for i in ints], pa.decimal256(40, 3)),
        "fixed_binary": pa.array([bytes([i % 256]) * 4 for i in range(n)], pa.binary(4)),
        "list_int": pa.array([list(range(i % 4)) for i in range(n)], pa.list_(pa.int32())),
        "list_str": pa.array([[f"a{j}" for j in range(i % 3)] for i in range(n)], pa.list_(pa.string())),
        "large_list": pa.array([list(range(i % 3)) for i in range(n)], pa.large_list(pa.int64())),
        "list_list": pa.array([[list(range(j)) for j in range(i % 3)] for i in range(n)], pa.list_(pa.list_(pa.int16()))),
        "struct": pa.array(
            [{"x": i, "y": f"y{i}", "z": [i] * (i % 2)} for i in range(n)],
            pa.struct([("x", pa.int32()), ("y", pa.string()), ("z", pa.list_(pa.int64()))]),
        ),
        "list_struct": pa.array(
            [[{"a": i, "b": float(j)} for j in range(i % 3)] for i in range(n)],
            pa.list_(pa.struct([("a", pa.int64()), ("b", pa.float64())])),
        ),
        "vector": pa.array([rng.random(8).astype(np.float32).tolist() for _ in range(n)], pa.list_(pa.float32(), 8)),
        "fsl_int": pa.array([[i, i + 1] for i in range(n)], pa.list_(pa.int64(), 2)),
        "dict": pa.array([["red", "green", "blue"][i % 3] for i in range(n)]).dictionary_encode(),
    }
    if nulls:
        for name in list(columns):
            if name == "struct":
                # 2.0 cannot store struct nulls: put the nulls in the children instead
                columns["struct_nulls"] = pa.array(
                    [{"x": None if i % 3 == 1 else i, "y": None if i % 4 == 1 else f"y{i}", "z": None if i % 5 == 0 else [i]}
                     for i in range(n)],
                    columns[name].type,
                )
                continue
            if name == "dict":
                columns["dict_nulls"] = pa.array(
                    [None if i % 3 == 1 else ["red", "green"][i % 2] for i in range(n)]
                ).dictionary_encode()
                continue
            columns[f"{name}_nulls"] = _with_nulls(columns[name])
        columns["all_null"] = pa.nulls(n, pa.int32())
        columns["list_items_null"] = pa.array(
            [[None if j % 2 else j for j in range(i % 4)] if i % 5 else None for i in range(n)], pa.list_(pa.int32())
        )
        columns["list_empty_and_null"] = pa.array(
            [[] if i % 3 == 0 else (None if i % 3 == 1 else [str(i)]) for i in range(n)], pa.list_(pa.string())
        )
    return pa.table(columns)
