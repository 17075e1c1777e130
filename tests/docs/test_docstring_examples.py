"""The ``>>>`` examples in the docstrings of the main public entry points run and print what they
show, so the reference and ``help()`` never carry an example that has rotted."""

from __future__ import annotations

import doctest

import pytest

import lance_assets
import lance_format
import lance_format.spark

# The entry points a newcomer meets first; each must carry a runnable example.
ENTRY_POINTS = {
    "lance_format.dataset": lance_format.dataset,
    "lance_format.write_dataset": lance_format.write_dataset,
    "LanceDataset.scanner": lance_format.LanceDataset.scanner,
    "LanceDataset.to_table": lance_format.LanceDataset.to_table,
    "LanceDataset.merge_insert": lance_format.LanceDataset.merge_insert,
    "LanceDataset.update": lance_format.LanceDataset.update,
    "LanceDataset.delete": lance_format.LanceDataset.delete,
    "LanceDataset.delta": lance_format.LanceDataset.delta,
    "lance_assets.LanceIOManager": lance_assets.LanceIOManager,
}
SPARK_ENTRY_POINTS = {"lance_format.spark.write_dataframe": lance_format.spark.write_dataframe}


def _run_examples(name: str, obj: object, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    tests = doctest.DocTestFinder(recurse=False).find(obj, name, globs={})
    examples = [ex for test in tests for ex in test.examples]
    assert examples, f"{name} has no >>> example in its docstring"
    monkeypatch.chdir(tmp_path)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    failures: list[str] = []
    for test in tests:
        result = runner.run(test, out=failures.append)
        assert result.failed == 0, f"{name}'s example failed:\n" + "".join(failures)


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_entry_point_example_runs(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    _run_examples(name, ENTRY_POINTS[name], monkeypatch, tmp_path)


@pytest.mark.parametrize("name", sorted(SPARK_ENTRY_POINTS))
def test_spark_entry_point_example_runs(name: str, spark, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    # `spark` makes the suite's shared session the active one, so the example's
    # `SparkSession.builder.getOrCreate()` returns it instead of starting another.
    _run_examples(name, SPARK_ENTRY_POINTS[name], monkeypatch, tmp_path)


def test_a_wrong_example_output_fails(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    def shown_wrong() -> None:
        """Adds.

        >>> 1 + 1
        3
        """

    with pytest.raises(AssertionError, match="example failed"):
        _run_examples("shown_wrong", shown_wrong, monkeypatch, tmp_path)
