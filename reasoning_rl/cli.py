"""`reasoning-rl`: the command line.

Each subcommand is a small function taking parsed args; heavy imports (torch,
transformers) happen inside the commands that need them, so `reasoning-rl --help` and
`reasoning-rl verifiers list` start fast. A bad config or bad input exits with status 2
and one line naming the key and the value.
"""
from __future__ import annotations

import argparse
import json
import sys

from .cli_args import (NONNEG_FLOAT, NONNEG_INT, POS_FLOAT, POS_INT, Parser, add_config_args,
                       add_run_dir_args, add_split_arg, add_task_args, check_model, claim_output_dir, cmd, load_config, load_task,
                       version)
from .errors import UserError


def _set_threads(cfg) -> None:
    import torch

    torch.set_num_threads(cfg.num_threads)


# ---------------------------------------------------------------- commands
def cmd_verifiers_list(args) -> int:
    import verifiers

    errors = verifiers.load_all()
    rows = []
    for name in verifiers.names():
        v = verifiers.get(name)
        s = v.spec
        rows.append({"name": name, "version": v.version, "distribution": verifiers.distribution(name),
                     "needs": list(s.needs), "output_range": list(s.output_range),
                     "deterministic": s.deterministic, "default_timeout": s.default_timeout,
                     "description": s.description})
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print(f"{'name':<16} {'version':<8} {'distribution':<24} spec")
        for r in rows:
            print(f"{r['name']:<16} {r['version']:<8} {r['distribution']:<24} needs={','.join(r['needs']) or '-'} "
                  f"range={tuple(r['output_range'])} deterministic={r['deterministic']} "
                  f"timeout={r['default_timeout']}s  {r['description']}")
    for e in errors:
        print(str(e), file=sys.stderr)
    return 0


def cmd_config(args) -> int:
    from . import config
    from .configs import Config

    if args.describe:
        for key, default, help_ in config.describe(Config):
            print(f"{key:<36} {default:<24} {help_}")
        return 0
    print(json.dumps(config.to_dict(load_config(args)), indent=1))
    return 0


def cmd_sft(args) -> int:
    import os

    cfg = load_config(args)
    if cfg.model.name_or_path != "tiny":
        return _sft_on_target(cfg, args)
    _set_threads(cfg)
    from .models import load_policy
    from .sft import build_sft_checkpoint

    task = load_task(cfg)
    path = build_sft_checkpoint(cfg, force=args.force)
    model, tok = load_policy(cfg)
    test = task.test
    acc = task.evaluate(model, tok, test[: cfg.eval.size], max_new_tokens=cfg.generation.max_tokens)
    if args.output:
        os.makedirs(args.output, exist_ok=True)
        model.save_pretrained(args.output)
        tok.save_pretrained(args.output)
        path = args.output
    print(f"sft checkpoint: {path}")
    print(f"held-out accuracy: {acc:.3f} ({min(len(test), cfg.eval.size)} prompts, greedy)")
    return 0


def _sft_on_target(cfg, args) -> int:
    """SFT of any Hugging Face model on the task's gold completions (tasks.target_col, or the preset's)."""
    from .lora import maybe_lora, save_final
    from .models import load_policy
    from .sft import train_sft

    if not args.output:
        raise UserError(f"sft: model.name_or_path={cfg.model.name_or_path!r}: give --output DIR for the trained model "
                        "(only the embedded tiny model has a cached warm start)")
    task = load_task(cfg)
    rows = [{"prompt": r["prompt"], "answer": str(r["target"])} for r in task.train if r.get("target") not in
            (None, "")]
    if not rows:
        raise UserError(f"tasks.target_col: no train row of {task.source!r} has a gold completion to train on "
                        f"(value {cfg.tasks.target_col!r}; the preset {cfg.tasks.preset!r} names none)")
    _set_threads(cfg)
    model, tok = load_policy(cfg)
    model = maybe_lora(model, cfg)
    train_sft(cfg, model, tok, rows)
    acc = task.evaluate(model, tok, task.rows("test")[: cfg.eval.size], max_new_tokens=cfg.generation.max_tokens)
    import os

    parent, name = os.path.split(os.path.abspath(args.output))
    path = save_final(parent, model, tok, name=name)
    print(f"sft ({len(rows)} targets, {cfg.sft.steps} steps): {path}")
    print(f"held-out accuracy: {acc:.3f} ({min(len(task.test), cfg.eval.size)} prompts, greedy, {task.outcome})")
    return 0


