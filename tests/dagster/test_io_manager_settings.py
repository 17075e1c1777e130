"""LanceIOManager's definition-level settings: merge keys and other write settings (overridden by
asset metadata, then by run-time metadata), namespaces, commit metadata, writer properties,
table config, and unique table names."""

# No ``from __future__ import annotations``: Dagster resolves the annotations of local functions.
import dagster as dg
import lance
import pyarrow as pa
import pytest

from lance_assets import LanceIOManager
from lance_format.errors import InvalidInputError


def _meta(result) -> dict:
    meta = result.get_asset_materialization_events()[-1].materialization.metadata
    return {k: getattr(v, "value", v) for k, v in meta.items()}


def _run(assets, manager, instance, **kwargs):
    return dg.materialize(assets, resources={"io_manager": manager}, instance=instance, **kwargs)


def _rows(uri: str) -> list[dict]:
    return sorted(lance.dataset(uri).to_table().to_pylist(), key=lambda r: (r["id"], r.get("v")))


def test_merge_settings_on_the_io_manager_then_asset_then_run(root, instance):
    manager = LanceIOManager(base_uri=root, write_mode="merge", merge_on=["id"], preview_rows=0)
    batches = iter([
        pa.table({"id": [1, 2], "k": ["a", "a"], "v": [1, 2]}),
        pa.table({"id": [2, 3], "k": ["a", "a"], "v": [20, 30]}),
    ])

    @dg.asset
    def by_io_manager() -> pa.Table:
        return next(batches)

    _run([by_io_manager], manager, instance)
    second = _meta(_run([by_io_manager], manager, instance))
    # the IO manager's merge keys: id 2 updated, 3 inserted
    assert [(r["id"], r["v"]) for r in _rows(f"{root}/by_io_manager.lance")] == [(1, 1), (2, 20), (3, 30)]
    assert second["lance/rows_updated"] == 1 and second["lance/merge_on"] == ["id"]
    assert "lance/preview" not in second  # preview_rows=0 from the IO manager

    # asset metadata overrides the IO manager's keys (merge on k: all rows share k='a')
    @dg.asset(metadata={"lance/merge_on": "k", "lance/preview_rows": 2})
    def by_asset() -> pa.Table:
        return pa.table({"id": [7], "k": ["a"], "v": [7]})

    _run([by_asset], manager, instance)
    meta = _meta(_run([by_asset], manager, instance))
    assert meta["lance/merge_on"] == ["k"] and len(meta["lance/preview"].records) == 1

    # run-time metadata overrides both
    @dg.asset(metadata={"lance/merge_on": "k"})
    def by_run(context: dg.AssetExecutionContext) -> pa.Table:
        context.add_output_metadata({"lance/merge_on": ["id", "k"], "lance/merge_when_matched": "do_nothing"})
        return pa.table({"id": [1, 9], "k": ["a", "a"], "v": [100, 9]})

    _run([by_run], LanceIOManager(base_uri=root, write_mode="append"), instance)
    meta = _meta(_run([by_run], manager, instance))
    assert meta["lance/merge_on"] == ["id", "k"]
    assert meta["lance/rows_inserted"] == 0 and meta["lance/rows_updated"] == 0  # do_nothing on matches
    assert [(r["id"], r["v"]) for r in _rows(f"{root}/by_run.lance")] == [(1, 100), (9, 9)]


def test_io_manager_merge_condition_and_delete_by_source(root, instance):
    manager = LanceIOManager(base_uri=root, write_mode="merge", merge_on=["id"],
                             merge_update_condition="source.v > target.v", merge_delete_not_matched_by_source=True)
    batches = iter([pa.table({"id": [1, 2, 3], "v": [5, 5, 5]}), pa.table({"id": [1, 2], "v": [9, 1]})])

    @dg.asset
    def guarded() -> pa.Table:
        return next(batches)

    _run([guarded], manager, instance)
    _run([guarded], manager, instance)
    # id 1: newer value wins; id 2: older value ignored; id 3: not in the output, deleted
    assert [(r["id"], r["v"]) for r in _rows(f"{root}/guarded.lance")] == [(1, 9), (2, 5)]


def test_invalid_io_manager_setting_fails_before_writing(root, instance):
    manager = LanceIOManager(base_uri=root, write_mode="merge", merge_on=["id"], merge_when_matched="sometimes")

    @dg.asset
    def bad() -> pa.Table:
        return pa.table({"id": [1]})

    _run([bad], LanceIOManager(base_uri=root), instance)
    with pytest.raises(InvalidInputError, match="merge_when_matched"):
        _run([bad], manager, instance)
    assert lance.dataset(f"{root}/bad.lance").version == 1


@pytest.mark.parametrize("mode, expected", [("prefix", "prod/sales/raw/orders.lance"),
                                            ("replace", "prod/sales/orders.lance")])
def test_namespace_extends_or_replaces_the_key_prefix(root, instance, mode, expected):
    manager = LanceIOManager(base_uri=root, namespace="prod/sales", namespace_mode=mode)

    @dg.asset(key_prefix=["raw"])
    def orders() -> pa.Table:
        return pa.table({"id": [1, 2]})

    seen = {}

    @dg.asset
    def downstream(orders: pa.Table) -> None:
        seen["rows"] = orders.num_rows

    result = _run([orders, downstream], manager, instance)
    assert lance.dataset(f"{root}/{expected}").count_rows() == 2
    assert seen["rows"] == 2  # the input is read from the same namespaced table
    meta = result.get_asset_materialization_events()[0].materialization.metadata
    assert meta["dagster/uri"].value == f"{root}/{expected}"


