"""`reasoning-rl eval`'s work: sample a task's rows, verify every sample, score them (metrics.py), keeping its work.

    run_eval(model, tok, task, rows, n, sampling, log=EvalLog(dir)) -> EvalResult   metrics with standard errors

The rows go in batches of `batch_prompts`; each finished batch's verified groups are appended to the run's
archive.jsonl at once, and eval_progress.json says how many batches (and archive lines) are complete. A stopped
evaluation (Ctrl-C, SIGTERM: the first stops after the batch in progress, a second at once) keeps every finished
batch; `eval --resume` reads them back, cuts anything after the last complete batch, and goes on from the next one.
Each batch is sampled from the same seed whenever it runs, so a resumed evaluation gives the uninterrupted one's
samples and metrics. Not here: the metrics themselves (metrics.py), the command's run directory (cli/data.py).
"""
from __future__ import annotations

import dataclasses
import json
import os
import time
from dataclasses import dataclass

from ..data.archive import read_archive_rounds, write_groups
from ..data.curate import sample_verified
from ..types import Group
from .metrics import evaluate_sampled, format_split, mean_se, scored_outcome

PROGRESS = "eval_progress.json"


@dataclass(frozen=True)
class EvalResult:
    """What `run_eval` measured: the metrics (with standard errors), and the verified groups it scored."""
    metrics: dict[str, float]
    groups: list
    seconds: float


class EvalLog:
    """An evaluation's record in its run directory: archive.jsonl (every verified sample, a batch at a time) and
    eval_progress.json (the batches complete, the archive's lines then, and what the evaluation was, so a resume of
    another evaluation is refused)."""

    def __init__(self, out_dir: str, spec: dict, provenance: dict | None = None) -> None:
        self.dir, self.spec, self.provenance = out_dir, spec, provenance or {}
        self.archive = os.path.join(out_dir, "archive.jsonl")
        self.progress = os.path.join(out_dir, PROGRESS)

    def start(self) -> None:
        open(self.archive, "w").close()
        self._write_progress(0, 0, 0.0)

    def resume(self) -> tuple[int, list[Group], float]:
        """(batches complete, their groups in row order, seconds spent): the archive cut back to its last complete
        batch (a batch stopped halfway leaves nothing). A resume with other rows, n, temperature or batches is a
        UserError naming what changed."""
        from ..errors import UserError

        with open(self.progress) as f:
            done = json.load(f)
        changed = [f"{k}: {done['spec'].get(k)!r} -> {v!r}" for k, v in self.spec.items() if done["spec"].get(k) != v]
        if changed:
            raise UserError(f"eval --resume: the evaluation in {self.dir!r} was another one ({'; '.join(changed)}); "
                            "run it as it was, or start a new one")
        with open(self.archive, "rb") as f:
            lines = f.readlines()[: done["lines"]]
        with open(self.archive, "wb") as f:
            f.writelines(lines)
        groups = read_archive_rounds(self.archive).get(0, []) if lines else []
        return done["batches"], groups, done.get("seconds", 0.0)

    def record(self, groups: list[Group], batches: int, seconds: float) -> None:
        """A finished batch's groups appended (flushed to disk), then the progress that counts them."""
        with open(self.archive, "a", encoding="utf-8") as f:
            write_groups(f, groups, step=0, provenance=self.provenance)
            f.flush()
            os.fsync(f.fileno())
        with open(self.archive, "rb") as f:
            lines = sum(1 for _ in f)
        self._write_progress(batches, lines, seconds)

    def _write_progress(self, batches: int, lines: int, seconds: float) -> None:
        tmp = self.progress + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"batches": batches, "lines": lines, "seconds": round(seconds, 3), "spec": self.spec}, f)
        os.replace(tmp, self.progress)


def _order(groups: list[Group], rows: list[dict]) -> list[Group]:
    """Groups in the rows' order, the sampled ones then the greedy ones, whatever order they were read in."""
    rank = {r["prompt_id"]: i for i, r in enumerate(rows)}
    return sorted(groups, key=lambda g: (g.prompt_id.endswith("#greedy"),
                                         rank.get(g.prompt_id.removesuffix("#greedy"), len(rank))))


