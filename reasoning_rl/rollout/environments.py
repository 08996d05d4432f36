"""Environments: multi-turn tasks that answer a model's segment with an observation (a tool's output).

    ENVIRONMENTS.get("python") -> PythonTool class; PythonTool(limits).start(row) -> state
    env.call_end(text) -> int | None        where a tool call closes in the model's text (None: no call in it)
    env.respond(states, segments) -> [Step]  every live episode's call answered at once (concurrently)
    env.close(state)

An environment never sees token ids: the episode runner (rollout/episodes.py) owns the sequence (prompt, each model segment
exactly as sampled, each observation tokenized once) and the limits on turns, tool calls and tokens. A user's own
environment subclasses `Environment` and is registered by name, or published under the entry-point group
`reasoning_rl.environments` (docs/tools.md).

Built in: `calculator` (`<<12*34>>` answered `=408`, in-process, for the tiny model) and `python`, a Python
interpreter on the sandbox (sandboxes/). The model writes a fenced block (```python ... ```), or a chat template's
structured call (`<tool_call>{"name": "python", "arguments": {"code": "..."}}</tool_call>`, the Hermes/Qwen form; a
call that is not valid JSON, names another tool or has no string `code` is answered with an error saying so); the
block runs and its output comes back as an ```output block. State carries from one call to the next of the same
episode by replay: each call is a fresh sandboxed run of the episode's earlier cells (their output discarded) and
then the new one, so names defined in one call exist in the next, every call has its own wall, CPU and output
budget, nothing survives the episode, and no two episodes ever share a process. The cost is re-running earlier cells
(bounded by `max_tool_calls`); a program that is not deterministic may see other values on replay (`random` is
seeded per episode). A program's own error or timeout is the observation, as a REPL shows it; a failure of the
sandbox itself is `Step.failed` (the runner masks the sample ERROR), never a made-up observation. The reference
answer is never given to an environment's sandbox.

Not here: generation, token ids, masks (rollout/episodes.py); rewards (the task's verifiers read what the model wrote).
"""
from __future__ import annotations

import ast
import hashlib
import json
import operator
import re
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Sequence

from ..registry import Registry

ENTRY_POINT_GROUP = "reasoning_rl.environments"


@dataclass(frozen=True)
class Step:
    """An environment's answer to one model segment.

    observation: text appended after the segment (tokenized once by the runner; "" for none).
    done:        the episode ends here; `reason` says why ("answer": the model stopped without a call).
    failed:      the environment itself failed (the sandbox could not run the call): the sample is masked ERROR.
    tool_call:   the segment held a tool call; program_error: the program raised, or ran past a limit.
    seconds:     wall time of the call.
    """
    observation: str = ""
    done: bool = False
    reason: str = ""
    failed: bool = False
    tool_call: bool = False
    program_error: bool = False
    seconds: float = 0.0
    call: str = ""


class Environment:
    """The interface. Subclasses set `name` and implement `start`, `call_end`, `respond` (and `close` if they hold
    anything per episode). `TOOLS`: the tools' JSON schemas, which a chat-format run shows in the prompt through the
    template (apply_chat_template's `tools=`); empty = none shown."""
    name = ""
    TOOLS: list = []
    # text whose appearance closes a call, so sampling stops there instead of running to the turn's end (the runner
    # still cuts at `call_end`); empty: the segment runs to the end of turn or the token limit
    CALL_STOPS: tuple[str, ...] = ()
    CALL_OPENERS: tuple[str, ...] = ()  # what begins a call: a segment holding one but no call broke the format

    @classmethod
    def from_config(cls, rl) -> "Environment":
        """The environment a run's `grpo` section asks for (its knobs: max_turns, tool_wall_s, ...)."""
        return cls()

    def start(self, row: dict) -> Any:
        """A new episode's state for a dataset row (the runner renders the row's prompt itself)."""
        return None

    def call_end(self, text: str) -> int | None:
        """The index just after the first complete tool call in `text` (the runner cuts the model's segment there
        and stops sampling it), or None when `text` holds none."""
        raise NotImplementedError

    def respond(self, states: Sequence[Any], segments: Sequence[str]) -> list[Step]:
        """One Step per episode: the answer to the tool call its segment ends with (or done, when it has none)."""
        raise NotImplementedError

    def close(self, state: Any) -> None:
        pass

    def opens_call(self, text: str) -> bool:
        """`text` (a segment in which `call_end` found no call) begins one: the tool-call format broken."""
        return any(o in text for o in self.CALL_OPENERS)

    def assistant_message(self, text: str) -> dict:
        """The chat message of a model turn `text` (tool_format chat: the conversation the template check renders).
        An environment whose calls are the template's structured tool calls returns them in `tool_calls`."""
        return {"role": "assistant", "content": text}


