"""Byte-level helpers shared by the 2.0 and the 2.1/2.2 page encodings: bitmaps, buffers, compression.

:class:`DecodeContext` names the file and column in decoding errors.

Bitmaps are Arrow-style (LSB-first, 1 = valid/true). Compressed buffers use Lance's framing:
zstd = u64 LE uncompressed size + zstd frame (older files: a bare zstd frame); lz4 = u32 LE
uncompressed size + an LZ4 *block*.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lance_format.errors import CorruptFileError, LanceError, UnsupportedFeatureError

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


@dataclass(frozen=True)
class DecodeContext:
    """Where a page comes from, for error messages."""

    path: str | None = None
    column: str | None = None

    def corrupt(self, message: str) -> CorruptFileError:
        return CorruptFileError(message, path=self.path, column=self.column)


# -- bitmaps ----------------------------------------------------------------------------------


def bitmap_slice(buf: pa.Buffer | None, offset: int, length: int) -> pa.Buffer | None:
    """The bits ``[offset, offset + length)`` of an Arrow bitmap, re-based to bit 0."""
    if buf is None:
        return None
    nbytes = (length + 7) // 8
    if offset % 8 == 0:
        return buf.slice(offset // 8, nbytes)
    start = offset // 8
    end = (offset + length + 7) // 8
    bits = np.unpackbits(np.frombuffer(buf, np.uint8, end - start, start), bitorder="little")
    shift = offset % 8
    return pa.py_buffer(np.packbits(bits[shift : shift + length], bitorder="little"))


def bools_to_bitmap(values: np.ndarray) -> pa.Buffer:
    return pa.py_buffer(np.packbits(values.astype(np.bool_, copy=False), bitorder="little"))


def bitmap_to_bools(buf: pa.Buffer | bytes | memoryview, length: int) -> np.ndarray:
    bits = np.unpackbits(np.frombuffer(buf, np.uint8, (length + 7) // 8), bitorder="little", count=length)
    return bits.view(np.bool_)


def validity_bools(array: pa.Array) -> np.ndarray | None:
    """Per-row validity of ``array`` as numpy bools, or None when it has no nulls."""
    if array.null_count == 0:
        return None
    if array.type == pa.null():
        return np.zeros(len(array), np.bool_)
    buf = array.buffers()[0]
    if buf is None:  # e.g. unions/dictionaries computing nulls elsewhere; fall back to Arrow
        return array.is_valid().to_numpy(zero_copy_only=False)
    bits = np.unpackbits(
        np.frombuffer(buf, np.uint8, (array.offset + len(array) + 7) // 8), bitorder="little"
    )
    return bits[array.offset : array.offset + len(array)].view(np.bool_)


# -- compression --------------------------------------------------------------------------------


def compress_buffer(data: pa.Buffer | bytes, scheme: str, level: int | None, *, column: str | None = None) -> bytes:
    """Compress a page buffer the way Lance's general buffer compressors do."""
    raw = memoryview(data)
    if scheme == "zstd":
        codec = pa.Codec("zstd", compression_level=level) if level is not None else pa.Codec("zstd")
        return struct.pack("<Q", len(raw)) + codec.compress(raw, asbytes=True)
    if scheme == "lz4":
        if len(raw) >= 2**32:
            raise UnsupportedFeatureError("lz4 page buffers are limited to 4 GiB", column=column)
        return struct.pack("<I", len(raw)) + pa.Codec("lz4_raw").compress(raw, asbytes=True)
    raise UnsupportedFeatureError(f"compression scheme {scheme!r} is not supported", column=column)


def decompress_buffer(data: pa.Buffer, scheme: str, ctx: DecodeContext) -> pa.Buffer:
    """Undo :func:`compress_buffer` (also accepts bare zstd frames written by older Lance)."""
    try:
        if scheme == "zstd":
            if len(data) == 0:
                return data
            head = bytes(data[:8]) if len(data) >= 8 else b""
            raw_frame = len(data) < 8 or (head[:4] == ZSTD_MAGIC and not (head[4] & 0x10))
            if raw_frame:
                return pa.CompressedInputStream(pa.BufferReader(data), "zstd").read_buffer()
            size = struct.unpack("<Q", head)[0]
            return pa.Codec("zstd").decompress(data.slice(8), decompressed_size=size)
        if scheme == "lz4":
            if len(data) < 4:
                raise ctx.corrupt("lz4 buffer is too short")
            size = struct.unpack("<I", bytes(data[:4]))[0]
            return pa.Codec("lz4_raw").decompress(data.slice(4), decompressed_size=size)
    except LanceError:  # already says what is wrong (LanceErrors are also OSError/ValueError)
        raise
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ctx.corrupt(f"cannot decompress {scheme} page buffer: {exc}") from exc
    raise UnsupportedFeatureError(
        f"page compression scheme {scheme!r} is not supported", path=ctx.path, column=ctx.column
    )
