"""The built-in scalar index types: importing this module registers each of them.

One module per type (``btree``, ``bitmap``, ...); add a type by importing its module here.
"""

from __future__ import annotations

from lance_format.index.scalar import zonemap  # noqa: E402,F401  (idx30b: ZONEMAP)
from lance_format.index.scalar import bloomfilter  # noqa: E402,F401  (idx30b: BLOOMFILTER)
from lance_format.index.scalar import label_list  # noqa: E402,F401  (idx30b: LABEL_LIST)
from lance_format.index.scalar import ngram  # noqa: E402,F401  (idx30b: NGRAM)
