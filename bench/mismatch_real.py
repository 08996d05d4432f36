"""GRPO of the real model against a vLLM CPU server: the engine-vs-trainer mismatch per round, with weight pushes.

    .venv/bin/python bench/mismatch_real.py [--steps 4] [--push-every 1 2]

A `vllm serve` of SmolLM2-135M-Instruct's converted folder runs from .venv-vllm (`make vllm-env`; dev mode, on
loopback); our trainer samples from it through the `openai` engine (`grpo.engine=openai`) and pushes its weights
through a shared folder every `push_every` rounds. Full fine-tuning at lr 1e-5 on the real demo's word problems
(4 prompts x 8 samples, <= 64 tokens). Printed per round: staleness (updates the server's weights lag behind),
`rollout/mismatch_kl` (k3, per token, between the server's sampling log-probs and the trainer's), the rollout
correction's largest weight (nan in a round that trained nothing), and the push's time. One run per setting; the
server's start-up is not counted.

Not here: held-out accuracy (the demo measures that), vLLM's offline engine (bench/generation_real.py).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
VPY = os.path.join(ROOT, ".venv-vllm", "bin", "python")

KNOBS = ["model.name_or_path=smollm2-135m-instruct", "tasks.families=[word_add, word_sub, word_mul, word_two]",
         "tasks.max_digits=1", "tasks.instruction=Put the final answer in \\boxed{}.", "generation.max_tokens=64",
         "generation.temperature=1.0", "grpo.prompts_per_step=4", "grpo.group_size=8", "grpo.minibatch_size=32",
         "grpo.max_refill_rounds=0", "grpo.warmup_steps=0", "grpo.lr=1e-5", "grpo.checkpoint_every=0",
         "grpo.eval_every=0", "grpo.eval_at_start=false", "grpo.eval_at_end=false", "grpo.engine=openai",
         "grpo.engine_model=smollm2"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--push-every", type=int, nargs="+", default=[1, 2])
    a = ap.parse_args()
    from bench.machine import describe

    print(describe(), flush=True)  # where this ran: figures from two machines side by side
    if not os.path.exists(VPY):
        sys.exit("no .venv-vllm: run `make vllm-env` first")
    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.models.sources import resolve
    from reasoning_rl.rollout.vllm_server import local_vllm_server
    from reasoning_rl.trainers.grpo import train_grpo

    folder = resolve("smollm2-135m-instruct", log=lambda *_: None)
    with tempfile.TemporaryDirectory() as d:
        with local_vllm_server(VPY, folder, "smollm2", os.path.join(d, "server.log"), max_model_len=512) as url:
            for k in a.push_every:
                cfg = config.load(Config, overrides=KNOBS + [
                    f"grpo.engine_url={url}", f"grpo.weights_dir={d}/weights-{k}", f"grpo.push_every={k}",
                    f"grpo.steps={a.steps}", f"output_dir={d}/run-{k}"])
                history, _, _ = train_grpo(cfg, log=lambda *_: None)
                print(f"push_every={k}")
                print("step  staleness  mismatch_kl  is_weight_max  push s  reward")
                for h in history:
                    print(f"{h['step']:4d}  {h.get('rollout/staleness', 0):9.0f}  {h.get('rollout/mismatch_kl', 0):11.2e}"
                          f"  {h.get('rollout/is_weight_max', float('nan')):13.3f}  {h.get('time/push', 0):6.2f}"
                          f"  {h.get('reward/mean', 0):6.3f}", flush=True)


if __name__ == "__main__":
    main()
