"""pylance's remaining ``lance.dataset`` / ``lance`` names, compared with pylance itself."""

from __future__ import annotations

import importlib
import sys
import typing

import lance
import lance.dataset  # noqa: F401 - the module, reached through sys.modules (lance.dataset is also a function)
import numpy as np
import pyarrow as pa
import pytest

import lance_format

theirs_module = sys.modules["lance.dataset"]
ours_module = importlib.import_module("lance_format.dataset")

TYPED_DICTS = ("AlterColumn", "DatasetStats", "DeleteResult", "UpdateResult", "ExecuteResult", "Tag", "Branch",
               "Version", "VersionRef")


@pytest.mark.parametrize("name", TYPED_DICTS)
def test_typed_dicts_have_pylance_keys(name):
    ours, theirs = getattr(ours_module, name), getattr(theirs_module, name)
    assert list(ours.__annotations__) == list(theirs.__annotations__)
    assert ours.__required_keys__ == theirs.__required_keys__
    assert typing.is_typeddict(ours)


def test_alter_column_is_accepted_by_alter_columns(tmp_path):
    ds = lance_format.write_dataset(pa.table({"a": [1, 2]}), str(tmp_path / "t"))
    change = ours_module.AlterColumn(path="a", name="b")
    ds.alter_columns(change)
    assert lance.dataset(str(tmp_path / "t")).schema.names == ["b"]


@pytest.mark.parametrize("addrs", [[], [0, 2, 4], [5, 5, 3], [0, 2, 4, (1 << 32) + 5, (7 << 32)],
                                   list(range(100_000)), list(range(0, 300_000, 3)), [(3 << 32) + 1, 9]])
def test_serialize_row_addrs_bytes_equal_pylance(addrs):
    assert ours_module.serialize_row_addrs(addrs) == theirs_module.serialize_row_addrs(addrs)
    assert ours_module.serialize_row_addrs(iter(addrs)) == theirs_module.serialize_row_addrs(addrs)


def test_sql_query_and_cleanup_classes_exported():
    from lance_format.dataset.sql_query import SqlQuery, SqlQueryBuilder
    from lance_format.table.cleanup import CleanupExplanation, CleanupStats

    assert ours_module.SqlQuery is SqlQuery and ours_module.SqlQueryBuilder is SqlQueryBuilder
    assert ours_module.CleanupStats is CleanupStats and ours_module.CleanupExplanation is CleanupExplanation
    public = {n for n in dir(theirs_module.CleanupStats) if not n.startswith("_")}
    assert public <= set(CleanupStats.__dataclass_fields__)
    public = {n for n in dir(theirs_module.CleanupExplanation) if not n.startswith("_")}
    assert public <= set(CleanupExplanation.__dataclass_fields__)


def test_sql_query_builder_from_dataset_runs(tmp_path):
    ds = lance_format.write_dataset(pa.table({"a": [1, 2, 3]}), str(tmp_path / "t"))
    query = ds.sql("SELECT a FROM dataset WHERE a > 1").build()
    assert isinstance(query, ours_module.SqlQuery)
    assert pa.Table.from_batches(query.to_batch_records()).column("a").to_pylist() == [2, 3]


def test_cleanup_referenced_branch_has_pylance_fields():
    public = {n for n in dir(lance.CleanupReferencedBranch) if not n.startswith("_")}
    branch = lance_format.CleanupReferencedBranch(name="b", referenced_version=2, cleanup_candidate=False)
    assert public == {n for n in dir(branch) if not n.startswith("_")}


def test_simd_info_equals_pylance():
    assert lance_format.simd_info() == lance.simd_info()


_X86 = {"SSE2": True, "AVX": True, "FMA3": True, "AVX2": True}


