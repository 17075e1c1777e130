"""The Lance schema: a tree of fields with stable ids, convertible to Arrow and to protobuf.

Field ids are assigned depth-first from 0 when a table is created; a field added later gets
``max id + 1``. Ids, not names, link the manifest schema to the columns of data files.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import pyarrow as pa

from lance_format.errors import InvalidInputError, SchemaMismatchError, UnsupportedFeatureError
from lance_format.proto import file_pb2
from lance_format.schema.extensions import (
    BFLOAT16,
    EXTENSION_NAME_KEY,
    has_extension,
    is_lance_json,
    json_paths,
    storage_field,
)
from lance_format.schema.logical_types import arrow_type_of, is_nested_logical_type, logical_type_of
from lance_format.schema.pylance_fields import FieldList, schema_debug_text

PRIMARY_KEY_KEY = "lance-schema:unenforced-primary-key"  # field metadata official Lance reads

# file.proto Field.encoding values
ENCODING_NONE = 0
ENCODING_PLAIN = 1
ENCODING_VAR_BINARY = 2
ENCODING_DICTIONARY = 3


def _encoding_for(data_type: pa.DataType) -> int:
    if pa.types.is_dictionary(data_type):
        return ENCODING_DICTIONARY
    if pa.types.is_string(data_type) or pa.types.is_binary(data_type) or pa.types.is_large_string(
        data_type
    ) or pa.types.is_large_binary(data_type):
        return ENCODING_VAR_BINARY
    if pa.types.is_struct(data_type) or pa.types.is_null(data_type):
        return ENCODING_NONE
    # fixed-stride values, fixed-size lists, and list offsets are all stored "plain"
    return ENCODING_PLAIN


def _refuse_empty_fixed_size_list(arrow_field: pa.Field) -> None:
    """A fixed-size list of dimension 0 holds nothing and divides by zero in readers: pylance refuses it."""
    data_type = arrow_field.type
    while pa.types.is_fixed_size_list(data_type):
        if data_type.list_size == 0:
            raise SchemaMismatchError(f'Field "{arrow_field.name}" contains a FixedSizeList with dimension 0; '
                                      "dimension must be a positive integer", column=arrow_field.name)
        arrow_field, data_type = data_type.value_field, data_type.value_type


@dataclass
class LanceField:
    """One field of a Lance schema (a node of the field tree)."""

    name: str
    id: int
    logical_type: str
    nullable: bool = True
    parent_id: int = -1
    children: list[LanceField] = field(default_factory=list)
    metadata: dict[str, bytes] = field(default_factory=dict)
    encoding: int = ENCODING_NONE
    # The protobuf this field was read from; carries fields this engine does not model. Not part
    # of equality: a schema read from a manifest equals the same schema built from Arrow.
    proto: file_pb2.Field | None = field(default=None, compare=False, repr=False)

    # -- Arrow -------------------------------------------------------------------------------
    @property
    def data_type(self) -> pa.DataType:
        return arrow_type_of(self.logical_type, [c.to_arrow() for c in self.children])

    def to_arrow(self) -> pa.Field:
        metadata = {k.encode(): v for k, v in self.metadata.items()} or None
        return pa.field(self.name, self.data_type, self.nullable, metadata=metadata)

    @classmethod
    def from_arrow(cls, arrow_field: pa.Field, next_id: list[int], parent_id: int = -1) -> LanceField:
        data_type = arrow_field.type
        if pa.types.is_map(data_type) and data_type.keys_sorted:
            raise UnsupportedFeatureError(
                f"field {arrow_field.name!r} is a map with keys_sorted=true, which Lance tables cannot store "
                "(pylance refuses it too)",
                column=arrow_field.name,
            )
        if pa.types.is_union(data_type):
            raise UnsupportedFeatureError(
                f"field {arrow_field.name!r} has type {data_type}, which Lance tables cannot store"
            )
        _refuse_empty_fixed_size_list(arrow_field)
        if has_extension(data_type):
            # stored as its storage type, named in the field metadata (schema.extensions)
            arrow_field = storage_field(arrow_field)
            data_type = arrow_field.type
        field_id = next_id[0]
        next_id[0] += 1
        logical_type = logical_type_of(data_type)
        if pa.types.is_fixed_size_list(data_type) and (data_type.value_field.metadata or {}).get(
                EXTENSION_NAME_KEY) == BFLOAT16.encode():
            logical_type = f"fixed_size_list:{BFLOAT16}:{data_type.list_size}"  # pylance's bfloat16 vectors
        elif is_lance_json(arrow_field):
            logical_type = "json"  # JSONB in large_binary, as pylance stores arrow.json
        lance_field = cls(
            name=arrow_field.name,
            id=field_id,
            logical_type=logical_type,
            nullable=arrow_field.nullable,
            parent_id=parent_id,
            metadata={k.decode(): v for k, v in (arrow_field.metadata or {}).items()},
            encoding=_encoding_for(data_type),
        )
        if pa.types.is_struct(data_type):
            child_fields = [data_type.field(i) for i in range(data_type.num_fields)]
        elif pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
            child_fields = [data_type.value_field]
        elif pa.types.is_map(data_type):
            # one non-null "entries" struct of key and value (ids: map, entries, key, value)
            child_fields = [data_type.field(0).with_nullable(False)]
        elif pa.types.is_fixed_size_list(data_type) and is_nested_logical_type(lance_field.logical_type):
            child_fields = [data_type.value_field]
        else:
            child_fields = []
        lance_field.children = [cls.from_arrow(c, next_id, field_id) for c in child_fields]
        return lance_field

    # -- protobuf ----------------------------------------------------------------------------
    def to_protos(self) -> Iterator[file_pb2.Field]:
        """This field and its descendants, depth-first, as ``lance.file.Field`` messages."""
        pb = file_pb2.Field()
        if self.proto is not None:
            pb.CopyFrom(self.proto)
        pb.type = file_pb2.Field.PARENT  # official Lance writes PARENT for every field
        pb.name = self.name
        pb.id = self.id
        pb.parent_id = self.parent_id
        pb.logical_type = self.logical_type
        pb.nullable = self.nullable
        pb.encoding = self.encoding  # type: ignore[assignment]  # an int of file.proto's Encoding enum
        pb.metadata.clear()
        for key, value in self.metadata.items():
            pb.metadata[key] = value
        if self.is_unenforced_primary_key:  # official Lance mirrors the metadata flag in the proto
            pb.unenforced_primary_key = True
            pb.unenforced_primary_key_position = self.primary_key_position
        extension = self.metadata.get(EXTENSION_NAME_KEY.decode())
        if extension is not None:
            pb.extension_name = extension.decode() if isinstance(extension, bytes) else str(extension)
        yield pb
        for child in self.children:
            yield from child.to_protos()

    @property
    def is_unenforced_primary_key(self) -> bool:
        """Whether the field is part of the table's unenforced primary key (official Lance's
        ``lance-schema:unenforced-primary-key`` metadata, or the proto flag)."""
        flag = self.metadata.get(PRIMARY_KEY_KEY)
        if flag is not None:
            text = flag.decode() if isinstance(flag, bytes) else str(flag)
            return text.lower() in ("true", "1", "yes")
        return bool(self.proto is not None and self.proto.unenforced_primary_key)

    @property
    def primary_key_position(self) -> int:
        raw = self.metadata.get(PRIMARY_KEY_KEY + ":position")
        if raw is not None:
            try:
                return int(raw.decode() if isinstance(raw, bytes) else raw)
            except ValueError:
                return 0
        return int(self.proto.unenforced_primary_key_position) if self.proto is not None else 0

    # -- traversal ---------------------------------------------------------------------------
    def walk(self) -> Iterator[LanceField]:
        yield self
        for child in self.children:
            yield from child.walk()

    def leaves(self) -> Iterator[LanceField]:
        if not self.children:
            yield self
        for child in self.children:
            yield from child.leaves()


@dataclass
class LanceSchema:
    """An ordered list of top-level fields plus schema metadata."""

    fields: list[LanceField]
    metadata: dict[str, bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # a list here; called (``schema.fields()``), pylance's views of the fields
        if not isinstance(self.fields, FieldList):
            self.fields = FieldList(self.fields)

    def __repr__(self) -> str:
        return schema_debug_text(self.fields, self.metadata)

    @classmethod
    def from_arrow(cls, schema: pa.Schema, first_id: int = 0) -> LanceSchema:
        next_id = [first_id]
        names = [f.name for f in schema]
        duplicates = {n for n in names if names.count(n) > 1}
        if duplicates:
            raise SchemaMismatchError(f"duplicate column names: {sorted(duplicates)}")
        refuse_dotted_names(names)
        fields = [LanceField.from_arrow(f, next_id) for f in schema]
        metadata = {k.decode(): v for k, v in (schema.metadata or {}).items()}
        return cls(fields, metadata)

    @classmethod
    def from_protos(cls, protos: list[file_pb2.Field], metadata: Mapping[str, bytes]) -> LanceSchema:
        by_id: dict[int, LanceField] = {}
        top: list[LanceField] = []
        for pb in protos:
            node = LanceField(
                name=pb.name,
                id=pb.id,
                logical_type=pb.logical_type,
                nullable=pb.nullable,
                parent_id=pb.parent_id,
                metadata=dict(pb.metadata),
                encoding=pb.encoding,
                proto=pb,
            )
            by_id[pb.id] = node
            if pb.parent_id == -1:
                top.append(node)
            else:
                parent = by_id.get(pb.parent_id)
                if parent is None:
                    raise SchemaMismatchError(
                        f"field {pb.name!r} (id {pb.id}) refers to unknown parent id {pb.parent_id}"
                    )
                parent.children.append(node)
        return cls(top, dict(metadata))

    @classmethod
    def _from_protos(cls, metadata_json: str, *field_protos: bytes) -> LanceSchema:
        """pylance's ``LanceSchema._from_protos``: a schema from serialized ``Field`` messages (parents
        before children) and its metadata as JSON (key -> list of byte values).

        Raises
        ------
        InvalidInputError
            Malformed JSON or message, or a field whose parent does not come before it.
        """
        import json

        from google.protobuf.message import DecodeError

        try:
            raw = json.loads(metadata_json)
            if not isinstance(raw, dict):
                raise ValueError(f"expected a map, got {type(raw).__name__}")
            metadata = {str(k): bytes(v) for k, v in raw.items()}
        except (ValueError, TypeError) as error:
            raise InvalidInputError(f"Failed to parse metadata: {error}") from None
        protos = []
        seen: set[int] = set()
        for blob in field_protos:
            try:
                pb = file_pb2.Field.FromString(bytes(blob))
            except DecodeError as error:
                raise InvalidInputError(f"Failed to parse field proto: {error}") from None
            if pb.parent_id != -1 and pb.parent_id not in seen:
                raise InvalidInputError(f"Failed to reconstruct schema: Field '{pb.name}' (id={pb.id}) references "
                                        f"parent id {pb.parent_id}, which must appear earlier in the protobuf field "
                                        "list")
            seen.add(pb.id)
            protos.append(pb)
        return cls.from_protos(protos, metadata)

    def to_protos(self) -> list[file_pb2.Field]:
        return [pb for f in self.fields for pb in f.to_protos()]

    @classmethod
    def from_pyarrow(cls, schema: pa.Schema) -> LanceSchema:
        """pylance's name for :meth:`from_arrow` (ids from 0)."""
        return cls.from_arrow(schema)

    def to_pyarrow(self) -> pa.Schema:
        """pylance's name for :meth:`to_arrow`."""
        return self.to_arrow()

    def unenforced_primary_key(self) -> list[LanceField]:
        """The fields of the table's unenforced primary key, in key order."""
        keys = [f for f in self.walk() if f.is_unenforced_primary_key]
        return sorted(keys, key=lambda f: (f.primary_key_position, f.id))

    def to_arrow(self) -> pa.Schema:
        metadata = {k.encode(): v for k, v in self.metadata.items()} or None
        return pa.schema([f.to_arrow() for f in self.fields], metadata=metadata)

    # -- lookups -----------------------------------------------------------------------------
    def walk(self) -> Iterator[LanceField]:
        for f in self.fields:
            yield from f.walk()

    def field_ids(self) -> list[int]:
        return [f.id for f in self.walk()]

    def max_field_id(self) -> int:
        return max(self.field_ids(), default=-1)

    def field(self, name: str) -> LanceField:
        for f in self.fields:
            if f.name == name:
                return f
        raise SchemaMismatchError(f"no column named {name!r}; columns are {[f.name for f in self.fields]}")

    def names(self) -> list[str]:
        return [f.name for f in self.fields]

    def project(self, names: list[str]) -> LanceSchema:
        return LanceSchema([self.field(n) for n in names], self.metadata)


