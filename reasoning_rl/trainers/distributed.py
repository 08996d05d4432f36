"""A trainer's place in a launched job: `Ranks` (rank, world size, DDP wrapping, gathering), and what a rank with
nothing to do still owes the others.

    ranks = Ranks()                 one process: rank 0 of 1, every method a no-op
    ranks.share(n, field)           this rank's share of n prompts per step
    ranks.wrap(model)               FSDP2 when the launcher asks for it (sharding.py), else DDP under a launcher
                                    (gradients averaged), else the model
    ranks.wrap_frozen(model)        a frozen model (the reference) sharded under FSDP2, else as it is
    ranks.in_step(ref)              the reference if its forwards are collectives (LoRA under FSDP2), else None
    ranks.whole_copy(model)         FSDP2: every rank's unsharded copy (PPO's critic starts from one)
    ranks.full_weights(*models)     FSDP2: whole weights within the block, forwards without collectives
    ranks.even_passes(planned, touch)   FSDP2: every rank's training passes in step (padded with zero-loss ones)
    ranks.gather(items)             every rank's items, in rank order, on every rank
    zero_loss(module)               a zero-loss backward (a rank with no rows this minibatch)

Under `accelerate launch` (or torchrun) each rank samples and verifies its own share of the prompts, every rank
sees every rank's verified groups (gathered, for metrics, the ledger and the archive, which rank 0 alone writes),
the policy is wrapped in DDP for the update, and rank 0 alone evaluates and saves. Whole groups stay on one rank, so
no group is normalised on a part of itself. tests/helpers/ddp_update.py shows that two ranks' DDP update equals one
process accumulating the same whole-group micro-batches.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
from typing import Callable, Iterator

import torch

from .sharding import ShardPlan, full_weights, gathered, shard


class Ranks:
    """This process's place in a launched job: rank, world size, DDP wrapping, gathering. A no-op alone."""

    def __init__(self) -> None:
        self.acc = None
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            from accelerate import Accelerator  # heavy, and needed only under a launcher

            self.acc = Accelerator(cpu=not torch.cuda.is_available())
            atexit.register(release_process_group)  # gloo's threads must not outlive the interpreter
        self.rank = self.acc.process_index if self.acc else 0
        self.world = self.acc.num_processes if self.acc else 1
        self.main = self.rank == 0
        self.plan = ShardPlan.from_env() if self.world > 1 else None  # FSDP2, as the launcher asked

    @property
    def sharded(self) -> bool:
        return self.plan is not None

    @property
    def device(self) -> str:
        return "cuda" if torch.cuda.is_available() else "cpu"

    def share(self, n: int, field: str) -> int:
        """This rank's share of `n` prompts per step; `n` must divide evenly (the error names the knob)."""
        if n % self.world:
            raise ValueError(f"{field} ({n}) must be divisible by the number of processes ({self.world})")
        return n // self.world

    def logger(self, log):
        """`log` on rank 0; a no-op on the others (one copy of every line)."""
        return log if self.main else (lambda *_a, **_k: None)

    def describe(self) -> str | None:
        """One log line on how the ranks share the model, or None for one process."""
        if self.world == 1:
            return None
        if self.plan is None:
            return f"DDP over {self.world} processes: each holds the whole model, gradients averaged"
        p = self.plan
        return (f"FSDP2 over {self.world} processes: each holds 1/{self.world} of the weights, gradients and optimiser "
                f"state (reshard after forward {p.reshard_after_forward}, activation checkpointing "
                f"{p.activation_checkpointing}, mixed precision {p.mixed_precision}, offload {p.offload})")

    def wrap(self, model):
        """The module to run forward/backward through: under FSDP2 the model itself, sharded in place (build its
        optimiser after this); DDP (gradients averaged across ranks) under another launcher; else the model."""
        if self.plan is not None:
            return shard(model, self.plan, self.device)
        return self.acc.prepare_model(model) if self.acc else model

    def wrap_frozen(self, model):
        """A model that only scores (the reference): sharded like the policy under FSDP2, else as it is. A LoRA
        policy's reference (the policy with its adapters off) is left as it is: under FSDP2 its forwards go through
        the sharded policy, collectives that every rank runs in step (`in_step`)."""
        if self.plan is None or model is None or not isinstance(model, torch.nn.Module):
            return model
        return shard(model, self.plan, self.device)

    def in_step(self, ref):
        """`ref` where its forwards are collectives every rank must run as often as the others (a LoRA reference
        under FSDP2, which goes through the sharded policy; a zero-loss pass runs it too), else None."""
        return ref if self.plan is not None and ref is not None and not isinstance(ref, torch.nn.Module) else None

    def whole_copy(self, model):
        """Every rank's unsharded copy of a model sharded under FSDP2 (a collective); elsewhere the model itself."""
        return gathered(model, everywhere=True) if self.plan is not None else model

    def gathered(self, model):
        """The model to save and evaluate after training: under FSDP2 an unsharded copy on rank 0 (None on the
        others; every rank calls this), else the model itself."""
        return gathered(model) if self.plan is not None else model

    def full_weights(self, *models):
        """FSDP2: within the block these models hold their whole weights and run forwards without collectives
        (entered by every rank together); otherwise nothing happens."""
        return full_weights(*models) if self.plan is not None else contextlib.nullcontext()

    @contextlib.contextmanager
    def even_passes(self, planned: int, touch: Callable[[], None]) -> Iterator[None]:
        """FSDP2: every forward and backward through a sharded model is a collective, so every rank must run as many
        training passes as the others. The ranks agree on the largest count before the block (a rank's `planned`
        passes), and a rank with fewer runs `touch()` (a zero-loss pass) after it until it has as many. Elsewhere
        nothing happens."""
        target = self.max(planned) if self.plan is not None else planned
        yield
        for _ in range(target - planned):
            touch()

    def gather(self, items: list) -> list:
        """Every rank's items, in rank order, on every rank (picklable objects)."""
        if not self.acc:
            return list(items)
        from accelerate.utils import gather_object

        return [x for part in gather_object([list(items)]) for x in part]  # one list per rank, in rank order

    def no_sync(self, module, skip: bool):
        """DDP: accumulate without the all-reduce (every micro-batch but a minibatch's last) when `skip`. FSDP2
        reduce-scatters every micro-batch's gradient into the shards (the same sum, and no rank waits on another's
        count of micro-batches)."""
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


