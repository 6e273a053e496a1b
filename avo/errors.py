"""Errors meant for people: the CLI prints them as one line and exits with code 2."""


class UserError(Exception):
    """Bad input or an unmet precondition; the message says what is wrong and what to do."""

    exit_code = 2
