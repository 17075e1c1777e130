"""The container of Lance data files, versions 2.0, 2.1 and 2.2: footer, column-metadata and
global-buffer tables, and the ``Any`` helpers of page encodings.

The container does not depend on the version; only the pages inside it do (see
:mod:`lance_format.encodings`). Layout::

    [page buffers, each padded with 0x48 to 64 bytes]
    [global buffer 0 = FileDescriptor proto]  [column metadata protos]
    [CMO table: N x (u64 pos, u64 size)]  [GBO table: G x (u64 pos, u64 size)]
    [footer, 40 bytes: u64 cm_start, u64 cmo_start, u64 gbo_start, u32 G, u32 N,
                       u16 major, u16 minor, b"LANC"]

Version 2.0 files carry the footer version (0, 3); legacy 0.1 files have another container but
end with the same last 8 bytes (major, minor, magic), which lets us recognise and refuse them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
from google.protobuf import any_pb2
from google.protobuf.message import DecodeError, Message

from lance_format.errors import CorruptFileError, UnsupportedFeatureError
from lance_format.proto import file2_pb2, file_pb2

MAGIC = b"LANC"
FOOTER_LEN = 40
PAGE_BUFFER_ALIGNMENT = 64
PAD_BYTE = 0x48
# How much of the file tail to read up front: the metadata of most files fits in one read.
TAIL_READ_BYTES = 64 * 1024

ARRAY_ENCODING_URL = "/lance.encodings.ArrayEncoding"

_FOOTER = struct.Struct("<QQQIIHH4s")


def pad_len(n: int, alignment: int = PAGE_BUFFER_ALIGNMENT) -> int:
    """Number of padding bytes that bring ``n`` up to a multiple of ``alignment``."""
    return (-n) % alignment


def pack_any(message: Message) -> bytes:
    """Serialize ``message`` as a ``google.protobuf.Any`` the way Lance does (type_url '/pkg.Name').

    ``Any.Pack`` would write ``type.googleapis.com/...``, which Lance does not use.
    """
    wrapped = any_pb2.Any(type_url="/" + message.DESCRIPTOR.full_name, value=message.SerializeToString())
    return wrapped.SerializeToString()


def unpack_any(data: bytes, message_cls: type[Message], *, path: str | None = None, column: str | None = None) -> Message:
    """Parse an ``Any`` and its payload, checking that the payload is a ``message_cls``."""
    try:
        wrapped = any_pb2.Any.FromString(data)
        expected = message_cls.DESCRIPTOR.full_name
        if wrapped.type_url.rsplit("/", 1)[-1] != expected:
            raise CorruptFileError(
                f"expected an encoding of type {expected}, found {wrapped.type_url!r}", path=path, column=column
            )
        return message_cls.FromString(wrapped.value)
    except DecodeError as exc:
        raise CorruptFileError(f"undecodable {message_cls.__name__} protobuf: {exc}", path=path, column=column) from exc


@dataclass(frozen=True)
class Footer:
    column_meta_start: int
    cmo_table_start: int
    gbo_table_start: int
    num_global_buffers: int
    num_columns: int
    major: int
    minor: int

    def to_bytes(self) -> bytes:
        return _FOOTER.pack(
            self.column_meta_start,
            self.cmo_table_start,
            self.gbo_table_start,
            self.num_global_buffers,
            self.num_columns,
            self.major,
            self.minor,
            MAGIC,
        )


def parse_footer(tail: bytes, *, path: str) -> Footer:
    """Decode the 40-byte footer at the end of ``tail``; refuse non-Lance and non-v2 files."""
    if len(tail) < 8 or tail[-4:] != MAGIC:
        raise CorruptFileError("not a Lance file (bad or missing footer magic)", path=path)
    major, minor = struct.unpack_from("<HH", tail, len(tail) - 8)
    check_version(major, minor, path=path)
    if len(tail) < FOOTER_LEN:
        raise CorruptFileError(f"file is too short ({len(tail)} bytes) to hold a Lance footer", path=path)
    fields = _FOOTER.unpack_from(tail, len(tail) - FOOTER_LEN)
    return Footer(*fields[:7])


def check_version(major: int, minor: int, *, path: str) -> None:
    """Accept file versions 2.0 (footer (0,3) or (2,0)), 2.1 and 2.2; refuse everything else clearly."""
    if (major, minor) in ((0, 3), (2, 0), (2, 1), (2, 2)):
        return
    if major == 0 and minor <= 2:
        raise UnsupportedFeatureError(
            f"legacy Lance file version 0.{minor} is not supported (only 2.0-2.2 files can be read)", path=path
        )
    if major == 2:
        raise UnsupportedFeatureError(f"file version 2.{minor} is not supported yet", path=path)
    raise UnsupportedFeatureError(f"unknown Lance file version {major}.{minor}", path=path)


@dataclass
class FileMetadata:
    """Everything the footer and its tables describe, decoded."""

    footer: Footer
    file_size: int
    columns: list[file2_pb2.ColumnMetadata]
    global_buffers: list[tuple[int, int]]
    descriptor: file_pb2.FileDescriptor

    @property
    def version(self) -> tuple[int, int]:
        return (self.footer.major, self.footer.minor)


def _read_at(f, offset: int, length: int, *, path: str) -> bytes:
    data = f.read_at(length, offset)
    if len(data) != length:
        raise CorruptFileError(f"short read: wanted {length} bytes at {offset}, got {len(data)}", path=path)
    return bytes(data)


def read_file_metadata(f, file_size: int, *, path: str) -> FileMetadata:
    """Read and validate the footer, offset tables, column metadata and FileDescriptor."""
    if file_size < 8:
        raise CorruptFileError(f"file is too short ({file_size} bytes) to be a Lance file", path=path)
    tail_start = max(0, file_size - TAIL_READ_BYTES)
    tail = _read_at(f, tail_start, file_size - tail_start, path=path)
    footer = parse_footer(tail, path=path)
    meta_end = file_size - FOOTER_LEN
    if not (
        footer.column_meta_start <= footer.cmo_table_start <= footer.gbo_table_start <= meta_end
        and footer.cmo_table_start + 16 * footer.num_columns <= footer.gbo_table_start
        and footer.gbo_table_start + 16 * footer.num_global_buffers <= meta_end
    ):
        raise CorruptFileError(
            "footer offsets are inconsistent or point past the end of the file "
            f"(cm={footer.column_meta_start}, cmo={footer.cmo_table_start}, gbo={footer.gbo_table_start}, "
            f"columns={footer.num_columns}, global buffers={footer.num_global_buffers}, size={file_size})",
            path=path,
        )

    def region(start: int, end: int) -> bytes:
        if start >= tail_start:
            return tail[start - tail_start : end - tail_start]
        return _read_at(f, start, end - start, path=path)

    cmo = np.frombuffer(region(footer.cmo_table_start, footer.cmo_table_start + 16 * footer.num_columns), "<u8")
    gbo = np.frombuffer(
        region(footer.gbo_table_start, footer.gbo_table_start + 16 * footer.num_global_buffers), "<u8"
    )
    cmo = cmo.reshape(-1, 2)
    gbo = gbo.reshape(-1, 2)
    if footer.num_global_buffers < 1:
        raise CorruptFileError("file has no global buffers (the FileDescriptor is missing)", path=path)
    for pos, size in gbo:
        if int(pos) + int(size) > file_size:
            raise CorruptFileError(f"global buffer ({pos}, {size}) lies past the end of the file", path=path)
    columns: list[file2_pb2.ColumnMetadata] = []
    if len(cmo):
        lo = int(cmo[:, 0].min())
        hi = int((cmo[:, 0] + cmo[:, 1]).max())
        if lo < footer.column_meta_start or hi > footer.cmo_table_start:
            raise CorruptFileError("column metadata offsets lie outside the column metadata region", path=path)
        blob = region(lo, hi)
        for index, (pos, size) in enumerate(cmo):
            start = int(pos) - lo
            try:
                columns.append(file2_pb2.ColumnMetadata.FromString(blob[start : start + int(size)]))
            except DecodeError as exc:
                raise CorruptFileError(
                    f"undecodable column metadata for column {index}: {exc}", path=path, column=str(index)
                ) from exc
    fd_pos, fd_size = (int(x) for x in gbo[0])
    try:
        descriptor = file_pb2.FileDescriptor.FromString(region(fd_pos, fd_pos + fd_size))
    except DecodeError as exc:
        raise CorruptFileError(f"undecodable FileDescriptor: {exc}", path=path) from exc
    return FileMetadata(
        footer=footer,
        file_size=file_size,
        columns=columns,
        global_buffers=[(int(p), int(s)) for p, s in gbo],
        descriptor=descriptor,
    )


def encoding_bytes(encoding: file2_pb2.Encoding, f, *, path: str, column: str | None) -> bytes:
    """The serialized ``Any`` an Encoding points at (direct, or indirect via a file buffer)."""
    which = encoding.WhichOneof("location")
    if which == "direct":
        return encoding.direct.encoding
    if which == "indirect":
        return _read_at(f, encoding.indirect.buffer_location, encoding.indirect.buffer_length, path=path)
    raise CorruptFileError("page or column has no encoding description", path=path, column=column)


def direct_encoding(any_bytes: bytes) -> file2_pb2.Encoding:
    return file2_pb2.Encoding(direct=file2_pb2.DirectEncoding(encoding=any_bytes))


def build_tail(
    position: int,
    descriptor: file_pb2.FileDescriptor,
    columns: list[file2_pb2.ColumnMetadata],
    extra_global_buffers: list[tuple[int, int]] | None = None,
    *,
    version: tuple[int, int] = (0, 3),
) -> bytes:
    """Bytes that follow the last page buffer at ``position``: descriptor, metadata, tables, footer."""
    out = bytearray()
    descriptor_bytes = descriptor.SerializeToString()
    global_buffers = [(position, len(descriptor_bytes))] + list(extra_global_buffers or [])
    out += descriptor_bytes
    cm_start = position + len(out)
    offsets: list[tuple[int, int]] = []
    for column in columns:
        data = column.SerializeToString()
        offsets.append((position + len(out), len(data)))
        out += data
    cmo_start = position + len(out)
    for pos, size in offsets:
        out += struct.pack("<QQ", pos, size)
    gbo_start = position + len(out)
    for pos, size in global_buffers:
        out += struct.pack("<QQ", pos, size)
    out += Footer(cm_start, cmo_start, gbo_start, len(global_buffers), len(columns), *version).to_bytes()
    return bytes(out)
