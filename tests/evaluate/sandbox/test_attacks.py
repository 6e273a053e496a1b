"""The attacks the OS sandbox exists for, each a candidate (attacks/*.py on top of an honest Triton GEMM) run through
the real evaluator under the interpreter, and the shell tool's escapes: the verdict each must get, and that nothing
escaped (no process left, no file outside, no key, no forged result). Without the sandbox the same candidates do
escape (`test_without_the_sandbox_the_attacks_get_through`), so these tests can tell."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from test_policy import own_checkout

from avo.evaluate.result import EvalResult
import needs

ATTACKS = Path(__file__).parent / "attacks"
HONEST = Path(__file__).parents[1] / "kernels" / "good_gemm" / "kernel.py"
CANARY = "sk-canary-" + "7" * 24
pytestmark = needs.bwrap
EVALUATE = """
import json, sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from avo.config import EvalConfig
from avo.evaluate.harness import Evaluator
from avo.gpus import PROFILES
folders, runs, sandbox = json.loads(sys.argv[1])
def one(folder):
    config = EvalConfig(check_suite="tiny", bench_suite="", seed=11, sandbox=sandbox)
    ev = Evaluator("gemm", device="interpret", gpu=PROFILES["h200"], config=config, hide=(Path(runs),))
    return ev.evaluate(Path(folder)).model_dump(mode="json")
with ThreadPoolExecutor(2) as pool:
    print(json.dumps(list(pool.map(one, folders))))
"""
SHELL = """
import json, sys
from pathlib import Path
from avo.agent.tools.base import ToolContext
from avo.agent.tools.shell import ShellArgs, shell
from avo.config import RunConfig
workspace, sandbox, command = json.loads(sys.argv[1])
config = RunConfig(agent={"allow_shell": True}, evaluation={"sandbox": sandbox}, runs_dir=str(Path(workspace).parent))
ctx = ToolContext(workspace=Path(workspace), task_spec="gemm", device="interpret", gpu=None, config=config)
print(json.dumps(shell(ctx, ShellArgs(command=command, timeout_s=30))))
"""
"""avo's side, in a process of its own started as avo is: the key in its environment from the start (where
/proc/PID/environ shows it), the home folder a fake one."""


def as_avo(script: str, argument, home: Path, cwd: Path | None = None):
    """`script` run as a user's script in a project folder of the (fake) home folder, whose `.env` holds the key too:
    as `python -m avo` run there would, it puts that folder first on avo's import path. `cwd`: started in that
    folder instead."""
    project = home / "project"
    project.mkdir(parents=True, exist_ok=True)
    (project / ".env").write_text(f"OPENAI_API_KEY={CANARY}\n")
    entry = project / f"avo_{uuid.uuid4().hex}.py"
    entry.write_text(script)
    env = {**os.environ, "OPENAI_API_KEY": CANARY, "HOME": str(home)}
    done = subprocess.run([sys.executable, str(entry), json.dumps(argument)], env=env, cwd=cwd or project,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def candidate(root: Path, attack: str, **fills) -> Path:
    """An honest GEMM with the attack appended; a `_watched` attack sees every output tensor."""
    source = (ATTACKS / f"{attack}.py").read_text()
    for name, value in fills.items():
        source = source.replace(f"@{name}@", str(value))
    kernel = HONEST.read_text()
    if "def _watched" in source:
        kernel = kernel.replace("    return c\n", "    return _watched(c)\n")
    folder = root / attack
    folder.mkdir(parents=True)
    (folder / "kernel.py").write_text(kernel + "\n\n" + source)
    return folder


def tagged(tag: str) -> list[int]:
    """PIDs of this machine's processes whose command line holds `tag`."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and tag.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                found.append(int(entry))
        except OSError:
            pass
    return found


def gone(tag: str, within_s: float = 10.0) -> bool:
    """Whether every process holding `tag` ends within the bound (polled, not slept)."""
    import time

    deadline = time.monotonic() + within_s
    while tagged(tag):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


class Setting:
    """One run's worth of places an attack aims at: a fake home, a runs folder with a lineage and notes."""

    def __init__(self, root: Path):
        self.tag = uuid.uuid4().hex
        self.home, self.runs = root / "home", root / "runs"
        self.lineage, self.notes = self.runs / "r1" / "lineage", self.runs / "r1" / "notes.md"
        self.lineage.mkdir(parents=True)
        (self.home / ".cache").mkdir(parents=True)
        self.notes.write_text("the agent's notes\n")
        self.tmp_file = Path("/tmp") / f"avo-attack-{self.tag}"
        self.marker = root / f"marker-{self.tag}"
        self.folders = {
            "outlives": candidate(root / "cands", "outlives", MARKER=self.marker),
            "reads_key": candidate(root / "cands", "reads_key"),
            "forges": candidate(root / "cands", "forges"),
            "reads_reference": candidate(root / "cands", "reads_reference"),
            "reads_project": candidate(root / "cands", "reads_project", PROJECT=self.home / "project"),
            "writes_outside": candidate(root / "cands", "writes_outside", TMP_FILE=self.tmp_file, HOME=self.home,
                                        LINEAGE=self.lineage, NOTES=self.notes, TAG=self.tag),
        }

    def outside_writes(self) -> list[Path]:
        places = [self.tmp_file, self.home / ".cache" / self.tag, self.lineage / self.tag]
        return [p for p in places if p.exists()] + ([self.notes] if self.notes.read_text() != "the agent's "
                                                    "notes\n" else [])

    def evaluate_all(self, sandbox: str) -> dict[str, EvalResult]:
        folders = [str(f) for f in self.folders.values()]
        results = as_avo(EVALUATE, [folders, str(self.runs), sandbox], self.home)
        return {name: EvalResult.model_validate(r) for name, r in zip(self.folders, results)}


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    """Every attack once, sandboxed, with the canary in avo's environment and a fake home."""
    setting = Setting(tmp_path_factory.mktemp("sandboxed"))
    yield setting, setting.evaluate_all("on")
    for pid in tagged(setting.tag):  # only if a test below failed
        os.kill(pid, 9)
    setting.tmp_file.unlink(missing_ok=True)


