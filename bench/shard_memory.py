"""What each rank holds: parameters + gradients + optimiser state per rank, for one process, DDP and FSDP2 at 2
ranks, against the formula `sharding.state_bytes` (the one docs/scale-out.md's table is computed from), with each
one's step time and peak resident memory.

    .venv/bin/python bench/shard_memory.py [--shapes real 0.5b] [--tokens 64] [--rows 4]

Shapes: `real`, SmolLM2-135M-Instruct (the model this project installs); `0.5b`, a randomly initialised Llama of
Qwen2-0.5B's shape (24 layers, width 896, MLP 4864, 14 heads, 2 key/value heads, 151,936-token vocabulary, tied
embeddings; 494 M parameters). Each arm runs in processes of its own (torchrun for the two 2-rank arms, gloo on
the CPU): the model is built, wrapped (nothing, DDP, or FSDP2 through the trainer's `Ranks`), AdamW takes two steps
on `--rows` sequences of `--tokens` random tokens (the first creates Adam's moments), and each rank reports what
its tensors hold (local shards under FSDP2), the second step's time and its peak RSS. An arm whose formula says it
would not fit in this machine's memory (two DDP processes of the 0.5B shape hold 16 GB of state) is skipped, with
the reason. Float32 throughout.
Not here: activations (they depend on the batch, not the sharding), GPUs (bench/gpu_check.py).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
HALF_B = dict(num_hidden_layers=24, hidden_size=896, intermediate_size=4864, num_attention_heads=14,
              num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True, max_position_embeddings=2048)


def build(shape: str):
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    if shape == "real":
        from reasoning_rl.models import sources

        return AutoModelForCausalLM.from_pretrained(sources.resolve("smollm2-135m-instruct", log=lambda *_: None),
                                                    dtype=torch.float32)
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(LlamaConfig(**HALF_B, head_dim=64))


def local(t) -> int:
    return (t.to_local() if hasattr(t, "to_local") else t).numel() * t.element_size()


def child(a) -> None:
    """One rank of one arm: prints its report as a JSON line (rank 0 prints every rank's)."""
    import torch

    from reasoning_rl.trainers.distributed import Ranks
    from bench.machine import peak_rss_mib

    torch.set_num_threads(1)
    ranks = Ranks()
    model = build(a.shape)
    params = sum(p.numel() for p in model.parameters())
    wrapped = ranks.wrap(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    ids = torch.randint(0, model.config.vocab_size, (a.rows, a.tokens), generator=torch.Generator().manual_seed(1))
    times = []
    for _ in range(2):
        t = time.perf_counter()
        out = wrapped(input_ids=ids, labels=ids)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)  # gradients kept allocated: what a step holds
        times.append(time.perf_counter() - t)
    held = {"params": sum(local(p) for p in model.parameters()),
            "grads": sum(local(p.grad) for p in model.parameters() if p.grad is not None),
            "optim": sum(local(v) for s in opt.state.values() for v in s.values() if torch.is_tensor(v) and v.dim()),
            "step_s": times[-1], "peak_rss_mib": peak_rss_mib()}
    every = ranks.gather([held])
    if ranks.main:
        print("REPORT " + json.dumps({"params": params, "world": ranks.world, "sharded": ranks.sharded,
                                      "ranks": every}), flush=True)
    ranks.barrier()


def run_arm(arm: str, a) -> dict | None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": ROOT}
    me = [os.path.abspath(__file__), "--child", "--shape", a.shape_now, "--rows", str(a.rows), "--tokens",
          str(a.tokens)]
    if arm == "one":
        cmd = [sys.executable, *me]
    else:
        torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
        cmd = [torchrun, "--nproc-per-node", "2", *me]
        if arm == "fsdp2":
            env.update(ACCELERATE_USE_FSDP="true", FSDP_VERSION="2")
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    line = next((x for x in out.stdout.splitlines() if x.startswith("REPORT ")), None)
    if line is None:
        print(f"  {arm}: failed ({out.returncode}): {out.stderr.strip().splitlines()[-1:] or ''}")
        return None
    return json.loads(line[len("REPORT "):])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", nargs="+", default=["real", "0.5b"], choices=["real", "0.5b"])
    ap.add_argument("--rows", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--shape", default="real", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a)
    from bench.machine import describe

    print(describe(), flush=True)  # where this ran: figures from two machines side by side
    from reasoning_rl.trainers.sharding import state_bytes

    total_mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for shape in a.shapes:
        a.shape_now = shape
        print(f"\n{shape}: per rank, float32, AdamW (parameters + gradients + two moments), {a.rows} x {a.tokens} "
              f"tokens a step")
        print(f"  {'arm':<8} {'params MiB':>11} {'grads MiB':>10} {'optim MiB':>10} {'sum MiB':>9} {'formula':>9} "
              f"{'step s':>7} {'peak RSS MiB':>13}")
        base = None
        for arm, world, sharded in (("one", 1, False), ("ddp", 2, False), ("fsdp2", 2, True)):
            n = 494_000_000 if shape == "0.5b" else 134_500_000
            need = state_bytes(n, world, sharded) * world * 1.4  # every rank's state, plus a margin for the rest
            if need > total_mem * 0.8:
                print(f"  {arm:<8} skipped: {world} x {state_bytes(n, world, sharded) / 2**30:.1f} GiB of state would "
                      f"not fit beside the rest in {total_mem / 2**30:.0f} GiB")
                continue
            rep = run_arm(arm, a)
            if rep is None:
                continue
            r0 = rep["ranks"][0]
            s = r0["params"] + r0["grads"] + r0["optim"]
            f = state_bytes(rep["params"], rep["world"], rep["sharded"])
            base = base or s
            print(f"  {arm:<8} {r0['params'] / 2**20:11.1f} {r0['grads'] / 2**20:10.1f} {r0['optim'] / 2**20:10.1f} "
                  f"{s / 2**20:9.1f} {f / 2**20:9.1f} {max(r['step_s'] for r in rep['ranks']):7.2f} "
                  f"{max(r['peak_rss_mib'] for r in rep['ranks']):13.0f}   ({s / base:.2f} of one process's)")


if __name__ == "__main__":
    main()
