"""One GRPO update with the policy sharded by FSDP2 (a test's program): whole groups per rank, every rank's passes
in step, the shards' gradients gathered whole on rank 0.

    torchrun --nnodes 2 --node-rank R --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:PORT \\
        -m tests.helpers.fsdp_update OUT.pt            (with ACCELERATE_USE_FSDP=true FSDP_VERSION=2)
    python -m tests.helpers.fsdp_update OUT.pt --one-process          # the 1-process equivalent

The same batch, loss and split as tests/helpers/ddp_update.py, through the trainer's own `Ranks` (which reads the
launcher's FSDP request and shards with `fully_shard`), with one rank given an extra group so that the ranks'
micro-batch counts differ and `Ranks.even_passes` has a pass to add. Rank 0 writes the loss, the gathered gradients
and what each rank held: its parameter shard's size against the whole.
"""
from __future__ import annotations

import argparse
from typing import Sequence

import torch

from reasoning_rl import config
from reasoning_rl.config.sections import Config
from reasoning_rl.models.tiny.model import build_tiny
from reasoning_rl.trainers.distributed import Ranks, zero_loss

from .ddp_update import group_loss, synthetic_batch


def split(groups: Sequence, rank: int, world: int = 2) -> list[list]:
    """Rank `rank`'s micro-batches of the 8 groups over 2 ranks: rank 0 the first five as three micro-batches, rank 1
    the last three as two, so rank 1 is one pass short and `Ranks.even_passes` adds a zero-loss pass there."""
    if world != 2 or rank not in (0, 1):
        raise ValueError(f"split: written for 2 ranks, got rank {rank} of {world}")
    mine = list(groups[:5]) if rank == 0 else list(groups[5:])
    return [mine[i::3] for i in range(3)] if rank == 0 else [mine[:2], mine[2:]]


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="one GRPO update under FSDP2; rank 0 saves loss and gradients")
    ap.add_argument("out")
    ap.add_argument("--one-process", action="store_true", help="both ranks' micro-batches here, averaged as FSDP2 "
                                                                 "averages the ranks' gradients")
    ap.add_argument("--one-batch", action="store_true", help="all 8 groups as one micro-batch (the sensitivity "
                                                              "check: another gradient)")
    ap.add_argument("--lora", action="store_true", help="LoRA adapters, random so the policy is not its reference")
    ap.add_argument("--kl", action="store_true", help="with --lora, a KL term to the reference: the policy with its "
                    "adapters off, whose forward under FSDP2 is a collective every pass (a zero-loss one too) runs")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    ranks = Ranks()
    model, tok = build_tiny(config.load(Config, overrides=["model.tiny.num_layers=2"]))
    ref = None
    if a.lora:
        import peft

        from reasoning_rl.models.lora import reference_of

        torch.manual_seed(0)  # the same adapters in every process
        model = peft.get_peft_model(model, peft.LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False,
                                                           task_type="CAUSAL_LM"))
        ref = reference_of(model) if a.kl else None
    whole = sum(p.numel() for p in model.parameters())
    ranks.wrap(model)  # FSDP2 in place under the launcher's request; nothing alone
    ref = ranks.wrap_frozen(ref)  # a LoRA reference stays the policy with its adapters off
    groups = synthetic_batch()  # 8 groups of 4
    if a.one_batch:
        plan = [(list(groups), 1.0)]
    elif a.one_process:  # each simulated rank's parts, its gradient divided by the 2 ranks FSDP2 averages over
        plan = [(part, 1.0 / 2) for r in (0, 1) for part in split(groups, r)]
    else:
        plan = [(part, 1.0) for part in split(groups, ranks.rank, ranks.world)]
    losses, touched = [], []

    def touch() -> None:
        touched.append(1)
        zero_loss(model, ref=ranks.in_step(ref))

    with ranks.even_passes(len(plan), touch):  # rank 1 plans 2 passes, rank 0 3: rank 1 adds a zero-loss one
        for part, w in plan:
            loss = group_loss(model, part, tok.pad_token_id, ref) * w * len(part) / 8  # weighed by its share
            loss.backward()
            losses.append(loss.detach())
    extra = len(touched)
    local = sum(p.to_local().numel() if hasattr(p, "to_local") else p.numel() for p in model.parameters())
    total = torch.stack(losses).sum()
    if ranks.world > 1:
        torch.distributed.all_reduce(total)
        total = total / ranks.world  # FSDP2 averages the ranks' gradients: the loss reported is averaged alike
    grads = {}
    for k, p in model.named_parameters():
        g = p.grad.full_tensor() if p.grad is not None and hasattr(p.grad, "full_tensor") else p.grad
        if g is not None:
            grads[k] = g.detach().clone()
    held, extras = ranks.gather([local]), ranks.gather([extra])
    if ranks.main:
        torch.save({"loss": total.item(), "grads": grads, "world": ranks.world, "held": held, "whole": whole,
                    "extra_passes": extras}, a.out)
    ranks.barrier()


if __name__ == "__main__":
    main()
