"""The seed's algorithms side by side on a public benchmark: from one SFT start, the same CPU-time budget per arm,
held-out greedy accuracy and maj@8 with standard errors, and one plot of accuracy against CPU time.

    .venv/bin/python bench/recipe_compare.py --start RUN/1-sft/final --data ../shared/data/mawps-asdiv-a/train.jsonl
    .venv/bin/python bench/recipe_compare.py ... --arm grpo --seed 0          # one arm, one seed, in this process

The start is the `recipe` command's SFT stage on the same data (`reasoning-rl recipe ... --set recipe.stages=[sft]`):
the model fine-tuned on the gold solutions, its prompt format kept beside it. Every arm starts there, is trained with
the recipe's knobs (cli/recipe.py RECIPE_DEFAULTS: LoRA r 16 for the RL arms, 4 prompts x 8 samples a GRPO round,
<= the start's completion length at temperature 0.7) for `--budget` CPU seconds per thread of training (sampling,
verification, updates; the model's load and the evaluations left out), and is scored on the whole held-out split:

    grpo      GRPO under the outcome verifier: each sample against its group's mean
    shuffled  the same with every sample given a random sample's reward from its round (the control: no signal)
    ppo       PPO: each token's return against a learned critic (GAE), KL to the start as reward shaping
    dpo       DPO on the start model's own verified samples, passed against failed of one prompt (relative to the
              start as the reference); sampling the pairs is in its budget
    rest      SFT on the start model's own passing samples (ReST-EM), two rounds: sample, fine-tune, sample again
    distill   on-policy distillation into a fresh copy of the start, the teacher the best of the arms above (seed 0's
              final model of the arm with the best mean): each sampled token against the teacher's log-prob

Each arm's curve is held-out greedy accuracy at the start and every `--every` CPU seconds; its last point is its model
at the budget, also scored with 8 samples at temperature 0.7 (maj@8, pass@1). Two seeds by default (the seed drives
sampling, the prompts drawn and the pairs). Writes one JSON an arm and seed, summary.json, the table (summary.md) and
recipe_compare.png. The processor is printed first.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ARMS = ("grpo", "shuffled", "ppo", "dpo", "rest", "distill")
STEPS = 1000  # more rounds or steps than any budget here allows: the budget ends each arm


class Clock:
    """Training CPU seconds per thread: this process's CPU time since it started, less what evaluations took."""

    def __init__(self) -> None:
        import torch

        self.threads = torch.get_num_threads()
        self.c0, self.w0, self.held = time.process_time(), time.time(), 0.0

    def cpu(self) -> float:
        return (time.process_time() - self.c0 - self.held) / self.threads

    def off(self):
        """A block whose CPU time is not training (an evaluation)."""
        clock = self

        class Off:
            def __enter__(self):
                self.c = time.process_time()

            def __exit__(self, *exc):
                clock.held += time.process_time() - self.c
        return Off()


def arm_config(a, arm: str, seed: int, out: str):
    """The recipe's knobs on the start model, its prompt format adopted, for this arm and seed."""
    from reasoning_rl import config
    from reasoning_rl.cli.recipe import RECIPE_DEFAULTS
    from reasoning_rl.config import prompt_format
    from reasoning_rl.config.sections import Config

    over = [*RECIPE_DEFAULTS, f"tasks.source={a.data}", f"tasks.preset={a.preset}", f"model.name_or_path={a.start}",
            f"seed={seed}", f"output_dir={out}", "eval.size=100000", "recipe.sft_lora_r=0",
            "sft.batch_size=16", "sft.lr=2e-4", "sft.warmup_steps=0", f"sft.steps={STEPS}"]
    for section in ("grpo", "ppo", "distill"):
        over += [f"{section}.steps={STEPS}", f"{section}.eval_every=0", f"{section}.eval_at_start=false",
                 f"{section}.eval_at_end=false", f"{section}.checkpoint_every=0", f"{section}.train_prompts=0"]
    over += ["dpo.epochs=100", "model.lora.r=16", *a.set]
    cfg, _ = prompt_format.adopt(config.load(Config, overrides=over), set())  # every arm prompts as the start was
    return cfg


