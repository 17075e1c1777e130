"""Template variables of ``defs.yaml``: where the example's tables live."""

from __future__ import annotations

import dagster as dg

from example_project.source import example_namespace as _example_namespace
from example_project.source import example_root as _example_root


@dg.template_var
def example_root() -> str:
    """``$LANCE_EXAMPLE_ROOT``, or the same fixed temp-dir path in every process."""
    return _example_root()


@dg.template_var
def example_namespace() -> dict[str, str] | None:
    """The Lance Namespace of the tables with ``$LANCE_EXAMPLE_NAMESPACE=dir`` (else None: paths)."""
    return _example_namespace()
