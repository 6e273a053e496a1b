"""The web view in a real headless Chromium: shipped example runs, charts and tree, diffs, script payloads that must
stay text, a live interpreter evolve followed without reload, and a path outside the runs refused."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from browser import serving, start_driver
from web_runs import ATTENTION, EXAMPLES, PAYLOAD, xss_run

import avo
from avo.cli import main
from avo.run.directory import Run
from avo.web.report import write_html
from avo.web.server import Site

FAST_EVAL = "evaluation:\n  warmup_ms: 1\n  rep_ms: 5\n  input_sets: 1\n"
INJECTED = """return {
  xss: window.__xss === undefined ? null : window.__xss,
  injected: document.getElementById("injected") !== null,
  handlers: [...document.querySelectorAll("*")].filter((e) => [...e.attributes].some((a) => a.name.startsWith("on")))
             .map((e) => e.tagName),
  images: document.images.length,
  scripts: [...document.scripts].map((s) => s.getAttribute("src")),
};"""


@pytest.fixture(scope="module")
def driver():
    driver = start_driver()
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    runs = tmp_path_factory.mktemp("browser") / "runs"
    for tar in sorted(EXAMPLES.glob("*.avo.tar")):
        assert main(["import", str(tar), "--runs-dir", str(runs)]) == 0
    xss_run(runs).close()
    return runs


@pytest.fixture(scope="module")
def base(runs):
    with serving(Site(runs)) as address:
        yield address


def nodes(driver, selector: str) -> list[str]:
    return driver.execute_script(f"return [...document.querySelectorAll({selector!r})].map((e) => e.id || "
                                 "e.getAttribute('data-cid'));")


def text_of(driver, element_id: str) -> str:
    """An element's text read inside the page, in one step: a live page may replace the element between a
    find_element and its .text (a stale element reference)."""
    return driver.execute_script(f"return document.getElementById({element_id!r})?.textContent.trim() ?? '';")


def test_runs_page_lists_the_imported_examples(driver, base, runs):
    driver.get(base + "/")
    listed = nodes(driver, "tr.run-row")
    shipped = {path.name for path in runs.iterdir() if path.name != "xss"}
    assert len(shipped) == len(list(EXAMPLES.glob("*.avo.tar"))) >= 4
    assert set(driver.execute_script("return [...document.querySelectorAll('tr.run-row')].map((r) => r.dataset.run)"))\
        == shipped | {"xss"}
    row = driver.find_element("css selector", f'tr[data-run="{ATTENTION}"]').text
    assert "attention" in row and "h200" in row and "finished" in row and "0.7878" in row and "19" in row
    assert len(listed) == len(shipped) + 1


def test_run_page_draws_both_charts_and_the_whole_tree(driver, base, runs):
    run = Run.open(ATTENTION, runs)
    cids, best, baseline = run.lineage.cids(), run.lineage.best, run.lineage.baseline
    rationale = run.lineage.info("c0003").rationale
    run.close()
    driver.get(f"{base}/run/{ATTENTION}/")
    for chart in ("chart-time", "chart-index"):
        assert sorted(nodes(driver, f"#{chart} circle.pt")) == cids
        box = driver.execute_script(f"return document.getElementById('{chart}').getBoundingClientRect().toJSON()")
        assert box["width"] > 800 and box["height"] > 200
    assert sorted(nodes(driver, "#tree g.node")) == [f"node-{c}" for c in cids]
    assert driver.find_element("css selector", f"#node-{best} .label.best").text == "best"
    assert driver.find_element("css selector", f"#node-{baseline} .label.baseline").text == "baseline"
    hover = driver.execute_script("return document.querySelector('#chart-index circle[data-cid=c0003] title')"
                                  ".textContent")
    assert hover.startswith("c0003 · correct") and " ".join(rationale.split())[:80] in hover
    assert "result: correct, fitness" in hover
    driver.find_element("css selector", "#chart-index circle[data-cid=c0003]").click()
    assert driver.current_url.endswith(f"/run/{ATTENTION}/c0003")


def test_candidate_page_shows_its_diff(driver, base, runs):
    run = Run.open(ATTENTION, runs)
    added = [line for line in run.lineage.diff("c0000", "c0003").splitlines()
             if line.startswith("+") and not line.startswith("+++")]
    run.close()
    driver.get(f"{base}/run/{ATTENTION}/c0003")
    shown = driver.execute_script("return [...document.querySelectorAll('.diff tr.add td.code')]"
                                  ".map((e) => e.textContent)")
    assert added and added == shown[:len(added)]  # the first diff is against the parent, c0000
    assert driver.find_element("css selector", ".diff tr.add .n").is_displayed()  # names coloured as Python
    assert driver.find_element("id", "measured").text.startswith("-18.6%")


@pytest.mark.parametrize("path", ["/", "/run/xss/", "/run/xss/c0001"])
def test_script_payloads_stay_text(driver, base, path):
    driver.get(base + path)
    found = driver.execute_script(INJECTED)
    assert found == {"xss": None, "injected": False, "handlers": [], "images": 0, "scripts": ["/static/live.js"]}
    if path.endswith("c0001"):
        rationale = driver.find_element("id", "rationale")
        assert rationale.text == f"try this {PAYLOAD}"
        assert driver.execute_script("return document.getElementById('rationale').children.length") == 0
        assert PAYLOAD in driver.find_element("css selector", ".diff").text


def test_report_file_opens_without_server_and_payloads_stay_text(driver, runs, tmp_path):
    run = Run.open("xss", runs)
    out = write_html(run, tmp_path / "xss.html")
    run.close()
    driver.get(out.as_uri() + "#c0001")
    assert driver.execute_script(INJECTED) == {"xss": None, "injected": False, "handlers": [], "images": 0,
                                               "scripts": []}
    assert driver.find_element("css selector", "section#c0001 .rationale").text == f"try this {PAYLOAD}"
    assert not driver.find_element("id", "run").is_displayed()  # only the candidate whose anchor is open shows
    driver.get(out.as_uri())
    assert driver.find_element("id", "run").is_displayed()
    assert len(nodes(driver, "#tree g.node")) == 2


@pytest.mark.parametrize("path", ["/run/../../etc/passwd", "/static/..%2f..%2f..%2fetc%2fpasswd",
                                  "/run/%2e%2e/%2e%2e/etc/passwd"])
def test_a_path_outside_the_runs_is_refused(driver, base, path):
    driver.get(base + path)
    text = driver.find_element("tag name", "body").text
    assert "root:" not in text and ("refused" in text or "not found" in text)


def test_live_evolve_shows_each_new_candidate_within_5_s_without_reload(driver, tmp_path):
    runs, config = tmp_path / "runs", tmp_path / "fast.yaml"
    config.write_text(FAST_EVAL)
    env = {**os.environ, "PYTHONPATH": str(Path(avo.__file__).resolve().parents[1])}
    evolve = subprocess.Popen([sys.executable, "-m", "avo", "evolve", "--config", str(config), "--kernel", "gemm",
                               "--device", "interpret", "--gpu", "h200", "--max-candidates", "3", "--agent",
                               "heuristic", "--runs-dir", str(runs), "--quiet"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        refs = _wait_for(lambda: next(runs.glob("*/lineage/refs/avo/c0000"), None), 90, evolve).parent
        run_id = refs.parents[2].name
        with serving(Site(runs)) as address:
            driver.get(f"{address}/run/{run_id}/")
            driver.execute_script("window.__sameDocument = 'yes'")
            on_load = set(nodes(driver, "#tree g.node"))
            assert text_of(driver, "run-status").startswith("running")
            seen: dict[str, float] = {}
            ended = None
            while True:
                for cid in set(nodes(driver, "#tree g.node")) - on_load - set(seen):
                    seen[cid] = time.time()
                if evolve.poll() is not None:
                    ended = ended or time.time()
                    if len(seen) >= len(list(refs.iterdir())) - len(on_load) or time.time() - ended > 6:
                        break
                elif time.time() - refs.stat().st_mtime > 60:
                    pytest.fail("the evolve made no candidate for a minute")
                time.sleep(0.05)
            assert evolve.returncode == 0, evolve.stderr.read().decode()[-2000:]
            assert driver.execute_script("return window.__sameDocument") == "yes"  # no reload happened
            shown_after = {f"node-{p.name}": seen.get(f"node-{p.name}") for p in refs.iterdir()}
            new = {cid: at for cid, at in shown_after.items() if cid not in on_load}
            assert new, "no candidate was committed after the page opened"
            for cid, at in new.items():
                assert at is not None, f"{cid} never appeared"
                committed = (refs / cid.removeprefix("node-")).stat().st_mtime
                print(f"{cid} shown {at - committed:.2f} s after its commit")
                assert at - committed < 5.0, f"{cid} appeared {at - committed:.1f} s after its commit"
            _wait_for(lambda: text_of(driver, "run-status").startswith("finished"), 10)
    finally:
        if evolve.poll() is None:
            evolve.terminate()
            evolve.wait(30)


def _wait_for(check, seconds: float, process=None):
    deadline = time.time() + seconds
    while time.time() < deadline:
        found = check()
        if found:
            return found
        if process is not None and process.poll() is not None:
            pytest.fail(f"evolve exited {process.returncode}: {process.stderr.read().decode()[-2000:]}")
        time.sleep(0.05)
    pytest.fail(f"gave up after {seconds} s")