@pytest.mark.parametrize("features, tier", [
    ({**_X86, "AVX512F": True, "AVX512FP16": True}, "avx512_fp16"),  # Sapphire Rapids and later
    ({**_X86, "AVX512F": True}, "avx512"),
    (_X86, "avx2"),
    ({**_X86, "AVX2": False}, "avx_fma"),  # AMD Piledriver: no AVX2
    ({**_X86, "AVX2": False, "FMA3": False}, "avx"),  # Sandy Bridge
    ({"AVX2": True}, "none"),  # AVX2 without FMA is not pylance's avx2 tier
    ({"SSE2": True}, "none"),
])
def test_simd_tiers_are_pylances_names(monkeypatch, features, tier):
    from lance_format import simd

    monkeypatch.setattr(simd, "_cpu_features", lambda: dict(features))
    monkeypatch.setattr(simd.platform, "machine", lambda: "x86_64")
    info = simd.simd_info()
    assert info["tier"] == tier and info["target_arch"] == "x86_64"
    assert ("avx2" in info["host_features"]) == bool(features.get("AVX2"))
    monkeypatch.setattr(simd.platform, "machine", lambda: "aarch64")
    monkeypatch.setattr(simd.platform, "system", lambda: "Linux")
    monkeypatch.setattr(simd, "_cpu_features", lambda: {"ASIMD": True, "FPHP": True})
    assert simd.simd_info() == {"tier": "neon", "target_arch": "aarch64", "host_features": []}
    monkeypatch.setattr(simd, "_cpu_features", lambda: {"ASIMD": True})
    assert simd.simd_info()["tier"] == "none"


def test_prioritized_item_orders_like_pylance():
    import heapq

    import lance.sampler

    from lance_format.sampler import PrioritizedItem

    for cls in (PrioritizedItem, lance.sampler.PrioritizedItem):
        heap: list = []
        for priority, item in [(3, "c"), (1, {"unorderable": 1}), (2, "b")]:
            heapq.heappush(heap, cls(priority, item))
        assert [heapq.heappop(heap).priority for _ in range(3)] == [1, 2, 3]
    assert (PrioritizedItem(1, "x") == PrioritizedItem(1, "y")) == (
        lance.sampler.PrioritizedItem(1, "x") == lance.sampler.PrioritizedItem(1, "y"))


def test_bfloat16_scalar_like_pylance():
    import lance.arrow

    from lance_format.arrow import BFloat16

    for value in (1.5, 1.1, -2.75, 0.0, -0.0, float("nan"), float("inf"), -float("inf"), 3.0e38, 7, 1e-30, 123456.0):
        ours, theirs = BFloat16(value), lance.arrow.BFloat16(value)
        assert repr(ours) == repr(theirs) and str(ours) == str(theirs)
        assert ours.as_float() == theirs.as_float() or value != value
    for raw in (b"\xc0\x3f", b"\x80\xff", b"\x00\x00"):
        assert repr(BFloat16.from_bytes(raw)) == repr(lance.arrow.BFloat16.from_bytes(raw))
    assert (BFloat16(1.5) == BFloat16(1.5)) and BFloat16(1.5) < BFloat16(2.0) and BFloat16(1.5) != 1.5
    with pytest.raises(ValueError):
        BFloat16.from_bytes(b"\x00")
    with pytest.raises(TypeError):
        BFloat16("x")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        hash(BFloat16(1.0))


