"""One secrets policy: what the transcript redacts never reaches a candidate, and the shell tool's allowlist never
passes a secret on."""

from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st

from avo.evaluate.harness import scrubbed_env
from avo.util.secrets import allowed, redact, secret_values, without_secrets

NAMES = ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS",
         "AZURE_CREDENTIALS", "SERVICE_AUTH", "proxy_auth", "GH_TOKEN", "DB_PASSWORD", "my_secret", "ssh_key",
         "AWS_SECRET_ACCESS_KEY", "HF_TOKEN", "PATH", "HOME", "LANG", "CUDA_VISIBLE_DEVICES"]
VALUE = "value-long-enough-to-redact"


def redacted_names(environ: dict[str, str]) -> set[str]:
    values = set(secret_values(environ))
    return {name for name, value in environ.items() if value in values}


def test_every_variable_the_transcript_redacts_is_kept_from_the_worker(monkeypatch):
    for name in NAMES:
        monkeypatch.setenv(name, f"{VALUE}-{name}")
    redacted = redacted_names(dict(os.environ))
    assert {"GOOGLE_APPLICATION_CREDENTIALS", "AZURE_CREDENTIALS", "SERVICE_AUTH", "proxy_auth"} <= redacted
    assert not redacted & set(scrubbed_env("cuda")), "a secret the transcript hides is handed to the candidate"
    assert {"PATH", "HOME", "CUDA_VISIBLE_DEVICES"} <= set(scrubbed_env("cuda"))


PLAIN_NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True)
SECRET_SHAPED = st.builds(lambda a, word, b: a + word + b, st.from_regex(r"[A-Za-z_]{0,8}", fullmatch=True),
                          st.sampled_from(["KEY", "token", "Secret", "PASSWORD", "Credentials", "auth", "Api_Key"]),
                          st.from_regex(r"[A-Za-z0-9_]{0,8}", fullmatch=True))


@given(st.dictionaries(st.one_of(PLAIN_NAMES, SECRET_SHAPED), st.text(min_size=0, max_size=40), max_size=20))
def test_no_name_the_redaction_treats_as_secret_survives_the_scrub(drawn):
    environ = {name: f"{value}={name}" for name, value in drawn.items()}  # distinct values: a name is its value's
    assert not redacted_names(environ) & set(without_secrets(environ))


def test_the_shell_allowlist_never_passes_a_secret():
    environ = {"PATH": "/bin", "HOME": "/root", "GITHUB_TOKEN": VALUE}
    assert allowed(["PATH", "HOME", "GITHUB_TOKEN", "UNSET"], environ) == {"PATH": "/bin", "HOME": "/root"}


def test_redaction_replaces_values_and_key_shaped_strings_everywhere():
    secrets = secret_values({"MY_AUTH": VALUE, "SHORT_KEY": "1"})
    assert secrets == [VALUE]  # a one-character value is not searched for in text
    event = {"text": f"key {VALUE} and sk-ant-0123456789abcdefXYZ", "calls": [{"args": VALUE}], "n": 3}
    assert redact(event, secrets) == {"text": "key [redacted] and [redacted]", "calls": [{"args": "[redacted]"}],
                                      "n": 3}
