"""Page encodings of the legacy Lance file format (file version 0.1, footer versions 0.0-0.2).

A legacy page holds one field's values for one row batch, without validity bitmaps:

* plain: fixed-width values back to back (bools bit-packed LSB-first, fixed-size lists flattened);
* var-binary: the value bytes, then ``n + 1`` i64 *absolute file positions* (the page points at
  the positions); an empty value of a nullable field reads as null;
* list offsets: ``n + 1`` plain i32 (list) or i64 (large list) offsets into the child's page;
* dictionary: plain keys; the values live in the manifest file.
"""

from lance_format.encodings.legacy_v0_1.pages import (
    ReadAt,
    fixed_stride_bits,
    read_binary,
    read_fixed,
    read_offsets,
)

__all__ = ["ReadAt", "fixed_stride_bits", "read_binary", "read_fixed", "read_offsets"]