def cmd_curate(args) -> int:
    cfg = load_config(args)
    from .curate import curate, write_rows
    from .models import load_policy
    from .rollout import SamplingConfig

    task, rows = load_task(cfg, args.split, args.limit)
    _set_threads(cfg)
    model, tok = load_policy(cfg)
    sampling = SamplingConfig(temperature=args.temperature, max_tokens=args.max_tokens or cfg.generation.max_tokens,
                              seed=cfg.seed)
    out = curate(model, tok, task, rows, args.n, sampling, ledger_path=args.ledger)
    write_rows(out, args.output)
    scored = [r for r in out if r["pass_rate"] is not None]
    if not scored:
        raise UserError(f"curate: every one of the {len(out)} prompts' samples was masked by {task.outcome!r} "
                        "(no verdict to compute a pass rate from); see the rows' masked column in "
                        f"{args.output}/data.jsonl")
    mixed = sum(r["mixed"] for r in out)
    mean = sum(r["pass_rate"] for r in scored) / len(scored)
    print(f"curated {len(out)} prompts x {args.n} samples ({task.outcome}): mean pass rate {mean:.3f}, "
          f"mixed {mixed} ({mixed / max(1, len(out)):.1%}), all pass {sum(r['pass_rate'] == 1 for r in scored)}, "
          f"all fail {sum(r['pass_rate'] == 0 for r in scored)} -> {args.output}")
    return 0


def cmd_train_grpo(args) -> int:
    cfg = load_config(args)
    check_model(cfg)
    cfg = claim_output_dir(cfg, args, "grpo")
    from .trainers.grpo import train_grpo

    history, _, _ = train_grpo(cfg, resume=args.resume)
    accs = [h["eval/accuracy"] for h in history if "eval/accuracy" in h]
    if accs:  # rank 0 evaluates; the other ranks of a launched run have nothing to report
        print(f"done: {len(history)} steps, final held-out accuracy {accs[-1]:.3f}; metrics in {cfg.output_dir}")
    return 0


def cmd_train_ppo(args) -> int:
    cfg = load_config(args)
    check_model(cfg)
    cfg = claim_output_dir(cfg, args, "ppo")
    from .trainers.ppo import train_ppo

    history, _, _ = train_ppo(cfg, resume=args.resume)
    accs = [h["eval/accuracy"] for h in history if "eval/accuracy" in h]
    if accs:  # rank 0 evaluates; the other ranks of a launched run have nothing to report
        print(f"done: {len(history)} steps, final held-out accuracy {accs[-1]:.3f}; metrics in {cfg.output_dir}")
    return 0


def cmd_train_prm(args) -> int:
    cfg = load_config(args)
    from .prm import train_prm

    train_prm(cfg)
    return 0


def _fresh_pairs(cfg, model, tok, task, rows, n, pair_cfg, log=print):
    import verifiers

    from .curate import sample_verified
    from .pairs import build_pairs
    from .rollout import SamplingConfig

    groups = sample_verified(model, tok, task, rows, n, SamplingConfig(temperature=cfg.generation.temperature,
                                                                       max_tokens=cfg.generation.max_tokens,
                                                                       seed=cfg.seed), log=log)
    return build_pairs(groups, task.outcome, pair_cfg, policy=cfg.model.name_or_path,
                       verifier_version=verifiers.get(task.outcome).version)


def _pair_config(args):
    from . import config as _config
    from .pairs import PairConfig

    return _config.from_dict(PairConfig, {"strategy": args.strategy, "k": args.k, "length_tolerance": args.length_tolerance,
                                          "min_margin": args.min_margin, "max_pairs_per_prompt": args.max_per_prompt,
                                          "dedup": not args.no_dedup}, prefix="pairs")


