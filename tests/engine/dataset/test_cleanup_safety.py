"""cleanup_old_versions never reaches outside the table, and removes abandoned staging files."""

from __future__ import annotations

import os
import time
from datetime import timedelta

import lance
import pyarrow as pa

import lance_format

WEEK_AND_A_DAY = 8 * 24 * 3600


def _table_with_old_version(tmp_path) -> str:
    uri = str(tmp_path / "t.lance")
    lance_format.write_dataset(pa.table({"id": [1, 2]}), uri)
    lance_format.write_dataset(pa.table({"id": [3]}), uri, mode="overwrite")
    return uri


def _cleanup(uri: str, **kwargs):
    return lance_format.dataset(uri).cleanup_old_versions(older_than=timedelta(0), **kwargs)


def test_symlinked_directory_inside_data_is_not_followed(tmp_path):
    uri = _table_with_old_version(tmp_path)
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "keep.lance").write_bytes(b"not the table's")
    os.symlink(outside, os.path.join(uri, "data", "linked"))
    os.symlink(outside / "keep.lance", os.path.join(uri, "data", "alias.lance"))

    stats = _cleanup(uri, delete_unverified=True)

    assert (outside / "keep.lance").read_bytes() == b"not the table's"
    assert stats.old_versions == 1 and stats.data_files_removed == 1  # the old version's own file
    assert lance_format.dataset(uri).to_table().to_pylist() == [{"id": 3}]
    assert lance.dataset(uri).to_table().to_pylist() == [{"id": 3}]


def test_abandoned_staging_files_are_removed_once_old(tmp_path):
    uri = _table_with_old_version(tmp_path)
    data = os.path.join(uri, "data")
    old, fresh = os.path.join(data, ".tmpAbC123"), os.path.join(data, ".tmpXyZ789")
    for path in (old, fresh):
        with open(path, "wb") as f:
            f.write(b"\0" * 1000)
    stale = time.time() - WEEK_AND_A_DAY
    os.utime(old, (stale, stale))

    stats = _cleanup(uri)
    assert not os.path.exists(old)  # an interrupted writer's file, older than any write in progress
    assert os.path.exists(fresh)  # may belong to a write still running
    assert stats.bytes_removed >= 1000

    _cleanup(uri, delete_unverified=True)
    assert not os.path.exists(fresh)
    assert lance.dataset(uri).to_table().to_pylist() == [{"id": 3}]


def test_staging_file_of_a_killed_official_lance_writer_is_cleaned(tmp_path):
    uri = _table_with_old_version(tmp_path)
    # the name official Lance gives a data file while writing it (data/.tmpXXXXXX)
    staging = os.path.join(uri, "data", ".tmpq1W2e3")
    with open(staging, "wb") as f:
        f.write(b"partial")
    _cleanup(uri)
    assert os.path.exists(staging)  # recent: its writer may still be running
    _cleanup(uri, delete_unverified=True)
    assert not os.path.exists(staging)
    assert lance.dataset(uri).to_table().to_pylist() == [{"id": 3}]
