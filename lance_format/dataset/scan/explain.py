"""``explain_plan``'s text: a :class:`~lance_format.dataset.scan.plan.ScanPlan`, one step a line,
outermost first (projection, exact batches, limit/offset, ordering, filter, index, the read).

The read line carries pylance's ``LanceRead`` fields (``projection=[a, b]``, ``num_fragments``,
``row_id``, ``row_addr``, ``full_filter``), which users and tests match.
"""

from __future__ import annotations

from lance_format.dataset.fragment import ROW_ADDRESS
from lance_format.dataset.scan.plan import ScanPlan
from lance_format.dataset.scan_options import describe_ordering
from lance_format.schema.extensions import with_extension_types


def explain(plan: ScanPlan, verbose: bool = False, read_metrics: str = "") -> str:
    """The plan as indented lines; ``verbose`` adds the fragment ids and the output schema,
    ``read_metrics`` (``analyze_plan``) goes on the read line."""
    lines = [f"Projection: {list(plan.output)}" + (
        " with expressions " + ", ".join(f"{n}={e}" for n, (e, _) in plan.expressions.items())
        if plan.expressions else "")]
    if plan.strict_batch_size:
        lines.append(f"ExactBatches: rows={plan.output_rows}")
    if plan.limit is not None or plan.offset:
        lines.append(f"Limit: offset={plan.offset}, limit={plan.limit}")
    if plan.order_by:
        lines.append(f"Sort: {describe_ordering(list(plan.order_by))} (reads every matching row first)")
    if plan.search is not None:
        lines.append(plan.search.describe())
    if plan.filter is not None:
        late = (f"; then [{', '.join(plan.late.rest.names)}] for the passing rows only"
                if plan.late is not None else "")
        lines.append(f"Filter: {plan.filter} (per batch, on the decoded columns{late})")
    if plan.index is not None:
        lines.append(plan.index.describe())
    deleted = "with deleted rows" if plan.include_deleted else "skipping deleted rows"
    projection = ", ".join(plan.read.schema.names())
    system = list(plan.read.system)
    lines.append(
        f"LanceRead: uri={plan.uri}, projection=[{projection}], num_fragments={len(plan.fragments)}"
        f"{'' if plan.whole_table else ' (chosen)'}, "
        f"row_id={str('_rowid' in system).lower()}, "
        f"row_addr={str(ROW_ADDRESS in system).lower()}, "
        f"full_filter={plan.filter if plan.filter is not None else '--'}, version={plan.version}, "
        f"physical_rows={plan.physical_rows}, {deleted}, system_columns={system}, "
        f"batch_size={plan.batch_size}, batch_readahead={plan.readahead}"
        f"{'' if plan.in_order else ', out of order'}" + (f", metrics=[{read_metrics}]" if read_metrics else ""))
    text = "\n".join("  " * i + line for i, line in enumerate(lines)) + "\n"
    if verbose:
        indent = "  " * len(lines)
        text += f"{indent}fragment_ids={[part.fragment.fragment_id for part in plan.fragments]}\n"
        schema = with_extension_types(plan.output_schema)
        text += f"{indent}output_schema={schema.to_string(show_schema_metadata=False)!r}\n"
    return text


__all__ = ["explain"]
