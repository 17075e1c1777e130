"""LanceIOManager: write modes, types, loading options, metadata, provenance, failure paths."""

from __future__ import annotations

import dagster as dg
import lance
import pandas as pd
import pyarrow as pa
import pytest

import lance_format
from lance_assets import LanceIOManager
from lance_format.errors import CommitConflictError, DatasetAlreadyExistsError, DatasetNotFoundError, InvalidInputError


def _mat(result: dg.ExecuteInJobResult, key: str | None = None) -> dict:
    events = result.get_asset_materialization_events()
    if key is not None:
        events = [e for e in events if e.asset_key.to_user_string() == key]
    meta = events[-1].materialization.metadata
    return {k: getattr(v, "value", v) for k, v in meta.items()}


def _run(assets, root, instance, *, selection=None, raise_on_error=True, **kwargs):
    manager = kwargs.pop("manager", None) or LanceIOManager(base_uri=root)
    return dg.materialize(assets, selection=selection, resources={"io_manager": manager}, instance=instance,
                          raise_on_error=raise_on_error, **kwargs)


def _rows(uri: str) -> list[dict]:
    return sorted(lance.dataset(uri).to_table().to_pylist(), key=lambda r: tuple(str(v) for v in r.values()))


def test_overwrite_append_and_metadata(root, instance):
    batch = {"value": [1, 2, 3]}

    @dg.asset(metadata={"lance/write_mode": "append"})
    def numbers() -> pa.Table:
        return pa.table(batch)

    first = _mat(_run([numbers], root, instance))
    second = _mat(_run([numbers], root, instance))
    uri = f"{root}/numbers.lance"
    assert lance.dataset(uri).count_rows() == 6
    assert first["lance/version"] == 1 and second["lance/version"] == 2
    assert second["dagster/row_count"] == 6 and second["lance/rows_inserted"] == 3
    assert second["dagster/table_name"] == uri and second["dagster/uri"] == uri
    assert second["lance/operation"] == "append" and second["dagster/storage_kind"] == "lance"
    assert [c.name for c in second["dagster/column_schema"].columns] == ["value"]
    assert len(second["lance/preview"].records) == 5

    @dg.asset(name="numbers")
    def numbers_again() -> pa.Table:
        return pa.table({"value": [9]})

    third = _mat(_run([numbers_again], root, instance))
    assert _rows(uri) == [{"value": 9}]
    assert third["lance/rows_deleted"] == 6 and third["lance/rows_inserted"] == 1


def test_transaction_properties_record_run_asset_partition(root, instance):
    @dg.asset(key_prefix=["sales"], partitions_def=dg.StaticPartitionsDefinition(["eu", "us"]),
              metadata={"partition_expr": "region"})
    def orders(context) -> pa.Table:
        return pa.table({"region": [context.partition_key], "amount": [1.0]})

    result = _run([orders], root, instance, partition_key="eu")
    uri = f"{root}/sales/orders.lance"
    ds = lance.dataset(uri)
    props = ds.read_transaction(ds.version).transaction_properties
    assert props["dagster/run_id"] == result.run_id
    assert props["dagster/asset_key"] == "sales/orders"
    assert props["dagster/partition_key"] == "eu"


@pytest.mark.parametrize("kind", ["table", "reader", "pandas", "batch"])
def test_output_types_round_trip(root, instance, kind):
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", None]})

    @dg.asset
    def source():
        if kind == "reader":
            return data.to_reader(max_chunksize=1)
        if kind == "pandas":
            return data.to_pandas()
        if kind == "batch":
            return data.to_batches()[0]
        return data

    @dg.asset
    def as_table(source: pa.Table) -> None:
        assert source.to_pylist() == data.to_pylist()

    @dg.asset
    def as_reader(source: pa.RecordBatchReader) -> None:
        assert isinstance(source, pa.RecordBatchReader)
        assert source.read_all().to_pylist() == data.to_pylist()

    @dg.asset
    def as_pandas(source: pd.DataFrame) -> None:
        assert isinstance(source, pd.DataFrame)
        assert source["id"].tolist() == [1, 2, 3]

    @dg.asset
    def untyped(source):
        assert isinstance(source, pa.Table)

    assert _run([source, as_table, as_reader, as_pandas, untyped], root, instance).success


