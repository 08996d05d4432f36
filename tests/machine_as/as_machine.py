"""The test suite run as another machine would run it: `REASONING_RL_TEST_AS="kernels=draw+buffer threads=2
allocator=system"` forces, in the test process and in every subprocess it starts through `run_env` (this folder's
sitecustomize.py), what a machine's measurements or cores would otherwise choose:

    kernels    the CPU decode kernels every rollout runs on where the config says auto (a combination of packed,
               draw, attention, buffer, step as `kernel_choice.name_of` writes it, or eager), whatever the model's
               size (auto keeps the tiny model eager; another machine's auto picks any combination for the real
               one). What a model cannot run (the fused step on a non-Llama model) stays off. An explicit
               `generation.cpu_decode=eager` or `packed` stays as asked: a test that asks compares against it. The
               tests of auto's own choice run it unforced (the `unforced` fixture, tests/conftest.py).
    threads    torch's intra-op threads wherever `num_threads` is 0 (what the machine's cores would give).
    allocator  the C allocator every process runs under (cpu_allocator's reuse or system), whatever it asks.

The processor's own instruction sets are forced from outside the process, before torch loads, by
`ATEN_CPU_CAPABILITY` (ATen's vectorised kernels: default, avx2, avx512) and `ONEDNN_MAX_CPU_ISA` (oneDNN's
products): scripts/test_as_machines.sh sets them, and `make test-kernels` runs the tests whose numbers depend on all
of these under each combination in turn.

Not here: anything in the library itself (it reads no environment variable for its config, by design); the
choice of tests (the script's).
"""
from __future__ import annotations

import os

VAR = "REASONING_RL_TEST_AS"
ORIGINAL: list = []  # (module, name, what it was) for each patch that a test of the mechanism itself undoes


def settings(text: str | None = None) -> dict[str, str]:
    """{'kernels': ..., 'threads': ..., 'allocator': ...} from the variable's `key=value` words; a key not known
    is an error naming it (a misspelt setting must not run the suite as this machine and call it another)."""
    out = {}
    for word in (os.environ.get(VAR, "") if text is None else text).split():
        key, _, value = word.partition("=")
        if key not in ("kernels", "threads", "allocator") or not value:
            raise ValueError(f"{VAR}: {word!r} is not kernels=..., threads=N or allocator=reuse|system")
        out[key] = value
    return out


def forced_kernels(name: str, possible):
    """The `Kernels` named `name` ('eager' or kernels joined by +), less what `possible` rules out."""
    from reasoning_rl.rollout.kernel_choice import NAMES, Kernels

    words = set() if name == "eager" else set(name.split("+"))
    if words - set(NAMES):
        raise ValueError(f"{VAR}: kernels={name!r}: {sorted(words - set(NAMES))} not among {NAMES}")
    return Kernels(*(n in words and bool(p) for n, p in zip(NAMES, possible)))


def apply(text: str | None = None) -> dict[str, str]:
    """Patch this process as the settings say; returns them ({} when the variable is unset: nothing patched)."""
    found = settings(text)
    if not found:
        return found
    if "kernels" in found:
        from reasoning_rl.rollout import cpu_kernels

        resolve = cpu_kernels.resolve

        def forced(setting, model, rows=16):
            if setting != "auto" or next(model.parameters()).device.type != "cpu":
                return resolve(setting, model, rows)
            return forced_kernels(found["kernels"], cpu_kernels._possible(model))

        ORIGINAL.append((cpu_kernels, "resolve", resolve))
        cpu_kernels.resolve = forced
    if "threads" in found:
        import torch

        from reasoning_rl.models import device
        from reasoning_rl.rollout import engines

        n = int(found["threads"])
        for module in (device, engines):  # engines imports the function by name
            module.resolve_threads = lambda num_threads, name: num_threads or n
        torch.set_num_threads(n)
    if "allocator" in found:
        from reasoning_rl.models import allocator

        configure, choice = allocator.configure, found["allocator"]
        configure(choice)
        allocator.configure = lambda _asked: configure(choice)
    return found
