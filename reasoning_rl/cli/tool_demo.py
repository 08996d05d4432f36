"""`reasoning-rl demo --model smollm2-135m-instruct --tools`: a real chat model learns to use the sandboxed Python tool.

Three steps, in one run directory:
  1. data: generated tool problems (task/embedded/tool_problems.py): training and held-out prompts at twice the
     traces' scale (bigger numbers than the cold start saw), the `easy` family of one-digit sums mixed into both;
  2. the cold start: tool traces (data/tool_traces.py: a plan, a ```python block, the sandbox's real output at loss
     mask 0, the answer boxed; the `easy` sums answered in one turn without a call), then SFT of every weight on
     them (`sft.*`), saved in cold/;
  3. GRPO with the Python tool from the cold-started model (LoRA, `grpo.environment=python`), held-out greedy
     episodes before and after: accuracy with its standard error, tool calls per episode, the share of calls that
     ran without error and of answers equal to the tool's output.

This is arm (d) of `bench/tool_cold_start.py --direct easy`, which runs it beside its controls (GRPO without the
tool, GRPO with it from the base model, the cold start alone, the cold start then shuffled rewards) over seeds; the
figures are in docs/results.md. Not here: the word-problem demo without a tool (demo.py), the measurement of the
controls.
"""
from __future__ import annotations

import dataclasses
import json
import os
import time

from ..config.sections import Config
from ..data.run_dir import new_run_dir

# A real model's tool demo: applied over the defaults and a --config file, under the user's --set. GRPO as the
# word-problem demo (LoRA r 16, lr 3e-4); the cold start a full fine-tune at batch 8, lr 2e-4 (docs/results.md).
TOOL_DEMOS: dict[str, tuple[str, ...]] = {
    "smollm2-135m-instruct": (
        "model.name_or_path=smollm2-135m-instruct", "model.lora.r=16", "model.lora.alpha=32",
        "grpo.environment=python", "grpo.max_turns=3", "grpo.max_tool_calls=2", "grpo.max_episode_tokens=384",
        "generation.max_tokens=128", "eval.size=200", "grpo.steps=12", "grpo.eval_every=12",
        "grpo.prompts_per_step=4", "grpo.group_size=8", "grpo.max_refill_rounds=0", "grpo.warmup_steps=0",
        "grpo.lr=3e-4", "grpo.checkpoint_every=0",
        "sft.steps=100", "sft.batch_size=8", "sft.lr=2e-4", "sft.warmup_steps=10", "sft.log_every=10"),
}


def write_problems(out: str, n_train: int, n_eval: int, seed: int) -> tuple[str, str]:
    """Training and held-out prompts (JSONL: prompt, answer, family) at scale 2, the five tool families and `easy`
    in turn; the held-out ones are never trained on (distinct prompts)."""
    from ..task.embedded.tool_problems import EASY, FAMILIES, problems

    rows = problems(n_train + n_eval, seed + 100, scale=2, families=(*FAMILIES, EASY))
    paths = os.path.join(out, "train.jsonl"), os.path.join(out, "held_out.jsonl")
    for path, part in zip(paths, (rows[:n_train], rows[n_train:])):
        with open(path, "w") as f:
            f.writelines(json.dumps({"prompt": p.prompt, "answer": str(p.answer), "family": p.family}) + "\n"
                         for p in part)
    return paths


def cold_start(cfg: Config, n_traces: int, out: str, log=print) -> str:
    """Traces of `n_traces` generated problems (scale 1, the five tool families and `easy`) in the model's chat
    template, then SFT of every weight on them (cfg.sft; the tool's output masked off): the folder of the
    cold-started model. The `easy` one-digit sums are written direct, one turn without a call, so the cold start
    also shows when calling does not pay (measured better than calls on everything: docs/results.md)."""
    from ..data.tool_traces import end_of_turn, write_traces
    from ..data.verified import read_targets
    from ..models.load import load_policy
    from ..models.lora import save_final
    from ..models.sft import train_sft
    from ..task.embedded.tool_problems import EASY, FAMILIES, problems

    full = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, lora=dataclasses.replace(cfg.model.lora,
                                                                                                   r=0)))
    model, tok = load_policy(full)
    summary = write_traces(problems(n_traces, cfg.seed, 1, families=(*FAMILIES, EASY)), tok,
                           os.path.join(out, "traces"), end_ids=end_of_turn(tok) or None, direct=(EASY,))
    log(f"== {summary.written} tool traces written ({summary.left_out} left out: an output or answer that did not "
        f"check) -> {summary.path}")
    targets, _ = read_targets(summary.path)
    rows = [{"prompt": t.prompt, "ids": list(t.ids), "loss_mask": list(t.loss_mask)} for t in targets]  # rendered
    log(f"== cold start: SFT of every weight, {cfg.sft.steps} steps of {cfg.sft.batch_size} traces")
    train_sft(full, model, tok, rows, log=log)
    return save_final(out, model, tok, name="cold")


def run_tool_demo(cfg: Config, n_traces: int = 400, log=print) -> dict:
    """The cold start, then GRPO with the Python tool; held-out before (the cold-started model) and after."""
    from ..trainers.grpo import train_grpo
    from ..data.tool_traces import INSTRUCTION

    if not cfg.output_dir:
        cfg = dataclasses.replace(cfg, output_dir=new_run_dir("demo"))
    out = cfg.output_dir
    os.makedirs(out, exist_ok=True)
    log(f"== run directory: {out}")
    t0 = time.time()
    train, held = write_problems(out, max(n_traces, cfg.grpo.steps * cfg.grpo.prompts_per_step), cfg.eval.size,
                                 cfg.seed)
    cold = cold_start(cfg, n_traces, out, log)
    log(f"== cold start done in {time.time() - t0:.0f} s: {cold}")
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, name_or_path=cold),
                              tasks=dataclasses.replace(cfg.tasks, source=train, test_split=held,
                                                        instruction=cfg.tasks.instruction or INSTRUCTION))
    log(f"== GRPO with the Python tool from the cold-started model, {cfg.grpo.steps} rounds")
    history, _, _ = train_grpo(cfg, log=log)
    with open(os.path.join(out, "metrics.jsonl")) as f:
        first = json.loads(f.readline())
    last = [h for h in history if "eval/accuracy" in h][-1]
    n = cfg.eval.size
    keys = ("accuracy", "tool_calls", "tool_ok", "answer_is_tool_output")
    res = {k: (first.get(f"eval/{k}"), last.get(f"eval/{k}")) for k in keys}
    a0, a1 = res["accuracy"]
    se = lambda p: (p * (1 - p) / n) ** 0.5  # noqa: E731
    fmt = lambda p: "-" if p is None else f"{p:.2f}"  # noqa: E731  (no call made: no share)
    log(f"== held-out accuracy ({n} problems, greedy episodes with the tool): cold start {a0:.3f} +- {se(a0):.3f} "
        f"-> after GRPO {a1:.3f} +- {se(a1):.3f} ({100 * (a1 - a0):+.1f} points)")
    log("   tool calls per episode {} -> {}; calls without error {} -> {}; answers equal to the tool's output {} -> {}"
        .format(*(fmt(x) for k in keys[1:] for x in res[k])))
    log(f"== {time.time() - t0:.0f} s in all (cold start included); the controls: bench/tool_cold_start.py")
    return {"before": {k: v[0] for k, v in res.items()}, "after": {k: v[1] for k, v in res.items()},
            "seconds": time.time() - t0, "cold": cold}
