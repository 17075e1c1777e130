"""``lance.fragment.RowIdSequence`` against pylance's: the inputs it takes (lists, ranges, generators,
Arrow arrays of any integer type, sliced and chunked), the ones it refuses (duplicates, nulls,
negatives, non-integers, non-iterables) with the same builtin error class, iteration, pickling and
the inline metadata both engines decode alike."""

from __future__ import annotations

import pickle

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import ArgumentTypeError, InvalidInputError

ACCEPTED = {
    "list": lambda: [5, 3, 9],
    "range": lambda: range(100, 4200),
    "stepped_range": lambda: range(0, 30, 3),
    "descending_range": lambda: range(9, 0, -1),
    "generator": lambda: (x * 7 for x in range(6)),
    "int8_array": lambda: pa.array([3, 1, 2], pa.int8()),
    "uint64_array": lambda: pa.array([2**63 + 5, 0], pa.uint64()),
    "sliced_array": lambda: pa.array([1, 1, 4, 6, 1]).slice(2, 2),
    "chunked_array": lambda: pa.chunked_array([[10], [], [30, 20]]),
    "beyond_int64": lambda: [2**63, 1, 2**64 - 1],
    "empty": lambda: [],
}

REFUSED = {
    "duplicates": (lambda: [1, 2, 3, 1], InvalidInputError, "must be unique"),
    "duplicates_in_array": (lambda: pa.array([5, 3, 5]), InvalidInputError, "row id 5"),
    "null": (lambda: pa.array([1, None]), InvalidInputError, "must not be null"),
    "float_array": (lambda: pa.array([1.5]), ArgumentTypeError, "array of integers"),
    "string_array": (lambda: pa.array(["a"]), ArgumentTypeError, "array of integers"),
    "negative_array": (lambda: pa.array([-1, 2]), InvalidInputError, "uint64"),
    "negative_range": (lambda: range(-5, 5), InvalidInputError, "non-negative"),
    "negative_list": (lambda: [3, -1], ArgumentTypeError, "non-negative"),
    "float_list": (lambda: [1.5], ArgumentTypeError, "integers"),
    "too_large": (lambda: [2**64], ArgumentTypeError, "uint64"),
    "not_iterable": (lambda: 5, ArgumentTypeError, "iterable of integers"),
    "none": (lambda: None, ArgumentTypeError, "NoneType"),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepts_what_pylance_accepts(name):
    ours = lance_format.fragment.RowIdSequence(ACCEPTED[name]())
    theirs = lance.fragment.RowIdSequence(ACCEPTED[name]())
    assert list(ours) == list(theirs)
    assert list(ours) == list(ours)  # a fresh iterator each time
    assert len(ours) == len(theirs)
    assert ours.to_pyarrow().equals(theirs.to_pyarrow())
    assert repr(ours) == repr(theirs)
    assert pickle.loads(pickle.dumps(ours)) == ours
    # the same inline metadata, and each engine decodes the other's to the same ids
    assert ours.to_inline_metadata().asdict() == theirs.to_inline_metadata().asdict()
    assert list(lance.fragment.RowIdSequence.from_inline_metadata(
        lance.fragment.RowIdMeta.from_json(ours.to_inline_metadata().json()))) == list(theirs)
    assert lance_format.fragment.RowIdSequence.from_inline_metadata(
        lance_format.fragment.RowIdMeta.from_json(theirs.to_inline_metadata().json())) == ours


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refuses_what_pylance_refuses(name):
    make, error, message = REFUSED[name]
    with pytest.raises(Exception) as theirs:
        lance.fragment.RowIdSequence(make())
    with pytest.raises(error, match=message) as ours:
        lance_format.fragment.RowIdSequence(make())
    # pylance's builtin class (its OverflowError for an out-of-range int is a ValueError here)
    expected = ValueError if isinstance(theirs.value, OverflowError) else type(theirs.value)
    assert isinstance(ours.value, expected)


def test_equality():
    seq = lance_format.fragment.RowIdSequence
    assert seq(range(3)) == seq([0, 1, 2])
    assert seq(range(3)) != seq([0, 1])
    assert seq(range(3)) != seq([2, 1, 0])
    assert seq(range(3)) != "not a sequence"