def run_arm(a, arm: str, seed: int) -> dict:
    """One arm: its curve [(CPU s per thread, held-out greedy)], and its final model's greedy, maj@8 and pass@1."""
    from reasoning_rl.eval import held_out
    from reasoning_rl.models.sft import seed_everything
    from reasoning_rl.task.task import Task

    out = os.path.join(a.out, f"{arm}-{seed}")
    cfg = arm_config(a, arm, seed, out)
    seed_everything(seed)
    task = Task.from_config(cfg.tasks)
    from reasoning_rl.models.load import load_tokenizer

    task.render(load_tokenizer(cfg))
    evals = task.rows("test")
    curve: list[tuple[float, float]] = []
    clock = Clock()
    due = [0.0]  # the CPU time of the next curve point

    def point(model, tok) -> bool:
        """A curve point when due; True once the budget is spent."""
        t = clock.cpu()
        if t >= due[0] or t >= a.budget:
            with clock.off():  # as episodes with the run's environment, where it has one
                acc = held_out.configured(cfg, task, model, tok, evals,
                                          rl=cfg.grpo if cfg.grpo.environment else None)["accuracy"]
            curve.append((round(t, 1), acc))
            print(f"[{arm} {seed}] {t:.0f} CPU s: held-out {acc:.3f}", flush=True)
            due[0] = t + a.every
        return t >= a.budget

    if arm in ("grpo", "shuffled", "ppo", "distill"):
        model, tok = run_rl(a, cfg, arm, clock, curve)
    elif arm == "dpo":
        model, tok = run_dpo(cfg, task, point)
    else:
        model, tok = run_rest(cfg, task, clock, point, a.budget)
    spent = clock.cpu()
    final = score(cfg, task, model, tok, evals, seed, a.samples)  # its greedy is the curve's last point
    if not curve or curve[-1][0] < spent - 1:
        curve.append((round(spent, 1), final["greedy"]))
    from reasoning_rl.models.lora import save_final

    save_final(out, model, tok, cfg=cfg)
    return {"arm": arm, "seed": seed, "curve": curve, "final": final, "cpu_s": round(spent, 1),
            "wall_s": round(time.time() - clock.w0, 1), "threads": clock.threads}


def run_rl(a, cfg, arm: str, clock: Clock, curve: list):
    """An RL arm through its trainer: its own held-out evaluation every `--every-rounds` rounds (their CPU time off the
    clock) makes the curve points; its on_step ends it at the budget."""
    import dataclasses

    from reasoning_rl.eval import held_out

    section = {"shuffled": "grpo"}.get(arm, arm)
    sec = dataclasses.replace(getattr(cfg, section), eval_every=a.every_rounds, eval_at_start=a.start_score is None,
                              **({"control": "shuffled_rewards"} if arm == "shuffled" else {}),
                              **({"teacher": a.teacher} if arm == "distill" else {}))
    cfg = dataclasses.replace(cfg, **{section: sec})
    from reasoning_rl.trainers.distill import train_distill
    from reasoning_rl.trainers.grpo import train_grpo
    from reasoning_rl.trainers.ppo import train_ppo

    train = {"grpo": train_grpo, "ppo": train_ppo, "distill": train_distill}[section]
    real = held_out.configured

    def timed(*args, **kw):  # the loop's evaluations are not training time
        with clock.off():
            return real(*args, **kw)

    def on_step(m) -> bool:
        t = clock.cpu()
        if "eval/accuracy" in m:
            curve.append((round(t, 1), m["eval/accuracy"]))
        return t >= a.budget

    held_out.configured = timed
    try:
        _, model, tok = train(cfg, log=lambda s: print(f"[{arm}] {s}", flush=True), on_step=on_step)
    finally:
        held_out.configured = real
    if a.start_score is None:
        with open(os.path.join(cfg.output_dir, "metrics.jsonl")) as f:
            first = json.loads(f.readline())  # step 0: the start's score, before any round
        curve.insert(0, (0.0, first["eval/accuracy"]))
    else:
        curve.insert(0, (0.0, a.start_score))
    return model, tok


def _own_groups(cfg, task, model, tok, prompts: int, n: int, seed: int):
    import random

    from reasoning_rl.data.curate import sample_verified
    from reasoning_rl.rollout import SamplingConfig

    rows = random.Random(seed).sample(task.train, min(prompts, len(task.train)))
    return sample_verified(model, tok, task, rows, n, SamplingConfig.of(cfg.generation, seed=seed), batch_prompts=32,
                           log=lambda *_: None)


class _Spent(Exception):
    pass


