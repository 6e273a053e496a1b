"""The lineage: every candidate of a run as a commit in a bare git repository (`runs/<id>/lineage`).

One commit per candidate, whatever its status: the candidate's files plus `avo.json` (id, parent, model, rationale,
evaluation summary). The commit's parent is the parent candidate's commit, its author the model, its message a summary
line and `Avo-*` trailers. Refs: `refs/avo/<cid>` for every candidate, `refs/accepted/<cid>` once accepted, branch
`main` (the incumbent line), tags `baseline` and `best`. Git holds the truth; nothing here is duplicated in JSON.

Crash safety: objects are written first (objects.py: each one atomically, by rename), the candidate's ref
last, so a process killed at any point leaves either the whole candidate or only unreferenced objects that `git fsck`
does not mind. Ref updates that belong together (accept: marker, best, main) go through one
`git update-ref --stdin` transaction.
One writer per lineage (the run lock guarantees it); any number of readers.

Git executes nothing a candidate could plant here: every git command goes through gitcmd.py (avo's own config,
fixed settings, no drivers, a scrubbed environment). Candidate files go in and out as regular files only: a link
or special file in a candidate folder is refused (avo.util.safe_files.UnsafeFile), never followed or opened.
"""

from __future__ import annotations

import json
import re
import shutil
import stat as stat_module
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import git
from gitdb import LooseObjectDB

from avo.errors import UserError
from avo.evaluate.result import EvalResult
from avo.run.lineage.records import (  # noqa: F401  (content_hash, cid_for, cid_number: part of this module's interface)
    CID_PATTERN, RECORD_FILE, cid_for, cid_number, content_hash,
    left_out, message_for, model_name, parse_message, record_bytes, record_for, tidy_rationale,
)
from avo.run.lineage.gitcmd import init_repo, open_repo, run_git
from avo.run.lineage.objects import write_commit, write_tree
from avo.util import safe_files

_REV_PATTERN = re.compile(r"(best|baseline|main|c\d{4,})([~^].*)?")
_PACK_REFS_EVERY = 500  # loose refs are packed now and then so listing 10,000 candidates stays one file read
_CONTENTS_FORMAT = "%(refname)%00%(objectname)%00%(authorname)%00%(authordate:iso-strict)%00%(contents)%00"


@dataclass
class CandidateInfo:
    cid: str
    parent: str | None
    status: str
    fitness: float
    accepted: bool
    summary: str
    model: str
    rationale: str
    created: str
    sha: str


