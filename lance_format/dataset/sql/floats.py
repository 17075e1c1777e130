"""Float comparisons with DataFusion's semantics (pylance 14), not IEEE's.

DataFusion compares floats by IEEE 754 ``totalOrder``: NaN equals itself and sorts above every
number (+inf included), a NaN with its sign bit set sorts below -inf, and the sign of zero
matters (``-0.0 < 0.0``) when two expressions are compared. Against a literal, pylance treats
``-0.0`` and ``0.0`` as equal (measured with pylance 14.0.2: ``x = 0.0`` keeps both zeros, while
``x = y`` with ``x = -0.0, y = 0.0`` does not).

pyarrow's comparison kernels follow IEEE, so a float comparison is rewritten as a comparison of
order-preserving int64 keys: the float's bits, with the magnitude bits flipped for negative
values. The keys are computed by a vectorized UDF (numpy over the value buffer).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_MAGNITUDE = {8: np.int64(0x7FFFFFFFFFFFFFFF), 4: np.int32(0x7FFFFFFF)}
_INT_VIEW = {8: np.int64, 4: np.int32}
_REGISTERED: set[str] = set()


def total_order_keys(values: np.ndarray, zeros_equal: bool) -> np.ndarray:
    """int64 keys ordered like ``totalOrder`` of ``values`` (float32 or float64)."""
    if zeros_equal:
        values = np.where(values == 0, values.dtype.type(0.0), values)
    width = values.dtype.itemsize
    bits = np.ascontiguousarray(values).view(_INT_VIEW[width])
    keys = np.where(bits < 0, bits ^ _MAGNITUDE[width], bits)
    return keys.astype(np.int64, copy=False)


def literal_key(value: float, dtype: pa.DataType) -> int:
    """The key of a constant compared with a column of float type ``dtype`` (zeros equal)."""
    numpy_type = np.float32 if pa.types.is_float32(dtype) else np.float64
    return int(total_order_keys(np.array([value], dtype=numpy_type), zeros_equal=True)[0])


def _keys_of(array: pa.Array | pa.ChunkedArray | pa.Scalar, zeros_equal: bool) -> pa.Array | pa.Scalar:
    if isinstance(array, pa.Scalar):
        if not array.is_valid:
            return pa.scalar(None, pa.int64())
        return pa.scalar(literal_key(array.as_py(), array.type) if zeros_equal else
                         int(total_order_keys(np.array([array.as_py()], dtype=array.type.to_pandas_dtype()),
                                              zeros_equal=False)[0]), pa.int64())
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    numbers = array.fill_null(0).to_numpy(zero_copy_only=False)
    keys = total_order_keys(numbers, zeros_equal)
    mask = None if array.null_count == 0 else ~np.asarray(array.is_valid().to_numpy(zero_copy_only=False))
    return pa.array(keys, pa.int64(), mask=mask)


def order_key(expr: pc.Expression, dtype: pa.DataType, zeros_equal: bool) -> pc.Expression:
    """An int64 expression ordered like ``expr`` (a float32/float64 expression) under totalOrder."""
    name = f"lance_float_order_key__{dtype}__{'zeros_equal' if zeros_equal else 'signed_zero'}"
    if name not in _REGISTERED:
        def keys(ctx: Any, values: Any) -> Any:
            return _keys_of(values, zeros_equal)

        try:
            pc.register_scalar_function(keys, name, {"summary": "totalOrder key", "description": name},
                                        {"values": dtype}, pa.int64())
        except pa.ArrowKeyError:
            pass  # registered earlier in this process
        _REGISTERED.add(name)
    return pc.Expression._call(name, [expr])


def is_float(dtype: pa.DataType) -> bool:
    return pa.types.is_float32(dtype) or pa.types.is_float64(dtype)
