"""`reasoning-rl curate`: sample G completions per prompt, verify them, and write the dataset back
with pass-rate columns (`attempts`, `passes`, `pass_rate`, `mixed`), so users can pre-filter a
dataset before training (keep `mixed`, or a pass-rate band), and every verified sample (`samples.jsonl`,
the rollout archive's lines), which `reasoning-rl sft --samples` fine-tunes on (a teacher's, or the student's own:
ReST-EM). Optionally records the groups in a curriculum ledger so training starts with them.

The outcome is the binary verdict of the task's outcome verifier against the row's reference
(reasoning_rl/task/task.py); masked verdicts are not attempts and never make a prompt mixed.
"""
from __future__ import annotations

import json
import os
from typing import Sequence

from curricula import Ledger

from ..rollout import HFEngine, PromptRow, SamplingConfig
from ..task.task import Task


def sample_verified(model, tokenizer, task: Task, rows: Sequence[dict], n: int, sampling: SamplingConfig,
                    batch_prompts: int = 64, log=print, pool=None, engine=None) -> list:
    """G samples per row from the model (the hf engine, or `engine`: an EpisodeEngine for multi-turn samples), each
    carrying its verdict from the task's outcome verifier (checked as the task says: a code body with its prompt),
    as training and evaluation check it."""
    engine = engine or HFEngine(model, tokenizer)
    reward = task.outcome_reward()
    out = []
    for start in range(0, len(rows), batch_prompts):
        chunk = [PromptRow.from_row(r, start + k) for k, r in enumerate(rows[start:start + batch_prompts])]
        out += task.verify_groups(reward, engine.generate(chunk, n, sampling), pool)
        log(f"sampled and verified {len(out)}/{len(rows)} prompts")
    return out


def sample_pairs(cfg, model, tokenizer, task: Task, rows: Sequence[dict], n: int, pair_cfg, log=print):
    """(pairs, summary): `n` samples per row at the configured temperature, verified by the task's outcome, paired
    passed-against-failed within each prompt (`pairs.build_pairs`)."""
    import verifiers

    from .pairs import build_pairs

    gen = cfg.generation
    groups = sample_verified(model, tokenizer, task, rows, n,
                             SamplingConfig.of(gen, seed=cfg.seed, stop=task.stops(gen.stop)),
                             log=log)
    return build_pairs(groups, task.outcome, pair_cfg, policy=cfg.model.name_or_path,
                       verifier_version=verifiers.get(task.outcome).version)


def curate(model, tokenizer, task: Task, rows: Sequence[dict], n: int, sampling: SamplingConfig,
           ledger_path: str | None = None, batch_prompts: int = 64, log=print) -> tuple[list[dict], list]:
    """(the rows with pass-rate columns, the verified groups): G verified samples each (masked samples are not
    attempts)."""
    groups = sample_verified(model, tokenizer, task, rows, n, sampling, batch_prompts, log)
    verifier = task.outcome
    if ledger_path:
        with Ledger(ledger_path) as ledger:
            ledger.update(groups, verifier, step=0)
    out = []
    for row, g in zip(rows, groups):
        scored = [o for o in g.outcomes(verifier) if o is not None]
        base = dict(row["columns"], prompt_id=row["prompt_id"]) if "columns" in row else dict(row)  # the user's own
        out.append(dict(base, attempts=len(scored), passes=sum(scored),
                        pass_rate=(sum(scored) / len(scored)) if scored else None,
                        mixed=g.is_mixed(verifier), masked=len(g.samples) - len(scored)))
    return out, groups


def write_rows(rows: list[dict], output: str, groups: Sequence | None = None, sampled: dict | None = None) -> None:
    """A datasets directory (save_to_disk) plus data.jsonl inside `output`, and with `groups` every verified sample
    as samples.jsonl (the rollout archive's lines: what `reasoning-rl sft --samples` trains on): all or none (an
    interrupt while they are written leaves `output` as it was). `sampled`: which model drew them and how, kept on
    every sample's line."""
    from datasets import Dataset

    from .archive import write_groups
    from .run_dir import written_together

    with written_together(output) as d:
        Dataset.from_list(rows).save_to_disk(os.path.join(d, "dataset"))
        with open(os.path.join(d, "data.jsonl"), "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        if groups is not None:
            with open(os.path.join(d, "samples.jsonl"), "w", encoding="utf-8") as f:
                write_groups(f, groups, step=0, sampled=sampled)