class Lineage:
    """A run's candidates in git. `on_change(event)` is told of every commit, accept, rollback and baseline."""

    def __init__(self, path: Path, on_change: Callable[[dict], None] | None = None):
        self.path = Path(path)
        self.on_change = on_change
        try:
            self.repo = open_repo(self.path)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise UserError(f"{self.path} is not a lineage (no bare git repository there)") from None
        # written in-process, each object to a temporary file renamed into place; GitPython's default store pipes
        # into `git hash-object --literally`, which turns a killed writer's truncated input into a malformed object
        self._objects = LooseObjectDB(str(self.path / "objects"))
        self._recovered = False
        self._contents: dict[str, str] | None = None  # content hash -> cid, built from one scan
        self._contents_count = 0

    @classmethod
    def init(cls, path: Path, on_change: Callable[[dict], None] | None = None) -> Lineage:
        path = Path(path)
        init_repo(path)
        (path / "description").write_text("avo lineage: one commit per candidate; see refs/avo/*\n")
        return cls(path, on_change)

    @classmethod
    def open(cls, path: Path, on_change: Callable[[dict], None] | None = None) -> Lineage:
        return cls(Path(path), on_change)

    def close(self) -> None:
        self.repo.close()

    # -- writing ----------------------------------------------------------------------------------------------------

    def commit(self, src_dir: Path, *, parent: str | None, result: EvalResult, model: str, rationale: str) -> str:
        """Store the files of `src_dir` as a new candidate; returns its id ("c0007")."""
        self._recover()
        src_dir = Path(src_dir)
        if not src_dir.is_dir():
            raise UserError(f"candidate folder not found: {src_dir}")
        parent = self.resolve(parent) if parent else None
        parents = [self._sha_of_cid(parent)] if parent else []
        refs = self._refs()
        cid = cid_for(max((cid_number(c) for c in refs["avo"]), default=-1) + 1)
        content = content_hash(src_dir)
        created = datetime.now(timezone.utc).isoformat(timespec="seconds")
        rationale, model = tidy_rationale(rationale), model_name(model)
        record = record_for(cid, parent, result, model, rationale, created, content)
        tree = write_tree(self._objects, src_dir, record_bytes(record))
        commit = write_commit(self._objects, tree, message_for(cid, parent, result, rationale, content), parents,
                              model)
        # the ref is the commit point: before it, only unreferenced objects exist
        self._update_refs([f"create refs/avo/{cid} {commit}"], f"candidate {cid}")
        if self._contents is not None:
            self._contents.setdefault(content, cid)
            self._contents_count += 1
        if (len(refs["avo"]) + 1) % _PACK_REFS_EVERY == 0:
            run_git(self.path, "pack-refs", "--all")
        self._notify(kind="commit", cid=cid, parent=parent, status=result.status, fitness=result.fitness,
                     sha=commit)
        return cid

    def accept(self, cid: str) -> None:
        """`main` and `best` move to `cid`, which is marked accepted. Only correct candidates can be accepted."""
        self._recover()
        info = self.info(cid)
        if info.status != "correct":
            raise UserError(f"{cid} is {info.status}: only a correct candidate can be accepted")
        previous_best = self._ref_sha("refs/tags/best")
        self._update_refs([f"update refs/accepted/{cid} {info.sha}", f"update refs/tags/best {info.sha}",
                           f"update refs/heads/main {info.sha}"], f"accept {cid}")
        self._notify(kind="accept", cid=cid, fitness=info.fitness, sha=info.sha, previous_best_sha=previous_best,
                     was_accepted=info.accepted)

    def tag_baseline(self, cid: str) -> None:
        """Tag the starting point; `main` starts there too if it does not exist yet."""
        self._recover()
        sha = self._sha_of_cid(cid)
        updates = [f"update refs/tags/baseline {sha}"]
        if self._ref_sha("refs/heads/main") is None:
            updates.append(f"create refs/heads/main {sha}")
        self._update_refs(updates, f"baseline {cid}")
        self._notify(kind="baseline", cid=cid, sha=sha)

    def rollback(self, cid: str) -> None:
        """`main` goes back to `cid`. Every candidate keeps its ref, so nothing becomes unreachable."""
        self._recover()
        cid = self.resolve(cid)
        sha = self._sha_of_cid(cid)
        self._update_refs([f"update refs/heads/main {sha}"], f"rollback to {cid}")
        self._notify(kind="rollback", cid=cid, sha=sha)

    # -- reading ----------------------------------------------------------------------------------------------------

    @property
    def best(self) -> str | None:
        return self._cid_at("refs/tags/best")

    @property
    def baseline(self) -> str | None:
        return self._cid_at("refs/tags/baseline")

    @property
    def main(self) -> str | None:
        return self._cid_at("refs/heads/main")

    def __len__(self) -> int:
        return len(self._refs()["avo"])

    def cids(self) -> list[str]:
        return sorted(self._refs()["avo"], key=cid_number)

    def resolve(self, rev: str) -> str:
        """`best`, `baseline`, `main`, a cid, any of them with `^`/`~N`, or any git revision -> cid."""
        rev = rev.strip()
        if not rev or rev.startswith("-"):
            raise UserError(f"'{rev}' is not a candidate or revision")
        named = _REV_PATTERN.fullmatch(rev)
        if named:
            name, suffix = named.group(1), named.group(2) or ""
            ref = {"best": "refs/tags/best", "baseline": "refs/tags/baseline", "main": "refs/heads/main"}.get(
                name, f"refs/avo/{name}")
            missing = {"best": "no best candidate yet (nothing accepted)", "baseline": "no baseline tagged yet",
                       "main": "no main branch yet"}.get(name, f"unknown candidate '{name}' (see: avo show RUN)")
            if self._ref_sha(ref) is not None:
                if not suffix:
                    return self._cid_at(ref)
                rev, missing = ref + suffix, None
            elif name in ("best", "baseline", "main"):
                raise UserError(missing)
        else:
            missing = None
        try:  # a cid-like name with no candidate may still be an abbreviated commit id
            sha = run_git(self.path, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").strip()
        except subprocess.CalledProcessError:
            raise UserError(missing or f"'{rev}' names no candidate (no parent there, or not a revision)") from None
        return self._cid_of_sha(sha, rev)

    def info(self, cid: str) -> CandidateInfo:
        cid = self._checked_cid(cid)
        return self._scan([f"refs/avo/{cid}"])[0]

    def log(self, limit: int | None = None) -> list[CandidateInfo]:
        """Candidates, newest first."""
        if limit is None:
            return self._scan(["refs/avo/"])
        newest = self.cids()[::-1][:max(limit, 0)]
        return self._scan([f"refs/avo/{c}" for c in newest]) if newest else []

    def record(self, cid: str) -> dict:
        """The avo.json committed with a candidate."""
        tree = self.repo.commit(self._sha_of_cid(cid)).tree
        return json.loads(tree[RECORD_FILE].data_stream.read())

    def files(self, cid: str) -> list[tuple[str, int]]:
        """(path, size in bytes) of a candidate's files."""
        tree = self.repo.commit(self._sha_of_cid(cid)).tree
        return [(b.path, b.size) for b in tree.traverse() if b.type == "blob" and b.path != RECORD_FILE]

    def find_duplicate(self, src_dir: Path) -> str | None:
        """The first candidate whose files are identical to those of `src_dir`, if any."""
        count = len(self)
        if self._contents is None or self._contents_count != count:  # another writer added candidates
            self._contents = {}
            out = run_git(self.path, "for-each-ref", "--format=%(refname:lstrip=2) %(trailers:key=Avo-Content,"
                           "valueonly,separator=)", "refs/avo/")
            for line in sorted(out.splitlines(), key=lambda line: cid_number(line.split()[0])):
                cid, _, content = line.partition(" ")
                self._contents.setdefault(content.strip(), cid)
            self._contents_count = count
        return self._contents.get(content_hash(Path(src_dir)))

    def diff(self, a: str, b: str, *, stat: bool = False) -> str:
        """Unified diff of two candidates' files (avo.json left out), a -> b."""
        sha_a, sha_b = self._sha_of_cid(self.resolve(a)), self._sha_of_cid(self.resolve(b))
        args = ["diff", "--no-color", "--no-ext-diff", *(["--stat"] if stat else []), sha_a, sha_b,
                "--", ".", f":(exclude){RECORD_FILE}"]
        return run_git(self.path, *args)

    def checkout(self, cid: str, dest: Path) -> None:
        """Make `dest` hold exactly the candidate's files."""
        cid = self.resolve(cid)
        files = self._files_to_check_out(cid)
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        for child in dest.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()  # a link's name only, never its target
        for path, blob in files:
            safe_files.write_bytes(dest, path, blob.data_stream.read(), executable=bool(blob.mode & 0o111), new=True)

    def stats(self) -> dict:
        """Counts for summaries, from one scan: candidates, ok, failed, accepted, best and its fitness."""
        infos = self._scan(["refs/avo/"])
        best = self.best
        best_info = next((i for i in infos if i.cid == best), None)
        return {
            "candidates": len(infos), "ok": sum(i.status == "correct" for i in infos),
            "failed": sum(i.status != "correct" for i in infos), "accepted": sum(i.accepted for i in infos),
            "best": best, "best_fitness": best_info.fitness if best_info else None,
            "best_sha": best_info.sha if best_info else None,
            "last_cid": infos[0].cid if infos else None,
        }

    def ref_sha(self, ref: str) -> str | None:
        """Where a ref points, read without running git (for cheap freshness checks)."""
        return self._ref_sha(ref)

    # -- internals --------------------------------------------------------------------------------------------------

    def _files_to_check_out(self, cid: str) -> list:
        """(path, blob) of a candidate's files; UserError, before anything is written, for an entry avo would never
        have committed (a symlink, a submodule, a hidden or cache name: only an imported lineage can hold one)."""
        files = []
        for item in self.repo.commit(self._sha_of_cid(cid)).tree.traverse():
            if item.type == "tree" or item.path == RECORD_FILE:
                continue
            parts = item.path.split("/")
            regular = item.type == "blob" and stat_module.S_ISREG(item.mode)
            hidden = any(part in ("", ".", "..") or left_out("/".join(parts[:i + 1]), i < len(parts) - 1)
                         for i, part in enumerate(parts))
            if not regular or hidden:
                what = "not a regular file" if not regular else "a name avo leaves out of candidates"
                raise UserError(f"{cid}: '{item.path}' in the lineage is {what}; refusing to check it out")
            files.append((item.path, item))
        return files

    def _notify(self, **event) -> None:
        if self.on_change is not None:
            self.on_change(event)

    def _recover(self) -> None:
        """A writer killed mid-update leaves `*.lock` files that would block every later update of those refs."""
        if self._recovered:
            return
        stale = [*self.path.joinpath("refs").rglob("*.lock"), self.path / "packed-refs.lock", self.path / "HEAD.lock"]
        for lock in stale:
            lock.unlink(missing_ok=True)
        self._recovered = True

    def _update_refs(self, updates: list[str], message: str) -> None:
        # explicit transaction: if the input stops short (writer killed), git aborts rather than applying a part
        script = "start\n" + "".join(f"{u}\n" for u in updates) + "commit\n"
        try:
            run_git(self.path, "update-ref", "-m", message, "--stdin", stdin=script)
        except subprocess.CalledProcessError as exc:
            detail = (exc.stderr or "").strip().splitlines()
            raise UserError(f"lineage {self.path}: could not {message}: {detail[-1] if detail else exc} "
                            "(is another process writing to this run?)") from None

    def _refs(self) -> dict[str, dict[str, str]]:
        """All candidate-related refs in one call: {"avo": {cid: sha}, "accepted": {cid: sha}}."""
        out = run_git(self.path, "for-each-ref", "--format=%(objectname) %(refname)", "refs/avo/", "refs/accepted/")
        refs: dict[str, dict[str, str]] = {"avo": {}, "accepted": {}}
        for line in out.splitlines():
            sha, name = line.split(" ", 1)
            _, space, cid = name.split("/", 2)
            refs[space][cid] = sha
        return refs

    def _scan(self, patterns: Iterable[str]) -> list[CandidateInfo]:
        """CandidateInfo for the candidate refs matching `patterns`, from one `git for-each-ref`, newest first."""
        out = run_git(self.path, "for-each-ref", f"--format={_CONTENTS_FORMAT}", *patterns)
        accepted = self._refs()["accepted"]
        fields = out.split("\0")
        infos = []
        for i in range(0, len(fields) - 5, 5):
            ref, sha, author, date, message = fields[i:i + 5]
            cid = ref.strip().rsplit("/", 1)[-1]
            summary, rationale, trailers = parse_message(message)
            parent = trailers.get("Avo-Parent", "none")
            infos.append(CandidateInfo(
                cid=cid, parent=None if parent == "none" else parent, status=trailers.get("Avo-Status", "unknown"),
                fitness=float(trailers.get("Avo-Fitness", "0") or 0), accepted=accepted.get(cid) == sha,
                summary=summary, model=author, rationale=rationale, created=date, sha=sha))
        return sorted(infos, key=lambda c: cid_number(c.cid), reverse=True)

    def _checked_cid(self, cid: str) -> str:
        return cid if CID_PATTERN.fullmatch(cid) and self._ref_sha(f"refs/avo/{cid}") else self.resolve(cid)

    def _sha_of_cid(self, cid: str) -> str:
        sha = self._ref_sha(f"refs/avo/{cid}") if CID_PATTERN.fullmatch(cid or "") else None
        if sha is None:
            raise UserError(f"unknown candidate '{cid}' (see: avo show RUN)")
        return sha

    def _ref_sha(self, ref: str) -> str | None:
        try:
            return git.Reference(self.repo, ref, check_path=False).commit.hexsha
        except (ValueError, OSError):
            return None

    def _cid_at(self, ref: str) -> str | None:
        sha = self._ref_sha(ref)
        return None if sha is None else self._cid_of_sha(sha, ref)

    def _cid_of_sha(self, sha: str, rev: str) -> str:
        _, _, trailers = parse_message(self.repo.commit(sha).message)
        cid = trailers.get("Avo-Candidate", "")
        if not CID_PATTERN.fullmatch(cid) or self._ref_sha(f"refs/avo/{cid}") != sha:
            raise UserError(f"'{rev}' is a commit ({sha[:10]}) but not a candidate of this lineage")
        return cid
