"""pylance's ``lance.arrow`` bfloat16 support: :class:`BFloat16Type` (the Arrow extension type
``lance.bfloat16`` over 2-byte values), :class:`BFloat16Array` and :func:`bfloat16_array`.

The engine itself never needs the type registered: without it a bfloat16 column reads as its
2-byte storage with the extension named in the field metadata, and nothing is lost. The first
bfloat16 array made here registers the type with pyarrow (so such columns then read back as
bfloat16 arrays), unless a type of that name is registered already (e.g. by pylance's
``lance.arrow``), which is then the one used. Importing the module registers nothing: pylance
registers its type without checking, and would fail after us.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

import numpy as np
import pyarrow as pa

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

    def to_numpy(self, zero_copy_only: bool = False, writable: bool = False) -> np.ndarray:  # type: ignore[override]
        """The values as float32 (numpy has no bfloat16; nulls become NaN)."""
        storage = self.storage
        data = np.frombuffer(storage.buffers()[1], dtype=np.uint16, count=storage.offset + len(storage))
        values = _float32_from_bits(data[storage.offset:])
        if storage.null_count:
            values = np.where(np.asarray(storage.is_valid()), values, np.float32("nan"))
        return values

    @classmethod
    def from_numpy(cls, array: np.ndarray) -> "BFloat16Array":
        """bfloat16 values of a float array (rounded to nearest even)."""
        bits = _bits_from_float32(np.asarray(array, dtype=np.float32))
        storage = pa.FixedSizeBinaryArray.from_buffers(pa.binary(2), len(bits), [None, pa.py_buffer(bits.tobytes())])
        return pa.ExtensionArray.from_storage(bfloat16_type(), storage)  # type: ignore[return-value]


class BFloat16Scalar(pa.ExtensionScalar):
    """One bfloat16 value; ``as_py`` gives it as a float."""

    def as_py(self, **kwargs: Any) -> Optional[float]:  # type: ignore[override]
        if self.value is None:
            return None
        return float(_float32_from_bits(np.frombuffer(self.value.as_py(), dtype=np.uint16))[0])


class BFloat16Type(pa.ExtensionType):
    """The ``lance.bfloat16`` extension type: bfloat16 values stored as ``binary(2)``."""

    def __init__(self) -> None:
        super().__init__(pa.binary(2), BFLOAT16_NAME)

    def __arrow_ext_serialize__(self) -> bytes:
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type: pa.DataType, serialized: bytes) -> "BFloat16Type":
        return cls()

    def __arrow_ext_class__(self) -> type:
        return BFloat16Array

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


def bfloat16_array(values: Iterable[Optional[float]]) -> pa.ExtensionArray:
    """A bfloat16 array of ``values`` (floats or None), as pylance's ``bfloat16_array``."""
    floats = pa.array(list(values), pa.float32())
    bits = _bits_from_float32(floats.fill_null(0).to_numpy(zero_copy_only=False))
    validity = floats.buffers()[0] if floats.null_count else None
    storage = pa.FixedSizeBinaryArray.from_buffers(pa.binary(2), len(bits), [validity, pa.py_buffer(bits.tobytes())],
                                                   null_count=floats.null_count)
    return pa.ExtensionArray.from_storage(bfloat16_type(), storage)


__all__ = ["BFloat16Type", "BFloat16Array", "BFloat16Scalar", "bfloat16_array", "bfloat16_type"]
