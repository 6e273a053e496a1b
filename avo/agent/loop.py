"""The OODA loop: ask the model, run its tool calls, record everything; stop when the budget says so.

`run()` repeats `step()`. Limits are checked in one place (`check_budget`) and end the loop by raising a small
exception (`BudgetExhausted`, `Interrupted`, `ModelExhausted`). Every event is appended to the transcript as it
happens, so a crash loses nothing and `--resume` restarts from the run directory.
"""

from __future__ import annotations

import signal
import threading
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from avo.agent import context
from avo.agent.acceptance import finish_confirmation
from avo.agent.accounting import cost_usd
from avo.agent.batch import run_calls
from avo.agent.controls import Controls
from avo.agent.models.base import Message, ToolCall, ToolResult, Turn
from avo.agent.stops import BudgetExhausted, ContextOverflow, Interrupted, ModelExhausted, StopRun
from avo.agent.tools.base import Tool, ToolContext, ToolError
from avo.errors import UserError
from avo.util.secrets import redact, secret_values

if TYPE_CHECKING:
    from avo.agent.context import Situation
    from avo.agent.live import RunView
    from avo.agent.models.base import Model
    from avo.run.directory import Run

MAX_IDLE_TURNS = 3
NUDGE = ("No tool was called. The run continues until its budget ends: pick the next change, edit the kernel, "
         "and call evaluate.")


