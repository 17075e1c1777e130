"""Run the Python snippets of official Lance's user guide against pylance and against lance_format.

Takes a checkout of lancedb/lance (its ``docs/src`` folder), pulls the ```python blocks out of
each guide page and runs them in order, in one namespace per page and a fresh working folder,
once with pylance (the oracle) and once with ``import lance`` resolved to ``lance_format``
(``scripts/pylance_alias.py``). A block that raises is recorded and the page goes on with the
next one, as a reader trying the guide would. Prints, per page, how many blocks pylance runs,
how many of those run here too, and how many of those print the same output (lines naming
temporary paths, object ids or clock times aside). Nothing is copied into the project.

    python scripts/pylance_docs.py --docs ~/src/lance/docs/src
    python scripts/pylance_docs.py --docs ... --pages guide/read_and_write.md -v   # each difference
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PAGES = [
    "quickstart/index.md", "quickstart/versioning.md", "guide/read_and_write.md", "guide/data_evolution.md",
    "guide/distributed_write.md", "guide/json.md", "guide/tags.md", "guide/arrays.md", "guide/migration.md",
    "guide/blob.md", "guide/performance.md", "guide/object_store.md",
]
_BLOCK = re.compile(r"^```(?:python|py)\s*\n(.*?)^```", re.MULTILINE | re.DOTALL)
# output that legitimately differs from run to run or engine to engine
_VOLATILE = re.compile(r"0x[0-9a-f]+|/tmp/\S+|\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?|[0-9a-f]{8}-[0-9a-f-]{27}|"
                       r"\d+\.\d+ ?(ms|s|µs)\b")

_RUNNER = r"""
import contextlib, io, json, sys, traceback
if sys.argv[1] == "ours":
    sys.path.insert(0, sys.argv[3])
    import pylance_alias  # noqa: F401 - `import lance` is lance_format from here on
blocks = json.loads(open(sys.argv[2]).read())
namespace = {"__name__": "__main__"}
results = []
for code in blocks:
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "<snippet>", "exec"), namespace)
        results.append({"ok": True, "out": out.getvalue()})
    except BaseException as exc:  # a snippet may even call exit()
        line = traceback.format_exception_only(type(exc), exc)[-1].strip()
        results.append({"ok": False, "out": out.getvalue(), "error": line[:300]})
print("@@RESULTS@@" + json.dumps(results))
"""


def blocks_of(page: Path) -> list[str]:
    return [m.group(1) for m in _BLOCK.finditer(page.read_text())]


def _clear_absolute_paths(blocks: list[str]) -> None:
    """Remove what snippets create at absolute ``/tmp/...`` paths, so neither engine finds the
    other's table there."""
    for path in set(re.findall(r"[\"'](/tmp/[^\"'\s]+)[\"']", "\n".join(blocks))):
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            Path(path).unlink(missing_ok=True)


def run_page(blocks: list[str], engine: str, timeout: float) -> list[dict]:
    _clear_absolute_paths(blocks)
    with tempfile.TemporaryDirectory(prefix=f"lance-docs-{engine}-") as work:
        source = Path(work) / "blocks.json"
        source.write_text(json.dumps(blocks))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        try:
            done = subprocess.run([sys.executable, "-c", _RUNNER, engine, str(source), str(ROOT / "scripts")],
                                  cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return [{"ok": False, "out": "", "error": f"page timed out after {timeout:.0f} s"}] * len(blocks)
        marker = done.stdout.rfind("@@RESULTS@@")
        if marker < 0:
            error = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return [{"ok": False, "out": "", "error": error}] * len(blocks)
        return json.loads(done.stdout[marker + len("@@RESULTS@@"):])


def same_output(a: str, b: str) -> bool:
    return _VOLATILE.sub("~", a) == _VOLATILE.sub("~", b)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", required=True, type=Path, help="lancedb/lance's docs/src folder")
    parser.add_argument("--pages", nargs="*", default=DEFAULT_PAGES)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per page and engine")
    parser.add_argument("-v", "--verbose", action="store_true", help="list each block that differs")
    args = parser.parse_args()
    totals = [0, 0, 0, 0]
    print(f"{'page':34} {'blocks':>6} {'pylance':>8} {'here':>6} {'same output':>12}")
    for name in args.pages:
        blocks = blocks_of(args.docs / name)
        theirs = run_page(blocks, "theirs", args.timeout)
        ours = run_page(blocks, "ours", args.timeout)
        passing = [i for i, r in enumerate(theirs) if r["ok"]]
        here = [i for i in passing if ours[i]["ok"]]
        same = [i for i in here if same_output(ours[i]["out"], theirs[i]["out"])]
        for total, count in zip(range(4), (len(blocks), len(passing), len(here), len(same))):
            totals[total] += count
        print(f"{name:34} {len(blocks):6} {len(passing):8} {len(here):6} {len(same):12}")
        if args.verbose:
            for i in passing:
                if not ours[i]["ok"]:
                    print(f"  block {i + 1} fails here: {ours[i]['error']}")
                elif i not in same:
                    print(f"  block {i + 1} prints differently:\n    pylance: {theirs[i]['out'][:400]!r}\n"
                          f"    here:    {ours[i]['out'][:400]!r}")
    print(f"{'total':34} {totals[0]:6} {totals[1]:8} {totals[2]:6} {totals[3]:12}")
    if totals[1]:
        print(f"blocks pylance runs that run here: {totals[2] / totals[1]:.0%}; with the same output: "
              f"{totals[3] / totals[1]:.0%}")


if __name__ == "__main__":
    main()
