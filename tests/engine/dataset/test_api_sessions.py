"""``LanceFragment.open_session`` (``FragmentSession``) and ``lance.Session`` /
``LanceDataset.session()`` call for call against pylance 14."""

from __future__ import annotations

from types import ModuleType

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError, InvalidRowSelectionError

ENGINES = [lance, lance_format]


def _fragment(engine: ModuleType, uri: str):
    engine.write_dataset(pa.table({"id": list(range(10)), "v": [f"x{i}" for i in range(10)]}), uri)
    engine.dataset(uri).delete("id in (1, 3)")
    return engine.dataset(uri).get_fragments()[0]


def _takes(engine: ModuleType, uri: str) -> list:
    fragment = _fragment(engine, uri)
    session = fragment.open_session()
    narrow = fragment.open_session(columns=["v"], with_row_address=True)
    return [session.take([0, 1, 2, 5]).to_pydict(), session.take(pa.array([7], pa.uint32())).to_pydict(),
            session.take([]).to_pydict(), session.take([1, 1, 3]).to_pydict(), narrow.take([0, 2]), narrow.take([3, 4, 7]).schema,
            fragment.take([0, 1, 2, 5]).to_pydict()]


def test_fragment_session_takes_like_pylance(tmp_path):
    ours = _takes(lance_format, str(tmp_path / "ours"))
    assert ours == _takes(lance, str(tmp_path / "theirs"))
    assert ours[0] == {"id": [0, 2, 4, 7], "v": ["x0", "x2", "x4", "x7"]}  # positions among live rows
    assert ours[4].to_pydict() == {"v": ["x0", "x4"], "_rowaddr": [0, 4]}
    assert isinstance(lance_format.fragment.FragmentSession, type)


@pytest.mark.parametrize("indices", [[2, 0], [2, 2, 1], [8], [-1]])
def test_fragment_session_refuses_like_pylance(tmp_path, indices):
    theirs = _fragment(lance, str(tmp_path / "theirs")).open_session()
    ours = _fragment(lance_format, str(tmp_path / "ours")).open_session()
    with pytest.raises((OSError, OverflowError)) as expected:
        theirs.take(indices)
    with pytest.raises(InvalidRowSelectionError) as raised:
        ours.take(indices)
    assert isinstance(raised.value, OSError)
    if "increasing" in str(expected.value):  # the same offsets named
        assert str(expected.value).split(", /")[0].split("input: ")[-1] in str(raised.value)


def test_fragment_session_unknown_column(tmp_path):
    with pytest.raises((OSError, ValueError), match="nope"):
        _fragment(lance, str(tmp_path / "theirs")).open_session(columns=["nope"])
    with pytest.raises(InvalidInputError, match="nope"):
        _fragment(lance_format, str(tmp_path / "ours")).open_session(columns=["nope"])


def test_session_is_shared_and_caches_manifests(tmp_path, monkeypatch):
    uri = str(tmp_path / "t")
    lance_format.write_dataset(pa.table({"a": [1]}), uri)
    lance_format.write_dataset(pa.table({"a": [2]}), uri, mode="append")
    for engine in ENGINES:
        session = engine.Session(metadata_cache_size_bytes=1 << 20)
        first = engine.dataset(uri, session=session)
        assert first.session().is_same_as(session)
        assert not engine.dataset(uri).session().is_same_as(session)  # each dataset has its own by default
        assert session.index_cache_size_bytes() == 0
        assert session.size_bytes() > 0
        assert repr(session).startswith("Session(index_cache_size_bytes=0, metadata_cache_size_bytes=")
    # a version read once through the session is not read from the store again
    session = lance_format.Session()
    lance_format.dataset(uri, version=1, session=session)
    cached = session.size_bytes()
    from lance_format.io.object_store import ObjectStore

    reads: list[str] = []
    original = ObjectStore.read_bytes
    monkeypatch.setattr(ObjectStore, "read_bytes", lambda self, path: reads.append(path) or original(self, path))
    again = lance_format.dataset(uri, version=1, session=session)
    assert again.to_table() == pa.table({"a": [1]})
    assert not [p for p in reads if p.startswith("_versions/")]
    assert session.size_bytes() > cached  # the scan cached its data file's metadata, as pylance's does
    assert again.checkout_version(2).session().is_same_as(session)


def test_session_capacity_and_arguments():
    tiny = lance_format.Session(metadata_cache_size_bytes=0)
    assert tiny.size_bytes() == 0
    with pytest.raises(InvalidInputError):
        lance_format.Session(metadata_cache_size_bytes=-1)
    with pytest.raises(InvalidInputError):
        lance_format.Session(index_cache_size_bytes=1, index_cache_backend="moka://")
    with pytest.raises(InvalidInputError):
        lance_format.dataset("/nonexistent", session=object())


def test_datasets_and_sessions_pickle(tmp_path):
    """A dataset sent to a worker (Spark, multiprocessing) takes its session along, emptied."""
    import pickle

    session = lance_format.Session(metadata_cache_size_bytes=1 << 20)
    ds = lance_format.write_dataset(pa.table({"a": [1, 2]}), str(tmp_path / "t"))
    ds = lance_format.dataset(str(tmp_path / "t"), session=session)
    assert session.size_bytes() > 0
    copy = pickle.loads(pickle.dumps(ds))
    assert copy.to_table() == pa.table({"a": [1, 2]})
    restored = pickle.loads(pickle.dumps(session))
    assert restored.size_bytes() == 0 and not restored.is_same_as(session)


def test_scans_cache_file_metadata_like_pylance(tmp_path):
    """A dataset's own session (none given) grows when a scan opens data files, in both engines,
    and a second scan of the same files adds nothing."""
    uri = str(tmp_path / "t")
    lance.write_dataset(pa.table({"a": range(1000)}), uri, max_rows_per_file=250)
    for engine in ENGINES:
        ds = engine.dataset(uri)
        before = ds.session().size_bytes()
        ds.scanner().to_table()
        after = ds.session().size_bytes()
        assert after > before
        ds.to_table()
        assert ds.session().size_bytes() == after
