"""Every public function, class, method and property of the documented API has a docstring, so the
generated reference (docs/reference/) cannot regress; ``scripts/docstring_coverage.py`` defines the
API and lists what lacks one."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _coverage():
    spec = importlib.util.spec_from_file_location("docstring_coverage", REPO / "scripts" / "docstring_coverage.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("docstring_coverage", module)
    spec.loader.exec_module(module)
    return module


def test_every_public_name_of_the_documented_api_has_a_docstring() -> None:
    coverage = _coverage()
    api = coverage.public_api()
    # the check sees the whole API: top-level names, class members, and every listed module
    assert len(api) > 400
    for name in ("lance_format.LanceDataset.merge_insert", "lance_format.LanceScanner.to_table",
                 "lance_format.LanceFragment.to_table", "lance_format.spark.write_dataframe",
                 "lance_format.namespace.DirectoryNamespace.list_tables", "lance_format.indices.IndexConfig",
                 "lance_assets.LanceIOManager", "lance_format.BlobFile.read"):
        assert name in api, name
    assert coverage.undocumented() == [], "public names without a docstring"


def test_the_check_reports_an_undocumented_method() -> None:
    coverage = _coverage()

    class Documented:
        """A class."""

        def documented(self) -> None:
            """A method."""

        def bare(self) -> None:
            pass

        @property
        def bare_property(self) -> int:
            return 1

        def _private(self) -> None:
            pass

    members = dict(coverage._members(Documented))
    assert set(members) == {"documented", "bare", "bare_property"}
    assert [n for n, obj in members.items() if not coverage._has_doc(obj)] == ["bare", "bare_property"]
