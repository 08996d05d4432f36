"""Faster decoding on a CPU: linear weights prepacked for oneDNN, and one uniform draw per sampled token.

A decode step of a real model on a CPU is a few rows (the live samples) multiplied by every weight matrix, then a
draw from a vocabulary-sized distribution per row. Profiled on SmolLM2-135M (docs/results.md), eager PyTorch
spends most of that step in two places this file replaces for the length of a rollout:
- `torch.nn.functional.linear` repacks the weight on every call; `packed_linears(model)` copies each plain
  `nn.Linear`'s weight once into oneDNN's own layout (`Tensor.to_mkldnn`) and routes the layer's forward through
  oneDNN's linear (the operator PyTorch's compiler uses for a frozen CPU model) until the block ends: time saved
  at float32, none at bfloat16, whose eager products already use the CPU's bf16 instructions;
- `torch.multinomial` draws one exponential number per vocabulary entry (49,152 per row per step); `draw(probs)`
  draws one uniform per row and finds it in the cumulative distribution.

    with packed_linears(model):      # under no_grad, in the thread that entered it; the weights copied once
        ...                          # the model's forward, as usual
    draw(probs)  # (b, V) -> (b,)    # a token of each row, P(token i) = probs[i] / sum(probs)

Either changes nothing of what is sampled from: the products differ by float rounding (a log-prob by about 1e-5)
and the random stream is another one (a seeded run still repeats itself, but not `transformers.generate`'s draws).
`resolve(setting, model) -> Kernels(pack, draw)` says which a rollout uses (`GenerationConfig.cpu_decode`):
`packed` both, `eager` neither, `auto` what was measured to pay on SmolLM2-135M (docs/results.md) for a model of at
least `AUTO_MIN_PARAMS` parameters on a CPU: `draw` at any dtype (the draws weigh most at bfloat16, whose eager
products are fast), packing at float32 only (at bfloat16 the eager products were the faster). The tiny model and the test models stay on eager PyTorch, and with it on the very
random stream of earlier runs.

A packed layer serves only a forward pass without gradients from the thread that packed it; any other call (the
trainer's forward in another thread, a pass with autograd on) goes to the layer's own weights, so training never
sees the copy. A layer that already has a forward of its own on the instance (a hook library's wrapper) is left
as it is. Not here: GPU kernels, quantized weights, fusing layers, a compiled step (`torch.compile` of the
model's forward was tried and was slower after a long compile: docs/results.md).
"""
from __future__ import annotations

import contextlib
import threading
from typing import Iterator, NamedTuple

import torch

AUTO_MIN_PARAMS = 50_000_000  # the tiny model has about 1 M, the real one 134.5 M


class Kernels(NamedTuple):
    pack: bool  # linear weights prepacked for oneDNN (`packed_linears`)
    draw: bool  # one uniform per sampled token (`draw`) instead of torch.multinomial


def resolve(setting: str, model) -> Kernels:
    """The kernels a rollout of `model` uses under `setting` (packed, eager or auto; see the module's docstring)."""
    if setting not in ("auto", "eager", "packed"):
        raise ValueError(f"generation.cpu_decode: expected auto, eager or packed, got {setting!r}")
    first = next(model.parameters(), None)
    if setting == "eager" or first is None or first.device.type != "cpu":
        return Kernels(False, False)
    can_pack = torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")
    if setting == "packed":
        return Kernels(can_pack, True)
    if sum(p.numel() for p in model.parameters()) < AUTO_MIN_PARAMS:
        return Kernels(False, False)
    return Kernels(can_pack and first.dtype == torch.float32, True)


def draw(probs: torch.Tensor) -> torch.Tensor:
    """One token per row by inverse transform: the first i with cumsum(probs)[i] > u * sum(probs), u ~ U[0, 1).
    probs (b, V), non-negative, each row with some mass -> (b,). A zero-probability token is never drawn (its
    cumulative sum equals its predecessor's). The sums are float64: in float32 a token of probability below about
    1e-7 would add nothing to a sum near 1 and never be drawn, or be drawn at the rounding's rate, not its own."""
    cdf = probs.to(torch.float64).cumsum(-1)  # (b, V)
    total = cdf[:, -1:]  # (b, 1)
    x = torch.rand(probs.shape[0], 1, device=probs.device, dtype=cdf.dtype) * total
    x = torch.minimum(x, torch.nextafter(total, torch.zeros_like(total)))  # u * total rounded up to total
    return torch.searchsorted(cdf, x, right=True).squeeze(-1)


@contextlib.contextmanager
def packed_linears(model) -> Iterator[int]:
    """Within the block, every plain `nn.Linear` of `model` (a LoRA layer's base layer included) runs its forward
    without gradients, in this thread, on a oneDNN copy of its weight taken on entry; yields how many were packed.
    The copies are freed on exit; the model's own weights are never written."""
    owner = threading.get_ident()
    patched = []
    with torch.no_grad():
        for layer in model.modules():
            if type(layer) is not torch.nn.Linear or "forward" in layer.__dict__:
                continue
            weight = layer.weight.detach().to_mkldnn()
            bias = None if layer.bias is None else layer.bias.detach().to_mkldnn()
            layer.forward = _packed_forward(layer, weight, bias, owner)
            patched.append(layer)
    try:
        yield len(patched)
    finally:
        for layer in patched:
            del layer.forward


def _packed_forward(layer: torch.nn.Linear, weight: torch.Tensor, bias: torch.Tensor | None, owner: int):
    plain = torch.nn.Linear.forward.__get__(layer)

    def forward(x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled() or threading.get_ident() != owner or x.dtype != layer.weight.dtype:
            return plain(x)
        return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")  # dense in, dense out

    return forward


@contextlib.contextmanager
def decoding(setting: str, model) -> Iterator:
    """The kernels a rollout of `model` runs on (`resolve`): its linear layers packed within the block when chosen,
    and yields the `draw` to sample with (`decode.sample_kept`'s; None = `torch.multinomial`)."""
    kernels = resolve(setting, model)
    with packed_linears(model) if kernels.pack else contextlib.nullcontext():
        yield draw if kernels.draw else None
