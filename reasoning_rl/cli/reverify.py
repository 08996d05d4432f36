"""`reasoning-rl reverify RUN_DIR`: re-score every archived sample and report the verdicts that flip.

    reverify(run_dir, verifier=None, options=None, pool=None) -> Report

Each line of a run's `archive.jsonl` is checked again as the run checked it (`task.json`: the completion,
or the raw prompt + completion for a code body) against the same reference, by the current version of
each reward term's verifier, or, with `verifier`, by that one verifier (with `options`) standing in for
the outcome. A flip is a change of class between the archived verdict and the new one:

    pass->fail   a sample the run rewarded as passing that the new verdict fails (the dangerous kind)
    fail->pass   the reverse
    scored->masked / masked->scored   a verdict that gained or lost an opinion

counted per step and per task family, with examples. Written to RUN_DIR/reverify/: flips.jsonl, summary.json,
and reward.png (the outcome's mean score per step under the archived and the new verdicts). Versions and
option hashes of the archived verdicts (the archive's `provenance`) are set beside the current ones, so a
report says which versions disagree. Non-deterministic verifiers (a sampled judge) may flip on their own;
their flips are counted apart. Not here: the monitors during training (trainers/monitors.py).
"""
from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import verifiers

from ..errors import UserError
from ..task.task import checked_text, options_hash
from ..task.sources import read_rows
from ..types import Status

FLIPS = ("pass->fail", "fail->pass", "scored->masked", "masked->scored")


def _cls(status: str) -> str:
    if status == Status.CORRECT.value:
        return "pass"
    return "fail" if Status(status).scored else "masked"


def _flip(old: str, new: str) -> str | None:
    a, b = _cls(old), _cls(new)
    if a == b:
        return None
    if "masked" in (a, b):
        return "scored->masked" if b == "masked" else "masked->scored"
    return f"{a}->{b}"


@dataclass
class Report:
    samples: int = 0
    flips: Counter = field(default_factory=Counter)
    by_step: dict = field(default_factory=lambda: defaultdict(Counter))
    by_family: dict = field(default_factory=lambda: defaultdict(Counter))
    examples: list = field(default_factory=list)
    versions: dict = field(default_factory=dict)  # verifier -> {"archived": [...], "current": ...}
    reward_old: dict = field(default_factory=lambda: defaultdict(list))  # step -> outcome scores (None = masked)
    reward_new: dict = field(default_factory=lambda: defaultdict(list))

    def summary(self) -> dict:
        return {"samples": self.samples, "flips": {k: self.flips.get(k, 0) for k in FLIPS},
                "by_step": {str(s): dict(c) for s, c in sorted(self.by_step.items())},
                "by_family": {f: dict(c) for f, c in sorted(self.by_family.items())}, "versions": self.versions,
                "examples": self.examples[:20]}


def _read(run_dir: str) -> tuple[dict, list[dict]]:
    task_path, archive = os.path.join(run_dir, "task.json"), os.path.join(run_dir, "archive.jsonl")
    if not os.path.isfile(archive):
        raise UserError(f"reverify: {run_dir!r} holds no archive.jsonl (a training run's directory)")
    if not os.path.isfile(task_path):
        raise UserError(f"reverify: {run_dir!r} holds no task.json (runs record one since this version); "
                        "give --verifier to re-score the outcome")
    with open(task_path) as f:
        task = json.load(f)
    return task, read_rows(archive)


