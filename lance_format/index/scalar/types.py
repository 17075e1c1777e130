"""The built-in scalar index types: importing this module registers each of them.

One module per type (``btree``, ``bitmap``, ...); add a type by importing its module here.
"""

from __future__ import annotations

from lance_format.index.scalar import (  # noqa: F401 - each module registers its type
    bitmap,
    bloomfilter,
    btree,
    inverted,
    label_list,
    ngram,
    zonemap,
)
