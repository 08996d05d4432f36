"""Why the CPU decode kernels gain on one machine and not on another: each kernel against its eager counterpart on
the real model's own shapes, and which code path the math libraries took.

    .venv/bin/python bench/kernel_profile.py [--rows 32] [--threads 0] [--repeats 200]

Parts, each timed best-of-`--repeats` after a warm-up, at `--rows` rows (a decode step's live samples):
- every distinct linear shape of SmolLM2-135M (576 -> 576, 576 -> 192 (k/v), 576 -> 1536, 1536 -> 576, the
  576 -> 49,152 output layer): eager `F.linear` (oneDNN or MKL behind `aten::addmm`, as torch dispatches it), the
  weight prepacked for oneDNN (`cpu_kernels.packed_linears`' path: its blocked layout for `--rows`), the weight
  copied in its plain layout (`to_mkldnn`, the path before f70f392), and the packing's own cost; GFLOP/s each;
- the draw of one token per row from a 49,152-entry distribution: `torch.multinomial` against `cpu_kernels.draw`;
- one decode step's attention at 200 cached positions (9 query heads, 3 key heads, width 64): sdpa against
  `cpu_kernels.decode_attend`;
- the code paths: oneDNN's verbose lines for one packed product and one eager product (which implementation and
  instruction set it picked), and MKL's verbose line for one eager product when MKL serves it (MKL_VERBOSE).
Each part prints its ratio, so two machines' runs can be set side by side (the machine line says which is which).
Not here: the whole rollout (bench/generation_real.py --ablate does that).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
SHAPES = (("q/o proj 576->576", 576, 576), ("k/v proj 576->192", 576, 192), ("up/gate 576->1536", 576, 1536),
          ("down 1536->576", 1536, 576), ("lm head 576->49152", 576, 49152))


def best_of(fn, repeats: int) -> float:
    """The best of `repeats` timed calls after two untimed ones (oneDNN creates its kernel on the first)."""
    from bench.algorithms import best_of as timed

    fn()
    fn()
    return timed(fn, repeats)


def linears(torch, rows: int, repeats: int) -> None:
    from reasoning_rl.rollout import packing

    F = torch.nn.functional
    print(f"linear layers at {rows} rows (float32): eager F.linear, the weight in oneDNN's blocked layout for {rows} "
          "rows (`packed_linears`' path), and copied in its plain layout (to_mkldnn, the path before f70f392)")
    for label, k, n in SHAPES:
        x, w, b = torch.randn(rows, k), torch.randn(n, k), None
        r = max(5, repeats // (10 if n > 10_000 else 1))
        t_eager = best_of(lambda: F.linear(x, w, b), r)
        t0 = time.perf_counter()
        packed = packing.pack(w, rows)
        t_pack = time.perf_counter() - t0
        plain = w.to_mkldnn()
        t_packed = best_of(lambda: torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], ""), r)
        t_plain = best_of(lambda: torch.ops.mkldnn._linear_pointwise(x, plain, None, "none", [], ""), r)
        flop = 2 * rows * k * n
        print(f"  {label:<22} eager {flop / t_eager / 1e9:7.1f} GFLOP/s   packed {flop / t_packed / 1e9:7.1f}"
              f"   packed/eager {t_eager / t_packed:5.2f}x   plain copy/eager {t_eager / t_plain:5.2f}x"
              f"   packing {t_pack * 1e3:6.2f} ms")


def draws(torch, rows: int, repeats: int) -> None:
    from reasoning_rl.rollout.cpu_kernels import draw

    probs = torch.softmax(torch.randn(rows, 49152), -1)
    t_m = best_of(lambda: torch.multinomial(probs, 1), repeats)
    t_d = best_of(lambda: draw(probs), repeats)
    print(f"draw of {rows} tokens from 49,152: multinomial {t_m * 1e3:.3f} ms, uniform draw {t_d * 1e3:.3f} ms "
          f"({t_m / t_d:.2f}x)")


def attention(torch, rows: int, repeats: int) -> None:
    from reasoning_rl.rollout.cpu_kernels import _decode_owners, decode_attend

    q, k, v = torch.randn(rows, 9, 1, 64), torch.randn(rows, 3, 200, 64), torch.randn(rows, 3, 200, 64)
    F = torch.nn.functional
    kk, vv = k.repeat_interleave(3, dim=1), v.repeat_interleave(3, dim=1)  # what transformers' sdpa path does
    import threading

    with torch.no_grad():
        t_s = best_of(lambda: F.scaled_dot_product_attention(q, kk.repeat(1, 1, 1, 1), vv), repeats)
        _decode_owners.add(threading.get_ident())
        try:
            t_a = best_of(lambda: decode_attend(None, q, k, v, None), repeats)
        finally:
            _decode_owners.discard(threading.get_ident())
    print(f"decode attention of {rows} rows over 200 positions: sdpa (with repeat_kv) {t_s * 1e3:.3f} ms, "
          f"decode_attend {t_a * 1e3:.3f} ms ({t_s / t_a:.2f}x)")


CHILD = """
import sys
sys.path.insert(0, {root!r})
import torch, torch.nn.functional as F
from reasoning_rl.rollout import packing
torch.set_num_threads({threads})
x, w = torch.randn({rows}, 576), torch.randn(1536, 576)
F.linear(x, w)
packing.linear(x, packing.pack(w, {rows}), None)
"""


def code_paths(rows: int, threads: int) -> None:
    """oneDNN's and MKL's own account of one eager and one packed product (verbose output of a child process)."""
    env = {**os.environ, "ONEDNN_VERBOSE": "1", "DNNL_VERBOSE": "1", "MKL_VERBOSE": "1"}
    out = subprocess.run([sys.executable, "-c", CHILD.format(rows=rows, threads=threads, root=ROOT)], env=env,
                         capture_output=True, text=True, timeout=120)
    lines = [line for line in (out.stdout + out.stderr).splitlines()
             if ("exec" in line and ("onednn_verbose" in line or "dnnl_verbose" in line))
             or line.startswith("MKL_VERBOSE") or "info,cpu,isa" in line or "info,cpu,runtime" in line
             or "info,oneDNN" in line]
    print("code paths (verbose lines of one eager and one packed 576 -> 1536 product):")
    for line in lines[:12] or ["(no verbose output: this torch build prints none)"]:
        print(f"  {line[:220]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=32)
    ap.add_argument("--threads", type=int, default=0, help="0 = every usable core")
    ap.add_argument("--repeats", type=int, default=200)
    a = ap.parse_args()
    import torch

    if a.threads:
        torch.set_num_threads(a.threads)
    from bench.machine import describe

    print(describe(), flush=True)  # where this ran: figures from two machines side by side
    torch.manual_seed(0)
    with torch.no_grad():
        linears(torch, a.rows, a.repeats)
        draws(torch, a.rows, a.repeats)
        attention(torch, a.rows, a.repeats)
    code_paths(a.rows, torch.get_num_threads())


if __name__ == "__main__":
    main()
