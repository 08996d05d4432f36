"""Does GRPO help, or would more of the same SFT have done as well? An equal-wall-time control.

From the same cached SFT checkpoint of the embedded default:
  rl       `train_grpo` for --steps rounds (the demo's loop); its wall time W is the sum of
           the rounds' times (held-out evaluation excluded);
  sft      continued SFT on the same SFT mixture (worked and direct targets, `sft.worked_fraction`)
           at the SFT run's final learning rate, for the same wall time W;
  random   (with --random-control) the same GRPO with `grpo.control=shuffled_rewards`: every sample gets
           the verdicts of a random sample of its round (same rewards, no signal), same number of rounds.
Both are scored on the same held-out prompts with greedy decoding; printed side by side.

    .venv/bin/python bench/rl_vs_sft_control.py [--steps 40]
    .venv/bin/python bench/rl_vs_sft_control.py --config examples/code_rl/config.yaml   # code tasks (pass rate)

The continued-SFT control is the stronger baseline: it sees gold solutions, RL only its own samples
and a pass/fail; the shuffled-reward one tells the verifier's signal from the update's side effects.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def continued_sft(cfg, seconds: float, test_rows) -> tuple[int, float]:
    import torch

    from reasoning_rl.models.load import load_policy
    from reasoning_rl.models.sft import seed_everything, sft_step
    from reasoning_rl.eval import held_out
    from reasoning_rl.task.task import Task
    from reasoning_rl.task.embedded.arithmetic import make_rows

    seed_everything(cfg.seed + 1)
    model, tok = load_policy(cfg, log=lambda *_: None)
    train_rows, _ = make_rows(cfg.tasks)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1 * cfg.sft.lr, betas=(0.9, 0.98))  # the SFT schedule's floor
    rng = random.Random(cfg.seed + 1)
    model.train()
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        sft_step(model, tok, opt, train_rows, rng, cfg.sft)
        steps += 1
    model.eval()
    task = Task.from_config(cfg.tasks)
    return steps, held_out.accuracy(task, model, tok, test_rows, max_tokens=cfg.generation.max_tokens)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40, help="GRPO rounds")
    ap.add_argument("--config", help="a config file (e.g. examples/code_rl/config.yaml); default: the embedded default")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config overrides")
    ap.add_argument("--random-control", action="store_true", help="also run GRPO on shuffled rewards")
    a = ap.parse_args()
    from bench.machine import describe

    print(describe(), flush=True)  # where this ran: figures from two machines side by side
    import torch

    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.models.load import load_policy
    from reasoning_rl.models.sft import build_sft_checkpoint
    from reasoning_rl.eval import held_out
    from reasoning_rl.task.task import Task
    from reasoning_rl.trainers.grpo import train_grpo

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        run = a.set + [f"grpo.steps={a.steps}", f"grpo.eval_every={a.steps}", "grpo.checkpoint_every=0"]
        cfg = config.load(Config, a.config, overrides=run + [f"output_dir={tmp}"])
        build_sft_checkpoint(cfg)
        task = Task.from_config(cfg.tasks)
        test = task.test[: cfg.eval.size]
        history, _, _ = train_grpo(cfg, log=lambda *_: None)
        shuffled = None
        if a.random_control:
            ctl = config.load(Config, a.config,
                              overrides=run + [f"output_dir={tmp}/random", "grpo.control=shuffled_rewards"])
            shuffled = train_grpo(ctl, log=lambda *_: None)[0]
    wall = sum(h["time/step"] for h in history)
    acc_rl = history[-1]["eval/accuracy"]
    steps, acc_sft = continued_sft(cfg, wall, test)
    model, tok = load_policy(cfg, log=lambda *_: None)
    acc0 = held_out.accuracy(task, model, tok, test, max_tokens=cfg.generation.max_tokens)
    print(json.dumps({"heldout_prompts": len(test), "sft_start": acc0, "wall_s": round(wall, 1),
                      "grpo": {"rounds": a.steps, "accuracy": acc_rl},
                      "continued_sft": {"steps": steps, "accuracy": acc_sft},
                      **({"grpo_shuffled_rewards": {
                          "rounds": a.steps, "wall_s": round(sum(h["time/step"] for h in shuffled), 1),
                          "accuracy": shuffled[-1]["eval/accuracy"]}} if shuffled else {})}))
    metric = "pass rate" if cfg.tasks.kind == "code" else "accuracy"
    print(f"held-out {metric} ({len(test)} prompts, greedy): SFT start {acc0:.3f}; after {wall:.0f} s of "
          f"GRPO ({a.steps} rounds) {acc_rl:.3f} ({100 * (acc_rl - acc0):+.1f} points); after the same wall time "
          f"of continued SFT ({steps} steps) {acc_sft:.3f} ({100 * (acc_sft - acc0):+.1f} points)"
          + (f"; GRPO on shuffled rewards ({a.steps} rounds) {shuffled[-1]['eval/accuracy']:.3f} "
             f"({100 * (shuffled[-1]['eval/accuracy'] - acc0):+.1f} points)" if shuffled else ""))


if __name__ == "__main__":
    main()
