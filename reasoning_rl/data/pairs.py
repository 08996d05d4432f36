"""Preference pairs from verified groups: chosen = passed the outcome verifier, rejected = failed it.

Masked samples (ABSTAIN / TIMEOUT / ERROR) are never used. Strategies:
  all         every (pass, fail) combination of a prompt
  best_worst  the highest-scoring pass against the lowest-scoring fail (by `score`, the composite)
  random_k    k random (pass, fail) combinations per prompt (seeded)
Options: length matching (|len(chosen) - len(rejected)| <= tolerance, in tokens when the samples
carry token ids, else characters: counters DPO's length bias), a minimum score margin,
deduplication of identical texts, and a cap per prompt. Every pair keeps its provenance.

A multi-turn episode whose sequence holds a tool's output is paired by its token ids, as sampled, with its loss
mask (the tool's outputs are context, not the model's words): the pair's texts are then the transcripts, for
reading; `train dpo` scores the ids with the mask. Its text alone (the model's words without the outputs between
them) is a sequence the model never produced, so an episode without ids (an archive written before they were
kept) is left out and counted (`episodes_skipped` in the summary), never paired as text.

Standard library only; `to_dataset` builds a Hugging Face `datasets.Dataset` that TRL's
DPOTrainer accepts as is (`prompt`, `chosen`, `rejected`, plus provenance columns).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Sequence

from ..config.knobs import knob
from ..types import Group, Pair, Sample


ID_COLUMNS = ("chosen_ids", "chosen_mask", "rejected_ids", "rejected_mask")


@dataclass(frozen=True)
class PairConfig:
    strategy: str = knob("all", "all | best_worst | random_k", choices=("all", "best_worst", "random_k"))
    k: int = knob(4, "pairs per prompt for random_k", min=1)
    length_tolerance: int | None = knob(None, "max |len(chosen) - len(rejected)| (tokens, else chars); None = off",
                                        min=0)
    min_margin: float = knob(0.0, "min score(chosen) - score(rejected)", min=0.0)
    dedup: bool = knob(True, "drop repeated identical texts within a prompt's passes and fails")
    max_pairs_per_prompt: int = knob(0, "cap per prompt (0 = none)", min=0)
    seed: int = knob(0, "seed for random_k and for the order of capped pairs")


def _length(s: Sample) -> int:
    return len(s.token_ids) if s.token_ids else len(s.text)


def has_observations(s: Sample) -> bool:
    """A multi-turn episode with an environment's output inside its sequence (loss mask 0 somewhere, or a turn
    that was answered)."""
    return 0 in s.loss_mask or any(t.observation for t in s.turns)


def transcript(s: Sample) -> str:
    """An episode's turns as one text: the model's words and the tool's output after each, for reading."""
    return "".join(t.model + (t.observation or "") for t in s.turns) if s.turns else s.text


def _dedup(items: list[tuple[int, Sample]]) -> list[tuple[int, Sample]]:
    seen, out = set(), []
    for i, s in items:
        if s.text not in seen:
            seen.add(s.text)
            out.append((i, s))
    return out


def build_pairs(groups: Sequence[Group], outcome: str, cfg: PairConfig = PairConfig(),
                score: Callable[[Sample], float | None] | None = None, policy: str = "",
                verifier_version: str = "") -> tuple[list[Pair], dict]:
    """Pairs from verified groups, and a summary (prompts, mixed prompts, pairs, lengths)."""
    rng = random.Random(cfg.seed)
    score = score or (lambda s: s.verdicts[outcome].score)
    pairs: list[Pair] = []
    mixed = skipped = 0
    for g in groups:
        usable = [(i, s) for i, s in enumerate(g.samples) if s.token_ids or not has_observations(s)]
        skipped += len(g.samples) - len(usable)
        passes = [(i, s) for i, s in usable if s.outcome(outcome) is True]
        fails = [(i, s) for i, s in usable if s.outcome(outcome) is False]
        if cfg.dedup:
            passes, fails = _dedup(passes), _dedup(fails)
        if not passes or not fails:
            continue
        mixed += 1
        combos = [(c, r) for c in passes for r in fails]
        combos = [(c, r) for c, r in combos if c[1].text != r[1].text]
        if cfg.length_tolerance is not None:
            combos = [(c, r) for c, r in combos if abs(_length(c[1]) - _length(r[1])) <= cfg.length_tolerance]
        combos = [(c, r) for c, r in combos if (score(c[1]) or 0.0) - (score(r[1]) or 0.0) >= cfg.min_margin]
        if not combos:
            continue
        if cfg.strategy == "best_worst":
            combos = [max(combos, key=lambda cr: ((score(cr[0][1]) or 0.0) - (score(cr[1][1]) or 0.0),
                                                  -abs(_length(cr[0][1]) - _length(cr[1][1]))))]
        elif cfg.strategy == "random_k":
            combos = rng.sample(combos, min(cfg.k, len(combos)))
        if cfg.max_pairs_per_prompt and len(combos) > cfg.max_pairs_per_prompt:
            combos = rng.sample(combos, cfg.max_pairs_per_prompt)
        for (ci, c), (ri, r) in combos:
            ids = has_observations(c) or has_observations(r)  # an episode on either side: both as sampled ids
            if ids and not (c.token_ids and r.token_ids):  # an episode beside a text without ids: not comparable
                continue
            sides = {"chosen_ids": c.token_ids, "chosen_mask": c.loss_mask,
                     "rejected_ids": r.token_ids, "rejected_mask": r.loss_mask} \
                if ids else {}
            texts = (transcript(c), transcript(r)) if ids else (c.text, r.text)
            if texts[0] == texts[1]:
                continue
            pairs.append(Pair(g.prompt, *texts, {
                "prompt_id": g.prompt_id, "chosen_index": ci, "rejected_index": ri, "verifier": outcome,
                "verifier_version": verifier_version, "chosen_score": score(c), "rejected_score": score(r),
                "chosen_length": _length(c), "rejected_length": _length(r), "policy": policy,
                "strategy": cfg.strategy}, **sides))
    lc = [p.provenance["chosen_length"] for p in pairs]
    lr = [p.provenance["rejected_length"] for p in pairs]
    summary = {"verifier": outcome, "prompts": len(groups), "mixed_prompts": mixed, "pairs": len(pairs),
               "episodes_skipped": skipped,
               "strategy": cfg.strategy,
               "chosen_length_mean": sum(lc) / len(lc) if lc else 0.0,
               "rejected_length_mean": sum(lr) / len(lr) if lr else 0.0,
               "abs_length_diff_mean": sum(abs(a - b) for a, b in zip(lc, lr)) / len(lc) if lc else 0.0}
    return pairs, summary


def to_dataset(pairs: Sequence[Pair]):
    from datasets import Dataset

    episodes = any(p.chosen_ids for p in pairs)  # the id columns, where a pair of episodes needs them
    rows = [{**p.as_row(ids=episodes), **dict(p.provenance)} for p in pairs]
    return Dataset.from_list(rows)


def write_pairs(pairs: Sequence[Pair], output: str) -> None:
    """`output/` gets a datasets directory (`dataset/`), `pairs.parquet` and `pairs.jsonl`: all three or none (an
    interrupt while they are written leaves `output` as it was)."""
    import os

    from .run_dir import written_together

    ds = to_dataset(pairs)
    with written_together(output) as d:
        ds.save_to_disk(os.path.join(d, "dataset"))
        ds.to_parquet(os.path.join(d, "pairs.parquet"))
        ds.to_json(os.path.join(d, "pairs.jsonl"), lines=True)
