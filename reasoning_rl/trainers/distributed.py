"""A trainer's place in a launched job: `Ranks` (rank, world size, DDP wrapping, gathering), and what a rank with
nothing to do still owes the others.

    ranks = Ranks()                 one process: rank 0 of 1, every method a no-op
    ranks.share(n, field)           this rank's share of n prompts per step
    ranks.wrap(model)               DDP under a launcher (gradients averaged), else the model
    ranks.gather(items)             every rank's items, in rank order, on every rank
    zero_loss(module, bos_id)       a zero-loss backward (a rank with no rows this minibatch)

Under `accelerate launch` (or torchrun) each rank samples and verifies its own share of the prompts, every rank
sees every rank's verified groups (gathered, for metrics, the ledger and the archive, which rank 0 alone writes),
the policy is wrapped in DDP for the update, and rank 0 alone evaluates and saves. Whole groups stay on one rank, so
no group is normalised on a part of itself. tests/helpers/ddp_update.py shows that two ranks' DDP update equals one
process accumulating the same whole-group micro-batches.
"""
from __future__ import annotations

import contextlib
import os

import torch


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
