"""pylance's ``lance.arrow``: bfloat16 support (:class:`BFloat16Type`, the Arrow extension type
``lance.bfloat16`` over 2-byte values, :class:`BFloat16Array` and :func:`bfloat16_array`) and the
image types of :mod:`lance_format.arrow_images`.

The engine itself never needs the type registered: without it a bfloat16 column reads as its
2-byte storage with the extension named in the field metadata, and nothing is lost. The first
bfloat16 array made here registers the type with pyarrow (so such columns then read back as
bfloat16 arrays), unless a type of that name is registered already (e.g. by pylance's
``lance.arrow``), which is then the one used. Importing the module registers nothing: pylance
registers its type without checking, and would fail after us.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.arrow_images import (
    EncodedImageArray,
    EncodedImageScalar,
    EncodedImageType,
    FixedShapeImageTensorArray,
    FixedShapeImageTensorScalar,
    FixedShapeImageTensorType,
    ImageArray,
    ImageScalar,
    ImageURIArray,
    ImageURIScalar,
    ImageURIType,
)
from lance_format.errors import InvalidInputError

BFLOAT16_NAME = "lance.bfloat16"


def _bits_from_float32(values: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns of float32 values, rounded to nearest even (NaN stays NaN)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounding = np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    rounded = ((bits + rounding) >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(values)
    if nan.any():
        rounded[nan] = ((bits[nan] >> np.uint32(16)) | np.uint32(0x40)).astype(np.uint16)
    return rounded


def _float32_from_bits(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


class BFloat16Array(pa.ExtensionArray):
    """An array of bfloat16 values (2-byte storage)."""

    def __repr__(self) -> str:
        return f"<lance.arrow.BFloat16Array object at 0x{id(self):016x}>\n{self}"

    def __str__(self) -> str:
        # pylance's layout: one value a line, the first and last ten of longer arrays
        def lines(values: pa.Array) -> str:
            return ",\n".join(f"  {value.as_py()}" for value in values)

        if len(self) < 22:
            return f"[\n{lines(self)}\n]"
        return f"[\n{lines(self[:10])},\n...\n{lines(self[-10:])}\n]"

    def to_numpy(self, zero_copy_only: bool = False, writable: bool = False) -> np.ndarray:  # type: ignore[override]
        """The values as an ``ml_dtypes.bfloat16`` numpy array, without copying (as pylance;
        ``ml_dtypes`` must be installed). Arrays with nulls cannot convert (``ValueError``)."""
        if self.null_count > 0:
            raise InvalidInputError("Cannot convert null values to numpy")
        from ml_dtypes import bfloat16

        storage = self.storage
        data = np.frombuffer(storage.buffers()[1], dtype=bfloat16, count=storage.offset + len(storage))
        return data[storage.offset:]

    @classmethod
    def from_numpy(cls, array: np.ndarray) -> BFloat16Array:
        """bfloat16 values of a one-dimensional numpy array: ``ml_dtypes.bfloat16`` values as they
        are, other floats rounded to nearest even (pylance takes bfloat16 arrays only)."""
        array = np.asarray(array)
        if array.ndim != 1:
            raise InvalidInputError("Cannot convert multi-dimensional array to BFloat16Array")
        if array.dtype.name == "bfloat16":
            bits = np.ascontiguousarray(array).view(np.uint16)
        elif array.dtype.kind in "fiu":
            bits = _bits_from_float32(array.astype(np.float32))
        else:
            raise InvalidInputError("Cannot convert non-bfloat16 values to BFloat16Array")
        storage = pa.FixedSizeBinaryArray.from_buffers(pa.binary(2), len(bits), [None, pa.py_buffer(bits.tobytes())])
        return pa.ExtensionArray.from_storage(bfloat16_type(), storage)  # type: ignore[return-value]


class BFloat16Scalar(pa.ExtensionScalar):
    """One bfloat16 value; ``as_py`` gives it as a :class:`BFloat16` (as pylance)."""

    def as_py(self, **kwargs: Any) -> BFloat16 | None:  # type: ignore[override]
        if self.value is None:
            return None
        return BFloat16.from_bytes(self.value.as_py())

    def __eq__(self, other: Any) -> bool:  # type: ignore[override]
        if isinstance(other, BFloat16Scalar):
            return bool(self.as_py() == other.as_py())
        if isinstance(other, BFloat16):
            return bool(self.as_py() == other)
        if type(other).__name__ == "bfloat16":  # an ml_dtypes scalar
            return bool(self.as_py() == BFloat16.from_bytes(other.tobytes()))
        return False

    __hash__ = None  # type: ignore[assignment]


class BFloat16Type(pa.ExtensionType):
    """The ``lance.bfloat16`` extension type: bfloat16 values stored as ``binary(2)``."""

    def __init__(self) -> None:
        super().__init__(pa.binary(2), BFLOAT16_NAME)

    def __arrow_ext_serialize__(self) -> bytes:
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type: pa.DataType, serialized: bytes) -> BFloat16Type:
        return cls()

    def __arrow_ext_class__(self) -> type:
        return BFloat16Array

    def to_pandas_dtype(self) -> Any:
        """pandas' ``lance.bfloat16`` dtype, so ``to_pandas`` keeps the values bfloat16."""
        from lance_format.arrow_pandas import PandasBFloat16Type

        return PandasBFloat16Type()

    def __arrow_ext_scalar_class__(self) -> type:
        return BFloat16Scalar


