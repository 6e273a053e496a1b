"""What a tool is, and the registry that collects them from the modules that define them.

A tool is a pydantic argument model (its JSON schema is the tool's input schema), a function whose docstring is the
tool's description, and a name. Modules listed in TOOL_MODULES expose `tools() -> list[Tool]`; a module that is not
installed simply contributes nothing.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from pydantic import BaseModel, ConfigDict

from avo.agent.models.base import ToolSpec

if TYPE_CHECKING:
    from avo.config import RunConfig
    from avo.evaluate import Evaluator
    from avo.gpus import GpuProfile
    from avo.run.directory import Run
    from avo.run.lineage.repo import Lineage

TOOL_MODULES = tuple(f"avo.agent.tools.{name}" for name in
                     ("workspace", "evaluate", "lineage", "notes", "shell", "profile", "docs"))
"""In the order the model is shown them."""


class ToolArgs(BaseModel):
    """A tool's arguments. An unknown key is an error the model reads, so a misspelt argument is never ignored."""

    model_config = ConfigDict(extra="forbid")


class ToolError(Exception):
    """A failure the model should read and recover from (bad path, unknown candidate); never ends the run."""


@dataclass
class LoopState:
    """What the loop and the tools share while a run goes on; rebuilt from the run directory on resume."""

    model: str = ""
    """The model's name, recorded with every candidate it commits."""
    parent: str | None = None
    """The candidate the workspace descends from: the parent of the next commit."""
    candidates: int = 0
    """Candidates evaluated in this run, the baseline excluded (what --max-candidates counts)."""
    since_improvement: int = 0
    """Evaluations since the last accepted candidate (what the supervisor waits for)."""
    last_confirm: dict | None = None
    """The side-by-side re-run of the evaluation in progress, until it is written to the transcript."""


@dataclass
class ToolContext:
    """What tools may touch. File tools must stay inside `workspace`."""

    workspace: Path
    task_spec: str
    device: str
    gpu: GpuProfile | None
    run: Run | None = None
    """The run, when tools run inside one."""
    lineage: Lineage | None = None
    evaluator: Evaluator | None = None
    config: RunConfig | None = None
    state: LoopState = field(default_factory=LoopState)


ToolFn = Callable[[ToolContext, Any], Any]
"""Returns a str, or (str, data dict), or raises ToolError."""


@dataclass(frozen=True)
class Tool:
    name: str
    args: type[BaseModel]
    fn: ToolFn

    @property
    def description(self) -> str:
        return inspect.cleandoc(self.fn.__doc__ or self.name)

    def spec(self) -> ToolSpec:
        schema = self.args.model_json_schema()
        schema.pop("title", None)
        return ToolSpec(name=self.name, description=self.description, input_schema=schema)


def collect(enabled: Callable[[Tool], bool] | None = None) -> dict[str, Tool]:
    """All tools from TOOL_MODULES, by name."""
    found: dict[str, Tool] = {}
    for module_name in TOOL_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                continue
            raise
        for tool in getattr(module, "tools", lambda: [])():
            if enabled is None or enabled(tool):
                found[tool.name] = tool
    return found
