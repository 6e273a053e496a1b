"""The tools the agent calls: each a pydantic argument model, a function whose docstring is its description, a name.

- `base.py`: Tool, ToolContext (what tools may touch), ToolError, and `collect` (the registry, in TOOL_MODULES order).
- `workspace.py`: read_file, write_file, edit_file, list_files, confined to the candidate workspace.
- `evaluate.py`: evaluate (score, commit, accept; the decision is in ../acceptance.py).
- `lineage.py`: lineage, diff, checkout.
- `notes.py`: note, the memory carried across context resets.
- `shell.py`: shell, only with `--allow-shell`.
- `profile.py`: profile (Nsight Compute) and inspect_compile, over avo.profile.
- `docs.py`: search_docs and read_doc, over avo.docs.
"""
