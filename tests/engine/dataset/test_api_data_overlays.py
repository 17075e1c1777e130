"""``LanceOperation.DataOverlay`` (pylance 14) call for call: overlay files committed by either
engine give the same manifest bytes (``DataFragment.overlays``, field 11), feature flags and
transaction (field 115), and read the same values, dense and sparse, layered oldest first.

pylance 14.0.2 commits overlays and reads them through the dataset its commit returns, but it
cannot open such a table again (it sets reader flag 64 and then refuses it):
:func:`test_pylance_cannot_reopen_a_table_with_overlays` proves that, so the comparisons read
pylance's side through the object its commit returned.
"""

from __future__ import annotations

import shutil
from types import ModuleType

import lance
import pyarrow as pa
import pytest
from lance.file import LanceFileWriter

import lance_format
from lance_format.errors import InvalidInputError

ENGINES = [lance, lance_format]
BASE = pa.table({"id": list(range(6)), "v": [f"x{i}" for i in range(6)], "w": list(range(100, 106))})


def _overlay_file(uri: str, name: str, table: pa.Table) -> None:
    with LanceFileWriter(f"{uri}/data/{name}", table.schema, version="2.2") as writer:
        writer.write_batch(table)


def _file(engine: ModuleType, name: str, fields: list[int]):
    return engine.fragment.DataFile(name, fields=fields, column_indices=list(range(len(fields))),
                                    file_major_version=2, file_minor_version=2)


def _op(engine: ModuleType, groups: list[tuple[int, list[tuple[str, list[int], object]]]]):
    L = engine.LanceOperation
    return L.DataOverlay([L.DataOverlayGroup(fid, [L.DataOverlayFile(_file(engine, name, fields), offsets)
                                                   for name, fields, offsets in overlays])
                          for fid, overlays in groups])


def _setup(tmp_path, overlays: dict[str, pa.Table], deleting: str | None = None, **write) -> tuple[str, str]:
    """The same table (written by pylance) with the same overlay files, twice."""
    theirs, ours = str(tmp_path / "theirs"), str(tmp_path / "ours")
    lance.write_dataset(BASE, theirs, **write)
    if deleting:
        lance.dataset(theirs).delete(deleting)
    for name, table in overlays.items():
        _overlay_file(theirs, name, table)
    shutil.copytree(theirs, ours)
    return theirs, ours


def _commit_both(theirs: str, ours: str, groups, read_version: int = 1):
    committed = lance.LanceDataset.commit(theirs, _op(lance, groups), read_version=read_version)
    mine = lance_format.LanceDataset.commit(ours, _op(lance_format, groups), read_version=read_version)
    return committed, mine


def _op_shape(op) -> list:
    """A DataOverlay operation as plain values (pylance's bitmaps and ours compare as lists)."""
    def offsets(o):
        items = list(o)
        return [list(i) for i in items] if items and not isinstance(items[0], int) else items
    return [(type(op).__name__, g.fragment_id, [(o.data_file.path, list(o.data_file.fields), offsets(o.offsets),
                                                 o.committed_version) for o in g.overlays]) for g in op.groups]


def _reads(ds) -> list:
    return [ds.to_table().to_pydict(), ds.to_table(filter="w < 50 OR v = 'B'").to_pydict(),
            ds.take([4, 0, 2]).to_pydict(), ds.to_table(columns=["v"]).to_pydict(), ds.count_rows("w > 100")]


def _same_manifests(theirs: str, ours: str) -> None:
    a, b = lance_format.dataset(theirs).manifest, lance_format.dataset(ours).manifest
    assert [f.SerializeToString() for f in a.fragments] == [f.SerializeToString() for f in b.fragments]
    assert (a.reader_feature_flags, a.writer_feature_flags) == (b.reader_feature_flags, b.writer_feature_flags)
    assert a.reader_feature_flags & 64 and a.writer_feature_flags & 64  # pylance's "data overlays" flag


CASES = {
    "dense": [(0, [("o1.lance", [1, 2], [4, 1])])],
    "sparse": [(0, [("o1.lance", [1, 2], [[1], [0, 5]])])],
    "later_wins": [(0, [("o1.lance", [1, 2], [1, 4]), ("o2.lance", [1], [4, 5])])],
}
FILES = {"o1.lance": pa.table({"v": ["A", "B"], "w": [1, 2]}), "o2.lance": pa.table({"v": ["C", "D"]})}


@pytest.mark.parametrize("case", sorted(CASES))
def test_commit_and_read_like_pylance(tmp_path, case):
    theirs, ours = _setup(tmp_path, FILES)
    committed, mine = _commit_both(theirs, ours, CASES[case])
    expected = _reads(committed)
    assert _reads(mine) == expected
    assert _reads(lance_format.dataset(theirs)) == expected  # ours reads pylance's table
    _same_manifests(theirs, ours)
    for path in (theirs, ours):
        assert lance_format.dataset(path).read_transaction(2).operation == \
            lance_format.dataset(ours).read_transaction(2).operation
    assert _op_shape(committed.read_transaction(2).operation) == _op_shape(mine.read_transaction(2).operation)
    if case == "later_wins":
        assert expected[0]["v"] == ["x0", "A", "x2", "x3", "C", "D"]


