"""pylance's ``lance.indices`` names that apply to this engine's scalar indices.

``IndexConfig`` names an index type and its parameters (``create_scalar_index(col,
IndexConfig("zonemap", {"rows_per_zone": 64}))``). ``IndicesBuilder`` is pylance's vector-index
training helper: this engine builds no vector indices, so using it raises
:class:`~lance_format.errors.UnsupportedFeatureError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from lance_format.errors import UnsupportedFeatureError


@dataclass
class IndexConfig:
    """An index type (``"btree"``, ``"zonemap"``, ...) and its parameters."""

    index_type: str
    parameters: dict = field(default_factory=dict)


class IndexFileVersion(str, Enum):
    """The file layout of an index (pylance's names): ``LEGACY`` or ``V3``."""

    LEGACY = "Legacy"
    V3 = "V3"


class SupportedDistributedIndices(str, Enum):
    """The index types pylance can build distributed (per fragment, then merged)."""

    BTREE = "BTREE"
    INVERTED = "INVERTED"
    IVF_FLAT = "IVF_FLAT"
    IVF_PQ = "IVF_PQ"
    IVF_SQ = "IVF_SQ"
    VECTOR = "VECTOR"


class IndicesBuilder:
    """pylance's vector-index builder (IVF/PQ training): not supported by this engine."""

    def __init__(self, dataset: Any, column: str) -> None:
        raise UnsupportedFeatureError(f"IndicesBuilder (vector index training) on column {column!r} is not "
                                      "supported by this engine")


__all__ = ["IndexConfig", "IndexFileVersion", "IndicesBuilder", "SupportedDistributedIndices"]
