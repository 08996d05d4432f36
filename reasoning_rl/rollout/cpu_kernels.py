"""Faster decoding on a CPU: linear weights prepacked for oneDNN, one uniform draw per sampled token, and a
decode step's attention as two batched products on the key/value heads.

A decode step of a real model on a CPU is a few rows (the live samples) multiplied by every weight matrix, one
query per row attending over its cache, then a draw from a vocabulary-sized distribution per row. Profiled on
SmolLM2-135M (docs/results.md), eager PyTorch spends most of that step in three places this file replaces for the
length of a rollout:
- `torch.nn.functional.linear` repacks the weight on every call; `packed_linears(model)` copies each plain
  `nn.Linear`'s weight once into the blocked layout oneDNN's linear picks for a few-row product (the reorder
  PyTorch's compiler applies to a frozen CPU model) and routes the layer's forward through oneDNN's linear until
  the block ends, for the shapes where that is faster on this machine (`packing_wins`, timed once per process):
  time saved at float32, none at bfloat16, whose eager products already use the CPU's bf16 instructions;
- `torch.multinomial` draws one exponential number per vocabulary entry (49,152 per row per step); `draw(probs)`
  draws one uniform per row and finds it in the cumulative distribution (first among blocks of 256 tokens, then
  inside one: a full running sum over the vocabulary is itself a sequential pass of 49,152 additions per row);
- PyTorch's fused CPU attention (`scaled_dot_product_attention`, which transformers' `sdpa` calls) is built for
  long queries; for one query per row it costs twice what `decode_attention` does: scores = q k^T over the key
  heads (a grouped-query model's query heads batched per key head, no copy of the cache), softmax, @ v.

    with packed_linears(model, rows):   # under no_grad, in the thread that entered it; the weights copied once
        ...                          # the model's forward, as usual
    draw(probs)  # (b, V) -> (b,)    # a token of each row, P(token i) = probs[i] / sum(probs)
    with decode_attention(model):    # a one-token forward without gradients, in this thread: decode_attend
        ...

None of the five changes what is sampled from: products and attention differ by float rounding (a log-prob by about
1e-5) and the random stream is another one (a seeded run still repeats itself, but not `transformers.generate`'s
draws). `resolve(setting, model) -> Kernels(pack, draw, attend, buffer, step)` says which a rollout uses
(`GenerationConfig.cpu_decode`; `buffer`: kv_buffer.py's cache; `step`: fused_step.py's decode step, for a
Llama-family float32 model): `packed` all five (the step where the model allows it), `eager` none, `auto`, for a
model of at least `AUTO_MIN_PARAMS` parameters on a CPU, the combination measured fastest on this machine and this
model's shapes (`kernel_choice.py`: the same kernels gained 2.07x on one Xeon and nothing on another;
docs/results.md). The tiny model and the test models stay on eager PyTorch, and with it on the very random stream of
earlier runs.

A packed layer serves only a forward pass without gradients from the thread that packed it, of at most
`ROW_LIMIT` times the rows its layout was chosen for; any other call (the trainer's forward in another thread, a
pass with autograd on, a long prompt's forward) goes to the layer's own weights, so training never sees the copy.
Likewise the decode attention: within the block the model's config names it (in place of `sdpa`, whose masks it
takes), and every call but a one-token forward without gradients from the entering thread goes on
to `sdpa` itself; a model on another attention (eager, flash) is left on it. A layer that already has a forward
of its own on the instance (a hook library's wrapper) is left as it is. Not here: GPU kernels, quantized weights,
the KV cache written in place (kv_buffer.py, the fourth kernel `decoding_with` enters), fused layers (fused_step.py,
the fifth), a compiled step (`torch.compile` of the model's forward was tried and was slower after a long compile:
docs/results.md).
"""
from __future__ import annotations

import contextlib
import threading
from typing import Callable, Iterator

import torch

from . import packing
from .kernel_choice import EAGER, Kernels, chosen, effective

AUTO_MIN_PARAMS = 50_000_000  # the tiny model has about 1 M, the real one 134.5 M




def resolve(setting: str, model, rows: int = 16) -> Kernels:
    """The kernels a rollout of `model` uses under `setting` (packed, eager or auto; see the module's docstring).
    auto: what `kernel_choice.chosen` measured fastest on this machine for this model at about `rows` rows."""
    if setting not in ("auto", "eager", "packed"):
        raise ValueError(f"generation.cpu_decode: expected auto, eager or packed, got {setting!r}")
    first = next(model.parameters(), None)
    if setting == "eager" or first is None or first.device.type != "cpu":
        return EAGER
    if setting == "packed":
        return _possible(model)
    found = _measured(model, rows)
    return found.kernels if found else EAGER


def auto_choice(setting: str, model, rows: int) -> str | None:
    """Where `auto` measures (a model above the size floor on a CPU): the choice made now for about `rows` rows, as a
    log line with its timings; else None. A run calls it once before its first rollout, so the measurement is in
    its log and not inside a round's time."""
    first = next(model.parameters(), None)
    found = _measured(model, rows) if setting == "auto" and first is not None and first.device.type == "cpu" else None
    return found.describe() if found else None