ENVIRONMENTS: Registry[type[Environment]] = Registry("environment")
_CALL = re.compile(r"```python[ \t]*\n(.*?)\n?```", re.S)
# the chat templates' structured call (Hermes, Qwen): <tool_call>{"name": ..., "arguments": {...}}</tool_call>
_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)


def _first_call(text: str) -> tuple[re.Match, dict | None] | None:
    """The first tool call of `text`, whichever form comes first: (its match, None) for a fenced block, (its match,
    the parsed JSON object, {} when it is not one) for a structured `<tool_call>`; None when there is no call."""
    fenced, m = _CALL.search(text), _TOOL_CALL.search(text)
    if m is None or (fenced is not None and fenced.start() < m.start()):
        return (fenced, None) if fenced else None
    try:
        call = json.loads(m.group(1))
    except ValueError:
        return m, {}
    return m, call if isinstance(call, dict) else {}

# Runs in the sandbox: the earlier cells quietly, then the new one as a REPL would (the last expression's value
# printed), its error as the last lines of a traceback. Reads {"cells": [...], "seed": n} from stdin.
_HARNESS = r'''
import ast, contextlib, io, json, random, sys, traceback
req = json.loads(sys.stdin.read())
random.seed(req["seed"])
ns = {"__name__": "__main__"}
for cell in req["cells"][:-1]:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            exec(compile(cell, "<cell>", "exec"), ns)
        except Exception:
            pass
try:
    tree = ast.parse(req["cells"][-1], "<cell>", "exec")
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, "<cell>", "exec"), ns)
    if last is not None:
        value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), ns)
        if value is not None:
            print(repr(value))
except SystemExit:
    pass
except Exception as e:
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == "<cell>"]
    sys.stdout.write("Traceback (most recent call last):\n" + "".join(traceback.format_list(frames))
                     + "".join(traceback.format_exception_only(type(e), e)))
    sys.exit(1)
'''


@dataclass
class _Episode:
    cells: list[str]
    seed: int


