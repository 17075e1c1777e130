"""BTREE and BITMAP indices, both directions against pylance 14.0.2.

Tables: int64 ids (shuffled), float64 with nulls, a skewed category with nulls, e-mail-like
strings, timestamps with nulls; deletions, an appended fragment the index does not cover; file
versions 2.0 and 2.2, with and without stable row ids.

- Indices this engine builds are used by pylance (its plan shows ``ScalarIndexQuery``) and answer
  exactly as pylance's full scan; ``describe_indices`` and ``stats.index_stats`` agree.
- Indices pylance builds answer here exactly as our full scan (and pylance's answers).
- The manifest's ``IndexMetadata`` and the index files match pylance's field by field.
"""

from __future__ import annotations

import warnings
from datetime import datetime, timedelta

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_format
from lance_format.file import LanceFileReader
from lance_format.index.scalar.common import deserialize_tree_map

N = 3000
CATEGORIES = ["echo", "alpha", "bravo", "charlie", None]
FILTERS = {
    "id": ["id = 17", "id = 3", "id < 40", "id >= 2950", "id BETWEEN 100 AND 130", "id IN (5, 77, 1999, 2999, 4000)",
           "id IS NULL", "id IS NOT NULL AND id < 10", "NOT (id > 25)", "id != 5 AND id < 12"],
    "x": ["x > 0.995", "x < 0.002", "x IS NULL", "x BETWEEN 0.5 AND 0.51"],
    "cat": ["cat = 'echo'", "cat = 'charlie'", "cat IN ('alpha', 'bravo')", "cat IS NULL", "cat > 'c'",
            "cat = 'zulu'", "cat = 'charlie' AND id < 1500", "cat = 'bravo' OR id = 12"],
    "email": ["email = 'user17@example.com'", "email < 'user2'", "email IS NULL"],
    "ts": ["ts = TIMESTAMP '2024-01-01 00:07:00'", "ts > TIMESTAMP '2024-01-03 01:00:00'", "ts IS NULL"],
}


def _table(seed: int, n: int, start: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = rng.permutation(n) + start
    x = rng.random(n)
    cats = rng.choice(len(CATEGORIES), n, p=[0.6, 0.2, 0.1, 0.06, 0.04])
    base = datetime(2024, 1, 1)
    ts = [None if i % 13 == 0 else base + timedelta(minutes=int(i) % 4000) for i in ids]
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "x": pa.array(x, mask=rng.random(n) < 0.08),
        "cat": pa.array([CATEGORIES[c] for c in cats], pa.string()),
        "email": pa.array([None if i % 17 == 0 else f"user{i}@example.com" for i in ids], pa.string()),
        "ts": pa.array(ts, pa.timestamp("us")),
    })


def _write(path: str, version: str, stable: bool) -> str:
    lance_format.write_dataset(_table(1, N), path, max_rows_per_file=1000, data_storage_version=version,
                               enable_stable_row_ids=stable)
    ds = lance_format.dataset(path)
    ds.delete("id % 9 = 0")
    if stable:
        ds.update({"x": "0.5"}, where="id = 44")  # a moved row keeps its row id
    return path


def _append(path: str) -> None:
    lance_format.write_dataset(_table(2, 200, start=N), path, mode="append")


@pytest.fixture(params=[("2.0", False), ("2.2", False), ("2.2", True), ("2.0", True)],
                ids=["v2.0", "v2.2", "v2.2-stable", "v2.0-stable"])
def layout(request):
    return request.param


def _rows(table: pa.Table) -> pa.Table:
    return table.sort_by("_rowid")


def _check_pylance_answers(path: str, columns: list[str]) -> None:
    theirs = lance.dataset(path)
    for column in columns:
        for sql in FILTERS[column]:
            indexed = theirs.to_table(filter=sql, with_row_id=True)
            scanned = theirs.to_table(filter=sql, with_row_id=True, use_scalar_index=False)
            assert _rows(indexed).equals(_rows(scanned)), sql
            assert "ScalarIndexQuery" in theirs.scanner(filter=sql).explain_plan(), sql


def _check_our_answers(path: str, columns: list[str]) -> None:
    ours, theirs = lance_format.dataset(path), lance.dataset(path)
    for column in columns:
        for sql in FILTERS[column]:
            indexed = ours.to_table(filter=sql, with_row_id=True)
            scanned = ours.to_table(filter=sql, with_row_id=True, use_scalar_index=False)
            assert _rows(indexed).equals(_rows(scanned)), sql
            assert _rows(indexed).equals(_rows(theirs.to_table(filter=sql, with_row_id=True))), sql
            assert ours.count_rows(sql) == indexed.num_rows, sql
            assert "ScalarIndexQuery" in ours.scanner(filter=sql).explain_plan(), sql


