"""A decode step of a Llama-family model as a dozen operations per layer, on fused, prepacked weights: the fifth CPU
decode kernel (`generation.cpu_decode`; kernel_choice.py times it beside the others).

Profiled on SmolLM2-135M on a 2-core CPU (docs/results.md), a decode step through transformers' forward spends a
fifth or more of its time outside the products and the attention: each layer's RMSNorms as five operations, the
rotary embedding as eight, three products for q, k and v and two for the MLP's gate and up, the mask built anew
for every step, each operation's dispatch and allocation. `stepping(model, rows)` copies each layer's q, k and v
weights into one matrix and its gate and up weights into another (each laid out for oneDNN where that is faster
on this machine, packing.wins), and within the block `decode.sample_kept` runs its decode steps
through `step`:

    h = embed[token]                                                     # (b, d)
    for each layer:
        x = rms_norm(h);  q, k, v = x W_qkv^T                            # one product: (b, (H + 2 Hkv) D)
        q, k = rope(q, k; position)                                      # one pass over q and k together
        K, V = cache.update(k, v)                                        # (b, Hkv, L, D): the layer's own cache
        a = softmax(q K^T / sqrt(D) + mask) V                            # R = H / Hkv query heads per key head
        h = h + a W_o^T
        g, u = rms_norm(h) W_gu^T;  h = h + (silu(g) * u) W_down^T      # one product for gate and up
    logits = rms_norm(h) W_lm^T                                          # (b, V)

the same arithmetic as the model's forward in another order of operations (logits differ by float rounding,
about 1e-5; tests/test_fused_step.py holds it to the model's own forward). The cache is the model's (a
`DynamicCache`, or kv_buffer.py's buffered one): the prompt's pass and any other forward go through the model as
usual, and a step's keys and values are where the model's next forward expects them.

Which models: `supports(model)` says whether (and if not, why not): a float32 model on a CPU whose type is llama,
mistral or qwen2 (pre-norm RMSNorm, rotary positions through the model's own rotary module, grouped-query
attention with optional q/k/v biases, SiLU-gated MLP), every layer full attention (no sliding window), every
projection a plain `nn.Linear` (not a LoRA layer) and no hook on any module (a hook expects to see the calls the
step skips). Any other model decodes through its own forward. Not here: bfloat16 (the model's RMSNorm rounds
through float32 in its own order), Gemma's or Qwen3's norms, mixtures of experts, a compiled step.
"""
from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import Callable, Iterator

import torch
import torch.nn.functional as F

from . import packing

MODEL_TYPES = ("llama", "mistral", "qwen2")  # the architectures whose decoder layer is the one written here

_steps: dict[int, tuple[int, Callable]] = {}  # thread -> (id of the model, its step), within `stepping`


def supports(model) -> str | None:
    """None where `step` can run `model`'s decode steps, else why not (one line)."""
    from ..models.cache import reusable

    c = getattr(model, "config", None)
    first = next(model.parameters(), None)
    if c is None or getattr(c, "model_type", None) not in MODEL_TYPES:
        return f"model type {getattr(c, 'model_type', None)!r} is not one of {', '.join(MODEL_TYPES)}"
    if first is None or first.device.type != "cpu" or first.dtype != torch.float32:
        return "the fused step runs float32 models on a CPU"
    if getattr(c, "hidden_act", None) != "silu" or getattr(c, "pretraining_tp", 1) != 1:
        return f"hidden_act {getattr(c, 'hidden_act', None)!r} (the step's MLP is SiLU-gated)"
    inner = getattr(model, "model", None)
    if not all(hasattr(inner, a) for a in ("layers", "norm", "embed_tokens", "rotary_emb")) \
            or type(getattr(model, "lm_head", None)) is not torch.nn.Linear:
        return "not a decoder of layers, a final norm and a plain output layer"
    for layer in inner.layers:
        a, m = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
        projections = [getattr(a, n, None) for n in ("q_proj", "k_proj", "v_proj", "o_proj")] + \
            [getattr(m, n, None) for n in ("gate_proj", "up_proj", "down_proj")]
        if any(type(p) is not torch.nn.Linear for p in projections):
            return "a projection is not a plain nn.Linear (a LoRA or quantized layer)"
    if any(m._forward_hooks or m._forward_pre_hooks or "forward" in m.__dict__ for m in model.modules()):
        return "a module has a hook or a forward of its own, which the fused step would skip"
    if not reusable(model):
        return "a layer's cache is not plain full attention (a sliding window)"
    return None


@dataclass(frozen=True)
class _Layer:
    norm1: torch.Tensor  # (d,) the input RMSNorm's weight
    eps1: float
    qkv: Callable  # (b, d) -> (b, (H + 2 Hkv) D)
    o: Callable  # (b, H D) -> (b, d)
    norm2: torch.Tensor  # (d,) the post-attention RMSNorm's weight
    eps2: float
    gate_up: Callable  # (b, d) -> (b, 2 I)
    down: Callable  # (b, I) -> (b, d)