def run_eval(model, tok, task, rows, n: int, sampling, *, greedy: bool = True, batch_prompts: int = 32, pool=None,
             progress: bool = True, truncated: str = "fail", engine=None, log: EvalLog | None = None,
             resume: bool = False, stop=None) -> EvalResult:
    """Sample n completions per row (in batches of `batch_prompts` prompts, a progress bar with its ETA and the
    running accuracy on stderr), verify each with the task's outcome verifier, and score them; with `greedy` and a
    temperature above 0, also one greedy completion per row (`greedy` metric). At temperature 0 the samples are the
    greedy completions: one generation, n forced to 1. `truncated` (eval.truncated): "fail" counts a completion cut
    at max_tokens as failed, "score" verifies it like any other; the archive keeps the verifier's own verdicts.
    `engine`: what samples (default the hf engine; an EpisodeEngine makes every sample a multi-turn episode).
    `log`: where each finished batch goes (`resume`: read the finished ones back first). `stop`: a StopRequest;
    once it holds a signal the evaluation stops after the batch in progress and raises Interrupted (the CLI's
    one line)."""
    import sys

    from tqdm import tqdm

    if sampling.temperature == 0:
        n = 1
    done, groups, spent = log.resume() if (log is not None and resume) else (0, [], 0.0)
    if log is not None and not resume:
        log.start()
    if resume and progress:
        kept = len({g.prompt_id.removesuffix("#greedy") for g in groups})
        print(f"eval --resume: {kept} of {len(rows)} prompts kept from the stopped evaluation (its {done} finished "
              f"batches); going on from prompt {kept + 1}", file=sys.stderr)
    batches = [rows[i:i + batch_prompts] for i in range(0, len(rows), batch_prompts)]
    t0 = time.time() - spent
    bar = tqdm(total=len(rows), initial=sum(map(len, batches[:done])), desc="eval", unit="prompt", file=sys.stderr,
               disable=not progress)
    greedy_sampling = dataclasses.replace(sampling, temperature=0.0)
    try:
        for k in range(done, len(batches)):
            part = batches[k]
            got = sample_verified(model, tok, task, part, n, sampling, batch_prompts=batch_prompts,
                                  log=lambda *_: None, pool=pool, engine=engine)
            if greedy and sampling.temperature > 0:
                got += [_as_greedy(g) for g in sample_verified(model, tok, task, part, 1, greedy_sampling,
                                                               batch_prompts=batch_prompts, log=lambda *_: None,
                                                               pool=pool, engine=engine)]
            groups.extend(got)
            if log is not None:
                log.record(got, k + 1, time.time() - t0)
            bar.update(len(part))
            bar.set_postfix_str(_running(groups, task.outcome, truncated))
            if stop is not None and stop.signal and k + 1 < len(batches):
                _stopped(stop.signal, groups, rows, task, truncated, log)
    finally:
        bar.close()  # before any line about how it ended
    groups = _order(groups, rows)
    return EvalResult(score(groups, task, n, greedy, truncated), groups, time.time() - t0)


def score(groups: list[Group], task, n: int, greedy: bool, truncated: str) -> dict[str, float]:
    """Every metric of an evaluation from its verified groups (sampled ones, and greedy ones marked `#greedy`)."""
    sampled = [g for g in groups if not g.prompt_id.endswith("#greedy")]
    greedy_groups = [g for g in groups if g.prompt_id.endswith("#greedy")]
    ks = tuple(k for k in (1, 2, 4, 8, 16, 32, 64, 128) if k <= n)
    metrics = evaluate_sampled(sampled, task.outcome, ks, answer_key=task.answer_key, truncated=truncated)
    scored = greedy_groups or sampled
    if greedy:
        metrics["greedy"], metrics["greedy_se"] = mean_se(
            [float(bool(scored_outcome(g.samples[0], task.outcome, truncated))) for g in scored])
    # format and correctness of the greedy completions where there are any, else of every sample
    split_on = [g.samples[0] for g in greedy_groups] if greedy_groups else [s for g in sampled for s in g.samples]
    metrics.update(format_split(split_on, task.outcome, truncated))
    every = [s for g in groups for s in g.samples]
    if any(s.turns for s in every):
        from ..rollout.episodes import episode_metrics

        metrics.update({k: v for k, v in episode_metrics(every).items() if k.startswith("tools/")})
    return metrics


def _running(groups: list[Group], outcome: str, truncated: str) -> str:
    """The progress bar's note: accuracy so far (greedy where there is one) over the prompts done."""
    greedy = [g for g in groups if g.prompt_id.endswith("#greedy")] or groups
    passes = [bool(scored_outcome(s, outcome, truncated)) for g in greedy for s in g.samples]
    return f"accuracy {sum(passes) / max(1, len(passes)):.3f}"


def _stopped(signal: str, groups: list[Group], rows: list[dict], task, truncated: str, log: EvalLog | None):
    from ..interrupts import Interrupted

    prompts = len({g.prompt_id.removesuffix("#greedy") for g in groups})
    where = f"; samples and verdicts in {log.archive}" if log is not None else ""
    so_far = _running(groups, task.outcome, truncated)
    raise Interrupted(f"stopped by {signal} after {prompts} of {len(rows)} prompts ({so_far} so far){where}; "
                      "continue with the same command and --resume")


def _as_greedy(g: Group) -> Group:
    """A greedy group archived beside the sampled ones: its prompt id marked, so pass@k never mixes the two."""
    return Group(f"{g.prompt_id}#greedy", g.prompt, dict(g.row, decoding="greedy"), g.samples)
