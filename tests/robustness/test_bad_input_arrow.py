"""Malformed Arrow input never aborts the interpreter: every entry point that takes Arrow data
refuses it with MalformedInputError naming the column and the chunk. Also column names
official Lance cannot read back, and optional extras installed only in part.

The fuzz matrix runs in ONE subprocess (tests/malformed_arrow.py): a crash there fails this
test, naming the entry point and case it died in, instead of killing the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import MalformedInputError, SchemaMismatchError
from lance_format.file import LanceFileSession
from lance_format.schema.arrow_checks import check_array, check_table
from tests.malformed_arrow import C_CASES, CASES, entry_points

REPO = str(Path(__file__).resolve().parents[2])


def test_every_entry_point_refuses_every_malformed_array_without_crashing(tmp_path):
    done = subprocess.run([sys.executable, "-m", "tests.malformed_arrow", str(tmp_path)], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    lines = [line.split("\t") for line in done.stdout.splitlines()]
    started = [line for line in lines if line[0] == "START"]
    finished = [line for line in lines if line[0] == "DONE"]
    if done.returncode != 0:
        last = started[-1][1:] if started else ["(before any case)"]
        pytest.fail(f"the interpreter died (status {done.returncode}) in {last}: {done.stderr[-2000:]}")
    binary_cases = sum(1 for _, binary in CASES.values() if binary)
    assert len(finished) == (len(entry_points(str(tmp_path))) - 1) * len(CASES) + binary_cases
    wrong = [line[1:4] for line in finished if line[3] != "MalformedInputError"]
    assert wrong == []
    for _, entry, case, _, message in finished:
        assert "column 'c', chunk " in message or "Packed blob payload array" in message, (entry, case, message)


@pytest.mark.parametrize("case", sorted(C_CASES))
def test_arrays_from_the_c_data_interface_are_checked(case):
    with pytest.raises(MalformedInputError, match="column 'c', chunk 0"):
        check_array(C_CASES[case](), what="test data", column="c")


def test_the_chunk_is_named_and_nothing_is_committed(tmp_path):
    uri = str(tmp_path / "t.lance")
    good = pa.table({"id": [1, 2], "url": ["https://a.example/x", None]})
    lance_format.write_dataset(good, uri)
    files_before = sorted(os.listdir(os.path.join(uri, "data")))
    bad = CASES["string offsets backwards"][0]()
    data = pa.Table.from_batches([good.to_batches()[0],
                                  pa.record_batch({"id": pa.array([3, 4, 5]), "url": bad})])
    with pytest.raises(MalformedInputError, match=r"column 'url', chunk 1: non-monotonic offsets") as info:
        lance_format.write_dataset(data, uri, mode="append")
    assert info.value.column == "url" and isinstance(info.value, ValueError)
    assert lance_format.dataset(uri).version == 1 and lance.dataset(uri).count_rows() == 2
    assert sorted(os.listdir(os.path.join(uri, "data"))) == files_before  # no file of the refused write left


@pytest.mark.parametrize("array_type, offset_type", [(pa.binary(), pa.int32()), (pa.large_binary(), pa.int64())])
@pytest.mark.parametrize("as_chunked", [False, True])
def test_packed_blob_writer_rejects_non_monotonic_offsets_like_official_lance(tmp_path, array_type, offset_type,
                                                                              as_chunked):
    # official Lance's test_packed_blob_writer_bulk_rejects_non_monotonic_offsets
    offsets = pa.array([0, 2, 1, 2], type=offset_type).buffers()[1]
    malformed = pa.Array.from_buffers(array_type, 3, [None, offsets, pa.py_buffer(b"ab")])
    payloads: pa.Array | pa.ChunkedArray = malformed
    expected = "Packed blob payload array"
    if as_chunked:
        payloads = pa.chunked_array([pa.array([b"valid"], type=array_type), malformed])
        expected = "Packed blob payload chunk 1"
    file_id = str(uuid.uuid4())
    packed = LanceFileSession(str(tmp_path)).open_packed_blob_writer(f"{file_id}.lance", 7)
    with pytest.raises(ValueError, match="invalid Arrow data") as error:
        packed.write_blobs(payloads)
    assert expected in str(error.value) and "non-monotonic offset" in str(error.value)
    packed.write_blob(b"still usable")  # nothing of the refused call was written
    assert len(packed.finish_array("blob")) == 1


def test_well_formed_data_of_every_shape_passes(tmp_path):
    table = pa.table({
        "id": pa.array(range(6), pa.int64()),
        "email": ["ada@example.com", None, "bob@example.org", "", "eve@example.net", "x@y.z"],
        "tags": pa.array([["a"], [], None, ["b", "c"], ["d"], []], pa.list_(pa.large_string())),
        "point": pa.array([{"x": 1.0, "label": "p"}] * 5 + [None], pa.struct([("x", pa.float64()), ("label", pa.string())])),
        "category": pa.array(["books", "toys", "books", None, "food", "books"]).dictionary_encode(),
        "blob": pa.array([b"\x00", b"", None, b"abc", b"d", b"e"], pa.large_binary()),
        "vec": pa.array([[1.0, 2.0]] * 6, pa.list_(pa.float32(), 2)),
    })
    check_table(table, what="test data")
    check_table(table.slice(2, 3), what="test data")  # sliced: offsets start past zero
    uri = str(tmp_path / "t.lance")
    lance_format.write_dataset(table, uri)
    assert lance.dataset(uri).to_table().equals(lance_format.dataset(uri).to_table())


@pytest.mark.parametrize("mode", ["create", "append", "overwrite"])
def test_duplicate_column_names_are_a_typed_error(tmp_path, mode):
    uri = str(tmp_path / "t.lance")
    if mode != "create":
        lance_format.write_dataset(pa.table({"id": [1], "name": ["a"]}), uri)
    duplicated = pa.Table.from_arrays([pa.array([1]), pa.array([2])], names=["id", "id"])
    with pytest.raises(SchemaMismatchError, match=r"duplicate column names: \['id'\]") as info:
        lance_format.write_dataset(duplicated, uri, mode=mode)
    assert info.value.column == "id"


def test_duplicate_struct_fields_are_refused_as_official_lance_cannot_read_them(tmp_path):
    nested = pa.table({"s": pa.array([{"a": 1}], pa.struct([("a", pa.int64()), ("a", pa.int64())]))})
    with pytest.raises(SchemaMismatchError, match=r"\['a'\] appear more than once among struct column 's'"):
        lance_format.write_dataset(nested, str(tmp_path / "t.lance"))


def test_an_empty_column_name_is_refused(tmp_path):
    uri = str(tmp_path / "t.lance")
    with pytest.raises(SchemaMismatchError, match="column 1 of 2 has an empty name"):
        lance_format.write_dataset(pa.table({"": [1], "a": [2]}), uri)
    assert not os.path.exists(uri)
    # pylance writes such a table, then cannot read it back
    lance.write_dataset(pa.table({"": [1], "a": [2]}), str(tmp_path / "p.lance"))
    with pytest.raises(ValueError):
        lance.dataset(str(tmp_path / "p.lance")).to_table()
    # an empty name inside a struct reads back in pylance: accepted
    nested = pa.table({"s": pa.array([{"": 1, "b": 2}], pa.struct([("", pa.int64()), ("b", pa.int64())]))})
    lance_format.write_dataset(nested, str(tmp_path / "n.lance"))
    assert lance.dataset(str(tmp_path / "n.lance")).to_table().equals(nested)


@pytest.mark.parametrize("scheme, options, blocked, extra", [
    ("gs://bucket/t.lance", {"google_skip_signature": "true"}, "google.api_core", "gcs"),
    ("az://container/t.lance", {"account_name": "devstoreaccount1", "skip_signature": "true"}, "azure.core", "azure"),
])
def test_a_partly_installed_extra_gives_the_install_hint(scheme, options, blocked, extra):
    pytest.importorskip(blocked)
    code = (f"import sys; sys.modules[{blocked!r}] = None\n"
            "import lance_format\n"
            "from lance_format.errors import UnsupportedFeatureError\n"
            "try:\n"
            f"    lance_format.dataset({scheme!r}, storage_options={options!r})\n"
            "except UnsupportedFeatureError as exc:\n"
            "    print('HINT', exc)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"pip install 'lance-assets[{extra}]'" in done.stdout and blocked in done.stdout, done.stdout
