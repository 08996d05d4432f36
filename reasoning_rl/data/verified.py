"""Verified samples as supervised targets: fine-tuning on what the verifier passed (rejection sampling, STaR,
ReST-EM; docs/algorithms.md §rejection-sampling).

    read_targets(path, verifier=None, include_failed=False) -> (targets, summary)

`path` is either
  - a rollout archive: the `samples.jsonl` that `reasoning-rl curate` writes, or the `archive.jsonl` of a training
    run or an `eval` (one line per sample: the prompt as the model saw it, the completion, every verdict; for a
    multi-turn episode its ids as sampled and their loss mask), or
  - any JSONL/JSON/Parquet/CSV of rows with `prompt` and `completion` and the verdict as `passed` (true/false) or
    `status` (correct, incorrect, ...): a prompt there is the user's text, rendered with the model's chat template
    as the task renders prompts.
By default a target is a sample that passed the outcome verifier; a masked verdict (timeout, error, abstain) is
never a target, whatever `include_failed` says. Several samples per prompt are kept (distinct completions). A
multi-turn episode is a target as its ids, the loss masked off the tool's output exactly as in RL.

Not here: training (models/sft.py), sampling them (data/curate.py).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from ..errors import UserError
from ..task.sources import read_rows
from ..types import MASKED, Status


@dataclass(frozen=True)
class Target:
    """One supervised target: the prompt (`rendered`: exactly the text the model saw), the completion, and for an
    episode its ids after the prompt with the loss mask (empty: tokenize the completion, every token trained)."""
    prompt: str
    completion: str
    rendered: bool = True
    ids: tuple[int, ...] = ()
    loss_mask: tuple[int, ...] = ()


@dataclass(frozen=True)
class TargetSummary:
    """What a samples file held: rows read, targets kept (and of how many prompts), left out and why."""
    read: int
    targets: int
    prompts: int
    failed: int = 0
    masked: int = 0
    duplicates: int = 0
    verifier: str = ""
    skipped: dict = field(default_factory=dict)

    def line(self) -> str:
        left = ", ".join(f"{n} {why}" for why, n in (("failed", self.failed), ("masked", self.masked),
                                                       ("duplicate", self.duplicates)) if n)
        return (f"{self.targets} targets of {self.prompts} prompts from {self.read} samples"
                + (f" ({self.verifier})" if self.verifier else "") + (f"; left out: {left}" if left else ""))


def _is_archive(row: dict) -> bool:
    return "verdicts" in row and "text" in row


def _outcome_of(path: str, rows: list[dict], verifier: str | None) -> str:
    """The verifier whose verdict decides: the one asked for, else the run's recorded outcome (task.json beside an
    archive), else the only one the lines carry."""
    if verifier:
        return verifier
    task_json = os.path.join(os.path.dirname(os.path.abspath(path)), "task.json")
    if os.path.exists(task_json):
        with open(task_json) as f:
            return json.load(f)["outcome"]
    names = {name for r in rows for name in r["verdicts"]}
    if len(names) != 1:
        raise UserError(f"sft --samples {path!r}: its samples carry verdicts of {sorted(names)}; name the one that "
                        "decides with --verifier")
    return names.pop()


def _status(row: dict, where: str, verifier: str) -> Status | None:
    """The row's outcome status (None: the row carries no verdict)."""
    if _is_archive(row):
        v = row["verdicts"].get(verifier)
        if v is None:
            raise UserError(f"{where} has no verdict of {verifier!r} (verdicts: {sorted(row['verdicts'])})")
        return Status(v["status"])
    if "status" in row:
        try:
            return Status(str(row["status"]).lower())
        except ValueError:
            raise UserError(f"{where}: status {row['status']!r} is none of {[s.value for s in Status]}") from None
    if "passed" in row:
        if not isinstance(row["passed"], bool):
            raise UserError(f"{where}: passed must be true or false, got {row['passed']!r}")
        return Status.CORRECT if row["passed"] else Status.INCORRECT
    return None


def _target(row: dict, where: str) -> Target:
    if _is_archive(row):
        ids, mask = tuple(row.get("token_ids", ())), tuple(row.get("loss_mask", ()))
        return Target(row["prompt"], row["text"], True, ids if mask else (), mask)
    for col in ("prompt", "completion"):
        if not isinstance(row.get(col), str) or not row[col]:
            raise UserError(f"{where} has no {col!r} text (columns: {sorted(row)}); a samples file needs a prompt and "
                            "its completion on every row")
    return Target(row["prompt"], row["completion"], False)


def read_targets(path: str, verifier: str | None = None, include_failed: bool = False
                 ) -> tuple[list[Target], TargetSummary]:
    """The supervised targets of a samples file (module docstring) and what was kept and left out. Every row is
    checked before any is kept: a bad one is a UserError naming the file, the row and the column."""
    where = f"sft --samples {path!r}"
    rows = read_rows(path)
    if not rows:
        raise UserError(f"{where}: the file holds no rows")
    archive = [r for r in rows if isinstance(r, dict) and _is_archive(r)]
    name = _outcome_of(path, archive, verifier) if archive else (verifier or "")
    targets, seen, prompts = [], set(), set()
    failed = masked = dupes = 0
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise UserError(f"{where}: row {i} is not an object: {str(r)[:60]!r}")
        at = f"{where}: row {i}"
        t = _target(r, at)
        status = _status(r, at, name)
        if status is None and not include_failed:
            raise UserError(f"{at} carries no verdict (a 'passed' or 'status' column); pass --all-samples to train "
                            "on every row")
        if status in MASKED:
            masked += 1
            continue
        if status is not None and status is not Status.CORRECT and not include_failed:
            failed += 1
            continue
        key = (t.prompt, t.completion, t.ids)
        if key in seen:
            dupes += 1
            continue
        seen.add(key)
        prompts.add(t.prompt)
        targets.append(t)
    summary = TargetSummary(len(rows), len(targets), len(prompts), failed, masked, dupes, name)
    if not targets:
        raise UserError(f"{where}: no sample to train on ({summary.line()}); "
                        + ("sample more (a larger -n or a stronger model)" if failed else "check the file"))
    return targets, summary
