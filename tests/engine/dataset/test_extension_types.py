"""Arrow extension types in tables, both ways against pylance: fixed-shape tensors, UUIDs,
pylance's bfloat16 vectors, and a user's own registered extension type."""

from __future__ import annotations

import json
import subprocess
import sys

import lance
import pyarrow as pa
import pytest
from lance.arrow import bfloat16_array

import lance_format

ENGINES = {"ours": lance_format, "pylance": lance}


class RgbType(pa.ExtensionType):
    """A user's extension type: three bytes of color, with a parameter in its metadata."""

    def __init__(self, space: str = "srgb") -> None:
        self.space = space
        super().__init__(pa.binary(3), "example.rgb")

    def __arrow_ext_serialize__(self) -> bytes:
        return json.dumps({"space": self.space}).encode()

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type, serialized):
        return cls(json.loads(serialized)["space"])


try:
    pa.register_extension_type(RgbType())
except pa.ArrowKeyError:  # re-imported test module
    pass


def _table() -> pa.Table:
    tensor = pa.fixed_shape_tensor(pa.float32(), [2, 3], dim_names=["row", "col"])
    storage = pa.array([[float(i + j) for j in range(6)] if i != 2 else None for i in range(5)],
                       pa.list_(pa.float32(), 6))
    return pa.table({
        "id": pa.array(range(5), pa.int64()),
        "image": pa.ExtensionArray.from_storage(tensor, storage),
        "uid": pa.ExtensionArray.from_storage(pa.uuid(), pa.array([bytes([i]) * 16 for i in range(5)], pa.binary(16))),
        "emb": pa.FixedSizeListArray.from_arrays(bfloat16_array([0.5 * i for i in range(10)]), 2),
    })


@pytest.mark.parametrize("writer", ["ours", "pylance"])
def test_extension_columns_both_ways(tmp_path, writer):
    path = str(tmp_path / "t.lance")
    data = _table()
    ENGINES[writer].write_dataset(data, path, max_rows_per_file=3)
    for engine in ENGINES.values():
        ds = engine.dataset(path)
        assert ds.schema == data.schema
        assert ds.to_table().equals(data)
    ours = lance_format.dataset(path)
    assert ours.to_table(filter="id >= 3", columns=["image", "emb"]).equals(
        data.filter(pa.compute.greater_equal(data["id"], 3)).select(["image", "emb"]))
    assert ours.take([4, 0]).column("uid").equals(data.column("uid").take([4, 0]))


@pytest.mark.parametrize("writer, appender", [("ours", "pylance"), ("pylance", "ours")])
def test_appends_across_engines(tmp_path, writer, appender):
    path = str(tmp_path / "t.lance")
    ENGINES[writer].write_dataset(_table(), path)
    ENGINES[appender].write_dataset(_table(), path, mode="append")
    assert lance.dataset(path).to_table().equals(lance_format.dataset(path).to_table())
    assert lance_format.dataset(path).count_rows() == 10


def test_manifest_names_the_extension_like_pylance(tmp_path):
    ours, theirs = str(tmp_path / "o"), str(tmp_path / "p")
    lance_format.write_dataset(_table(), ours)
    lance.write_dataset(_table(), theirs)
    assert [(f.name, f.logical_type, f.proto.extension_name, f.metadata) for f in
            lance_format.dataset(ours).lance_schema.fields] == [
        (f.name, f.logical_type, f.proto.extension_name, f.metadata) for f in
        lance_format.dataset(theirs).lance_schema.fields]


def test_a_users_own_extension_type_round_trips(tmp_path):
    path = str(tmp_path / "rgb.lance")
    colors = pa.ExtensionArray.from_storage(RgbType("p3"), pa.array([b"\x00\x10\x20", None, b"\xff\xff\xff"],
                                                                     pa.binary(3)))
    data = pa.table({"c": colors})
    lance_format.write_dataset(data, path)
    back = lance_format.dataset(path).to_table()
    assert back.equals(data) and back.schema.field("c").type.space == "p3"
    assert lance.dataset(path).to_table().equals(data)


def test_without_the_extension_registered_nothing_is_lost(tmp_path):
    """A process that never imported pylance has no bfloat16 type: the column reads as its
    storage, the extension named in the field metadata."""
    path = str(tmp_path / "t.lance")
    lance.write_dataset(_table(), path)
    script = (
        "import sys, lance_format\n"
        "assert 'lance' not in sys.modules\n"
        f"t = lance_format.dataset({path!r}).to_table()\n"
        "item = t.schema.field('emb').type.value_field\n"
        "print(item.type, item.metadata[b'ARROW:extension:name'].decode(), t.column('emb').to_pylist()[1])\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "fixed_size_binary[2]" and out[1] == "lance.bfloat16"
