"""``take_blobs`` / ``read_blobs`` / ``read_blob_ranges``, ``BlobFile`` and ``BlobColumn`` give what
pylance 14 gives, on blob tables written by either engine (blob v1 in 2.0 and 2.1) and by pylance
(blob v2 in 2.2: inline, packed and dedicated blobs)."""

from __future__ import annotations

import io

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import (
    BlobFileClosedError,
    ColumnNotFoundError,
    DeletedRowError,
    InvalidInputError,
    NotABlobColumnError,
)
from lance_format.io.object_store import ObjectStore

BLOB_META = {"lance-encoding:blob": "true"}
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("b", pa.large_binary(), metadata=BLOB_META)])
FIRST = [b"abc", None, b"", b"hello world", bytes(range(256)) * 300]
SECOND = [b"f1", None, b"f1b" * 30, b""]


def _rows(values: list, first_id: int) -> pa.Table:
    return pa.table({"id": pa.array(range(first_id, first_id + len(values)), pa.int64()),
                     "b": pa.array(values, pa.large_binary())}, schema=SCHEMA)


@pytest.fixture(params=[("2.0", lance), ("2.0", lance_format), ("2.1", lance), ("2.1", lance_format)],
                ids=["2.0-pylance", "2.0-ours", "2.1-pylance", "2.1-ours"])
def blob_uri(request, tmp_path) -> str:
    """Two fragments (the second appended by the other engine), with a deleted row."""
    version, writer = request.param
    other = lance_format if writer is lance else lance
    uri = str(tmp_path / "t")
    writer.write_dataset(_rows(FIRST, 0), uri, data_storage_version=version)
    other.write_dataset(_rows(SECOND, 10), uri, mode="append")
    writer.dataset(uri).delete("id = 0")
    return uri


@pytest.fixture
def v2_uri(tmp_path) -> str:
    uri = str(tmp_path / "v2")
    values = [b"a" * 10, None, b"", b"b" * 100_000, b"c" * 70_000, b"d" * 5_000_000]
    lance.write_dataset(pa.table({"id": range(len(values)), "b": lance.blob_array(values)}), uri,
                        data_storage_version="2.2")
    return uri


def _both(uri: str):
    return lance_format.dataset(uri), lance.dataset(uri)


def _contents(files) -> list[bytes | None]:
    return [None if f is None else f.readall() for f in files]


def test_take_blobs_by_indices_ids_and_addresses(blob_uri):
    ours, theirs = _both(blob_uri)
    n = theirs.count_rows()
    addresses = theirs.to_table(columns=[], with_row_address=True).column("_rowaddr").to_pylist()
    for selection in ({"indices": list(range(n))}, {"indices": [n - 1, 0, 0, 3]}, {"indices": pa.array([2], pa.int64())},
                      {"ids": addresses[::-1]}, {"addresses": addresses[1:4]}, {"indices": []}):
        mine, official = ours.take_blobs("b", **selection), theirs.take_blobs("b", **selection)
        assert [None if f is None else f.size() for f in mine] == [None if f is None else f.size() for f in official]
        assert _contents(mine) == _contents(official), selection
    # nulls are None, empty blobs are empty files, across both fragments
    assert _contents(ours.take_blobs("b", indices=list(range(n)))) == FIRST[1:] + SECOND


def test_read_blobs_and_ranges_match_pylance(blob_uri):
    ours, theirs = _both(blob_uri)
    for kwargs in ({"indices": [5, 0, 1, 0, 3]}, {"indices": [3], "preserve_order": True}, {"indices": []}):
        assert ours.read_blobs("b", **kwargs) == theirs.read_blobs("b", **kwargs), kwargs
    # without preserve_order the order is unspecified (pylance's varies): the same results
    unordered = {"indices": [5, 0, 1, 0], "preserve_order": False}
    assert sorted(ours.read_blobs("b", **unordered), key=repr) == sorted(theirs.read_blobs("b", **unordered), key=repr)
    requests = [(2, 1, 3), (0, 0, 0), (1, 0, 0), (2, 0, 11), (3, 100, 500), (6, 0, 3), (5, 0, 2)]
    assert (ours.read_blob_ranges("b", requests, selector="indices")
            == theirs.read_blob_ranges("b", requests, selector="indices"))
    assert (sorted(ours.read_blob_ranges("b", requests, selector="indices", preserve_order=False))
            == sorted(theirs.read_blob_ranges("b", requests, selector="indices", preserve_order=False)))
    address = theirs.to_table(columns=[], with_row_address=True).column("_rowaddr")[2].as_py()
    for selector in ("ids", "addresses"):
        assert (ours.read_blob_ranges("b", [(address, 6, 5)], selector=selector)
                == theirs.read_blob_ranges("b", [(address, 6, 5)], selector=selector) == [(0, address, b"world")])


