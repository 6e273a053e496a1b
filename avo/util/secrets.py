"""Which environment variables are secrets, in one place: the worker's environment drops them, the transcript has
their values redacted, and the shell tool passes none of them on.

A variable is a secret when its name says so (KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL, AUTH, in any case). The
worker's environment also drops every variable of the model providers' and clouds' clients (`ANTHROPIC_*`,
`OPENAI_*`, `AWS_*`, `HF_*`): a candidate has no use for an endpoint or an account either. So whatever the
transcript redacts never reaches a candidate.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|AUTH", re.IGNORECASE)
CLIENT_PREFIXES = ("ANTHROPIC_", "OPENAI_", "AWS_", "HF_")
"""Variables of API and cloud clients: kept from candidates whatever they hold."""
SECRET_PATTERN = re.compile(r"\b(sk-[A-Za-z0-9_\-]{16,}|sk-ant-[A-Za-z0-9_\-]{16,})")
"""Anything shaped like an API key, redacted wherever it appears."""
MIN_SECRET_CHARS = 8
"""Shorter values of secret-named variables are not searched for in text (a flag such as `1` would match
everywhere); the variables themselves are still kept from candidates."""
REDACTED = "[redacted]"


def is_secret_name(name: str) -> bool:
    return SECRET_NAME.search(name) is not None


def kept_from_candidates(name: str) -> bool:
    """Whether the worker's environment drops `name`: every secret, and the API and cloud clients' variables."""
    return is_secret_name(name) or name.upper().startswith(CLIENT_PREFIXES)


def without_secrets(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a candidate's process gets: `environ` (default: this process's) minus what it must not see."""
    env = os.environ if environ is None else environ
    return {name: value for name, value in env.items() if not kept_from_candidates(name)}


def allowed(names: Iterable[str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of an allowlist (`names`) that are set, never a secret even if the list names one."""
    env = os.environ if environ is None else environ
    return {name: env[name] for name in names if name in env and not is_secret_name(name)}


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of the variables whose names say they are secrets, longest first (what `redact` replaces)."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if is_secret_name(k) and len(v) >= MIN_SECRET_CHARS}
    return sorted(values, key=len, reverse=True)


def redact(value: Any, secrets: list[str]) -> Any:
    """`value` with every secret string (and anything shaped like an API key) replaced, recursively."""
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, REDACTED)
        return SECRET_PATTERN.sub(REDACTED, value)
    if isinstance(value, dict):
        return {k: redact(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v, secrets) for v in value]
    return value
