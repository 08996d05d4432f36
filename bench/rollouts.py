"""Rollout throughput on the tiny model: tokens per second, 16 prompts x 8 samples x 64 tokens.

    .venv/bin/python bench/rollouts.py [--prompts 16] [--n 8] [--tokens 64] [--threads 1]

Engines side by side in one run: `hf` in this process, and `vllm` (the CPU build) in its own
environment `.venv-vllm` (`make vllm-env`), started by this script on the same model (built
from the same seed and saved to a temporary directory). The model is random-initialised with
EOS suppressed (hf: `suppress_tokens`; vllm: `ignore_eos`), so every sample runs to its full
length and the token count is exact. vLLM's start-up (about a minute) is printed apart, not
counted. Prints the throughput ratio (noisy machines: compare ratios, not seconds).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VPY = os.path.join(ROOT, ".venv-vllm", "bin", "python")


def build(threads: int):
    import torch

    sys.path.insert(0, ROOT)
    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.models.load import build_tiny

    torch.set_num_threads(threads)
    return build_tiny(config.load(Config))


def run_vllm(a) -> None:
    """Child mode, inside .venv-vllm: print one JSON line of the vLLM measurement."""
    from reasoning_rl.rollout import SamplingConfig
    from reasoning_rl.rollout.vllm import VLLMEngine

    model, tok = build(a.threads)
    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(d)
        tok.save_pretrained(d)
        t0 = time.perf_counter()
        eng = VLLMEngine(d, dtype="float32", max_model_len=256, extra_sampling={"ignore_eos": True})
        startup = time.perf_counter() - t0
    prompts = [f"{i}+{i}=" for i in range(a.prompts)]
    eng.generate(prompts[:2], 2, SamplingConfig(max_tokens=4))  # warm-up
    t0 = time.perf_counter()
    groups = eng.generate(prompts, a.n, SamplingConfig(temperature=1.0, max_tokens=a.tokens, seed=0))
    dt = time.perf_counter() - t0
    ntok = sum(len(x.token_ids) for g in groups for x in g.samples)
    print(json.dumps({"tokens": ntok, "seconds": dt, "startup": startup}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--child-vllm", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    from bench.machine import describe

    print(describe(), flush=True)  # where this ran: figures from two machines side by side
    if a.child_vllm:
        return run_vllm(a)
    from reasoning_rl.rollout import HFEngine, SamplingConfig

    model, tok = build(a.threads)
    model.generation_config.suppress_tokens = [tok.eos_token_id]
    prompts = [f"{i}+{i}=" for i in range(a.prompts)]
    eng = HFEngine(model, tok, batch_size=a.prompts * a.n)
    eng.generate(prompts[:2], 2, SamplingConfig(max_tokens=4))  # warm-up
    t0 = time.perf_counter()
    groups = eng.generate(prompts, a.n, SamplingConfig(temperature=1.0, max_tokens=a.tokens, seed=0))
    dt = time.perf_counter() - t0
    ntok = sum(len(x.token_ids) for g in groups for x in g.samples)
    hf_rate = ntok / dt
    print(f"{a.prompts} prompts x {a.n} samples x {a.tokens} tokens, {a.threads} thread(s)")
    print(f"hf   : {ntok} tokens in {dt:.2f}s = {hf_rate:9.0f} tokens/s")
    if not os.path.exists(VPY):
        print("vllm : no .venv-vllm (run `make vllm-env`); no ratio")
        return
    args = [VPY, os.path.abspath(__file__), "--child-vllm", "--prompts", str(a.prompts), "--n", str(a.n),
            "--tokens", str(a.tokens), "--threads", str(a.threads)]
    proc = subprocess.run(args, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        print(f"vllm : failed ({proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode})")
        return
    r = json.loads(lines[-1])
    v_rate = r["tokens"] / r["seconds"]
    print(f"vllm : {r['tokens']} tokens in {r['seconds']:.2f}s = {v_rate:9.0f} tokens/s  (start-up {r['startup']:.0f}s, once)")
    print(f"ratio vllm / hf: {v_rate / hf_rate:.2f}x")


if __name__ == "__main__":
    main()
