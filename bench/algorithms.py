"""Vectorised GAE and GRPO advantages against the plain-loop references, in one run.

    .venv/bin/python bench/algorithms.py [--B 256] [--T 1024] [--G 16] [--repeat 3]

Prints the wall time of each and the ratio (loop / ours): a ratio, not a time, since these
machines are noisy. One torch thread, as in the tests. Also checks the two agree.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

from reasoning_rl.algos.advantages import gae, gae_reference, grpo, grpo_reference


def gae_loop(rewards, values, mask, gamma, lam):
    """The cleanrl-style reverse scan in plain Python, one sequence and one token at a time: O(B T)."""
    out = []
    for r, v, m in zip(rewards, values, mask):
        T = len(r)
        A = [0.0] * T
        lastgaelam, nextvalue, nextmask = 0.0, 0.0, 0.0
        for t in reversed(range(T)):
            delta = r[t] + gamma * nextvalue * nextmask - v[t]
            lastgaelam = delta + gamma * lam * nextmask * lastgaelam
            A[t] = lastgaelam * m[t]
            nextvalue, nextmask = v[t], m[t]
        out.append(A)
    return out


def best_of(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--B", type=int, default=256, help="sequences")
    ap.add_argument("--T", type=int, default=1024, help="tokens per sequence")
    ap.add_argument("--G", type=int, default=16, help="group size for the GRPO part")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository
    from bench.machine import describe

    print(describe(), flush=True)  # where this ran: figures from two machines side by side
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    B, T = a.B, a.T
    lengths = torch.randint(T // 4, T + 1, (B,), generator=g)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).float()  # (B, T), right-padded
    rewards = torch.zeros(B, T)
    rewards[torch.arange(B), lengths - 1] = (torch.rand(B, generator=g) > 0.5).float()  # terminal reward
    values = torch.rand(B, T, generator=g) * mask
    r_l, v_l, m_l = rewards.tolist(), values.tolist(), mask.tolist()

    ours_t = best_of(lambda: gae(rewards, values, mask, gamma=1.0, lam=0.95), a.repeat)
    loop_t = best_of(lambda: gae_loop(r_l, v_l, m_l, 1.0, 0.95), 1)
    A, _ = gae(rewards, values, mask, gamma=1.0, lam=0.95)
    ok = torch.allclose(A, torch.tensor(gae_loop(r_l, v_l, m_l, 1.0, 0.95)), atol=1e-4)
    print(f"GAE  {B}x{T} tokens: ours {ours_t * 1e3:9.1f} ms   plain loop {loop_t * 1e3:11.1f} ms   "
          f"ratio {loop_t / ours_t:8.1f}x   agree={ok}")
    # The definition itself (sum_l (gamma lam)^l delta_{t+l}) is O(T^2) per sequence: timed on 4, scaled.
    n_def = max(1, min(B, 4))
    def_t = best_of(lambda: gae_reference(r_l[:n_def], v_l[:n_def], m_l[:n_def], 1.0, 0.95), 1) * B / n_def
    print(f"GAE  (vs the O(T^2) definition, from {n_def} sequences scaled: {def_t * 1e3:.0f} ms, "
          f"ratio {def_t / ours_t:.0f}x)")

    # GRPO: as many rewards as the GAE batch has tokens, in groups of G
    n_groups = B * T // a.G
    R = (torch.rand(n_groups, a.G, generator=g) > 0.5).float()
    valid = torch.rand(n_groups, a.G, generator=g) > 0.05
    R_l, valid_l = R.tolist(), valid.tolist()
    ours_t = best_of(lambda: grpo(R, valid), a.repeat)
    loop_t = best_of(lambda: grpo_reference(R_l, valid_l), 1)
    ok = torch.allclose(grpo(R, valid), torch.tensor(grpo_reference(R_l, valid_l)), atol=1e-5)
    print(f"GRPO {n_groups}x{a.G} rewards: ours {ours_t * 1e3:9.1f} ms   plain loop {loop_t * 1e3:11.1f} ms   "
          f"ratio {loop_t / ours_t:8.1f}x   agree={ok}")


if __name__ == "__main__":
    main()