def test_cast_bfloat16_round_trips_and_falls_back_to_pyarrow():
    import pyarrow.compute as pc

    from lance_format.arrow import bfloat16_array, cast

    floats = pa.array([1.1, None, -2.5, 3.0e38], pa.float64())
    bf16 = cast(floats, "bf16")
    assert bf16.equals(bfloat16_array([1.1, None, -2.5, 3.0e38]))
    assert cast(floats.slice(1), "bfloat16").equals(bfloat16_array([None, -2.5, 3.0e38]))
    odd = pa.array([None, 1.0, None, 2.0, 3.0, None, 4.0, 5.0, 6.0, None], pa.float32()).slice(3)
    assert cast(odd, "bf16").equals(bfloat16_array(odd.to_pylist()))
    assert cast(cast(odd, "bf16").slice(2), pa.float32()).equals(odd.slice(2))
    back = cast(bf16, pa.float32())
    assert back.to_pylist()[:3] == [1.1015625, None, -2.5] and abs(back[3].as_py() - 3.0e38) < 1e36
    assert cast(bf16, "float64").type == pa.float64()
    lists = pa.FixedSizeListArray.from_arrays(pa.array([1.1, 2, 3, 4, 5, 6], pa.float32()), 2,
                                              mask=pa.array([False, True, False])).slice(1)
    result = cast(lists, pa.list_(pa.float16(), 2))
    assert result.to_pylist() == [None, [5.0, 6.0]]
    with pytest.raises(ValueError):
        cast(pa.array([1, 2]), "bf16")
    with pytest.raises(ValueError):
        cast(bf16, pa.int32())
    with pytest.raises(ValueError):
        cast(lists, pa.list_(pa.float32(), 3))
    assert cast(pa.array([1, 2]), pa.float64()).equals(pc.cast(pa.array([1, 2]), pa.float64()))
    assert cast(pa.array(["1"]), "int64").equals(pa.array([1]))


def _merge_builder(module, uri):
    return module.dataset(uri).merge_insert("id").when_matched_update_all().when_not_matched_insert_all()


def test_merge_insert_batches_variants_like_pylance(tmp_path):
    source = pa.table({"id": [3, 4], "v": ["C", "D"]})
    results = {}
    for name, module in (("ours", lance_format), ("theirs", lance)):
        uri = str(tmp_path / name)
        lance.write_dataset(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}), uri)
        transaction, counts = _merge_builder(module, uri).execute_uncommitted_batches(source)
        assert transaction.read_version == 1 and module.dataset(uri).version == 1
        plan = _merge_builder(module, uri).analyze_plan_batches(source)
        assert "MergeInsert" in plan and "num_inserted_rows=1" in plan
        executed = _merge_builder(module, uri).execute_batches(source)
        results[name] = (counts, executed, lance.dataset(uri).to_table().sort_by("id"))
    assert results["ours"] == results["theirs"]
    assert results["ours"][1] == {"num_inserted_rows": 1, "num_updated_rows": 1, "num_deleted_rows": 0}


def test_scanner_pyarrow_interface_like_pylance(tmp_path):
    uri = str(tmp_path / "t")
    lance.write_dataset(pa.table({"a": list(range(10))}), uri, max_rows_per_file=4)
    ours, theirs = lance_format.dataset(uri).scanner(filter="a > 2"), lance.dataset(uri).scanner(filter="a > 2")
    assert pa.Table.from_batches(ours.scan_batches()).equals(theirs.to_table())
    for name in ("from_dataset", "from_fragment", "from_batches"):
        with pytest.raises(NotImplementedError):
            getattr(lance.LanceScanner, name)(lance.dataset(uri))
        with pytest.raises(NotImplementedError):
            getattr(lance_format.LanceScanner, name)(lance_format.dataset(uri))
    with pytest.raises(NotImplementedError):
        theirs.take([0])
    with pytest.raises(NotImplementedError):
        ours.take([0])


def test_storage_options_accessors_like_pylance(tmp_path):
    uri = str(tmp_path / "t")
    lance.write_dataset(pa.table({"a": [1]}), uri)
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    assert ours.initial_storage_options is None and theirs.initial_storage_options is None
    assert ours.latest_storage_options() is None and theirs.latest_storage_options() is None
    options = {"allow_http": "true"}
    ours = lance_format.dataset(uri, storage_options=options)
    theirs = lance.dataset(uri, storage_options=options)
    theirs_given = {k: v for k, v in theirs.initial_storage_options.items() if k != "user_agent"}  # pylance adds its own
    assert ours.initial_storage_options == theirs_given == options
    assert ours.latest_storage_options() == options


