"""The web view without a browser: pages, routes, escaping, the report file, the live version token, the CLI."""

from __future__ import annotations

import http.client
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from lineage_fakes import result, write_candidate
from replay_runs import gpu_shaped_run
from web_runs import xss_run

import avo
from avo.cli import main
from avo.config import RunConfig
from avo.run.directory import Run
from avo.web.model import predicted_gain
from avo.web.report import write_html
from avo.web.server import Site, make_server


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    runs = tmp_path_factory.mktemp("web") / "runs"
    gpu_shaped_run(runs).close()
    xss_run(runs).close()
    return runs


@pytest.fixture(scope="module")
def site(runs):
    return Site(runs)


def page(site: Site, path: str) -> str:
    status, kind, body = site.respond(path)
    assert status == 200 and kind.startswith("text/html"), (path, status, body[:200])
    return body.decode()


def test_runs_page_lists_each_run_with_status_and_best(site):
    body = page(site, "/")
    rows = re.findall(r'<tr class="run-row" data-run="([^"]+)">(.*?)</tr>', body, re.S)
    assert [r[0] for r in rows] == ["gpu-shaped", "xss"]
    shaped = rows[0][1]
    assert ">finished<" in shaped and ">0.93<" in shaped and ">gemm<" in shaped and ">h200<" in shaped
    assert ">5<" in shaped  # candidates


def test_run_page_draws_every_candidate_in_both_charts_and_the_tree(site):
    body = page(site, "/run/gpu-shaped/")
    for chart in ("chart-time", "chart-index"):
        svg = re.search(rf'<svg class="chart" id="{chart}".*?</svg>', body, re.S).group(0)
        assert sorted(re.findall(r'data-cid="(c\d+)"', svg)) == [f"c000{i}" for i in range(5)]
    tree = re.search(r'<svg class="tree".*?</svg>', body, re.S).group(0)
    nodes = dict(re.findall(r'id="node-(c\d+)" data-status="(\w+)"', tree))
    assert nodes == {"c0000": "correct", "c0001": "rejected", "c0002": "correct", "c0003": "incorrect",
                     "c0004": "correct"}
    labels = {cid: re.findall(r'class="label (\w+)"', g) for cid, g in re.findall(r'id="node-(c\d+)"(.*?)</g>', tree,
                                                                                       re.S)}
    assert labels == {"c0000": ["baseline"], "c0001": [], "c0002": [], "c0003": [], "c0004": ["best"]}
    accepted = re.findall(r'id="node-(c\d+)" data-status="\w+" data-accepted="true"', tree)
    assert accepted == ["c0000", "c0002", "c0004"]
    edges = re.findall(r'<path d="M(\d+) ', tree)
    assert len(edges) == 4  # every candidate but the seed hangs from its parent
    assert "0:25:11 of 2 h, 4 candidates, $0.27" in body  # budget spent


def test_candidate_page_shows_diff_gain_turns_and_cases(site):
    body = page(site, "/run/gpu-shaped/c0002")
    rows = re.findall(r'<tr class="(add|del)"><td class="ln">(\d*)</td><td class="ln">(\d*)</td><td class="code">'
                      r'<span class="sign">[+-]</span>(.*?)</td></tr>', body)
    code = '<span class="n">BLOCK_M</span> <span class="o">=</span> <span class="mi">{}</span>'
    assert ("del", "1", "", code.format(64)) in rows and ("add", "", "1", code.format(128)) in rows  # lexed as Python
    assert "Diff against its parent c0000" in body
    assert re.search(r'id="measured">\+21\.4% \(1\.214x\) over c0000', body)
    assert "Bigger tiles: more reuse of each loaded tile." in body  # the turn that led to it
    assert "Try the library path." not in body  # a turn of an earlier candidate
    assert body.count("<tr><td>bench</td>") == 2
    failed = page(site, "/run/gpu-shaped/c0001")
    assert "Why it failed: rejected by static.library_call" in failed and "calls torch.matmul" in failed
    profiled = '<h2>Profile summary</h2>\n<pre class="report">tensor pipe 41% of peak</pre>'
    assert profiled in page(site, "/run/gpu-shaped/c0000")  # taken while the workspace held the seed
    assert "<h2>Profile summary" not in failed and "tensor pipe 41% of peak" in failed  # in c0001's turns only


def test_model_and_candidate_text_is_escaped_everywhere(site):
    for path in ("/", "/run/xss/", "/run/xss/c0001"):
        body = page(site, path)
        assert "&lt;/script&gt;&lt;script&gt;window.__xss = 1&lt;/script&gt;" in body, path
        assert "<img" not in body and "<b id=" not in body and "<script>" not in body, path
        assert body.count("<script") == 1 and '<script src="/static/live.js" defer></script>' in body


@pytest.mark.parametrize("target", ["/../../etc/passwd", "/static/../../../etc/passwd", "/run/..%2F..%2Fetc%2Fpasswd",
                                    "/run/xss/..%2f..%2f..%2fetc%2fpasswd", "/static/%2e%2e/%2e%2e/etc/passwd",
                                    "//etc/passwd", "/run/xss/../../../../etc/passwd", "/etc/passwd",
                                    "/static/..\\..\\etc\\passwd", "/run/xss/c0001/../../../../etc/passwd"])
