"""Page encodings of Lance data files: how a column's values become page buffers and back.

One subpackage per family of page layouts, named after the layouts it holds (the file container
around the pages is :mod:`lance_format.file`):

- :mod:`.array_v2_0`: file version 2.0, where every page is described by an ``ArrayEncoding``
  tree (``lance.encodings``): Nullable, Flat, Binary, Dictionary, List, FixedSizeList,
  SimpleStruct;
- :mod:`.structural`: file versions 2.1 and 2.2, whose pages use the structural ``PageLayout``
  protos (``lance.encodings21``): mini-block, full-zip, constant and blob layouts with
  repetition/definition levels and compressive encodings (FastLanes, FSST, RLE, ...);
- :mod:`.buffers`: byte helpers both families share (bitmaps, buffer compression, decode
  context).

Older layouts get their own subpackage named the same way (``legacy_v0_1`` for the 0.1 format).
"""