def reverify(run_dir: str, verifier: str | None = None, options: dict | None = None, pool=None,
             log=lambda s: None) -> Report:
    """Re-score the run's archive (see the module docstring); `verifier` replaces the outcome's verifier."""
    task, lines = _read(run_dir)
    outcome = task["outcome"]
    if verifier:
        verifiers.get(verifier)  # an unknown name: one line listing the valid ones
        checks = [(outcome, verifier, dict(options or {}))]  # (archived verdict, new verifier, its options)
    else:
        checks = [(t["verifier"], t["verifier"], t["options"]) for t in task["terms"]]
    rep = Report(samples=len(lines))
    for old_name, new_name, opts in checks:
        archived = sorted({json.dumps(ln.get("provenance", {}).get(old_name)) for ln in lines})
        rep.versions[new_name] = {"archived_as": old_name, "archived": [json.loads(a) for a in archived],
                                  "current": {"version": verifiers.get(new_name).version,
                                              "options_hash": options_hash(opts)}}
        _check(rep, lines, task, old_name, new_name, opts, outcome, pool, log)
    return rep


def _check(rep: Report, lines, task, old_name, new_name, opts, outcome, pool, log) -> None:
    texts = [checked_text(task["checked"], ln["task"].get("raw", ln["prompt"]), ln["text"]) for ln in lines]
    refs = [ln["task"].get("refs", {}).get(old_name, ln["task"].get("reference")) for ln in lines]
    reward = verifiers.Reward((verifiers.Term(new_name, 1.0, opts),), new_name)
    new = [v[new_name] for v in reward.verify(texts, refs, [ln["prompt"] for ln in lines], pool=pool,
                                              truncated=[ln.get("finish_reason") == "length" for ln in lines])]
    deterministic = verifiers.get(new_name).spec.deterministic
    for ln, v in zip(lines, new):
        old = ln["verdicts"].get(old_name)
        if old is None:
            continue
        if old_name == outcome:
            rep.reward_old[ln["step"]].append(old["score"])
            rep.reward_new[ln["step"]].append(v.score)
        kind = _flip(old["status"], v.status.value)
        if kind is None:
            continue
        key = kind if deterministic else f"{kind} (non-deterministic)"
        rep.flips[key] += 1
        rep.by_step[ln["step"]][key] += 1
        rep.by_family[str(ln["task"].get("task", "?"))][key] += 1
        if len(rep.examples) < 200:
            rep.examples.append({"step": ln["step"], "prompt_id": ln["prompt_id"], "index": ln.get("index"),
                                 "verifier": new_name, "flip": key, "old": old, "new": {
                                     "status": v.status.value, "score": v.score, "detail": v.detail},
                                 "text": ln["text"][:200]})
    log(f"{new_name}: {sum(rep.flips.values())} flips over {len(lines)} samples")


def write_report(rep: Report, out_dir: str) -> None:
    """flips.jsonl, summary.json and reward.png in `out_dir`, all three or none (an interrupt writes none)."""
    from ..data.run_dir import written_together

    with written_together(out_dir) as d:
        with open(os.path.join(d, "flips.jsonl"), "w", encoding="utf-8") as f:
            for e in rep.examples:
                f.write(json.dumps(e, ensure_ascii=False) + "\n")
        with open(os.path.join(d, "summary.json"), "w") as f:
            json.dump(rep.summary(), f, indent=1)
        _plot(rep, os.path.join(d, "reward.png"))


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else float("nan")


def _plot(rep: Report, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = sorted(rep.reward_old)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, [_mean(rep.reward_old[s]) for s in steps], label="archived verdicts")
    ax.plot(steps, [_mean(rep.reward_new[s]) for s in steps], label="re-verified")
    ax.set_xlabel("step")
    ax.set_ylabel("outcome score (mean over scored samples)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def format_table(rep: Report) -> str:
    rows = [f"{rep.samples} samples re-verified; flips: " + ", ".join(f"{k} {rep.flips.get(k, 0)}" for k in FLIPS)]
    for k in sorted(set(rep.flips) - set(FLIPS)):
        rows.append(f"  {k}: {rep.flips[k]}")
    for name, v in rep.versions.items():
        rows.append(f"  {name}: archived {v['archived']} (as {v['archived_as']}), current {v['current']}")
    for step, c in sorted(rep.by_step.items()):
        rows.append(f"  step {step}: " + ", ".join(f"{k} {n}" for k, n in sorted(c.items())))
    return "\n".join(rows)
