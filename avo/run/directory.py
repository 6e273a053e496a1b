"""A run directory, `runs/<id>/`: everything a run needs to be resumed, replayed, reported or shared.

    run.json          config, versions, GPU, agent, seed, state, times, candidate counters (rewritten atomically)
    transcript.jsonl  append-only event log, one JSON object per line with "ts", flushed and fsynced per event
    lineage/          bare git repository of every candidate (avo/run/lineage/)
    evals/<cid>.json  full EvalResult per candidate (held-eval.json holds one between its scoring and its commit)
    profiles/ report/ workspace/ notes.md   profiler output, reports, the agent's working copy, the agent's memory
    lock              holder PID, host, start time; the lock itself is an flock, released by the kernel on any exit

Counters in run.json let `avo runs` summarize a 10,000-candidate run without reading its history; they are checked
against the lineage's refs on every read and rebuilt from git when stale or absent.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from pydantic import ValidationError

from avo.config import RunConfig, stored_run_config
from avo.errors import UserError
from avo.evaluate.result import EvalResult
from avo.util.atomic import write_text_atomic
from avo.run.lineage.repo import Lineage, cid_for, cid_number
from avo.run.lock import RunLock
from avo.run.transcript import Transcript

STATES = ("created", "running", "stopped", "finished", "failed")
_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_EMPTY_COUNTERS = {"candidates": 0, "ok": 0, "failed": 0, "accepted": 0, "best": None, "best_fitness": None,
                   "best_sha": None, "last_cid": None}


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def write_json_atomic(path: Path, data: dict) -> None:
    """Readers see the old file or the new one, never a torn one."""
    write_text_atomic(path, json.dumps(data, indent=1, default=_jsonable) + "\n")


def _jsonable(value):
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def _versions() -> dict[str, str]:
    found = {"python": sys.version.split()[0]}
    for package in ("avo", "torch", "triton", "GitPython"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            pass
    return found


def check_run_id(run_id: str) -> str:
    if not isinstance(run_id, str) or not _ID_PATTERN.fullmatch(run_id):
        raise UserError(f"bad run id '{run_id}': use letters, digits, '.', '_' and '-'")
    return run_id


def runs_folder(runs_dir: Path) -> Path:
    """`runs_dir` as given, refused in one line when it names something other than a folder."""
    runs_dir = Path(runs_dir)
    if runs_dir.exists() and not runs_dir.is_dir():
        raise UserError(f"--runs-dir {runs_dir} is a file, not a folder: name a folder (it is created if missing)")
    return runs_dir


def lay_out(folder: Path) -> None:
    """The run directory's folders and log files, where they are missing (a new run, an imported one)."""
    for sub in ("evals", "profiles", "report", "workspace"):
        (folder / sub).mkdir(exist_ok=True)
    for name in ("transcript.jsonl", "notes.md"):
        (folder / name).touch()


