"""The web UI in a real headless Chromium (Debian chromium + chromium-driver through selenium), on runs that
failed for real: a linearizability failure (``--bug reuse-broker-id``, the broker-ids workload on real
controllers), a queue lost write (``--bug ack-before-replication`` with the master isolated and killed) and a
run that crashed mid-test (its nemesis generator raises); and the live view following a test while it runs.
Asserts what an engineer must see in seconds -- the failing checker, the anomaly kind and its explanation on
the run page, the failing op highlighted and scrolled to in the timeline, the crash at the top -- and keeps
screenshots of every page under the run's ``screenshots/`` directory (CI artefacts).  Needs root and iproute2
for the real clusters (skipped otherwise) and a browser (skipped with the reason when missing)."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import generator as g
from harness.commands._artifacts import write_artifacts
from harness.testing import browser
from harness.testing.run_workload import NEEDS_NAMESPACES, run_workload
from harness.web import make_server

pytestmark = [
    pytest.mark.integration,
    pytest.mark.browser,
    pytest.mark.skipif(browser.missing() is not None, reason=str(browser.missing())),
    NEEDS_NAMESPACES,
]

# the queue bug's schedule (tests/integration/bugs/test_ack_before_replication.py), once
KILL_MASTER = g.cycle([g.sleep(2.0), {"f": "start-partition", "value": {"kind": "isolate-master"}}, g.sleep(1.0),
                       {"f": "kill", "value": "masters"}, g.sleep(3.0), {"f": "stop-partition"}, g.sleep(4.0),
                       {"f": "start", "value": "dead"}], 1)
CRASH_MESSAGE = "nemesis schedule broke on purpose"


def _explode(ctx: Any) -> None:
    raise RuntimeError(CRASH_MESSAGE)


def _finish(out: Any) -> Path:
    run_dir = Path(out.run_dir.path)
    write_artifacts(run_dir, title=run_dir.parent.name)  # plots and timeline.html, as `splitbrain test` does
    return run_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Three real runs under one results root: {"root", "lin", "queue", "crash"} (run directories)."""
    tmp = tmp_path_factory.mktemp("web")
    lin = run_workload(tmp / "lin", workload="broker-ids", seed=631, cluster={"bugs": ["reuse-broker-id"]},
                       options={"failpoints": 0, "virtual_sets": 2, "apply_fraction": 0.5, "read_fraction": 0.2},
                       broker_sets={"count": 0, "replicas": 1}, time_limit_s=6.0)
    assert lin.results["checkers"]["linearizable"]["valid"] is False, lin.results["checkers"]["linearizable"]
    queue = run_workload(tmp / "queue", workload="queue", seed=380, cluster={"bugs": ["ack-before-replication"]},
                         options={"queues_per_set": 2, "slave_read_fraction": 0.0},
                         broker_sets={"count": 1, "replicas": 3}, time_limit_s=11.0,
                         nemesis=["partition", "kill"], schedule=KILL_MASTER, rate=60.0,
                         phases={"recovery_s": 3.0, "final_drain_s": 15.0})
    crash = run_workload(tmp / "crash", workload="broker-ids", seed=7, cluster={},
                         options={"failpoints": 0, "virtual_sets": 1}, broker_sets={"count": 0, "replicas": 1},
                         time_limit_s=8.0, schedule=g.phases(g.sleep(2.0), _explode))
    assert crash.exit_code == 255 and CRASH_MESSAGE in str(crash.results.get("crashed")), crash.results
    # one results root for the server: move each run's directory under tmp/results/<test>/<ts>
    root = tmp / "results"
    out: dict[str, Any] = {"root": root}
    for key, o in (("lin", lin), ("queue", queue), ("crash", crash)):
        src = _finish(o)
        dst = root / f"{key}-{src.parent.name}" / src.name
        dst.parent.mkdir(parents=True)
        shutil.move(str(src), str(dst))
        out[key] = dst
        out[f"{key}_results"] = o.results
    return out


@pytest.fixture(scope="module")
def base_url(runs: dict[str, Any]) -> Iterator[str]:
    srv = make_server(runs["root"], "127.0.0.1", 0)
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(5)


def _rel(runs: dict[str, Any], key: str) -> str:
    d: Path = runs[key]
    return f"{d.parent.name}/{d.name}"