def _registered_type() -> pa.DataType:
    """The type pyarrow builds for ``lance.bfloat16`` (ours, or one registered before us)."""
    field = pa.field("x", pa.binary(2), metadata={b"ARROW:extension:name": BFLOAT16_NAME.encode(),
                                                  b"ARROW:extension:metadata": b""})
    schema = pa.ipc.read_schema(pa.py_buffer(pa.schema([field]).serialize()))
    return schema.field("x").type


_REGISTERED: list[pa.DataType] = []


def bfloat16_type() -> pa.DataType:
    """The registered ``lance.bfloat16`` type; registers ours on first use unless one is."""
    if not _REGISTERED:
        try:
            pa.register_extension_type(BFloat16Type())
        except pa.ArrowKeyError:  # registered already (pylance's lance.arrow): use that one
            pass
        _REGISTERED.append(_registered_type())
    return _REGISTERED[0]


def bfloat16_array(values: Iterable[float | None]) -> pa.ExtensionArray:
    """A bfloat16 array of ``values`` (floats or None), as pylance's ``bfloat16_array``."""
    floats = pa.array([value.as_float() if isinstance(value, BFloat16) else value for value in values], pa.float32())
    bits = _bits_from_float32(floats.fill_null(0).to_numpy(zero_copy_only=False))
    validity = floats.buffers()[0] if floats.null_count else None
    storage = pa.FixedSizeBinaryArray.from_buffers(pa.binary(2), len(bits), [validity, pa.py_buffer(bits.tobytes())],
                                                   null_count=floats.null_count)
    return pa.ExtensionArray.from_storage(bfloat16_type(), storage)


class BFloat16:
    """One bfloat16 number (pylance's ``lance.arrow.BFloat16``): compares with other bfloat16 values."""

    __slots__ = ("_bits",)
    __hash__ = None  # type: ignore[assignment]  # unhashable, as pylance's

    def __init__(self, value: float) -> None:
        if not isinstance(value, (int, float, np.floating, np.integer)) or isinstance(value, bool):
            raise TypeError(f"argument 'value': must be real number, not {type(value).__name__}")
        self._bits = int(_bits_from_float32(np.array([value], dtype=np.float32))[0])

    @classmethod
    def from_bytes(cls, data: bytes) -> BFloat16:
        """The bfloat16 whose little-endian 2-byte encoding is ``data``."""
        if len(data) != 2:
            raise InvalidInputError(f"BFloat16::from_bytes: expected 2 bytes, got {len(data)}")
        result = cls.__new__(cls)
        result._bits = int.from_bytes(data, "little")
        return result

    def as_float(self) -> float:
        return float(_float32_from_bits(np.array([self._bits], dtype=np.uint16))[0])

    def __repr__(self) -> str:
        value = self.as_float()
        if value != value:
            return "NaN"
        if value in (float("inf"), float("-inf")):
            return "inf" if value > 0 else "-inf"
        # Rust's float Display: the shortest round-tripping digits, never an exponent, no ".0"
        return np.format_float_positional(np.float32(value), trim="-")

    __str__ = __repr__

    def _compare(self, other: object, op: Any) -> Any:
        if not isinstance(other, BFloat16):
            return NotImplemented
        return op(self.as_float(), other.as_float())

    def __eq__(self, other: object) -> Any:
        return self._compare(other, float.__eq__) if isinstance(other, BFloat16) else False

    def __lt__(self, other: BFloat16) -> Any:
        return self._compare(other, float.__lt__)

    def __le__(self, other: BFloat16) -> Any:
        return self._compare(other, float.__le__)

    def __gt__(self, other: BFloat16) -> Any:
        return self._compare(other, float.__gt__)

    def __ge__(self, other: BFloat16) -> Any:
        return self._compare(other, float.__ge__)


