"""The example's Dagster definitions: what ``dg dev`` (and ``dagster dev``) serve.

The project is a ``dg`` project (``[tool.dg]`` in pyproject.toml): its defs folder,
``example_project/defs``, holds ``lake/defs.yaml``, a ``LanceTablesComponent`` that brings in the
assets and job of ``example_project.assets`` and adds the IO manager, resources, checks, version
sensor and maintenance. Tables live under ``$LANCE_EXAMPLE_ROOT`` (default:
``<tmp>/lance-assets-example``); Spark runs locally.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import dagster as dg
import dagster_shared.record

from example_project.source import ROOT_ENV


def build_definitions(root: str | None = None) -> dg.Definitions:
    """The project's definitions; ``root`` (if given) becomes ``$LANCE_EXAMPLE_ROOT``, which is
    how ``defs.yaml`` learns where the tables live (as in every process ``dg dev`` starts)."""
    if root is not None:
        os.environ[ROOT_ENV] = root
    defs = dg.components.load_from_defs_folder(path_within_project=Path(__file__).resolve().parent)
    # One process per run: the example's steps are small, and a process per step (Dagster's
    # default under dg dev) would start Python, and for Spark steps a JVM, for each of them.
    return dagster_shared.record.replace(_with_check_definitions(defs), executor=dg.in_process_executor)


def _with_check_definitions(defs: dg.Definitions) -> dg.Definitions:
    """Dagster 1.13's defs.yaml loader hands a component's asset checks back as plain
    ``AssetsDefinition`` objects (when it adds the YAML's code references to them), and every
    load of the code location then converts them back through a beta parameter, warning each
    time. Converting them once here, quietly, keeps that notice out of every run."""
    checks = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)
        for check in defs.asset_checks or []:
            if isinstance(check, dg.AssetsDefinition) and not isinstance(check, dg.AssetChecksDefinition):
                check = dg.AssetChecksDefinition(**check.get_attributes_dict())
            checks.append(check)
    return dagster_shared.record.replace(defs, asset_checks=checks)


defs = build_definitions()
