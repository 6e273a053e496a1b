"""The offline agent's parts: knobs in a kernel's source (knobs.py), how knobs read as tiles and which points cannot
run (rules.py), the speed model that ranks points (speed.py), the B200's limits (blackwell.py), the search over knob
settings (search.py), what measured outcomes say about changes and shape buckets (measured.py), profile facts
(facts.py), and the replay of a conversation into what the agent knows
(history.py). The Model itself is avo.agent.models.heuristic.HeuristicModel."""