def release_process_group() -> None:
    """Destroy the default process group, then wait until gloo's worker threads are done with their last work, while
    the interpreter is whole (`Ranks` registers this at exit).

    A gloo worker thread drops its reference to a collective's work object after the rank waiting on it has moved on;
    when that was the last reference to a tensor whose Python object Python had already let go of, dropping it takes
    the GIL. If the interpreter has begun its teardown by then, the thread is made to exit inside a destructor that
    may not throw, and the process dies on SIGABRT, "terminate called without an active exception", after its work
    is done (a core dump on a 2-core machine showed that stack, about one launch in ten); the launcher then reports
    the job failed and the other node's launcher waits out its exit barrier. Destroying the group does not join
    those threads (gloo's group keeps them until its last reference dies, and meshes hold it), so this hook then
    lets them settle (`let_threads_settle`: at most 2 s, 0.1 s when they are idle). Idempotent."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
        let_threads_settle()


def let_threads_settle(quiet_s: float = 0.1, limit_s: float = 2.0, look_s: float = 0.005) -> bool:
    """Sleep, the GIL free, until every other thread of this process has been seen asleep for `quiet_s` in a row
    (Linux's /proc, a look every `look_s`); True when that happened within `limit_s`, False otherwise (and where
    there is no /proc, after sleeping `quiet_s`). A thread waiting for the GIL looks asleep while this one holds it
    for a look, so one quiet look proves nothing: the quiet span gives such a thread many GIL-free windows to run."""
    tasks = "/proc/self/task"
    if not os.path.isdir(tasks):
        time.sleep(quiet_s)
        return False
    me, now = str(threading.get_native_id()), time.monotonic()
    end, quiet_since = now + limit_s, now
    while time.monotonic() < end:
        time.sleep(look_s)
        if any(state == "R" for state in _thread_states(tasks, me)):
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_s:
            return True
    return False


def _thread_states(tasks: str, me: str) -> Iterator[str]:
    """Each other thread's scheduler state letter (R running, S sleeping, ...) from /proc/self/task/TID/stat."""
    for tid in os.listdir(tasks):
        if tid == me:
            continue
        try:
            with open(f"{tasks}/{tid}/stat") as f:
                yield f.read().rsplit(")", 1)[1].split()[0]  # the field after the (name), which may hold spaces
        except (OSError, IndexError):  # the thread ended between the listing and the read
            continue


def grad_norm(norm) -> float:
    """`clip_grad_norm_`'s total norm as a float (a DTensor's under FSDP2: its full value)."""
    full = getattr(norm, "full_tensor", None)
    return float(full() if full is not None else norm)


def zero_loss(module, ref=None, critic=None) -> None:
    """Backpropagate a zero loss through `module` (a rank with no rows this minibatch): DDP's all-reduce still
    meets the other ranks', and adds nothing to their gradients. Under FSDP2 every forward and backward is a
    collective, so this pass runs what a training pass runs, in its order: the policy's forward, then the forward of
    `ref` (a reference each pass scores whose forward is a collective, `Ranks.in_step`) and of `critic` (PPO's,
    taking prompt ids, mask, completion ids, mask), then the policy's backward and the critic's. The one token it
    feeds is id 0, which every vocabulary has (a tokenizer may have no BOS token: Qwen2's have none)."""
    one = torch.zeros((1, 1), dtype=torch.long, device=next(module.parameters()).device)
    out = module(input_ids=one).logits
    if ref is not None:
        ref(input_ids=one)
    v = critic(one, torch.ones_like(one), one, torch.ones_like(one)) if critic is not None else None
    (out.sum() * 0.0).backward()
    if v is not None:
        (v.sum() * 0.0).backward()


class NullWriter:
    """The metrics writer of a rank that writes nothing (every rank but 0)."""

    def write(self, m: dict) -> None:
        pass

    def close(self) -> None:
        pass