def check_arrow_compatible(table_schema: pa.Schema, data_schema: pa.Schema, *, table: str | None = None) -> None:
    """Refuse appended data whose columns do not match the table's (names, order-insensitive, types)."""
    table_fields = {f.name: f for f in table_schema}
    data_fields = {f.name: f for f in data_schema}
    missing = [n for n in table_fields if n not in data_fields]
    extra = [n for n in data_fields if n not in table_fields]
    problems: list[str] = []
    if missing:
        problems.append(f"missing columns {missing}")
    if extra:
        problems.append(f"unknown columns {extra}")
    for name, tf in table_fields.items():
        df = data_fields.get(name)
        if df is not None and has_extension(df.type):
            df = storage_field(df)  # compared as stored
        if has_extension(tf.type):
            tf = storage_field(tf)
        if df is not None and not df.type.equals(tf.type):
            problems.append(f"column {name!r} has type {df.type}, table has {tf.type}")
        elif df is not None and json_paths(df) != json_paths(tf):
            # JSONB and plain binary share a storage type; writing one into the other corrupts reads
            problems.append(f"column {name!r}: JSON fields {sorted(json_paths(df))}, table has "
                            f"{sorted(json_paths(tf))} (arrow.json data for JSON fields only)")
    if problems:
        raise SchemaMismatchError("data does not match the table schema: " + "; ".join(problems), table=table)


def refuse_dotted_names(names: Iterable[str], *, table: str | None = None) -> None:
    """Top-level column names may not contain ``.``: Lance reads ``a.b`` as field ``b`` of ``a``.

    Official Lance refuses such a table on write, and could not read one we wrote.
    """
    dotted = [name for name in names if "." in name]
    if dotted:
        raise InvalidInputError(
            f"top-level column names cannot contain '.': {dotted} (Lance reads 'a.b' as field 'b' of "
            "struct 'a'; rename the column or make it a struct field)", table=table,
        )


# Field metadata keys that mark a struct as packed (stored as one column of fixed-width rows).
PACKED_KEYS = ("lance-encoding:packed", "packed")


def marked_packed(metadata: Mapping[str, str | bytes]) -> bool:
    """Whether field metadata marks a struct as packed (the first key present decides)."""
    for key in PACKED_KEYS:
        flag = metadata.get(key)
        if flag is not None:
            return (flag.encode() if isinstance(flag, str) else flag).lower() in (b"true", b"1")
    return False