def test_columns_projection_and_time_travel(root, instance):
    @dg.asset(metadata={"lance/write_mode": "append"})
    def wide() -> pa.Table:
        return pa.table({"a": [1], "b": ["x"], "c": [True]})

    _run([wide], root, instance)
    _run([wide], root, instance)
    lance_format.dataset(f"{root}/wide.lance").tags.create("first", 1)
    seen = {}

    @dg.asset(ins={"wide": dg.AssetIn(metadata={"columns": ["a", "c"], "lance/version": 1})})
    def old_projection(wide: pa.Table) -> None:
        seen["old"] = wide

    @dg.asset(ins={"wide": dg.AssetIn(metadata={"lance/tag": "first"})})
    def tagged(wide: pa.Table) -> None:
        seen["tag"] = wide

    @dg.asset
    def latest(wide: pa.Table) -> None:
        seen["latest"] = wide

    assert _run([wide, old_projection, tagged, latest], root, instance,
                selection=[old_projection, tagged, latest]).success
    assert seen["old"].column_names == ["a", "c"] and seen["old"].num_rows == 1
    assert seen["tag"].num_rows == 1 and seen["latest"].num_rows == 2


def _merge_asset(rows, **meta):
    @dg.asset(name="customers", metadata={"lance/write_mode": "merge", "lance/merge_on": "id", **meta})
    def customers() -> pa.Table:
        return pa.table(rows)

    return customers


def test_merge_upsert_and_delete_by_source(root, instance):
    uri = f"{root}/customers.lance"
    _run([_merge_asset({"id": [1, 2, 3], "name": ["a", "b", "c"]})], root, instance)
    meta = _mat(_run([_merge_asset({"id": [3, 4], "name": ["C", "d"]})], root, instance))
    assert _rows(uri) == [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}, {"id": 3, "name": "C"},
                          {"id": 4, "name": "d"}]
    assert (meta["lance/rows_inserted"], meta["lance/rows_updated"], meta["lance/rows_deleted"]) == (1, 1, 0)
    assert meta["lance/merge_on"] == ["id"]

    meta = _mat(_run([_merge_asset({"id": [2, 4], "name": ["B", "D"]},
                                   **{"lance/merge_delete_not_matched_by_source": True})], root, instance))
    assert _rows(uri) == [{"id": 2, "name": "B"}, {"id": 4, "name": "D"}]
    assert meta["lance/rows_deleted"] == 2

    meta = _mat(_run([_merge_asset({"id": [2, 5], "name": ["x", "e"]},
                                   **{"lance/merge_when_matched": "do_nothing"})], root, instance))
    assert _rows(uri) == [{"id": 2, "name": "B"}, {"id": 4, "name": "D"}, {"id": 5, "name": "e"}]


def test_merge_needs_key_columns(root, instance):
    @dg.asset(metadata={"lance/write_mode": "merge"})
    def keyless() -> pa.Table:
        return pa.table({"id": [1]})

    with pytest.raises(InvalidInputError, match="merge needs key columns"):
        _run([keyless], root, instance)


def test_error_and_ignore_modes(root, instance):
    uri = f"{root}/once.lance"

    def once(mode, value):
        @dg.asset(name="once", metadata={"lance/write_mode": mode})
        def _asset() -> pa.Table:
            return pa.table({"v": [value]})

        return _asset

    _run([once("error", 1)], root, instance)
    with pytest.raises(DatasetAlreadyExistsError, match="write_mode='error'"):
        _run([once("error", 2)], root, instance)
    assert _rows(uri) == [{"v": 1}] and lance.dataset(uri).version == 1
    meta = _mat(_run([once("ignore", 3)], root, instance))
    assert meta["lance/skipped"] is True and meta["lance/version"] == 1
    assert _rows(uri) == [{"v": 1}]


def test_runtime_output_metadata_overrides_mode(root, instance):
    @dg.asset
    def runtime(context) -> pa.Table:
        context.add_output_metadata({"lance/write_mode": "append"})
        return pa.table({"v": [1]})

    _run([runtime], root, instance)
    _run([runtime], root, instance)
    assert lance.dataset(f"{root}/runtime.lance").count_rows() == 2


def test_io_manager_default_mode_and_table_override(root, instance, tmp_path):
    elsewhere = str(tmp_path / "custom" / "t.lance")

    @dg.asset(metadata={"lance/uri": elsewhere})
    def pinned() -> pa.Table:
        return pa.table({"v": [1]})

    @dg.asset(metadata={"lance/table": "shared/named"})
    def named() -> pa.Table:
        return pa.table({"v": [2]})

    manager = LanceIOManager(base_uri=root, write_mode="append")
    _run([pinned, named], root, instance, manager=manager)
    _run([pinned, named], root, instance, manager=manager)
    assert lance.dataset(elsewhere).count_rows() == 2
    assert lance.dataset(f"{root}/shared/named.lance").count_rows() == 2


