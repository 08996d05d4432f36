"""One GRPO update under `accelerate`: whole groups per rank, gradients averaged by DDP (a test's program).

    accelerate launch --num_processes 2 --cpu -m tests.helpers.ddp_update OUT.pt
    python -m tests.helpers.ddp_update OUT.pt --accumulation 2      # the 1-process equivalent

On the real tiny model and the real loss (`ppo_clip` with token-mean aggregation): a batch of groups is split across
ranks by whole groups (`shard_groups`: a group's advantages are computed on the whole group *before* the split);
each rank backpropagates its share; DDP averages gradients across ranks. That equals one process accumulating the
same shares as micro-batches (`accelerator.accumulate`), which tests/test_distributed.py checks to float tolerance.
Rank 0 alone writes the result.
"""
from __future__ import annotations

import argparse
from typing import Sequence

import torch

from reasoning_rl import config
from reasoning_rl.algos.advantages import grpo
from reasoning_rl.algos.losses import ppo_clip
from reasoning_rl.config.sections import Config
from reasoning_rl.models.logprobs import pad_rollouts, token_logprobs
from reasoning_rl.models.tiny.model import build_tiny


def shard_groups(groups: Sequence, rank: int, world: int) -> list:
    """Whole groups for this rank (round robin); never a group split across ranks."""
    if not 0 <= rank < world:
        raise ValueError(f"shard_groups: rank {rank} outside world of {world}")
    return list(groups[rank::world])


def synthetic_batch(num_groups: int = 8, G: int = 4, seed: int = 0):
    """Fixed groups: (prompt ids, [(completion ids, old log-probs, reward)] x G), rewards with spread."""
    gen = torch.Generator().manual_seed(seed)
    groups = []
    for b in range(num_groups):
        prompt = torch.randint(5, 60, (4 + b % 3,), generator=gen).tolist()
        samples = []
        for i in range(G):
            n = int(torch.randint(1, 7, (1,), generator=gen))  # groups of different token counts
            ids = torch.randint(5, 60, (n,), generator=gen).tolist()
            old = (-torch.rand(n, generator=gen) * 2).tolist()
            samples.append((ids, old, float((b + i) % 2)))
        groups.append((prompt, samples))
    return groups


def group_loss(model, groups, pad_id: int, ref=None):
    """GRPO loss of a list of whole groups: group-normalised A, PPO clip, token mean; with `ref`, a k3 KL term to
    it (beta 0.1), its log-probs taken after the policy's as the trainer takes them."""
    R = torch.tensor([[r for _, _, r in samples] for _, samples in groups])  # (B, G)
    A = grpo(R)  # per group, before any split
    rows = [(p, ids, old, A[b, i].item()) for b, (p, samples) in enumerate(groups)
            for i, (ids, old, _) in enumerate(samples)]
    b = pad_rollouts([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], pad_id)
    logp = token_logprobs(model, b.p_ids, b.p_mask, b.c_ids, b.c_mask)
    lref = None
    if ref is not None:
        with torch.no_grad():
            lref = token_logprobs(ref, b.p_ids, b.p_mask, b.c_ids, b.c_mask)
    return ppo_clip(logp, b.logp_old, torch.tensor([r[3] for r in rows]), b.c_mask, agg="token_mean", logp_ref=lref,
                    beta=0.1 if ref is not None else 0.0).loss


def main(argv: Sequence[str] | None = None) -> None:
    from accelerate import Accelerator

    ap = argparse.ArgumentParser(description="one GRPO update under accelerate; rank 0 saves loss and gradients")
    ap.add_argument("out")
    ap.add_argument("--accumulation", type=int, default=1, help="micro-batches per optimiser step on each rank")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    acc = Accelerator(cpu=True, gradient_accumulation_steps=a.accumulation)
    model, tok = build_tiny(config.load(Config, overrides=["model.tiny.num_layers=1"]))
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    model, opt = acc.prepare(model, opt)
    mine = shard_groups(synthetic_batch(), acc.process_index, acc.num_processes)
    parts = [mine[i::a.accumulation] for i in range(a.accumulation)]  # whole groups per micro-batch too
    losses = []
    for part in parts:
        with acc.accumulate(model):
            loss = group_loss(model, part, tok.pad_token_id)
            acc.backward(loss)
            losses.append(loss.detach())
    mean_loss = acc.reduce(torch.stack(losses).mean(), reduction="mean")
    if acc.is_main_process:
        grads = {k: p.grad.detach().clone() for k, p in acc.unwrap_model(model).named_parameters() if p.grad is not None}
        torch.save({"loss": mean_loss.item(), "grads": grads, "world": acc.num_processes}, a.out)
    acc.wait_for_everyone()


if __name__ == "__main__":
    main()
