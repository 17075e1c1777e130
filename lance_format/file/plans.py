"""Column plans: which columns of a data file hold each (possibly nested) field.

The two layouts number their columns differently: a 2.0 file has one column per field, parents
included, in depth-first order (:func:`plans_for_schema`); a 2.1/2.2 file has one column per
leaf only (:func:`structural_plans_for_schema`). Both readers take the same :class:`ColumnPlan` trees.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from lance_format.schema import LanceField, LanceSchema
from lance_format.schema.fields import marked_packed


@dataclass
class ColumnPlan:
    """Which file column holds one (possibly nested) field, and the Arrow field to produce.

    In 2.1+ files parents (structs, lists) have no column: their plan has ``column == -1`` and
    the leaves below carry the columns.
    """

    field: pa.Field
    column: int
    children: list[ColumnPlan] = field(default_factory=list)


def plans_for_schema(schema: LanceSchema) -> list[ColumnPlan]:
    """Plans for every top-level field of a file written with ``schema`` (2.0: depth-first columns)."""
    counter = [0]

    def plan(lance_field: LanceField) -> ColumnPlan:
        column = counter[0]
        counter[0] += 1
        children = [plan(c) for c in lance_field.children]
        return ColumnPlan(lance_field.to_arrow(), column, children)

    return [plan(f) for f in schema.fields]


def structural_plans_for_schema(schema: LanceSchema) -> list[ColumnPlan]:
    """Plans for every top-level field of a 2.1+ file written with ``schema`` (leaf columns only).

    A leaf is a field without children; a struct marked ``lance-encoding:packed`` is one leaf.
    """
    counter = [0]

    def plan(lance_field: LanceField) -> ColumnPlan:
        if not lance_field.children or marked_packed(lance_field.metadata):
            column = counter[0]
            counter[0] += 1
            return ColumnPlan(lance_field.to_arrow(), column)
        return ColumnPlan(lance_field.to_arrow(), -1, [plan(c) for c in lance_field.children])

    return [plan(f) for f in schema.fields]