@ENVIRONMENTS.register("python")
class PythonTool(Environment):
    """A stateful Python interpreter per episode on the sandbox (see the module docstring).

    limits: per call (sandboxes.Limits fields: wall_s, cpu_s, memory_mb, ...); output_chars: the observation's cap,
    past which it ends with a visible marker; packages: third-party packages the code may import, read-only, from
    `site` (None: numpy and sympy, those this environment has; sandboxes/packages.py)."""
    name = "python"
    CALL_OPENERS = ("```python", "<tool_call>")

    def __init__(self, limits: dict | None = None, output_chars: int = 1000, workers: int = 2,
                 packages: Sequence[str] | None = None, site: str | None = None) -> None:
        from sandboxes import Limits
        from sandboxes.packages import installed_defaults

        self.limits = Limits.of({"wall_s": 5.0, "cpu_s": 5.0, "memory_mb": 256, "output_bytes": 1 << 16,
                                 **(limits or {})})
        self.output_chars, self.workers = output_chars, workers
        self.packages = tuple(installed_defaults(site) if packages is None else packages)
        self.site = site
        self._pool = None

    @classmethod
    def from_config(cls, rl) -> "PythonTool":
        return cls({"wall_s": rl.tool_wall_s, "cpu_s": rl.tool_wall_s},
                   packages=None if rl.tool_packages == ("default",) else rl.tool_packages, site=rl.tool_site or None)

    def start(self, row: dict) -> _Episode:
        key = str(row.get("prompt_id", row.get("prompt", ""))).encode()
        return _Episode([], seed=int(hashlib.sha256(key).hexdigest()[:8], 16))

    TOOLS = [{"type": "function", "function": {
        "name": "python",
        "description": "Run Python code in a sandboxed interpreter that keeps its state between calls; returns what "
                       "it prints and the value of its last expression.",
        "parameters": {"type": "object", "properties": {"code": {"type": "string", "description": "the code"}},
                       "required": ["code"]}}}]

    def call_end(self, text: str) -> int | None:
        found = _first_call(text)
        return found[0].end() if found else None

    def assistant_message(self, text: str) -> dict:
        found = _first_call(text)
        if found is None or found[1] is None:  # no call, or a fenced block: the turn's text is the message
            return {"role": "assistant", "content": text}
        m, call = found
        return {"role": "assistant", "content": text[:m.start()].rstrip(),
                "tool_calls": [{"type": "function", "function": {"name": call.get("name", ""),
                                                                  "arguments": call.get("arguments", {})}}]}

    def respond(self, states: Sequence[_Episode], segments: Sequence[str]) -> list[Step]:
        calls = [self._call(s) for s in segments]
        todo = [i for i, c in enumerate(calls) if c is not None]
        out = [Step(done=True, reason="answer") for _ in segments]
        if not todo:
            return out
        for i in todo:
            states[i].cells.append(calls[i])
        programs = [(_HARNESS, json.dumps({"cells": states[i].cells, "seed": states[i].seed})) for i in todo]
        t0 = time.time()
        try:
            results = self._sandboxes().run_many(programs, self.limits)
        except Exception as e:  # noqa: BLE001 - any failure of the sandbox itself masks these samples, named
            return [Step(done=True, reason=f"sandbox failed: {type(e).__name__}: {e}"[:200], failed=True,
                         tool_call=True, call=calls[i] or "") if i in todo else out[i] for i in range(len(segments))]
        seconds = (time.time() - t0) / max(1, len(todo))
        for i, r in zip(todo, results):
            out[i] = self._observe(r, calls[i], seconds)
            if out[i].program_error and not out[i].failed:
                states[i].cells[-1] = "pass"  # a failing cell is not replayed (its output was the error)
        return out

    def _call(self, segment: str) -> str | None:
        """The code of the segment's first call: a fenced block, or a structured call's `code` argument. A structured
        call that cannot be run becomes a program raising the reason, so the model sees it as a REPL error."""
        found = _first_call(segment)
        if found is None or found[1] is None:
            return found[0].group(1) if found else None
        call = found[1]
        args = call.get("arguments")
        if isinstance(args, str):  # some templates carry the arguments as a JSON string
            try:
                args = json.loads(args)
            except ValueError:
                args = None
        if not call:
            why = "the tool call is not a JSON object"
        elif call.get("name") != "python":
            why = f"no tool named {str(call.get('name'))[:40]!r}; the tool is 'python'"
        elif not isinstance(args, dict) or not isinstance(args.get("code"), str):
            why = "the python tool takes one argument, code: a string"
        else:
            return args["code"]
        return f"raise ValueError({why!r})"

    def _observe(self, r, call: str, seconds: float) -> Step:
        if r.limit in ("wall", "cpu"):
            text, error = f"TimeoutError: the cell ran past its {r.limit} time limit " \
                          f"({getattr(self.limits, r.limit + '_s'):g} s)\n", True
        elif r.limit == "memory":
            text, error = f"MemoryError: the cell used more than {self.limits.memory_mb} MiB\n", True
        elif r.limit is not None:
            text, error = f"the cell hit the sandbox's {r.limit} limit\n", True
        elif r.exit_code is None or (r.exit_code not in (0, 1)):
            text, error = f"the interpreter died (exit {r.exit_code}, signal {r.signal})\n", True
        else:
            text, error = r.stdout, r.exit_code == 1
        if len(text) > self.output_chars or r.stdout_truncated:
            text = text[: self.output_chars] + f"\n[output truncated at {self.output_chars} characters]\n"
        body = text if text.endswith("\n") or not text else text + "\n"
        return Step(observation=f"```output\n{body}```\n", tool_call=True, program_error=error, seconds=seconds,
                    call=call)

    def _sandboxes(self):
        if self._pool is None:
            from sandboxes import SandboxPool

            self._pool = SandboxPool(self.workers, self.limits, packages=self.packages, site=self.site)
        return self._pool

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
        ast.Mod: operator.mod, ast.Div: operator.truediv}
