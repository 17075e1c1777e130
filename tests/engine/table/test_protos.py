"""Tests of the protobuf layer (protos/*.proto -> lance_format/proto/*_pb2.py).

pylance is used here only as an oracle: it writes small datasets, and we check
that our generated messages parse its manifests, transactions and data-file
column metadata, cover every field it writes (no unknown fields where none are
expected) and re-serialize byte for byte.
"""

from __future__ import annotations

import importlib.util
import struct
import subprocess
import sys
import uuid as uuid_mod
from pathlib import Path

import pyarrow as pa
import pytest
from google.protobuf import any_pb2
from google.protobuf.message import Message
from google.protobuf.unknown_fields import UnknownFieldSet

from lance_format.proto import encodings_v2_0_pb2 as enc20
from lance_format.proto import encodings_v2_1_pb2 as enc21
from lance_format.proto import file2_pb2, file_pb2, rowids_pb2, table_pb2, transaction_pb2

REPO_ROOT = Path(__file__).resolve().parents[3]
PROTO_PKG_DIR = REPO_ROOT / "lance_format" / "proto"
GEN_SCRIPT = REPO_ROOT / "scripts" / "gen_protos.py"
U64_MAX = 2**64 - 1

GENERATED = [
    "__init__.py",
    *(
        f"{stem}_pb2{suffix}"
        for stem in ("table", "transaction", "rowids", "file", "file2", "encodings_v2_0", "encodings_v2_1", "index")
        for suffix in (".py", ".pyi")
    ),
]


# --------------------------------------------------------------------------------------
# helpers


def _is_repeated(fd) -> bool:
    flag = getattr(fd, "is_repeated", None)  # protobuf >= 6.32; `label` is deprecated there
    if flag is not None:
        return bool(flag)
    return fd.label == fd.LABEL_REPEATED


def unknown_fields(msg: Message, path: str = "") -> list[tuple[str, int, int]]:
    """All unknown fields in ``msg`` and its sub-messages as (path, number, wire_type)."""
    out: list[tuple[str, int, int]] = []
    here = path or msg.DESCRIPTOR.full_name
    for f in UnknownFieldSet(msg):
        out.append((here, f.field_number, f.wire_type))
    for fd, value in msg.ListFields():
        if fd.message_type is None:
            continue
        if fd.message_type.GetOptions().map_entry:
            if fd.message_type.fields_by_name["value"].message_type is None:
                continue
            children = list(value.values())
        elif _is_repeated(fd):
            children = list(value)
        else:
            children = [value]
        for child in children:
            out.extend(unknown_fields(child, f"{here}.{fd.name}"))
    return out


def parse(cls, data: bytes):
    msg = cls()
    msg.ParseFromString(data)
    return msg


def read_chunk(buf: bytes, offset: int) -> bytes:
    """A ``u32 LE length | payload`` chunk at ``offset``."""
    (n,) = struct.unpack_from("<I", buf, offset)
    return buf[offset + 4 : offset + 4 + n]


def split_manifest_file(buf: bytes) -> tuple[int, bytes]:
    """(offset of the Manifest's u32 length prefix, Manifest bytes)."""
    assert buf[-4:] == b"LANC"
    pos, major, minor = struct.unpack("<qHH", buf[-16:-4])
    assert (major, minor) == (0, 2)
    raw = read_chunk(buf, pos)
    assert pos + 4 + len(raw) == len(buf) - 16
    return pos, raw


def load_manifests(root: Path) -> dict[int, tuple[bytes, int, bytes, table_pb2.Manifest]]:
    """version -> (file bytes, manifest pos, manifest bytes, parsed Manifest)."""
    out = {}
    for path in sorted((root / "_versions").glob("*.manifest")):
        buf = path.read_bytes()
        pos, raw = split_manifest_file(buf)
        m = parse(table_pb2.Manifest, raw)
        # V2 naming: the file name is u64::MAX - version, zero-padded to 20 digits.
        assert len(path.stem) == 20
        assert m.version == U64_MAX - int(path.stem)
        out[m.version] = (buf, pos, raw, m)
    return out