def test_no_path_outside_the_runs_can_be_read(server, target):
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
    conn.request("GET", target)
    answer = conn.getresponse()
    body = answer.read()
    assert answer.status in (400, 404), (target, answer.status)
    assert b"root:" not in body


def test_only_the_named_runs_are_served_and_only_to_a_loopback_host(runs):
    site = Site(runs, ["gpu-shaped"])
    assert site.respond("/run/xss/")[0] == 404 and site.respond("/run/gpu-shaped/")[0] == 200
    server = make_server(site, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
        conn.request("GET", "/", headers={"Host": "attacker.example"})
        assert conn.getresponse().status == 421
        conn.request("GET", "/", headers={"Host": f"localhost:{server.server_address[1]}"})
        answer = conn.getresponse()
        assert answer.status == 200 and "script-src 'self'" in answer.getheader("Content-Security-Policy")
        answer.read()
        conn.request("POST", "/", body=b"x")
        assert conn.getresponse().status == 501  # read-only: no method but GET and HEAD
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def server(site):
    server = make_server(site, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def test_version_token_changes_with_each_new_candidate(tmp_path):
    runs = tmp_path / "runs"
    run = Run.create(RunConfig(kernel="gemm"), runs_dir=runs, gpu="h200", agent="heuristic", run_id="grow")
    site = Site(runs)
    before, runs_before = site.version("/run/grow/"), site.version("/")
    assert site.version("/run/grow/c0000") == before and site.version("/run/nope/") is None
    with run.lock():
        run.lineage.commit(write_candidate(tmp_path / "src", "X = 1\n"), parent=None, result=result(), model="m",
                           rationale="r")
    assert site.version("/run/grow/") != before and site.version("/") != runs_before
    run.close()


def test_report_file_holds_every_page_and_no_script_or_network(runs, tmp_path):
    run = Run.open("xss", runs)
    try:
        text = write_html(run, tmp_path / "out").read_text()
    finally:
        run.close()
    tags = re.findall(r"<[a-zA-Z][^>]*>", text)
    assert not [t for t in tags if re.match(r"<(script|link|img|iframe|object|embed)\b", t) or " src=" in t]
    assert "@import" not in text and "url(" not in text
    assert "default-src 'none'" in text
    assert '<section id="run"' in text and '<section id="c0000"' in text and '<section id="c0001"' in text
    assert "&lt;/script&gt;&lt;script&gt;" in text and "<img" not in text and "<b id=" not in text
    assert re.search(r'<a href="#c0001"><circle class="pt"', text)


def test_predicted_gain_is_read_from_the_rationale():
    assert predicted_gain("64x64 -> 128x64 tile: fewer reloads; expect +36%") == "+36%"
    assert predicted_gain("predicts 1.2x from the wider tile") == "1.2x"
    assert predicted_gain("expected gain ~ 5.5 %") == "+5.5%"
    assert predicted_gain("BLOCK_M 64 -> 128") is None


def test_cli_errors_are_one_line_and_exit_2(runs, tmp_path, capsys):
    assert main(["serve", "--runs-dir", str(runs), "--port", "70000"]) == 2
    assert main(["serve", "nope", "--runs-dir", str(runs)]) == 2
    assert main(["serve", "--runs-dir", str(tmp_path / "absent")]) == 2
    Run.create(RunConfig(kernel="gemm"), runs_dir=runs, gpu="h200", agent="heuristic", run_id="empty").close()
    assert main(["report", "--html", "empty", "--runs-dir", str(runs)]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 4 and all(line.startswith("avo: error: ") for line in errors), errors
    assert main(["report", "--html", "gpu-shaped", "--runs-dir", str(runs), "-o", str(tmp_path)]) == 0
    assert (tmp_path / "gpu-shaped.html").stat().st_size > 10_000


def test_serve_on_another_host_warns_and_serves(runs):
    env = {**os.environ, "PYTHONPATH": str(Path(avo.__file__).resolve().parents[1])}
    serve = subprocess.Popen([sys.executable, "-m", "avo", "serve", "--runs-dir", str(runs), "--host", "0.0.0.0",
                              "--port", "0"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = serve.stdout.readline()
        port = int(re.fullmatch(rf"serving the runs in {re.escape(str(runs))} at http://0\.0\.0\.0:(\d+)/ "
                                r"\(Ctrl-C to stop\)\n", line).group(1))
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/run/gpu-shaped/", headers={"Host": "gpu-box.example:8765"})
        assert conn.getresponse().status == 200  # not loopback: any host name is answered
    finally:
        serve.terminate()
        serve.wait(10)
    assert "warning: listening on 0.0.0.0: anyone who can reach this machine can read these runs" in \
        serve.stderr.read()


def test_candidate_page_says_which_worker_and_node_scored_it(tmp_path):
    runs = tmp_path / "runs"
    run = Run.create(RunConfig(kernel="gemm", device="cuda", gpu="h200"), runs_dir=runs, gpu="h200", agent="m",
                     run_id="pool")
    src = tmp_path / "src"
    with run.lock():
        write_candidate(src, "BLOCK_M = 64\n")
        scored = result(fitness=0.5, worker="gpu 3", node="node-b")
        run.lineage.commit(src, parent=None, result=scored, model="seed", rationale="baseline")
        run.save_eval("c0000", scored)
    run.close()
    assert "scored on gpu 3 on node-b" in page(Site(runs), "/run/pool/c0000")
