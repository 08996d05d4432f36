"""GRPO against a real vLLM CPU server with stale weights: rollout correction on and off, same seed, in one run.

    .venv/bin/python bench/offpolicy_vllm.py [--steps 40] [--push-every 4] [--seeds 0] [--out runs/offpolicy]

Starts `vllm serve` (`.venv-vllm`, `make vllm-env`) on the embedded default's SFT checkpoint, then trains
GRPO with `grpo.engine=openai` and `grpo.push_every` rounds between weight pushes, so samples come from
weights up to push_every - 1 updates old, once with `rollout_correction=none` and once with the default
for this engine (`auto` = token_tis). Prints, per run: the mismatch KL between the server's log-probs and
the trainer's (every round), the share of truncated tokens, the reward and the held-out accuracy curve,
and their ratio/difference against the uncorrected run. Writes metrics per run and a PNG of the curves.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(cfg_overrides, url, out, log):
    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.trainers.grpo import train_grpo

    cfg = config.load(Config, overrides=cfg_overrides + ["grpo.engine=openai", f"grpo.engine_url={url}",
                                                         "grpo.engine_model=tiny", f"output_dir={out}"])
    history, _, _ = train_grpo(cfg, log=log)
    with open(os.path.join(out, "metrics.jsonl")) as f:
        acc0 = json.loads(f.readline())["eval/accuracy"]
    return acc0, history


def _summary(acc0, history) -> dict:
    def mean(key, rows=history):
        vals = [h[key] for h in rows if key in h]
        return sum(vals) / len(vals) if vals else float("nan")

    return {"heldout": [(0, acc0)] + [(h["step"], h["eval/accuracy"]) for h in history if "eval/accuracy" in h],
            "mismatch_kl_mean": mean("rollout/mismatch_kl"),
            "mismatch_kl_max": max(h.get("rollout/mismatch_kl", 0.0) for h in history),
            "mismatch_kl_by_staleness": {s: mean("rollout/mismatch_kl", [h for h in history
                                                                          if h["rollout/staleness"] == s])
                                         for s in sorted({h["rollout/staleness"] for h in history})},
            "is_truncated_mean": mean("rollout/is_truncated"), "is_weight_max": max(
                h.get("rollout/is_weight_max", 1.0) for h in history),
            "reward_first5": mean("reward/mean", history[:5]), "reward_last5": mean("reward/mean", history[-5:]),
            "wall_s": round(sum(h["time/step"] for h in history), 1)}


def _plot(runs: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for name, (acc0, history) in runs.items():
        steps = [h["step"] for h in history]
        axes[0].plot(steps, [h.get("rollout/mismatch_kl", float("nan")) for h in history], label=name, lw=1)
        axes[1].plot(steps, [h["reward/mean"] for h in history], label=name, lw=1)
        pts = [(0, acc0)] + [(h["step"], h["eval/accuracy"]) for h in history if "eval/accuracy" in h]
        axes[2].plot(*zip(*pts), marker="o", label=name)
    for ax, title in zip(axes, ["mismatch KL (engine vs trainer, per token)", "reward", "held-out accuracy"]):
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--push-every", type=int, default=4)
    ap.add_argument("--seeds", default="0", help="comma-separated; each seed runs both arms")
    ap.add_argument("--arms", default="none,auto", help="rollout_correction values to compare")
    ap.add_argument("--out", default="runs/offpolicy")
    a = ap.parse_args()
    from bench.machine import describe

    print(describe(), flush=True)  # where this ran: figures from two machines side by side
    import torch

    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.rollout.vllm_server import local_vllm_server
    from reasoning_rl.models.sft import build_sft_checkpoint

    torch.set_num_threads(1)
    vpy = os.path.abspath(".venv-vllm/bin/python")
    if not os.path.exists(vpy):
        sys.exit("bench/offpolicy_vllm.py: no .venv-vllm (run `make vllm-env`)")
    os.makedirs(a.out, exist_ok=True)
    sft = build_sft_checkpoint(config.load(Config))
    base = [f"grpo.steps={a.steps}", f"grpo.push_every={a.push_every}", "grpo.eval_every=10", "eval.size=200",
            "grpo.checkpoint_every=0"]
    runs, table = {}, {}
    with tempfile.TemporaryDirectory() as tmp, \
            local_vllm_server(vpy, sft, "tiny", os.path.join(a.out, "server.log")) as url:
        for seed in [int(s) for s in a.seeds.split(",")]:
            for arm in a.arms.split(","):
                name = f"{arm} seed {seed}"
                out = os.path.join(tmp, name.replace(" ", "_"))
                print(f"== {name}", flush=True)
                runs[name] = _run(base + [f"seed={seed}", f"grpo.rollout_correction={arm}"], url, out,
                                  log=lambda s: print(s, flush=True) if "held-out" in s else None)
                table[name] = _summary(*runs[name])
                with open(os.path.join(a.out, f"{name.replace(' ', '_')}.jsonl"), "w") as f:
                    for h in runs[name][1]:
                        f.write(json.dumps(h) + "\n")
    _plot(runs, os.path.join(a.out, "offpolicy.png"))
    print(json.dumps(table, indent=1))
    for seed in [int(s) for s in a.seeds.split(",")]:
        ref = table.get(f"none seed {seed}")
        for arm in a.arms.split(","):
            r = table[f"{arm} seed {seed}"]
            d = f" (vs none: held-out {r['heldout'][-1][1] - ref['heldout'][-1][1]:+.3f}, wall x" \
                f"{r['wall_s'] / ref['wall_s']:.2f})" if ref and arm != "none" else ""
            print(f"seed {seed} {arm:>5}: mismatch KL mean {r['mismatch_kl_mean']:.4f} max {r['mismatch_kl_max']:.4f}, "
                  f"truncated {r['is_truncated_mean']:.3f}, reward {r['reward_first5']:.3f} -> {r['reward_last5']:.3f}, "
                  f"held-out " + " ".join(f"{s}:{x:.3f}" for s, x in r["heldout"]) + d)
    print(f"plot: {os.path.join(a.out, 'offpolicy.png')}")


if __name__ == "__main__":
    main()