def cmd_pairs(args) -> int:
    cfg = load_config(args)
    from .models import load_policy
    from .pairs import write_pairs

    pair_cfg = _pair_config(args)
    if args.archive:
        import os

        import verifiers

        from .archive import read_archive
        from .pairs import build_pairs
        from .task import outcome_of

        if not os.path.isfile(args.archive):
            raise UserError(f"--archive {args.archive!r} is not a file (a training run's archive.jsonl)")
        beside = os.path.join(os.path.dirname(os.path.abspath(args.archive)), "task.json")
        if not args.verifier and os.path.isfile(beside):  # the run recorded its outcome: pair on it
            with open(beside) as f:
                outcome = json.load(f)["outcome"]
        else:
            outcome = outcome_of(cfg.tasks)  # --verifier, or the configured task's outcome
        verifiers.get(outcome)  # an unknown name: one line listing the valid ones
        pairs, summary = build_pairs(read_archive(args.archive), outcome, pair_cfg, policy=args.archive)
    else:
        task, rows = load_task(cfg, args.split, args.limit)
        _set_threads(cfg)
        model, tok = load_policy(cfg)
        pairs, summary = _fresh_pairs(cfg, model, tok, task, rows, args.n, pair_cfg)
    write_pairs(pairs, args.output)
    print(json.dumps(summary))
    return 0


def cmd_train_dpo(args) -> int:
    cfg = load_config(args)
    import os

    from .cli_verifiers import read_rows
    from .lora import maybe_lora, save_final
    from .models import load_policy
    from .trainers.distributed import Ranks
    from .trainers.dpo import train_dpo_ours, train_dpo_trl

    pair_rows = read_rows(args.pairs) if args.pairs else None
    for i, r in enumerate(pair_rows or []):
        missing = [c for c in ("prompt", "chosen", "rejected") if not isinstance(r, dict) or c not in r]
        if missing:
            raise UserError(f"--pairs {args.pairs!r}: row {i} has no {missing[0]!r} column "
                            f"(a pair needs prompt, chosen, rejected; columns: {sorted(r) if isinstance(r, dict) else r})")
    if pair_rows is not None and not pair_rows:
        raise UserError(f"--pairs {args.pairs!r} has no rows")
    task = load_task(cfg)
    cfg = claim_output_dir(cfg, args, "dpo")
    _set_threads(cfg)
    ranks = Ranks()  # under `accelerate launch`: each rank samples its share of the prompts; rank 0 reports
    model, tok = ranks.main_first(load_policy, cfg)
    model = maybe_lora(model, cfg)  # with adapters, DPO's reference is the base model with them disabled
    train_rows, test_rows = task.train, task.test
    if pair_rows is not None:
        rows = pair_rows
    else:
        from .pairs import PairConfig

        mine = train_rows[: cfg.dpo.sample_prompts][ranks.rank::ranks.world]
        pairs, summary = _fresh_pairs(cfg, model, tok, task, mine, cfg.dpo.group_size, PairConfig(),
                                      log=ranks.logger(print))
        pairs = ranks.gather(pairs)  # every rank trains on the same pairs in the same order
        if ranks.main:
            print(f"pairs: {json.dumps(summary)}" + (f" (rank 0's share; {len(pairs)} pairs from {ranks.world} "
                                                       f"ranks)" if ranks.world > 1 else ""))
        rows = [{"prompt": p.prompt, "chosen": p.chosen, "rejected": p.rejected} for p in pairs]
    if not rows:
        print("train dpo: no pairs (no prompt had both a pass and a fail)", file=sys.stderr)
        return 2
    evals = test_rows[: cfg.eval.size]
    max_tokens = cfg.generation.max_tokens
    acc0 = task.evaluate(model, tok, evals, max_new_tokens=max_tokens) if ranks.main else None
    backend = args.backend or cfg.dpo.backend
    if backend == "trl":
        m = train_dpo_trl(cfg, model, tok, rows, os.path.join(cfg.output_dir, "dpo_trl"))
    else:
        m = train_dpo_ours(cfg, model, tok, rows)
    if not ranks.main:
        return 0
    acc1 = task.evaluate(model, tok, evals, max_new_tokens=max_tokens)
    save_final(cfg.output_dir, model, tok, name=f"dpo_{backend}")
    print(f"dpo ({backend}, {len(rows)} pairs): margin {m['rewards/margins']:+.4f}  pair accuracy "
          f"{m['rewards/accuracies']:.3f}  held-out accuracy {acc0:.3f} -> {acc1:.3f}")
    return 0