def test_overlays_on_several_fragments_and_with_deletions(tmp_path):
    theirs, ours = _setup(tmp_path, FILES, deleting="id = 4", max_rows_per_file=3)
    groups = [(0, [("o1.lance", [1, 2], [0, 2])]), (1, [("o2.lance", [1], [0, 1])])]
    committed, mine = _commit_both(theirs, ours, groups, read_version=2)
    assert _reads(mine) == _reads(committed)
    assert committed.to_table()["v"].to_pylist() == ["A", "x1", "B", "C", "x5"]
    _same_manifests(theirs, ours)


def test_fragment_metadata_json_like_pylance(tmp_path):
    theirs, ours = _setup(tmp_path, FILES)
    committed, mine = _commit_both(theirs, ours, CASES["sparse"])
    ours_json = mine.get_fragments()[0].metadata.to_json()
    theirs_json = committed.get_fragments()[0].metadata.to_json()
    for data in (ours_json, theirs_json):
        for f in data["files"]:
            f.pop("path"), f.pop("file_size_bytes")
    assert ours_json == theirs_json
    assert ours_json["overlays"] == [{"data_file": ours_json["overlays"][0]["data_file"], "offsets": [[1], [0, 5]],
                                      "committed_version": 2}]
    import json

    # pylance's JSON, read here, describes the manifest's fragment byte for byte
    parsed = lance_format.fragment.FragmentMetadata.from_json(json.dumps(
        committed.get_fragments()[0].metadata.to_json()))
    from lance_format.dataset.fragment_metadata import fragment_to_proto

    assert fragment_to_proto(parsed).SerializeToString() == \
        lance_format.dataset(theirs).manifest.fragments[0].SerializeToString()


def test_pylance_cannot_reopen_a_table_with_overlays(tmp_path):
    theirs, ours = _setup(tmp_path, FILES)
    _commit_both(theirs, ours, CASES["dense"])
    for path in (theirs, ours):
        with pytest.raises(ValueError, match="Flags: 64"):
            lance.dataset(path)
        assert lance_format.dataset(path).to_table()["v"].to_pylist() == ["x0", "A", "x2", "x3", "B", "x5"]


def test_repeated_offsets_are_refused_like_pylance(tmp_path):
    theirs, ours = _setup(tmp_path, FILES)
    groups = [(0, [("o1.lance", [1, 2], [1, 1])])]
    with pytest.raises(ValueError):
        lance.LanceDataset.commit(theirs, _op(lance, groups), read_version=1)
    with pytest.raises(InvalidInputError):
        lance_format.LanceDataset.commit(ours, _op(lance_format, groups), read_version=1)
    assert lance_format.dataset(ours).version == 1


def test_sparse_offset_sets_not_matching_the_fields_like_pylance(tmp_path):
    """More sets than fields: the extra ones are unused; fewer: committed, but reading a field
    without a set fails (in both engines)."""
    theirs, ours = _setup(tmp_path, FILES)
    committed, mine = _commit_both(theirs, ours, [(0, [("o1.lance", [1, 2], [[1], [2], [3]])])])
    assert _reads(mine) == _reads(committed)
    _same_manifests(theirs, ours)
    theirs, ours = _setup(tmp_path / "fewer", FILES)
    committed, mine = _commit_both(theirs, ours, [(0, [("o1.lance", [1, 2], [[1]])])])
    _same_manifests(theirs, ours)
    assert committed.to_table(columns=["id", "v"]) == mine.to_table(columns=["id", "v"])
    with pytest.raises(ValueError, match="coverage has 1 bitmaps"):  # pyarrow.ArrowInvalid
        committed.to_table()
    with pytest.raises(InvalidInputError, match="coverage has 1 bitmaps"):
        mine.to_table()


def test_missing_fragment_is_refused_like_pylance(tmp_path):
    theirs, ours = _setup(tmp_path, FILES)
    groups = [(7, [("o1.lance", [1, 2], [0, 1])])]
    with pytest.raises((ValueError, OSError)):
        lance.LanceDataset.commit(theirs, _op(lance, groups), read_version=1)
    with pytest.raises(InvalidInputError):
        lance_format.LanceDataset.commit(ours, _op(lance_format, groups), read_version=1)


def test_later_operations_keep_or_materialize_overlays(tmp_path):
    theirs, ours = _setup(tmp_path, FILES, max_rows_per_file=3)
    _commit_both(theirs, ours, [(0, [("o1.lance", [1, 2], [1, 2])])])
    ds = lance_format.dataset(ours)
    expected = ds.to_table()
    ds.delete("id = 0")  # the fragment keeps its overlays
    assert ds.to_table() == expected.slice(1)
    assert len(ds.get_fragments()[0].metadata.overlays) == 1
    ds.optimize.compact_files(target_rows_per_fragment=100)  # rewritten: values materialized
    assert ds.to_table() == expected.slice(1)
    assert all(not f.metadata.overlays for f in ds.get_fragments())
    assert ds.manifest.reader_feature_flags & 64 == 0
