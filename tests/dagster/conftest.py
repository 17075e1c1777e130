"""Fixtures of the Dagster integration tests: a Dagster instance and table roots.

Spark tests use the suite's one session-scoped ``spark`` fixture from tests/conftest.py.
"""

from __future__ import annotations

import dagster as dg
import pytest


def pytest_configure(config):
    # backfill_policy, observable_source_asset and build_column_schema_change_checks are beta.
    for category in ("BetaWarning", "PreviewWarning"):
        config.addinivalue_line("filterwarnings", f"ignore::dagster_shared.utils.warnings.{category}")


@pytest.fixture
def instance():
    with dg.instance_for_test() as inst:
        yield inst


@pytest.fixture
def root(tmp_path):
    return str(tmp_path / "lake")


