"""The built-in scalar index types: importing this module registers each of them.

One module per type (``btree``, ``bitmap``, ...); add a type by importing its module here.
"""

from __future__ import annotations

from lance_format.index.scalar import bitmap, bloomfilter, btree, label_list, ngram, zonemap  # noqa: F401 - registers BITMAP and BTREE  # noqa: F401 - idx30b's types
