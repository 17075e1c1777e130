"""pandas support for bfloat16 columns: the ``lance.bfloat16`` pandas dtype and its array
(pylance's ``lance.arrow.PandasBFloat16Array``), so a bfloat16 column converts to pandas as bfloat16.

Imported on first use, so that ``lance_format.arrow`` does not import pandas.
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np
import pyarrow as pa
from pandas.api.extensions import ExtensionArray, ExtensionDtype, register_extension_dtype

from lance_format.arrow import BFLOAT16_NAME, BFloat16, BFloat16Array, bfloat16_array


@register_extension_dtype
class PandasBFloat16Type(ExtensionDtype):
    """The pandas dtype of bfloat16 values (named ``lance.bfloat16`` like the Arrow type)."""

    kind = "f"
    na_value = None
    name = BFLOAT16_NAME
    type = BFloat16
    _is_numeric = True

    def __from_arrow__(self, array: pa.Array | pa.ChunkedArray) -> PandasBFloat16Array:
        if isinstance(array, pa.ChunkedArray):
            array = pa.concat_arrays(array.chunks) if array.num_chunks else bfloat16_array([])
        return PandasBFloat16Array(array)

    @classmethod
    def construct_array_type(cls) -> builtins.type[PandasBFloat16Array]:
        return PandasBFloat16Array

    @classmethod
    def construct_from_string(cls, string: str) -> PandasBFloat16Type:
        if string == BFLOAT16_NAME:
            return cls()
        raise TypeError(f"Cannot construct a '{cls.__name__}' from '{string}'")


class PandasBFloat16Array(ExtensionArray):
    """A pandas array over a bfloat16 Arrow array (kept as is: no conversion until asked)."""

    dtype = PandasBFloat16Type()

    def __init__(self, data: pa.Array) -> None:
        self.data = data

    @classmethod
    def _from_sequence(cls, scalars: Any, *, dtype: Any = None, copy: bool = False) -> PandasBFloat16Array:
        return cls(bfloat16_array(scalars))

    @classmethod
    def from_numpy(cls, array: np.ndarray) -> PandasBFloat16Array:
        return cls(BFloat16Array.from_numpy(array))

    def __getitem__(self, item: Any) -> Any:
        if isinstance(item, (int, np.integer)):
            return self.data[int(item)].as_py()
        if isinstance(item, slice):
            return PandasBFloat16Array(self.data[item])
        if isinstance(item, np.ndarray) and item.dtype == np.bool_:
            return PandasBFloat16Array(self.data.filter(pa.array(item)))
        raise NotImplementedError(f"indexing a bfloat16 array with {type(item).__name__}")

    def __len__(self) -> int:
        return len(self.data)

    def isna(self) -> np.ndarray:
        return self.data.is_null().to_numpy(zero_copy_only=False)

    def to_numpy(self, *args: Any, **kwargs: Any) -> np.ndarray:  # type: ignore[override]
        return self.data.to_numpy()

    def __arrow_array__(self, type: Any = None) -> pa.Array:
        return self.data

    @property
    def nbytes(self) -> int:
        return self.data.nbytes

    def copy(self) -> PandasBFloat16Array:
        return PandasBFloat16Array(self.data)

    @classmethod
    def _concat_same_type(cls, to_concat: Any) -> PandasBFloat16Array:
        return cls(pa.concat_arrays([part.data for part in to_concat]))


__all__ = ["PandasBFloat16Type", "PandasBFloat16Array"]
