"""File versions 2.1/2.2: encoding keys of field metadata on every page kind, compared with pylance.

pylance 14 honours ``lance-encoding:compression`` (zstd / lz4 / none / fsst),
``…:compression-level``, ``…:rle-threshold`` and ``…:bss`` on mini-block values of any width
(byte-stream-split then lz4/zstd per chunk, kept only when it shrinks a page of >= 4 KiB),
dictionary indices, and full-zip pages (large strings and binaries: zstd value by value). For each
key, page kind and version our data file must hold the same bytes as pylance's (whole files for
one key; with several keys the pages only, as pylance's schema map order varies), and each side
must read the other's file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from lance.file import LanceFileReader as PyReader

from lance_format.errors import InvalidInputError
from lance_format.file import LanceFileReader, LanceFileWriter
from tests.compat import write_file_both

VERSIONS = ["2.1", "2.2"]
N = 6000


def _rng() -> np.random.Generator:
    return np.random.default_rng(7)


def urls() -> pa.Array:
    rng = _rng()
    hosts = rng.integers(0, 300, N)
    return pa.array([f"https://www.site{h}.example.com/articles/{i * 7919 % 100003}?ref=feed&page={i % 17}"
                     for i, h in enumerate(hosts.tolist())])


def emails() -> pa.Array:
    names = ["ann", "bob", "carla", "dmitri", "eve", "fatima", "gus"]
    domains = ["gmail.com", "example.org", "corp.example.net"]
    return pa.array([None if i % 11 == 0 else f"{names[i % 7]}.{i}@{domains[i % 3]}" for i in range(N)])


def nullable_ints() -> pa.Array:
    values = _rng().integers(-1_000_000, 1_000_000, N)
    return pa.array([None if i % 7 == 0 else int(v) for i, v in enumerate(values.tolist())], pa.int64())


def small_ints() -> pa.Array:
    return pa.array(_rng().integers(0, 1000, N).astype(np.int32))


def prices() -> pa.Array:
    return pa.array(np.round(_rng().gamma(2.0, 20.0, N), 2))


def floats32() -> pa.Array:
    return pa.array(_rng().standard_normal(N).astype(np.float32))


def categories() -> pa.Array:  # dictionary page: indices are the mini-block values
    return pa.array([["books", "games", "music", "garden", "toys"][i % 5] for i in range(N)])


def sorted_ids() -> pa.Array:  # runs: RLE territory
    return pa.array(np.arange(N) // 20 * 1_000_003)


def flags() -> pa.Array:
    return pa.array((_rng().random(N) < 0.1).tolist())


def articles() -> pa.Array:  # strings over 256 bytes: full-zip
    rng = _rng()
    words = np.array("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod".split())
    return pa.array([None if i % 9 == 0 else " ".join(words[rng.integers(0, len(words), int(k))])
                     for i, k in enumerate(rng.integers(60, 160, 800))])


def blobs() -> pa.Array:  # binary over 256 bytes: full-zip
    rng = _rng()
    return pa.array([bytes(rng.integers(0, 16, int(k), dtype=np.uint8)) for k in rng.integers(300, 700, 600)])


def vectors() -> pa.Array:  # fixed-size lists: pylance never compresses them
    return pa.FixedSizeListArray.from_arrays(pa.array(_rng().standard_normal(500 * 64).astype(np.float32)), 64)


KINDS: dict[str, Callable[[], pa.Array]] = {
    "urls": urls, "emails": emails, "nullable_ints": nullable_ints, "small_ints": small_ints, "prices": prices,
    "floats32": floats32, "categories": categories, "sorted_ids": sorted_ids, "flags": flags,
    "articles": articles, "blobs": blobs, "vectors": vectors,
}


def _write_both(tmp_path: Path, version: str, values: pa.Array,
                metadata: dict[str, str]) -> tuple[Path, Path, pa.Table]:
    schema = pa.schema([pa.field("c", values.type, metadata=metadata)])
    table = pa.table({"c": values}, schema=schema)
    ours, theirs = write_file_both(tmp_path, version, table)
    return ours, theirs, table


def _pages(path: Path) -> list[tuple[str, list[bytes]]]:
    raw = path.read_bytes()
    return [(page.encoding, [raw[b.position:b.position + b.size] for b in page.buffers])
            for column in LanceFileReader(str(path)).metadata().columns for page in column.pages]


def _check(tmp_path: Path, version: str, kind: str, metadata: dict[str, str]) -> None:
    ours, theirs, table = _write_both(tmp_path, version, KINDS[kind](), metadata)
    if len(metadata) == 1:
        assert ours.read_bytes() == theirs.read_bytes()
    else:
        assert _pages(ours) == _pages(theirs)
    assert PyReader(str(ours)).read_all().to_table().column("c").equals(table.column("c"))
    assert LanceFileReader(str(theirs)).read_all().to_table().column("c").equals(table.column("c"))


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("scheme", ["zstd", "lz4"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_general_compression_matches_pylance(tmp_path: Path, version: str, scheme: str, kind: str) -> None:
    _check(tmp_path, version, kind, {"lance-encoding:compression": scheme})


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("kind", ["emails", "nullable_ints", "prices", "categories", "articles"])
def test_compression_level_matches_pylance(tmp_path: Path, version: str, kind: str) -> None:
    _check(tmp_path, version, kind, {"lance-encoding:compression": "zstd", "lance-encoding:compression-level": "9"})


def test_compression_changes_the_pages(tmp_path: Path) -> None:
    # the comparison above must not pass by both sides ignoring the key
    ours, _, _ = _write_both(tmp_path, "2.1", nullable_ints(), {"lance-encoding:compression": "zstd"})
    encoding = _pages(ours)[0][0]
    assert "General(" in encoding and "ByteStreamSplit(" in encoding and "CompressionAlgorithmZstd" in encoding


def test_unknown_scheme_is_refused(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("c", pa.int64(), metadata={"lance-encoding:compression": "snappy"})])
    with pytest.raises(InvalidInputError, match="snappy"):
        with LanceFileWriter(str(tmp_path / "x.lance"), schema, version="2.1") as writer:
            writer.write_batch(pa.table({"c": pa.array(range(10))}, schema=schema))


def _check_readable(tmp_path: Path, version: str, kind: str, metadata: dict[str, str]) -> tuple[str, str]:
    """Both sides read each other's file; returns (our, their) first page encodings."""
    ours, theirs, table = _write_both(tmp_path, version, KINDS[kind](), metadata)
    assert PyReader(str(ours)).read_all().to_table().column("c").equals(table.column("c"))
    assert LanceFileReader(str(theirs)).read_all().to_table().column("c").equals(table.column("c"))
    return _pages(ours)[0][0], _pages(theirs)[0][0]