def test_blob_v2_kinds_read_like_pylance(v2_uri):
    ours, theirs = _both(v2_uri)
    everything = list(range(6))
    assert _contents(ours.take_blobs("b", indices=everything)) == _contents(theirs.take_blobs("b", indices=everything))
    assert ours.read_blobs("b", indices=[5, 3, 0, 1]) == theirs.read_blobs("b", indices=[5, 3, 0, 1])
    requests = [(5, 4_999_990, 10), (4, 5, 5), (2, 0, 0), (1, 0, 4)]
    assert (ours.read_blob_ranges("b", requests, selector="indices")
            == theirs.read_blob_ranges("b", requests, selector="indices"))


def test_blob_file_behaves_like_pylance(blob_uri):
    ours, theirs = _both(blob_uri)
    for f in (ours.take_blobs("b", indices=[2])[0], theirs.take_blobs("b", indices=[2])[0]):
        assert isinstance(f, io.BufferedIOBase)
        assert repr(f) == "<BlobFile size=11>" and f.size() == 11 and f.tell() == 0
        steps = [f.read(3), f.tell(), f.seek(-2, io.SEEK_END), f.read(), f.read(), f.seek(100), f.read(5),
                 f.seek(2, io.SEEK_CUR), f.seek(0), f.read1(4), f.read1()]
        assert steps == [b"hel", 3, 9, b"ld", b"", 100, b"", 102, 0, b"hell", b"o world"]
        f.seek(1)
        buffer = bytearray(4)
        assert f.readinto(buffer) == 4 and buffer == b"ello" and f.tell() == 5
        assert f.read_range(6, 5) == b"world" and f.read_ranges([(0, 2), (6, 5), (3, 0)]) == [b"he", b"world", b""]
        assert f.tell() == 5  # ranges leave the cursor alone
        with pytest.raises(ValueError, match="negative seek value -1"):
            f.seek(-1)
        with pytest.raises(ValueError, match="Invalid whence"):
            f.seek(0, 7)
        with pytest.raises(ValueError, match="exceeds blob size 11"):
            f.read_range(5, 100)
        f.seek(0)
        assert list(f) == [b"hello world"] and f.readable() and f.seekable() and not f.writable()
        with f as same:
            assert same is f
        assert f.closed and f.size() == 11
        for name, args in (("read", ()), ("readall", ()), ("read1", (1,)), ("seek", (0,)), ("tell", ()),
                           ("read_range", (0, 1)), ("readinto", (bytearray(2),)), ("__iter__", ())):
            with pytest.raises(ValueError):
                getattr(f, name)(*args)
    closed = ours.take_blobs("b", indices=[2])[0]
    closed.close()
    with pytest.raises(BlobFileClosedError, match="read of closed file"):
        closed.read()
    empty = ours.take_blobs("b", indices=[1])[0]
    assert (repr(empty), empty.read(), empty.readall(), empty.read_ranges([])) == ("<BlobFile size=0>", b"", b"", [])


def test_blob_file_reads_only_its_range(blob_uri, monkeypatch):
    ours = lance_format.dataset(blob_uri)
    big = ours.take_blobs("b", indices=[3], buffer_size=0)[0]
    asked: list[list[tuple[int, int]]] = []
    original = ObjectStore.read_ranges

    def spy(self, relative, ranges, **kwargs):
        asked.append(list(ranges))
        return original(self, relative, ranges, **kwargs)

    monkeypatch.setattr(ObjectStore, "read_ranges", spy)
    big.seek(1000)
    assert big.read(10) == (bytes(range(256)) * 300)[1000:1010]
    assert big.read_range(5000, 3) == (bytes(range(256)) * 300)[5000:5003]
    assert [length for call in asked for _, length in call] == [10, 3]
    # the default read-ahead fetches at most the rest of the blob, once
    asked.clear()
    ahead = ours.take_blobs("b", indices=[3])[0]
    assert b"".join(iter(lambda: ahead.read(1000), b"")) == bytes(range(256)) * 300
    assert [length for call in asked for _, length in call] == [256 * 300]