def expand_segment(seg: rowids_pb2.U64Segment) -> list[int]:
    kind = seg.WhichOneof("segment")
    if kind == "range":
        return list(range(seg.range.start, seg.range.end))
    if kind in ("array", "sorted_array"):
        arr = getattr(seg, kind)
        which = arr.WhichOneof("array")
        if which == "u64_array":
            vals = arr.u64_array.values
            return list(struct.unpack(f"<{len(vals) // 8}Q", vals))
        sub = getattr(arr, which)
        width = 2 if which == "u16_array" else 4
        fmt = "H" if width == 2 else "I"
        return [sub.base + o for o in struct.unpack(f"<{len(sub.offsets) // width}{fmt}", sub.offsets)]
    raise AssertionError(f"unexpected segment kind {kind}")


# --------------------------------------------------------------------------------------
# pylance-written datasets

# (name, logical_type, parent_id) in depth-first field-id order
EXPECTED_FIELDS = [
    ("i", "int64", -1),
    ("s", "string", -1),
    ("l", "list", -1),
    ("item", "int32", 2),
    ("st", "struct", -1),
    ("x", "int32", 4),
    ("y", "string", 4),
    ("v", "fixed_size_list:float:8", -1),
    ("n", "int32", -1),
    ("c", "int64", -1),
    ("b", "large_binary", -1),
]
LEAF_IDS = [0, 1, 3, 5, 6, 7, 8, 9, 10]


def make_table(struct_nulls: bool) -> pa.Table:
    st_type = pa.struct([("x", pa.int32()), ("y", pa.string())])
    st = [{"x": 1, "y": "q"}, {"x": 2, "y": None}, None if struct_nulls else {"x": 3, "y": "c"}, {"x": 4, "y": "z"}]
    return pa.table(
        {
            "i": pa.array([1, None, 3, 4], pa.int64()),
            "s": pa.array(["a", None, "ccc", "dd"]),
            "l": pa.array([[1, 2], None, [], [3]], pa.list_(pa.int32())),
            "st": pa.array(st, st_type),
            "v": pa.FixedSizeListArray.from_arrays(pa.array([float(k) for k in range(32)], pa.float32()), 8),
            "n": pa.array([None] * 4, pa.int32()),  # all null -> constant layout in 2.2
            "c": pa.array([7] * 4, pa.int64()),
            # large values -> full-zip layout in 2.2 (compresses to almost nothing)
            "b": pa.array([bytes([k]) * 300_000 for k in range(4)], pa.large_binary()),
        }
    )


DATASETS = {
    # name: (data_storage_version or None for default, enable_stable_row_ids)
    "v2_0": ("2.0", False),
    "v2_2": (None, False),
    "v2_2_stable": (None, True),
}


@pytest.fixture(scope="module")
def lance_mod():
    return pytest.importorskip("lance")


@pytest.fixture(scope="module", params=sorted(DATASETS))
def dataset(request, lance_mod, tmp_path_factory):
    """Versions: 1 create (Overwrite), 2 Append, 3 Delete, 4 CreateIndex (BTREE on "i")."""
    name = request.param
    storage_version, stable = DATASETS[name]
    root = tmp_path_factory.mktemp(name) / "ds"
    tbl = make_table(struct_nulls=storage_version != "2.0")
    kwargs = {"enable_stable_row_ids": stable}
    if storage_version is not None:
        kwargs["data_storage_version"] = storage_version
    lance_mod.write_dataset(tbl, str(root), **kwargs)
    lance_mod.write_dataset(tbl, str(root), mode="append")
    ds = lance_mod.dataset(str(root))
    ds.delete("i = 3")
    ds.create_scalar_index("i", "BTREE")
    return {
        "root": root,
        "name": name,
        "format": storage_version or "2.2",
        "stable": stable,
        "lance_version": lance_mod.__version__,
    }


# --------------------------------------------------------------------------------------
# staleness of the generated modules


