"""The GRPO update under `accelerate`: whole groups per rank, gradients averaged by DDP.

    accelerate launch --num_processes 2 --cpu -m reasoning_rl.trainers.distributed OUT.pt
    python -m reasoning_rl.trainers.distributed OUT.pt --accumulation 2      # the 1-process equivalent

What it shows, on the real tiny model and the real loss (`losses.ppo_clip` with token-mean
aggregation): a batch of groups is split across ranks by whole groups (`shard_groups`: a group's
advantages are computed on the whole group *before* the split, so no group is ever normalised on
a part of itself); each rank backpropagates its share; DDP averages gradients across ranks. That
equals one process accumulating the same shares as micro-batches (`accelerator.accumulate`), which
`tests/test_distributed.py` checks to float tolerance. Rank 0 alone writes the result (`is_main`).

`Ranks` is what `train_grpo` uses under `accelerate launch` (or torchrun): each rank samples and
verifies its own share of the prompts, every rank sees every rank's verified groups (gathered, for
metrics, the ledger and the archive, which rank 0 alone writes), the policy is wrapped in DDP for the
update, and rank 0 alone evaluates and saves. Outside a launcher it is a single process and changes
nothing.
"""
from __future__ import annotations

import argparse
import contextlib
import os
from typing import Sequence

import torch

from .. import config
from ..algos.advantages import grpo
from ..config.sections import Config
from ..models.logprobs import pad_rollouts, token_logprobs
from ..algos.losses import ppo_clip
from ..models.tiny.model import build_tiny


class Ranks:
    """This process's place in a launched job: rank, world size, DDP wrapping, gathering. A no-op alone."""

    def __init__(self) -> None:
        self.acc = None
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            from accelerate import Accelerator  # heavy, and needed only under a launcher

            self.acc = Accelerator(cpu=not torch.cuda.is_available())
        self.rank = self.acc.process_index if self.acc else 0
        self.world = self.acc.num_processes if self.acc else 1
        self.main = self.rank == 0

    def share(self, n: int, field: str) -> int:
        """This rank's share of `n` prompts per step; `n` must divide evenly (the error names the knob)."""
        if n % self.world:
            raise ValueError(f"{field} ({n}) must be divisible by the number of processes ({self.world})")
        return n // self.world

    def logger(self, log):
        """`log` on rank 0; a no-op on the others (one copy of every line)."""
        return log if self.main else (lambda *_a, **_k: None)

    def wrap(self, model):
        """The module to run forward/backward through: DDP (gradients averaged across ranks) or the model."""
        return self.acc.prepare_model(model) if self.acc else model

    def gather(self, items: list) -> list:
        """Every rank's items, in rank order, on every rank (picklable objects)."""
        if not self.acc:
            return list(items)
        from accelerate.utils import gather_object

        return [x for part in gather_object([list(items)]) for x in part]  # one list per rank, in rank order

    def no_sync(self, module, skip: bool):
        """Accumulate without the all-reduce (every micro-batch but a minibatch's last) when `skip`."""
        return module.no_sync() if skip and self.acc and hasattr(module, "no_sync") else contextlib.nullcontext()

    def max(self, n: int) -> int:
        return max(self.gather([n])) if self.acc else n

    def main_first(self, fn, *args, **kwargs):
        """fn on rank 0, then on the others (e.g. loading the policy: rank 0 builds the SFT cache once)."""
        out = fn(*args, **kwargs) if self.main else None
        self.barrier()
        return out if self.main else fn(*args, **kwargs)

    def barrier(self) -> None:
        if self.acc:
            self.acc.wait_for_everyone()


def zero_loss(module, bos_id: int, critic: bool = False) -> None:
    """Backpropagate a zero loss through `module` (a rank with no rows this minibatch): DDP's all-reduce still
    meets the other ranks', and adds nothing to their gradients. critic: `module` takes (prompt ids, mask,
    completion ids, mask) and returns values."""
    one = torch.tensor([[bos_id]], device=next(module.parameters()).device)
    out = module(one, torch.ones_like(one), one, torch.ones_like(one)) if critic else module(input_ids=one).logits
    (out.sum() * 0.0).backward()


class NullWriter:
    """The metrics writer of a rank that writes nothing (every rank but 0)."""

    def write(self, m: dict) -> None:
        pass

    def close(self) -> None:
        pass


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


def group_loss(model, groups, pad_id: int):
    """GRPO loss of a list of whole groups: group-normalised A, PPO clip, token mean."""
    R = torch.tensor([[r for _, _, r in samples] for _, samples in groups])  # (B, G)
    A = grpo(R)  # per group, before any split
    rows = [(p, ids, old, A[b, i].item()) for b, (p, samples) in enumerate(groups)
            for i, (ids, old, _) in enumerate(samples)]
    b = pad_rollouts([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], pad_id)
    logp = token_logprobs(model, b.p_ids, b.p_mask, b.c_ids, b.c_mask)
    return ppo_clip(logp, b.logp_old, torch.tensor([r[3] for r in rows]), b.c_mask, agg="token_mean").loss


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
