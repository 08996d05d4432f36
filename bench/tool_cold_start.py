"""A real model that learns to use the sandboxed Python tool: a cold start on generated tool traces, then GRPO with the
tool, against GRPO without it, GRPO with it from the base model, the cold start alone, and the cold start then GRPO
with shuffled rewards (the control). SmolLM2-135M-Instruct, 2 cores.

    .venv/bin/python bench/tool_cold_start.py [--steps 16] [--traces 400] [--sft-steps 120] [--sft-batch 8] \\
        [--sft-lr 2e-4] [--eval 200] [--arms a b c d e] [--seeds 0] [--out runs/tool_cold_start] [--cold DIR] \\
        [--direct easy]

Data: problems of task/embedded/tool_problems.py; the traces (`reasoning-rl traces`) at scale 1, training and
held-out prompts at scale 2 (bigger numbers than the traces had), plus the `easy` family mixed into both (a model
that learned when calling pays should call less there). Arms, each from the same base:
  (a) GRPO without the tool              (b) GRPO with the tool from the base model
  (c) the cold start alone (`sft --samples` on the traces)
  (d) the cold start, then GRPO with the tool          (e) the cold start, then GRPO with shuffled rewards
Held-out: greedy episodes (with the tool where the arm has it; (a) without), `--eval` prompts, accuracy with its
standard error and tool calls per episode. Writes summary.json and prints a table.
Per family (`by_family`): episodes, tool calls per episode and pass rate over the last third of each arm's training
rounds, read from its archive (the held-out evaluation keeps no samples). Held-out tool figures: calls per episode,
the share of calls that ran without error, and of answers equal to a tool's output (eval/tool_ok,
eval/answer_is_tool_output). Without (c) among the arms, (c) is read from (d)'s step-0 evaluation (the same model).
Not here: TRL (bench/tools_vs_trl.py).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from reasoning_rl.data.tool_traces import INSTRUCTION  # noqa: E402  (the traces' own instruction)
from reasoning_rl.task.embedded.tool_problems import FAMILIES  # noqa: E402
TOOL = ["grpo.environment=python", "grpo.max_turns=3", "grpo.max_tool_calls=2", "grpo.max_episode_tokens=384"]
# GRPO as the real model's demo runs it (cli/demo.py): LoRA r 16, lr 3e-4, no warm-up
LORA = ["--set", "model.lora.r=16", "--set", "model.lora.alpha=32", "--set", "grpo.lr=3e-4", "--set",
        "grpo.warmup_steps=0"]


def cli(*args: str, log: str) -> float:
    t = time.time()
    with open(log, "a") as f:
        r = subprocess.run([sys.executable, "-m", "reasoning_rl", *args], cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)
    if r.returncode:
        raise SystemExit(f"{' '.join(args[:3])} failed: see {log}")
    return time.time() - t


def data(out: str, n_train: int, n_eval: int, seed: int) -> tuple[str, str]:
    from reasoning_rl.task.embedded.tool_problems import problems

    fams = (*FAMILIES, "easy")
    rows = problems(n_train + n_eval, seed + 100, scale=2, families=fams)
    train, held = os.path.join(out, "train.jsonl"), os.path.join(out, "held.jsonl")
    for path, part in ((train, rows[:n_train]), (held, rows[n_train:])):
        with open(path, "w") as f:
            f.writelines(json.dumps({"prompt": p.prompt, "answer": str(p.answer), "family": p.family}) + "\n"
                         for p in part)
    return train, held


def by_family(run_dir: str, train: str, last: float = 1 / 3) -> dict:
    """{family: (episodes, tool calls per episode, pass rate)} over the training episodes of the last `last` share
    of the run's rounds (its archive; sampled at the run's temperature): whether the model calls less where it can
    do the sum in its head (`easy`). The held-out evaluation keeps no samples, so the archive is where this is read."""
    family = {}
    with open(train) as f:
        for line in f:
            row = json.loads(line)
            family[row["prompt"]] = row["family"]
    rows = [json.loads(x) for x in open(os.path.join(run_dir, "archive.jsonl"))]
    if not rows:
        return {}
    first = max(r["step"] for r in rows) * (1 - last)
    out: dict = {}
    for r in rows:
        if r["step"] > first or first == 0:
            fam = family.get(r["task"]["raw"], "?")
            n, calls, passed = out.get(fam, (0, 0, 0))
            out[fam] = (n + 1, calls + sum(1 for t in r.get("turns", []) if t.get("call")),
                        passed + (r["verdicts"]["math"]["status"] == "correct"))
    return {k: (n, round(c / n, 2), round(p / n, 3)) for k, (n, c, p) in sorted(out.items())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--traces", type=int, default=400)
    ap.add_argument("--sft-steps", type=int, default=120)
    ap.add_argument("--sft-batch", type=int, default=8, help="traces per SFT step (64 cost about 130 s a step on 2 "
                                                              "cores)")
    ap.add_argument("--sft-lr", type=float, default=2e-4, help="the cold start's peak learning rate (full fine-tune)")
    ap.add_argument("--eval", type=int, default=200)
    ap.add_argument("--arms", nargs="+", default=list("abcde"), choices=list("abcde"))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--out", default="runs/tool_cold_start")
    ap.add_argument("--direct", default="", help="families answered without a call in the traces (easy: the cold "
                                                "start then also shows when not to call; the traces hold them too)")
    ap.add_argument("--cold", default="", help="an existing cold-start folder of this seed to start (c)-(e) from "
                                                "(its time then not counted); one seed only")
    a = ap.parse_args()
    if a.cold and len(a.seeds) != 1:
        raise SystemExit(f"--cold: one cold start serves one seed; got --seeds {a.seeds}")
    from bench.machine import describe

    print(describe(), flush=True)  # where this ran: figures from two machines side by side
    results = {}
    for seed in a.seeds:
        out = os.path.abspath(os.path.join(a.out, f"seed{seed}"))
        os.makedirs(out, exist_ok=True)
        log = os.path.join(out, "log.txt")
        train, held = data(out, 400, a.eval, seed)
        base = ["--set", "model.name_or_path=smollm2-135m-instruct", "--set", "num_threads=0", "--set", f"seed={seed}"]
        cold = os.path.abspath(a.cold) if a.cold else os.path.join(out, "cold")
        t_cold = 0.0
        if set(a.arms) & set("cde") and not a.cold:
            direct = ["--families", ",".join((*FAMILIES, *a.direct.split(","))), "--direct", a.direct] if a.direct \
                else []
            t_cold += cli("traces", "-n", str(a.traces), "-o", os.path.join(out, "traces"), *direct, *base, log=log)
            t_cold += cli("sft", "--samples", os.path.join(out, "traces", "samples.jsonl"), "--steps",
                          str(a.sft_steps), "--output", cold, "--dataset", held, "--set", "eval.size=4",
                          "--set", f"sft.batch_size={a.sft_batch}", "--set", f"sft.lr={a.sft_lr}",
                          "--set", "sft.warmup_steps=10", "--set", "sft.log_every=10", *base, log=log)
        for arm in a.arms:
            model = cold if arm in "cde" else "smollm2-135m-instruct"
            steps = 0 if arm == "c" else a.steps
            extra = ([] if arm == "a" else [f for t in TOOL for f in ("--set", t)])
            if arm == "e":
                extra += ["--set", "grpo.control=shuffled_rewards"]
            run_dir = os.path.join(out, f"arm_{arm}")
            t = cli("train", "grpo", "--dataset", train, "--set", f"tasks.test_split={held}", "--set",
                    f"model.name_or_path={model}", "--set", "num_threads=0", "--set", f"seed={seed}",
                    "--set", f"tasks.instruction={INSTRUCTION}", "--set", f"output_dir={run_dir}",
                    "--set", f"grpo.steps={max(1, steps)}", "--set", f"eval.size={a.eval}",
                    "--set", f"grpo.eval_every={max(1, steps)}", "--set", "grpo.prompts_per_step=4",
                    "--set", "grpo.group_size=8", "--set", "generation.max_tokens=128",
                    "--set", "grpo.checkpoint_every=0", "--set", "grpo.max_refill_rounds=0",
                    *LORA, *(["--set", "grpo.lr=0"] if arm == "c" else []), *extra, log=log)
            m = [json.loads(x) for x in open(os.path.join(run_dir, "metrics.jsonl"))]
            evals = [x for x in m if "eval/accuracy" in x]
            results[f"{arm}-{seed}"] = {"start": evals[0]["eval/accuracy"], "end": evals[-1]["eval/accuracy"],
                                        "end_tool_calls": evals[-1].get("eval/tool_calls"),
                                        "end_tool_ok": evals[-1].get("eval/tool_ok"),
                                        "end_answer_is_tool_output": evals[-1].get("eval/answer_is_tool_output"),
                                        "seconds": round(t + (t_cold if arm in "cde" else 0), 1),
                                        "by_family": by_family(run_dir, train)}
            print(f"[{arm} seed {seed}] {results[f'{arm}-{seed}']}", flush=True)
        if "d" in a.arms and "c" not in a.arms:  # (c) is (d)'s first evaluation: the cold-started model, untrained
            d = results[f"d-{seed}"]
            results[f"c-{seed}"] = {"start": d["start"], "end": d["start"], "from": "d's step-0 evaluation",
                                    "seconds": round(t_cold, 1)}
        with open(os.path.join(a.out, "summary.json"), "w") as f:
            json.dump(results, f, indent=1)
    print(f"\n{'arm':<6} {'seed':>4} {'held-out start -> end':>24} {'calls/ep':>9} {'calls ok':>9} "
          f"{'ans=out':>8} {'s':>7}")
    share = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731  (no call made: no share)
    for k, r in sorted(results.items()):
        arm, seed = k.split("-")
        se = math.sqrt(r["end"] * (1 - r["end"]) / a.eval)
        print(f"{arm:<6} {seed:>4} {r['start']:>10.3f} -> {r['end']:.3f} +- {se:.3f} "
              f"{share(r.get('end_tool_calls')):>9} {share(r.get('end_tool_ok')):>9} "
              f"{share(r.get('end_answer_is_tool_output')):>8} {r['seconds']:>7.0f}")
    for arm in sorted({k.split("-")[0] for k in results}):  # over seeds: mean and spread of the held-out end
        ends = [r["end"] for k, r in results.items() if k.split("-")[0] == arm]
        mean = sum(ends) / len(ends)
        sd = math.sqrt(sum((x - mean) ** 2 for x in ends) / (len(ends) - 1)) if len(ends) > 1 else 0.0
        print(f"arm {arm}: held-out end over {len(ends)} seed(s) {mean:.3f} (sd {sd:.3f}; min {min(ends):.3f}, "
              f"max {max(ends):.3f})")


if __name__ == "__main__":
    main()
