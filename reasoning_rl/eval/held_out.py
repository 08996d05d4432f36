"""Held-out scores: the one place a held-out number is computed, for every command and trainer.

    held_out(task, model, tok, rows, ...) -> dict    greedy completions (or, with `rl` naming an environment,
                                                     greedy multi-turn episodes) scored by the outcome verifier
    accuracy(task, model, tok, rows, ...) -> float   held_out's `accuracy` alone
    configured(cfg, task, model, tok, rows) -> dict  held_out with a run config's generation and eval knobs
    score(task, rows, completions, cut, ...) -> dict the scores of completions already made

The scores: `accuracy` (passes over rows); its split into format and correctness, `parseable` (the share of rows
whose completion has an answer the outcome verifier read: CORRECT or INCORRECT, not UNPARSEABLE or masked) and
`accuracy_parseable` (passes among those; 0 when there are none); `truncated` (the share cut at the token limit); and,
where the outcome verifier can tell (`states_answer`, the math verifier's), `stated` (completions that state their
answer in an answer form: a box, ####, "the answer is", ...) and `accuracy_stated`; episodes add `tool_calls` per
episode, and where any episode called, `tool_ok` and `answer_is_tool_output` (`tool_shares`). With truncated="fail"
(eval.truncated) a cut completion is never a pass, whatever the verifier read in it; one whose environment failed is
never a pass.

Correctness is the task's (Task.verify, the reward's own check). Not here: sampled evaluation with pass@k (metrics.py,
sampled.py), decoding (reasoning_rl/rollout/greedy.py, episodes.py).
"""
from __future__ import annotations

from typing import Sequence

import verifiers

from ..errors import UserError
from ..rollout import greedy
from ..types import Status


def held_out(task, model, tok, rows: Sequence[dict], *, max_tokens: int = 32, pool=None, truncated: str = "fail",
             cpu_decode: str = "auto", rl=None, stop: Sequence[str] = ()) -> dict[str, float]:
    """Greedy held-out scores of `rows` (see the module's docstring). `rl`: a run's RL section; when it names an
    environment (`grpo.environment`), each row is a greedy episode with that environment and its limits.
    `cpu_decode`, `stop`: GenerationConfig's (the task's plain-template cue when `stop` is empty: Task.stops)."""
    if not rows:
        raise UserError(f"eval: no held-out rows of {task.source!r} to evaluate")
    if rl is not None and rl.environment:
        return _episodes(task, model, tok, rows, rl, max_tokens, pool, truncated, cpu_decode, task.stops(stop))
    completions, cut = greedy.greedy_decode(model, tok, [r["prompt"] for r in rows], max_tokens,
                                            cpu_decode=cpu_decode, stop=task.stops(stop))
    return score(task, rows, completions, cut, pool, truncated)


def accuracy(task, model, tok, rows: Sequence[dict], **kw) -> float:
    """Share of rows whose greedy completion the outcome verifier passes (a masked verdict is not a pass)."""
    return held_out(task, model, tok, rows, **kw)["accuracy"]


def configured(cfg, task, model, tok, rows: Sequence[dict], pool=None, rl=None) -> dict[str, float]:
    """`held_out` as a run's config sets it: generation.max_tokens, .cpu_decode and .stop, and eval.truncated."""
    return held_out(task, model, tok, rows, max_tokens=cfg.generation.max_tokens, pool=pool,
                    truncated=cfg.eval.truncated, cpu_decode=cfg.generation.cpu_decode, rl=rl, stop=cfg.generation.stop)


