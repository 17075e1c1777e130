"""The documentation site (docs/, mkdocs.yml): it builds with ``mkdocs build --strict`` (a
broken link, a missing page or an unresolved API reference fails), every Python snippet of
every page runs (``tests/docs/snippets.py`` says how pages mark theirs), and two rendered pages
show their content in headless Chromium.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.docs.snippets import needs_spark, run_page, snippets

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
# the pages with Python to run (the others show only shell, YAML or the API reference)
SNIPPET_PAGES = [p for p in PAGES if any(s.skip is None for s in snippets(p))]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    pytest.importorskip("mkdocs", reason="the site needs the docs extra (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                           cwd=REPO, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    return out


def test_site_builds_strictly_with_every_page(site: Path) -> None:
    for page in PAGES:
        rel = page.relative_to(DOCS).with_suffix("")
        html = site / ("index.html" if rel.name == "index" else rel / "index.html")
        assert html.is_file(), f"{page} was not built"
    reference = (site / "reference" / "lance_format" / "index.html").read_text()
    for name in ("lance_format.write_dataset", "lance_format.dataset", "LanceDataset", "merge_insert"):
        assert name in reference, name  # mkdocstrings rendered the docstrings
    assert "Raises" in reference and "DatasetNotFoundError" in reference


def test_every_snippet_compiles_and_guides_have_runnable_ones() -> None:
    assert len(SNIPPET_PAGES) >= 20  # every guide shows runnable Python
    for page in PAGES:
        for snippet in snippets(page):
            compile(snippet.code, f"{page}:{snippet.line}", "exec")  # syntax errors fail here already


@pytest.mark.parametrize("page", SNIPPET_PAGES, ids=[str(p.relative_to(DOCS)) for p in SNIPPET_PAGES])
def test_page_snippets_run(page: Path, tmp_path: Path, request) -> None:
    extra = {}
    if needs_spark(page):
        extra["spark"] = request.getfixturevalue("spark")
    skipped = run_page(page, tmp_path, extra)
    for reason in skipped:  # shown by -ra: what the page shows but this run did not execute
        print("not run:", reason)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def test_two_rendered_pages_in_chromium(site: Path, tmp_path: Path) -> None:
    playwright_api = pytest.importorskip("playwright.sync_api", reason="needs Playwright (pip install '.[test]')")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no Chromium installed (apt-get install chromium)")
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    expect = playwright_api.expect
    try:
        with playwright_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=["--headless", "--no-sandbox",
                                                                        "--disable-gpu", "--no-first-run"])
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(30_000)

            page.goto(f"{url}/getting-started/")
            expect(page.locator("article h1")).to_contain_text("Getting started", timeout=30_000)
            expect(page.locator("article h2").filter(has_text="A first Dagster asset")).to_be_visible()
            nav = page.locator("nav.md-nav--primary")
            expect(nav).to_contain_text("Write-audit-publish")
            expect(nav).to_contain_text("The IO manager")
            expect(page.locator("code").filter(has_text="write_dataset").first).to_be_visible()
            page.screenshot(path=str(tmp_path / "getting-started.png"), full_page=True)

            page.goto(f"{url}/reference/lance_format/")
            heading = page.locator("article h2").filter(has_text="write_dataset").first
            expect(heading).to_be_visible(timeout=30_000)
            expect(page.locator("body")).to_contain_text("DatasetNotFoundError")
            page.screenshot(path=str(tmp_path / "reference.png"), full_page=False)
            browser.close()
    finally:
        server.shutdown()
    for shot in ("getting-started.png", "reference.png"):
        assert (tmp_path / shot).stat().st_size > 20_000  # a rendered page, not a blank one


def test_performance_charts_match_the_recorded_figures(tmp_path: Path) -> None:
    """docs/images/perf/*.svg are what benchmarks/charts.py draws from benchmarks/figures/."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_charts", REPO / "benchmarks" / "charts.py")
    charts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(charts)
    written = charts.render(tmp_path)
    assert {p.name for p in written} == {"realistic.svg", "spark_read.svg"}
    for path in written:
        committed = DOCS / "images" / "perf" / path.name
        assert committed.read_text() == path.read_text(), f"run python benchmarks/charts.py ({path.name} is stale)"
        assert f'images/perf/{path.name}' in (DOCS / "performance.md").read_text()


def _bash_blocks(text: str) -> list[str]:
    import re

    return re.findall(r"```bash\n(.*?)\n```", text, re.S)


def test_getting_started_shows_the_readmes_two_commands_and_output() -> None:
    readme = (REPO / "README.md").read_text()
    page = (DOCS / "getting-started.md").read_text()
    ci = (REPO / ".ci" / "run").read_text().strip().splitlines()[-1]
    two = [c for c in _bash_blocks(readme) if c.endswith("run_example") or c == ci]
    assert len(two) == 2 and all(c in _bash_blocks(page) for c in two)
    printed = readme.split("```text")[1].split("```")[0]
    assert printed in page  # the first command's expected output, the same on both


def test_ui_walkthrough_page_serves_with_dg_dev_and_shows_each_step() -> None:
    page = (DOCS / "dagster" / "ui-walkthrough.md").read_text()
    assert _bash_blocks(page) == ["DAGSTER_HOME=/tmp/lance-assets-example/dagster_home .venv/bin/dg dev"]
    shots = sorted((DOCS / "images" / "ui").glob("*.png"))
    assert len(shots) == 5
    for shot in shots:
        assert f"../images/ui/{shot.name}" in page
        assert 10_000 < shot.stat().st_size < 200_000  # a real page, kept small
    for step in ("raw_orders", "column_schema_change", "Materialize", "raw_orders_versions_sensor",
                 "change_raw_orders", '{"raw_orders": 6}'):
        assert step in page
