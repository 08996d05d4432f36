"""Supervised training: teach a causal LM `prompt -> target` on response tokens only; the tiny model's warm start.

Targets are the embedded tasks' gold answers (the warm start), a task's gold completions (`tasks.target_col`), or
verified samples (a row's own `completion`, or its sampled `ids` with their `loss_mask`: data/verified.py).

Loss is cross-entropy on the response tokens only (prompt and padding masked), the same
masking the RL trainers use. The embedded default's SFT checkpoint is cached under a key
made of every config value that shapes it, so the demo and the tests build it once.

A real model's step (`fast`) takes the trainers' own layout: each prompt left-padded, its completion right-padded
(logprobs.pad_rollouts), so only the completion positions' logits are computed (`logits_to_keep`; a word problem's
prompt is four fifths of its tokens, and the output layer over a 49k vocabulary a fifth of a position's work), and the
step's rows run in length order as micro-batches within a padded-token budget (`sft.micro_batch_tokens`), each padded
only to its own longest row. The loss is the same mean over the step's response tokens. The tiny model keeps the
right-padded layout (`encode_pairs`): its cached warm start and the demo's published trajectory came from it.

Written as a plain loop rather than TRL's `SFTTrainer`: on a 1 M-parameter model the
per-step overhead of `transformers.Trainer` dominates, and the cache key needs the
exact recipe. Not here: a run's checkpoints, stop and resume (trainers/sft.py); the adapters (models/lora.py) and the
prompts' chat template (the task renders them) are the caller's.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import random
import shutil
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable

from ..config.sections import Config
from ..algos.losses import masked_nll
from .tiny.model import build_tiny
from .device import configure_process, resolve_device
from .optim import adamw
from .sources import building, cache_root
from ..task.embedded.arithmetic import make_rows, tool_solution, worked_solution

SFT_RECIPE_VERSION = "2"


# the sft knobs the weights do not depend on (micro-batches change the float rounding only)
NOT_SHAPING = ("log_every", "micro_batch", "micro_batch_tokens", "checkpoint_every")
# the tasks knobs that decide the embedded rows the warm start trains on (the others: prompts, sources, rewards)
EMBEDDED_TASK_KNOBS = ("kind", "families", "max_digits", "num_train", "num_test", "heldout_percent", "seed")


def sft_cache_dir(cfg: Config) -> str:
    shaping = {k: v for k, v in asdict(cfg.sft).items() if k not in NOT_SHAPING}  # what the weights depend on
    if not shaping["tool_fraction"]:  # off: the key of every checkpoint made before the knob existed
        del shaping["tool_fraction"]
    tasks = {k: v for k, v in asdict(cfg.tasks).items() if k in EMBEDDED_TASK_KNOBS}  # the data it trains on
    key = json.dumps({"v": SFT_RECIPE_VERSION, "seed": cfg.seed, "tiny": asdict(cfg.model.tiny),
                      "tasks": tasks, "sft": shaping}, sort_keys=True)
    return os.path.join(cache_root(), "sft-" + hashlib.sha256(key.encode()).hexdigest()[:16])


def seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def encode_pairs(tokenizer, prompts: list[str], completions: list):
    """Right-padded (B, T) input_ids, attention_mask and a response mask (1 on the completion tokens trained on).
    A completion is text (tokenized, EOS appended, every token trained) or (ids, loss_mask): a sample's ids as
    sampled, trained where the mask is 1 (an episode's tool output is 0), nothing appended."""
    import torch

    rows = []
    for p, c in zip(prompts, completions):
        p_ids = tokenizer(p)["input_ids"]  # with the tokenizer's own special tokens (BOS)
        if isinstance(c, str):
            c_ids = tokenizer(c, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
            c_mask = [1] * len(c_ids)
        else:
            c_ids, c_mask = list(c[0]), list(c[1])
        rows.append((p_ids, c_ids, c_mask))
    T = max(len(p) + len(c) for p, c, _ in rows)
    ids = torch.full((len(rows), T), tokenizer.pad_token_id, dtype=torch.long)
    attn = torch.zeros((len(rows), T), dtype=torch.long)
    resp = torch.zeros((len(rows), T), dtype=torch.long)
    for i, (p, c, m) in enumerate(rows):
        n = len(p) + len(c)
        ids[i, :n] = torch.tensor(p + c)
        attn[i, :n] = 1
        resp[i, len(p):n] = torch.tensor(m, dtype=torch.long)
    return ids, attn, resp


def sft_loss(model, ids, attn, resp):
    """Mean next-token cross-entropy over response tokens. Shapes: ids/attn/resp (B, T)."""

    ids, attn, resp = ids.to(model.device), attn.to(model.device), resp.to(model.device)
    logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1]  # (B, T-1, V)
    return masked_nll(logits.float(), ids[:, 1:], resp[:, 1:].float())  # next token of each response position


def sft_completion(row: dict, worked_fraction: float, rng: random.Random, tool_fraction: float = 0.0) -> str:
    """The SFT target for a row: its worked solution with probability `worked_fraction` (rows that have
    one: the arithmetic families), else, with probability `tool_fraction`, a calculator trace, else the direct
    answer."""

    worked = worked_solution(row) if worked_fraction > 0 else None
    if worked is not None and rng.random() < worked_fraction:  # rows without one draw nothing: code SFT unchanged
        return worked
    if tool_fraction > 0 and rng.random() < tool_fraction:  # off: no draw, so the data of older runs is unchanged
        return tool_solution(row) or row["answer"]
    return row["answer"]


def _target(row: dict, s, rng: random.Random):
    """A row's SFT target: its own ids and loss mask (a verified episode), its own completion (a verified sample),
    else the embedded task's gold (sft_completion)."""
    if row.get("ids"):
        return row["ids"], row["loss_mask"]
    if "completion" in row:
        return row["completion"]
    return sft_completion(row, s.worked_fraction, rng, s.tool_fraction)


def sft_step(model, tokenizer, opt, train_rows: list[dict], rng: random.Random, s, fast: bool = False) -> float:
    """One optimiser step on a random batch of SFT targets (`s`: an SFTConfig); returns the loss. `fast`: the
    completion-only layout in length-ordered micro-batches (module docstring), for any model but the tiny one."""
    import torch

    batch = [train_rows[rng.randrange(len(train_rows))] for _ in range(s.batch_size)]
    prompts, targets = [r["prompt"] for r in batch], [_target(r, s, rng) for r in batch]
    opt.zero_grad(set_to_none=True)
    loss = _backward_fast(model, tokenizer, prompts, targets, s) if fast else \
        _backward_padded(model, tokenizer, prompts, targets, s)
    if s.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), s.grad_clip)
    opt.step()
    return loss


