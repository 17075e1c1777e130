"""Decoders of Lance file versions 2.1 and 2.2 (structural encodings), numpy-vectorized.

- :mod:`.column`: a leaf column's pages, row lookup, and assembly of nested Arrow arrays;
- :mod:`.miniblock`, :mod:`.fullzip`, :mod:`.constant`: the page layouts (and blob pages);
- :mod:`.repdef`: repetition/definition levels back into validity and offsets;
- :mod:`.chunk_codecs`, :mod:`.block_codecs`, :mod:`.value_codecs`: the compressions
  (mini-block, whole-buffer and per-value), with :mod:`.fastlanes` and :mod:`.fsst`;
- :mod:`.blocks`: decoded value containers and their conversion to Arrow.

The writer side (``encode_*``) lives next to these modules.
"""
