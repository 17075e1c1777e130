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


def is_number(dtype: pa.DataType) -> bool:
    return pa.types.is_integer(dtype) or pa.types.is_floating(dtype) or pa.types.is_decimal(dtype)


#: one side of a comparison: its expression, its type and its value when it is a literal
Operand = tuple[pc.Expression, pa.DataType, "pa.Scalar | None"]


def compare_floats(function: str, left: Operand, right: Operand) -> pc.Expression | None:
    """``function`` (``equal``, ``less``, ...) by totalOrder when a side is a float, else None.

    Against a literal the zeros are equal and the literal takes the column's float type (pylance
    casts it: a float32 column equals ``1.1``); between two expressions -0.0 < 0.0.
    """
    (left_expr, left_type, left_literal), (right_expr, right_type, right_literal) = left, right
    if not (is_float(left_type) or is_float(right_type)) or (left_literal is not None and right_literal is not None):
        return None
    if left_literal is not None or right_literal is not None:
        column_is_left = right_literal is not None
        column_expr, column_type = (left_expr, left_type) if column_is_left else (right_expr, right_type)
        scalar = right_literal if column_is_left else left_literal
        assert scalar is not None
        if not is_float(column_type) or not is_number(scalar.type):
            return None
        if not scalar.is_valid:
            return pc.scalar(pa.scalar(None, pa.bool_()))
        key = pc.scalar(pa.scalar(literal_key(float(scalar.as_py()), column_type), pa.int64()))
        column_key = order_key(column_expr, column_type, zeros_equal=True)
        return pc.Expression._call(function, [column_key, key] if column_is_left else [key, column_key])
    if not (is_number(left_type) and is_number(right_type)):
        return None
    common = pa.float32() if pa.types.is_float32(left_type) and pa.types.is_float32(right_type) else pa.float64()
    keys = [order_key(expr.cast(common), common, zeros_equal=False) for expr in (left_expr, right_expr)]
    return pc.Expression._call(function, keys)