def test_generated_modules_are_up_to_date(tmp_path):
    if importlib.util.find_spec("grpc_tools") is None:
        pytest.skip("grpcio-tools (grpc_tools) is not installed; cannot regenerate protobuf modules")
    out = tmp_path / "proto"
    res = subprocess.run(
        [sys.executable, str(GEN_SCRIPT), "--out", str(out)], capture_output=True, text=True, cwd=REPO_ROOT
    )
    assert res.returncode == 0, res.stderr
    produced = sorted(p.name for p in out.iterdir())
    assert produced == sorted(GENERATED)
    for name in GENERATED:
        assert (out / name).read_bytes() == (PROTO_PKG_DIR / name).read_bytes(), (
            f"lance_format/proto/{name} is stale: run `python scripts/gen_protos.py`"
        )


def test_generated_modules_use_package_imports():
    for name in GENERATED:
        text = (PROTO_PKG_DIR / name).read_text()
        for line in text.splitlines():
            assert not (line.startswith("import ") and "_pb2" in line), f"{name}: flat import {line!r}"
    # the classes know their real module (pickling, repr)
    assert table_pb2.Manifest.__module__ == "lance_format.proto.table_pb2"


def test_descriptor_names_and_numbers():
    mf = table_pb2.Manifest.DESCRIPTOR.fields_by_name
    assert mf["transaction_section"].number == 23
    assert mf["transaction_section_deprecated"].number == 21
    assert mf["schema_metadata"].number == 5
    assert mf["max_fragment_id"].has_presence and mf["index_section"].has_presence
    assert 17 not in table_pb2.Manifest.DESCRIPTOR.fields_by_number
    assert table_pb2.IndexMetadata.DESCRIPTOR.fields_by_name["files"].number == 10
    layout = enc21.PageLayout.DESCRIPTOR.fields_by_number
    assert layout[2].name == "constant_layout" and layout[2].message_type.name == "ConstantLayout"
    assert not hasattr(enc21, "AllNullLayout")
    assert enc21.MiniBlockLayout.DESCRIPTOR.fields_by_name["has_large_chunk"].number == 10
    ops = transaction_pb2.Transaction.DESCRIPTOR.oneofs_by_name["operation"]
    assert {f.name: f.number for f in ops.fields}["update_bases"] == 114
    # left undeclared on purpose (pylance-14 fields with unknown meaning)
    assert 4 not in transaction_pb2.Transaction.Merge.DESCRIPTOR.fields_by_number
    assert 2 not in transaction_pb2.Transaction.Project.DESCRIPTOR.fields_by_number


# --------------------------------------------------------------------------------------
# manifests and transactions written by pylance


EXPECTED_OPS = {1: "overwrite", 2: "append", 3: "delete", 4: "create_index"}


