"""Structural page encodings of Lance file versions 2.1 and 2.2 (proto package ``lance.encodings21``).

In 2.1+ files only leaf fields are columns; struct and list structure lives in each leaf's
repetition/definition levels, and a page is described by a ``PageLayout``: mini-block,
full-zip, constant (all null or, in 2.2, one value) or blob. Values inside a layout are
compressed by ``CompressiveEncoding`` trees (flat, FastLanes bit-packing, RLE, FSST, dictionary,
byte-stream-split, general lz4/zstd, ...). 2.1 and 2.2 share these layouts; the few differences
(e.g. 2.2's u32 mini-block chunk words, constant pages with a value, maps) are handled where they
occur, so the package is named after the layouts rather than a version. Decoders are numpy-vectorized.

Decoding side:

- :mod:`.decode_column`: a leaf column's pages, row lookup, and assembly of nested Arrow arrays;
- :mod:`.decode_miniblock`, :mod:`.decode_fullzip`, :mod:`.decode_constant`: the page layouts (and blob pages),
  with :mod:`.decode_pages` as their shared plumbing;
- :mod:`.decode_repdef`: repetition/definition levels back into validity and offsets;
- :mod:`.decode_chunk_codecs`, :mod:`.decode_block_codecs`, :mod:`.decode_value_codecs`: the compressions
  (mini-block, whole-buffer and per-value), with :mod:`.decode_fastlanes` and :mod:`.decode_fsst`;
- :mod:`.decoded_blocks`: decoded value containers and their conversion to Arrow.

Writing side (the ``encode_*`` modules, which never import the decoding side):

- :mod:`.encode_page`: per-page layout choice and the per-field writer the file writer drives;
- :mod:`.encode_repdef`: Arrow columns shredded into leaf pages with rep/def levels;
- :mod:`.encode_values`: leaf values as flat numpy data;
- :mod:`.encode_miniblock`, :mod:`.encode_fullzip`, :mod:`.encode_constant`: the page layouts;
- :mod:`.encode_compression`: the mini-block value compressions, with :mod:`.encode_fastlanes`,
  :mod:`.encode_rle_chunks` and :mod:`.encode_variable_chunks` (pylance's chunk cuts);
- :mod:`.encode_dictionary`, :mod:`.encode_packed`: dictionary pages and packed structs;
- :mod:`.field_params`: the field metadata keys (``lance-encoding:*``) that tune all of the above.
"""
