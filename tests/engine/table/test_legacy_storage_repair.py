"""A manifest that says storage version 0.1 over data files that are all 2.x (Lance 0.16 wrote such
tables) gets the files' version in the next commit, with a warning, as official Lance repairs it;
one holding both 0.1 and 2.x files is refused with official Lance's advice to roll back.
(pylance's own test runs this on Lance 0.16 tables; here the manifests are built directly.)"""

from __future__ import annotations

import pytest

from lance_format.errors import CorruptFileError
from lance_format.proto import table_pb2
from lance_format.table.legacy_manifest import repair_legacy_storage_version


def _manifest(declared: str, *versions: tuple[int, int]) -> table_pb2.Manifest:
    manifest = table_pb2.Manifest()
    manifest.data_format.file_format = "lance"
    manifest.data_format.version = declared
    for i, (major, minor) in enumerate(versions):
        fragment = manifest.fragments.add(id=i, physical_rows=10)
        fragment.files.add(path=f"{i}.lance", fields=[0], file_major_version=major, file_minor_version=minor)
    return manifest


def test_all_v2_files_fix_the_declared_version():
    manifest = _manifest("0.1", (0, 3), (0, 3))
    with pytest.warns(UserWarning, match="Data storage version 0.1 is less than the actual file version 2.0"):
        repair_legacy_storage_version(manifest)
    assert manifest.data_format.version == "2.0"


@pytest.mark.parametrize("declared, versions", [("0.1", [(0, 1), (0, 2)]), ("0.1", []), ("2.1", [(2, 1)]),
                                                ("2.0", [(0, 3), (2, 0)])])
def test_left_as_they_are(declared, versions):
    manifest = _manifest(declared, *versions)
    repair_legacy_storage_version(manifest)
    assert manifest.data_format.version == declared


def test_mixed_files_are_refused():
    with pytest.raises(CorruptFileError, match="mixture of file versions. You will need to rollback to an earlier "
                                               "version: All data files must have the same version. Detected both "
                                               "2.0 and 0.1"):
        repair_legacy_storage_version(_manifest("0.1", (0, 3), (0, 2), (0, 3)))
