"""Malformed Arrow arrays, as other libraries can hand them over.

``pa.Array.from_buffers`` runs pyarrow's cheap validation, so arrays it builds can be wrong only
in what that validation skips (offsets that go backwards, dictionary indices out of range,
broken children of valid parents). Arrays imported through the C data interface are not
validated at all: :func:`c_array` builds those from raw buffers with ``pyarrow.cffi`` (children
shorter than their parents need, offsets past their child).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
from pyarrow.cffi import ffi

_KEEP: list = []  # buffers, C structs and callbacks the imported arrays point at


def buf(values, dtype) -> pa.Buffer:
    return pa.py_buffer(np.array(values, dtype=dtype).tobytes())


@ffi.callback("void(struct ArrowArray*)")
def _release(array):  # the buffers belong to _KEEP; only mark the struct released
    array.release = ffi.NULL


def _c_struct(length: int, buffers: list, children: list, null_count: int, offset: int):
    c_array = ffi.new("struct ArrowArray*")
    pointers = ffi.new("void*[]", max(len(buffers), 1))
    for i, buffer in enumerate(buffers):
        pointers[i] = ffi.NULL if buffer is None else ffi.cast("void*", buffer.address)
    kids = ffi.new("struct ArrowArray*[]", max(len(children), 1))
    for i, child in enumerate(children):
        kids[i] = child
    c_array.length, c_array.null_count, c_array.offset = length, null_count, offset
    c_array.n_buffers, c_array.buffers = len(buffers), pointers
    c_array.n_children, c_array.children = len(children), kids
    c_array.dictionary, c_array.release, c_array.private_data = ffi.NULL, _release, ffi.NULL
    _KEEP.extend([c_array, pointers, kids, buffers])
    return c_array


def _c_child(array: pa.Array):
    """A C struct of a (valid) child array, exported by pyarrow."""
    c_array = ffi.new("struct ArrowArray*")
    array._export_to_c(int(ffi.cast("uintptr_t", c_array)))
    _KEEP.append(c_array)
    return c_array


def c_array(dtype: pa.DataType, length: int, buffers: list, children: tuple = (), null_count: int = 0,
            offset: int = 0) -> pa.Array:
    """An array imported through the C data interface from these raw buffers, unvalidated."""
    c_schema = ffi.new("struct ArrowSchema*")
    dtype._export_to_c(int(ffi.cast("uintptr_t", c_schema)))
    c_arr = _c_struct(length, list(buffers), [_c_child(c) for c in children], null_count, offset)
    return pa.Array._import_from_c(int(ffi.cast("uintptr_t", c_arr)), int(ffi.cast("uintptr_t", c_schema)))


_TEXT = pa.py_buffer(b"https://example.org/a?b=1ada@example.com")


def _backwards(dtype: pa.DataType, width=np.int32) -> pa.Array:
    return pa.Array.from_buffers(dtype, 3, [None, buf([0, 19, 4, 30], width), _TEXT])


# name -> (builder, whether it is a binary array a blob writer takes)
CASES: dict[str, tuple[Callable[[], pa.Array], bool]] = {
    "string offsets backwards": (lambda: _backwards(pa.string()), False),
    "binary offsets backwards": (lambda: _backwards(pa.binary()), True),
    "large_string offsets backwards": (lambda: _backwards(pa.large_string(), np.int64), False),
    "large_binary offsets backwards": (lambda: _backwards(pa.large_binary(), np.int64), True),
    "sliced binary offsets backwards": (lambda: _backwards(pa.binary()).slice(1, 2), True),
    "list offsets backwards": (lambda: pa.Array.from_buffers(
        pa.list_(pa.int64()), 3, [None, buf([0, 4, 1, 5], np.int32)], children=[pa.array(range(5), pa.int64())]),
        False),
    "struct with a bad string child": (lambda: pa.StructArray.from_arrays(
        [pa.array([1, 2, 3]), _backwards(pa.string())], names=["n", "url"]), False),
    "list of bad strings": (lambda: pa.Array.from_buffers(
        pa.list_(pa.string()), 2, [None, buf([0, 1, 3], np.int32)], children=[_backwards(pa.string())]), False),
    "dictionary index out of range": (lambda: pa.DictionaryArray.from_arrays(
        pa.array([0, 1, 7], pa.int32()), pa.array(["books", "toys"]), safe=False), False),
}

# Through the C data interface, which pyarrow does not validate (pa.table() and friends would:
# these are checked directly). The interface carries no buffer sizes (the importer derives them
# from the length), so a buffer shorter than its length says is undetectable by anyone; lengths
# of children are known and checked.
C_CASES: dict[str, Callable[[], pa.Array]] = {
    "struct child shorter than the struct": (lambda: c_array(
        pa.struct([("n", pa.int64())]), 1000, [None], children=(pa.array([1, 2], pa.int64()),))),
    "list offsets past the child": (lambda: c_array(
        pa.list_(pa.int64()), 2, [None, buf([0, 2, 900], np.int32)], children=(pa.array(range(5), pa.int64()),))),
}


# ---------------------------------------------------------------- the entry points, driven in a subprocess

def _table(bad: pa.Array) -> pa.Table:
    return pa.table({"id": pa.array(range(len(bad)), pa.int64()), "c": bad})


def _base(root: str, name: str, bad: pa.Array, with_c: bool = True) -> str:
    """A well-formed table of the same schema (``c`` all null) to append, merge or add columns to."""
    import lance_format

    uri = f"{root}/{name}.lance"
    columns = {"id": pa.array(range(len(bad)), pa.int64())}
    if with_c:
        columns["c"] = pa.nulls(len(bad), bad.type)
    lance_format.write_dataset(pa.table(columns), uri)
    return uri


def entry_points(root: str) -> dict[str, Callable[[str, pa.Array], object]]:
    import lance_format
    from lance_format.file import LanceFileSession, LanceFileWriter

    def add_columns(name, bad):
        ds = lance_format.dataset(_base(root, name, bad, with_c=False))

        @lance_format.batch_udf(output_schema=pa.schema([("c", bad.type)]))
        def udf(batch):
            return pa.RecordBatch.from_arrays([bad.slice(0, batch.num_rows)], names=["c"])

        return ds.add_columns(udf)

    return {
        "write_dataset(table)": lambda name, bad: lance_format.write_dataset(_table(bad), f"{root}/{name}.lance"),
        "write_dataset(batch)": lambda name, bad: lance_format.write_dataset(
            _table(bad).to_batches()[0], f"{root}/{name}.lance"),
        "write_dataset(reader, append)": lambda name, bad: lance_format.write_dataset(
            _table(bad).to_reader(), _base(root, name, bad), mode="append"),
        "write_dataset(iterable of batches)": lambda name, bad: lance_format.write_dataset(
            iter(_table(bad).to_batches()), f"{root}/{name}.lance", schema=_table(bad).schema),
        "write_dataset(chunked, second chunk bad)": lambda name, bad: lance_format.write_dataset(
            pa.concat_tables([pa.table({"id": pa.array([], pa.int64()), "c": pa.nulls(0, bad.type)}),
                              _table(bad)]), f"{root}/{name}.lance"),
        "LanceFragment.create": lambda name, bad: lance_format.LanceFragment.create(
            _base(root, name, bad), _table(bad)),
        "fragment.write_fragments": lambda name, bad: lance_format.fragment.write_fragments(
            _table(bad), _base(root, name, bad)),
        "merge_insert": lambda name, bad: lance_format.dataset(_base(root, name, bad)).merge_insert("id")
        .when_matched_update_all().when_not_matched_insert_all().execute(_table(bad)),
        "insert": lambda name, bad: lance_format.dataset(_base(root, name, bad)).insert(_table(bad)),
        "add_columns(batch_udf)": add_columns,
        "LanceFileWriter.write_batch": lambda name, bad: LanceFileWriter(f"{root}/{name}.file").write_batch(
            _table(bad)),
        "write_blobs": lambda name, bad: LanceFileSession(root).open_packed_blob_writer(f"{name}.lance", 7)
        .write_blobs(bad),
    }


def main(root: str) -> None:
    """Print one line per (entry point, case): the exception's class and message, or ``OK``."""
    import sys

    for entry, call in entry_points(root).items():
        for number, (case, (make, binary)) in enumerate(CASES.items()):
            if entry == "write_blobs" and not binary:
                continue
            print(f"START\t{entry}\t{case}", flush=True)  # a crash leaves this as the last line
            try:
                call(f"t{abs(hash(entry)) % 10**6}_{number}", make())
                outcome = "OK\t"
            except Exception as exc:  # noqa: BLE001 - reported to the test
                outcome = f"{type(exc).__name__}\t{exc}".replace("\n", " ")
            print(f"DONE\t{entry}\t{case}\t{outcome}", flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    import sys

    main(sys.argv[1])
