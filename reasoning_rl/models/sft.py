"""Supervised training: teach a causal LM `prompt -> target` on response tokens only; the tiny model's warm start.

Targets are the embedded tasks' gold answers (the warm start), a task's gold completions (`tasks.target_col`), or
verified samples (a row's own `completion`, or its sampled `ids` with their `loss_mask`: data/verified.py).

Loss is cross-entropy on the response tokens only (prompt and padding masked), the same
masking the RL trainers use. The embedded default's SFT checkpoint is cached under a key
made of every config value that shapes it, so the demo and the tests build it once.

Written as a plain loop rather than TRL's `SFTTrainer`: on a 1 M-parameter model the
per-step overhead of `transformers.Trainer` dominates, and the cache key needs the
exact recipe. Not here: packing; the adapters (models/lora.py) and the prompts' chat template (the task renders
them) are the caller's.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import random
import shutil
import time
from dataclasses import asdict

from ..config.sections import Config
from ..algos.losses import masked_nll
from .tiny.model import build_tiny
from .device import configure_process, resolve_device
from .optim import adamw
from .sources import building, cache_root
from ..task.embedded.arithmetic import make_rows, tool_solution, worked_solution

SFT_RECIPE_VERSION = "2"


# the tasks knobs that decide the embedded rows the warm start trains on (the others: prompts, sources, rewards)
EMBEDDED_TASK_KNOBS = ("kind", "families", "max_digits", "num_train", "num_test", "heldout_percent", "seed")


def sft_cache_dir(cfg: Config) -> str:
    shaping = {k: v for k, v in asdict(cfg.sft).items() if k not in ("log_every", "micro_batch")}  # what the
    # weights depend on (micro-batches change the float rounding only)
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


def sft_step(model, tokenizer, opt, train_rows: list[dict], rng: random.Random, s) -> float:
    """One optimiser step on a random batch of SFT targets (`s`: an SFTConfig); returns the loss."""
    import torch

    batch = [train_rows[rng.randrange(len(train_rows))] for _ in range(s.batch_size)]
    ids, attn, resp = encode_pairs(tokenizer, [r["prompt"] for r in batch], [_target(r, s, rng) for r in batch])
    opt.zero_grad(set_to_none=True)
    rows = s.micro_batch or auto_micro_batch(ids.shape[1], model.get_output_embeddings().weight.shape[0])
    if rows >= len(batch):
        loss = sft_loss(model, ids, attn, resp)
        loss.backward()
    else:  # each slice's NLL sum over the batch's response tokens: the gradients add up to the whole batch's
        total = resp[:, 1:].sum().clamp(min=1)
        loss = 0.0
        for i in range(0, len(batch), rows):
            part = sft_loss(model, ids[i:i + rows], attn[i:i + rows], resp[i:i + rows])
            part = part * resp[i:i + rows, 1:].sum() / total  # a slice's mean NLL x its share of the tokens
            part.backward()
            loss += part.detach()
    if s.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), s.grad_clip)
    opt.step()
    return loss.item()


def auto_micro_batch(length: int, vocab: int, budget: int = 2**28) -> int:
    """Rows per pass that keep its float32 logits (rows, length, vocab) under `budget` values (1 GiB)."""
    return max(1, budget // max(1, length * vocab))


def train_sft(cfg: Config, model, tokenizer, train_rows: list[dict], log=print):
    import torch

    configure_process(cfg)  # threads (the cached checkpoint must not depend on which command built it), allocator
    seed_everything(cfg.seed)
    s = cfg.sft
    params = [p for p in model.parameters() if p.requires_grad]  # with LoRA: the adapters alone
    # fused (models/optim.py), but for the embedded tiny model: its cached warm start and the demo's published
    # trajectory came from the default loop, which the fused kernel matches only to float rounding
    opt = adamw(params, lr=s.lr, weight_decay=s.weight_decay, betas=(0.9, 0.98),
                fused=cfg.model.name_or_path != "tiny")

    def lr_at(step: int) -> float:
        if step < s.warmup_steps:
            return (step + 1) / s.warmup_steps
        frac = (step - s.warmup_steps) / max(1, s.steps - s.warmup_steps)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    rng = random.Random(cfg.seed)
    model.train()
    t0 = time.time()
    for step in range(s.steps):
        loss = sft_step(model, tokenizer, opt, train_rows, rng, s)
        sched.step()
        if (step + 1) % s.log_every == 0 or step == 0:
            log(f"sft step {step + 1}/{s.steps}  loss {loss:.4f}  lr {sched.get_last_lr()[0]:.2e}  "
                f"{time.time() - t0:.0f}s")
    model.eval()
    return model


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
