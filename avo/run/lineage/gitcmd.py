"""How avo runs git on a lineage: with settings of its own, so that git executes nothing a candidate could have
planted in the repository (a textconv, diff or filter driver, a hook, an include) and sees no secret.

- The repository's `config` is avo's: written whole when the lineage is made, and checked before every git
  command; anything else there (changed by hand or planted) is replaced by avo's text before git reads it.
  `info/attributes` and `commondir`, which avo never writes and git cannot be told to skip, are removed.
- Every command runs with `-c` settings that turn off hooks, attributes files, the fsmonitor, signatures, automatic
  maintenance and every transport but plain files (bundles); diff, log and show run with `--no-textconv
  --no-ext-diff`, so an attribute, wherever it comes from (an in-tree `.gitattributes` too), cannot start a driver.
- The environment is an allowlist (PATH and the locale; never a secret), without system or global config and with
  HOME pointing at nothing.
- GitPython (`open_repo`) starts only its object readers, and those the same way.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import git

from avo.errors import UserError
from avo.run.lineage.records import COMMITTER_EMAIL, COMMITTER_NAME
from avo.util import safe_files, secrets

CONFIG = f"""[core]
\trepositoryformatversion = 0
\tfilemode = true
\tbare = true
\tlogAllRefUpdates = always
[gc]
\treflogExpire = never
\treflogExpireUnreachable = never
[user]
\tname = {COMMITTER_NAME}
\temail = {COMMITTER_EMAIL}
[avo]
\tlineage = 1
"""
"""The whole of a lineage's config: main's reflog records every accept and rollback, and is never expired."""

SETTINGS = (
    "core.hooksPath=/dev/null", "core.attributesFile=/dev/null", "core.fsmonitor=false", "core.pager=cat",
    "log.showSignature=false", "gc.auto=0", "maintenance.auto=false", "transfer.fsckObjects=true",
    "protocol.allow=never", "protocol.file.allow=always",
)
NO_DRIVERS = ("--no-textconv", "--no-ext-diff")
_SHOWS_CONTENT = {"diff", "log", "show"}
_PLANTED = ("info/attributes", "commondir")  # read by git whatever the config says; avo writes neither
_PASSED_ON = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ", "TMPDIR")
_MAX_CONFIG_BYTES = 64 * 1024


def git_env() -> dict[str, str]:
    """The environment git runs with: no secret, no config but the lineage's, no home."""
    env = secrets.allowed(_PASSED_ON)
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_ATTR_NOSYSTEM="1", HOME=os.devnull,
               GIT_TERMINAL_PROMPT="0")
    return env


def git_command(git_dir: Path, *args: str) -> list[str]:
    """The argument list of `git <args>` on the lineage at `git_dir`, with avo's fixed settings."""
    settings = [arg for setting in SETTINGS for arg in ("-c", setting)]
    if args and args[0] in _SHOWS_CONTENT:
        args = (args[0], *NO_DRIVERS, *args[1:])
    return ["git", *settings, f"--git-dir={git_dir}", *args]


def run_git(git_dir: Path, *args: str, stdin: str | None = None) -> str:
    """Run git on a lineage (its config checked first); its stdout, or CalledProcessError."""
    ensure_config(Path(git_dir))
    done = subprocess.run(git_command(git_dir, *args), input=stdin, capture_output=True, text=True, env=git_env(),
                          check=False)
    if done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, done.args, done.stdout, done.stderr)
    return done.stdout


def init_repo(path: Path) -> None:
    """An empty bare lineage at `path`: no hooks or other template files, avo's config."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(git_command(path, "init", "--quiet", "--bare", "--template=", "--initial-branch=main"),
                   capture_output=True, text=True, env=git_env(), check=True)
    _write_config(path)


def ensure_config(git_dir: Path) -> None:
    """Make the lineage's config avo's own again if anything changed it, and remove files git would read that avo
    never writes. UserError when it cannot (a read-only lineage someone changed)."""
    try:
        current = safe_files.read_file(git_dir, "config", limit=_MAX_CONFIG_BYTES)[0]
    except (OSError, ValueError):  # missing, or a link or special file planted in its place
        current = None
    planted = [name for name in _PLANTED if os.path.lexists(git_dir / name)]
    if current == CONFIG.encode() and not planted:
        return
    try:
        if current != CONFIG.encode():
            _write_config(git_dir)
        for name in planted:
            safe_files.remove(git_dir, name)
    except (OSError, safe_files.UnsafeFile) as exc:
        raise UserError(f"lineage {git_dir}: its git config was changed outside avo and cannot be restored "
                        f"({getattr(exc, 'strerror', None) or exc}); refusing to run git on it") from None


class _LineageGit(git.Git):
    """GitPython's git on a lineage: only the object readers it keeps running (`git cat-file --batch`), each started
    as run_git starts git (avo's config checked, its settings, its environment)."""

    def execute(self, command, *, istream=None, as_process=False, **_):
        args = [str(a) for a in command]
        if not as_process or "cat-file" not in args:
            raise RuntimeError(f"git on a lineage runs through run_git, not GitPython: {' '.join(args)}")
        git_dir = Path(self._working_dir)
        ensure_config(git_dir)
        proc = subprocess.Popen(git_command(git_dir, *args[args.index("cat-file"):]), env=git_env(),
                                stdin=istream or subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return self.AutoInterrupt(proc, args)


class _LineageRepo(git.Repo):
    GitCommandWrapperType = _LineageGit


def open_repo(path: Path) -> git.Repo:
    """GitPython on a lineage, for reading its refs and objects; the git it starts is started as run_git does."""
    repo = _LineageRepo(path)
    if not repo.bare:  # a lineage is bare; avo writes no config into anything else
        repo.close()
        raise git.InvalidGitRepositoryError(str(path))
    ensure_config(Path(path))
    return repo


def _write_config(git_dir: Path) -> None:
    # beside it and renamed over it, written without following a link someone left under the temp name
    tmp = f".config.{os.getpid()}.tmp"
    if os.path.lexists(git_dir / tmp):
        safe_files.remove(git_dir, tmp)
    safe_files.write_bytes(git_dir, tmp, CONFIG.encode(), new=True)
    os.replace(git_dir / tmp, git_dir / "config")
