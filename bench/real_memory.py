"""Peak memory and time of one training step of the real model (SmolLM2-135M-Instruct), by dtype, gradient
checkpointing and LoRA, each in a child process of its own.

    .venv/bin/python bench/real_memory.py [--batch 32] [--prompt 72] [--completion 64] [--threads 0]

A step is what a GRPO update does to one minibatch: response-only log-probs of `batch` sequences of `prompt` +
`completion` tokens, the clipped loss, backward, one AdamW step. Memory is the growth of the child's peak RSS over
its peak once the model is loaded (so the weights themselves are not counted, their gradients and optimiser
moments are), beside an estimate: gradients + two Adam moments of the trained parameters (4 bytes each) plus the
activations kept for backward (per token and layer about 12 hidden + 4 intermediate values, and the logits with
their log-softmax, 2 x vocabulary per completion token) in the compute dtype; gradient checkpointing keeps one
hidden state per layer instead. One run each; these machines are noisy: read the ratios.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
SETTINGS = [("float32", False, 0), ("float32", True, 0), ("bfloat16", False, 0), ("float32", False, 16),
            ("float32", True, 16)]


def child(a) -> None:
    import torch

    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.models.device import resolve_threads
    from reasoning_rl.models.logprobs import token_logprobs
    from reasoning_rl.models.lora import maybe_lora
    from reasoning_rl.algos.losses import ppo_clip
    from reasoning_rl.models.load import load_policy
    from bench.machine import peak_rss_mib

    cfg = config.load(Config, None, ["model.name_or_path=smollm2-135m-instruct", f"model.dtype={a.dtype}",
                                     f"model.gradient_checkpointing={a.ckpt}", f"model.lora.r={a.lora}",
                                     "model.lora.alpha=32"])
    torch.set_num_threads(resolve_threads(a.threads, "smollm2"))
    model, tok = load_policy(cfg, log=lambda *_: None)
    model = maybe_lora(model, cfg)
    model.train()
    base = peak_rss_mib()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-5)
    B, P, T = a.batch, a.prompt, a.completion
    g = torch.Generator().manual_seed(0)
    p_ids, c_ids = torch.randint(10, 40000, (B, P), generator=g), torch.randint(10, 40000, (B, T), generator=g)
    ones = torch.ones(B, T)
    t = time.perf_counter()
    logp = token_logprobs(model, p_ids, torch.ones(B, P, dtype=torch.long), c_ids, ones).float()
    loss = ppo_clip(logp, logp.detach(), torch.randn(B, generator=g), ones, eps_low=0.2, eps_high=0.28,
                    agg="token_mean", max_len=T).loss
    loss.backward()
    opt.step()
    seconds = time.perf_counter() - t
    peak = peak_rss_mib() - base
    c = model.config
    L, H, I, V = c.num_hidden_layers, c.hidden_size, c.intermediate_size, c.vocab_size
    width = 2 if a.dtype == "bfloat16" else 4
    per_token = H if a.ckpt == "true" else 12 * H + 4 * I
    act = (B * (P + T) * L * per_token * width + B * T * 2 * V * 4) / 2**20
    states = 12 * sum(p.numel() for p in params) / 2**20  # gradient + two moments, fp32
    print(json.dumps({"peak_mib": peak, "estimate_mib": act + states, "seconds": seconds,
                      "trained": sum(p.numel() for p in params)}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--prompt", type=int, default=72)
    ap.add_argument("--completion", type=int, default=64)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--dtype", default="float32", help=argparse.SUPPRESS)
    ap.add_argument("--ckpt", default="false", help=argparse.SUPPRESS)
    ap.add_argument("--lora", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    from bench.machine import describe

    print(describe(), flush=True)  # where this ran: figures from two machines side by side
    if a.child:
        return child(a)
    print(f"one training step of {a.batch} sequences x ({a.prompt} + {a.completion}) tokens, SmolLM2-135M-Instruct")
    print(f"{'dtype':<9} {'checkpointing':<14} {'trained':<16} {'peak MiB':>9} {'estimate':>9} {'ratio':>6} {'s/step':>7}")
    for dtype, ckpt, lora in SETTINGS:
        out = subprocess.run([sys.executable, __file__, "--child", "--dtype", dtype, "--ckpt", str(ckpt).lower(),
                              "--lora", str(lora), "--batch", str(a.batch), "--prompt", str(a.prompt),
                              "--completion", str(a.completion), "--threads", str(a.threads)],
                             capture_output=True, text=True)
        if out.returncode:
            print(f"{dtype:<9} {str(ckpt):<14} {'LoRA r=' + str(lora) if lora else 'all':<16} failed: "
                  f"{out.stderr.strip().splitlines()[-1]}")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        what = f"LoRA r={lora}" if lora else "all weights"
        print(f"{dtype:<9} {str(ckpt):<14} {what:<16} {r['peak_mib']:>9.0f} {r['estimate_mib']:>9.0f} "
              f"{r['peak_mib'] / r['estimate_mib']:>6.2f} {r['seconds']:>7.1f}")


if __name__ == "__main__":
    main()