_BF16_NAMES = ("bfloat16", "bf16")


def _is_bfloat16(data_type: Any) -> bool:
    return isinstance(data_type, pa.BaseExtensionType) and data_type.extension_name == BFLOAT16_NAME


def cast(arr: pa.Array, target_type: pa.DataType | str, *args: Any, **kwargs: Any) -> pa.Array:
    """``pyarrow.compute.cast`` that also casts floats to and from bfloat16 (pylance's ``lance.arrow.cast``).

    Float arrays (any width) cast to bfloat16 (``"bfloat16"``, ``"bf16"`` or the extension type) and
    back, rounding to nearest even; fixed-size lists of floats cast element-wise to lists of the same
    size. Nulls stay null. Anything else is ``pyarrow.compute.cast``.
    """
    wants_bf16 = _is_bfloat16(target_type) or (isinstance(target_type, str) and target_type in _BF16_NAMES)
    if wants_bf16:
        return _to_bfloat16(arr)
    if isinstance(target_type, str):
        target_type = pa.type_for_alias(target_type)
    assert isinstance(target_type, pa.DataType)
    mask = arr.is_null() if arr.null_count else None
    if _is_bfloat16(arr.type):
        if not pa.types.is_floating(target_type):
            raise InvalidInputError(f"Only support casting bfloat16 array to floating array, got: {target_type}")
        storage = arr.storage
        bits = np.frombuffer(storage.buffers()[1], dtype=np.uint16, count=storage.offset + len(storage))
        floats = _float32_from_bits(bits[storage.offset:]).astype(target_type.to_pandas_dtype())
        return pa.array(floats, type=target_type, mask=None if mask is None else mask.to_numpy(zero_copy_only=False))
    if pa.types.is_fixed_size_list(arr.type) and pa.types.is_fixed_size_list(target_type):
        size = arr.type.list_size
        if size != target_type.list_size:
            raise InvalidInputError("Only support casting fixed size list to fixed size list "
                                    f"with the same size, got: {arr.type} to {target_type}")
        values = cast(arr.values.slice(arr.offset * size, len(arr) * size), target_type.value_type)
        return pa.FixedSizeListArray.from_arrays(values, size, mask=mask)
    return pc.cast(arr, target_type, *args, **kwargs)


def _to_bfloat16(arr: pa.Array) -> pa.Array:
    if not pa.types.is_floating(arr.type):
        raise InvalidInputError(f"Only support casting floating array to bfloat16 array, got: {arr.type}")
    floats = pc.cast(arr, pa.float32())
    bits = _bits_from_float32(floats.fill_null(0).to_numpy(zero_copy_only=False))
    validity = None
    if floats.null_count:  # a fresh bitmap: the cast's own may start at a bit offset
        valid = floats.is_valid().to_numpy(zero_copy_only=False)
        validity = pa.py_buffer(np.packbits(valid, bitorder="little").tobytes())
    storage = pa.FixedSizeBinaryArray.from_buffers(pa.binary(2), len(bits), [validity, pa.py_buffer(bits.tobytes())],
                                                   null_count=floats.null_count)
    return pa.ExtensionArray.from_storage(bfloat16_type(), storage)


def __getattr__(name: str) -> Any:
    # the pandas types import pandas: only when asked for
    if name in ("PandasBFloat16Array", "PandasBFloat16Type"):
        from lance_format import arrow_pandas

        return getattr(arrow_pandas, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BFloat16Type", "BFloat16Array", "BFloat16Scalar", "BFloat16", "bfloat16_array", "bfloat16_type", "cast",
    "EncodedImageArray", "EncodedImageScalar", "EncodedImageType", "FixedShapeImageTensorArray",
    "FixedShapeImageTensorScalar", "FixedShapeImageTensorType", "ImageArray", "ImageScalar", "ImageURIArray",
    "ImageURIScalar", "ImageURIType",
]
