"""FSDP2 under a launcher: each rank holds a shard of every trained weight, its gradient and its optimiser state.

    plan = ShardPlan.from_env()       # None unless the launcher asked for FSDP (version 2)
    shard(model, plan, device)        # fully_shard each transformer block, then the whole model (in place)
    with full_weights(model): ...     # this rank's forwards without collectives: rollouts, scoring, evaluation
    full_state_dict(model)            # the whole weights on rank 0 (a collective: every rank calls it)

The request comes from the launcher's configuration, not from knobs of our own: `accelerate launch` with an FSDP
config (`distributed_type: FSDP`, `fsdp_version: 2`; examples/accelerate/fsdp2_*.yaml) exports it to each process,
and a `torchrun` user exports the same variables (ACCELERATE_USE_FSDP=true, FSDP_VERSION=2; optional
FSDP_RESHARD_AFTER_FORWARD, FSDP_ACTIVATION_CHECKPOINTING, FSDP_OFFLOAD_PARAMS, ACCELERATE_MIXED_PRECISION=bf16).
We call torch's `fully_shard` ourselves instead of accelerate's `prepare`: accelerate's FSDP path runs on GPUs only
(`Accelerator(cpu=True)` turns an FSDP config into DDP, and without it a machine without a GPU is not distributed),
so the CPU path, the one this project's CI can run, would be untested; ours is one path for both, its mesh on the
launcher's device ("cuda" with NCCL, "cpu" with gloo).

What each rank holds (docs/scale-out.md): 1/world of each parameter, its gradient and Adam's two moments; a whole
copy of the weights only inside `full_weights` (a rollout needs every weight of every layer at each token) and of
one block at a time in a training forward. The trainer keeps every rank's passes in step: a forward or backward
through a sharded model is a collective, so a rank with fewer micro-batches than another runs zero-loss passes
(`Ranks.even_passes`), and passes that differ per rank by nature (sampling, scoring, evaluation) run inside
`full_weights`, where no collective happens.

Not here: tensor or pipeline parallelism, FSDP version 1, sharding across nodes of different sizes.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Iterator

from ..errors import UserError


def _flag(env, name: str, default: bool) -> bool:
    v = env.get(name)
    if v is None or v == "":
        return default
    if v.lower() in ("true", "1", "yes"):
        return True
    if v.lower() in ("false", "0", "no"):
        return False
    raise UserError(f"{name}: expected true or false, got {v!r}")


@dataclass(frozen=True)
class ShardPlan:
    reshard_after_forward: bool = True  # free a block's gathered weights after its forward (less memory, one more
    # all-gather in backward)
    activation_checkpointing: bool = False  # recompute each block's activations in backward
    offload: bool = False  # parameters and gradients kept on the CPU between uses (a GPU run's last resort)
    mixed_precision: str = "no"  # "bf16": compute in bfloat16, gradients reduced in float32

    @classmethod
    def from_env(cls, env=None) -> "ShardPlan | None":
        """The launcher's FSDP request, or None (no FSDP: one process, or DDP). One line for what we do not run."""
        env = os.environ if env is None else env
        if not _flag(env, "ACCELERATE_USE_FSDP", False):
            return None
        version = env.get("FSDP_VERSION", "1")
        if version != "2":
            raise UserError(f"FSDP_VERSION: value {version!r}; reasoning-rl shards with FSDP2 only: set fsdp_version: 2 "
                            f"in the accelerate config (or FSDP_VERSION=2 under torchrun)")
        reshard = env.get("FSDP_RESHARD_AFTER_FORWARD", "true")
        if reshard.upper() in ("FULL_SHARD", "SHARD_GRAD_OP", "NO_RESHARD"):  # FSDP1's words
            reshard = "true" if reshard.upper() == "FULL_SHARD" else "false"
        mp = env.get("ACCELERATE_MIXED_PRECISION", "no") or "no"
        if mp not in ("no", "bf16"):
            raise UserError(f"ACCELERATE_MIXED_PRECISION: value {mp!r} with FSDP2; use no or bf16")
        return cls(reshard_after_forward=_flag({"x": reshard}, "x", True),
                   activation_checkpointing=_flag(env, "FSDP_ACTIVATION_CHECKPOINTING", False),
                   offload=_flag(env, "FSDP_OFFLOAD_PARAMS", False), mixed_precision=mp)


def blocks(model) -> list:
    """The transformer blocks to shard one by one: modules whose class a transformers model lists in
    `_no_split_modules` (LlamaDecoderLayer, ...), found anywhere below `model` (a PEFT wrapper, PPO's critic)."""
    names: set[str] = set()
    for m in model.modules():
        names |= set(getattr(m, "_no_split_modules", None) or ())
    return [m for m in model.modules() if type(m).__name__ in names]