def cmd_eval(args) -> int:
    cfg = load_config(args)
    from .curate import sample_verified
    from .evaluate import evaluate_sampled
    from .models import load_policy
    from .rollout import SamplingConfig

    task, rows = load_task(cfg, args.split, args.limit)  # the held-out split (a file without one: its hash share)
    _set_threads(cfg)
    model, tok = load_policy(cfg)
    groups = sample_verified(model, tok, task, rows, args.n, SamplingConfig(
        temperature=args.temperature, max_tokens=cfg.generation.max_tokens, seed=cfg.seed), log=lambda *_: None)
    ks = tuple(k for k in (1, 2, 4, 8, 16, 32, 64) if k <= args.n)
    outcome = task.outcome
    res = evaluate_sampled(groups, outcome, ks, answer_key=task.answer_key)
    res["greedy"] = task.evaluate(model, tok, rows, max_new_tokens=cfg.generation.max_tokens)
    print(json.dumps({"prompts": len(rows), "samples_per_prompt": args.n, "verifier": outcome,
                      **{k: round(v, 4) for k, v in res.items()}}))
    return 0


def cmd_task_check(args) -> int:
    cfg = load_config(args)
    from .task_check import check_report, format_report

    task = load_task(cfg, log=lambda *_: None)
    from .models import load_tokenizer

    report = check_report(cfg, task, load_tokenizer(cfg), probe=args.probe)
    print(json.dumps(report, indent=1, ensure_ascii=False) if args.json else format_report(report))
    return 0


def cmd_reverify(args) -> int:
    import os

    import verifiers

    from .reverify import format_table, reverify, write_report

    if not os.path.isdir(args.run_dir):
        raise UserError(f"reverify: {args.run_dir!r} is not a directory (a training run's)")
    try:
        options = json.loads(args.options) if args.options else {}
    except json.JSONDecodeError as e:
        raise UserError(f"--options: not valid JSON ({e.msg}): {args.options!r}") from None
    if not isinstance(options, dict):
        raise UserError(f"--options: must be a JSON object, got {args.options!r}")
    with verifiers.VerifierPool(num_workers=args.workers) as pool:
        rep = reverify(args.run_dir, args.verifier, options, pool=pool)
    out = args.output or os.path.join(args.run_dir, "reverify")
    write_report(rep, out)
    print(format_table(rep))
    print(f"written: {out}/flips.jsonl, summary.json, reward.png")
    return 0


def cmd_demo(args) -> int:
    cfg = load_config(args)
    check_model(cfg)
    cfg = claim_output_dir(cfg, args, "demo")
    from .demo import run_demo

    run_demo(cfg)
    return 0


# ---------------------------------------------------------------- parser
def _add_train_commands(sub) -> None:
    """`train grpo|ppo|prm|dpo`."""
    p = cmd(sub, "train", "train a policy", "reasoning-rl train grpo --set grpo.steps=20")
    tsub = p.add_subparsers(dest="algorithm", metavar="ALGORITHM", required=True, parser_class=Parser)
    q = cmd(tsub, "grpo", "GRPO under the outcome verifier on the configured tasks",
             "reasoning-rl train grpo --set output_dir=runs/g1 --set grpo.steps=20")
    add_config_args(q)
    add_task_args(q, verifier=True)
    add_run_dir_args(q)
    q.set_defaults(func=cmd_train_grpo)
    q = cmd(tsub, "ppo", "PPO (critic + GAE) under the outcome verifier on the configured tasks",
             "reasoning-rl train ppo --set output_dir=runs/p1 --set ppo.steps=20")
    add_config_args(q)
    add_task_args(q, verifier=True)
    add_run_dir_args(q)
    q.set_defaults(func=cmd_train_ppo)
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
    q.set_defaults(func=cmd_train_dpo)