def test_wrong_output_type_fails_clearly(root, instance):
    @dg.asset
    def bad():
        return {"not": "a table"}

    with pytest.raises(InvalidInputError, match="cannot store an object of type dict"):
        _run([bad], root, instance)


def test_wrong_input_annotation_fails_clearly(root, instance):
    @dg.asset
    def good() -> pa.Table:
        return pa.table({"v": [1]})

    @dg.asset
    def wants_dict(good: dict) -> None:
        pass

    _run([good], root, instance)
    with pytest.raises(InvalidInputError, match="cannot load an input annotated"):
        _run([good, wants_dict], root, instance, selection=[wants_dict])


def test_missing_table_fails_clearly(root, instance):
    @dg.asset
    def never_written() -> pa.Table:
        return pa.table({"v": [1]})

    @dg.asset
    def reader(never_written: pa.Table) -> None:
        pass

    with pytest.raises(DatasetNotFoundError, match="never_written has no Lance table"):
        _run([never_written, reader], root, instance, selection=[reader])


def test_unknown_write_mode_fails_before_writing(root, instance):
    @dg.asset(metadata={"lance/write_mode": "upsert_everything"})
    def typo() -> pa.Table:
        return pa.table({"v": [1]})

    with pytest.raises(InvalidInputError, match="lance/write_mode must be one of"):
        _run([typo], root, instance)
    with pytest.raises(DatasetNotFoundError):
        lance_format.dataset(f"{root}/typo.lance")


def test_conflicting_write_fails_and_leaves_table_unchanged(root, instance, monkeypatch):
    import lance_assets.engine as engine

    @dg.asset(partitions_def=dg.StaticPartitionsDefinition(["a", "b"]), metadata={"partition_expr": "k"})
    def parts(context) -> pa.Table:
        return pa.table({"k": [context.partition_key] * 2, "v": [1, 2]})

    _run([parts], root, instance, partition_key="a")
    uri = f"{root}/parts.lance"
    original = engine.replace

    def racing_replace(target, predicate, reader, **kwargs):
        # Another writer overwrites the table between our read and our commit.
        lance_format.write_dataset(pa.table({"k": ["z"], "v": [0]}), uri, mode="overwrite")
        return original(target, predicate, reader, **kwargs)

    monkeypatch.setattr(engine, "replace", racing_replace)
    with pytest.raises(CommitConflictError):
        _run([parts], root, instance, partition_key="a")
    ds = lance.dataset(uri)
    assert ds.version == 2 and ds.to_table().to_pylist() == [{"k": "z", "v": 0}]


def test_column_schema_works_with_dagster_schema_change_checks(root, instance):
    def versioned(columns):
        @dg.asset(name="evolving", metadata={"lance/schema_mode": "overwrite"})
        def evolving() -> pa.Table:
            return pa.table({c: [1] for c in columns})

        return evolving

    checks = dg.build_column_schema_change_checks(assets=[versioned(["a"])])
    first = _run([versioned(["a"]), *checks], root, instance)
    assert all(e.passed for e in first.get_asset_check_evaluations())
    same = _run([versioned(["a"]), *checks], root, instance)
    assert all(e.passed for e in same.get_asset_check_evaluations())
    changed = _run([versioned(["a", "b"]), *checks], root, instance)
    assert not any(e.passed for e in changed.get_asset_check_evaluations())


def test_metadata_bounds_checks_read_row_count(root, instance):
    @dg.asset
    def bounded() -> pa.Table:
        return pa.table({"v": list(range(10))})

    checks = dg.build_metadata_bounds_checks(assets=[bounded], metadata_key="dagster/row_count", min_value=5,
                                             max_value=20)
    result = _run([bounded, *checks], root, instance)
    assert [e.passed for e in result.get_asset_check_evaluations()] == [True]


def test_none_output_writes_nothing(root, instance):
    @dg.asset
    def side_effect() -> None:
        return None

    assert _run([side_effect], root, instance).success
    with pytest.raises(DatasetNotFoundError):
        lance_format.dataset(f"{root}/side_effect.lance")


def test_lance_asset_adds_the_kind(root, instance):
    from lance_assets import lance_asset

    @lance_asset(kinds={"pandas"})
    def kinded() -> pa.Table:
        return pa.table({"v": [1]})

    @lance_asset
    def bare() -> pa.Table:
        return pa.table({"v": [1]})

    assert kinded.specs_by_key[kinded.key].kinds == {"lance", "pandas"}
    assert bare.specs_by_key[bare.key].kinds == {"lance"}
    assert _run([kinded, bare], root, instance).success
