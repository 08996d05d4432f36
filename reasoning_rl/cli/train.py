"""`reasoning-rl train grpo|ppo|distill|prm|dpo` and `reasoning-rl sft`: the commands that train a model, each
parser beside its function.

`train`: the config and the data checked before anything loads (the model, a distillation teacher, DPO's pairs), the
run directory claimed, then the trainer (trainers/), one line of results. `sft`: on verified samples (`--samples`),
on a task's gold completions (a model other than tiny), or the embedded tiny model's cached warm start. Heavy
imports happen inside the functions, so building the parser stays fast.

Not here: the parser's root and the other commands (cli/commands.py), the data commands (cli/data.py), the demo.
"""
from __future__ import annotations

import sys

from .args import (add_config_args, add_run_dir_args, add_task_args, check_model, claim_output_dir, cmd,
                   load_config, load_task, Parser, POS_INT, set_threads as _set_threads)
from .data import _sft_on_target
from ..errors import UserError


def cmd_sft(args) -> int:
    import os

    cfg = load_config(args)
    if args.samples:
        from .data import _sft_on_samples

        return _sft_on_samples(cfg, args)
    if cfg.model.name_or_path != "tiny":
        return _sft_on_target(cfg, args)
    if args.resume:
        raise UserError("sft --resume: the tiny model's cached warm start is built whole or not at all; --resume goes "
                        "with --samples or a model other than tiny, and --output")
    _set_threads(cfg)
    from ..eval import held_out
    from ..models.load import load_policy
    from ..models.sft import build_sft_checkpoint

    task = load_task(cfg)
    path = build_sft_checkpoint(cfg, force=args.force)
    model, tok = load_policy(cfg)
    test = task.test
    acc = held_out.configured(cfg, task, model, tok, test[: cfg.eval.size])["accuracy"]
    if args.output:
        os.makedirs(args.output, exist_ok=True)
        model.save_pretrained(args.output)
        tok.save_pretrained(args.output)
        path = args.output
    print(f"sft checkpoint: {path}")
    print(f"held-out accuracy: {acc:.3f} ({min(len(test), cfg.eval.size)} prompts, greedy)")
    return 0


def cmd_train(args) -> int:
    """`train grpo|ppo|distill|dpo`: the config and the data checked before anything loads, the run directory
    claimed, then the trainer; one line of results."""
    if getattr(args, "teacher", None):
        args.overrides = [*args.overrides, f"distill.teacher={args.teacher}"]
    cfg = load_config(args)
    check_model(cfg)
    if args.algorithm == "distill":
        from ..models.load import load_tokenizer
        from ..models.teacher import check_teacher

        check_teacher(cfg, load_tokenizer(cfg))
    pairs = None
    if args.algorithm == "dpo" and args.pairs:
        from .verify import read_rows
        from ..trainers.dpo import check_pairs

        pairs = check_pairs(read_rows(args.pairs), f"--pairs {args.pairs!r}")
    if getattr(args, "resume", False) and cfg.output_dir:  # a finished run: nothing to do, or how it may be extended
        from ..trainers.checkpoint import Finished, check_finished

        try:
            check_finished(cfg.output_dir, args.algorithm, getattr(cfg, args.algorithm).steps)
        except Finished as e:
            print(f"reasoning-rl train {args.algorithm} --resume: {e}", file=sys.stderr)
            return 0
    cfg = claim_output_dir(cfg, args, args.algorithm)
    if args.algorithm == "dpo":
        from ..trainers.dpo import train_dpo

        r = train_dpo(cfg, pairs, backend=args.backend)
        if r.accuracy_after is not None:  # rank 0 reports
            print(f"dpo ({r.backend}, {r.pairs} pairs): margin {r.metrics['rewards/margins']:+.4f}  pair accuracy "
                  f"{r.metrics['rewards/accuracies']:.3f}  held-out accuracy {r.accuracy_before:.3f} -> "
                  f"{r.accuracy_after:.3f}")
        return 0
    from ..trainers.distill import train_distill
    from ..trainers.grpo import train_grpo
    from ..trainers.ppo import train_ppo

    if args.resume_changed and not args.resume:
        raise UserError("--resume-changed goes with --resume")
    from ..trainers.checkpoint import Finished

    trainer = {"grpo": train_grpo, "ppo": train_ppo, "distill": train_distill}[args.algorithm]
    try:
        history, _, _ = trainer(cfg, resume=args.resume, resume_changed=args.resume_changed)
    except Finished as e:
        print(f"reasoning-rl train {args.algorithm} --resume: {e}", file=sys.stderr)
        return 0
    accs = [h["eval/accuracy"] for h in history if "eval/accuracy" in h]
    if accs:  # rank 0 evaluates; the other ranks of a launched run have nothing to report
        last = history[-1]["step"]  # the run's steps; a resumed invocation ran only the last len(history) of them
        here = f" ({len(history)} in this invocation)" if len(history) != last else ""
        print(f"done: {last} steps{here}, final held-out accuracy {accs[-1]:.3f}; metrics in {cfg.output_dir}")
    return 0


