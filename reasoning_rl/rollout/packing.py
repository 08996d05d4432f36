"""Weights laid out once for oneDNN's few-row products, and whether that is faster here, per shape.

`torch.nn.functional.linear` repacks its weight on every call; a decode step multiplies a few rows (the live samples)
by every weight matrix, so on a CPU the same weight is repacked at every step. `pack(w, rows)` copies it once into
the blocked layout oneDNN's linear picks for `rows`-row products (what PyTorch's compiler does to a frozen CPU
model's weights) and `linear(x, packed, b)` multiplies with it. Whether that pays depends on the processor and the
shape (a model's narrow key and value products may lose packed where its other shapes gain; docs/results.md), so `wins(w, b, rows)` times both on this machine, once per process and
shape.

    possible() -> bool                 # this torch build has oneDNN's linear on packed weights
    packed = pack(w, rows)             # w (out, in) -> an opaque copy for oneDNN
    y = linear(x, packed, b)           # x (rows, in) -> (rows, out): x w^T + b
    wins(w, b, rows) -> bool           # packed measured faster than F.linear here by more than noise

Used by cpu_kernels.py (each `nn.Linear` packed in place of its forward) and fused_step.py (the fused q/k/v and
gate/up weights). Not here: choosing which kernels a rollout runs (kernel_choice.py), GPU products.
"""
from __future__ import annotations

import time

import torch

MARGIN = 0.03  # packed must beat F.linear by more than this share of its time (noise), as a kernel must beat eager
#               by kernel_choice.MARGIN
_WINS: dict[tuple, bool] = {}  # (in, out, bias, dtype, rows, threads) -> `wins`' answer, for this process


def possible() -> bool:
    """Whether this torch build has oneDNN's linear on prepacked weights."""
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def pack(weight: torch.Tensor, rows: int) -> torch.Tensor:
    """`weight` (out, in) in the blocked layout oneDNN's linear picks for `rows`-row products; `to_mkldnn()` where
    this torch lacks that reorder (it copies the weight in its plain layout, which oneDNN then reads as it is)."""
    reorder = getattr(torch.ops.mkldnn, "_reorder_linear_weight", None)
    return reorder(weight, rows) if reorder is not None else weight.to_mkldnn()


def linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x (..., in) @ the packed weight^T + bias -> (..., out), dense in and out."""
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


def wins(w: torch.Tensor, b: torch.Tensor | None, rows: int, rounds: int = 3) -> bool:
    """Whether x w^T + b for `rows` rows of x is faster on `pack(w)` than through `F.linear`, timed on this machine
    once per process and shape: `rounds` interleaved rounds of each on random inputs, the best of each, packed kept
    only when it beats eager by more than MARGIN."""
    key = (w.shape[1], w.shape[0], b is not None, w.dtype, rows, torch.get_num_threads())
    if key not in _WINS:
        x = torch.randn(rows, w.shape[1], dtype=w.dtype, generator=torch.Generator().manual_seed(0))  # not the
        #     global stream: a seeded run samples the same whether or not this process had timed the shape yet
        packed = pack(w, rows)
        reps = max(2, min(200, int(2e7 / (2 * rows * w.shape[0] * w.shape[1]))))  # about 0.2 ms of work or more
        best = [float("inf"), float("inf")]
        with torch.no_grad():
            for _ in range(rounds):
                for i, run in enumerate((lambda: torch.nn.functional.linear(x, w, b), lambda: linear(x, packed, b))):
                    run()
                    t = time.perf_counter()
                    for _ in range(reps):
                        run()
                    best[i] = min(best[i], time.perf_counter() - t)
        _WINS[key] = best[1] < best[0] * (1 - MARGIN)
    return _WINS[key]