def run_dpo(cfg, task, point):
    """Pairs of the start model's own verified samples (passed against failed), then DPO to the budget."""
    import verifiers

    from reasoning_rl.data.pairs import PairConfig, build_pairs
    from reasoning_rl.models.load import load_policy
    from reasoning_rl.models.lora import maybe_lora
    from reasoning_rl.trainers.dpo import train_dpo_ours

    model, tok = load_policy(cfg, log=lambda *_: None)
    point(model, tok)
    groups = _own_groups(cfg, task, model, tok, cfg.recipe.dpo_prompts, cfg.dpo.group_size, cfg.seed)
    pairs, summary = build_pairs(groups, task.outcome, PairConfig(), policy=cfg.model.name_or_path,
                                 verifier_version=verifiers.get(task.outcome).version)
    print(f"[dpo] {len(pairs)} pairs: {json.dumps(summary)}", flush=True)
    model = maybe_lora(model, cfg)

    def record(m) -> None:
        model.eval()
        if point(model, tok):
            raise _Spent
        model.train()

    try:
        train_dpo_ours(cfg, model, tok, [{"prompt": p.prompt, "chosen": p.chosen, "rejected": p.rejected}
                                         for p in pairs], log=lambda *_: None, record=record)
    except _Spent:
        pass
    return model.eval(), tok


def run_rest(cfg, task, clock: Clock, point, budget: float, rounds: int = 2):
    """ReST-EM: the model samples train prompts, its passing samples are SFT targets; `rounds` times, each round
    an equal share of the budget (the second samples from the model the first trained)."""
    import dataclasses

    from reasoning_rl.models.load import load_policy
    from reasoning_rl.models.sft import train_sft

    model, tok = load_policy(cfg, log=lambda *_: None)
    point(model, tok)
    for r in range(rounds):
        model.eval()
        groups = _own_groups(cfg, task, model, tok, cfg.recipe.rest_prompts, cfg.recipe.rest_samples, cfg.seed + r)
        rows = list({(g.prompt, s.text): {"prompt": g.prompt, "completion": s.text}
                     for g in groups for s in g.samples if s.outcome(task.outcome)}.values())
        print(f"[rest] round {r + 1}: {len(rows)} passing samples of {len(groups)} prompts", flush=True)
        end = budget * (r + 1) / rounds

        def after(st) -> bool:
            model.eval()
            stop = point(model, tok) or clock.cpu() >= end
            model.train()
            return stop
        run = dataclasses.replace(cfg, seed=cfg.seed + r)
        train_sft(run, model, tok, rows, log=lambda *_: None, after_step=after)
    return model.eval(), tok



def score(cfg, task, model, tok, rows, seed: int, n: int = 8) -> dict:
    """Greedy and n samples at temperature 0.7 per held-out prompt: greedy, maj@n, pass@1, with standard errors; as
    episodes with the run's environment (the calculator the start was trained to call), as the recipe scores."""
    from reasoning_rl.eval.sampled import run_eval
    from reasoning_rl.recipes.stages import _engine
    from reasoning_rl.rollout import SamplingConfig

    if n == 0:  # greedy alone
        from reasoning_rl.eval import held_out

        p = held_out.configured(cfg, task, model, tok, rows, rl=cfg.grpo if cfg.grpo.environment else None)["accuracy"]
        return {"greedy": round(p, 4), "greedy_se": round((p * (1 - p) / len(rows)) ** 0.5, 4)}
    with _engine(cfg, model, tok) as engine:
        res = run_eval(model, tok, task, rows, n, SamplingConfig.of(cfg.generation, temperature=0.7, seed=seed),
                       greedy=True, truncated=cfg.eval.truncated, batch_prompts=32, progress=False, engine=engine)
    keep = ("greedy", f"maj@{n}", "pass@1", "parseable", "cut")
    return {k: round(v, 4) for k, v in res.metrics.items() if k in keep or k.removesuffix("_se") in keep}


def best_arm(results: dict) -> str:
    means = {}
    for r in results.values():
        means.setdefault(r["arm"], []).append(r["final"]["greedy"])
    return max((a for a in means if a not in ("shuffled", "distill")), key=lambda a: sum(means[a]) / len(means[a]))


