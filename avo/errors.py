"""Errors meant for people: the CLI prints them as one line and exits with code 2."""


class UserError(Exception):
    """Bad input or an unmet precondition; the message says what is wrong and what to do."""

    exit_code = 2


def read_user_file(path, what: str, flag: str) -> str:
    """The text of a file the user named (`what`: 'workload file'), or a UserError saying why it cannot be read;
    `flag` names it in the message for a folder given instead ('--workload x is a folder: give a YAML file')."""
    from pathlib import Path

    try:
        return Path(path).read_text()
    except FileNotFoundError:
        raise UserError(f"{what} not found: {path}") from None
    except IsADirectoryError:
        raise UserError(flag) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {what} {path}: {getattr(exc, 'strerror', None) or exc}") from None