def cmd_train_prm(args) -> int:
    cfg = load_config(args)
    from ..trainers.tiny_prm import train_prm

    train_prm(cfg)
    return 0


def add_train_commands(sub) -> None:
    """`train grpo|ppo|distill|prm|dpo`."""
    p = cmd(sub, "train", "train a policy", "reasoning-rl train grpo --set grpo.steps=20")
    tsub = p.add_subparsers(dest="algorithm", metavar="ALGORITHM", required=True, parser_class=Parser)
    for name, what in (("grpo", "GRPO"), ("ppo", "PPO (critic + GAE)")):
        q = cmd(tsub, name, f"{what} under the outcome verifier on the configured tasks",
                f"reasoning-rl train {name} --set output_dir=runs/{name[0]}1 --set {name}.steps=20")
        add_config_args(q)
        add_task_args(q, verifier=True)
        add_run_dir_args(q)
        q.set_defaults(func=cmd_train)
    q = cmd(tsub, "distill", "on-policy distillation: the student samples, a frozen teacher scores every sampled "
                             "token (the per-token reverse KL, or a dense divergence), optionally plus the verifier's "
                             "outcome", "reasoning-rl train distill --teacher runs/teacher/final "
                                        "--set model.name_or_path=smollm2-135m-instruct --set distill.steps=20")
    add_config_args(q)
    add_task_args(q, verifier=True)
    add_run_dir_args(q)
    q.add_argument("--teacher", metavar="MODEL", help="the teacher (a model name, folder or .gguf file); overrides "
                                                       "distill.teacher")
    q.set_defaults(func=cmd_train)
    q = cmd(tsub, "prm", "the tiny process reward model on generated step-by-step solutions",
             "reasoning-rl train prm --set prm.steps=200")
    add_config_args(q)
    q.set_defaults(func=cmd_train_prm)
    q = cmd(tsub, "dpo", "DPO on verified pairs (ours, or --backend trl)",
             "reasoning-rl train dpo --pairs out/pairs --set output_dir=runs/d1")
    add_config_args(q)
    add_task_args(q, verifier=True)
    add_run_dir_args(q, resume=False)
    q.add_argument("--pairs", help="pairs file/dir (prompt, chosen, rejected); default: sample fresh pairs")
    q.add_argument("--backend", choices=["ours", "trl"], help="overrides dpo.backend")
    q.set_defaults(func=cmd_train)


def add_sft_command(sub) -> None:
    p = cmd(sub, "sft", "supervised training: on verified samples (--samples: what the verifier passed, several per "
                        "prompt), on the task's gold completions (tasks.target_col), or the embedded tiny model's "
                        "cached warm start; prints held-out accuracy",
            "reasoning-rl sft --samples out/curated/samples.jsonl --set model.name_or_path=MODEL --output runs/sft")
    add_config_args(p)
    add_task_args(p)
    p.add_argument("--samples", metavar="FILE", help="train on these verified samples: `curate`'s samples.jsonl, a "
                                                     "run's archive.jsonl, or rows of prompt, completion and passed "
                                                     "(or status); only the passed ones unless --all-samples")
    p.add_argument("--verifier", help="with --samples: the verdict that decides (default: the run's outcome, or the "
                                      "only one the samples carry)")
    p.add_argument("--all-samples", action="store_true", help="with --samples: failed (and unverified) samples too; "
                                                             "masked ones never")
    p.add_argument("--steps", type=POS_INT, help="with --samples: optimiser steps of this run (default sft.steps; the "
                                                 "tiny model's cached warm start, which it starts from, keeps "
                                                 "sft.steps)")
    p.add_argument("--resume", action="store_true", help="with --output: continue the run stopped there (Ctrl-C, "
                                                         "SIGTERM) from its checkpoint")
    p.add_argument("--force", action="store_true", help="tiny: retrain even if a cached checkpoint exists")
    p.add_argument("--output", metavar="DIR", help="also save the checkpoint here (required for a model other "
                                                   "than tiny, and with --samples)")
    p.set_defaults(func=cmd_sft)