def score(task, rows: Sequence[dict], completions: Sequence[str], cut: Sequence[bool], pool=None,
          truncated: str = "fail", failed: Sequence[bool] | None = None) -> dict[str, float]:
    """The held-out scores of given completions (`cut`: each was cut at its token limit; `failed`: its environment
    failed, so it is never a pass): what greedy completions and greedy episodes are both scored by."""
    failed = failed or [False] * len(rows)
    verdicts = [v[task.outcome] for v in task.verify(task.outcome_reward(), rows, completions, pool=pool,
                                                     truncated=cut)]
    ok = [bool(v.passed) and not (c and truncated == "fail") and not f for v, c, f in zip(verdicts, cut, failed)]
    passed = sum(ok)
    parsed = sum(v.status in (Status.CORRECT, Status.INCORRECT) for v in verdicts)
    out = {"accuracy": passed / len(rows), "parseable": parsed / len(rows),
           "accuracy_parseable": passed / parsed if parsed else 0.0, "truncated": sum(cut) / len(rows)}
    states = getattr(verifiers.get(task.outcome), "states_answer", None)
    if states is not None:  # the math verifier: did the completion state its answer, or was one read into it?
        stated = [states(task.checked_text(r, c)) for r, c in zip(rows, completions)]
        n = sum(stated)
        out.update(stated=n / len(rows), accuracy_stated=sum(o for o, s in zip(ok, stated) if s) / n if n else 0.0)
    return out


def _episodes(task, model, tok, rows: Sequence[dict], rl, max_tokens: int, pool, truncated: str,
              cpu_decode: str, stop: tuple[str, ...] = ()) -> dict[str, float]:
    """Greedy episodes with the environment and limits `rl` names, scored as single completions are, and their tool
    calls per episode."""
    from ..rollout import SamplingConfig
    from ..rollout.environments import ENVIRONMENTS
    from ..rollout.episodes import EpisodeLimits, run_episodes

    env = ENVIRONMENTS.get(rl.environment).from_config(rl)
    try:
        eps = run_episodes(model, tok, env, [{"prompt_id": r.get("prompt_id", str(i)), "prompt": r["prompt"],
                                              **{k: r[k] for k in ("messages", "tools") if k in r}}
                                             for i, r in enumerate(rows)],
                           SamplingConfig(temperature=0.0, max_tokens=max_tokens, cpu_decode=cpu_decode, stop=stop),
                           EpisodeLimits.of(rl))
    finally:
        getattr(env, "shutdown", lambda: None)()
    texts = [e.sample().text for e in eps]
    out = score(task, rows, texts, [e.truncated for e in eps], pool, truncated, failed=[bool(e.failure) for e in eps])
    return dict(out, tool_calls=sum(e.tool_calls for e in eps) / max(1, len(rows)),
                **tool_shares(task, rows, eps, texts, pool))


def tool_shares(task, rows: Sequence[dict], eps, texts: Sequence[str], pool=None) -> dict[str, float]:
    """How the episodes used their calls: `tool_ok`, the share of calls that ran without error (neither the program
    nor the environment failed), and `answer_is_tool_output`, the share of episodes with a clean tool output whose
    answer equals the last such output, as the outcome verifier judges equality (the output as the reference).
    Empty where no episode called (a share of nothing is not 0)."""
    calls = [t for e in eps for t in e.turns if t.call]
    if not calls:
        return {}
    out = {"tool_ok": sum(not t.program_error and not t.error for t in calls) / len(calls)}
    last = [next((t.observation for t in reversed(e.turns) if t.call and t.observation and not t.program_error), None)
            for e in eps]
    used = [i for i, o in enumerate(last) if o is not None and o.strip()]
    if used:
        verdicts = task.verify(task.outcome_reward(), [_with_reference(rows[i], last[i].strip()) for i in used],
                               [texts[i] for i in used], pool=pool, truncated=[eps[i].truncated for i in used])
        out["answer_is_tool_output"] = sum(bool(v[task.outcome].passed) for v in verdicts) / len(used)
    return out


def _with_reference(row: dict, reference: str) -> dict:
    """`row` with `reference` as its gold (inside a routed row's {"verifier", "reference"} where it has one)."""
    ref = row["reference"]
    return dict(row, reference=dict(ref, reference=reference) if isinstance(ref, dict) else reference, refs={})