def test_a_process_the_candidate_starts_ends_with_its_evaluation(attacked):
    setting, results = attacked
    r = results["outlives"]
    assert r.status == "correct", r.message  # the kernel itself is honest; what it left behind is what counts
    assert gone(setting.tag), f"still running: {tagged(setting.tag)}"
    assert not setting.marker.exists()  # outside its box: it could not even write there


def test_the_key_in_avos_environment_is_out_of_the_candidates_sight(attacked):
    setting, results = attacked
    r = results["reads_key"]
    assert (r.status, r.rule) == ("compile_error", "compile") and "LOOT" in r.message, r.message
    assert "LOOT from 0 " not in r.message  # it did read environments: the sandbox's own, scrubbed
    assert CANARY not in r.message
    assert CANARY not in "".join(p.read_text(errors="replace") for p in setting.folders["reads_key"].rglob("*")
                                 if p.is_file())


def test_the_folder_avo_was_started_from_is_out_of_the_candidates_sight(attacked):
    """avo's side runs from a project folder whose `.env` holds the key (as_avo): sandboxed, the candidate that reads
    it finds no such file (unconfined it reads the key: test_without_the_sandbox_the_attacks_get_through)."""
    _, results = attacked
    r = results["reads_project"]
    assert (r.status, r.rule) == ("compile_error", "compile"), r.message
    assert "LOOT nothing (FileNotFoundError)" in r.message and CANARY not in r.message, r.message


def test_a_forged_verdict_is_refused(attacked):
    _, results = attacked
    r = results["forges"]
    assert (r.status, r.rule) == ("rejected", "runtime.file_access") and "forged" in r.message, r.message
    assert r.fitness == 0.0


def test_the_reference_is_nowhere_in_the_candidates_process(attacked):
    """It returns any float32 tensor of the output's shape it can find in a frame or the heap: the check suite's
    references are computed by a process of their own and compared by avo, so there is none to find, and its
    zeros fail the first check case."""
    _, results = attacked
    r = results["reads_reference"]
    assert (r.status, r.rule) == ("incorrect", "check.mismatch"), r.message
    assert r.cases and r.cases[0].correct is False and "relative error 1 " in r.cases[0].message, r.cases[0]


def test_nothing_is_written_outside_the_candidates_box(attacked):
    setting, results = attacked
    r = results["writes_outside"]
    assert r.status == "correct", r.message  # the kernel is honest; where its shell wrote is what counts
    assert setting.outside_writes() == []


def test_without_the_sandbox_the_attacks_get_through(tmp_path):
    """The evidence that the tests above can fail: unconfined, the same candidates escape."""
    setting = Setting(tmp_path)
    try:
        results = setting.evaluate_all("off")
        assert not gone(setting.tag, within_s=1.0) and setting.marker.exists()
        assert CANARY in results["reads_key"].message
        assert f"LOOT OPENAI_API_KEY={CANARY}" in results["reads_project"].message
        assert setting.outside_writes() != []
        assert results["forges"].status == "rejected"  # the result channel refuses it sandboxed or not
        assert results["reads_reference"].status == "incorrect"  # judged by avo, sandboxed or not
    finally:
        for pid in tagged(setting.tag):
            os.kill(pid, 9)
        setting.tmp_file.unlink(missing_ok=True)


def test_avo_run_from_its_own_checkout_keeps_what_lies_beside_its_package_from_the_candidate(tmp_path, monkeypatch):
    """A developer runs avo from its checkout, whose root may hold a `.env`: the candidate that reads the checkout's
    pyproject.toml finds no such file sandboxed, and reads it unconfined (so the test can tell)."""
    checkout = own_checkout(monkeypatch)
    folder = candidate(tmp_path / "cands", "reads_checkout", CHECKOUT=checkout)
    for sandbox, loot in (("on", "LOOT nothing (FileNotFoundError)"), ("off", "LOOT [build-system]")):
        [raw] = as_avo(EVALUATE, [[str(folder)], str(tmp_path / "runs"), sandbox], tmp_path / "home", cwd=checkout)
        r = EvalResult.model_validate(raw)
        assert (r.status, r.rule) == ("compile_error", "compile") and loot in r.message, (sandbox, r.message)


@pytest.mark.parametrize("sandbox", ["on", "off"])
def test_the_shell_tool_leaves_nothing_running_and_sees_no_key(tmp_path, sandbox):
    tag = uuid.uuid4().hex
    workspace = tmp_path / "runs" / "workspace"
    workspace.mkdir(parents=True)
    command = (f"setsid sh -c 'while :; do sleep 0.05; done; : {tag}' >/dev/null 2>&1 & "
               "cat /proc/$PPID/environ; echo; cat /proc/1/environ")
    text, data = as_avo(SHELL, [str(workspace), sandbox, command], tmp_path)
    try:
        if sandbox == "on":
            assert data["returncode"] == 0, text
            assert CANARY not in text
            assert gone(tag), f"still running: {tagged(tag)}"
        else:  # unconfined, both get through: what the sandbox is for
            assert CANARY in text and not gone(tag, within_s=1.0)
    finally:
        for pid in tagged(tag):
            os.kill(pid, 9)
