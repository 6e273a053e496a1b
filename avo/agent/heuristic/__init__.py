"""The offline agent's parts: knobs in a kernel's source, a rule model of tile performance, the search over knob
settings, profile facts, and the replay of a conversation into what the agent knows. The Model itself is
avo.agent.models.heuristic.HeuristicModel."""
