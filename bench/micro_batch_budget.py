"""Micro-batches cut by count (`grpo.length_buckets`) against micro-batches cut by a padded-token budget
(`grpo.micro_batch_tokens`): passes, the largest pass and all passes' padded tokens, peak memory and time of one
GRPO minibatch's forward and backward on the real model (SmolLM2-135M-Instruct), each setting in a child process.

    .venv/bin/python bench/micro_batch_budget.py [--rows 32] [--budgets 2048,4096] [--data FILE] [--one-pass]

The rows are GSM8K's own: `rows` questions of its train split (../shared/data/gsm8k/train.jsonl, read where it
lies), each in the model's chat template, with its reference solution as the completion, so the lengths are those of
real text nobody here wrote (the first 32: prompts of 57-142 tokens, solutions of 62-369). Advantages are +-1, the
sampling log-probs those of the model (a no-grad pass before the clock starts). Memory is the growth of the child's
peak RSS over its peak before the update: the gradients (the same in every setting) and the largest pass's
activations. No optimiser step. One run each; the machine is noisy: read the ratios.

What it shows: with a count, a pass's size follows the longest rows it happens to hold; with a budget it is
bounded by the budget, and short rows share passes. Not here: the update's result (tests/test_logprobs.py shows
every cut gives the one padded batch's gradient).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
DATA = os.path.join(os.path.dirname(ROOT), "shared", "data", "gsm8k", "train.jsonl")


def gsm8k_rows(tok, path: str, n: int) -> tuple[list[list[int]], list[list[int]]]:
    """The first `n` rows of a GSM8K JSONL file as (prompt ids in the chat template, solution ids + EOS)."""
    from reasoning_rl.rollout.base import render_prompt

    prompts, completions = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if len(prompts) == n:
                break
            row = json.loads(line)
            prompts.append(tok(render_prompt(tok, row["question"], chat=True))["input_ids"])
            completions.append(tok(row["answer"])["input_ids"] + [tok.eos_token_id])
    return prompts, completions


def child(a) -> None:
    import torch

    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.models.device import resolve_threads
    from reasoning_rl.models.load import load_policy
    from reasoning_rl.models.logprobs import pad_rollouts, token_logprobs
    from reasoning_rl.trainers.distributed import Ranks
    from reasoning_rl.trainers.grpo_batch import GRPOBatch, micro_batches, update_minibatch
    from bench.machine import peak_rss_mib

    cfg = config.load(Config, None, ["model.name_or_path=smollm2-135m-instruct", "grpo.skip_zero_advantage=false"]
                      + a.setting.split())
    torch.set_num_threads(resolve_threads(a.threads, "smollm2"))
    model, tok = load_policy(cfg, log=lambda *_: None)
    prompts, completions = gsm8k_rows(tok, a.data, a.rows)
    tokens = pad_rollouts(prompts, completions, [[0.0] * len(c) for c in completions], tok.pad_token_id)
    with torch.no_grad():  # the sampling log-probs: the model's own, 4 rows a pass
        old = torch.cat([token_logprobs(model, tokens.p_ids[i:i + 4], tokens.p_mask[i:i + 4],
                                        tokens.c_ids[i:i + 4], tokens.c_mask[i:i + 4]) for i in range(0, a.rows, 4)])
    A = torch.where(torch.arange(a.rows) % 2 == 0, 1.0, -1.0)  # (n,)
    batch = GRPOBatch(dataclasses.replace(tokens, logp_old=old * tokens.c_mask), A, [])
    g = cfg.grpo
    passes = list(micro_batches(batch.tokens, g.length_buckets, budget=g.micro_batch_tokens))
    sizes = [m.padded for m in passes]  # padded tokens a pass
    model.train()
    base = peak_rss_mib()
    t = time.perf_counter()
    update_minibatch(model, None, Ranks(), g, cfg.generation, batch, torch.arange(a.rows))
    seconds = time.perf_counter() - t
    print(json.dumps({"passes": len(passes), "largest": max(sizes), "all": sum(sizes),
                      "peak_mib": peak_rss_mib() - base, "seconds": seconds,
                      "tokens": int((tokens.p_mask.sum() + tokens.c_mask.sum()).item()),
                      "padded": a.rows * (tokens.p_ids.shape[1] + tokens.c_ids.shape[1])}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=32)
    ap.add_argument("--budgets", default="2048,4096", help="padded-token budgets to run, comma-separated")
    ap.add_argument("--data", default=DATA, help="a GSM8K JSONL file (question, answer)")
    ap.add_argument("--one-pass", action="store_true", help="also the whole minibatch in one pass (the most memory)")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--setting", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    from bench.machine import describe

    print(describe(), flush=True)  # where this ran: figures from two machines side by side
    if a.child:
        return child(a)
    settings = (["grpo.length_buckets=1"] if a.one_pass else []) + ["grpo.length_buckets=4"] + \
        [f"grpo.micro_batch_tokens={b}" for b in a.budgets.split(",") if b]
    print(f"one GRPO minibatch of {a.rows} GSM8K rows ({a.data}), forward and backward, SmolLM2-135M-Instruct")
    print(f"{'setting':<30} {'passes':>6} {'largest pass':>12} {'all passes':>10} {'peak MiB':>9} {'seconds':>8}")
    first = None
    for s in settings:
        out = subprocess.run([sys.executable, __file__, "--child", "--setting", s, "--rows", str(a.rows),
                              "--data", a.data, "--threads", str(a.threads)], capture_output=True, text=True)
        if out.returncode:
            print(f"{s:<30} failed: {(out.stderr.strip().splitlines() or ['no output'])[-1]}")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        if first is None:
            first = r
            print(f"(the rows: {r['tokens']} tokens, {r['padded']} padded as one batch)")
        print(f"{s:<30} {r['passes']:>6} {r['largest']:>12} {r['all']:>10} {r['peak_mib']:>9.0f} {r['seconds']:>8.1f}"
              f"   x{r['peak_mib'] / first['peak_mib']:.2f} memory, x{r['seconds'] / first['seconds']:.2f} time")


if __name__ == "__main__":
    main()
