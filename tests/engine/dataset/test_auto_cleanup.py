"""Official Lance's automatic cleanup (``lance.auto_cleanup.*``), both ways against pylance."""

from __future__ import annotations

import os
import time

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError
from lance_format.table.auto_cleanup import format_duration, parse_duration

ENGINES = {"ours": lance_format, "pylance": lance}


@pytest.mark.parametrize("seconds", [0, 59, 60, 90, 3600, 3661, 86400, 14 * 86400, 30 * 86400, 34_560_000, 31_557_600])
def test_older_than_is_written_like_pylance(tmp_path, seconds):
    options = {"interval": 3, "older_than_seconds": seconds}
    ours = lance_format.write_dataset(pa.table({"x": [1]}), str(tmp_path / "o"), auto_cleanup_options=options)
    theirs = lance.write_dataset(pa.table({"x": [1]}), str(tmp_path / "p"), auto_cleanup_options=options)
    assert ours.config() == theirs.config()
    assert parse_duration(format_duration(seconds)).total_seconds() == seconds


def test_parse_duration_accepts_humantime_and_refuses_junk():
    assert parse_duration("1h 30m").total_seconds() == 5400
    assert parse_duration("2weeks").total_seconds() == 14 * 86400
    assert parse_duration("500ms").total_seconds() == 0.5
    for bad in ("", "soon", "5 parsecs", "12"):
        with pytest.raises(InvalidInputError):
            parse_duration(bad)


def _versions_on_disk(path: str) -> int:
    return len([n for n in os.listdir(os.path.join(path, "_versions")) if n.endswith(".manifest")])


@pytest.mark.parametrize("creator, writer", [("ours", "ours"), ("ours", "pylance"), ("pylance", "ours")])
def test_every_nth_commit_cleans_up(tmp_path, creator, writer):
    path = str(tmp_path / "t.lance")
    ENGINES[creator].write_dataset(pa.table({"x": [0]}), path,
                                   auto_cleanup_options={"interval": 2, "older_than_seconds": 0})
    time.sleep(0.01)
    ENGINES[writer].write_dataset(pa.table({"x": [1]}), path, mode="append")  # version 2: cleanup (sees v1)
    assert _versions_on_disk(path) == 2  # v1 is the version the writer read: kept
    ENGINES[writer].write_dataset(pa.table({"x": [2]}), path, mode="append")  # version 3: no cleanup
    assert _versions_on_disk(path) == 3
    time.sleep(0.01)
    ENGINES[writer].write_dataset(pa.table({"x": [3]}), path, mode="append")  # version 4: cleans v1, v2
    assert sorted(v["version"] for v in lance_format.dataset(path).versions()) == [3, 4]
    assert sorted(v["version"] for v in lance.dataset(path).versions()) == [3, 4]
    for engine in ENGINES.values():
        assert sorted(engine.dataset(path).to_table().column("x").to_pylist()) == [0, 1, 2, 3]


def test_tagged_versions_survive_and_the_commit_never_fails(tmp_path):
    path = str(tmp_path / "t.lance")
    ds = lance_format.write_dataset(pa.table({"x": [0]}), path)
    ds.tags.create("keep", 1)
    ds.enable_auto_cleanup({"interval": 1, "older_than_seconds": 0})
    assert ds.config()["lance.auto_cleanup.interval"] == "1"
    for i in range(3):
        lance_format.write_dataset(pa.table({"x": [i]}), path, mode="append")
    versions = [v["version"] for v in lance_format.dataset(path).versions()]
    assert 1 in versions and versions[-1] == 5 and len(versions) < 5
    # a broken setting is logged, and the commit stands
    lance_format.dataset(path).update_config({"lance.auto_cleanup.older_than": "not a duration"})
    assert lance_format.write_dataset(pa.table({"x": [9]}), path, mode="append").count_rows() == 5
    ds = lance_format.dataset(path)
    ds.disable_auto_cleanup()
    assert "lance.auto_cleanup.interval" not in ds.config()


def test_options_only_apply_to_a_new_table(tmp_path):
    path = str(tmp_path / "t.lance")
    lance_format.write_dataset(pa.table({"x": [0]}), path)
    ds = lance_format.write_dataset(pa.table({"x": [1]}), path, mode="overwrite",
                                    auto_cleanup_options={"interval": 1, "older_than_seconds": 0})
    assert ds.config() == {} == lance.dataset(path).config()


@pytest.mark.parametrize("kwargs, error", [
    ({"auto_cleanup_options": {"interval": 0, "older_than_seconds": 1}}, InvalidInputError),
    ({"auto_cleanup_options": {"interval": 2}}, InvalidInputError),
    ({"max_rows_per_group": 0}, InvalidInputError),
    ({"commit_lock": object()}, InvalidInputError),
    ({"no_such_option": 1}, InvalidInputError),
    ({"use_legacy_format": True, "data_storage_version": "2.1"}, InvalidInputError),
])
def test_write_options_refused(tmp_path, kwargs, error):
    with pytest.raises(error):
        lance_format.write_dataset(pa.table({"x": [0]}), str(tmp_path / "t"), **kwargs)
    assert not os.path.exists(tmp_path / "t" / "_versions")


def test_write_options_accepted_like_pylance(tmp_path):
    for name, engine in ENGINES.items():
        ds = engine.write_dataset(pa.table({"x": list(range(10))}), str(tmp_path / name), max_rows_per_group=4,
                                  data_cache_bytes=1 << 20, max_page_bytes=1 << 16, use_legacy_format=False)
        assert ds.count_rows() == 10
    legacy = lance_format.write_dataset(pa.table({"x": [1, 2]}), str(tmp_path / "legacy"), use_legacy_format=True)
    assert legacy.data_storage_version == lance.dataset(str(tmp_path / "legacy")).data_storage_version


def test_write_progress_is_called_per_file_like_pylance(tmp_path):
    from lance.progress import FragmentWriteProgress

    class Recorder(FragmentWriteProgress):
        def __init__(self) -> None:
            self.events: list[tuple[str, int]] = []

        def begin(self, fragment, **kwargs) -> None:
            self.events.append(("begin", len(fragment.files)))

        def complete(self, fragment, **kwargs) -> None:
            self.events.append(("complete", fragment.physical_rows))

    ours = Recorder()
    lance_format.write_dataset(pa.table({"x": list(range(10))}), str(tmp_path / "o"), max_rows_per_file=4,
                               progress=ours)
    assert ours.events == [("begin", 0), ("complete", 4), ("begin", 0), ("complete", 4), ("begin", 0),
                           ("complete", 2)]
    theirs = Recorder()
    lance.write_dataset(pa.table({"x": list(range(10))}), str(tmp_path / "p"), max_rows_per_file=4, progress=theirs)
    assert theirs.events[:4] == ours.events[:4]  # (pylance 14 does not report its last file's completion)
