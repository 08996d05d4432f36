"""Our distillation step against TRL's `DistillationTrainer` (use_vllm=False), side by side in one run.

Both train the same student from the same checkpoint against the same teacher on the same prompts: B prompts, each G
times in a step (TRL's batch holds each prompt G times: it samples one completion a row), completions of at most the
same length at the same temperature, full fine-tuning at the same learning rate, the same torch threads, the batch in
one forward and backward pass (`distill.length_buckets=1`; TRL: no accumulation), no activation checkpointing (TRL's
default is on: --trl-checkpointing times it so). TRL's loss is the generalized JSD over the whole vocabulary (its
`beta`, 1 = reverse KL); ours is timed twice: with the same loss (`distill.loss=jsd`) and with our default, the
sampled tokens' reverse-KL advantage (`distill.loss=reverse_kl`, one teacher log-prob a token). Printed: seconds per
step (median over the steps after the first), the ratios, and where it ran.

    .venv/bin/python bench/distill_vs_trl.py --teacher runs/teacher/final [--steps 5] [--prompts 4] [--group 8]
    .venv/bin/python bench/distill_vs_trl.py --steps 4     # the base model as its own teacher: the same arithmetic

The step's cost does not depend on what the teacher learned, only on its shape: on a fresh machine the default
teacher is the student's own base model (a name, folder or GGUF file, resolved as `model.name_or_path` is).

Not here: held-out accuracy (bench/distill_compare.py measures what each method learns).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from grpo_vs_trl import INSTRUCTION, WORD, add_trl_checkpointing, step_clock  # noqa: E402 - as the GRPO bench


def run_trl(student: str, teacher: str, rows: list[dict], a, out: str) -> list[float]:
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import DistillationConfig, DistillationTrainer

    times, clock = step_clock()
    tok = AutoTokenizer.from_pretrained(student)
    picked = rows[: a.prompts * a.steps]
    # each prompt G times in a row: a step's batch is B prompts x G samples, as ours
    ds = Dataset.from_list([{"prompt": [{"role": "user", "content": f"{r['prompt']}\n{INSTRUCTION}"}]}
                            for i in range(0, len(picked), a.prompts) for r in picked[i:i + a.prompts]
                            for _ in range(a.group)])
    args = DistillationConfig(output_dir=out, per_device_train_batch_size=a.prompts * a.group,
                              gradient_accumulation_steps=1, max_steps=a.steps, max_completion_length=a.max_tokens,
                              learning_rate=a.lr, lr_scheduler_type="constant", warmup_steps=0, temperature=1.0,
                              top_p=1.0, beta=1.0, logging_steps=1, save_strategy="no", report_to="none", use_cpu=True,
                              bf16=False, seed=a.seed, weight_decay=0.0, max_grad_norm=1.0, shuffle_dataset=False,
                              gradient_checkpointing=a.trl_checkpointing)
    trainer = DistillationTrainer(model=student, teacher_model=teacher, args=args, train_dataset=ds,
                                  processing_class=tok, callbacks=[clock])
    trainer.train()
    return times


def run_ours(student: str, teacher: str, loss: str, a, out: str) -> list[float]:
    from reasoning_rl import config
    from reasoning_rl.config import Config
    from reasoning_rl.trainers.distill import train_distill

    cfg = config.load(Config, overrides=[
        *WORD, f"tasks.instruction={INSTRUCTION}", f"num_threads={a.threads}", f"output_dir={out}",
        f"model.name_or_path={student}", f"distill.teacher={teacher}", f"seed={a.seed}", f"distill.steps={a.steps}",
        f"distill.prompts_per_step={a.prompts}", f"distill.group_size={a.group}", f"generation.max_tokens={a.max_tokens}",
        "generation.temperature=1.0", f"distill.lr={a.lr}", "distill.warmup_steps=0", f"distill.loss={loss}",
        "distill.jsd_beta=1.0", f"distill.minibatch_size={a.prompts * a.group}", f"distill.eval_every={a.steps + 1}",
        "distill.length_buckets=1",  # the batch in one forward and backward pass, as TRL's (no accumulation)
        "distill.eval_at_start=false", "distill.eval_at_end=false", "distill.checkpoint_every=0",
        "distill.verifier_workers=1", f"cpu_allocator={a.allocator}"])
    history, _, _ = train_distill(cfg, log=lambda *_: None)
    return history


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--student", default="smollm2-135m-instruct")
    ap.add_argument("--teacher", default="smollm2-135m-instruct",
                    help="the teacher: a name, folder or GGUF file with the student's tokenizer (default: the base "
                         "model)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="torch threads of each (0 = every core)")
    ap.add_argument("--allocator", default="reuse", choices=["reuse", "system"], help="our runs' cpu_allocator "
                    "(TRL runs first, on glibc's defaults)")
    add_trl_checkpointing(ap)
    a = ap.parse_args()
    import torch

    from machine import describe

    from reasoning_rl import config
    from reasoning_rl.config import Config
    from reasoning_rl.models.device import resolve_threads
    from reasoning_rl.models.sources import resolve
    from reasoning_rl.task.embedded.arithmetic import make_rows

    a.threads = resolve_threads(a.threads, a.student)
    torch.set_num_threads(a.threads)
    print(describe(), flush=True)
    student, teacher = resolve(a.student), resolve(a.teacher)  # TRL loads folders, not our names
    rows, _ = make_rows(config.load(Config, overrides=WORD).tasks)
    with tempfile.TemporaryDirectory() as tmp:
        # TRL first, on glibc's allocator as its users have it; ours then sets its own (cpu_allocator)
        trl = run_trl(student, teacher, rows, a, os.path.join(tmp, "trl"))
        runs = {loss: run_ours(student, teacher, loss, a, os.path.join(tmp, loss)) for loss in ("reverse_kl", "jsd")}
    ours = {loss: [h["time/step"] for h in hist] for loss, hist in runs.items()}
    med = {k: statistics.median(v[1:]) for k, v in {**ours, "trl": trl}.items()}
    print(f"\ndistillation of {a.student} from {a.teacher}, {a.steps} steps of {a.prompts} prompts x {a.group} "
          f"samples, <= {a.max_tokens} tokens, {a.threads} threads each; TRL's activation checkpointing "
          f"{'on (its default)' if a.trl_checkpointing else 'off, as ours'}")
    print(f"{'step':>4} {'ours reverse_kl s':>18} {'ours jsd s':>11} {'trl s':>8}")
    for i in range(a.steps):
        print(f"{i + 1:>4} {ours['reverse_kl'][i]:>18.2f} {ours['jsd'][i]:>11.2f} {trl[i]:>8.2f}")
    print(f"median s/step: ours reverse_kl {med['reverse_kl']:.2f}, ours jsd {med['jsd']:.2f}, TRL {med['trl']:.2f}; "
          f"TRL / ours: {med['trl'] / med['reverse_kl']:.2f}x (reverse_kl), {med['trl'] / med['jsd']:.2f}x (jsd, "
          "the same loss as TRL's; goal >= 2x)")
    for loss, hist in runs.items():  # where our step goes: sampling, verification, the teacher's scoring and update
        parts = {k: statistics.median(h[f"time/{k}"] for h in hist[1:]) for k in ("rollout", "verify", "update")}
        print(f"ours {loss}: median rollout {parts['rollout']:.2f} s, verify {parts['verify']:.2f} s, update (the "
              f"teacher's scoring included) {parts['update']:.2f} s")
    print(f"our cpu_allocator: {a.allocator}; TRL's: glibc's defaults (it ran first)")


if __name__ == "__main__":
    main()