def test_manifests_round_trip_and_decode(dataset):
    root = dataset["root"]
    manifests = load_manifests(root)
    assert sorted(manifests) == [1, 2, 3, 4]
    for version, (buf, pos, raw, m) in manifests.items():
        assert m.SerializeToString() == raw
        assert unknown_fields(m) == []

        assert [(f.name, f.logical_type, f.parent_id) for f in m.fields] == EXPECTED_FIELDS
        assert [f.id for f in m.fields] == list(range(len(EXPECTED_FIELDS)))
        assert all(f.type == file_pb2.Field.PARENT for f in m.fields)
        assert m.fields[1].encoding == file_pb2.VAR_BINARY and m.fields[0].encoding == file_pb2.PLAIN

        assert m.data_format.file_format == "lance"
        assert m.data_format.version == dataset["format"]
        assert m.writer_version.library == "lance"
        assert m.writer_version.version == dataset["lance_version"]
        assert m.HasField("timestamp") and m.timestamp.seconds > 0
        assert m.HasField("max_fragment_id") and m.max_fragment_id == len(m.fragments) - 1

        flags = (2 if dataset["stable"] else 0) | (1 if version >= 3 else 0)
        assert (m.reader_feature_flags, m.writer_feature_flags) == (flags, flags)
        assert m.next_row_id == (4 * len(m.fragments) if dataset["stable"] else 0)

        # fragments / data files
        assert [fr.id for fr in m.fragments] == list(range(1 if version == 1 else 2))
        major, minor = map(int, dataset["format"].split("."))
        for fr in m.fragments:
            assert fr.physical_rows == 4
            (df,) = fr.files
            assert (root / "data" / df.path).is_file()
            assert df.path.endswith(".lance")
            assert (df.file_major_version, df.file_minor_version) == (major, minor)
            assert df.file_size_bytes == (root / "data" / df.path).stat().st_size
            ids = list(range(len(EXPECTED_FIELDS))) if dataset["format"] == "2.0" else LEAF_IDS
            assert list(df.fields) == ids
            assert list(df.column_indices) == list(range(len(ids)))
            if version >= 3:
                d = fr.deletion_file
                assert fr.HasField("deletion_file") and d.num_deleted_rows == 1
                assert d.file_type == table_pb2.DeletionFile.ARROW_ARRAY and d.read_version == 2
                assert (root / "_deletions" / f"{fr.id}-{d.read_version}-{d.id}.arrow").is_file()
            else:
                assert not fr.HasField("deletion_file")
            if dataset["stable"]:
                check_row_lineage(fr)
            else:
                assert fr.WhichOneof("row_id_sequence") is None

        # inline transaction: field 23 points at its u32 length prefix
        assert m.HasField("transaction_section") and not m.HasField("transaction_section_deprecated")
        txn_raw = read_chunk(buf, m.transaction_section)
        assert m.transaction_section + 4 + len(txn_raw) == pos  # manifest follows right after
        assert txn_raw == (root / "_transactions" / m.transaction_file).read_bytes()
        txn = parse(transaction_pb2.Transaction, txn_raw)
        assert txn.WhichOneof("operation") == EXPECTED_OPS[version]
        assert txn.read_version == version - 1

        # index section (only once the BTREE index exists)
        if version == 4:
            assert m.HasField("index_section") and m.index_section == 0
            idx_raw = read_chunk(buf, m.index_section)
            assert m.transaction_section == 4 + len(idx_raw)
            sec = parse(table_pb2.IndexSection, idx_raw)
            assert sec.SerializeToString() == idx_raw
            assert unknown_fields(sec) == []
            (ix,) = sec.indices
            assert list(ix.fields) == [0] and ix.name == "i_idx" and ix.dataset_version == 3
            assert len(ix.uuid.uuid) == 16
            assert ix.index_details.type_url == "/lance.table.BTreeIndexDetails"
            parse(table_pb2.BTreeIndexDetails, ix.index_details.value)
            assert sorted(f.path for f in ix.files) == ["page_data.lance", "page_lookup.lance"]
            idx_dir = root / "_indices" / str(uuid_mod.UUID(bytes=ix.uuid.uuid))
            for f in ix.files:
                assert f.size_bytes == (idx_dir / f.path).stat().st_size
        else:
            assert not m.HasField("index_section")
            assert m.transaction_section == 0


def check_row_lineage(fr: table_pb2.DataFragment) -> None:
    assert fr.WhichOneof("row_id_sequence") == "inline_row_ids"
    seq = parse(rowids_pb2.RowIdSequence, fr.inline_row_ids)
    assert seq.SerializeToString() == fr.inline_row_ids
    assert unknown_fields(seq) == []
    ids = [v for seg in seq.segments for v in expand_segment(seg)]
    assert ids == list(range(4 * fr.id, 4 * fr.id + 4))
    for oneof in ("created_at_version_sequence", "last_updated_at_version_sequence"):
        which = fr.WhichOneof(oneof)
        assert which is not None and which.startswith("inline_")
        raw = getattr(fr, which)
        vs = parse(rowids_pb2.RowDatasetVersionSequence, raw)
        assert vs.SerializeToString() == raw
        assert unknown_fields(vs) == []
        assert sum(len(expand_segment(run.span)) for run in vs.runs) == 4
        assert {run.version for run in vs.runs} == {fr.id + 1}


