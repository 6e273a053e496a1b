"""The agent: a model working through tools in an observe-orient-decide-act loop, one run at a time.

- `session.py`: the wiring of a run: the configuration settled from flags, the task, evaluator and model, the run
  directory, the baseline, then the loop.
- `loop.py`: the loop (ask the model, run its tool calls, record every event); budgets checked in one place.
- `controls.py`: what the loop shares with a model's retry policy (Ctrl-C, the budget check, the record).
- `seed.py`: the seed folder, its checks before a run exists, and its evaluation as the baseline.
- `acceptance.py`: whether an evaluated candidate becomes the best (noise-aware, confirmed side by side).
- `context.py`: what the model is told (prompts/ filled in): system prompt, restart summary, supervisor request.
- `accounting.py`: USD from token usage. `stops.py`: the exceptions that end a run. `live.py`: the terminal view.
- `tools/`: the tools the model calls. `models/`: the model backends. `heuristic/`: the offline agent's search.
"""
