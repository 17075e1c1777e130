"""Run official Lance's own Python tests against pylance and against lance_format, and compare.

Takes a checkout of lancedb/lance (its ``python/python/tests`` folder), copies the tests twice
into a work folder and runs the chosen files with pytest: once as they are (``import lance`` is
pylance, the oracle), once with ``import lance`` resolved to ``lance_format`` by
``scripts/pylance_alias.py``. Prints, per file, how many of the tests pylance passes also pass
here, overall and without the features this engine leaves aside (indices, vector and full-text
search, blobs, namespaces: tests whose names mention them). Nothing is copied into the project.

    python scripts/pylance_suite.py --tests ~/src/lance/python/python/tests
    python scripts/pylance_suite.py --tests /tmp/upstream/python/python/tests --files test_fork.py
    python scripts/pylance_suite.py --tests ... --files test_dataset.py -v   # list each failure
    python scripts/pylance_suite.py --tests ... --stubs   # placeholders for missing import names

``--stubs`` lets a file whose module-level imports name something lance_format lacks still
run its other tests (the placeholders raise when used); without it such a file fails whole,
as it would for a user.

The snapshot used for the figures in the README is official Lance's main of 19 August 2026 (commit
ecc74ebf of the GitHub fork LuciferYang/lance, pylance 11.0.0-beta.15's tree; 88 commits after the
b8bf97c9 used before), exported from a bare mirror with::

    mkdir -p /tmp/upstream
    git -C <mirror>/repo archive ecc74ebfc5ab6b86b7d08c0f4189d4766d5d24fa python/python/tests test_data \\
        | tar -x -C /tmp/upstream      # then --tests /tmp/upstream/python/python/tests

(``test_data/``, next to ``python/``, holds the historical tables test_migration.py and
test_backwards_compatibility.py open.)

(any clone of github.com/LuciferYang/lance at that commit does as well). The suite is slow: run it
per file (``--files``) on a shared machine.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_FILES = [
    # the core API files (issue #29): dataset, fragment, filter, schema evolution, optimize, migration, ...
    "test_dataset.py", "test_fragment.py", "test_filter.py", "test_schema_evolution.py",
    "test_optimize.py", "test_migration.py", "test_column_names.py", "test_json.py", "test_map_type.py",
    "test_multi_base.py", "test_delta.py", "test_lance.py", "test_order_by.py", "test_schema.py",
    "test_ingestion.py", "test_fork.py", "test_backwards_compatibility.py",
]
OUT_OF_SCOPE = re.compile(r"index|vector|nearest|knn|ann_|hnsw|ivf|_pq|fts|full_text|blob|namespace|scoring|prefilter"
                          r"|torch|tensorflow|cuda", re.IGNORECASE)


def lance_imports(files: list[Path]) -> dict[str, list[str]]:
    """``from lance.<module> import <names>`` across the files (for ``--stubs``)."""
    found: dict[str, set[str]] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lance."):
                sub = node.module[len("lance."):]
                parts = sub.split(".")
                for i in range(1, len(parts)):  # parents first, so packages exist for their children
                    found.setdefault(".".join(parts[:i]), set())
                found.setdefault(sub, set()).update(alias.name for alias in node.names)
    return {sub: sorted(names) for sub, names in found.items()}


def run_pytest(folder: Path, files: list[str], xml: Path, env: dict[str, str]) -> None:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--continue-on-collection-errors",
           f"--junitxml={xml}", *files]
    subprocess.run(cmd, cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def outcomes(xml: Path) -> dict[str, tuple[str, str]]:
    """test id -> (pass|failure|error|skipped, first line of the message)."""
    result = {}
    if not xml.exists():
        return result
    for case in ET.parse(xml).getroot().iter("testcase"):
        key = f"{case.attrib.get('classname', '')}::{case.attrib['name']}"
        children = list(case)
        if not children:
            result[key] = ("pass", "")
        else:
            message = (children[0].attrib.get("message") or "").replace("\n", " ")
            result[key] = (children[0].tag, message[:200])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tests", required=True, type=Path, help="lancedb/lance's python/python/tests")
    parser.add_argument("--files", nargs="*", default=DEFAULT_FILES)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--stubs", action="store_true")
    parser.add_argument("--reuse-oracle", action="store_true",
                        help="keep --workdir's earlier pylance results (oracle.xml) and rerun only this engine")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()

    work = args.workdir or Path(tempfile.mkdtemp(prefix="pylance-suite-"))
    files = [f for f in args.files if (args.tests / f).exists()]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    results = {}
    for side in ("oracle", "ours"):
        if side == "oracle" and args.reuse_oracle and (work / "oracle.xml").exists():
            results[side] = outcomes(work / "oracle.xml")
            continue
        # the checkout's layout, so tests reaching for its test_data/ (historical tables) find it
        shutil.rmtree(work / side, ignore_errors=True)
        folder = work / side / "python" / "python" / "tests"
        shutil.copytree(args.tests, folder)
        test_data = args.tests.resolve().parents[2] / "test_data"
        if test_data.is_dir():
            (work / side / "test_data").symlink_to(test_data)
        side_env = dict(env)
        if side == "ours":
            conftest = folder / "conftest.py"
            hook = f"import sys; sys.path.insert(0, {str(ROOT / 'scripts')!r}); import pylance_alias  # noqa\n"
            conftest.write_text(hook + (conftest.read_text() if conftest.exists() else ""))
            if args.stubs:
                side_env["LANCE_ALIAS_STUBS"] = "1"
                side_env["LANCE_ALIAS_IMPORTS"] = json.dumps(lance_imports([folder / f for f in files] +
                                                                           list(folder.glob("helper*.py"))))
        run_pytest(folder, files, work / f"{side}.xml", side_env)
        results[side] = outcomes(work / f"{side}.xml")

    oracle, ours = results["oracle"], results["ours"]
    modules = {Path(f).stem for f in files}
    passed_oracle = {k for k, v in oracle.items() if v[0] == "pass" and k.split("::")[0].split(".")[0] in modules}
    passed_both = {k for k in passed_oracle if ours.get(k, ("missing",))[0] == "pass"}
    per_file, per_file_ok = Counter(), Counter()
    scoped, scoped_ok = Counter(), Counter()
    for key in passed_oracle:
        module = key.split("::")[0].split(".")[0]
        per_file[module] += 1
        per_file_ok[module] += key in passed_both
        if not OUT_OF_SCOPE.search(key.split("::")[1]):
            scoped[module] += 1
            scoped_ok[module] += key in passed_both
    print(f"{'file':<28}{'all':>14}{'in scope':>14}")
    for module in sorted(per_file):
        print(f"{module:<28}{per_file_ok[module]:>6} / {per_file[module]:<5}{scoped_ok[module]:>6} / {scoped[module]:<5}")
    total, total_ok = sum(per_file.values()), sum(per_file_ok.values())
    in_scope, in_scope_ok = sum(scoped.values()), sum(scoped_ok.values())
    print(f"{'total':<28}{total_ok:>6} / {total:<5}{in_scope_ok:>6} / {in_scope:<5}")
    print(f"share of pylance's passing tests passing here: {total_ok / max(total, 1):.0%} "
          f"(in scope: {in_scope_ok / max(in_scope, 1):.0%}); work folder {work}")
    if args.verbose:
        for key in sorted(passed_oracle - passed_both):
            marker = " " if not OUT_OF_SCOPE.search(key.split("::")[1]) else "-"
            print(f"{marker} {key} | {ours.get(key, ('missing', ''))[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
