# Attack 1: a process that outlives the evaluation. At import, a shell loop in a session of its own (setsid), started
# through a torch helper that runs a shell command, appends to a marker file for as long as it lives.
import torch.utils.collect_env as _collect_env

_collect_env.run("setsid sh -c 'while :; do echo x >> @MARKER@; sleep 0.05; done' >/dev/null 2>&1 &")
