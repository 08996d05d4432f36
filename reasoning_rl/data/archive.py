"""The rollout archive: every verified sample of a run, one JSON line each, for re-verification and pairing.

A line holds the step, prompt id, prompt, the group's row under "task" (reference answer etc.), the sample's index in
its group, text, token count, finish reason, the version of the weights that sampled it and its
staleness (updates behind at this step), every verdict (status, score, detail), and the
provenance of each verdict: its verifier's version and a hash of the options it was called with
(`provenance`), so a later `reasoning-rl reverify` can say which versions disagree.
`read_archive` rebuilds the `Group`s (one per step and prompt; `read_archive_rounds` by step), so `reasoning-rl pairs --archive`
can build preference pairs from a finished training run. Standard library only.
"""
from __future__ import annotations

import json
from typing import Iterable, TextIO

from ..types import Group, Sample, Status, Verdict


def provenance(described: dict) -> dict:
    """verifier -> {"version", "options_hash"}, from a task's `describe(reward)`: what `write_groups` stamps on each
    verdict."""
    return {t["verifier"]: {"version": t["version"], "options_hash": t["options_hash"]} for t in described["terms"]}


def write_groups(f: TextIO, groups: Iterable[Group], step: int, provenance: dict | None = None,
                 sampled: dict | None = None) -> int:
    """One line per sample; `provenance` maps a verifier name to {"version", "options_hash"}; `sampled` says how the
    samples were drawn where no run's config says it ({"model", "temperature", ...}: `curate`, the recipe's
    own samples)."""
    n = 0
    for g in groups:
        for i, s in enumerate(g.samples):
            line = {"step": step, "prompt_id": g.prompt_id, "prompt": g.prompt, "index": i,
                    # the chat messages (and tool schemas) are the prompt again, before rendering: the rendered
                    # prompt is kept
                    "task": {k: v for k, v in g.row.items() if k not in ("messages", "tools")},
                    "text": s.text, "n_tokens": len(s.token_ids), "finish_reason": s.finish_reason,
                    "verdicts": {k: {"status": v.status.value, "score": v.score, "detail": v.detail}
                                 for k, v in s.verdicts.items()}}
            if s.turns:  # a multi-turn episode: each turn's model text, tool call, observation and timings
                line["turns"] = [t.to_dict() for t in s.turns]
                line["model_tokens"] = sum(s.loss_mask)
                # its ids as sampled and which are the model's: what a pair of episodes trains on (data/pairs.py)
                line["token_ids"], line["loss_mask"] = list(s.token_ids), list(s.loss_mask)
            if s.error:
                line["error"] = s.error
            if s.weight_version is not None:  # which weights sampled it, and how many updates behind they were
                line["weight_version"] = s.weight_version
                line["staleness"] = step - 1 - s.weight_version
            if provenance:
                line["provenance"] = {k: provenance[k] for k in s.verdicts if k in provenance}
            if sampled:
                line["sampled"] = sampled
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
            n += 1
    return n


def read_archive(path: str) -> list[Group]:
    """Groups keyed by (step, prompt_id), samples in their original order."""
    return [g for groups in read_archive_rounds(path).values() for g in groups]


def read_archive_rounds(path: str) -> dict[int, list[Group]]:
    """step -> that round's groups (ordered by prompt id), samples in their original order."""
    groups: dict[tuple[int, str], dict] = {}
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
                key = (int(r["step"]), str(r["prompt_id"]))
                verdicts = {k: Verdict(Status(v["status"]), v["score"], v.get("detail", ""))
                            for k, v in r["verdicts"].items()}
                # an episode comes back whole: its turns, and its ids with their loss mask
                sample = Sample(r["text"], finish_reason=r.get("finish_reason", "stop"), verdicts=verdicts,
                                turns=tuple(r.get("turns", ())), error=r.get("error", ""),
                                token_ids=tuple(r.get("token_ids", ())), loss_mask=tuple(r.get("loss_mask", ())))
            except (KeyError, ValueError, TypeError) as e:
                raise ValueError(f"{path}:{lineno}: not a rollout-archive line ({type(e).__name__}: {e})") from None
            entry = groups.setdefault(key, {"prompt": r["prompt"], "task": r.get("task", {}), "samples": {}})
            entry["samples"][int(r.get("index", len(entry["samples"])))] = sample
    out: dict[int, list[Group]] = {}
    for (step, pid), e in sorted(groups.items()):
        samples = [e["samples"][i] for i in sorted(e["samples"])]
        out.setdefault(step, []).append(Group(pid, e["prompt"], e["task"], samples))
    return out
