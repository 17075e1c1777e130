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
BTREE stores row *addresses*, and with stable row ids pylance writes it with ``index_version``
1, which is how a reader knows (a version-0 BTREE in such a table holds row ids); ZONEMAP and
BLOOMFILTER store addresses (zones of physical rows). A type says what its new segments hold
(:attr:`ScalarIndexType.row_key`), which ``index_version`` they get
(:meth:`ScalarIndexType.version_for`) and what an existing segment of a given version holds
(:meth:`ScalarIndexType.entries_hold`); the query layer turns row ids into addresses before it
reads rows. (pylance 14.0.2 also writes LABEL_LIST with ``index_version`` 1 in stable-row-id
tables, yet its entries are row ids: the version's meaning is per type.)
"""