def test_transaction_files_round_trip(dataset):
    root = dataset["root"]
    seen = {}
    for path in sorted((root / "_transactions").glob("*.txn")):
        raw = path.read_bytes()
        txn = parse(transaction_pb2.Transaction, raw)
        assert txn.SerializeToString() == raw
        assert unknown_fields(txn) == []
        read_version, uuid = path.stem.split("-", 1)
        assert txn.read_version == int(read_version) and txn.uuid == uuid
        seen[txn.read_version + 1] = txn
    assert {v: t.WhichOneof("operation") for v, t in seen.items()} == EXPECTED_OPS

    overwrite = seen[1].overwrite
    assert [(f.name, f.logical_type) for f in overwrite.schema] == [(n, t) for n, t, _ in EXPECTED_FIELDS]
    assert len(overwrite.fragments) == 1 and overwrite.fragments[0].id == 0  # ids assigned at commit
    append = seen[2].append
    assert len(append.fragments) == 1 and append.fragments[0].physical_rows == 4
    delete = seen[3].delete
    assert delete.predicate == "i = 3"
    assert sorted(f.id for f in delete.updated_fragments) == [0, 1]
    assert all(f.deletion_file.num_deleted_rows == 1 for f in delete.updated_fragments)
    (new_index,) = seen[4].create_index.new_indices
    assert new_index.name == "i_idx" and list(new_index.fields) == [0]
    assert new_index.index_details.type_url == "/lance.table.BTreeIndexDetails"


def test_merge_and_project_unknown_fields_survive(lance_mod, tmp_path):
    """pylance 14 writes Merge field 4 and Project field 2, which we leave undeclared."""
    root = tmp_path / "ds"
    ds = lance_mod.write_dataset(pa.table({"a": pa.array([1, 2, 3], pa.int64())}), str(root))
    ds.add_columns({"b": "a * 2"})
    ds.drop_columns(["b"])
    txns = {}
    for path in (root / "_transactions").glob("*.txn"):
        raw = path.read_bytes()
        txn = parse(transaction_pb2.Transaction, raw)
        assert txn.SerializeToString() == raw
        txns[txn.WhichOneof("operation")] = txn
    assert set(txns) == {"overwrite", "merge", "project"}
    assert [f.name for f in txns["merge"].merge.schema] == ["a", "b"]
    assert [f.name for f in txns["project"].project.schema] == ["a"]
    assert [(n, w) for _, n, w in unknown_fields(txns["merge"])] == [(4, 0)]
    assert [(n, w) for _, n, w in unknown_fields(txns["project"])] == [(2, 0)]
    # edit a declared field; undeclared ones must survive
    txn = txns["merge"]
    before = unknown_fields(txn)
    txn.read_version += 10
    again = parse(transaction_pb2.Transaction, txn.SerializeToString())
    assert again.read_version == txn.read_version
    assert unknown_fields(again) == before


# --------------------------------------------------------------------------------------
# data files: footer, column metadata, encodings


def _page_message(any_msg: any_pb2.Any):
    if any_msg.type_url == "/lance.encodings.ArrayEncoding":
        return parse(enc20.ArrayEncoding, any_msg.value)
    if any_msg.type_url == "/lance.encodings21.PageLayout":
        return parse(enc21.PageLayout, any_msg.value)
    raise AssertionError(f"unexpected page encoding type_url {any_msg.type_url!r}")


