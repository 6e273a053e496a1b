"""A run as one file (`avo export` / `avo import`): a tar holding a git bundle of every lineage ref, run.json, the
transcript, notes, evaluations and profiles. Enough to replay, report or diff the run on another machine.

The run's files are exported as regular files only (avo.util.safe_files): a link or special file among them is
refused by name, never followed into the archive; an import takes regular-file members only and checks out nothing
the lineage could not have committed."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import zlib
from pathlib import Path

from avo.util import procs, safe_files
from avo.util.atomic import replacing
from avo.errors import UserError
from avo.run.lineage.repo import Lineage
from avo.run.lineage.gitcmd import run_git
from avo.run.directory import Run, check_run_id, lay_out, now, write_json_atomic

FORMAT = "avo-run-export"
_TOP_FILES = ("run.json", "transcript.jsonl", "notes.md")
_TREES = ("evals", "profiles")


def export_run(run: Run, out: Path) -> Path:
    """Write `run` to the tar file `out` (replaced atomically)."""
    out = Path(out)
    if out.is_dir():
        raise UserError(f"{out} is a directory; give a file name, e.g. {out / (run.id + '.tar')}")
    with procs.temp_dir("export") as tmp:
        bundle = Path(tmp, "lineage.bundle")
        if len(run.lineage):
            run_git(run.lineage.path, "bundle", "create", "--quiet", str(bundle), "--all")
        names = _run_files(run)
        members = ["lineage.bundle"] if bundle.exists() else []
        manifest = Path(tmp, "manifest.json")
        manifest.write_text(json.dumps({"format": FORMAT, "version": 1, "run_id": run.id, "exported": now(),
                                        "candidates": len(run.lineage), "members": members + names}))
        try:
            with replacing(out) as staging, tarfile.open(staging, "w") as tar:
                tar.add(manifest, "manifest.json")
                if members:
                    tar.add(bundle, "lineage.bundle")
                for name in names:
                    _add_file(tar, run.path, name)
        except safe_files.UnsafeFile as exc:
            raise UserError(f"refusing to export {run.id}: {exc}") from None
        except OSError as exc:
            raise UserError(f"cannot write {out}: {exc.strerror or exc}") from None
    return out


def _run_files(run: Run) -> list[str]:
    """The run's files an export holds, by path in the run folder; UserError naming one that is not regular."""
    names = [name for name in _TOP_FILES if os.path.lexists(run.path / name)]
    try:
        for name in names:
            if (what := safe_files.unsafe_kind(os.lstat(run.path / name))) is not None:
                raise safe_files.UnsafeFile(name, what)
        for tree in _TREES:
            folder = run.path / tree
            if folder.is_symlink():
                raise safe_files.UnsafeFile(tree, "a symlink")
            if folder.is_dir():
                files, refused = safe_files.scan(folder)
                if refused:
                    raise safe_files.UnsafeFile(f"{tree}/{refused[0].rel}", refused[0].what)
                names += [f"{tree}/{rel}" for rel, _ in files]
    except safe_files.UnsafeFile as exc:
        raise UserError(f"refusing to export {run.id}: {exc}") from None
    return names


def _add_file(tar: tarfile.TarFile, root: Path, rel: str) -> None:
    data, st = safe_files.read_file(root, rel)
    info = tarfile.TarInfo(rel)
    info.size, info.mtime, info.mode = len(data), int(st.st_mtime), 0o644
    tar.addfile(info, io.BytesIO(data))


def import_run(file: Path, runs_dir: Path) -> Run:
    """Recreate an exported run in `runs_dir`; its workspace holds the candidate `main` points at."""
    file, runs_dir = Path(file), Path(runs_dir)
    if not file.is_file():
        raise UserError(f"no such file: {file}")
    try:
        tar = tarfile.open(file, "r")
    except (tarfile.TarError, OSError):
        raise UserError(f"{file} is not an avo run export (not a tar file)") from None
    with tar:
        try:
            return _import(tar, file, runs_dir)
        except (tarfile.TarError, EOFError, zlib.error) as exc:  # cut short in transfer: the members end early
            raise UserError(f"{file} is truncated or damaged ({exc}): export the run again, or copy the whole "
                            "file") from None


def _import(tar: tarfile.TarFile, file: Path, runs_dir: Path) -> Run:
    manifest = _manifest(tar, file)
    missing = sorted(set(manifest.get("members", [])) - set(tar.getnames()))
    if missing:  # a tar cut at a member boundary reads as a shorter, valid one
        raise tarfile.ReadError(f"{len(missing)} of its files are missing, e.g. {missing[0]}")
    run_id = manifest["run_id"]
    if (runs_dir / run_id).exists():
        raise UserError(f"run '{run_id}' already exists in {runs_dir}; remove it or import into another "
                        "--runs-dir")
    runs_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".importing-{run_id}-", dir=runs_dir))
    try:
        _extract(tar, staging)
        _restore_lineage(staging, file)
        lay_out(staging)
        try:
            info = json.loads((staging / "run.json").read_text())
            if not isinstance(info, dict) or not isinstance(info.get("config"), dict):
                raise ValueError("no config mapping")
        except (ValueError, UnicodeDecodeError) as exc:
            raise UserError(f"{file}: its run.json is corrupt ({exc})") from None
        info.pop("counters", None)  # recounted from the imported refs on first read
        info["imported"] = {"from": file.name, "at": now()}
        write_json_atomic(staging / "run.json", info)
        os.rename(staging, runs_dir / run_id)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    run = Run(runs_dir / run_id)
    if run.lineage.main:
        run.lineage.checkout(run.lineage.main, run.workspace)
    return run


def _manifest(tar: tarfile.TarFile, file: Path) -> dict:
    try:
        member = tar.extractfile("manifest.json")
        manifest = json.loads(member.read()) if member else None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or "run.json" not in tar.getnames():
            raise ValueError
        check_run_id(manifest["run_id"])
    except (KeyError, ValueError, TypeError, UnicodeDecodeError, UserError):
        raise UserError(f"{file} is not an avo run export (no valid manifest)") from None
    return manifest


def _extract(tar: tarfile.TarFile, dest: Path) -> None:
    allowed_top = {"manifest.json", "lineage.bundle", *_TOP_FILES}
    for member in tar.getmembers():
        parts = Path(member.name).parts
        safe = member.isfile() and parts and ".." not in parts and not Path(member.name).is_absolute()
        if not safe or not (member.name in allowed_top or parts[0] in _TREES):
            raise UserError(f"refusing to import: unexpected entry '{member.name}' in the export")
    tar.extractall(dest, filter="data")


def _restore_lineage(staging: Path, file: Path) -> None:
    lineage = Lineage.init(staging / "lineage")
    bundle = staging / "lineage.bundle"
    try:
        if bundle.exists():
            run_git(lineage.path, "bundle", "verify", "--quiet", str(bundle))
            run_git(lineage.path, "fetch", "--quiet", str(bundle), "+refs/*:refs/*")
            bundle.unlink()
    except subprocess.CalledProcessError as exc:
        raise UserError(f"{file}: its lineage bundle is not valid ({(exc.stderr or '').strip()[:200]})") from None
    finally:
        lineage.close()
    (staging / "manifest.json").unlink(missing_ok=True)
