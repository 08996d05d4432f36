"""A data set's gold solutions as calculator episodes, the supervised targets of a model that calls the calculator
(tasks.target_format=calculator; the recipe's SFT stage with grpo.environment=calculator).

    gold_targets(task, tok, rl) -> (rows, GoldSummary)   SFT rows: the prompt, and the ids and loss mask of the episode
                                                         (or the text completion, for the other target formats)

Each solution's turns (task/task.py `calculator_segments`: GSM8K's annotations `<<48/2=24>>` and lines that are an
equation become calls `<<48/2>>`) are played through the episode machinery RL uses (rollout/episodes.py), the model's
turns scripted instead of sampled and the calculator answering each call there and then: the ids and the loss mask
are exactly an RL episode's, the calculator's answers masked off. A solution is left out, and counted, where the
calculator's answer to a call is not the value the solution gives it, where the episode would not fit the run's
limits (grpo.max_turns, max_tool_calls, max_episode_tokens), or where its final answer does not pass the task's
outcome verifier.

Not here: the turns themselves (task/task.py), the training (trainers/sft.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from ..errors import UserError
from ..rollout.base import SamplingConfig
from ..rollout.environments import ENVIRONMENTS, calculate
from ..rollout.episodes import EpisodeLimits, run_episodes
from ..task.solutions import calculator_segments
from ..task.task import Task
from .tool_traces import end_of_turn


@dataclass(frozen=True)
class GoldSummary:
    """Rows with a gold solution, targets made, and why the others were left out."""
    rows: int
    targets: int
    left_out: dict = field(default_factory=dict)

    def line(self) -> str:
        why = ", ".join(f"{n} {k}" for k, n in sorted(self.left_out.items()) if n)
        return f"{self.targets} gold episodes of {self.rows} solutions" + (f" (left out: {why})" if why else "")


class ScriptedTurns:
    """Stands in for a rollout engine (`continue_ids`): episode i's k-th segment is turns[i][k], the last one ended by
    the end-of-turn id."""

    def __init__(self, tok, turns: Sequence[Sequence[str]], end_ids: Sequence[int]) -> None:
        self.tok, self.turns, self.end, self.taken = tok, turns, list(end_ids), {}

    def continue_ids(self, seqs, max_new, stops, sampling, seeds=None, keys=None):
        out = []
        for key in keys:
            i = key[1]
            k = self.taken.get(i, 0)
            self.taken[i] = k + 1
            last = k == len(self.turns[i]) - 1
            ids = self.tok(self.turns[i][k], add_special_tokens=False)["input_ids"] + (self.end[:1] if last else [])
            out.append((ids, [0.0] * len(ids)))
        return out


def _agrees(expression: str, value: str) -> bool:
    """The calculator answers `expression` with the value the solution gives it."""
    try:
        got, want = float(calculate(expression)), float(value)
    except (ValueError, SyntaxError, ZeroDivisionError, ArithmeticError):
        return False
    return abs(got - want) <= 1e-6 * max(1.0, abs(want))


def gold_targets(task: Task, tok, rl) -> tuple[list[dict], GoldSummary]:
    """The SFT rows of the task's gold solutions as tasks.target_format says: text completions (`Task.gold_rows`), or
    for `calculator` episodes with the environment rl.environment, which must be the calculator."""
    if task.cfg.target_format != "calculator":
        rows = task.gold_rows()
        return rows, GoldSummary(len(rows), len(rows))
    if rl.environment != "calculator":
        raise UserError(f"tasks.target_format=calculator writes the gold solutions as calls of the calculator; set "
                        f"{rl.SECTION}.environment=calculator (got {rl.environment!r}) so that training and evaluation "
                        "answer them")
    rows = [r for r in task.train if r.get("target") not in (None, "")]
    if not rows:
        task.gold_rows()  # the one line naming tasks.target_col
    left = {"no calculation": 0, "a call the calculator answers otherwise": 0, "past the episode limits": 0,
            "a final answer that does not pass": 0}
    kept, turns = [], []
    for r in rows:
        segs = calculator_segments(str(r["target"]))
        if segs is None:
            left["no calculation"] += 1
        elif not all(_agrees(t[t.rindex("<<") + 2:-2], v) for t, v in segs[:-1]):
            left["a call the calculator answers otherwise"] += 1
        else:
            kept.append(r)
            turns.append([t for t, _ in segs])
    limits = EpisodeLimits.of(rl)
    env = ENVIRONMENTS.get("calculator").from_config(rl)
    eps = run_episodes(None, tok, env, [{"prompt_id": r["prompt_id"], "prompt": r["prompt"]} for r in kept],
                       SamplingConfig(max_tokens=limits.max_episode_tokens, seed=None), limits,
                       stop_ids=end_of_turn(tok) or None, engine=ScriptedTurns(tok, turns, end_of_turn(tok)))
    samples = [(r, e.sample()) for r, e, t in zip(kept, eps, turns)]
    fit = [(r, s) for (r, s), e, t in zip(samples, eps, turns) if e.reason == "answer" and e.tool_calls == len(t) - 1]
    left["past the episode limits"] = len(samples) - len(fit)
    verdicts = task.verify(task.outcome_reward(), [r for r, _ in fit], [s.text for _, s in fit])
    out = [{"prompt": r["prompt"], "prompt_id": r["prompt_id"], "ids": list(s.token_ids),
            "loss_mask": list(s.loss_mask)} for (r, s), v in zip(fit, verdicts) if v[task.outcome].passed]
    left["a final answer that does not pass"] = len(fit) - len(out)
    if not out:
        raise UserError(f"tasks.target_format=calculator: none of the {len(rows)} gold solutions of {task.source!r} "
                        f"makes a calculator episode ({GoldSummary(len(rows), 0, left).line()})")
    return out, GoldSummary(len(rows), len(out), left)
