"""The README's UI walkthrough in a real browser: headless Chromium (Debian's ``chromium``)
driven by Playwright against ``dg dev``, on the tables and run history the README's first
command made.

Steps, as the README lists them: the ``raw_orders`` Overview shows the table's location, row
count, columns and Lance version; the daily assets' column-schema checks show as evaluated;
``product_embeddings`` shows its IVF_PQ and INVERTED indices' metadata and their passed checks;
"Materialize" on ``raw_orders`` succeeds; turning on ``raw_orders_versions_sensor`` gives a tick
that requests change-feed runs; launching the ``change_raw_orders`` job succeeds and the sensor's
cursor moves to the versions it committed. Every assertion waits on what the page shows.

Skipped (saying why) only where Playwright or Chromium is missing; ``.ci/run`` installs both.

With ``LANCE_ASSETS_SCREENSHOTS=<folder>`` set, the walkthrough also saves a screenshot of each
step there (``docs/images/ui/`` holds the documentation's, taken this way).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import lance_format
from tests.dagster.dev_server import LOCATION, REPO, dagster_home, dg_dev

playwright_api = pytest.importorskip(
    "playwright.sync_api", reason="the browser walkthrough needs Playwright (pip install '.[test]')")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip("no Chromium installed (apt-get install chromium): the browser walkthrough is skipped",
                allow_module_level=True)

BROWSER_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SENSOR = "raw_orders_versions_sensor"
RUN_TIMEOUT_MS = 300_000  # a run worker starting a JVM on two busy cores
SCREENSHOTS = os.environ.get("LANCE_ASSETS_SCREENSHOTS")  # a folder: save each step's page there


def _snap(page, name: str) -> None:
    """Save the visible page as ``<LANCE_ASSETS_SCREENSHOTS>/<name>.png`` when that is set."""
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        page.wait_for_timeout(1500)  # let the page's last requests render
        page.screenshot(path=str(Path(SCREENSHOTS) / f"{name}.png"))


def _open_launched_run(page) -> None:
    """After "Materialize": follow the "Launched run" toast's "View" link to the run's page."""
    expect = playwright_api.expect
    expect(page.get_by_text(re.compile(r"^Launched run"))).to_be_visible()
    page.get_by_role("link", name="View").first.click()


def _wait_for_run_success(page) -> None:
    """On a run's page: wait for the run's status tag to settle, and require "Success"."""
    expect = playwright_api.expect
    expect(page).to_have_url(re.compile(r"/runs/[0-9a-f-]{36}"))
    status = page.get_by_text(re.compile(r"^(Success|Failure|Canceled)$")).first
    expect(status).to_be_visible(timeout=RUN_TIMEOUT_MS)
    assert status.inner_text() == "Success", page.inner_text("body")[:3000]


def test_readme_walkthrough_in_chromium(tmp_path, command1_env):
    # Everything the README's walkthrough runs (its first command's example, then `dg dev`, and
    # the runs dg dev launches) runs in the environment that command builds, not the test venv.
    assert not command1_env.has("pylance") and not command1_env.has("playwright")
    lake = tmp_path / "lake"
    example = subprocess.run([str(command1_env.python), "-m", "example_project.run_example", str(lake)],
                             cwd=REPO, env=command1_env.env(), capture_output=True, text=True, timeout=900)
    assert example.returncode == 0, example.stdout[-3000:] + example.stderr[-3000:]
    assert "incremental result equals a full recompute: True" in example.stdout, example.stdout[-3000:]
    home = dagster_home(lake / "dagster_home")  # the instance that command wrote; telemetry off
    uri = str(lake / "raw_orders.lance")
    expect = playwright_api.expect

    with dg_dev(home, lake, tmp_path / "dg_dev.log", dg=command1_env.dg, base_env=command1_env.env()) as server, \
            playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(60_000)
        expect.set_options(timeout=60_000)
        # Dagster's "join the community" dialog may cover the page at any point: skip it.
        page.add_locator_handler(page.get_by_role("button", name="Skip", exact=True), lambda b: b.click())
        try:
            _walkthrough(page, server, uri, Path(tmp_path))
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
            raise
        finally:
            browser.close()


def _walkthrough(page, server, uri: str, tmp_path: Path) -> None:
    expect = playwright_api.expect
    body = page.locator("body")

    # 1. The Overview of raw_orders: what the first command made
    page.goto(f"{server.url}/assets/raw_orders")
    expect(page.get_by_text("Latest materialization")).to_be_visible()
    expect(body).to_contain_text(re.compile(r"Storage.*" + re.escape(uri), re.S))  # the table's location
    expect(page.get_by_text(uri, exact=True).filter(visible=True).first).to_be_visible()
    expect(body).to_contain_text(re.compile(r"Row count\s*12(?!\d)"))
    for column, kind in (("order_id", "int64"), ("customer", "string"), ("amount", "double"),
                         ("order_ts", "timestamp[us]")):
        expect(page.get_by_role("row").filter(has_text=column).first).to_contain_text(kind)
    for key, value in (("lance/version", "1"), ("lance/write_mode", "merge"),
                       ("lance/operation", "create (the table's first version, by this merge)")):
        row = page.get_by_role("row").filter(has=page.get_by_role("cell", name=key, exact=True))
        expect(row.get_by_role("cell").last).to_have_text(value)
    _snap(page, "1-raw-orders-overview")

    # 2. The daily assets' column-schema checks were evaluated (by the first command's runs)
    page.goto(f"{server.url}/assets/daily_orders?view=checks")
    expect(page.get_by_text("column_schema_change").first).to_be_visible()
    expect(body).to_contain_text(re.compile(r"Evaluation result\s*Passed"))
    _snap(page, "2-daily-orders-checks")

    # 2b. product_embeddings: the declared indices in its materialization, and their checks
    page.goto(f"{server.url}/assets/product_embeddings")
    expect(page.get_by_text("Latest materialization")).to_be_visible()
    for key, value in (("lance/index/embedding_idx/type", "IVF_PQ"), ("lance/index/embedding_idx/indexed_rows", "200"),
                       ("lance/index/description_idx/type", "Inverted"),
                       ("lance/index/description_idx/unindexed_rows", "0")):
        row = page.get_by_role("row").filter(has=page.get_by_role("cell", name=key, exact=True))
        expect(row.get_by_role("cell").last).to_have_text(value)
    _snap(page, "2b-product-embeddings-indices")
    page.goto(f"{server.url}/assets/product_embeddings?view=checks")
    for check in ("lance_index_present", "lance_index_coverage"):
        expect(page.get_by_text(check).first).to_be_visible()
    expect(body).to_contain_text(re.compile(r"Evaluation result\s*Passed"))
    expect(body).not_to_contain_text("Failed")
    _snap(page, "2b-product-embeddings-checks")

    # 3. Materialize raw_orders (a Spark job in dg dev's run worker)
    page.goto(f"{server.url}/assets/raw_orders")
    expect(page.get_by_text("Latest materialization")).to_be_visible()
    page.get_by_text("Materialize", exact=True).first.click()  # the button (its name includes an icon)
    _open_launched_run(page)
    _wait_for_run_success(page)
    _snap(page, "3-materialize-run")
    after_materialize = lance_format.dataset(uri).version

    # 4. Turn on the version sensor: its first tick requests the change-feed runs
    page.goto(f"{server.url}/locations/{LOCATION}/sensors/{SENSOR}")
    expect(page.get_by_text("Latest tick")).to_be_visible()
    page.locator("label:has(input[type=checkbox])").first.click()
    expect(page.locator("input[type=checkbox]").first).to_be_checked()
    expect(body).to_contain_text(f"{after_materialize} runs requested", timeout=RUN_TIMEOUT_MS)  # one per version
    expect(body).to_contain_text(f'{{"raw_orders": {after_materialize}}}')
    _snap(page, "4-sensor-tick")

    # 5. Launch the change_raw_orders job from its launchpad
    page.goto(f"{server.url}/locations/{LOCATION}/jobs/change_raw_orders/playground")
    page.get_by_role("button", name="Launch run").click()  # opens the new run's page
    _wait_for_run_success(page)
    changed = lance_format.dataset(uri).version
    assert changed == after_materialize + 2  # the upsert and the cancellation

    # 6. The sensor picks the job's commits up
    page.goto(f"{server.url}/locations/{LOCATION}/sensors/{SENSOR}")
    expect(body).to_contain_text(f'{{"raw_orders": {changed}}}', timeout=RUN_TIMEOUT_MS)
    _snap(page, "5-sensor-after-change-job")
