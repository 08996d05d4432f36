"""Five ways to learn from a teacher and a verifier, on the real model, from the same start: held-out accuracy
against wall time.

    .venv/bin/python bench/distill_compare.py --teacher runs/teacher/final [--seeds 0 1] [--out runs/distill_compare]
    .venv/bin/python bench/distill_compare.py --teacher DIR --arm distill --seed 0   # one arm, one seed

The student is SmolLM2-135M-Instruct as the real-model demo trains it (LoRA r 16, the demo's word problems through
its chat template, <= 64 tokens at temperature 0.7); the teacher is a model that task was trained on (the demo's
GRPO run, merged: `reasoning-rl demo --model smollm2-135m-instruct --set output_dir=runs/teacher`). Arms:

    grpo            GRPO under the math verifier (the demo's knobs)
    distill         on-policy distillation, the per-token reverse KL (distill.loss reverse_kl)
    distill_reward  the same plus the verifier's outcome advantage (distill.reward_weight 1)
    sft_teacher     the teacher's verified samples (k per prompt, the passed ones), then SFT on them
    sft_self        the student's own verified samples, then SFT (one round of ReST-EM)

Each arm's clock is its training time: rounds (sampling, verification, update) for the RL arms, sampling and SFT
steps for the SFT arms, the model's load and the held-out evaluations left out. Two clocks are kept: wall seconds,
and the process's CPU seconds over its threads (which another job on the machine does not inflate); the summary
compares arms on the CPU clock divided by the threads, and prints both. Held-out: greedy on 200 prompts
never trained on (`eval.size`), with standard errors, at the start and every few rounds. Writes one JSON per arm and
seed, summary.json (every curve and the time each arm first reaches the teacher's accuracy within 2 standard
errors) and distill_compare.png.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ARMS = ("grpo", "distill", "distill_reward", "sft_teacher", "sft_self")
TASK = ["model.name_or_path=smollm2-135m-instruct", "model.lora.r=16", "model.lora.alpha=32",
        "tasks.families=[word_add, word_sub, word_mul, word_two]", "tasks.max_digits=1",
        "tasks.instruction=Put the final answer in \\boxed{}.", "generation.max_tokens=64",
        "generation.temperature=0.7", "eval.size=200"]


def rl_knobs(section: str, steps: int, every: int) -> list[str]:
    return [f"{section}.{k}" for k in (f"steps={steps}", f"eval_every={every}", "prompts_per_step=4", "group_size=8",
                                       "minibatch_size=32", "max_refill_rounds=0", "warmup_steps=0", "lr=3e-4",
                                       "checkpoint_every=0")]


def se(p: float, n: int) -> float:
    return math.sqrt(max(p * (1 - p), 0.0) / n)


def run_rl(arm: str, teacher: str, seed: int, steps: int, every: int, out: str) -> dict:
    """An RL arm: (training seconds, held-out accuracy) at the start and after every `every` rounds."""
    from reasoning_rl import config
    from reasoning_rl.config import Config

    section = "grpo" if arm == "grpo" else "distill"
    extra = [] if arm == "grpo" else [f"distill.teacher={teacher}"] + (
        ["distill.reward_weight=1.0"] if arm == "distill_reward" else [])
    cfg = config.load(Config, overrides=TASK + rl_knobs(section, steps, every) + extra +
                      [f"seed={seed}", f"output_dir={out}/{arm}-{seed}"])
    if arm == "grpo":
        from reasoning_rl.trainers.grpo import train_grpo as train
    else:
        from reasoning_rl.trainers.distill import train_distill as train
    import torch

    from reasoning_rl.eval import held_out

    threads = torch.get_num_threads()
    evals = [0.0]  # CPU seconds spent in held-out evaluations (the loop calls held_out.configured)
    real = held_out.configured

    def timed(*args, **kw):
        t = time.process_time()
        try:
            return real(*args, **kw)
        finally:
            evals[0] += time.process_time() - t

    held_out.configured = timed
    start = time.process_time()
    cpu = []  # training CPU seconds (evaluations left out) after each step

    def on_step(m):
        cpu.append(time.process_time() - start - evals[0])

    history, _, _ = train(cfg, log=lambda s: print(f"[{arm} {seed}] {s}", flush=True), on_step=on_step)
    held_out.configured = real
    with open(os.path.join(out, f"{arm}-{seed}", "metrics.jsonl")) as f:
        first = json.loads(f.readline())
    curve, wall_curve, clock = [(0.0, first["eval/accuracy"])], [(0.0, first["eval/accuracy"])], 0.0
    for h, c in zip(history, cpu):
        clock += h["time/step"]  # the round's wall time, its evaluation not included
        if "eval/accuracy" in h:
            curve.append((round(c / threads, 1), h["eval/accuracy"]))
            wall_curve.append((round(clock, 1), h["eval/accuracy"]))
    return {"curve": curve, "wall_curve": wall_curve, "steps": steps, "threads": threads}


def run_sft(arm: str, teacher: str, seed: int, prompts: int, k: int, sft_steps: int, every: int, out: str) -> dict:
    """An SFT arm: sample k completions of `prompts` train prompts (the teacher's, or the student's own), keep the
    passed ones, then SFT the student on them; held-out at the start and every `every` SFT steps."""
    import dataclasses
    import random

    import torch

    from reasoning_rl import config
    from reasoning_rl.config import Config
    from reasoning_rl.data.curate import sample_verified
    from reasoning_rl.eval import held_out
    from reasoning_rl.models.load import load_policy, load_pretrained
    from reasoning_rl.models.lora import maybe_lora
    from reasoning_rl.models.sft import seed_everything, sft_step
    from reasoning_rl.rollout import SamplingConfig
    from reasoning_rl.task.task import Task

    cfg = config.load(Config, overrides=TASK + [f"seed={seed}", "sft.batch_size=16", "sft.lr=3e-4"])
    seed_everything(seed)
    task = Task.from_config(cfg.tasks)
    model, tok = load_policy(cfg, log=lambda *_: None)
    task.render(tok)
    evals = task.rows("test")[: cfg.eval.size]
    curve = [(0.0, held_out.configured(cfg, task, model, tok, evals)["accuracy"])]
    rows = random.Random(seed).sample(task.train, prompts)
    sampler = model
    if arm == "sft_teacher":
        sampler, _ = load_pretrained(cfg, teacher, log=lambda *_: None)
        sampler.eval()
    threads = torch.get_num_threads()
    t0, c0 = time.perf_counter(), time.process_time()
    groups = sample_verified(sampler, tok, task, rows, k, SamplingConfig.of(cfg.generation, seed=seed),
                             batch_prompts=16, log=lambda *_: None)
    clock, cpu_clock = time.perf_counter() - t0, time.process_time() - c0
    del sampler
    targets = [{"prompt": g.prompt, "ids": list(s.token_ids), "loss_mask": list(s.loss_mask)}
               for g in groups for s in g.samples if s.outcome(task.outcome)]
    passed = len(targets)
    model = maybe_lora(model, cfg)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.sft.lr, weight_decay=0.0, betas=(0.9, 0.98))
    s = dataclasses.replace(cfg.sft, grad_clip=1.0)
    rng = random.Random(seed)
    wall_curve = list(curve)
    for step in range(1, sft_steps + 1 if targets else 1):
        model.train()
        t0, c0 = time.perf_counter(), time.process_time()
        sft_step(model, tok, opt, targets, rng, s)
        clock, cpu_clock = clock + time.perf_counter() - t0, cpu_clock + time.process_time() - c0
        if step % every == 0 or step == sft_steps:
            model.eval()
            acc = held_out.configured(cfg, task, model, tok, evals)["accuracy"]
            curve.append((round(cpu_clock / threads, 1), acc))
            wall_curve.append((round(clock, 1), acc))
            print(f"[{arm} {seed}] sft step {step}: held-out {acc:.3f} at {clock:.0f} s", flush=True)
    return {"curve": curve, "wall_curve": wall_curve, "samples": len(groups) * k, "passed": passed,
            "threads": threads}


def first_reach(curve: list, target: float, n: int) -> float | None:
    """The training time at which the curve first reaches target - 2 standard errors of the difference."""
    for t, acc in curve:
        if acc >= target - 2 * math.hypot(se(acc, n), se(target, n)):
            return t
    return None


def teacher_accuracy(teacher: str, out: str) -> float:
    path = os.path.join(out, "teacher.json")
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)["accuracy"]
    from reasoning_rl import config
    from reasoning_rl.config import Config
    from reasoning_rl.eval import held_out
    from reasoning_rl.task.task import Task

    cfg = config.load(Config, overrides=TASK + [f"model.name_or_path={teacher}", "model.lora.r=0"])
    from reasoning_rl.models.load import load_policy

    model, tok = load_policy(cfg, log=lambda *_: None)
    task = Task.from_config(cfg.tasks)
    task.render(tok)
    acc = held_out.configured(cfg, task, model, tok, task.rows("test")[: cfg.eval.size])["accuracy"]
    with open(path, "w") as f:
        json.dump({"accuracy": acc}, f)
    return acc


def plot(results: dict, teacher_acc: float, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    colours = dict(zip(ARMS, ("tab:blue", "tab:red", "tab:purple", "tab:green", "tab:orange")))
    labelled = set()
    for key, r in sorted(results.items()):
        arm = key.rsplit("-", 1)[0]
        ax.plot(*zip(*r["curve"]), marker="o", color=colours[arm], alpha=0.8,
                label=None if arm in labelled else arm)  # one legend entry an arm, whatever its seeds
        labelled.add(arm)
    ax.axhline(teacher_acc, ls="--", color="grey", label=f"teacher {teacher_acc:.3f}")
    ax.set_xlabel("training seconds: CPU seconds / threads (evaluations not counted)")
    ax.set_ylabel("held-out accuracy (200 prompts, greedy)")
    ax.set_title("SmolLM2-135M-Instruct from its base: GRPO, distillation, SFT on verified samples")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--teacher", required=True, help="the teacher's folder (the demo's trained model, merged)")
    ap.add_argument("--arm", choices=ARMS, help="run one arm (in this process) and print its JSON")
    ap.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--steps", type=int, default=16, help="RL rounds")
    ap.add_argument("--every", type=int, default=4, help="RL rounds between evaluations")
    ap.add_argument("--prompts", type=int, default=64, help="SFT arms: train prompts sampled")
    ap.add_argument("--k", type=int, default=4, help="SFT arms: samples per prompt")
    ap.add_argument("--sft-steps", type=int, default=48)
    ap.add_argument("--sft-every", type=int, default=16)
    ap.add_argument("--out", default="runs/distill_compare")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.arm:
        r = run_rl(a.arm, a.teacher, a.seed, a.steps, a.every, a.out) if not a.arm.startswith("sft") else \
            run_sft(a.arm, a.teacher, a.seed, a.prompts, a.k, a.sft_steps, a.sft_every, a.out)
        with open(os.path.join(a.out, f"{a.arm}-{a.seed}.json"), "w") as f:
            json.dump(r, f)
        return
    from machine import describe

    print(describe(), flush=True)
    teacher_acc = teacher_accuracy(a.teacher, a.out)
    print(f"teacher {a.teacher}: held-out {teacher_acc:.3f} +- {se(teacher_acc, 200):.3f}", flush=True)
    results = {}
    for seed in a.seeds:
        for arm in a.arms:
            key, path = f"{arm}-{seed}", os.path.join(a.out, f"{arm}-{seed}.json")
            if not os.path.exists(path):
                subprocess.run([sys.executable, __file__, "--teacher", a.teacher, "--arm", arm, "--seed", str(seed),
                                "--steps", str(a.steps), "--every", str(a.every), "--prompts", str(a.prompts),
                                "--k", str(a.k), "--sft-steps", str(a.sft_steps), "--sft-every", str(a.sft_every),
                                "--out", a.out], check=True)
            with open(path) as f:
                results[key] = json.load(f)
    summary = {"teacher_accuracy": teacher_acc, "runs": results,
               "reach": {k: first_reach(r["curve"], teacher_acc, 200) for k, r in results.items()}}
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    plot(results, teacher_acc, os.path.join(a.out, "distill_compare.png"))
    print(f"{'arm':<16} {'seed':>4}  held-out start -> end (+- se)   training s (cpu/threads, wall)   reaches the "
          "teacher (2 SE) at")
    for key, r in sorted(results.items()):
        arm, seed = key.rsplit("-", 1)
        (_, a0), (t1, a1) = r["curve"][0], r["curve"][-1]
        reach = summary["reach"][key]
        print(f"{arm:<16} {seed:>4}  {a0:.3f} -> {a1:.3f} +- {se(a1, 200):.3f}   {t1:>8.0f}, "
              f"{r['wall_curve'][-1][0]:>6.0f}            " + (f"{reach:.0f} s" if reach is not None else
                                                               "not within the run"))


if __name__ == "__main__":
    main()