def test_data_file_column_metadata(dataset):
    root = dataset["root"]
    manifests = load_manifests(root)
    m = manifests[1][3]
    df = m.fragments[0].files[0]
    buf = (root / "data" / df.path).read_bytes()
    cm_start, cmo_start, gbo_start, n_gb, n_cols, major, minor, magic = struct.unpack("<QQQIIHH4s", buf[-40:])
    assert magic == b"LANC"
    is_20 = dataset["format"] == "2.0"
    assert (major, minor) == ((0, 3) if is_20 else (2, 2))
    assert n_cols == len(df.column_indices)
    assert gbo_start == cmo_start + 16 * n_cols and n_gb >= 1

    # global buffer 0 = FileDescriptor (schema + rows)
    gpos, gsize = struct.unpack_from("<QQ", buf, gbo_start)
    fd = parse(file_pb2.FileDescriptor, buf[gpos : gpos + gsize])
    assert fd.SerializeToString() == buf[gpos : gpos + gsize]
    assert fd.length == 4
    assert list(fd.schema.fields) == list(m.fields)

    layouts = set()
    for c in range(n_cols):
        pos, size = struct.unpack_from("<QQ", buf, cmo_start + 16 * c)
        assert pos >= cm_start
        raw = buf[pos : pos + size]
        col = parse(file2_pb2.ColumnMetadata, raw)
        assert col.SerializeToString() == raw
        assert unknown_fields(col) == []

        assert col.encoding.WhichOneof("location") == "direct"
        col_any = parse(any_pb2.Any, col.encoding.direct.encoding)
        assert col_any.type_url == "/lance.encodings.ColumnEncoding"
        col_enc = parse(enc20.ColumnEncoding, col_any.value)
        assert col_enc.WhichOneof("column_encoding") == "values"

        assert len(col.pages) >= 1
        assert sum(p.length for p in col.pages) > 0
        for page in col.pages:
            assert len(page.buffer_offsets) == len(page.buffer_sizes)
            assert page.encoding.WhichOneof("location") == "direct"
            page_any = parse(any_pb2.Any, page.encoding.direct.encoding)
            assert page_any.type_url == (
                "/lance.encodings.ArrayEncoding" if is_20 else "/lance.encodings21.PageLayout"
            )
            msg = _page_message(page_any)
            assert msg.SerializeToString() == page_any.value
            assert unknown_fields(msg) == [], (c, msg)
            kind = msg.WhichOneof("array_encoding" if is_20 else "layout")
            assert kind is not None
            layouts.add(kind)
            if kind == "mini_block_layout":
                assert msg.mini_block_layout.has_large_chunk  # mandatory in 2.2
            if is_20:
                assert page.priority == 0

    if is_20:
        assert {"nullable", "binary", "list", "struct"} <= layouts
    else:
        assert {"mini_block_layout", "constant_layout", "full_zip_layout"} <= layouts


# --------------------------------------------------------------------------------------
# unknown fields survive a parse / edit / serialize cycle


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _base_manifest_bytes() -> bytes:
    m = table_pb2.Manifest(version=1, transaction_section=0)
    m.fields.add(name="a", id=0, parent_id=-1, logical_type="int64", nullable=True, encoding=file_pb2.PLAIN)
    m.writer_version.library = "lance"
    m.writer_version.version = "14.0.2"
    m.data_format.file_format = "lance"
    m.data_format.version = "2.2"
    return m.SerializeToString()


def test_unknown_fields_survive_manifest_edit():
    extra = _varint(999 << 3 | 0) + _varint(123456)  # field 999, varint 123456
    nested = _varint(77 << 3 | 2) + _varint(3) + b"xyz"  # field 77 (bytes) inside a Field
    base = table_pb2.Manifest()
    base.ParseFromString(_base_manifest_bytes())
    field_bytes = base.fields[0].SerializeToString() + nested
    raw = (
        _varint(1 << 3 | 2)
        + _varint(len(field_bytes))
        + field_bytes
        + table_pb2.Manifest(version=1).SerializeToString()
        + extra
    )
    m = parse(table_pb2.Manifest, raw)
    assert m.version == 1 and m.fields[0].name == "a"
    assert [(f.field_number, f.data) for f in UnknownFieldSet(m)] == [(999, 123456)]

    m.version = 42
    m.fields[0].name = "renamed"
    out = m.SerializeToString()
    assert out.endswith(extra)
    again = parse(table_pb2.Manifest, out)
    assert again.version == 42 and again.fields[0].name == "renamed"
    assert [(f.field_number, f.data) for f in UnknownFieldSet(again)] == [(999, 123456)]
    assert [(f.field_number, f.data) for f in UnknownFieldSet(again.fields[0])] == [(77, b"xyz")]


def test_unknown_fields_survive_pylance_manifest_edit(dataset):
    _, _, raw, _ = load_manifests(dataset["root"])[4]
    extra = _varint(999 << 3 | 0) + _varint(5)
    m = parse(table_pb2.Manifest, raw + extra)
    m.version = 1000
    out = m.SerializeToString()
    again = parse(table_pb2.Manifest, out)
    assert again.version == 1000
    assert [(f.field_number, f.wire_type, f.data) for f in UnknownFieldSet(again)] == [(999, 0, 5)]
    # everything else unchanged
    again.version = 4
    assert again.SerializeToString() == raw + extra