def _add_data_commands(sub) -> None:
    """`curate`, `pairs` and `eval`: sampled, verified data from a model."""
    p = cmd(sub, "curate", "sample G completions per prompt, verify, write pass-rate columns and `mixed`",
             "reasoning-rl curate --dataset data.jsonl -n 8 -o out/curated")
    add_config_args(p)
    add_task_args(p, verifier=True)
    add_split_arg(p, "all")  # a dataset written back whole, with its pass-rate columns
    p.add_argument("--limit", type=NONNEG_INT, default=0, help="only the first N prompts (0 = all)")
    p.add_argument("-n", "--n", type=POS_INT, default=8, help="samples per prompt (G)")
    p.add_argument("--temperature", type=NONNEG_FLOAT, default=1.0, help="sampling temperature (0 = greedy)")
    p.add_argument("--max-tokens", type=POS_INT, default=None,
                   help="new tokens per completion (default: the config's generation.max_tokens)")
    p.add_argument("--ledger", help="also record the groups in this SQLite curriculum ledger")
    p.add_argument("--output", "-o", required=True, help="output directory (datasets dir + data.jsonl)")
    p.set_defaults(func=cmd_curate)

    p = cmd(sub, "pairs", "sample and verify groups, write a preference dataset (chosen pass, rejected fail)",
             "reasoning-rl pairs --archive runs/g1/archive.jsonl -o out/pairs")
    add_config_args(p)
    p.add_argument("--archive", help="a training run's archive.jsonl (verified groups; pairs on the outcome its "
                                      "task.json records unless --verifier); no sampling then")
    add_task_args(p, verifier=True)
    add_split_arg(p, "train")
    p.add_argument("--limit", type=NONNEG_INT, default=0, help="only the first N prompts (0 = all)")
    p.add_argument("-n", "--n", type=POS_INT, default=8, help="samples per prompt")
    p.add_argument("--strategy", default="all", choices=["all", "best_worst", "random_k"],
                   help="which pass/fail pairs of a prompt to keep")
    p.add_argument("--k", type=POS_INT, default=4, help="pairs per prompt for random_k")
    p.add_argument("--length-tolerance", type=NONNEG_INT, default=None,
                   help="max |len(chosen) - len(rejected)| in characters (default: no limit)")
    p.add_argument("--min-margin", type=NONNEG_FLOAT, default=0.0,
                   help="least score difference between chosen and rejected")
    p.add_argument("--max-per-prompt", type=NONNEG_INT, default=0, help="at most this many pairs per prompt (0 = all)")
    p.add_argument("--no-dedup", action="store_true", help="keep pairs whose texts repeat another pair's")
    p.add_argument("--output", "-o", required=True, help="output directory (datasets dir + data.jsonl)")
    p.set_defaults(func=cmd_pairs)

    p = cmd(sub, "eval", "pass@1, pass@k (unbiased) and maj@k on held-out prompts",
             "reasoning-rl eval --set model.name_or_path=runs/g1/final -n 8")
    add_config_args(p)
    add_task_args(p, verifier=True)
    add_split_arg(p, "test")
    p.add_argument("--limit", type=NONNEG_INT, default=0, help="only the first N prompts (0 = all)")
    p.add_argument("-n", "--n", type=POS_INT, default=8, help="samples per prompt (k ranges over powers of two <= n)")
    p.add_argument("--temperature", type=NONNEG_FLOAT, default=1.0, help="sampling temperature (0 = greedy)")
    p.set_defaults(func=cmd_eval)


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog="reasoning-rl", description="Verifier-centric RL for reasoning models.",
                 epilog="example:\n  reasoning-rl demo")
    ap.add_argument("--version", action="version", version=f"reasoning-rl {version()}")
    ap.add_argument("--debug", action="store_true", help="show the traceback of a user error instead of one line")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=Parser)

    p = cmd(sub, "verifiers", "inspect installed verifiers", "reasoning-rl verifiers list")
    vsub = p.add_subparsers(dest="verifiers_command", metavar="ACTION", required=True, parser_class=Parser)
    q = cmd(vsub, "list", "name, version, source distribution and spec of every verifier",
             "reasoning-rl verifiers list --json")
    q.add_argument("--json", action="store_true", help="print JSON instead of a table")
    q.set_defaults(func=cmd_verifiers_list)
    from .cli_verifiers import add_parsers

    add_parsers(sub, vsub, cmd, POS_INT, POS_FLOAT)

    p = cmd(sub, "config", "print the resolved config, or every knob with its help",
             "reasoning-rl config --config examples/code_rl/config.yaml --set grpo.steps=10")
    add_config_args(p)
    p.add_argument("--describe", action="store_true", help="list every knob, its default and help text")
    p.set_defaults(func=cmd_config)

    p = cmd(sub, "sft", "supervised training on the task's gold completions: the embedded tiny model's cached warm "
                        "start, or any model on tasks.target_col; prints held-out accuracy",
             "reasoning-rl sft --dataset gsm8k.jsonl --preset gsm8k --set model.name_or_path=MODEL --output runs/sft")
    add_config_args(p)
    add_task_args(p)
    p.add_argument("--force", action="store_true", help="tiny: retrain even if a cached checkpoint exists")
    p.add_argument("--output", metavar="DIR", help="also save the checkpoint here (required for a model other "
                                                   "than tiny)")
    p.set_defaults(func=cmd_sft)

    p = cmd(sub, "task", "inspect the configured task", "reasoning-rl task check --dataset gsm8k.jsonl --preset gsm8k")
    tsub = p.add_subparsers(dest="task_command", metavar="ACTION", required=True, parser_class=Parser)
    q = cmd(tsub, "check", "rows per split, rows dropped and why, three prompts as the model sees them, the reward "
                           "terms and the share of references each can parse",
            "reasoning-rl task check --config examples/code_rl/config.yaml")
    add_config_args(q)
    add_task_args(q, verifier=True)
    q.add_argument("--probe", type=NONNEG_INT, default=200, help="references per split each reward term is probed on")
    q.add_argument("--json", action="store_true", help="print JSON instead of text")
    q.set_defaults(func=cmd_task_check)

    p = cmd(sub, "reverify", "re-score a run's archived samples with the current (or another) verifier and report "
                             "the verdicts that flip", "reasoning-rl reverify runs/grpo-<time> --verifier math")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a training run's directory (archive.jsonl, task.json)")
    p.add_argument("--verifier", help="re-score the outcome with this verifier instead of the run's own terms")
    p.add_argument("--options", help="JSON options for --verifier, e.g. '{\"timeout\": 10}'")
    p.add_argument("--workers", type=POS_INT, default=2, help="verifier worker processes")
    p.add_argument("--output", "-o", help="report directory (default: RUN_DIR/reverify)")
    p.set_defaults(func=cmd_reverify)

    _add_data_commands(sub)
    _add_train_commands(sub)
    p = cmd(sub, "demo", "the main job: SFT warm start (cached), then GRPO; held-out accuracy and a plot",
             "reasoning-rl demo --set grpo.steps=30")
    add_config_args(p)
    add_run_dir_args(p, resume=False)
    p.set_defaults(func=cmd_demo)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except UserError as e:
        if args.debug:
            raise
        command = " ".join(x for x in (args.command, getattr(args, "algorithm", None),
                                       getattr(args, "verifiers_command", None), getattr(args, "task_command", None))
                           if x)
        print(f"reasoning-rl {command}: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