class Run:
    """One run directory. Writers hold `run.lock()`; readers need nothing."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.id = self.path.name
        self._info = self._read_info()
        try:
            self.config, self.dropped_settings = stored_run_config(self._info.get("config", {}))
        except ValidationError as exc:
            raise UserError(f"run.json of run '{self.id}' is corrupt: bad config ({exc.errors()[0]['msg']})") from None
        self._lineage: Lineage | None = None
        self._lock = RunLock(self.path / "lock", self.id, clock=now,
                             on_takeover=lambda previous: self.append_event("lock_taken_over", previous=previous))
        self._transcript = Transcript(self.transcript_path, default=_jsonable)

    # -- creating and finding ----------------------------------------------------------------------------------------

    @classmethod
    def create(cls, config: RunConfig, *, runs_dir: Path, gpu: str, agent: str, run_id: str | None = None) -> Run:
        runs_dir = runs_folder(runs_dir)
        runs_dir.mkdir(parents=True, exist_ok=True)
        if run_id is None:
            stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
            task = re.sub(r"[^A-Za-z0-9]+", "-", Path(config.kernel).stem).strip("-") or "task"
            run_id = f"{stamp}-{task}"
            base, n = run_id, 1
            while (runs_dir / run_id).exists():
                n += 1
                run_id = f"{base}-{n}"
        else:
            check_run_id(run_id)
        final = runs_dir / run_id
        if final.exists():
            raise UserError(f"run '{run_id}' already exists in {runs_dir}")
        # built under a hidden name and renamed into place, so a crash never leaves half a run
        staging = runs_dir / f".creating-{run_id}-{os.getpid()}"
        staging.mkdir()
        lay_out(staging)
        Lineage.init(staging / "lineage").close()
        stamp = now()
        write_json_atomic(staging / "run.json", {
            "id": run_id, "task": config.kernel, "gpu": gpu, "agent": agent, "seed": config.seed,
            "device": config.device, "state": "created", "started": stamp, "updated": stamp,
            "host": socket.gethostname(), "versions": _versions(), "config": config.model_dump(mode="json"),
            "counters": dict(_EMPTY_COUNTERS),
        })
        os.rename(staging, final)
        return cls(final)

    @classmethod
    def open(cls, ref: str, runs_dir: Path) -> Run:
        """A run by id (in `runs_dir`), by path, or "latest" (most recently started)."""
        runs_dir = runs_folder(runs_dir)
        if ref == "latest":
            runs = list_runs(runs_dir)
            if not runs:
                raise UserError(f"no runs in {runs_dir} (start one with: avo evolve)")
            return runs[-1]
        for candidate in (runs_dir / ref, Path(ref)):
            if candidate.is_dir() and _ID_PATTERN.fullmatch(candidate.name):
                if not (candidate / "run.json").is_file():
                    raise UserError(f"{candidate} is not a run directory (no run.json)")
                return cls(candidate)
        raise UserError(f"unknown run '{ref}' (see: avo runs --runs-dir {runs_dir})")

    def _read_info(self) -> dict:
        try:
            info = json.loads((self.path / "run.json").read_text())
        except FileNotFoundError:
            raise UserError(f"{self.path} is not a run directory (no run.json)") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise UserError(f"run.json of run '{self.id}' is corrupt: {exc}") from None
        if not isinstance(info, dict) or not isinstance(info.get("config"), dict):
            raise UserError(f"run.json of run '{self.id}' is corrupt: no config mapping")
        return info

    # -- layout ------------------------------------------------------------------------------------------------------

    @property
    def workspace(self) -> Path:
        return self.path / "workspace"

    @property
    def notes_path(self) -> Path:
        return self.path / "notes.md"

    @property
    def profiles_dir(self) -> Path:
        return self.path / "profiles"

    @property
    def evals_dir(self) -> Path:
        return self.path / "evals"

    @property
    def report_dir(self) -> Path:
        return self.path / "report"

    @property
    def transcript_path(self) -> Path:
        return self.path / "transcript.jsonl"

    @property
    def lineage(self) -> Lineage:
        if self._lineage is None:
            self._lineage = Lineage.open(self.path / "lineage", on_change=self._count)
        return self._lineage

    def close(self) -> None:
        if self._lineage is not None:
            self._lineage.close()
            self._lineage = None

    # -- run.json ----------------------------------------------------------------------------------------------------

    def info(self) -> dict:
        self._info = self._read_info()
        return dict(self._info)

    def set_state(self, state: str, **extra) -> None:
        if state not in STATES:
            raise ValueError(f"unknown run state {state!r}; one of {STATES}")
        self._update(state=state, **extra)

    def _update(self, **fields) -> None:
        info = self._read_info()
        info.update(fields, updated=now())
        write_json_atomic(self.path / "run.json", info)
        self._info = info

    def _count(self, event: dict) -> None:
        """Keeps run.json's counters in step with each lineage change (one small atomic write)."""
        counters = {**_EMPTY_COUNTERS, **(self._read_info().get("counters") or {})}
        kind = event["kind"]
        if kind not in ("commit", "accept"):
            return
        # counting on from stale counters (a crash between a lineage change and this write) would drift: recount
        if (kind == "commit" and counters["candidates"] != cid_number(event["cid"])) or (
                kind == "accept" and counters["best_sha"] != event["previous_best_sha"]):
            self._update(counters=self.lineage.stats())
            return
        if kind == "commit":
            counters["candidates"] = cid_number(event["cid"]) + 1
            counters["ok" if event["status"] == "correct" else "failed"] += 1
            counters["last_cid"] = event["cid"]
        else:
            counters["accepted"] += 0 if event["was_accepted"] else 1
            counters.update(best=event["cid"], best_fitness=event["fitness"], best_sha=event["sha"])
        self._update(counters=counters)

    def counters(self) -> dict:
        """Candidate counts and the best fitness: from run.json when it agrees with the refs, else from git."""
        counters = self._read_info().get("counters")
        if isinstance(counters, dict) and self._counters_current(counters):
            return counters
        counters = self.lineage.stats()
        if self.lock_holder() is None:
            try:
                with self.lock():
                    self._update(counters=counters)
            except UserError:  # a writer started meanwhile; it keeps them up to date
                pass
        return counters

    def _counters_current(self, counters: dict) -> bool:
        try:
            lineage = self.lineage
            n = int(counters["candidates"])
            last_present = n == 0 or lineage.ref_sha(f"refs/avo/{cid_for(n - 1)}") is not None
            next_absent = lineage.ref_sha(f"refs/avo/{cid_for(n)}") is None
            return last_present and next_absent and lineage.ref_sha("refs/tags/best") == counters.get("best_sha")
        except (KeyError, TypeError, ValueError):
            return False

    # -- transcript --------------------------------------------------------------------------------------------------

    def append_event(self, kind: str, **data) -> None:
        """One JSON line per event, on disk before this returns."""
        self._transcript.append({"ts": now(), "kind": kind, **data})

    def events(self) -> list[dict]:
        """All events in order; a torn last line (the process died mid-write) is left out."""
        return self._transcript.events()

    # -- evaluations -------------------------------------------------------------------------------------------------

    def hold_eval(self, result: EvalResult) -> None:
        """Keep a result about to be committed, so a kill between the commit and `save_eval` loses nothing: the
        next `recover_held_eval` files it under the commit's cid."""
        write_json_atomic(self.path / "held-eval.json", result.model_dump(mode="json"))

    def save_eval(self, cid: str, result: EvalResult) -> None:
        self.evals_dir.mkdir(exist_ok=True)
        write_json_atomic(self.evals_dir / f"{cid}.json", result.model_dump(mode="json"))
        (self.path / "held-eval.json").unlink(missing_ok=True)

    def recover_held_eval(self) -> str | None:
        """On resume: a held result whose commit was made but not its evals file is saved under that commit's cid
        (returned); one whose commit never happened is dropped."""
        held = self.path / "held-eval.json"
        try:
            result = EvalResult.model_validate_json(held.read_text())
        except (FileNotFoundError, ValueError):
            held.unlink(missing_ok=True)
            return None
        cids = self.lineage.cids()
        last = cids[-1] if cids else None
        if last is not None and self.load_eval(last) is None and self.lineage.info(last).status == result.status:
            self.save_eval(last, result)
            return last
        held.unlink(missing_ok=True)
        return None

    def load_eval(self, cid: str) -> EvalResult | None:
        path = self.evals_dir / f"{cid}.json"
        try:
            return EvalResult.model_validate_json(path.read_text())
        except FileNotFoundError:
            return None
        except ValidationError as exc:
            raise UserError(f"{path} is corrupt: {exc.errors()[0]['msg']}") from None

    # -- lock --------------------------------------------------------------------------------------------------------

    def lock(self):
        """Exclusive right to drive this run (a context manager). A holder that died (even by SIGKILL) no longer
        holds it."""
        return self._lock.hold()

    def lock_holder(self) -> dict | None:
        """Who holds the lock now (a live process on this host), without touching the lock."""
        return self._lock.holder()

    # -- summaries ---------------------------------------------------------------------------------------------------

    def summary(self) -> dict:
        """One row of `avo runs`: cheap, whatever the size of the lineage."""
        info = self.info()
        state = info.get("state", "?")
        if state == "running" and self.lock_holder() is None:
            state = "interrupted"  # said running, but no live process holds it
        return {"id": self.id, "task": info.get("task", "?"), "gpu": info.get("gpu", "?"),
                "agent": info.get("agent", "?"), "device": info.get("device", self.config.device),
                "state": state, "started": info.get("started", ""), **self.counters()}


def list_runs(runs_dir: Path, unreadable: list[tuple[Path, str]] | None = None) -> list[Run]:
    """Every readable run in `runs_dir`, oldest first; unreadable ones are left out, and added to `unreadable` as
    (path, why) when a list is given."""
    runs = []
    if runs_folder(runs_dir).is_dir():
        for path in Path(runs_dir).iterdir():
            if path.is_dir() and _ID_PATTERN.fullmatch(path.name) and (path / "run.json").is_file():
                try:
                    runs.append(Run(path))
                except UserError as exc:
                    if unreadable is not None:
                        unreadable.append((path, str(exc)))
    return sorted(runs, key=lambda r: (r._info.get("started", ""), r.id))