def test_namespace_applies_to_op_outputs_but_not_explicit_tables(root, instance):
    manager = LanceIOManager(base_uri=root, namespace="ns")

    @dg.op
    def produce() -> pa.Table:
        return pa.table({"id": [1]})

    @dg.job(resource_defs={"io_manager": manager})
    def job() -> None:
        produce()

    assert job.execute_in_process(instance=instance).success
    assert lance.dataset(f"{root}/ns/produce/result.lance").count_rows() == 1

    @dg.asset(metadata={"lance/table": "fixed/place"})
    def pinned() -> pa.Table:
        return pa.table({"id": [1]})

    _run([pinned], manager, instance)
    assert lance.dataset(f"{root}/fixed/place.lance").count_rows() == 1  # lance/table is relative to base_uri


def test_unknown_namespace_mode_is_refused(root):
    with pytest.raises(Exception, match="namespace_mode"):
        LanceIOManager(base_uri=root, namespace="x", namespace_mode="sideways")


def test_commit_properties_from_io_manager_definition_and_run(root, instance):
    manager = LanceIOManager(base_uri=root, commit_properties={"team": "sales", "origin": "io_manager"})

    @dg.asset(metadata={"lance/commit_properties": {"origin": "definition", "pipeline": "daily"}})
    def committed(context: dg.AssetExecutionContext) -> pa.Table:
        context.add_output_metadata({"lance/commit_properties": {"pipeline": "rerun", "dagster/run_id": "forged"}})
        return pa.table({"id": [1]})

    result = _run([committed], manager, instance)
    ds = lance.dataset(f"{root}/committed.lance")
    props = ds.read_transaction(ds.version).transaction_properties
    assert props["team"] == "sales"  # IO manager
    assert props["origin"] == "definition"  # definition overrides the IO manager
    assert props["pipeline"] == "rerun"  # run-time metadata overrides the definition
    assert props["dagster/run_id"] == result.run_id  # provenance is recorded beside them, never overridden
    assert props["dagster/asset_key"] == "committed"


def test_writer_properties_and_file_version(root, instance):
    manager = LanceIOManager(base_uri=root, max_rows_per_file=4, data_storage_version="2.0")

    @dg.asset
    def split() -> pa.Table:
        return pa.table({"id": list(range(10))})

    @dg.asset(metadata={"lance/max_rows_per_file": 6, "lance/data_storage_version": "2.1"})
    def overridden() -> pa.Table:
        return pa.table({"id": list(range(10))})

    _run([split, overridden], manager, instance)
    ds = lance.dataset(f"{root}/split.lance")
    assert [f.count_rows() for f in ds.get_fragments()] == [4, 4, 2]
    assert ds.data_storage_version == "2.0"
    ds = lance.dataset(f"{root}/overridden.lance")
    assert [f.count_rows() for f in ds.get_fragments()] == [6, 4]
    assert ds.data_storage_version == "2.1"

    @dg.asset(metadata={"lance/max_rows_per_file": 0})
    def invalid() -> pa.Table:
        return pa.table({"id": [1]})

    with pytest.raises(InvalidInputError, match="max_rows_per_file must be a positive integer"):
        _run([invalid], manager, instance)


def test_table_config_from_the_definition(root, instance):
    manager = LanceIOManager(base_uri=root, table_config={"owner": "sales", "tier": "gold"})

    @dg.asset(metadata={"lance/table_config": {"tier": "silver"}, "lance/write_mode": "append"})
    def configured() -> pa.Table:
        return pa.table({"id": [1]})

    first = _meta(_run([configured], manager, instance))
    uri = f"{root}/configured.lance"
    ds = lance.dataset(uri)
    assert dict(ds.config()) == {"owner": "sales", "tier": "silver"}
    assert ds.version == 2 and first["lance/version"] == 2  # the rows, then the config (reported: the latest)
    props = ds.read_transaction(2).transaction_properties
    assert props["dagster/asset_key"] == "configured"
    second = _meta(_run([configured], manager, instance))
    assert lance.dataset(uri).version == 3 and second["lance/version"] == 3  # config unchanged: no extra commit
    assert lance.dataset(uri).count_rows() == 2


def test_table_name_is_unique_across_lakes(tmp_path, instance, monkeypatch):
    @dg.asset(key_prefix=["sales"])
    def orders() -> pa.Table:
        return pa.table({"id": [1]})

    names = []
    for lake in ("lake_a", "lake_b"):
        meta = _meta(_run([orders], LanceIOManager(base_uri=str(tmp_path / lake)), instance))
        names.append(meta["dagster/table_name"])
    assert names == [str(tmp_path / "lake_a" / "sales" / "orders.lance"), str(tmp_path / "lake_b" / "sales" / "orders.lance")]
    # a relative base_uri names the table by its absolute location
    monkeypatch.chdir(tmp_path)
    meta = _meta(_run([orders], LanceIOManager(base_uri="lake_c"), instance))
    assert meta["dagster/table_name"] == str(tmp_path / "lake_c" / "sales" / "orders.lance")
    # observations of the same table carry the same name (lineage joins them)
    from lance_assets import version_metadata

    assert version_metadata(str(tmp_path / "lake_a" / "sales" / "orders.lance"), 1)["dagster/table_name"] == names[0]
