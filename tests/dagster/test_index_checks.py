"""Index checks (coverage, presence), indices under write-audit-publish, the component's YAML
indices and checks, and the maintenance job on an indexed table, on a real Dagster instance."""

from __future__ import annotations

import dagster as dg
import lance
import pyarrow as pa
import pytest

import lance_format
from lance_assets import (
    LanceIOManager,
    LanceMaintenancePolicy,
    build_lance_maintenance_assets,
    lance_asset,
    lance_index_coverage_check,
    lance_index_present_check,
    lance_maintenance_job,
    lance_publish_asset,
)
from lance_assets.components import LanceTablesComponent
from lance_assets.indices import INDICES
from lance_format.errors import InvalidInputError
from tests.dagster.test_indices import rows

SPECS = [{"column": "id", "type": "BTREE"}, {"column": "category", "type": "BITMAP"}]


def _asset(state, **metadata):
    @lance_asset(name="items", metadata={INDICES: SPECS, "lance/write_mode": "append", **metadata})
    def items() -> pa.Table:
        return state["batch"]

    return items


def _checks(result) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def test_coverage_and_present_checks_pass_then_fail(instance, root):
    uri = f"{root}/items.lance"
    state = {"batch": rows(0, 30)}
    items = _asset(state)
    checks = [lance_index_present_check(items, resource_key="io_manager"),
              lance_index_coverage_check(items, max_unindexed_rows=0, resource_key="io_manager"),
              lance_index_coverage_check(items, max_unindexed_fraction=0.5, indices=["id_idx"], uri=uri,
                                         name="id_index_half_covered")]
    resources = {"io_manager": LanceIOManager(base_uri=root)}
    result = dg.materialize([items, *checks[:2]], instance=instance, resources=resources)
    evaluations = _checks(result)
    assert evaluations["lance_index_present"].passed
    assert evaluations["lance_index_coverage"].passed
    assert evaluations["lance_index_coverage"].metadata["id_idx/unindexed_rows"].value == 0

    # an external append leaves rows unindexed; someone drops an index and rebuilds one as another type
    lance_format.write_dataset(rows(30, 10), uri, mode="append")
    ds = lance_format.dataset(uri)
    ds.drop_index("id_idx")
    ds.create_scalar_index("category", "BTREE", name="category_idx", replace=True)
    present = dg.materialize([items, checks[0]], instance=instance, resources=resources,
                             selection=dg.AssetSelection.checks(checks[0]))
    failed = _checks(present)["lance_index_present"]
    assert not failed.passed
    assert failed.metadata["missing"].value == ["id_idx"]
    assert "category_idx: declared BITMAP on category, found BTree on category" in failed.metadata["mistyped"].value[0]

    lance_format.dataset(uri).create_scalar_index("id", "BTREE", train=True)
    lance_format.write_dataset(rows(40, 10), uri, mode="append")
    coverage = dg.materialize([items, checks[1], checks[2]], instance=instance, resources=resources,
                              selection=dg.AssetSelection.checks(checks[1], checks[2]))
    outcomes = {e.check_name: (e.passed, e.metadata["id_idx/unindexed_rows"].value)
                for e in coverage.get_asset_check_evaluations()}
    # 10 of 50 rows unindexed: fails at 0 rows, passes at 50 %
    assert outcomes == {"lance_index_coverage": (False, 10), "id_index_half_covered": (True, 10)}
    assert _checks(coverage)["lance_index_coverage"].metadata["failing"].value == ["category_idx", "id_idx"]
    assert lance.dataset(uri).stats.index_stats("id_idx")["num_unindexed_rows"] == 10


def test_check_factories_refuse_bad_arguments():
    with pytest.raises(InvalidInputError, match="max_unindexed_rows or max_unindexed_fraction"):
        lance_index_coverage_check("items")
    with pytest.raises(InvalidInputError, match="within"):
        lance_index_coverage_check("items", max_unindexed_fraction=5)
    with pytest.raises(InvalidInputError, match="no indices declared"):
        lance_index_present_check("items")


