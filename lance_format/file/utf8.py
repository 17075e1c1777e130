"""UTF-8 validation of decoded string columns, at memory speed for the common ASCII case.

A string column's bytes come straight from the file; pyarrow trusts them, so invalid UTF-8 would
surface far from the file that holds it (official Lance validates when it builds string arrays).
Validating string by string costs about as much as the scan itself. Instead: when the values of
an array are all ASCII (one vectorized reduction over its bytes), every string in it is valid;
only arrays with non-ASCII bytes get pyarrow's full per-string validation.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

_ASCII_MASK = np.uint64(0x8080808080808080)


def has_utf8(data_type: pa.DataType) -> bool:
    """Whether values of this type contain UTF-8 strings at any depth."""
    if pa.types.is_string(data_type) or pa.types.is_large_string(data_type):
        return True
    if pa.types.is_dictionary(data_type):
        return has_utf8(data_type.value_type)
    return any(has_utf8(data_type.field(i).type) for i in range(data_type.num_fields))


def first_invalid_utf8(array: pa.Array) -> str | None:
    """None when every string in ``array`` (nested ones included) is valid UTF-8, else why not."""
    data_type = array.type
    if pa.types.is_string(data_type) or pa.types.is_large_string(data_type):
        return _check_strings(array)
    if pa.types.is_dictionary(data_type):
        return first_invalid_utf8(array.dictionary)
    if pa.types.is_map(data_type):
        first, count = _value_range(array)
        return first_invalid_utf8(array.keys.slice(first, count)) or first_invalid_utf8(array.items.slice(first, count))
    if pa.types.is_struct(data_type):
        for i in range(data_type.num_fields):
            problem = first_invalid_utf8(array.field(i))
            if problem:
                return problem
        return None
    if data_type.num_fields:  # list, large list, fixed-size list
        first, count = _value_range(array)
        return first_invalid_utf8(array.values.slice(first, count))
    return None


def _value_range(array: pa.Array) -> tuple[int, int]:
    """(first, count) of the child values a (possibly sliced) list or map array refers to.

    ``.values`` is the whole child, also for a slice: a batch cut from a decoded page would
    otherwise check the page's values once per batch.
    """
    if pa.types.is_fixed_size_list(array.type):
        size = array.type.list_size
        return array.offset * size, len(array) * size
    if len(array) == 0:
        return 0, 0
    offsets = array.offsets
    first = offsets[0].as_py()
    return first, offsets[-1].as_py() - first


def _check_strings(array: pa.Array) -> str | None:
    if len(array) == 0:
        return None
    _, offsets_buffer, data_buffer = array.buffers()
    if data_buffer is None or offsets_buffer is None:
        return None
    offset_type = np.int64 if pa.types.is_large_string(array.type) else np.int32
    offsets = np.frombuffer(offsets_buffer, dtype=offset_type)[array.offset: array.offset + len(array) + 1]
    values = np.frombuffer(data_buffer, dtype=np.uint8)[int(offsets[0]): int(offsets[-1])]
    if _all_ascii(values):
        return None
    try:
        array.validate(full=True)
    except pa.ArrowInvalid as err:
        return str(err)
    return None


def _all_ascii(values: np.ndarray) -> bool:
    whole = len(values) // 8 * 8
    if whole and np.bitwise_or.reduce(values[:whole].view(np.uint64)) & _ASCII_MASK:
        return False
    return not (whole < len(values) and values[whole:].max() >= 0x80)
