"""``LanceSchema._from_protos(metadata_json, *field_protos)`` as pylance's: the schema of serialized
``Field`` messages, and the same refusals (ValueError) for malformed input."""

from __future__ import annotations

import json

import lance.schema
import pyarrow as pa
import pytest

import lance_format.schema

ARROW = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("email", pa.string()),
                   pa.field("address", pa.struct([pa.field("city", pa.string()), pa.field("zip", pa.int32())])),
                   pa.field("tags", pa.list_(pa.string()))], metadata={"owner": "crm@example.com"})


def _inputs():
    schema = lance_format.schema.LanceSchema.from_arrow(ARROW)
    metadata = json.dumps({k: list(v if isinstance(v, bytes) else v.encode()) for k, v in schema.metadata.items()})
    return metadata, [pb.SerializeToString() for pb in schema.to_protos()]


def test_round_trip_like_pylance():
    metadata, protos = _inputs()
    ours = lance_format.schema.LanceSchema._from_protos(metadata, *protos).to_pyarrow()
    assert ours == lance.schema.LanceSchema._from_protos(metadata, *protos).to_pyarrow()
    assert ours == ARROW and ours.metadata == ARROW.metadata


@pytest.mark.parametrize("metadata, protos, message", [
    ("{}", [b"\x12\x05child\x18\x07\x20\x2a\x2a\x05int32"],
     r"Field 'child' \(id=7\) references parent id 42, which must appear earlier"),
    ("not json", [], "Failed to parse metadata"),
    ("[1, 2]", [], "Failed to parse metadata"),
    ("{}", [b"\xff\xff"], "Failed to parse field proto"),
])
def test_refusals_like_pylance(metadata, protos, message):
    for engine in (lance.schema, lance_format.schema):
        with pytest.raises(ValueError, match=message):
            engine.LanceSchema._from_protos(metadata, *protos)


def test_children_before_parents_are_refused():
    metadata, protos = _inputs()
    for engine in (lance.schema, lance_format.schema):
        with pytest.raises(ValueError, match="must appear earlier"):
            engine.LanceSchema._from_protos(metadata, *reversed(protos))
