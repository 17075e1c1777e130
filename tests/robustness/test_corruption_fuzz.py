"""Random damage to every file of a table: a typed error or the right answer, never a crash.

Tables written by official Lance (file versions 2.0 and 2.2) and by this engine, with several
fragments, deletion files, stable row ids and nested, nullable and string columns, are damaged
one file at a time (bit flips, zeroed ranges, truncation) and read back. The rules:

* every failure is a :class:`LanceError` (no ``IndexError``, ``struct.error``, segfault, ...);
* a truncated file is always noticed: the answer is an error or exactly the undamaged answer;
* a read that succeeds returns the table's column types and no more rows than the fragments hold.
  Flipped bytes inside page values, deletion bitmaps or the manifest's strings (a column name)
  can change values silently (Lance files carry no checksums), the only way an answer may differ.

The seed is fixed, so a failure is reproducible; the whole file runs in well under a minute.
"""

from __future__ import annotations

import os
import random
import shutil

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import LanceError

ITERATIONS = 200


def _source_table(n: int) -> pa.Table:
    return pa.table({
        "id": pa.array(range(n), pa.int64()),
        "email": pa.array([None if i % 11 == 0 else f"user{i}@example.com" for i in range(n)]),
        "tags": pa.array([[f"t{i % 3}", "x"] if i % 5 else None for i in range(n)], pa.list_(pa.string())),
        "point": pa.array([{"x": float(i), "y": None if i % 7 == 0 else i} for i in range(n)],
                          pa.struct([("x", pa.float64()), ("y", pa.int32())])),
        "vec": pa.array([[float(i)] * 4 for i in range(n)], pa.list_(pa.float32(), 4)),
    })


def _build(root: str, writer: str, version: str) -> str:
    uri = os.path.join(root, f"{writer}-{version}.lance")
    module = lance if writer == "pylance" else lance_format
    data = _source_table(300)
    module.write_dataset(data.slice(0, 150), uri, data_storage_version=version, enable_stable_row_ids=True)
    module.write_dataset(data.slice(150), uri, mode="append")
    ds = module.dataset(uri)
    ds.delete("id % 13 = 0")
    ds.delete("id = 200")
    return uri


def _read(uri: str) -> tuple[pa.Table, int]:
    ds = lance_format.dataset(uri)
    table = ds.to_table(with_row_id=True)
    count = ds.count_rows()
    if count:
        ds.take([0, count - 1])
        ds.to_table(filter="id > 100 AND email IS NOT NULL", columns=["id", "tags"])
    return table, count


def _damage(path: str, rng: random.Random) -> str:
    raw = bytearray(open(path, "rb").read())
    kind = rng.choice(["flip", "flip", "zero", "truncate"])
    if not raw:
        return "empty"
    if kind == "flip":
        for _ in range(rng.randint(1, 3)):
            raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
    elif kind == "zero":
        start = rng.randrange(len(raw))
        raw[start: start + rng.randint(1, 16)] = bytes(len(raw[start: start + 16]))[: rng.randint(1, 16)]
    else:
        del raw[rng.randrange(len(raw)):]
    with open(path, "wb") as f:
        f.write(bytes(raw))
    return kind


@pytest.mark.parametrize("writer, version", [("pylance", "2.0"), ("pylance", "2.2"), ("ours", "2.1")])
def test_random_damage_gives_a_typed_error_or_the_right_answer(tmp_path, writer, version):
    pristine = _build(str(tmp_path), writer, version)
    expected, expected_count = _read(pristine)
    physical = sum(f.physical_rows for f in lance_format.dataset(pristine).get_fragments())
    files = sorted(
        os.path.relpath(os.path.join(d, n), pristine)
        for d, _, names in os.walk(pristine) for n in names
    )
    assert any(f.startswith("_deletions/") for f in files) and any(f.startswith("data/") for f in files)
    rng = random.Random(f"{writer}-{version}{os.environ.get('LANCE_FUZZ_SEED', '')}")
    outcomes: dict[str, int] = {}
    for iteration in range(ITERATIONS):
        victim_uri = str(tmp_path / f"victim-{iteration}")
        shutil.copytree(pristine, victim_uri)
        victim = rng.choice(files)
        kind = _damage(os.path.join(victim_uri, victim), rng)
        context = f"iteration {iteration}: {kind} of {victim}"
        try:
            table, count = _read(victim_uri)
        except LanceError:
            outcomes["typed error"] = outcomes.get("typed error", 0) + 1
        except Exception as exc:  # noqa: BLE001 - the point of the test
            raise AssertionError(f"{context}: untyped {type(exc).__name__}: {exc}") from exc
        else:
            same = table.equals(expected) and count == expected_count
            outcomes["same answer" if same else "values changed"] = outcomes.get(
                "same answer" if same else "values changed", 0) + 1
            if not same:
                assert kind != "truncate", f"{context}: a truncated file went unnoticed"
                # (a flipped letter in a column name is a value of the manifest: undetectable)
                assert table.schema.types == expected.schema.types, f"{context}: column types changed silently"
                assert count <= physical, f"{context}: {count} rows from {physical} physical rows"
        shutil.rmtree(victim_uri)
    assert outcomes.get("typed error", 0) >= ITERATIONS // 10, outcomes