def _possible(model) -> Kernels:
    """Every kernel this torch build can run on `model` (packing needs oneDNN's linear; the fused step a
    Llama-family float32 model, fused_step.supports)."""
    from .fused_step import supports

    return Kernels(packing.possible(), True, True, True, supports(model) is None)


def _measured(model, rows: int):
    """`auto`'s measured choice for a CPU model (kernel_choice.Chosen), or None under the size floor."""
    if sum(p.numel() for p in model.parameters()) < AUTO_MIN_PARAMS:
        return None
    return chosen(model, rows, _possible(model), decoding_with)


def draw(probs: torch.Tensor, block: int = 256) -> torch.Tensor:
    """One token per row by inverse transform: the first i with cumsum(probs)[i] > u * sum(probs), u ~ U[0, 1).
    probs (b, V), non-negative, each row with some mass -> (b,). A zero-probability token is never drawn (its
    cumulative sum equals its predecessor's). The sums are float64: in float32 a token of probability below about
    1e-7 would add nothing to a sum near 1 and never be drawn, or be drawn at the rounding's rate, not its own.
    The search runs in two levels: the block of `block` tokens whose running total passes u * sum, then the token
    inside it, so only one block per row is summed token by token."""
    b, V = probs.shape
    if V % block:
        probs = torch.nn.functional.pad(probs, (0, -V % block))
    p = probs.reshape(b, -1, block)  # (b, nb, block), the caller's dtype: only the one block searched is widened
    ends = p.sum(-1, dtype=torch.float64).cumsum(-1)  # (b, nb): the running total at each block's end
    total = ends[:, -1:]  # (b, 1)
    x = torch.rand(b, 1, device=probs.device, dtype=ends.dtype) * total
    x = torch.minimum(x, torch.nextafter(total, torch.zeros_like(total)))  # u * total rounded up to total
    k = torch.searchsorted(ends, x, right=True)  # (b, 1): ends[k - 1] <= x < ends[k], so block k has mass
    start = torch.where(k > 0, ends.gather(1, (k - 1).clamp(min=0)), torch.zeros_like(x))  # (b, 1)
    inner = p.gather(1, k.unsqueeze(-1).expand(b, 1, block)).squeeze(1).to(torch.float64).cumsum(-1)  # (b, block)
    y = torch.minimum(x - start, torch.nextafter(inner[:, -1:], torch.zeros_like(x)))  # inside the block's own sum
    return (k * block + torch.searchsorted(inner, y, right=True)).squeeze(-1)


PACK_ROWS = 32  # the rows a packed weight's layout is chosen for, and its shape timed at, when not told
ROW_LIMIT = 8  # an input of more than ROW_LIMIT x those rows (a prompt's forward) goes to the layer's own weights:
#                weights laid out for 32 rows ran a prompt's forward of hundreds of rows slower than eager
#                (docs/results.md)


@contextlib.contextmanager
def packed_linears(model, rows: int = PACK_ROWS, choose: Callable[[torch.nn.Linear, int], bool] | None = None
                   ) -> Iterator[int]:
    """Within the block, the plain `nn.Linear` layers of `model` (a LoRA layer's base layer included) that `choose`
    picks run their forward without gradients, in this thread, on a copy of the weight that oneDNN has laid out for
    products of about `rows` rows (taken on entry), for inputs of at most `ROW_LIMIT` x `rows` rows (a decode step's,
    not a long prompt's, which the layout slows down); yields how many were packed. `choose(layer, rows)` defaults to
    `packing_wins`: the layer's shape measured on this machine, packed only where that is faster. The copies are
    freed on exit; the model's own weights are never written."""
    owner = threading.get_ident()
    choose = packing_wins if choose is None else choose
    patched = []
    with torch.no_grad():
        for layer in model.modules():
            if type(layer) is not torch.nn.Linear or "forward" in layer.__dict__ or not choose(layer, rows):
                continue
            layer.forward = _packed_forward(layer, packing.pack(layer.weight.detach(), rows),
                                            None if layer.bias is None else layer.bias.detach(), owner,
                                            ROW_LIMIT * rows)
            patched.append(layer)
    try:
        yield len(patched)
    finally:
        for layer in patched:
            del layer.forward


def packing_wins(layer: torch.nn.Linear, rows: int, rounds: int = 3) -> bool:
    """Whether a `rows`-row product with `layer`'s shape is faster packed than through `F.linear` (`packing.wins` on
    its weight and bias, timed once per process and shape): a model's narrow products may lose packed where its others
    gain (docs/results.md)."""
    return packing.wins(layer.weight.detach(), None if layer.bias is None else layer.bias.detach(), rows, rounds)