def _product(weights: list[torch.Tensor], biases: list, rows: int) -> Callable:
    """x -> x W^T + b for the rows of `weights` stacked (one product in place of several on the same input), on a
    copy laid out for oneDNN's `rows`-row products where that is faster here, else on the stacked copy as it is."""
    w = torch.cat([x.detach() for x in weights]) if len(weights) > 1 else weights[0].detach()
    b = None
    if any(x is not None for x in biases):
        b = torch.cat([x.detach() if x is not None else w.new_zeros(v.shape[0]) for x, v in zip(biases, weights)])
    if packing.possible() and packing.wins(w, b, rows):
        packed = packing.pack(w, rows)
        return lambda x: packing.linear(x, packed, b)
    return lambda x: F.linear(x, w, b)


class _Step:
    """One model's fused decode step over copies of its weights taken now (see the module's docstring)."""

    def __init__(self, model, rows: int) -> None:
        c, inner = model.config, model.model
        self.H, self.Hkv = c.num_attention_heads, c.num_key_value_heads
        self.D = getattr(c, "head_dim", None) or c.hidden_size // self.H
        self.I = c.intermediate_size
        self.scale = inner.layers[0].self_attn.scaling if hasattr(inner.layers[0].self_attn, "scaling") \
            else self.D ** -0.5
        self.embed, self.rotary = inner.embed_tokens.weight.detach(), inner.rotary_emb
        self.norm, self.eps = inner.norm.weight.detach(), inner.norm.variance_epsilon
        self.lm = _product([model.lm_head.weight], [model.lm_head.bias], rows)
        self.layers = []
        for layer in inner.layers:
            a, m = layer.self_attn, layer.mlp
            qkv = (a.q_proj, a.k_proj, a.v_proj)
            self.layers.append(_Layer(
                layer.input_layernorm.weight.detach(), layer.input_layernorm.variance_epsilon,
                _product([p.weight for p in qkv], [p.bias for p in qkv], rows),
                _product([a.o_proj.weight], [a.o_proj.bias], rows),
                layer.post_attention_layernorm.weight.detach(), layer.post_attention_layernorm.variance_epsilon,
                _product([m.gate_proj.weight, m.up_proj.weight], [m.gate_proj.bias, m.up_proj.bias], rows),
                _product([m.down_proj.weight], [m.down_proj.bias], rows)))

    def __call__(self, tokens: torch.Tensor, mask: torch.Tensor, pos: torch.Tensor, cache) -> torch.Tensor:
        """tokens (b,) at positions pos (b,), after the cache's L - 1 positions; mask (b, L): 1 where a position is
        real (left padding 0), this step's included -> logits (b, V). The cache's layers get this step's keys
        and values, as the model's forward would give them."""
        b, (H, Hkv, D) = tokens.shape[0], (self.H, self.Hkv, self.D)
        R, half, d = H // Hkv, self.D // 2, self.embed.shape[1]
        h = F.embedding(tokens, self.embed)  # (b, d)
        cos, sin = self.rotary(h, pos[:, None])  # (b, 1, D) each: the model's own rotary module (any rope type)
        bias = torch.zeros(b, 1, 1, mask.shape[1], dtype=h.dtype).masked_fill_(mask[:, None, None, :] == 0,
                                                                                float("-inf"))  # (b, 1, 1, L)
        for layer, w in zip(cache.layers, self.layers):
            qkv = w.qkv(F.rms_norm(h, (d,), w.norm1, w.eps1)).view(b, H + 2 * Hkv, D)
            qk = qkv[:, :H + Hkv]  # (b, H + Hkv, D): the query heads, then the key heads
            qk = qk * cos + torch.cat((-qk[..., half:], qk[..., :half]), -1) * sin  # rotate_half, as the model's
            keys, values = layer.update(qk[:, H:, None], qkv[:, H + Hkv:, None])  # (b, Hkv, L, D) each
            s = torch.matmul(qk[:, :H].reshape(b, Hkv, R, D), keys.transpose(-1, -2)).mul_(self.scale).add_(bias)
            a = torch.matmul(torch.softmax(s, -1), values).reshape(b, H * D)  # (b, Hkv, R, D) -> (b, H D)
            h = h + w.o(a)
            gu = w.gate_up(F.rms_norm(h, (d,), w.norm2, w.eps2))  # (b, 2 I)
            h = h + w.down(F.silu(gu[:, :self.I]) * gu[:, self.I:])
        return self.lm(F.rms_norm(h, (d,), self.norm, self.eps))  # (b, V)


@contextlib.contextmanager
def stepping(model, rows: int) -> Iterator[bool]:
    """Within the block, this thread's rollouts of `model` (decode.sample_kept) take their decode steps through
    the fused step, on weights copied now for products of about `rows` rows; yields False (and changes nothing)
    where `supports(model)` says no. The copies are freed on exit."""
    if supports(model) is not None:
        yield False
        return
    owner = threading.get_ident()
    before = _steps.get(owner)
    with torch.no_grad():
        _steps[owner] = (id(model), _Step(model, rows))
    try:
        yield True
    finally:
        if before is None:
            _steps.pop(owner, None)
        else:
            _steps[owner] = before


def active(model) -> Callable | None:
    """The fused step this thread's rollouts of `model` take (within `stepping`), else None."""
    found = _steps.get(threading.get_ident())
    return found[1] if found is not None and found[0] == id(model) else None