_CALC = re.compile(r"<<([^<>\n]{1,80})>>")


def _arith(node: ast.AST) -> Fraction:
    """An expression of numbers (integers, decimals) and + - * / // % and parentheses, exactly (fractions); anything
    else is refused (no powers: no 9**9**9; no names, no calls)."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float) and abs(node.value) < 10 ** 12:
        return Fraction(str(node.value)) if type(node.value) is float else Fraction(node.value)  # 0.1 as written
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return -_arith(node.operand) if isinstance(node.op, ast.USub) else _arith(node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        value = _OPS[type(node.op)](_arith(node.left), _arith(node.right))
        if abs(value) >= 10 ** 15:
            raise ValueError("a result past 10**15")
        return Fraction(value)
    raise ValueError("only numbers and + - * / // % ( )")


def calculate(expression: str) -> str:
    """What the calculator answers for `expression`: the exact value, an integer where it is whole, else a decimal of
    at most 6 places (trailing zeros dropped). ValueError, SyntaxError or ZeroDivisionError where it refuses."""
    value = _arith(ast.parse(expression.strip().replace(",", ""), mode="eval").body)
    if value.denominator == 1:
        return str(value.numerator)
    text = f"{float(round(value, 6)):.6f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


@ENVIRONMENTS.register("calculator")
class Calculator(Environment):
    """A calculator the model calls by writing `<<expression>>`; it answers `=value` and a new line (or `=error: ...`,
    a failed call). Numbers, + - * / // % and parentheses, computed exactly (`calculate`). In-process and pure: no
    sandbox is needed. Small enough for the embedded tiny model's characters (bench/tool_demo.py), and the form of
    GSM8K's own calculator annotations (`<<48/2=24>>`), which the recipe's gold traces turn into calls."""
    name = "calculator"
    CALL_STOPS = (">>",)
    CALL_OPENERS = ("<<",)

    def call_end(self, text: str) -> int | None:
        m = _CALC.search(text)
        return m.end() if m else None

    def respond(self, states: Sequence[Any], segments: Sequence[str]) -> list[Step]:
        out = []
        for seg in segments:
            m = _CALC.search(seg)
            if m is None:
                out.append(Step(done=True, reason="answer"))
                continue
            try:
                out.append(Step(observation=f"={calculate(m.group(1))}\n", tool_call=True, call=m.group(1)))
            except (ValueError, SyntaxError, ZeroDivisionError, RecursionError) as e:
                out.append(Step(observation=f"=error: {type(e).__name__}: {e}\n", tool_call=True,
                                program_error=True, call=m.group(1)))
        return out


def prompt_tools(rl) -> list | None:
    """The tool schemas the prompts of a run are rendered with: its environment's `TOOLS` with tool_format chat (the
    template's own tool system prompt), else None."""
    if not rl.environment or rl.tool_format != "chat":
        return None
    load_plugins()
    return list(ENVIRONMENTS.get(rl.environment).TOOLS) or None


def check_environment(rl) -> None:
    """A run section's `environment` names a registered environment (plugins included), else one line naming it and
    the valid ones. Checked before any model loads (the command line, the RL loop's set-up), not by the config."""
    if not rl.environment:
        return
    from ..config.knobs import ConfigError

    load_plugins()
    if rl.environment not in ENVIRONMENTS:
        raise ConfigError(f"{rl.SECTION}.environment: unknown environment {rl.environment!r}; valid: "
                          f"{', '.join(ENVIRONMENTS.names())}")


def load_plugins() -> list[str]:
    """Register the environments published under the entry-point group; returns one line per plugin that failed."""
    from importlib import metadata as md

    errors = []
    for ep in md.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in ENVIRONMENTS:
            continue
        try:
            cls = ep.load()
            if not (isinstance(cls, type) and issubclass(cls, Environment)):
                raise TypeError(f"{ep.value} is not an Environment subclass")
            ENVIRONMENTS.add(ep.name, cls, ep.dist.name if ep.dist else "plugin")
        except Exception as e:  # noqa: BLE001 - one broken plugin must not stop the others; it is reported
            errors.append(f"environment plugin {ep.name} = {ep.value}: {type(e).__name__}: {e}")
    return errors