def test_pyarrow_dataset_relational_methods_run(tmp_path):
    """pylance inherits these from pyarrow but fails in them (join: NotImplementedError); here they
    give what pyarrow's own Dataset methods give on the same rows."""
    import pyarrow.compute as pc
    import pyarrow.dataset as pads

    rows = pa.table({"a": [3, 1, 2, 5], "b": ["x", "y", "z", "w"]})
    other = pa.table({"a": [1, 2, 4], "c": [10, 20, 40]})
    ours = lance_format.write_dataset(rows, str(tmp_path / "l"), max_rows_per_file=2)
    right = lance_format.write_dataset(other, str(tmp_path / "r"))
    reference, reference_right = pads.dataset(rows), pads.dataset(other)
    with pytest.raises(NotImplementedError):
        lance.dataset(str(tmp_path / "l")).join(lance.dataset(str(tmp_path / "r")), "a")

    assert ours.filter(pc.field("a") > 1).to_table().equals(reference.filter(pc.field("a") > 1).to_table())
    assert ours.filter("a > 1").to_table().column("a").to_pylist() == [3, 2, 5]
    assert ours.sort_by("a").to_table().equals(reference.sort_by("a").to_table())
    assert ours.sort_by([("b", "descending")]).to_table().equals(reference.sort_by([("b", "descending")]).to_table())
    for join_type in ("inner", "left outer", "full outer"):
        expected = reference.join(reference_right, "a", join_type=join_type).to_table().sort_by("a")
        assert ours.join(right, "a", join_type=join_type).to_table().sort_by("a").equals(expected)
        assert ours.join(reference_right, "a", join_type=join_type).to_table().sort_by("a").equals(expected)
    sorted_rows = pads.dataset(rows.sort_by("a").append_column("k", pa.array([0] * 4)))
    sorted_other = pads.dataset(other.append_column("k", pa.array([0] * 3)))
    expected = sorted_rows.join_asof(sorted_other, "a", "k", 1).to_table()
    ours_sorted = lance_format.write_dataset(sorted_rows.to_table(), str(tmp_path / "s"))
    assert ours_sorted.join_asof(sorted_other, "a", "k", 1).to_table().equals(expected)


def test_merge_insert_write_mode_and_storage_version(tmp_path):
    from lance_format.errors import UnsupportedFeatureError

    source = pa.table({"id": [3, 4], "v": ["C", "D"]})
    results = {}
    for name, module in (("ours", lance_format), ("theirs", lance)):
        uri = str(tmp_path / name)
        lance.write_dataset(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}), uri)
        builder = _merge_builder(module, uri).write_mode("rewrite_rows").data_storage_version("2.2")
        builder = builder.write_mode("auto").data_storage_version("stable")
        with pytest.raises(ValueError, match="Invalid write_mode: bogus"):
            builder.write_mode("bogus")
        results[name] = (builder.execute(source), lance.dataset(uri).to_table().sort_by("id"))
    assert results["ours"] == results["theirs"]
    builder = _merge_builder(lance_format, str(tmp_path / "ours"))
    with pytest.raises(UnsupportedFeatureError):
        builder.write_mode("rewrite_columns")  # pylance patches columns; this engine rewrites rows
    with pytest.raises(UnsupportedFeatureError):
        builder.data_storage_version("2.1")  # pylance writes 2.1 files into the 2.2 table


