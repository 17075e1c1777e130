"""Scalar indices of Lance tables: the layer between ``dataset`` and ``table``.

- :mod:`.store`: an index segment's directory ``_indices/<uuid>/`` and its files, ordinary Lance
  files written and read with the engine's own file writer and reader.
- :mod:`.scalar.queries`: the small query values an index is asked (``Equals``, ``Range``, ...).
- :mod:`.scalar.base`: the :class:`ScalarIndexType` plug-in interface (train / load), the
  :class:`ScalarIndex` a loaded segment is (``search`` -> :class:`SearchResult`) and the registry of
  types by pylance's type name and by the ``index_details`` type URL.

What an index entry holds (pylance 14.0.2's rule, checked on its files): the row identifier the
index type trains on. Most types (BITMAP, LABEL_LIST, NGRAM, INVERTED) store ``_rowid``: the stable
row id when the table has stable row ids, else the row address (``fragment_id << 32 | offset``).
BTREE stores the row *address* even with stable row ids; ZONEMAP and BLOOMFILTER store
addresses (zones of physical rows). Each type says which in :attr:`ScalarIndexType.row_key`;
the query layer turns row ids into addresses before it reads rows.
"""
