"""`reasoning-rl task check`: what a run would train and evaluate on, before any model loads.

    check_report(cfg, task, tokenizer, probe) -> dict     rows, drops, rendered prompts, reward terms, parse shares
    probe_references(task, rows, pool, n)     -> dict     per reward term: how many references it could not parse
    require_parseable(task, pool)                         a run's start: a UserError if the outcome verifier can
                                                          parse none of the references it was probed on

A reference is probed by verifying it against itself (a gold answer is its own correct completion;
a test spec is run against an empty program): a term that answers ABSTAIN cannot read that
reference, so no sample of that row could ever be scored by it. Terms that need no reference
(format rules) are not probed. Not here: reading or rendering rows (task/task.py).
"""
from __future__ import annotations

from collections import Counter
from typing import Any

import verifiers
from verifiers.registry import distribution

from ..errors import UserError
from .task import Task
from ..types import Status


def _probe_text(reference: Any) -> str:
    return "" if isinstance(reference, (dict, list)) else str(reference)


def probe_references(task: Task, rows: list[dict], pool=None, n: int = 200) -> dict[str, dict]:
    """{term: {"probed", "abstain", "share_abstain", "example"}} over the first `n` rows, for every reward term
    that reads a reference."""
    rows = rows[:n]
    out: dict[str, dict] = {}
    for t in task.reward().terms:
        if not {"reference", "tests"} & set(verifiers.get(t.verifier).spec.needs) or not rows:
            continue
        refs = [r["refs"].get(t.verifier, r["reference"]) for r in rows]
        reward = verifiers.Reward((verifiers.Term(t.verifier, 1.0, dict(t.options)),), t.verifier)
        verdicts = reward.verify([_probe_text(x) for x in refs], refs, [r["prompt"] for r in rows], pool=pool)
        statuses = Counter(v[t.verifier].status for v in verdicts)
        bad = [(r, v[t.verifier]) for r, v in zip(rows, verdicts) if v[t.verifier].status == Status.ABSTAIN]
        out[t.verifier] = {"probed": len(rows), "abstain": len(bad), "share_abstain": round(len(bad) / len(rows), 4),
                           "statuses": {s.value: c for s, c in sorted(statuses.items())},
                           "example": {"prompt_id": bad[0][0]["prompt_id"], "reference": str(bad[0][0]["reference"])[:80],
                                       "detail": bad[0][1].detail[:120]} if bad else None}
    return out


def require_parseable(task: Task, pool=None, n: int = 16) -> None:
    """A run's start: the outcome verifier must be able to read at least one of the first `n` train references."""
    probe = probe_references(task, task.train, pool, n).get(task.outcome)
    if probe and probe["abstain"] == probe["probed"]:
        ex = probe["example"]
        raise UserError(f"tasks.reference_col: the outcome verifier {task.outcome!r} cannot parse any of the first "
                        f"{probe['probed']} references of {task.source!r} (e.g. row {ex['prompt_id']}: "
                        f"{ex['reference']!r}: {ex['detail']})")


def check_report(cfg, task: Task, tokenizer, probe: int = 200, pool=None) -> dict:
    """Everything `task check` prints, as data."""
    prompts = [{"prompt_id": r["prompt_id"], "tokens": len(tokenizer(r["prompt"])["input_ids"]), "text": r["prompt"]}
               for r in task.train[:3]]
    lengths = [len(tokenizer(r["prompt"])["input_ids"]) for r in task.train[:probe]]
    terms = [{"verifier": t.verifier, "weight": t.weight, "options": dict(t.options),
              "version": verifiers.get(t.verifier).version, "distribution": distribution(t.verifier)}
             for t in task.reward().terms]
    return {"source": task.source, "preset": cfg.tasks.preset, "rows": {"train": len(task.train),
                                                                        "test": len(task.test)},
            "dropped": dict(task.dropped), "chat_template": task.chat, "checked": task.checked,
            "outcome": task.outcome, "reward_terms": terms,
            "prompt_tokens": {"max": max(lengths, default=0), "mean": round(sum(lengths) / max(1, len(lengths)), 1),
                              "tokenizer": cfg.model.name_or_path},
            "prompts": prompts,
            "references": {split: probe_references(task, rows, pool, probe)
                           for split, rows in (("train", task.train), ("test", task.test))}}


def format_report(rep: dict) -> str:
    lines = [f"task: {rep['source']}" + (f" (preset {rep['preset']})" if rep["preset"] else ""),
             f"rows: train {rep['rows']['train']}, held-out {rep['rows']['test']}"]
    for reason, n in sorted(rep["dropped"].items()):
        lines.append(f"dropped: {n} ({reason})")
    tokens = rep["prompt_tokens"]
    lines.append(f"prompts: chat template {'on' if rep['chat_template'] else 'off'}; tokens max {tokens['max']}, mean "
                 f"{tokens['mean']} (counted with the tokenizer of {tokens['tokenizer']!r}, model.name_or_path"
                 + (": the embedded model's one character a token; --set model.name_or_path=... counts with yours"
                    if tokens["tokenizer"] == "tiny" else "") + f"); the outcome reads the {rep['checked']}")
    lines.append(f"reward: outcome {rep['outcome']!r}; terms " + ", ".join(
        f"{t['verifier']} x {t['weight']:g} ({t['distribution']} {t['version']})" for t in rep["reward_terms"]))
    for split, probes in rep["references"].items():
        for name, p in probes.items():
            line = f"references ({split}) {name}: {p['abstain']}/{p['probed']} unparseable ({p['share_abstain']:.1%})"
            if p["example"]:
                line += f", e.g. {p['example']['prompt_id']}: {p['example']['reference']!r} ({p['example']['detail']})"
            lines.append(line)
    for p in rep["prompts"]:
        lines.append(f"--- prompt {p['prompt_id']} ({p['tokens']} tokens) ---\n{p['text']}")
    return "\n".join(lines)
