"""``cleanup_old_versions(delete_rate_limit=N)``: files are deleted one at a time, ``1/N`` seconds
apart (a fake clock records the waits, so the test takes no time), with the same result as
pylance's cleanup of the same history; a limit of 0 is refused as pylance refuses it."""

from __future__ import annotations

import shutil
from datetime import timedelta

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.table import cleanup

ORDERS = pa.table({"id": range(50), "email": [f"c{i}@example.com" if i % 4 else None for i in range(50)]})


def _history(uri: str) -> None:
    for mode in ("create", "overwrite", "overwrite", "overwrite"):
        lance.write_dataset(ORDERS, uri, mode=mode)


def test_paced_deletes_like_pylance(tmp_path, monkeypatch):
    ours_uri, theirs_uri = str(tmp_path / "o"), str(tmp_path / "p")
    _history(ours_uri)
    shutil.copytree(ours_uri, theirs_uri)
    clock = [100.0]
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(round(seconds, 6))
        clock[0] += seconds

    monkeypatch.setattr(cleanup.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(cleanup.time, "sleep", sleep)
    ours = lance_format.dataset(ours_uri).cleanup_old_versions(older_than=timedelta(0), delete_rate_limit=4)
    monkeypatch.undo()
    theirs = lance.dataset(theirs_uri).cleanup_old_versions(older_than=timedelta(0))
    assert (ours.old_versions, ours.bytes_removed) == (theirs.old_versions, theirs.bytes_removed) == (3, ours.bytes_removed)
    removed = ours.old_versions + ours.data_files_removed + ours.transaction_files_removed
    assert waits == [0.25] * (removed - 1)  # the first delete goes at once
    assert lance.dataset(ours_uri).to_table().equals(ORDERS)


@pytest.mark.parametrize("engine", [lance, lance_format])
def test_zero_rate_is_refused(engine, tmp_path):
    uri = str(tmp_path / "t")
    _history(uri)
    with pytest.raises(OSError, match="delete_rate_limit must be greater than 0"):
        engine.dataset(uri).cleanup_old_versions(older_than=timedelta(0), delete_rate_limit=0)
    assert len(engine.dataset(uri).versions()) == 4
