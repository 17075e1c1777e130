"""``LanceDataset.migrate_manifest_paths_v2`` against pylance 14: tables written with V1 manifest
names (by either engine) are renamed to V2 names alike, then read and appended to by both."""

from __future__ import annotations

import os
import shutil
from types import ModuleType

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import CorruptFileError
from lance_format.io import object_store_for
from lance_format.table.naming import U64_MAX, migrate_to_v2_names

ENGINES = [lance, lance_format]


def _v1_table(engine: ModuleType, uri: str) -> None:
    engine.write_dataset(pa.table({"a": [1, 2]}), uri, enable_v2_manifest_paths=False)
    engine.write_dataset(pa.table({"a": [3]}), uri, mode="append")


def _manifests(uri: str) -> list[str]:
    return sorted(n for n in os.listdir(os.path.join(uri, "_versions")) if n.endswith(".manifest"))


@pytest.mark.parametrize("writer", ENGINES, ids=["pylance_v1", "ours_v1"])
def test_migration_like_pylance(tmp_path, writer):
    outcomes = []
    for migrator in ENGINES:
        uri = str(tmp_path / migrator.__name__)
        _v1_table(writer, uri)
        assert _manifests(uri) == ["1.manifest", "2.manifest"]
        ds = migrator.dataset(uri, version=1)
        ds.migrate_manifest_paths_v2()
        listed = _manifests(uri)
        ds.migrate_manifest_paths_v2()  # idempotent
        assert _manifests(uri) == listed
        migrator.write_dataset(pa.table({"a": [4]}), uri, mode="append")
        outcomes.append((ds.version, listed, _manifests(uri),
                         [(e.dataset(uri).to_table()["a"].to_pylist(), e.dataset(uri, version=1).count_rows(),
                           [v["version"] for v in e.dataset(uri).versions()]) for e in ENGINES]))
    assert outcomes[0] == outcomes[1]
    version, listed, after, reads = outcomes[1]
    assert version == 2  # the object moved to the latest version
    assert listed == [f"{U64_MAX - 2:020d}.manifest", f"{U64_MAX - 1:020d}.manifest"]
    assert after[0] == f"{U64_MAX - 3:020d}.manifest"  # later commits keep V2 names
    assert reads[0] == reads[1] == ([1, 2, 3, 4], 2, [1, 2, 3])


def test_interrupted_migration_is_finished(tmp_path):
    """A run that copied a manifest to its V2 name but did not remove the V1 one leaves a
    directory neither engine opens; running the migration on the store again finishes it."""
    uri = str(tmp_path / "t")
    _v1_table(lance, uri)
    versions = os.path.join(uri, "_versions")
    shutil.copy(os.path.join(versions, "1.manifest"), os.path.join(versions, f"{U64_MAX - 1:020d}.manifest"))
    with pytest.raises(ValueError, match="naming schemes"):
        lance.dataset(uri)
    with pytest.raises(CorruptFileError, match="mixes V1 and V2"):
        lance_format.dataset(uri)
    assert migrate_to_v2_names(object_store_for(uri)) == 2
    assert _manifests(uri) == [f"{U64_MAX - 2:020d}.manifest", f"{U64_MAX - 1:020d}.manifest"]
    assert lance.dataset(uri).to_table() == lance_format.dataset(uri).to_table() == pa.table({"a": [1, 2, 3]})
    assert lance.dataset(uri, version=1).count_rows() == 2


def test_v2_table_is_left_alone(tmp_path):
    uri = str(tmp_path / "t")
    lance_format.write_dataset(pa.table({"a": [1]}), uri)
    before = _manifests(uri)
    lance_format.dataset(uri).migrate_manifest_paths_v2()
    assert _manifests(uri) == before == [f"{U64_MAX - 1:020d}.manifest"]
