"""INVERTED ``progress_callback`` events and ``format_version`` checks, against pylance 14.0.2."""

from __future__ import annotations

import uuid

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError, UnsupportedFeatureError

TEXTS = [f"order {i} shipped to user{i}@example.com see https://shop.example.org/p/{i % 7}" for i in range(150)]


def _table() -> pa.Table:
    return pa.table({"id": pa.array(range(150), pa.int64()),
                     "text": pa.array([None if i % 11 == 0 else t for i, t in enumerate(TEXTS)])})


def _tags(events: list) -> list[str]:
    return [f"{e.event}:{e.stage}" for e in events if e.event != "progress"]


def test_create_inverted_progress_stages_match_pylance(tmp_path):
    runs = {}
    for name, mod in (("ours", lance_format), ("pylance", lance)):
        ds = mod.write_dataset(_table(), str(tmp_path / name), max_rows_per_file=75)
        events: list = []
        ds.create_scalar_index("text", "INVERTED", remove_stop_words=False, progress_callback=events.append)
        runs[name] = events
    assert _tags(runs["ours"]) == _tags(runs["pylance"])
    for stage in ("tokenize_docs", "copy_partitions", "write_metadata"):
        last = [(e.completed, e.total, e.unit) for e in runs["ours"] if e.stage == stage][-1]
        assert last == [(e.completed, e.total, e.unit) for e in runs["pylance"] if e.stage == stage][-1]
    assert runs["ours"][-1].fraction == 1.0


def test_merge_index_metadata_progress_matches_pylance(tmp_path):
    runs = {}
    for name, mod in (("ours", lance_format), ("pylance", lance)):
        ds = mod.write_dataset(_table(), str(tmp_path / name), max_rows_per_file=50)
        segment = str(uuid.uuid4())
        for fragment in ds.get_fragments():
            ds.create_scalar_index("text", "INVERTED", name="t_idx", replace=False, index_uuid=segment,
                                   fragment_ids=[fragment.fragment_id], remove_stop_words=False)
        events: list = []
        ds.merge_index_metadata(segment, index_type="INVERTED", progress_callback=events.append)
        runs[name] = [(e.event, e.stage, e.completed, e.total) for e in events]
    assert runs["ours"] == runs["pylance"]


def test_callback_error_after_completion_is_ignored_but_earlier_errors_raise(tmp_path):
    def fail_on(tag: str):
        def callback(event) -> None:
            if f"{event.event}:{event.stage}" == tag:
                raise RuntimeError("callback failure")
        return callback

    ds = lance_format.write_dataset(_table(), str(tmp_path / "t"))
    ds.create_scalar_index("text", "INVERTED", progress_callback=fail_on("complete:write_metadata"))
    assert [i.index_type for i in ds.describe_indices()] == ["Inverted"]
    with pytest.raises(RuntimeError, match="callback failure"):
        ds.create_scalar_index("text", "INVERTED", replace=True, progress_callback=fail_on("start:load_data"))


@pytest.mark.parametrize("version", ["v4", 5, "two"])
def test_invalid_format_version_refused_as_pylance(tmp_path, version):
    theirs = lance.write_dataset(_table(), str(tmp_path / "p"))
    with pytest.raises(ValueError, match="unsupported FTS format version"):
        theirs.create_scalar_index("text", "INVERTED", format_version=version)
    ours = lance_format.write_dataset(_table(), str(tmp_path / "o"))
    with pytest.raises(InvalidInputError, match=f"unsupported FTS format version {version}, expected 1, 2, or 3"):
        ours.create_scalar_index("text", "INVERTED", format_version=version)
    assert ours.describe_indices() == []


def test_format_version_two_written_others_refused(tmp_path):
    ds = lance_format.write_dataset(_table(), str(tmp_path / "o"))
    for version in (1, "v3"):
        with pytest.raises(UnsupportedFeatureError, match="v2 layout only"):
            ds.create_scalar_index("text", "INVERTED", format_version=version)
    ds.create_scalar_index("text", "INVERTED", format_version="v2")
    assert ds.describe_indices()[0].segments[0].index_version == 2
    assert lance.dataset(ds.uri).describe_indices()[0].segments[0].index_version == 2


@pytest.mark.parametrize("params", [{}, {"with_position": True, "stem": False, "base_tokenizer": "whitespace",
                                         "max_token_length": None}, {"base_tokenizer": "ngram"}])
def test_inverted_describe_details_match_pylance(tmp_path, params):
    for name, writer in (("ours", lance_format), ("pylance", lance)):
        uri = str(tmp_path / name)
        writer.write_dataset(_table(), uri).create_scalar_index("text", "INVERTED", **params)
        theirs = lance.dataset(uri).describe_indices()[0].details
        assert theirs and lance_format.dataset(uri).describe_indices()[0].details == theirs
