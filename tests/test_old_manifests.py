"""Commits on top of manifests written by old Lance releases (no ``max_fragment_id``)."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa

import lance_format
from lance_format.table.manifest import decode_manifest, encode_manifest
from tests.compat import assert_same_history


def _strip_max_fragment_id(uri: str) -> None:
    path = min((Path(uri) / "_versions").glob("*.manifest"), key=lambda p: p.name)  # V2 names: latest first
    mf = decode_manifest(path.read_bytes(), table=uri, path=str(path))
    assert mf.manifest.HasField("max_fragment_id")
    mf.manifest.ClearField("max_fragment_id")
    path.write_bytes(encode_manifest(mf.manifest, mf.transaction, mf.index_section))


def test_append_after_a_manifest_without_max_fragment_id(tmp_path):
    uri = str(tmp_path / "t")
    lance.write_dataset(pa.table({"x": range(30)}), uri, data_storage_version="2.0", max_rows_per_file=10)
    lance.dataset(uri).delete("x < 10")  # fragment 0 goes away: ids 1, 2 remain
    _strip_max_fragment_id(uri)
    lance_format.write_dataset(pa.table({"x": range(100, 105)}), uri, mode="append")
    ours = lance_format.dataset(uri)
    ids = [f.fragment_id for f in ours.get_fragments()]
    assert ids == [1, 2, 3]
    assert ours.manifest.max_fragment_id == 3
    theirs = lance.dataset(uri)  # official Lance refuses tables with duplicate fragment ids
    assert theirs.count_rows() == 25
    assert_same_history(uri)
    # and official Lance appends after ours without a clash either
    lance.write_dataset(pa.table({"x": [7]}), uri, mode="append")
    assert [f.fragment_id for f in lance_format.dataset(uri).get_fragments()] == [1, 2, 3, 4]


def test_update_after_a_manifest_without_max_fragment_id(tmp_path):
    uri = str(tmp_path / "t")
    lance.write_dataset(pa.table({"x": range(20), "s": ["a"] * 20}), uri, data_storage_version="2.0",
                        max_rows_per_file=10)
    _strip_max_fragment_id(uri)
    lance_format.dataset(uri).update({"s": "'b'"}, where="x = 3")
    ids = [f.fragment_id for f in lance_format.dataset(uri).get_fragments()]
    assert len(ids) == len(set(ids)) and max(ids) == 2
    assert_same_history(uri)