def table(results: dict) -> str:
    lines = ["| arm | seed | held-out greedy | maj@n | pass@1 (T 0.7) | CPU s / thread | wall s |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for k in sorted(results, key=lambda k: (ARMS.index(results[k]["arm"]), results[k]["seed"])):
        r, f = results[k], results[k]["final"]
        maj = next((k for k in f if k.startswith("maj@") and not k.endswith("_se")), None)
        sampled = (f"{f[maj]:.3f} +- {f[maj + '_se']:.3f} ({maj}) | {f['pass@1']:.3f} +- {f['pass@1_se']:.3f}"
                   if maj else "- | -")  # --samples 0: greedy alone
        lines.append(f"| {r['arm']} | {r['seed']} | {f['greedy']:.3f} +- {f['greedy_se']:.3f} | {sampled} | "
                     f"{r['cpu_s']:.0f} | {r['wall_s']:.0f} |")
    return "\n".join(lines)


def plot(results: dict, start: float, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    colours = dict(zip(ARMS, ("tab:blue", "tab:grey", "tab:red", "tab:purple", "tab:green", "tab:orange")))
    labelled = set()
    for r in results.values():
        ax.plot(*zip(*r["curve"]), marker="o", color=colours[r["arm"]], alpha=0.8, ls="-" if r["seed"] == 0 else "--",
                label=None if r["arm"] in labelled else r["arm"])
        labelled.add(r["arm"])
    ax.axhline(start, ls=":", color="black", label=f"SFT start {start:.3f}")
    ax.set_xlabel("training CPU seconds per thread (evaluations not counted); seed 0 solid, seed 1 dashed")
    ax.set_ylabel("held-out accuracy (greedy)")
    arms = [a for a in ARMS if any(r["arm"] == a for r in results.values())]
    ax.set_title(f"From one SFT start on MAWPS/ASDiv-A: {', '.join(arms)}")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--start", required=True, help="the SFT start: a recipe's 1-sft/final")
    ap.add_argument("--data", required=True, help="the data set the start was fine-tuned on (its held-out split)")
    ap.add_argument("--preset", default="gsm8k")
    ap.add_argument("--arm", choices=ARMS, help="run one arm (in this process) and write its JSON")
    ap.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--budget", type=float, default=480.0, help="training CPU seconds per thread, each arm")
    ap.add_argument("--every", type=float, default=160.0, help="dpo, rest: CPU seconds per thread between curve points")
    ap.add_argument("--every-rounds", type=int, default=8, help="RL arms: rounds between curve points")
    ap.add_argument("--teacher", default="", help="distill: the teacher (default: the best arm's seed-0 model)")
    ap.add_argument("--out", default="runs/recipe_compare")
    ap.add_argument("--samples", type=int, default=8, help="samples per held-out prompt for maj@n and pass@1")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a knob for every arm, over the recipe's (e.g. tasks.difficulty_file=RUN/1-sft/difficulty.jsonl,"
                         " the recipe's easy-first prior)")
    ap.add_argument("--start-score", type=float, default=None,
                    help="the start's held-out greedy accuracy, already measured (the recipe's 1-sft/eval): the RL "
                         "arms then do not score it again each")
    a = ap.parse_args()
    a.start, a.data = os.path.abspath(a.start), os.path.abspath(a.data)
    os.makedirs(a.out, exist_ok=True)
    if a.arm:
        r = run_arm(a, a.arm, a.seed)
        with open(os.path.join(a.out, f"{a.arm}-{a.seed}.json"), "w") as f:
            json.dump(r, f)
        return
    from machine import describe

    print(describe(), flush=True)
    results = {}
    for arm in a.arms:
        for seed in a.seeds:
            key, path = f"{arm}-{seed}", os.path.join(a.out, f"{arm}-{seed}.json")
            if not os.path.exists(path):
                teacher = a.teacher
                if arm == "distill" and not teacher:
                    teacher = os.path.join(a.out, f"{best_arm(results)}-0", "final")
                subprocess.run([sys.executable, __file__, "--start", a.start, "--data", a.data, "--preset", a.preset,
                                "--arm", arm, "--seed", str(seed), "--budget", str(a.budget), "--every",
                                str(a.every), "--every-rounds", str(a.every_rounds), "--teacher", teacher,
                                "--out", a.out, "--samples", str(a.samples), *[x for k in a.set for x in ("--set", k)],
                                *(["--start-score", str(a.start_score)]
                                                  if a.start_score is not None else [])], check=True)
            with open(path) as f:
                results[key] = json.load(f)
    start = next(iter(results.values()))["curve"][0][1]
    text = table(results)
    with open(os.path.join(a.out, "summary.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump({"start": a.start, "budget": a.budget, "runs": results}, f, indent=1)
    plot(results, start, os.path.join(a.out, "recipe_compare.png"))
    print(text)


if __name__ == "__main__":
    main()