def _merge_into_bases(engine, root, configure):
    import os

    uri = str(root / "t")
    base = engine.DatasetBasePath
    engine.write_dataset(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}), uri,
                         initial_bases=[base(str(root / "flat"), name="flat"),
                                        base(str(root / "rooted"), name="rooted", is_dataset_root=True, id=7)])
    configure(engine.dataset(uri).merge_insert("id").when_matched_update_all().when_not_matched_insert_all()) \
        .execute(pa.table({"id": [3, 4], "v": ["C", "D"]}))
    ds = lance.dataset(uri)
    bases = ds.base_paths()
    placed = []
    for fragment in ds.get_fragments():
        for data_file in fragment.metadata.files:
            if data_file.base_id is None:
                placed.append((None, os.path.exists(os.path.join(uri, "data", data_file.path))))
            else:
                found = bases[data_file.base_id]
                folder = os.path.join(found.path, "data") if found.is_dataset_root else found.path
                placed.append((found.name, os.path.exists(os.path.join(folder, data_file.path))))
    return placed, ds.to_table().sort_by("id")


@pytest.mark.parametrize("configure", [lambda b: b.target_bases(["rooted"]), lambda b: b.target_bases(["flat"]),
                                       lambda b: b.target_all_bases(), lambda b: b])
def test_merge_insert_target_bases_like_pylance(tmp_path, configure):
    ours = _merge_into_bases(lance_format, tmp_path / "ours", configure)
    theirs = _merge_into_bases(lance, tmp_path / "theirs", configure)
    assert ours == theirs


def test_scanner_builder_scans_like_pylance(tmp_path):
    from lance_format.errors import UnsupportedFeatureError

    uri = str(tmp_path / "t")
    lance.write_dataset(pa.table({"a": list(range(20)), "b": [str(i) for i in range(20)]}), uri, max_rows_per_file=6)
    stats = {}

    def build(module, name):
        ds = module.dataset(uri)
        builder = sys.modules[module.__name__ + ".dataset"].ScannerBuilder(ds)
        return (builder.columns(["a", "b"]).filter("a > 3").limit(5).offset(2).with_row_id()
                .batch_size(3).scan_in_order().with_fragments(ds.get_fragments()[1:])
                .apply_defaults({"with_row_address": True, "batch_readahead": 2})
                .scan_stats_callback(lambda s: stats.setdefault(name, s)))

    ours, theirs = build(lance_format, "ours").to_scanner(), build(lance, "theirs").to_scanner()
    assert ours.to_table().equals(theirs.to_table())
    assert "ours" in stats and "theirs" in stats
    builder = ours_module.ScannerBuilder(lance_format.dataset(uri))
    with pytest.raises(ValueError, match="Unknown option bogus"):
        builder.apply_defaults({"bogus": 1})
    with pytest.raises(TypeError, match="Query column a must be a vector"):  # vector search: tests/engine/dataset/test_nearest.py
        builder.nearest("a", [1.0], k=1).to_scanner()
    with pytest.raises(UnsupportedFeatureError):
        builder.substrait_aggregate(b"")


def test_pandas_bfloat16_array_like_pylance():
    import lance.arrow
    import pandas as pd

    from lance_format.arrow import PandasBFloat16Array, bfloat16_array

    pairs = ((PandasBFloat16Array, bfloat16_array), (lance.arrow.PandasBFloat16Array, lance.arrow.bfloat16_array))
    for cls, make in pairs:
        array = cls(make([1.5, None, 3.0, -2.0]))
        assert len(array) == 4 and array.isna().tolist() == [False, True, False, False]
        assert len(array[1:3]) == 2 and len(array[np.array([True, False, True, False])]) == 2
        assert str(array.dtype) == "lance.bfloat16"
        assert pa.array(array).storage.equals(make([1.5, None, 3.0, -2.0]).storage)
        assert float(str(array[0])) == 1.5
    # a Series of ours (pylance's array lacks copy(), which pandas needs; its from_numpy needs ml_dtypes)
    series = pd.Series(PandasBFloat16Array(bfloat16_array([1.0, 2.5])))
    assert series.dtype.name == "lance.bfloat16" and len(series) == 2 and series.isna().tolist() == [False, False]
    assert pa.array(PandasBFloat16Array.from_numpy(np.array([1.0, 2.5], dtype=np.float32))).equals(
        bfloat16_array([1.0, 2.5]))
