"""Page encodings of Lance data files (file version 2.0: encoders, decoders, byte helpers)."""

from lance_format.encodings.buffers import DecodeContext
from lance_format.encodings.v2_0_decode import decode_leaf, decode_list_offsets
from lance_format.encodings.v2_0_encode import EncodedPage, encode_leaf_pages, encode_list_offsets

__all__ = ["DecodeContext", "EncodedPage", "decode_leaf", "decode_list_offsets", "encode_leaf_pages", "encode_list_offsets"]
