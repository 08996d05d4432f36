"""Tool traces for a cold start: generated problems (task/embedded/tool_problems.py) written out as episodes in which
a model calls the sandboxed Python tool, with the sandbox's real output in them, for `reasoning-rl sft --samples`.

    write_traces(problems, tok, out_dir) -> TraceSummary     # out_dir/samples.jsonl and task.json

Each trace is made by the episode machinery RL uses (rollout/episodes.py), the model's turns scripted instead of
sampled: the prompt in the model's own chat template; a first turn with a short plan and a ```python block (the
problem's program); the tool's answer, run in the sandbox there and then and appended exactly as an RL episode
appends it (its tokens carry loss mask 0); a last turn that states what the tool printed, `\\boxed{}`, and the end
of turn. Nothing of the output is typed by us: a trace whose tool output does not parse as the problem's answer, or
whose final answer the `math` verifier does not pass, is left out and counted. The file is a rollout archive
(data/archive.py), so `sft --samples` trains on the ids as they stand with the tool's output masked off, as RL does.
Families named `direct` (the `easy` one-digit sums) are answered in one turn with no call ("3 plus 4 is 7, so the
answer is \\boxed{7}."): a cold start that also shows when calling does not pay.

Not here: the problems (task/embedded/tool_problems.py), the training (models/sft.py).
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Sequence

from ..rollout.base import SamplingConfig, render_prompt, stop_ids
from ..rollout.episodes import EpisodeLimits, run_episodes
from ..rollout.environments import PythonTool
from ..task.embedded.tool_problems import ToolProblem
from ..types import Group

INSTRUCTION = ("Use the python tool for exact arithmetic: write a ```python block that prints the result, read its "
               "output, then put the final answer in \\boxed{}.")
CHAT_INSTRUCTION = ("Use the python tool for exact arithmetic: call it with a program that prints the result, read "
                    "its output, then put the final answer in \\boxed{}.")  # tool_format chat: the schema is shown
_OUTPUT = re.compile(r"```output\n(.*?)```", re.S)


@dataclass(frozen=True)
class TraceSummary:
    written: int
    left_out: int  # tool output that did not parse, or a final answer the verifier did not pass
    path: str


class ScriptedTurns:
    """Stands in for a rollout engine (`continue_ids`): episode i's first turn is problem i's plan and program, its
    next what the tool printed, boxed. The episodes' keys (their place in the call) say which problem is whose.
    tool_format "text": the program as a ```python block; "chat": as the template's structured call
    (`<tool_call>{"name": "python", "arguments": {"code": ...}}</tool_call>`), the turn ended by the end-of-turn
    token as a chat-format call is. A problem of a `direct` family is answered in its first turn, without a call."""

    def __init__(self, tok, problems: Sequence[ToolProblem], end_ids: Sequence[int], tool_format: str = "text",
                 direct: Sequence[str] = ()) -> None:
        self.tok, self.problems, self.end, self.chat = tok, list(problems), list(end_ids), tool_format == "chat"
        self.direct = frozenset(direct)

    def continue_ids(self, seqs, max_new, stops, sampling, seeds=None, keys=None):
        out = []
        for seq, key in zip(seqs, keys):
            p = self.problems[key[1]]
            shown = _OUTPUT.findall(self.tok.decode(seq, skip_special_tokens=False))
            if p.family in self.direct:  # done in the head: the sum, the answer boxed, no call
                ids = self.tok(f"{p.plan.rstrip('.')} is {p.answer}, so the answer is \\boxed{{{p.answer}}}.",
                               add_special_tokens=False)["input_ids"] + self.end[:1]
            elif not shown and self.chat:  # the first turn: a plan and the call, then the end of the turn
                call = json.dumps({"name": "python", "arguments": {"code": p.code}})
                ids = self.tok(f"{p.plan}\n<tool_call>\n{call}\n</tool_call>", add_special_tokens=False)["input_ids"] \
                    + self.end[:1]
            elif not shown:  # the first turn: a plan and the program
                text = f"{p.plan}\n\n```python\n{p.code}\n```"
                ids = self.tok(text, add_special_tokens=False)["input_ids"]
            else:  # after the tool's answer: what it printed, boxed, and the end of turn
                printed = shown[-1].strip().splitlines()[-1] if shown[-1].strip() else ""
                ids = self.tok(f"The tool printed {printed}, so the answer is \\boxed{{{printed}}}.",
                               add_special_tokens=False)["input_ids"] + self.end[:1]
            out.append((ids, [0.0] * len(ids)))
        return out


def end_of_turn(tok) -> list[int]:
    """The id a trace's turn ends with: ChatML's <|im_end|> where the tokenizer has it, else its EOS (empty: neither;
    write_traces then takes the rollout's stop ids)."""
    end = [i for i in (tok.convert_tokens_to_ids("<|im_end|>"), tok.eos_token_id)
           if isinstance(i, int) and i != tok.unk_token_id]
    return end[:1]


def make_traces(problems: Sequence[ToolProblem], tok, tool: PythonTool | None = None,
                instruction: str | None = None, end_ids: Sequence[int] | None = None,
                tool_format: str = "text", direct: Sequence[str] = ()) -> list[Group]:
    """One verified single-sample group per problem whose trace ran cleanly (one tool call then an answer; an answer
    alone for a `direct` family); its `math` verdict against the problem's answer attached (see the module
    docstring). `end_ids`: the model's end-of-turn ids (default the tokenizer's EOS). tool_format "chat": the prompt
    shows the tool's schema through the template (apply_chat_template's `tools=`), the call is the template's
    structured call and the tool's output comes back as the template's tool message, as in an RL run with
    grpo.tool_format=chat. `direct`: families whose
    problems a model can do in its head (`easy`): their trace is one turn without a call, the sum and its answer
    boxed, so a cold start shows when not to call."""
    import verifiers

    from ..rollout.base import PromptRow

    if tool_format not in ("text", "chat"):
        raise ValueError(f"traces: tool_format {tool_format!r}; expected text or chat")
    tool = tool or PythonTool()
    instruction = instruction or (CHAT_INSTRUCTION if tool_format == "chat" else INSTRUCTION)
    end = list(end_ids or stop_ids(None, tok))
    rows = [PromptRow(f"tool-{i}", f"{p.prompt}\n{instruction}", {"answer": str(p.answer), "family": p.family})
            for i, p in enumerate(problems)]
    tools = list(tool.TOOLS) if tool_format == "chat" else []  # chat: the conversation and the schemas go along
    prompts = [{"prompt_id": r.prompt_id, "prompt": render_prompt(tok, r.prompt, True, tools),
                **({"messages": [{"role": "user", "content": r.prompt}], "tools": tools} if tools else {})}
               for r in rows]
    limits = EpisodeLimits(max_turns=3, max_tool_calls=1, max_episode_tokens=1024, tool_format=tool_format)
    eps = run_episodes(None, tok, tool, prompts, SamplingConfig(max_tokens=256, seed=None), limits, stop_ids=end,
                       engine=ScriptedTurns(tok, problems, end, tool_format, direct))
    groups = []
    for r, rendered, p, e in zip(rows, prompts, problems, eps):
        if e.tool_calls != (0 if p.family in direct else 1) or e.reason != "answer":
            continue
        s = e.sample()
        verdict = verifiers.verify("math", completion=s.text, reference=str(p.answer))
        groups.append(Group(r.prompt_id, rendered["prompt"], r.row, [s.with_verdicts({"math": verdict})]))
    return groups


def write_traces(problems: Sequence[ToolProblem], tok, out_dir: str, tool: PythonTool | None = None,
                 end_ids: Sequence[int] | None = None, tool_format: str = "text",
                 instruction: str | None = None, direct: Sequence[str] = ()) -> TraceSummary:
    """The traces that pass, as out_dir/samples.jsonl (a rollout archive) with task.json naming `math` the outcome."""
    from .archive import write_groups

    groups = [g for g in make_traces(problems, tok, tool, instruction, end_ids=end_ids, tool_format=tool_format,
                                     direct=direct)
              if g.samples[0].verdicts["math"].status.value == "correct"]
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "samples.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        write_groups(f, groups, 0)
    with open(os.path.join(out_dir, "task.json"), "w") as f:
        json.dump({"outcome": "math", "source": "generated tool traces (task/embedded/tool_problems.py)"}, f)
    return TraceSummary(len(groups), len(problems) - len(groups), path)
