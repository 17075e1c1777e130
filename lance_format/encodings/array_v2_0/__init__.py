"""Page encodings of Lance file version 2.0: ``ArrayEncoding`` trees (proto package ``lance.encodings``).

In a 2.0 file every schema field, parents included, is a column, and each of its pages is
described by one ``ArrayEncoding`` tree (a "logical" node such as Nullable, List or SimpleStruct
around "physical" ones such as Flat, Binary, Dictionary or FixedSizeList); there are no
repetition/definition levels. The package is named after that proto rather than "v2_0" alone
because the later versions (:mod:`lance_format.encodings.structural`) describe pages with
different protos.

- :mod:`.decode`: one page (its ArrayEncoding and buffers) into an Arrow array;
- :mod:`.encode`: Arrow arrays into pages, byte for byte as pylance 14 writes ``version="2.0"``.
"""
