"""DPO on verified pairs: our loop, or TRL's DPOTrainer on the very same dataset.

    train_dpo(cfg, pairs=None) -> DPOResult    the trainer: pairs given (rows of prompt, chosen, rejected) or
                                               sampled from the policy and verified; held-out accuracy before
                                               and after; the model saved to output_dir/dpo_<backend>
    train_dpo_ours / train_dpo_trl             the update itself, on the same rows

Ours: a frozen reference copy of the starting policy, response-only sequence log-probs
(`logprobs.token_logprobs`, completion = chosen/rejected text + EOS, as TRL tokenises it),
`losses.dpo_sigmoid` (+ `rpo_alpha` x the chosen responses' NLL averaged over all their tokens
in the batch: RPO, TRL's loss_type ["sigmoid", "sft"], same normalisation), AdamW. A pair of multi-turn
episodes (`chosen_ids`/`chosen_mask`, data/pairs.py) is scored on its ids as sampled, summed over the model's tokens
only (the tool's outputs are context); TRL's backend refuses such pairs. Both backends report reward margins and accuracy (share of
pairs with a positive margin) on the training pairs after training.

Under `accelerate launch` our loop wraps the policy in DDP and each rank takes its share of every
batch of pairs (every rank holds the same pairs in the same order); TRL's trainer runs under the
launcher on its own. Not here: IPO/other loss variants in the loop (the loss functions exist).
"""
from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..config.sections import Config
from ..errors import UserError
from ..eval import held_out
from ..models.logprobs import pad_completions, pad_prompts, sequence_logprob, token_logprobs
from ..models.lora import is_lora, reference_of
from ..models.optim import adamw
from ..algos.losses import dpo_sigmoid, rpo_nll
from .distributed import Ranks


def _side(tok, r: dict, side: str) -> tuple[list[int], list[int]]:
    """A response's ids and loss mask: a pair of episodes' ids as sampled with their mask (the tool's outputs 0),
    else the text tokenised, EOS appended, every token scored."""
    if r.get(f"{side}_ids"):
        return list(r[f"{side}_ids"]), list(r[f"{side}_mask"])
    ids = tok(r[side], add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    return ids, [1] * len(ids)


def _encode(tok, rows: Sequence[dict]):
    """(p_ids, p_mask, c_ids, c_mask, l_mask): the chosen responses, then the rejected; l_mask the tokens scored."""
    from ..models.logprobs import pad_values

    prompts = [tok(r["prompt"])["input_ids"] for r in rows]
    sides = [_side(tok, r, "chosen") for r in rows] + [_side(tok, r, "rejected") for r in rows]
    p_ids, p_mask = pad_prompts(prompts + prompts, tok.pad_token_id)
    c_ids, c_mask = pad_completions([ids for ids, _ in sides], tok.pad_token_id)
    l_mask = pad_values([[float(x) for x in m] for _, m in sides], tuple(c_ids.shape))
    return p_ids, p_mask, c_ids, c_mask, l_mask


def _seq_logps(model, tok, rows, with_lengths: bool = False):

    p_ids, p_mask, c_ids, c_mask, l_mask = _encode(tok, rows)
    lp = token_logprobs(model, p_ids, p_mask, c_ids, c_mask)
    l_mask = l_mask.to(lp.device)
    lp = sequence_logprob(lp, l_mask)
    n = len(rows)
    if with_lengths:
        return lp[:n], lp[n:], l_mask[:n].sum(1).clamp(min=1).to(lp.dtype)
    return lp[:n], lp[n:]


def margins(model, ref, tok, rows: Sequence[dict], beta: float, batch_size: int = 64) -> dict[str, float]:
    """Mean implicit reward margin beta*m and accuracy (share of pairs with m > 0)."""
    import torch

    ms = []
    with torch.no_grad():
        for i in range(0, len(rows), batch_size):
            chunk = rows[i:i + batch_size]
            lw, ll = _seq_logps(model, tok, chunk)
            rw, rl = _seq_logps(ref, tok, chunk)
            ms.extend((beta * ((lw - rw) - (ll - rl))).tolist())
    return {"rewards/margins": sum(ms) / len(ms), "rewards/accuracies": sum(m > 0 for m in ms) / len(ms)}


def train_dpo_ours(cfg: Config, model, tok, rows: Sequence[dict], log=print,
                   record: Callable[[dict], None] = lambda m: None) -> dict[str, float]:
    """Our DPO loop; `record` gets each optimiser step's metrics (train_dpo writes them to metrics.jsonl)."""
    d = cfg.dpo
    ranks = Ranks()
    log = ranks.logger(log)
    if d.batch_size < ranks.world:
        raise ValueError(f"dpo.batch_size ({d.batch_size}) must be at least the number of processes ({ranks.world})")
    ref = ranks.wrap_frozen(reference_of(model))  # with LoRA: the base model, adapters disabled; FSDP2: sharded
    policy_t = ranks.wrap(model)  # DDP under a launcher; FSDP2 shards `model` in place (the optimiser comes after)
    if sharing := ranks.describe():
        log(sharing)
    rng = random.Random(cfg.seed)  # the same order on every rank
    rows = list(rows)
    with ranks.full_weights(ref):  # FSDP2: the reference scores without collectives
        _dpo_epochs(d, model, policy_t, ref, tok, rows, ranks, rng, log, record)
    model.eval()
    with ranks.full_weights(model, ref):  # FSDP2: every rank gathers the weights; rank 0 scores the margins
        return margins(model, ref, tok, rows, d.beta) if ranks.main else {}


def _dpo_epochs(d, model, policy_t, ref, tok, rows, ranks, rng, log, record) -> None:
    """`dpo.epochs` passes over the pairs, each batch shared out among the ranks."""
    import torch

    opt = adamw([p for p in model.parameters() if p.requires_grad], lr=d.lr)
    step = 0
    for epoch in range(d.epochs):
        rng.shuffle(rows)
        model.train()
        for i in range(0, len(rows), d.batch_size):
            chunk = rows[i:i + d.batch_size][ranks.rank::ranks.world]  # this rank's share of the batch
            if len(rows[i:i + d.batch_size]) < ranks.world:
                break  # a last batch too small to give every rank a pair
            lw, ll, n_w = _seq_logps(policy_t, tok, chunk, with_lengths=True)
            with torch.no_grad():
                rw, rl = _seq_logps(ref, tok, chunk)
            out = dpo_sigmoid(lw, ll, rw, rl, beta=d.beta)
            loss = out.loss
            if d.rpo_alpha > 0:  # RPO: NLL of the chosen responses, mean over all their tokens in the batch
                loss = loss + d.rpo_alpha * rpo_nll(lw, n_w)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if d.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), d.grad_clip)
            opt.step()
            step += 1
            record({"step": step, "loss/dpo": out.loss.item(), "loss/total": loss.item(),
                    **{k: float(v) for k, v in out.metrics.items()}})
            if step % 10 == 0:
                log(f"dpo step {step}  loss {out.loss.item():.4f}  margin {out.metrics['rewards/margins']:+.4f}  "
                    f"acc {out.metrics['rewards/accuracies']:.2f}")


