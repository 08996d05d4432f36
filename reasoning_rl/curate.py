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

from .rollout import HFEngine, PromptRow, SamplingConfig


def curate(model, tokenizer, rows: Sequence[dict], n: int, sampling: SamplingConfig, verifier: str = "math",
           reference_col: str = "answer", ledger_path: str | None = None, batch_prompts: int = 64,
           log=print) -> list[dict]:
    import verifiers
    from curricula import Ledger

    for i, r in enumerate(rows):
        if reference_col not in r:
            raise ValueError(f"dataset row {i} has no {reference_col!r} column (columns: {sorted(r)})")
    engine = HFEngine(model, tokenizer)
    ledger = Ledger(ledger_path) if ledger_path else None
    out = []
    try:
        for start in range(0, len(rows), batch_prompts):
            chunk = [PromptRow.from_row(r, start + k) for k, r in enumerate(rows[start:start + batch_prompts])]
            groups = engine.generate(chunk, n, sampling)
            flat = [(g, s) for g in groups for s in g.samples]
            verdicts = verifiers.verify_batch(verifier, [s.text for _, s in flat],
                                              [g.task[reference_col] for g, _ in flat], timeout=10.0)
            k = 0
            verified = []
            for g in groups:
                samples = []
                for s in g.samples:
                    samples.append(s.with_verdicts({verifier: verdicts[k]}))
                    k += 1
                verified.append(type(g)(g.prompt_id, g.prompt, g.task, samples))
            if ledger is not None:
                ledger.update(verified, verifier, step=0)
            for row, g in zip(rows[start:start + batch_prompts], verified):
                scored = [o for o in g.outcomes(verifier) if o is not None]
                out.append(dict(row, attempts=len(scored), passes=sum(scored),
                                pass_rate=(sum(scored) / len(scored)) if scored else None,
                                mixed=g.is_mixed(verifier), masked=len(g.samples) - len(scored)))
            log(f"curate: {len(out)}/{len(rows)} prompts")
    finally:
        if ledger is not None:
            ledger.close()
    return out


def write_rows(rows: list[dict], output: str) -> None:
    """A datasets directory (save_to_disk) plus data.jsonl inside it."""
    from datasets import Dataset

    os.makedirs(output, exist_ok=True)
    Dataset.from_list(rows).save_to_disk(os.path.join(output, "dataset"))
    with open(os.path.join(output, "data.jsonl"), "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