def shard(model, plan: ShardPlan, device: str = "cpu"):
    """Shard `model` in place: each block, then the model (the embeddings, the final norm, a tied output layer);
    returns it. Build its optimiser after this (the parameters are now DTensors)."""
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy, fully_shard

    if plan.offload and device == "cpu":
        raise UserError("FSDP_OFFLOAD_PARAMS: true, but the model already lives on the CPU; offloading is for GPUs")
    mesh = init_device_mesh(device, (torch.distributed.get_world_size(),))
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) \
        if plan.mixed_precision == "bf16" else MixedPrecisionPolicy()
    kw = {"mesh": mesh, "mp_policy": mp, "offload_policy": CPUOffloadPolicy() if plan.offload else OffloadPolicy(),
          "reshard_after_forward": plan.reshard_after_forward}
    if plan.activation_checkpointing:  # the transformer below a PEFT wrapper or PPO's critic
        inner = model.get_base_model() if hasattr(model, "get_base_model") else model
        inner = next((m for m in inner.modules() if hasattr(m, "gradient_checkpointing_enable")), None)
        if inner is not None:
            inner.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    found = blocks(model)
    if not found:
        raise UserError(f"FSDP: {type(model).__name__} names no transformer block class (_no_split_modules); "
                        f"cannot shard it layer by layer")
    for block in found:
        fully_shard(block, **kw)
    fully_shard(model, **kw)
    model._rrl_reshard_after_forward = plan.reshard_after_forward  # what `full_weights` puts back
    return model


def is_sharded(model) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


@contextlib.contextmanager
def full_weights(*models) -> Iterator[None]:
    """Within the block, each sharded model holds its whole weights and keeps them across forwards, so this rank's
    forwards run without collectives (any number, any shape). Entering is a collective (an all-gather): every rank
    enters together. Unsharded models pass through."""
    sharded = [m for m in models if m is not None and is_sharded(m)]
    for m in sharded:
        m.set_reshard_after_forward(False)  # every sharded module below it too
        for sub in m.modules():  # `unshard` is not recursive: each block's weights are gathered here, in the
            if is_sharded(sub):  # same order on every rank
                sub.unshard()
    try:
        yield
    finally:
        for m in sharded:
            for sub in m.modules():
                if is_sharded(sub):
                    sub.reshard()
            m.set_reshard_after_forward(getattr(m, "_rrl_reshard_after_forward", True))  # the plan's, every module


def gathered(model, everywhere: bool = False):
    """An unsharded copy of a sharded model on rank 0 (None on the others), or with `everywhere` on every rank: the
    same class built from its config (a PEFT model: its base, then its adapters' config), the whole weights loaded.
    Every rank calls it (a collective). Rank 0's copy is what the run saves as final/ and evaluates after training;
    every rank's is what PPO's critic starts from (a copy of the policy's body, sharded in its turn)."""
    import torch
    from transformers import AutoModelForCausalLM

    sd = full_state_dict(model, everywhere)
    if not everywhere and torch.distributed.get_rank() != 0:
        return None
    if hasattr(model, "peft_config"):
        import peft

        base = model.get_base_model()
        plain = peft.get_peft_model(AutoModelForCausalLM.from_config(base.config),
                                    next(iter(model.peft_config.values())))
    else:
        plain = AutoModelForCausalLM.from_config(model.config)
    plain.to(next(iter(sd.values())).dtype).load_state_dict(sd)
    plain.generation_config = model.generation_config
    return plain.eval()


def full_state_dict(model, everywhere: bool = False) -> dict:
    """The whole weights as plain tensors: on rank 0 alone, on the CPU ({} elsewhere), or with `everywhere` on every
    rank, on the model's device. Every rank calls it (a collective)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=not everywhere))


def state_bytes(params: int, world: int = 1, sharded: bool = False, trained: int | None = None,
                bytes_per: int = 4) -> int:
    """What training state one rank holds, in bytes: the weights (`bytes_per` each: 4 in float32, also the master
    copy under FSDP2's bf16 compute), plus for the `trained` parameters (default: all; with LoRA the adapters) a
    gradient and AdamW's two moments, all float32:
        one process or DDP:  bytes_per * P + 12 * T
        FSDP2 over W ranks:  (bytes_per * P + 12 * T) / W        (each tensor split in W, rounded up per rank)
    Activations and the one block gathered whole during its forward come on top (they depend on the batch)."""
    trained = params if trained is None else trained
    total = bytes_per * params + 12 * trained
    return -(-total // world) if sharded else total