def train_dpo_trl(cfg: Config, model, tok, rows: Sequence[dict], output_dir: str, log=print) -> dict[str, float]:
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    d = cfg.dpo
    ref = None if is_lora(model) else reference_of(model)  # TRL disables a peft model's adapters itself
    ds = Dataset.from_list([{"prompt": r["prompt"], "chosen": r["chosen"], "rejected": r["rejected"]} for r in rows])
    world = int(os.environ.get("WORLD_SIZE", "1"))  # under a launcher: the same pairs per optimiser step
    args = DPOConfig(output_dir=output_dir, per_device_train_batch_size=max(1, d.batch_size // world), learning_rate=d.lr,
                     num_train_epochs=d.epochs, beta=d.beta, report_to="none", use_cpu=True,
                     loss_type=["sigmoid", "sft"] if d.rpo_alpha > 0 else ["sigmoid"],
                     loss_weights=[1.0, d.rpo_alpha] if d.rpo_alpha > 0 else None,
                     bf16=False, logging_steps=10, save_strategy="no", lr_scheduler_type="constant",
                     max_grad_norm=d.grad_clip or 1e9, seed=cfg.seed, weight_decay=0.0)
    trainer = DPOTrainer(model=model, ref_model=ref, args=args, train_dataset=ds, processing_class=tok)
    trainer.train()
    model.eval()
    return margins(model, ref or reference_of(model), tok, rows, d.beta)


@dataclass
class DPOResult:
    """What a DPO run did. `metrics`: reward margins and pair accuracy on the training pairs; the accuracies are the
    task's held-out greedy accuracy before and after (None on ranks other than 0)."""
    backend: str
    pairs: int
    metrics: dict[str, float]
    accuracy_before: float | None
    accuracy_after: float | None
    model: Any
    tokenizer: Any


def check_pairs(rows: Sequence, source: str = "pairs") -> list[dict]:
    """The rows as pairs, or one line naming the first row that is not one (a pair: prompt, chosen, rejected)."""
    for i, r in enumerate(rows):
        missing = [c for c in ("prompt", "chosen", "rejected") if not isinstance(r, dict) or c not in r]
        if missing:
            raise UserError(f"{source}: row {i} has no {missing[0]!r} column "
                            f"(a pair needs prompt, chosen, rejected; columns: {sorted(r) if isinstance(r, dict) else r})")
        for side in ("chosen", "rejected"):  # a pair of episodes: ids as sampled, and the mask of the model's
            ids, mask = r.get(f"{side}_ids") or [], r.get(f"{side}_mask") or []
            if (ids or mask) and (len(ids) != len(mask) or set(mask) - {0, 1} or 1 not in mask
                                  or not all(isinstance(x, int) for x in ids)):
                raise UserError(f"{source}: row {i}: {side}_ids and {side}_mask must be token ids and a 0/1 mask "
                                f"of the same length with a 1 in it (got {len(ids)} ids, mask {str(mask)[:40]})")
    if not rows:
        raise UserError(f"{source} has no rows")
    return [dict(r) for r in rows]


def _sampled_pairs(cfg: Config, model, tok, task, ranks: Ranks, log) -> list[dict]:
    """Pairs from the policy's own verified samples: each rank samples its share of the first dpo.sample_prompts
    training prompts; every rank then trains on all of them, in the same order."""

    from ..data.curate import sample_pairs
    from ..data.pairs import PairConfig

    mine = task.train[: cfg.dpo.sample_prompts][ranks.rank::ranks.world]
    pairs, summary = sample_pairs(cfg, model, tok, task, mine, cfg.dpo.group_size, PairConfig(), log=log)
    pairs = ranks.gather(pairs)
    log(f"pairs: {json.dumps(summary)}" + (f" (rank 0's share; {len(pairs)} pairs from {ranks.world} ranks)"
                                           if ranks.world > 1 else ""))
    if not pairs:
        raise UserError("no pairs: no sampled prompt had both a pass and a fail; give --pairs, or more "
                        "dpo.sample_prompts or a larger dpo.group_size")
    return [{"prompt": p.prompt, "chosen": p.chosen, "rejected": p.rejected} for p in pairs]


def _write_run_files(cfg: Config, lines: list[dict]) -> None:
    """metrics.jsonl (one line per optimiser step of our loop, the held-out scores at step 0 and at the end) and
    run_config.json, so that `reasoning-rl report` shows a DPO run like any other."""
    from ..config.knobs import to_dict

    os.makedirs(cfg.output_dir, exist_ok=True)
    merged: dict[int, dict] = {}
    for m in lines:
        merged.setdefault(m["step"], {}).update(m)
    with open(os.path.join(cfg.output_dir, "metrics.jsonl"), "w") as f:
        for step in sorted(merged):
            f.write(json.dumps(merged[step]) + "\n")
    with open(os.path.join(cfg.output_dir, "run_config.json"), "w") as f:
        json.dump({"algorithm": "dpo", "config": to_dict(cfg)}, f, indent=1, default=str)


def train_dpo(cfg: Config, pairs: Sequence[dict] | None = None, backend: str | None = None,
              log: Callable[[str], None] = print) -> DPOResult:
    """DPO as configured (section `dpo`) on `pairs`, or on pairs sampled from the policy and verified by the task's
    outcome when None. backend: `ours` or `trl` (default dpo.backend). The policy is scored greedily on the task's
    held-out rows before and after, and saved to output_dir/dpo_<backend> (rank 0)."""
    from ..models.device import configure_process
    from ..models.lora import maybe_lora, save_final
    from ..models.load import load_policy, load_tokenizer
    from ..task.task import Task

    rows = check_pairs(pairs) if pairs is not None else None
    backend = backend or cfg.dpo.backend
    episodes = sum(bool(r.get("chosen_ids")) for r in rows or [])
    if backend == "trl" and episodes:  # refused before any model loads
        raise UserError(f"dpo.backend: value 'trl' cannot train the {episodes} pairs of multi-turn episodes "
                        "(chosen_ids): TRL's DPOTrainer scores their text, the tool's outputs included; use "
                        "dpo.backend=ours, which scores the model's tokens only")
    task = Task.from_config(cfg.tasks)  # rows read and checked before any model loads
    task.render(load_tokenizer(cfg))
    configure_process(cfg)  # torch's threads and the C allocator
    ranks = Ranks()
    log = ranks.logger(log)
    model, tok = ranks.main_first(load_policy, cfg)
    model = maybe_lora(model, cfg)  # with adapters, DPO's reference is the base model with them disabled
    if rows is None:
        rows = _sampled_pairs(cfg, model, tok, task, ranks, log)
    evals = task.test[: cfg.eval.size]
    before = held_out.configured(cfg, task, model, tok, evals)["accuracy"] if ranks.main else None
    lines: list[dict] = [{"step": 0, "eval/accuracy": before}] if ranks.main else []
    if backend == "trl":
        m = train_dpo_trl(cfg, model, tok, rows, os.path.join(cfg.output_dir, "dpo_trl"), log=log)
    else:
        m = train_dpo_ours(cfg, model, tok, rows, log=log, record=lines.append)
        model = ranks.gathered(model)  # FSDP2: the whole weights on rank 0, to evaluate and save
    after = None
    if ranks.main:
        after = held_out.configured(cfg, task, model, tok, evals)["accuracy"]
        save_final(cfg.output_dir, model, tok, name=f"dpo_{backend}", merged=cfg.model.lora.save_merged, cfg=cfg)
        last = lines[-1]["step"] if lines else 0
        lines.append({"step": last if len(lines) > 1 else last + 1, "eval/accuracy": after,
                      **{f"final/{k}": v for k, v in m.items()}})
        if cfg.output_dir:
            _write_run_files(cfg, lines)
    return DPOResult(backend, len(rows), m, before, after, model, tok)