def _described(ds) -> list[tuple]:
    out = []
    for d in ds.describe_indices():
        segments = [(s.uuid, s.dataset_version_at_last_update, sorted(s.fragment_ids), s.index_version,
                     s.size_bytes, s.base_id) for s in d.segments]
        out.append((d.name, d.type_url, d.index_type, d.num_rows_indexed, list(d.fields), list(d.field_names),
                    d.total_size_bytes, segments))
    return out


def _check_descriptions_agree(path: str) -> None:
    ours, theirs = lance_format.dataset(path), lance.dataset(path)
    assert _described(ours) == _described(theirs)
    for d in theirs.describe_indices():
        assert ours.stats.index_stats(d.name) == theirs.stats.index_stats(d.name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert [{**i, "fragment_ids": sorted(i["fragment_ids"])} for i in ours.list_indices()] == \
            [{**i, "fragment_ids": sorted(i["fragment_ids"])} for i in theirs.list_indices()]


@pytest.mark.parametrize("index_type", ["BTREE", "BITMAP"])
def test_our_indices_answer_in_pylance(tmp_path, layout, index_type):
    version, stable = layout
    path = _write(str(tmp_path / "t.lance"), version, stable)
    ours = lance_format.dataset(path)
    columns = ["id", "x", "cat", "email", "ts"] if index_type == "BTREE" else ["cat", "ts", "id"]
    for column in columns:
        ours.create_scalar_index(column, index_type)
    _append(path)  # a fragment no index covers
    _check_pylance_answers(path, columns)
    _check_our_answers(path, columns)
    _check_descriptions_agree(path)


@pytest.mark.parametrize("index_type", ["BTREE", "BITMAP"])
def test_pylance_indices_answer_here(tmp_path, layout, index_type):
    version, stable = layout
    path = _write(str(tmp_path / "t.lance"), version, stable)
    theirs = lance.dataset(path)
    columns = ["id", "x", "cat", "email", "ts"] if index_type == "BTREE" else ["cat", "ts", "id"]
    for column in columns:
        theirs.create_scalar_index(column, index_type)
    _append(path)
    _check_our_answers(path, columns)
    _check_descriptions_agree(path)


def _index_files(path: str, name: str) -> dict[str, LanceFileReader]:
    ds = lance_format.dataset(path)
    (segment,) = [d for d in ds.describe_indices() if d.name == name][0].segments
    meta = [m for m in ds.manifest_file.index_section.indices if m.name == name][0]
    return {f.path: LanceFileReader(f"{path}/_indices/{segment.uuid}/{f.path}") for f in meta.files}


@pytest.mark.parametrize("version,stable", [("2.0", False), ("2.2", False), ("2.2", True)],
                         ids=["v2.0", "v2.2", "v2.2-stable"])
@pytest.mark.parametrize("index_type,column", [("BTREE", "id"), ("BTREE", "email"), ("BTREE", "ts"),
                                               ("BITMAP", "cat"), ("BITMAP", "ts")])
def test_metadata_and_files_match_pylance(tmp_path, version, stable, index_type, column):
    a = _write(str(tmp_path / "ours.lance"), version, stable)
    b = _write(str(tmp_path / "theirs.lance"), version, stable)
    lance_format.dataset(a).create_scalar_index(column, index_type)
    lance.dataset(b).create_scalar_index(column, index_type)
    mine = lance_format.dataset(a).manifest_file.index_section.indices[0]
    ref = lance_format.dataset(b).manifest_file.index_section.indices[0]
    for name in ("fields", "name", "dataset_version", "fragment_bitmap", "index_details", "index_version"):
        assert getattr(mine, name) == getattr(ref, name), name
    assert mine.HasField("index_version") and mine.HasField("created_at") and not mine.HasField("base_id")
    assert [f.path for f in mine.files] == [f.path for f in ref.files]
    assert len(mine.uuid.uuid) == 16 and mine.uuid.uuid != ref.uuid.uuid
    name = f"{column}_idx"
    ours, theirs = _index_files(a, name), _index_files(b, name)
    for file_name, reader in ours.items():
        other = theirs[file_name]
        assert (reader.metadata().major_version, reader.metadata().minor_version) == \
            (other.metadata().major_version, other.metadata().minor_version)
        assert reader.metadata().schema.equals(other.metadata().schema, check_metadata=True), file_name
        mine_table, ref_table = reader.read_all().to_table(), other.read_all().to_table()
        if file_name == "page_data.lance":  # ties may be ordered differently
            keys = [("values", "ascending"), ("ids", "ascending")]
            mine_table = mine_table.take(pc.sort_indices(mine_table, sort_keys=keys))
            ref_table = ref_table.take(pc.sort_indices(ref_table, sort_keys=keys))
        if file_name == "bitmap_page_lookup.lance":
            assert mine_table["keys"].equals(ref_table["keys"])
            for x, y in zip(mine_table["bitmaps"].to_pylist(), ref_table["bitmaps"].to_pylist()):
                assert np.array_equal(deserialize_tree_map(x), deserialize_tree_map(y))
        else:
            assert mine_table.equals(ref_table), file_name