def test_failures_match_pylance(blob_uri):
    ours, theirs = _both(blob_uri)
    deleted = 0  # row address 0 (id 0) was deleted
    cases = [
        (lambda ds: ds.take_blobs("id", indices=[0]), NotABlobColumnError, ValueError),
        (lambda ds: ds.read_blobs("id", indices=[0]), NotABlobColumnError, ValueError),
        (lambda ds: ds.read_blob_ranges("id", [(0, 0, 1)], selector="indices"), NotABlobColumnError, ValueError),
        (lambda ds: ds.take_blobs("nope", indices=[0]), ColumnNotFoundError, RuntimeError),
        (lambda ds: ds.take_blobs("b"), InvalidInputError, ValueError),
        (lambda ds: ds.take_blobs("b", ids=[1], indices=[1]), InvalidInputError, ValueError),
        (lambda ds: ds.take_blobs("b", indices=[99]), InvalidInputError, ValueError),
        (lambda ds: ds.take_blobs("b", ids=[deleted]), DeletedRowError, NotImplementedError),
        (lambda ds: ds.read_blobs("b", addresses=[deleted]), DeletedRowError, NotImplementedError),
        (lambda ds: ds.take_blobs("b", indices=[0], buffer_size=-1), InvalidInputError, ValueError),
        (lambda ds: ds.read_blob_ranges("b", [(2, 5, 100)], selector="indices"), InvalidInputError, ValueError),
        (lambda ds: ds.read_blob_ranges("b", [(0, 0, 1)], selector="bogus"), InvalidInputError, ValueError),
    ]
    for call, ours_type, builtin in cases:
        with pytest.raises(builtin):
            call(theirs)
        with pytest.raises(ours_type):
            call(ours)
        assert issubclass(ours_type, builtin)


def test_stable_row_ids_select_by_id_and_address(tmp_path):
    uri = str(tmp_path / "s")
    lance.write_dataset(_rows(FIRST, 0), uri, data_storage_version="2.1", enable_stable_row_ids=True)
    lance_format.write_dataset(_rows(SECOND, 10), uri, mode="append")
    lance.dataset(uri).delete("id = 1")
    ours, theirs = _both(uri)
    ids = theirs.to_table(columns=[], with_row_id=True).column("_rowid").to_pylist()
    addresses = theirs.to_table(columns=[], with_row_address=True).column("_rowaddr").to_pylist()
    assert _contents(ours.take_blobs("b", ids=ids)) == _contents(theirs.take_blobs("b", ids=ids))
    assert ours.read_blobs("b", addresses=addresses) == theirs.read_blobs("b", addresses=addresses)


def test_blob_column_iterates_file_likes():
    values = pa.array([b"ab", None, b""], pa.large_binary())
    assert [f.read() for f in lance_format.BlobColumn(values)] == [f.read() for f in lance.BlobColumn(values)]
    chunked = pa.chunked_array([pa.array([b"x"], pa.binary()), pa.array([b"yz"], pa.binary())])
    assert [f.read() for f in lance_format.BlobColumn(chunked)] == [b"x", b"yz"]
    for bad, error in ((pa.array([1]), NotABlobColumnError), ([b"x"], InvalidInputError)):
        with pytest.raises(ValueError):
            lance.BlobColumn(bad)
        with pytest.raises(error):
            lance_format.BlobColumn(bad)


@pytest.mark.parametrize("mode", ["lazy", "bytes", "descriptions"])
def test_to_pandas_blob_modes_match_pylance(blob_uri, v2_uri, mode):
    for uri in (blob_uri, v2_uri):
        ours, theirs = _both(uri)

        def values(frame):
            column = frame["b"].tolist()
            return [x.read() if isinstance(x, io.IOBase) else x for x in column]

        for kwargs in ({}, {"columns": ["b"], "filter": "id > 2"}, {"with_row_address": True}):
            mine, official = ours.to_pandas(blob_mode=mode, **kwargs), theirs.to_pandas(blob_mode=mode, **kwargs)
            assert list(mine.columns) == list(official.columns)
            assert [type(x).__name__ for x in mine["b"]] == [type(x).__name__ for x in official["b"]]
            assert values(mine) == values(official), kwargs
        fragment = ours.get_fragments()[0], theirs.get_fragments()[0]
        assert values(fragment[0].to_pandas(blob_mode=mode)) == values(fragment[1].to_pandas(blob_mode=mode))
    with pytest.raises(InvalidInputError, match="blob_mode must be one of"):
        lance_format.dataset(blob_uri).to_pandas(blob_mode="nope")


@pytest.mark.parametrize("handling", ["all_binary", "all_descriptions", "blobs_descriptions"])
def test_blob_handling_matches_pylance(blob_uri, v2_uri, handling):
    for uri in (blob_uri, v2_uri):
        ours, theirs = _both(uri)
        for kwargs in ({}, {"columns": ["b"], "filter": "id > 2"}, {"with_row_address": True, "limit": 3, "offset": 1},
                       {"columns": ["id", "b"], "filter": "id < 100", "batch_size": 2}):
            mine = ours.to_table(blob_handling=handling, **kwargs)
            official = theirs.to_table(blob_handling=handling, **kwargs)
            assert mine.schema.equals(official.schema, check_metadata=True), kwargs
            assert mine.equals(official), kwargs
        fragment = ours.get_fragments()[-1], theirs.get_fragments()[-1]
        assert (fragment[0].to_table(blob_handling=handling).equals(fragment[1].to_table(blob_handling=handling)))