def _packed_forward(layer: torch.nn.Linear, weight: torch.Tensor, bias: torch.Tensor | None, owner: int,
                    most_rows: int):
    plain = torch.nn.Linear.forward.__get__(layer)

    def forward(x: torch.Tensor) -> torch.Tensor:
        if (torch.is_grad_enabled() or threading.get_ident() != owner or x.dtype != layer.weight.dtype
                or x.numel() > most_rows * x.shape[-1]):
            return plain(x)
        return packing.linear(x, weight, bias)

    return forward


DECODE_ATTENTION = "reasoning_rl_cpu_decode"  # the name `decode_attention` registers with transformers
_decode_owners: set[int] = set()  # threads within a decode_attention block


def decode_attend(module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attention_mask, dropout=0.0,
                  scaling=None, **kwargs):
    """transformers' attention-function contract; for one query per row, without gradients, from a thread in a
    `decode_attention` block:
        s = (q k^T) * scaling, masked where attention_mask is False (or + it, a float mask), softmax in float32, @ v
    query (B, H, 1, D); key, value (B, Hkv, L, D), H = Hkv * R, query head h reading key head h // R (transformers'
    `repeat_kv` order) -> ((B, 1, H, D), None). Anything else goes to `sdpa_attention_forward` unchanged."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    B, H, q, D = query.shape
    Hkv = key.shape[1]
    if (q != 1 or dropout or torch.is_grad_enabled() or threading.get_ident() not in _decode_owners or H % Hkv
            or any(kwargs.get(k) is not None for k in ("softcap", "s_aux", "sinks", "position_bias"))):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    grouped = query.reshape(B, Hkv, H // Hkv, D)  # (B, Hkv, R, D): a key head's R query heads as R query rows
    s = torch.matmul(grouped, key.transpose(-1, -2)).mul_(D ** -0.5 if scaling is None else scaling)  # (B, Hkv, R, L)
    if attention_mask is not None:
        m = attention_mask if attention_mask.shape[1] == 1 else attention_mask.reshape(B, Hkv, H // Hkv, -1)
        s = s.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else s + m
    out = torch.matmul(torch.softmax(s, -1, dtype=torch.float32).to(value.dtype), value)  # (B, Hkv, R, D)
    return out.reshape(B, 1, H, D), None


@contextlib.contextmanager
def decode_attention(model) -> Iterator[int]:
    """Within the block, every config of `model` on transformers' `sdpa` attention names `decode_attend` instead
    (its masks: sdpa's), so this thread's one-token forwards without gradients take it; yields how many configs
    were switched (0 where none was on sdpa). Each is back on sdpa on exit."""
    from transformers import AttentionInterface, AttentionMaskInterface, PretrainedConfig
    from transformers.masking_utils import sdpa_mask

    AttentionInterface.register(DECODE_ATTENTION, decode_attend)
    AttentionMaskInterface.register(DECODE_ATTENTION, sdpa_mask)
    configs = {id(c): c for m in model.modules() if isinstance(c := getattr(m, "config", None), PretrainedConfig)
               and c._attn_implementation == "sdpa"}
    owner = threading.get_ident()
    nested = owner in _decode_owners
    _decode_owners.add(owner)
    for c in configs.values():
        c._attn_implementation = DECODE_ATTENTION
    try:
        yield len(configs)
    finally:
        for c in configs.values():
            c._attn_implementation = "sdpa"
        if not nested:
            _decode_owners.discard(owner)


@contextlib.contextmanager
def decoding(setting: str, model, rows: int = 16) -> Iterator:
    """The kernels a rollout of `model` (about `rows` rows) runs on (`resolve`), entered: see `decoding_with`."""
    with decoding_with(resolve(setting, model, rows), model, rows) as draw:
        yield draw


@contextlib.contextmanager
def decoding_with(kernels: Kernels, model, rows: int = PACK_ROWS) -> Iterator:
    """Within the block, `model`'s linear layers packed (for products of about `rows` rows), its one-token attention
    on `decode_attend`, this thread's rollouts on buffered KV caches (kv_buffer.py) and their decode steps on the
    fused step (fused_step.py) where `kernels` says; yields the `draw` to sample with (`decode.sample_kept`'s; None
    = `torch.multinomial`). Where the fused step runs, the layers are not packed as well: every decode step goes
    through the step's own copies, and a second copy of the weights would serve only prompts' passes, which are
    longer than packed layers serve; nor is the decode attention (`kernel_choice.effective`, the one rule of both)."""
    from .fused_step import stepping, supports

    kernels = effective(kernels._replace(step=kernels.step and supports(model) is None))
    with contextlib.ExitStack() as stack:
        if kernels.pack:
            stack.enter_context(packed_linears(model, rows))
        if kernels.attend:
            stack.enter_context(decode_attention(model))
        if kernels.buffer:
            from .kv_buffer import buffering  # transformers' cache classes: imported where a rollout uses them

            stack.enter_context(buffering())
        if kernels.step:
            stack.enter_context(stepping(model, rows))
        yield draw if kernels.draw else None