def _backward_padded(model, tokenizer, prompts: list[str], targets: list, s) -> float:
    """The batch's gradient in the right-padded layout, in slices of `sft.micro_batch` rows (0: as many as keep the
    logits under 1 GiB); returns its loss."""
    ids, attn, resp = encode_pairs(tokenizer, prompts, targets)
    rows = s.micro_batch or auto_micro_batch(ids.shape[1], model.get_output_embeddings().weight.shape[0])
    if rows >= len(prompts):
        loss = sft_loss(model, ids, attn, resp)
        loss.backward()
        return loss.item()
    total = resp[:, 1:].sum().clamp(min=1)  # each slice's NLL sum over the batch's response tokens: the gradients
    loss = 0.0  # add up to the whole batch's
    for i in range(0, len(prompts), rows):
        part = sft_loss(model, ids[i:i + rows], attn[i:i + rows], resp[i:i + rows])
        part = part * resp[i:i + rows, 1:].sum() / total  # a slice's mean NLL x its share of the tokens
        part.backward()
        loss += part.item()
    return loss


def encode_rows(tokenizer, prompts: list[str], completions: list) -> list[tuple[list[int], list[int], list[int]]]:
    """Each (prompt, completion) as (prompt ids, completion ids, loss mask), the completion as `encode_pairs` reads
    it: text (tokenized, EOS appended, every token trained) or (ids, loss_mask) as sampled."""
    out = []
    for p, c in zip(prompts, completions):
        p_ids = tokenizer(p)["input_ids"]  # with the tokenizer's own special tokens (BOS)
        if isinstance(c, str):
            c_ids = tokenizer(c, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
            out.append((p_ids, c_ids, [1] * len(c_ids)))
        else:
            out.append((p_ids, list(c[0]), list(c[1])))
    return out


def micro_batches(encoded: list[tuple[list[int], list[int], list[int]]], s) -> list[list[int]]:
    """The rows of a step as micro-batches in length order: within `sft.micro_batch_tokens` padded tokens each (0:
    AUTO_TOKENS), or `sft.micro_batch` rows each where that is set and the budget is not."""
    from .logprobs import length_buckets, token_budget_runs

    plens, clens = [len(p) for p, _, _ in encoded], [len(c) for _, c, _ in encoded]
    if s.micro_batch and not s.micro_batch_tokens:
        return length_buckets([a + b for a, b in zip(plens, clens)], -(-len(encoded) // s.micro_batch))
    return token_budget_runs(plens, clens, s.micro_batch_tokens or AUTO_TOKENS)


# padded tokens per micro-batch when sft.micro_batch_tokens is 0: 16 word problems of ~110 tokens in one or two passes
AUTO_TOKENS = 2048


def _backward_fast(model, tokenizer, prompts: list[str], targets: list, s) -> float:
    """The batch's gradient in the trainers' layout (completion logits only), micro-batch by micro-batch, each
    micro-batch's NLL sum over the whole batch's response tokens (so the gradients add up to the batch's mean);
    returns the loss."""
    from .logprobs import pad_rollouts, token_logprobs

    encoded = encode_rows(tokenizer, prompts, targets)
    total = max(1, sum(sum(m) for _, _, m in encoded))
    loss = 0.0
    for run in micro_batches(encoded, s):
        rows = [encoded[i] for i in run]
        b = pad_rollouts([p for p, _, _ in rows], [c for _, c, _ in rows], [[0.0] * len(c) for _, c, _ in rows],
                         tokenizer.pad_token_id, device=model.device, loss_masks=[m for _, _, m in rows])
        logp = token_logprobs(model, b.p_ids, b.p_mask, b.c_ids, b.c_mask)  # (B, Tc) float32
        part = -(logp * b.loss_mask.to(logp.dtype)).sum() / total
        part.backward()
        loss += part.item()
    return loss


def target_nll(model, tokenizer, prompts: list[str], completions: list[str], budget: int = AUTO_TOKENS) -> list[float]:
    """Each completion's mean negative log-likelihood per token after its prompt under `model` (no gradient), in
    length-ordered passes within `budget` padded tokens: how hard a gold solution is for the model (the recipe's
    difficulty prior)."""
    import torch

    from .logprobs import pad_rollouts, token_budget_runs, token_logprobs

    encoded = encode_rows(tokenizer, prompts, completions)
    out = [0.0] * len(encoded)
    with torch.no_grad():
        for run in token_budget_runs([len(p) for p, _, _ in encoded], [len(c) for _, c, _ in encoded], budget):
            rows = [encoded[i] for i in run]
            b = pad_rollouts([p for p, _, _ in rows], [c for _, c, _ in rows], [[0.0] * len(c) for _, c, _ in rows],
                             tokenizer.pad_token_id, device=model.device)
            logp = token_logprobs(model, b.p_ids, b.p_mask, b.c_ids, b.c_mask)  # (B, Tc)
            nll = -logp.sum(-1) / b.c_mask.sum(-1).clamp(min=1)  # (B,)
            for i, v in zip(run, nll.tolist()):
                out[i] = v
    return out


def auto_micro_batch(length: int, vocab: int, budget: int = 2**28) -> int:
    """Rows per pass that keep its float32 logits (rows, length, vocab) under `budget` values (1 GiB)."""
    return max(1, budget // max(1, length * vocab))


@dataclass
class SFTState:
    """What an SFT run carries from step to step: the optimiser, its schedule, the batch-drawing generator and the
    steps done. A run's checkpoint (trainers/sft.py) saves and restores it."""
    opt: Any
    sched: Any
    rng: random.Random
    step: int = 0
    warmup: int = 0  # the warm-up the schedule uses (sft.warmup_steps, or less when that is not below sft.steps)
    loss: float | None = None  # the last step's


def warmup_steps(s) -> int:
    """The warm-up a run of `s.steps` steps uses: sft.warmup_steps, or a tenth of the steps when that is not below
    them (a warm-up as long as the run never reaches sft.lr)."""
    return s.warmup_steps if s.warmup_steps < s.steps else s.steps // 10


def sft_state(cfg: Config, model, log=print) -> SFTState:
    """A fresh run's state: AdamW over the trained parameters (with LoRA the adapters alone), linear warm-up then
    cosine decay to 0.1 x sft.lr, and the batch generator seeded with cfg.seed."""
    import torch

    s = cfg.sft
    params = [p for p in model.parameters() if p.requires_grad]  # with LoRA: the adapters alone
    # fused (models/optim.py), but for the embedded tiny model: its cached warm start and the demo's published
    # trajectory came from the default loop, which the fused kernel matches only to float rounding
    opt = adamw(params, lr=s.lr, weight_decay=s.weight_decay, betas=(0.9, 0.98),
                fused=cfg.model.name_or_path != "tiny")
    warm = warmup_steps(s)
    if warm != s.warmup_steps:
        log(f"sft: sft.warmup_steps={s.warmup_steps} is not below the run's {s.steps} steps, so it would never reach "
            f"sft.lr={s.lr:g}; warm-up cut to {warm} steps")

    def lr_at(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        frac = (step - warm) / max(1, s.steps - warm)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac))

    return SFTState(opt, torch.optim.lr_scheduler.LambdaLR(opt, lr_at), random.Random(cfg.seed), 0, warm)


def train_sft(cfg: Config, model, tokenizer, train_rows: list[dict], log=print, state: SFTState | None = None,
              after_step: Callable[[SFTState], bool] | None = None) -> SFTState:
    """Train `model` on `train_rows` for sft.steps optimiser steps (from `state.step` when resuming a run's state);
    `after_step(state)` runs after each step and returns True to stop there. Returns the state reached."""
    configure_process(cfg)  # threads (the cached checkpoint must not depend on which command built it), allocator
    s = cfg.sft
    if state is None:
        seed_everything(cfg.seed)
        state = sft_state(cfg, model, log)
    fast = cfg.model.name_or_path != "tiny"
    model.train()
    t0, first = time.time(), state.step
    while state.step < s.steps:
        state.loss = loss = sft_step(model, tokenizer, state.opt, train_rows, state.rng, s, fast=fast)
        state.sched.step()
        state.step += 1
        if state.step % s.log_every == 0 or state.step == first + 1 or state.step == s.steps:
            spent = time.time() - t0
            left = spent / (state.step - first) * (s.steps - state.step)
            log(f"sft step {state.step}/{s.steps}  loss {loss:.4f}  lr {state.sched.get_last_lr()[0]:.2e}  "
                f"{spent:.0f}s" + (f", about {left:.0f}s left" if state.step < s.steps else ""))
        if after_step is not None and after_step(state):
            break
    model.eval()
    return state


def build_sft_checkpoint(cfg: Config, log=print, force: bool = False) -> str:
    """Train (or reuse) the embedded default's SFT checkpoint; returns its directory. Processes that ask for the same
    checkpoint at once (launched ranks, test workers, two commands) train it once: the others wait on its lock file."""
    out = sft_cache_dir(cfg)
    if not force and os.path.exists(os.path.join(out, "sft_meta.json")):
        return out
    with building(out, log=lambda m: log(f"sft: {m}")):  # one process trains; the others wait, then find its folder
        if not force and os.path.exists(os.path.join(out, "sft_meta.json")):
            return out
        return _build(cfg, out, force, log)


def _build(cfg: Config, out: str, force: bool, log) -> str:
    """Train the checkpoint into a folder of this process's own, then publish it as `out`."""
    model, tok = build_tiny(cfg)
    model.to(resolve_device(cfg.model.device))  # model.device: a GPU when present
    train_rows, _ = make_rows(cfg.tasks)
    t0 = time.time()
    train_sft(cfg, model, tok, train_rows, log=log)
    tmp = f"{out}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    with open(os.path.join(tmp, "sft_meta.json"), "w") as f:
        json.dump({"train_seconds": time.time() - t0, "config": asdict(cfg)}, f, indent=1)
    return _publish(tmp, out, force)


def _publish(tmp: str, out: str, force: bool) -> str:
    """Move the finished folder `tmp` to `out`. A folder holding `sft_meta.json` is complete (the file is written
    last, before the move): one another process published meanwhile is kept and ours dropped, unless `force`; only
    an incomplete one is removed. Removing a complete folder while another process read it left a folder without its
    weights (two launched ranks building the same checkpoint at once)."""
    if not force and os.path.exists(os.path.join(out, "sft_meta.json")):
        shutil.rmtree(tmp, ignore_errors=True)
        return out
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    try:
        os.replace(tmp, out)
    except OSError:  # another process's folder took the place between the removal and the move
        shutil.rmtree(tmp, ignore_errors=True)
        if not os.path.exists(os.path.join(out, "sft_meta.json")):
            raise
    return out
