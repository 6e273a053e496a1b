"""The model backends: one turn of a conversation with tools, in a backend-neutral shape.

- `base.py`: the Model protocol and the messages, tool calls and turns it exchanges.
- `factory.py`: the backend `--agent` names (`auto`: anthropic with an API key, else the heuristic).
- `anthropic.py`, `openai_compat.py`: the two SDK adapters, with `retry.py`'s backoff that outlasts an outage.
- `heuristic.py`: the offline agent (its search lives in ../heuristic/).
- `scripted.py`: canned turns in order, for tests; `replay.py` re-issues a recorded run's turns with it.
"""
