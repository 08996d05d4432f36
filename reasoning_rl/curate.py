"""`reasoning-rl curate`: sample G completions per prompt, verify them, and write the dataset back
with pass-rate columns (`attempts`, `passes`, `pass_rate`, `mixed`), so users can pre-filter a
dataset before training (keep `mixed`, or a pass-rate band). Optionally records the groups in
a curriculum ledger so training starts with them.

The outcome is the binary verdict of one verifier (default `math`) against the reference
column; masked verdicts are not attempts and never make a prompt mixed.
"""
from __future__ import annotations

import json
import os
from typing import Sequence

import verifiers
from curricula import Ledger

from .rollout import HFEngine, PromptRow, SamplingConfig
from .types import Group


def checked_text(verifier: str, prompt: str, completion: str) -> str:
    """What a verifier checks: a `code` completion is a function body, so the program is the prompt (the
    signature) + it; any other verifier reads the completion alone."""
    return prompt + completion if verifier == "code" else completion


def sample_verified(model, tokenizer, rows: Sequence[dict], n: int, sampling: SamplingConfig,
                    verifier: str = "math", reference_col: str = "answer", batch_prompts: int = 64,
                    log=print) -> list:
    """G samples per row from the model, each carrying its `verifier` verdict against the reference column."""


    for i, r in enumerate(rows):
        if reference_col not in r:
            raise ValueError(f"dataset row {i} has no {reference_col!r} column (columns: {sorted(r)})")
    engine = HFEngine(model, tokenizer)
    out = []
    for start in range(0, len(rows), batch_prompts):
        chunk = [PromptRow.from_row(r, start + k) for k, r in enumerate(rows[start:start + batch_prompts])]
        groups = engine.generate(chunk, n, sampling)
        flat = [(g, s) for g in groups for s in g.samples]
        texts = [checked_text(verifier, g.prompt, s.text) for g, s in flat]
        budget = {} if verifier == "code" else {"timeout": 10.0}  # code: the verifier's own budget per test run
        verdicts = verifiers.verify_batch(verifier, texts, [g.task[reference_col] for g, _ in flat], **budget)
        it = iter(verdicts)
        for g in groups:
            out.append(Group(g.prompt_id, g.prompt, g.task, [s.with_verdicts({verifier: next(it)}) for s in g.samples]))
        log(f"sampled and verified {len(out)}/{len(rows)} prompts")
    return out


def curate(model, tokenizer, rows: Sequence[dict], n: int, sampling: SamplingConfig, verifier: str = "math",
           reference_col: str = "answer", ledger_path: str | None = None, batch_prompts: int = 64,
           log=print) -> list[dict]:

    groups = sample_verified(model, tokenizer, rows, n, sampling, verifier, reference_col, batch_prompts, log)
    if ledger_path:
        with Ledger(ledger_path) as ledger:
            ledger.update(groups, verifier, step=0)
    out = []
    for row, g in zip(rows, groups):
        scored = [o for o in g.outcomes(verifier) if o is not None]
        out.append(dict(row, attempts=len(scored), passes=sum(scored),
                        pass_rate=(sum(scored) / len(scored)) if scored else None,
                        mixed=g.is_mixed(verifier), masked=len(g.samples) - len(scored)))
    return out


def write_rows(rows: list[dict], output: str) -> None:
    """A datasets directory (save_to_disk) plus data.jsonl inside it."""
    from datasets import Dataset

    os.makedirs(output, exist_ok=True)
    Dataset.from_list(rows).save_to_disk(os.path.join(output, "dataset"))
    with open(os.path.join(output, "data.jsonl"), "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