def test_indices_of_an_audited_asset_are_brought_up_to_date_by_the_publish(instance, root):
    uri = f"{root}/items.lance"
    state = {"batch": rows(0, 30)}
    items = _asset(state, **{"lance/write_audit_publish": True})
    publish = lance_publish_asset(items)
    seen = []

    @dg.asset_check(asset=items, blocking=True)
    def audited(context) -> dg.AssetCheckResult:
        branch = lance_format.dataset(uri).checkout_version((f"audit/{context.run.run_id}", None))
        seen.append((branch.count_rows(), lance_format.dataset(uri).count_rows()))
        return dg.AssetCheckResult(passed=True)

    # on main, after the publish
    present = lance_index_present_check(publish.key, SPECS, uri=uri, audit_branch=False)
    coverage = lance_index_coverage_check(publish.key, max_unindexed_rows=0, uri=uri, audit_branch=False)
    resources = {"io_manager": LanceIOManager(base_uri=root)}
    for batch, total in ((rows(0, 30), 30), (rows(30, 12), 42)):
        state["batch"] = batch
        result = dg.materialize([items, audited, publish, present, coverage], instance=instance, resources=resources)
        assert result.success
        written = result.asset_materializations_for_node("items")[0].metadata
        assert written["lance/indices_on_publish"].value == "id_idx, category_idx"
        published = result.asset_materializations_for_node(publish.op.name)[0].metadata
        assert published["lance/published"].value is True
        assert published["lance/index/id_idx/indexed_rows"].value == total
        assert published["lance/index/category_idx/unindexed_rows"].value == 0
        assert all(e.passed for e in result.get_asset_check_evaluations())
    assert seen == [(30, 0), (42, 30)]  # the check audited the branch; main had the previous rows
    main = lance.dataset(uri)
    assert sorted(d.name for d in main.describe_indices()) == ["category_idx", "id_idx"]
    assert main.stats.index_stats("id_idx")["num_unindexed_rows"] == 0
    assert main.to_table(filter="id >= 28 AND id < 33")["id"].to_pylist() == [28, 29, 30, 31, 32]


def test_maintenance_job_optimizes_indices(instance, root):
    uri = f"{root}/items.lance"
    state = {"batch": rows(0, 30)}
    items = _asset(state)
    resources = {"io_manager": LanceIOManager(base_uri=root)}
    assert dg.materialize([items], instance=instance, resources=resources).success
    for start in range(30, 60, 10):  # writes outside Dagster: small unindexed fragments
        lance_format.write_dataset(rows(start, 10), uri, mode="append")
    maintenance = build_lance_maintenance_assets(
        [items], policy=LanceMaintenancePolicy(min_small_fragments=1, target_rows_per_fragment=1000,
                                               cleanup_older_than=None))
    job = lance_maintenance_job(maintenance)
    defs = dg.Definitions(assets=[items, *maintenance], jobs=[job], resources=resources)
    result = defs.resolve_job_def(job.name).execute_in_process(instance=instance)
    assert result.success
    meta = result.asset_materializations_for_node(maintenance[0].op.name)[0].metadata
    assert meta["lance/maintenance/unindexed_rows_before"].value == 2 * 30
    assert meta["lance/maintenance/unindexed_rows_after"].value == 0
    assert meta["lance/maintenance/fragments_before"].value == 4
    # compaction rewrote the indexed fragments too (remapping their indices), then the indices were extended
    assert meta["lance/maintenance/compacted"].value is True
    # as pylance: fragments covered by different indices are not merged together (indexed + new)
    assert meta["lance/maintenance/fragments_after"].value == 2
    assert meta["lance/maintenance/indices_optimized"].value == "category_idx, id_idx"
    for name in ("id_idx", "category_idx"):
        assert lance.dataset(uri).stats.index_stats(name)["num_unindexed_rows"] == 0
    assert lance.dataset(uri).to_table(filter="category = 'toys'").num_rows == lance_format.dataset(uri).to_table(
        filter="category = 'toys'", use_scalar_index=False).num_rows == 6


def test_component_yaml_indices_and_checks(instance, tmp_path):
    root = tmp_path / "lake"
    component = LanceTablesComponent.resolve_from_yaml(f"""
base_uri: {root}
io_manager: {{settings: {{write_mode: append}}}}
tables:
  - key: items
    indices: [{{column: id, type: BTREE}}, {{column: tags, type: LABEL_LIST, name: tag_labels}}]
    checks: {{index_present: true, max_unindexed_rows: 0}}
""")
    defs = component.build_defs(None)  # type: ignore[arg-type]  # the context is not used

    @lance_asset(name="items")
    def items() -> pa.Table:
        return rows(0, 25)

    checks = list(defs.asset_checks or [])
    assert sorted(c.check_specs_by_output_name[n].name for c in checks for n in c.check_specs_by_output_name) == [
        "lance_index_coverage", "lance_index_present"]
    result = dg.materialize([items, *checks], instance=instance, resources=dict(defs.resources or {}))
    assert result.success
    assert all(e.passed for e in result.get_asset_check_evaluations())
    assert {d.name: d.index_type for d in lance.dataset(f"{root}/items.lance").describe_indices()} == {
        "id_idx": "BTree", "tag_labels": "LabelList"}
