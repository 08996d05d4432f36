"""`reasoning-rl eval`'s work: sample a task's rows, verify every sample, score them (eval/metrics.py's metrics).

    run_eval(model, tok, task, rows, n, sampling) -> EvalResult   metrics with standard errors, the verified groups

Not here: the metrics themselves (eval/metrics.py), writing the run directory (cli/data.py).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..data.curate import sample_verified
from .metrics import evaluate_sampled, mean_se, scored_outcome
from ..types import Group


@dataclass(frozen=True)
class EvalResult:
    """What `run_eval` measured: the metrics (with standard errors), and the verified groups it scored."""
    metrics: dict[str, float]
    groups: list
    seconds: float


def run_eval(model, tok, task, rows, n: int, sampling, *, greedy: bool = True, chunk: int = 64, pool=None,
             progress: bool = True, truncated: str = "fail", engine=None) -> EvalResult:
    """Sample n completions per row (in chunks of `chunk` prompts, a progress bar with its ETA on stderr), verify
    each with the task's outcome verifier, and score them; with `greedy` and a temperature above 0, also one greedy
    completion per row (`greedy` metric). At temperature 0 the samples are the greedy completions: one generation,
    n forced to 1, reported as both avg@1 and greedy. `truncated` (eval.truncated): "fail" counts a completion cut at
    max_tokens as failed, "score" verifies it like any other; the archive keeps the verifier's own verdicts.
    `engine`: what samples (default the hf engine; an EpisodeEngine makes every sample a multi-turn episode, and the
    metrics then include its tools/* figures, greedy episodes' included)."""
    import sys
    import time

    from tqdm import tqdm

    if sampling.temperature == 0:
        n = 1
    ks = tuple(k for k in (1, 2, 4, 8, 16, 32, 64, 128) if k <= n)
    t0 = time.time()
    groups, greedy_groups = [], []
    bar = tqdm(total=len(rows), desc="eval", unit="prompt", file=sys.stderr, disable=not progress)
    greedy_sampling = dataclasses.replace(sampling, temperature=0.0)
    for i in range(0, len(rows), chunk):
        part = rows[i:i + chunk]
        got = sample_verified(model, tok, task, part, n, sampling, batch_prompts=chunk, log=lambda *_: None,
                              pool=pool, engine=engine)
        groups.extend(got)
        if greedy and sampling.temperature > 0:
            greedy_groups.extend(sample_verified(model, tok, task, part, 1, greedy_sampling, batch_prompts=chunk,
                                                 log=lambda *_: None, pool=pool, engine=engine))
        bar.update(len(part))
    bar.close()
    metrics = evaluate_sampled(groups, task.outcome, ks, answer_key=task.answer_key, truncated=truncated)
    if greedy:
        scored = greedy_groups or groups
        metrics["greedy"], metrics["greedy_se"] = mean_se(
            [float(bool(scored_outcome(g.samples[0], task.outcome, truncated))) for g in scored])
    every = [s for g in groups + greedy_groups for s in g.samples]
    if any(s.turns for s in every):
        from ..rollout.episodes import episode_metrics

        metrics.update({k: v for k, v in episode_metrics(every).items() if k.startswith("tools/")})
    return EvalResult(metrics, groups + [_as_greedy(g) for g in greedy_groups], time.time() - t0)


def _as_greedy(g: Group) -> Group:
    """A greedy group archived beside the sampled ones: its prompt id marked, so pass@k never mixes the two."""
    return Group(f"{g.prompt_id}#greedy", g.prompt, dict(g.row, decoding="greedy"), g.samples)