# FSST pages: pylance's FSST tables differ from run to run (three writes of one column gave three
# files), so strings under FSST are compared by encoding and by reading, not by bytes.
FSST_KINDS = {"urls", "emails", "articles", "blobs"}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("scheme", ["none", "fsst"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_none_and_fsst_match_pylance(tmp_path: Path, version: str, scheme: str, kind: str) -> None:
    metadata = {"lance-encoding:compression": scheme}
    if scheme == "fsst" and kind in FSST_KINDS:
        ours, theirs = _check_readable(tmp_path, version, kind, metadata)
        assert ("Fsst(" in ours) == ("Fsst(" in theirs)
        return
    _check(tmp_path, version, kind, metadata)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("bss", ["on", "off", "auto"])
@pytest.mark.parametrize("scheme", [None, "zstd", "lz4"])
@pytest.mark.parametrize("kind", ["nullable_ints", "small_ints", "prices", "floats32", "categories", "sorted_ids"])
def test_byte_stream_split_modes_match_pylance(tmp_path: Path, version: str, bss: str, scheme: str | None,
                                               kind: str) -> None:
    metadata = {"lance-encoding:bss": bss}
    if scheme is not None:
        metadata["lance-encoding:compression"] = scheme
    _check(tmp_path, version, kind, metadata)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("threshold", ["0.01", "0.2", "0.9"])
@pytest.mark.parametrize("kind", ["sorted_ids", "nullable_ints", "categories", "flags"])
def test_rle_threshold_matches_pylance(tmp_path: Path, version: str, threshold: str, kind: str) -> None:
    _check(tmp_path, version, kind, {"lance-encoding:rle-threshold": threshold})


def test_rle_threshold_turns_rle_off(tmp_path: Path) -> None:
    ours, _ = _check_readable(tmp_path, "2.1", "sorted_ids", {"lance-encoding:rle-threshold": "0.01"})
    assert "Rle(" not in ours and "InlineBitpacking(" in ours


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("width", [np.int8, np.int16, np.int32, np.int64])
@pytest.mark.parametrize("mean_run", [1.5, 4.0, 30.0, 400.0])
def test_rle_pages_and_chunks_match_pylance(tmp_path: Path, version: str, width: type, mean_run: float) -> None:
    # pylance's rolling RLE chunks (up to 4096 values / 8 KiB) and its exact run-count size model
    rng = np.random.default_rng(3)
    lengths = rng.geometric(1 / mean_run, 20_000)
    values = np.repeat(rng.integers(-100, 100, len(lengths)), lengths)[:20_000].astype(width)
    schema = pa.schema([pa.field("c", pa.from_numpy_dtype(width))])
    table = pa.table({"c": pa.array(values)}, schema=schema)
    ours, theirs = write_file_both(tmp_path, version, table)
    assert ours.read_bytes() == theirs.read_bytes()


@pytest.mark.parametrize(("cardinality", "block"), [(50, "General("), (300, "InlineBitpacking("),
                                                  (3000, "OutOfLineBitpacking(")])
def test_integer_dictionaries_bitpacked_like_pylance(tmp_path: Path, cardinality: int, block: str) -> None:
    # 2.2 dictionary-encodes 64-bit values; pylance bit-packs such dictionaries (inline up to 1024
    # values, out-of-line above) unless one block of packing is not smaller (then LZ4)
    rng = np.random.default_rng(cardinality)
    values = pa.array(np.sort(rng.integers(0, cardinality, 20_000)) * 3)
    ours, theirs, table = _write_both(tmp_path, "2.2", values, {})
    assert ours.read_bytes() == theirs.read_bytes()
    assert block in _pages(ours)[0][0].split("dictionary: ")[1]
    assert PyReader(str(ours)).read_all().to_table().column("c").equals(table.column("c"))


def skus() -> pa.Array:  # ~2,300 distinct of 6,000: a dictionary by default (binary: no FSST)
    return pa.array([b"sku-%d" % k for k in _rng().integers(0, 2500, N)], pa.binary())


def kinds() -> pa.Array:  # 40 distinct values, nullable
    return pa.array([None if k == 0 else b"kind-%d" % k for k in _rng().integers(0, 40, N)], pa.binary())


def product_ids() -> pa.Array:  # 300 distinct 64-bit values: a dictionary in 2.2
    return pa.array(_rng().integers(0, 300, N) * 7919)


KINDS.update({"skus": skus, "kinds": kinds, "product_ids": product_ids})
DICTIONARY_KEYS = [
    {"lance-encoding:dict-divisor": "10"},
    {"lance-encoding:dict-divisor": "1"},
    {"lance-encoding:dict-size-ratio": "0.1"},
    {"lance-encoding:dict-size-ratio": "0.99"},
    {"lance-encoding:dict-values-compression": "zstd"},
    {"lance-encoding:dict-values-compression": "none"},
    {"lance-encoding:dict-values-compression": "lz4"},
    {"lance-encoding:dict-values-compression": "zstd", "lance-encoding:dict-values-compression-level": "7"},
    {"lance-encoding:dict-values-compression": "zstd", "lance-encoding:compression": "lz4"},
]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("metadata", DICTIONARY_KEYS, ids=lambda m: "+".join(f"{k[15:]}={v}" for k, v in m.items()))
@pytest.mark.parametrize("kind", ["skus", "kinds", "product_ids", "categories"])
def test_dictionary_keys_match_pylance(tmp_path: Path, version: str, metadata: dict[str, str], kind: str) -> None:
    if kind == "categories" and "dictionary: Some(" not in _check_readable(tmp_path, version, kind, metadata)[1]:
        # strings off the dictionary are FSST pages (not byte-comparable, see FSST_KINDS)
        assert "dictionary: Some(" not in _check_readable(tmp_path, version, kind, metadata)[0]
        return
    _check(tmp_path, version, kind, metadata)


def test_dictionary_keys_change_the_pages(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    plain, _ = _check_readable(tmp_path / "a", "2.2", "skus", {"lance-encoding:dict-divisor": "10"})
    zstd, _ = _check_readable(tmp_path / "b", "2.2", "skus", {"lance-encoding:dict-values-compression": "zstd"})
    assert "dictionary: None" in plain
    assert "CompressionAlgorithmZstd" in zstd.split("dictionary: ")[1]


def _write_field(tmp_path: Path, version: str, field: pa.Field, values: pa.Array) -> tuple[Path, Path, pa.Table]:
    schema = pa.schema([field])
    table = pa.table({field.name: values}, schema=schema)
    ours, theirs = write_file_both(tmp_path, version, table)
    assert PyReader(str(ours)).read_all().to_table().equals(table)
    assert LanceFileReader(str(theirs)).read_all().to_table().equals(table)
    return ours, theirs, table


def flags_with_nulls() -> pa.Array:
    return pa.array([None if i % 13 == 0 else i % 3 == 0 for i in range(N)])


KINDS["flags_with_nulls"] = flags_with_nulls


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("layout", ["fullzip", "miniblock"])
@pytest.mark.parametrize("kind", ["nullable_ints", "prices", "categories", "sorted_ids", "flags_with_nulls", "blobs",
                                  "vectors", "skus"])
def test_structural_encoding_matches_pylance(tmp_path: Path, version: str, layout: str, kind: str) -> None:
    # full-zip: plain values (booleans one byte each); mini-block: also for wide values
    _check(tmp_path, version, kind, {"lance-encoding:structural-encoding": layout})


def test_structural_encoding_changes_the_layout(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    zipped, _ = _check_readable(tmp_path / "a", "2.1", "nullable_ints", {"lance-encoding:structural-encoding": "fullzip"})
    chunked, _ = _check_readable(tmp_path / "b", "2.1", "vectors", {"lance-encoding:structural-encoding": "miniblock"})
    assert "FullZipLayout(" in zipped and "MiniBlockLayout(" in chunked


@pytest.mark.parametrize("version", VERSIONS)
def test_structural_encoding_is_read_on_the_top_level_field(tmp_path: Path, version: str) -> None:
    # pylance reads this key on the column's top-level field (lists, structs) and ignores it on
    # nested fields, where it does read the compression keys
    fullzip = {"lance-encoding:structural-encoding": "fullzip"}
    rows = [[j * 1000 + i for j in range(i % 4)] if i % 5 else None for i in range(N)]
    for name, field in {
        "list": pa.field("c", pa.list_(pa.int64()), metadata=fullzip),
        "item": pa.field("c", pa.list_(pa.field("item", pa.int64(), metadata=fullzip))),
        "bools": pa.field("c", pa.list_(pa.bool_()), metadata=fullzip),
    }.items():
        values = pa.array([None if r is None else [v % 3 == 0 for v in r] for r in rows] if name == "bools" else rows,
                          field.type)
        (tmp_path / name).mkdir()
        ours, theirs, _ = _write_field(tmp_path / name, version, field, values)
        assert _pages(ours) == _pages(theirs), name
    struct = pa.StructArray.from_arrays(
        [pa.array(range(N)), flags().cast(pa.bool_())],
        fields=[pa.field("a", pa.int64(), metadata=fullzip), pa.field("b", pa.bool_(), metadata=fullzip)])
    for name, field in {"struct_children": pa.field("c", struct.type),
                        "struct": pa.field("c", struct.type, metadata=fullzip)}.items():
        (tmp_path / name).mkdir()
        ours, theirs, _ = _write_field(tmp_path / name, version, field, struct)
        assert _pages(ours) == _pages(theirs), name
        assert ("FullZipLayout(" in _pages(ours)[0][0]) == (name == "struct")


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("rows", [3, 300, 512, 1000, 1025, 8192])
def test_page_edges_match_pylance(tmp_path: Path, version: str, rows: int) -> None:
    # pages of <= 1024 levels (levels inline bit-packed, or raw when tiny), full last chunks of
    # plain values (they keep their size in the chunk word), fixed-size lists of odd widths
    rng = np.random.default_rng(rows)
    columns = {
        "nullable": pa.array([None if i % 3 == 0 else i * 3 for i in range(rows)]),
        "floats": pa.array(rng.standard_normal(rows)),
        "vec3": pa.FixedSizeListArray.from_arrays(pa.array(rng.standard_normal(rows * 3).astype(np.float32)), 3),
        "vec12": pa.FixedSizeListArray.from_arrays(pa.array(rng.standard_normal(rows * 12).astype(np.float32)), 12),
        "flags": pa.array([None if i % 5 == 0 else bool(i % 3) for i in range(rows)]),
        "names": pa.array([None if i % 4 == 0 else b"name-%d" % i for i in range(rows)]),  # binary: no FSST
        "tags": pa.array([[f"t{j}" for j in range(i % 3)] if i % 7 else None for i in range(rows)]),
    }
    table = pa.table(columns)
    ours, theirs = write_file_both(tmp_path, version, table)
    assert ours.read_bytes() == theirs.read_bytes()


def url_bytes() -> pa.Array:  # binary (no FSST) mini-block values
    return urls().cast(pa.binary())


KINDS["url_bytes"] = url_bytes


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("size", ["2", "100", "1024", "20000", "65536"])
@pytest.mark.parametrize("kind", ["url_bytes", "kinds", "blobs", "nullable_ints"])
def test_minichunk_size_matches_pylance(tmp_path: Path, version: str, size: str, kind: str) -> None:
    # chunks of variable-width values aim at this many bytes (at least two values per chunk;
    # 2.1 ignores aims of 32 KiB and more); other values are not affected
    metadata = {"lance-encoding:minichunk-size": size}
    if kind == "blobs":
        metadata["lance-encoding:structural-encoding"] = "miniblock"
    _check(tmp_path, version, kind, metadata)


def test_minichunk_size_changes_the_chunks(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    small, _, _ = _write_both(tmp_path / "a", "2.1", url_bytes(), {"lance-encoding:minichunk-size": "1024"})
    large, _, _ = _write_both(tmp_path / "b", "2.1", url_bytes(), {"lance-encoding:minichunk-size": "20000"})
    # buffer 0 holds one u16 word per chunk
    assert len(_pages(small)[0][1][0]) > 10 * len(_pages(large)[0][1][0])


PACKED = {"lance-encoding:packed": "true"}


def _measurements(mask: bool = False) -> pa.StructArray:
    rng = _rng()
    return pa.StructArray.from_arrays(
        [pa.array(rng.integers(0, 10_000, N)), pa.array(rng.standard_normal(N).astype(np.float32)),
         pa.array(rng.integers(0, 255, N).astype(np.uint8))],
        names=["sensor", "reading", "quality"], mask=pa.array(np.arange(N) % 9 == 0) if mask else None)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("extra", [{}, {"lance-encoding:compression": "zstd"},
                                   {"lance-encoding:compression": "lz4", "lance-encoding:bss": "on"}],
                         ids=["plain", "zstd", "lz4-bss"])
@pytest.mark.parametrize("mask", [False, True], ids=["valid", "nulls"])
def test_packed_struct_matches_pylance(tmp_path: Path, version: str, extra: dict[str, str], mask: bool) -> None:
    # one column of row-major fixed-width rows (packed_struct), whatever else the field asks
    values = _measurements(mask)
    ours, theirs, _ = _write_field(tmp_path, version, pa.field("m", values.type, metadata={**PACKED, **extra}), values)
    if not extra:
        assert ours.read_bytes() == theirs.read_bytes()
    assert _pages(ours) == _pages(theirs)
    assert "PackedStruct(" in _pages(ours)[0][0]


@pytest.mark.parametrize("version", VERSIONS)
def test_packed_struct_in_a_dataset_like_pylance(tmp_path: Path, version: str) -> None:
    import lance

    import lance_format

    values = _measurements()
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("m", values.type, metadata=PACKED)])
    table = pa.table({"id": pa.array(range(N)), "m": values}, schema=schema)
    lance_format.write_dataset(table, str(tmp_path / "ours"), data_storage_version=version)
    lance.write_dataset(table, str(tmp_path / "theirs"), data_storage_version=version)
    ours = lance.dataset(str(tmp_path / "ours"))
    theirs = lance.dataset(str(tmp_path / "theirs"))
    ours_file = ours.get_fragments()[0].metadata.files[0]
    theirs_file = theirs.get_fragments()[0].metadata.files[0]
    assert (ours_file.fields, ours_file.column_indices) == (theirs_file.fields, theirs_file.column_indices)
    assert ours.to_table().equals(table)
    assert lance_format.dataset(str(tmp_path / "theirs")).to_table(columns=["m"]).column("m").equals(table.column("m"))


@pytest.mark.parametrize(("fields", "message"), [
    ([pa.array(range(10)), pa.array(["x"] * 10)], "version 2.2"),  # in 2.1, as pylance
    ([pa.array(range(10)), pa.array([True] * 10)], "bool"),
    ([pa.array([None, *range(9)]), pa.array(range(10))], "nulls"),
])
def test_packed_structs_we_cannot_pack_are_refused(tmp_path: Path, fields: list[pa.Array], message: str) -> None:
    from lance_format.errors import UnsupportedFeatureError

    values = pa.StructArray.from_arrays(fields, names=["a", "b"])
    schema = pa.schema([pa.field("m", values.type, metadata=PACKED)])
    with pytest.raises(UnsupportedFeatureError, match=message):
        with LanceFileWriter(str(tmp_path / "x.lance"), schema, version="2.1") as writer:
            writer.write_batch(pa.table({"m": values}, schema=schema))


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("null_share", [0.0005, 0.01, 0.04, 0.045, 0.2])
@pytest.mark.parametrize("rows", [300, 1000, 10_000])
def test_sparse_null_levels_match_pylance(tmp_path: Path, version: str, null_share: float, rows: int) -> None:
    # 2.2 run-length-encodes def levels (per chunk: u64 size, u16 values, u8 lengths) when that is
    # smaller than bit-packing them; 2.1 never does
    rng = np.random.default_rng(int(null_share * 10_000) + rows)
    nulls = rng.random(rows) < null_share
    table = pa.table({
        "ids": pa.array([None if null else i for i, null in enumerate(nulls.tolist())], pa.int64()),
        "codes": pa.array([None if null else b"c%d" % (i % 50) for i, null in enumerate(nulls.tolist())]),
    })
    ours, theirs = write_file_both(tmp_path, version, table)
    assert ours.read_bytes() == theirs.read_bytes()
    assert PyReader(str(ours)).read_all().to_table().equals(table)


def _orders(mask: bool) -> pa.StructArray:
    rng = _rng()
    return pa.StructArray.from_arrays(
        [pa.array(rng.integers(0, 10**6, N)), pa.array([b"SKU-%05d" % k for k in rng.integers(0, 99_999, N)]),
         pa.array(np.round(rng.gamma(2.0, 20.0, N), 2)), emails().fill_null("nobody@example.com").cast(pa.binary())],
        names=["order", "sku", "amount", "buyer"], mask=pa.array(np.arange(N) % 7 == 0) if mask else None)


@pytest.mark.parametrize("extra", [{}, {"lance-encoding:compression": "zstd"}], ids=["plain", "zstd"])
@pytest.mark.parametrize("mask", [False, True], ids=["valid", "nulls"])
def test_variable_packed_struct_matches_pylance(tmp_path: Path, extra: dict[str, str], mask: bool) -> None:
    # 2.2: each valid row one full-zip value (fields back to back, variable ones length-prefixed)
    values = _orders(mask)
    ours, theirs, _ = _write_field(tmp_path, "2.2", pa.field("o", values.type, metadata={**PACKED, **extra}), values)
    assert _pages(ours) == _pages(theirs)
    assert "VariablePackedStruct(" in _pages(ours)[0][0]
    if not extra:
        assert ours.read_bytes() == theirs.read_bytes()


@pytest.mark.parametrize("version", VERSIONS)
def test_dataset_data_files_match_pylance(tmp_path: Path, version: str) -> None:
    # the keys reach the data files through write_dataset as well
    import glob

    import lance

    import lance_format

    schema = pa.schema([
        pa.field("url", pa.string(), metadata={"lance-encoding:compression": "zstd",
                                               "lance-encoding:compression-level": "7"}),
        pa.field("amount", pa.float64(), metadata={"lance-encoding:compression": "lz4", "lance-encoding:bss": "on"}),
        pa.field("user", pa.int64(), metadata={"lance-encoding:rle-threshold": "0.2"}),
        pa.field("sku", pa.binary(), metadata={"lance-encoding:dict-values-compression": "zstd"}),
        pa.field("body", pa.binary(), metadata={"lance-encoding:structural-encoding": "miniblock",
                                                "lance-encoding:minichunk-size": "2048"}),
    ])
    table = pa.table([urls(), prices(), nullable_ints(), skus(), blobs().take(np.arange(N) % 600)], schema=schema)
    lance_format.write_dataset(table, str(tmp_path / "ours"), data_storage_version=version)
    lance.write_dataset(table, str(tmp_path / "theirs"), data_storage_version=version)
    ours = glob.glob(str(tmp_path / "ours" / "data" / "*.lance"))
    theirs = glob.glob(str(tmp_path / "theirs" / "data" / "*.lance"))
    assert len(ours) == len(theirs) == 1
    assert _pages(Path(ours[0])) == _pages(Path(theirs[0]))
    assert lance.dataset(str(tmp_path / "ours")).to_table().equals(table)
    assert lance_format.dataset(str(tmp_path / "theirs")).to_table().equals(table)
