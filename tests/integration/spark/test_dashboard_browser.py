"""The dashboard in a real headless Chromium: built by Spark from a synthetic corpus with one injected regression,
served by ``splitbrain serve --dashboard`` (so the run links are followed for real), filtered, sorted, paged.

A screenshot of the filtered page is kept as ``dashboard-filtered.png`` in the test's results directory.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spark_analysis.ingest import ingest
from spark_analysis.report import write_report
from spark_analysis.synth import Corpus, generate, parse_regression
from spark_analysis.wilson import wilson_interval

pytestmark = [pytest.mark.integration, pytest.mark.browser]

REGRESSION = "0.3.0:queue:kill:0.9"


@pytest.fixture(scope="module")
def site(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from harness.web.server import make_server

    base = tmp_path_factory.mktemp("dashboard")
    corpus = generate(base / "results", runs=160, ops=40, seed=21, days=12, versions=("0.2.0", "0.3.0"),
                      regressions=(parse_regression(REGRESSION),), backends=("local", "docker"))
    ingest(spark, [base / "results"], base / "warehouse")
    write_report(spark, base / "warehouse", base / "dash", min_runs=10)
    server = make_server(base / "results", port=0, dashboard=base / "dash")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield {"corpus": corpus, "url": f"http://127.0.0.1:{server.server_address[1]}", "results": base / "results"}
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _ready(driver: Any, url: str) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url)
    WebDriverWait(driver, 30).until(lambda d: d.find_element("tag name", "body").get_attribute("data-ready") == "1")


def _choose(driver: Any, element_id: str, value: str) -> None:
    """Set a filter as a user would end up doing, and fire its change event."""
    driver.execute_script(
        "const e = document.getElementById(arguments[0]); e.value = arguments[1];"
        "e.dispatchEvent(new Event('change'));", element_id, value)


def _click(driver: Any, css: str) -> None:
    """Click an element after scrolling it to mid-screen (the sticky filter bar covers the top)."""
    e = driver.find_element("css selector", css)
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", e)
    e.click()


def _rows(driver: Any, container: str) -> list[Any]:
    return driver.find_elements("css selector", f"#{container} tbody tr")


def _matching(corpus: Corpus, **want: str) -> int:
    return sum(all(getattr(r, k) == v for k, v in want.items()) for r in corpus.runs)


def test_filters_show_the_flagged_regression_and_links_open_the_run(site: dict[str, Any], browser: Any,
                                                                     tmp_path: Path) -> None:
    from harness.testing.browser import screenshot

    corpus: Corpus = site["corpus"]
    _ready(browser, site["url"] + "/dashboard/")
    banner = browser.find_element("id", "banner")
    assert "candidate 0.3.0 is significantly worse than 0.2.0 in 1 cell(s): queue \u00d7 kill" in banner.text
    assert browser.find_element("id", "match-count").text.startswith(f"{len(corpus.runs)} of {len(corpus.runs)}")

    # only broker-ids: nothing regressed in what is shown
    _choose(browser, "f-workload", "broker-ids")
    assert browser.find_elements("css selector", "#cmp-table tr.regressed") == []
    assert {r.find_elements("tag name", "td")[0].text for r in _rows(browser, "cell-table")} == {"broker-ids"}

    # the regressed cell, on one backend and one version: the flagged row, and counts that match the corpus
    _choose(browser, "f-workload", "queue")
    _choose(browser, "f-nemesis", "kill")
    flagged = browser.find_elements("css selector", "#cmp-table tr.regressed")
    assert [r.get_attribute("data-cell") for r in flagged] == ["queue/kill"]
    assert flagged[0].find_elements("tag name", "td")[0].text == "REGRESSED"
    _choose(browser, "f-version", "0.3.0")
    _choose(browser, "f-backend", "docker")
    want = sum(r.version == "0.3.0" and r.backend == "docker" and (r.cell.workload, r.cell.nemesis) == ("queue", "kill")
               for r in corpus.runs)
    assert browser.find_element("id", "match-count").text.startswith(f"{want} of ")
    assert "backend: docker" in browser.find_element("id", "cmp-note").text
    assert browser.execute_script("return document.getElementById('trend').data.length") == 3  # line + 2 band edges

    # a time range: only that day's runs remain
    day = sorted({r.date for r in corpus.runs})[3]
    browser.find_element("id", "f-reset").click()
    _choose(browser, "f-from", day)
    _choose(browser, "f-to", day)
    assert browser.find_element("id", "match-count").text.startswith(f"{_matching(corpus, date=day)} of ")

    # sorting and paging the runs table; every run link opens that run in serve
    browser.find_element("id", "f-reset").click()
    _choose(browser, "runs-kind", "all")
    pager = browser.find_element("css selector", "#runs-table .pageinfo").text
    assert f"page 1 of {-(-len(corpus.runs) // 25)} · {len(corpus.runs)} rows" in pager
    _click(browser, "#runs-table .next")
    assert "page 2 of" in browser.find_element("css selector", "#runs-table .pageinfo").text
    for order in ("descending", "ascending"):  # a numeric column sorts largest first, a second click flips it
        _click(browser, "#cell-table th[data-key=anomalous]")
        th = browser.find_element("css selector", "#cell-table th[data-key=anomalous]")
        assert th.get_attribute("aria-sort") == order
        bad = [int(r.find_elements("tag name", "td")[3].text) for r in _rows(browser, "cell-table")]
        assert bad == sorted(bad, reverse=order == "descending") and len(set(bad)) > 1

    # the page's Wilson interval is spark_analysis.wilson's
    for k, n in ((0, 7), (3, 17), (40, 40)):
        got = browser.execute_script("return window.splitbrainDashboard.wilson(arguments[0], arguments[1])", k, n)
        assert got == pytest.approx(list(wilson_interval(k, n)), abs=1e-12)

    _choose(browser, "f-workload", "queue")
    _choose(browser, "f-nemesis", "kill")
    shot = screenshot(browser, site["results"] / "dashboard-filtered.png")
    assert shot.stat().st_size > 10_000

    link = browser.find_element("css selector", "#runs-table tbody a")
    run_id = link.text
    assert link.get_attribute("href") == f"{site['url']}/run/{run_id}/"
    _click(browser, "#runs-table tbody a")
    body = browser.find_element("tag name", "body").text
    assert "404" not in body.splitlines()[0] and run_id.split("/")[-1] in body