def _visible_text(driver: Any, css: str) -> str:
    from selenium.webdriver.common.by import By

    els = [e for e in driver.find_elements(By.CSS_SELECTOR, css) if e.is_displayed()]
    assert els, f"nothing visible matches {css!r} on {driver.current_url}"
    return "\n".join(e.text for e in els)


def _check_run_page(driver: Any, url: str, *, checker: str, kind: str, explanation: str, shot: Path) -> None:
    """The failing checker's row names the anomaly kind and has an explanation; the anomaly with this
    explanation is listed (visibly) with its kind."""
    from selenium.webdriver.common.by import By

    driver.get(url)
    row = _visible_text(driver, "tr.checker.invalid")
    browser.screenshot(driver, shot)
    assert checker in row and kind in row, row
    assert all(c.text.strip() for c in driver.find_elements(By.CSS_SELECTOR, "tr.checker.invalid td.why")), row
    anomalies = _visible_text(driver, "table.anomalies")
    assert kind in anomalies and explanation in anomalies, anomalies


def _check_timeline(driver: Any, url: str, shot: Path) -> dict[str, Any]:
    """The first anomaly's op is marked, selected and inside the visible part of the ops view."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get("about:blank")  # a new document even when only the #op= fragment differs
    driver.get(url)
    WebDriverWait(driver, 20).until(lambda d: d.execute_script("return document.querySelector('.op.sel') !== null"))
    info = driver.execute_script("""
        var e=document.querySelector('.op.sel'), v=document.getElementById('view');
        var r=e.getBoundingClientRect(), w=v.getBoundingClientRect();
        return {cls: e.className, index: +e.dataset.index, detail: document.getElementById('detail').textContent,
                inside: r.bottom > w.top && r.top < w.bottom && r.right > w.left && r.left < w.right,
                marked: document.querySelectorAll('.op.mark').length,
                logs: document.getElementById('logs').textContent};""")
    shot.parent.mkdir(parents=True, exist_ok=True)
    assert driver.save_screenshot(str(shot))  # the viewport: the timeline is a full-window page that scrolls inside
    assert "mark" in info["cls"] and info["inside"], info
    return info


def test_linearizability_failure_is_explained_and_its_window_drawn(runs: dict[str, Any], base_url: str) -> None:
    from selenium.webdriver.common.by import By

    rel, shots = _rel(runs, "lin"), runs["lin"] / "screenshots"
    lin = runs["lin_results"]["checkers"]["linearizable"]
    reason = lin["stats"]["first_failure"]["reason"]
    with browser.chromium() as driver:
        _check_run_page(driver, f"{base_url}/run/{rel}/", checker="linearizable", kind="nonlinearizable",
                        explanation=reason, shot=shots / "run.png")
        assert reason in _visible_text(driver, "tr.checker.invalid td.why")
        svg = driver.find_element(By.CSS_SELECTOR, "svg.linear")
        assert svg.is_displayed() and reason in svg.text and "Why it cannot fit" in svg.text
        assert driver.find_elements(By.CSS_SELECTOR, "svg.linear g.call.failing")
        info = _check_timeline(driver, f"{base_url}/timeline/{rel}/", shots / "timeline.png")
    ff = lin["stats"]["first_failure"]
    assert reason in info["detail"] and f"#{ff['index']}" in info["detail"], info
    assert "splitbrain.controller" in info["logs"]  # the controllers' log lines of the failing op's window


def test_queue_lost_write_is_explained_and_highlighted(runs: dict[str, Any], base_url: str) -> None:
    rel, shots = _rel(runs, "queue"), runs["queue"] / "screenshots"
    q = runs["queue_results"]["checkers"]["queue"]
    assert q["valid"] is False, q
    kind = "lost-write" if q["anomaly_counts"].get("lost-write") else sorted(q["anomaly_counts"])[0]
    example = q["anomaly_examples"][kind][0]
    with browser.chromium() as driver:
        _check_run_page(driver, f"{base_url}/run/{rel}/", checker="queue", kind=kind,
                        explanation=example["explanation"], shot=shots / "run.png")
        first = _check_timeline(driver, f"{base_url}/timeline/{rel}/", shots / "timeline.png")
        assert "queue: " in first["detail"], first  # the selected op's anomalies are listed beside it
        # the run page's link for this anomaly selects its ops
        ops = ",".join(str(i) for i in example["ops"])
        linked = _check_timeline(driver, f"{base_url}/timeline/{rel}/#op={ops}", shots / "timeline-anomaly.png")
    assert example["explanation"] in linked["detail"], linked


def test_crashed_run_shows_the_crash_first(runs: dict[str, Any], base_url: str) -> None:
    from selenium.webdriver.common.by import By

    rel, shots = _rel(runs, "crash"), runs["crash"] / "screenshots"
    with browser.chromium() as driver:
        driver.get(f"{base_url}/run/{rel}/")
        crash = driver.find_element(By.ID, "crash")
        browser.screenshot(driver, shots / "run.png")
        assert crash.is_displayed() and CRASH_MESSAGE in crash.text and "RuntimeError" in crash.text
        first_heading = driver.find_element(By.CSS_SELECTOR, "h3")
        assert crash.location["y"] < first_heading.location["y"]  # above the verdict table and everything else
        driver.get(f"{base_url}/timeline/{rel}/")
        assert driver.find_elements(By.CSS_SELECTOR, ".op")  # the ops before the crash are drawn
        assert CRASH_MESSAGE in driver.find_element(By.ID, "crashline").text  # and why the history ends
        assert driver.save_screenshot(str(shots / "timeline.png"))
    for name in ("run.png", "timeline.png"):
        assert (shots / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_live_view_follows_a_running_test(tmp_path: Path) -> None:
    """The live page refreshes by itself while a real test runs: its counts grow, then it reports finished."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    root = tmp_path / "results"
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["out"] = run_workload(tmp_path, workload="broker-ids", seed=11, cluster={},
                                          options={"failpoints": 0, "virtual_sets": 1},
                                          broker_sets={"count": 0, "replicas": 1}, time_limit_s=8.0)
        except BaseException as exc:  # reported by the assertion below, not lost in the thread
            outcome["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    srv = make_server(root, "127.0.0.1", 0)
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    try:
        with browser.chromium() as driver:
            wait = WebDriverWait(driver, 60, poll_frequency=0.2)
            found = wait.until(lambda d: next(iter(root.glob("broker-ids/2*/history.jsonl")), None))
            assert isinstance(found, Path)
            run_dir = found.parent
            driver.get(f"http://127.0.0.1:{srv.server_address[1]}/live/broker-ids/{run_dir.name}/")
            wait.until(lambda d: d.find_element(By.ID, "status").text == "running"
                       and int(d.find_element(By.ID, "ok").text or 0) > 0)
            first = int(driver.find_element(By.ID, "ok").text)
            wait.until(lambda d: int(d.find_element(By.ID, "ok").text or 0) > first)  # refreshed, no reload
            assert driver.save_screenshot(str(_shot_dir(run_dir) / "live.png"))
            WebDriverWait(driver, 120, poll_frequency=0.5).until(
                lambda d: d.find_element(By.ID, "status").text == "finished")
            assert "finished: valid" in driver.find_element(By.ID, "line").text
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(5)
        worker.join(120)
    assert "error" not in outcome, outcome.get("error")


def _shot_dir(run_dir: Path) -> Path:
    d = run_dir / "screenshots"
    d.mkdir(parents=True, exist_ok=True)
    return d


def test_two_ticked_runs_are_compared_side_by_side(runs: dict[str, Any], base_url: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with browser.chromium() as driver:
        driver.get(f"{base_url}/")
        for key in ("lin", "queue"):
            driver.find_element(By.CSS_SELECTOR, f"input[name='run'][value='{_rel(runs, key)}']").click()
        driver.find_element(By.CSS_SELECTOR, "form#cmp button").click()
        # the form submits a navigation: wait for the compare page (a loaded machine may be slow to answer)
        table = WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, "table.compare"))[0]
        assert driver.save_screenshot(str(_shot_dir(runs["queue"]) / "compare.png"))
        text = table.text
        assert _rel(runs, "lin") in text and _rel(runs, "queue") in text
        assert "INVALID (nonlinearizable x1)" in text and "lost-write" in text
        diff = [r.text for r in driver.find_elements(By.CSS_SELECTOR, "tr.diff")]
        assert any(r.split()[0] == "lost-write" and "0" in r.split()[1:] for r in diff), diff  # 0 vs n, marked