class Agent:
    def __init__(self, *, run: Run, model: Model, tools: dict[str, Tool], ctx: ToolContext, situation: Situation,
                 view: RunView | None = None, controls: Controls | None = None, clock=time.monotonic):
        self.rundir, self.model, self.tools, self.ctx, self.situation = run, model, tools, ctx, situation
        self.view, self.clock = view, clock
        self.controls = controls or Controls()
        """Shared with the model's retry policy, if it has one: Ctrl-C, the budget check and the record."""
        self.cfg, self.budget = situation.config.agent, situation.config.budget
        self.specs = [tool.spec() for tool in tools.values()]
        self.system = context.system_prompt(situation, self.specs)
        self.messages: list[Message] = []
        self.secrets = secret_values()
        self.started, self.elapsed_before, self.cost = clock(), 0.0, 0.0
        self.idle_turns, self.supervised_at, self.resumed = 0, 0, False
        self.unpriced = False
        self.restart_floor = 0
        """Tokens the conversation held right after the last restart: the summary alone can pass the limit, and
        restarting again before the conversation has grown would only lose the last step's context."""
        ctx.state.model = ctx.state.model or model.name
        self.controls.check_budget, self.controls.record = self.check_budget, self.record

    def begin(self, opening: Message) -> None:
        self.messages = [opening]

    def resume(self) -> None:
        """Rebuild counters and the workspace's parent from the run directory; the conversation restarts from a
        summary."""
        last: dict = {}
        for event in self.rundir.events():
            last.update({k: event[k] for k in ("elapsed_s", "cost_usd_total", "workspace_parent") if k in event})
        self.elapsed_before, self.cost = float(last.get("elapsed_s", 0.0)), float(last.get("cost_usd_total", 0.0))
        lineage = self.ctx.lineage
        self.ctx.state.candidates, self.ctx.state.since_improvement = context.lineage_counters(lineage)
        self.ctx.state.parent = last.get("workspace_parent") or lineage.best or lineage.baseline
        finished = finish_confirmation(self.ctx)  # a re-run the stop cut short: decided before anything else
        if finished is not None and self.view is not None:
            self.view.event("confirm_end", finished)
        self.resumed = True
        self.restart("The run was resumed after a stop.")

    def run(self) -> str:
        """Loop until a stop; returns the reason. The run state becomes finished, stopped (resumable) or failed."""
        self.record("session", agent=self.model.name, resumed=self.resumed, system_prompt=self.system,
                    tools=[t.name for t in self.specs])
        previous = self._install_sigint()
        try:
            while True:
                if self.controls.stop_requested:
                    raise Interrupted("interrupted (Ctrl-C): resume with avo evolve --resume")
                self.step()
        except StopRun as stop:
            state, reason = ("stopped" if isinstance(stop, Interrupted) else "finished"), str(stop)
        except KeyboardInterrupt:
            state, reason = "stopped", "interrupted twice: stopped mid-step"
        except BaseException as exc:
            self.record("stop", state="failed", reason=f"{type(exc).__name__}: {exc}", **self.progress())
            self.rundir.set_state("failed", reason=str(exc)[:500])
            raise
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
        self.record("stop", state=state, reason=reason, **self.progress())
        self.rundir.set_state(state, reason=reason, **self.progress())
        return reason

    def step(self) -> None:
        self.check_budget()
        try:
            turn = self.ask(self.system, self.messages, self.specs, "model_turn")
        except ContextOverflow as exc:
            if len(self.messages) <= 1:
                raise
            return self.restart(f"The API refused the conversation as too long ({str(exc)[:200]}).")
        self.messages.append(Message(role="assistant", text=turn.text, tool_calls=turn.tool_calls))
        results = run_calls(self, turn.tool_calls)  # several evaluate calls run at once on a pool (batch.py)
        self.idle_turns = 0 if turn.tool_calls else self.idle_turns + 1
        if self.idle_turns >= MAX_IDLE_TURNS:
            raise ModelExhausted(f"the model called no tool in {MAX_IDLE_TURNS} turns in a row")
        extra = [] if turn.tool_calls else [NUDGE]
        review = self.maybe_supervise()
        if review:
            extra.append(f"Supervisor review ({self.supervised_at} evaluations without improvement):\n{review}")
        self.messages.append(Message(role="user", tool_results=results, text="\n\n".join(extra)))
        size = max(turn.usage.input_tokens + turn.usage.cache_read_tokens + turn.usage.cache_write_tokens
                   + turn.usage.output_tokens, context.conversation_tokens(self.system, self.messages))
        if size > self.cfg.context_limit_tokens and size > 2 * self.restart_floor:
            self.restart(f"The conversation reached about {size} tokens and was restarted from this summary.",
                         carry="\n\n".join(extra))

    def ask(self, system: str, messages: list[Message], specs, kind: str) -> Turn:
        began = self.clock()
        turn = self.model.next_turn(system, messages, specs)
        cost = cost_usd(turn.model or self.model.name, turn.usage, self.cfg.prices_usd_per_mtok)
        self.cost += cost or 0.0
        if cost is None and turn.usage.input_tokens and not self.unpriced:
            self.unpriced = True  # say once: a --max-cost cannot bind on a model without a price
            self.record("price_unknown", model=turn.model or self.model.name,
                        message="no price in agent.prices_usd_per_mtok for this model: its cost counts as 0")
        self.record(kind, text=turn.text, tool_calls=[c.model_dump() for c in turn.tool_calls],
                    usage=turn.usage.model_dump(), cost_usd=cost, model=turn.model or self.model.name,
                    stop_reason=turn.stop_reason, duration_s=round(self.clock() - began, 3), **self.progress())
        return turn

    def execute(self, call: ToolCall) -> ToolResult:
        self.record("tool_call", id=call.id, name=call.name, arguments=call.arguments, raw_arguments=call.raw_arguments)
        tool = self.tools.get(call.name)
        if tool is None:
            return self.recorded(call, f"unknown tool '{call.name}'; available: {', '.join(self.tools)}")
        if call.raw_arguments is not None:
            return self.recorded(call, f"the arguments of {call.name} were not valid JSON: "
                                       f"{call.raw_arguments[:300]!r}")
        return self.answer(call, lambda: tool.fn(self.ctx, tool.args.model_validate(call.arguments)))

    def answer(self, call: ToolCall, work: Callable[[], Any], workspace_parent: str | None = None) -> ToolResult:
        """The call's result from `work` (the tool: text, or (text, data)), recorded; its failures become error
        results the model reads, never the end of the run (agent/batch.py files its evaluations through here too)."""
        try:
            out = work()
        except ValidationError as exc:
            return self.recorded(call, f"bad arguments for {call.name}: " + "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()), workspace_parent)
        except (ToolError, UserError) as exc:
            return self.recorded(call, f"{call.name} failed: {exc}", workspace_parent)
        except Exception as exc:  # a tool bug must not end a week-long run; the transcript keeps the trace
            return self.recorded(call, f"{call.name} failed with an internal error: {type(exc).__name__}: {exc}",
                                 workspace_parent, data={"traceback": traceback.format_exc(limit=8)})
        content, data = out if isinstance(out, tuple) else (out, None)
        return self.recorded(call, content, workspace_parent, data=data, error=False)

    def recorded(self, call: ToolCall, content: str, workspace_parent: str | None = None, *, data: Any = None,
                 error: bool = True) -> ToolResult:
        """The result, with its `tool_result` event (and the workspace's parent a resume reads)."""
        self.record("tool_result", id=call.id, name=call.name, content=content, is_error=error, data=data,
                    workspace_parent=workspace_parent or self.ctx.state.parent, **self.progress())
        return ToolResult(call_id=call.id, name=call.name, content=content, is_error=error, data=data)

    def check_budget(self) -> None:
        """The one place limits are checked."""
        p = self.progress()
        if p["elapsed_s"] >= self.budget.hours * 3600:
            raise BudgetExhausted(f"time budget of {self.budget.hours:g} h spent")
        if self.budget.max_candidates is not None and p["candidates"] >= self.budget.max_candidates:
            raise BudgetExhausted(f"candidate budget of {self.budget.max_candidates} spent")
        if self.budget.max_cost is not None and p["cost_usd_total"] >= self.budget.max_cost:
            raise BudgetExhausted(f"cost budget of ${self.budget.max_cost:g} spent")

    def progress(self) -> dict:
        return {"elapsed_s": round(self.elapsed_before + self.clock() - self.started, 3),
                "cost_usd_total": round(self.cost, 6), "candidates": self.ctx.state.candidates,
                "since_improvement": self.ctx.state.since_improvement}

    def maybe_supervise(self) -> str | None:
        """After `supervisor_after` evaluations without improvement, the same model reviews the trajectory."""
        since, every = self.ctx.state.since_improvement, self.cfg.supervisor_after
        self.supervised_at = 0 if since < self.supervised_at else self.supervised_at
        if not every or since - self.supervised_at < every:
            return None
        self.supervised_at = since
        request = context.supervisor_request(self.situation, self.rundir, self.ctx.lineage, since)
        return self.ask(context.prompt("supervisor").template, [request], [], "supervisor").text.strip() or None

    def restart(self, reason: str, carry: str = "") -> None:
        """Start a fresh conversation from a summary: task, best kernel, lineage table, notes (+ `carry`)."""
        p, b = self.progress(), self.budget
        budget_line = (f"{p['elapsed_s'] / 3600:.2f} of {b.hours:g} h, {p['candidates']} candidates"
                       + (f" of {b.max_candidates}" if b.max_candidates else "") + f", ${p['cost_usd_total']:.2f}")
        summary = context.restart_message(self.situation, self.rundir, self.ctx.lineage, reason=reason,
                                          parent=self.ctx.state.parent, budget_line=budget_line)
        if carry:  # e.g. a supervisor review made in the step that triggered the restart
            summary.text += "\n\n" + carry
        self.messages = [summary]
        self.restart_floor = context.conversation_tokens(self.system, self.messages)
        self.record("context_reset", reason=reason, summary=summary.text, **p)

    def record(self, kind: str, **data) -> None:
        data = redact(data, self.secrets)
        self.rundir.append_event(kind, **data)
        if self.view is not None:
            self.view.event(kind, data)

    def _install_sigint(self):
        if threading.current_thread() is not threading.main_thread():
            return None

        def on_sigint(signum, frame):
            if self.controls.stop_requested:  # second Ctrl-C: stop now
                raise KeyboardInterrupt
            # only a flag: writing from a signal handler could tear a transcript line
            self.controls.stop_requested = True
            if self.view is not None:
                self.view.stopping = True

        return signal.signal(signal.SIGINT, on_sigint)
