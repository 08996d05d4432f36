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

from .config import ConfigError


def _add_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", help="YAML or TOML config file")
    p.add_argument("--set", dest="overrides", metavar="KEY=VALUE", action="append", default=[],
                   help="override one knob, e.g. --set sft.steps=200 (repeatable)")


def _load_config(args):
    from . import config
    from .configs import Config

    return config.load(Config, args.config, args.overrides)


def _prompt_rows(args, cfg, split: str) -> list[dict]:
    """Rows from --dataset, else the embedded tasks' `split` ("train" or "test"); the first --limit of them."""
    from .cli_verifiers import read_rows
    from .tiny.tasks import make_rows

    rows = read_rows(args.dataset) if args.dataset else make_rows(cfg.tasks)[0 if split == "train" else 1]
    return rows[: args.limit] if args.limit else rows


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
    print(json.dumps(config.to_dict(_load_config(args)), indent=1))
    return 0


def cmd_sft(args) -> int:
    import os

    cfg = _load_config(args)
    _set_threads(cfg)
    if cfg.model.name_or_path != "tiny":
        print("sft: only the embedded default (model.name_or_path=tiny) has a built-in warm start", file=sys.stderr)
        return 2
    from .evaluate import task_accuracy
    from .models import load_policy
    from .sft import build_sft_checkpoint
    from .tiny.tasks import make_rows

    path = build_sft_checkpoint(cfg, force=args.force)
    model, tok = load_policy(cfg)
    _, test = make_rows(cfg.tasks)
    acc = task_accuracy(model, tok, test[: cfg.sft.eval_size], max_new_tokens=cfg.grpo.max_tokens)
    if args.output:
        os.makedirs(args.output, exist_ok=True)
        model.save_pretrained(args.output)
        tok.save_pretrained(args.output)
        path = args.output
    print(f"sft checkpoint: {path}")
    print(f"held-out accuracy: {acc:.3f} ({min(len(test), cfg.sft.eval_size)} prompts, greedy)")
    return 0


def cmd_curate(args) -> int:
    cfg = _load_config(args)
    _set_threads(cfg)
    from .curate import curate, write_rows
    from .models import load_policy
    from .rollout import SamplingConfig

    rows = _prompt_rows(args, cfg, args.split)
    model, tok = load_policy(cfg)
    sampling = SamplingConfig(temperature=args.temperature, max_tokens=args.max_tokens, seed=cfg.seed)
    out = curate(model, tok, rows, args.n, sampling, verifier=args.verifier, reference_col=args.reference_col,
                 ledger_path=args.ledger)
    write_rows(out, args.output)
    scored = [r for r in out if r["pass_rate"] is not None]
    mixed = sum(r["mixed"] for r in out)
    mean = sum(r["pass_rate"] for r in scored) / len(scored) if scored else float("nan")
    print(f"curated {len(out)} prompts x {args.n} samples: mean pass rate {mean:.3f}, "
          f"mixed {mixed} ({mixed / max(1, len(out)):.1%}), all pass {sum(r['pass_rate'] == 1 for r in scored)}, "
          f"all fail {sum(r['pass_rate'] == 0 for r in scored)} -> {args.output}")
    return 0


def cmd_train_grpo(args) -> int:
    cfg = _load_config(args)
    from .trainers.grpo import train_grpo

    history, _, _ = train_grpo(cfg, resume=args.resume)
    accs = [h["eval/accuracy"] for h in history if "eval/accuracy" in h]
    if accs:  # rank 0 evaluates; the other ranks of a launched run have nothing to report
        print(f"done: {len(history)} steps, final held-out accuracy {accs[-1]:.3f}; metrics in {cfg.output_dir}")
    return 0


def cmd_train_ppo(args) -> int:
    cfg = _load_config(args)
    from .trainers.ppo import train_ppo

    history, _, _ = train_ppo(cfg, resume=args.resume)
    accs = [h["eval/accuracy"] for h in history if "eval/accuracy" in h]
    if accs:  # rank 0 evaluates; the other ranks of a launched run have nothing to report
        print(f"done: {len(history)} steps, final held-out accuracy {accs[-1]:.3f}; metrics in {cfg.output_dir}")
    return 0


def cmd_train_prm(args) -> int:
    cfg = _load_config(args)
    from .prm import train_prm

    train_prm(cfg)
    return 0


def _fresh_pairs(cfg, model, tok, rows, n, pair_cfg, log=print):
    from .curate import sample_verified
    from .pairs import build_pairs
    from .rollout import SamplingConfig

    groups = sample_verified(model, tok, rows, n, SamplingConfig(temperature=cfg.dpo.temperature,
                                                                 max_tokens=cfg.grpo.max_tokens, seed=cfg.seed),
                             log=log)
    return build_pairs(groups, "math", pair_cfg, policy=cfg.model.name_or_path, verifier_version="1")


def _pair_config(args):
    from . import config as _config
    from .pairs import PairConfig

    return _config.from_dict(PairConfig, {"strategy": args.strategy, "k": args.k, "length_tolerance": args.length_tolerance,
                                          "min_margin": args.min_margin, "max_pairs_per_prompt": args.max_per_prompt,
                                          "dedup": not args.no_dedup}, prefix="pairs")


def cmd_pairs(args) -> int:
    cfg = _load_config(args)
    _set_threads(cfg)
    from .models import load_policy
    from .pairs import write_pairs

    if args.archive:
        from .archive import read_archive
        from .pairs import build_pairs

        from .trainers.grpo import outcome_verifier

        outcome = args.verifier or outcome_verifier(cfg)  # code archives pair on `code`, arithmetic on `math`
        pairs, summary = build_pairs(read_archive(args.archive), outcome, _pair_config(args), policy=args.archive)
    else:
        rows = _prompt_rows(args, cfg, "train")
        model, tok = load_policy(cfg)
        pairs, summary = _fresh_pairs(cfg, model, tok, rows, args.n, _pair_config(args))
    write_pairs(pairs, args.output)
    print(json.dumps(summary))
    return 0


def cmd_train_dpo(args) -> int:
    cfg = _load_config(args)
    _set_threads(cfg)
    import os

    from .cli_verifiers import read_rows
    from .evaluate import greedy_accuracy
    from .models import load_policy
    from .tiny.tasks import make_rows
    from .trainers.distributed import Ranks
    from .trainers.dpo import train_dpo_ours, train_dpo_trl

    ranks = Ranks()  # under `accelerate launch`: each rank samples its share of the prompts; rank 0 reports
    model, tok = ranks.main_first(load_policy, cfg)
    train_rows, test_rows = make_rows(cfg.tasks)
    if args.pairs:
        rows = read_rows(args.pairs)
    else:
        from .pairs import PairConfig

        mine = train_rows[: cfg.dpo.sample_prompts][ranks.rank::ranks.world]
        pairs, summary = _fresh_pairs(cfg, model, tok, mine, cfg.dpo.samples_per_prompt, PairConfig(),
                                      log=ranks.logger(print))
        pairs = ranks.gather(pairs)  # every rank trains on the same pairs in the same order
        if ranks.main:
            print(f"pairs: {json.dumps(summary)}" + (f" (rank 0's share; {len(pairs)} pairs from {ranks.world} "
                                                       f"ranks)" if ranks.world > 1 else ""))
        rows = [{"prompt": p.prompt, "chosen": p.chosen, "rejected": p.rejected} for p in pairs]
    if not rows:
        print("train dpo: no pairs (no prompt had both a pass and a fail)", file=sys.stderr)
        return 2
    evals = test_rows[: cfg.dpo.eval_size]
    acc0 = greedy_accuracy(model, tok, evals) if ranks.main else None
    backend = args.backend or cfg.dpo.backend
    if backend == "trl":
        m = train_dpo_trl(cfg, model, tok, rows, os.path.join(cfg.output_dir, "dpo_trl"))
    else:
        m = train_dpo_ours(cfg, model, tok, rows)
    if not ranks.main:
        return 0
    acc1 = greedy_accuracy(model, tok, evals)
    model.save_pretrained(os.path.join(cfg.output_dir, f"dpo_{backend}"))
    tok.save_pretrained(os.path.join(cfg.output_dir, f"dpo_{backend}"))
    print(f"dpo ({backend}, {len(rows)} pairs): margin {m['rewards/margins']:+.4f}  pair accuracy "
          f"{m['rewards/accuracies']:.3f}  held-out accuracy {acc0:.3f} -> {acc1:.3f}")
    return 0


def cmd_eval(args) -> int:
    cfg = _load_config(args)
    _set_threads(cfg)
    from .curate import sample_verified
    from .evaluate import evaluate_sampled, task_accuracy
    from .models import load_policy
    from .rollout import SamplingConfig
    from .trainers.grpo import outcome_verifier

    rows = _prompt_rows(args, cfg, "test")
    model, tok = load_policy(cfg)
    outcome = outcome_verifier(cfg)  # math, or code for tasks.kind=code (prompt + completion run against the tests)
    groups = sample_verified(model, tok, rows, args.n, SamplingConfig(temperature=args.temperature,
                                                                      max_tokens=cfg.grpo.max_tokens, seed=cfg.seed),
                             verifier=outcome, reference_col="tests" if outcome == "code" else "answer",
                             log=lambda *_: None)
    ks = tuple(k for k in (1, 2, 4, 8, 16, 32, 64) if k <= args.n)
    res = evaluate_sampled(groups, outcome, ks)
    if not args.dataset:
        res["greedy"] = task_accuracy(model, tok, rows, max_new_tokens=cfg.grpo.max_tokens)
    print(json.dumps({"prompts": len(rows), "samples_per_prompt": args.n, "verifier": outcome,
                      **{k: round(v, 4) for k, v in res.items()}}))
    return 0


def cmd_demo(args) -> int:
    cfg = _load_config(args)
    from .demo import run_demo

    run_demo(cfg)
    return 0


# ---------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="reasoning-rl", description="Verifier-centric RL for reasoning models.")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("verifiers", help="inspect installed verifiers")
    vsub = p.add_subparsers(dest="verifiers_command", metavar="ACTION", required=True)
    q = vsub.add_parser("list", help="name, version, source distribution and spec of every verifier")
    q.add_argument("--json", action="store_true", help="print JSON instead of a table")
    q.set_defaults(func=cmd_verifiers_list)
    from .cli_verifiers import add_parsers

    add_parsers(sub, vsub)

    p = sub.add_parser("config", help="print the resolved config, or every knob with its help")
    _add_config_args(p)
    p.add_argument("--describe", action="store_true", help="list every knob, its default and help text")
    p.set_defaults(func=cmd_config)

    p = sub.add_parser("sft", help="supervised warm start of the embedded tiny model (cached); prints held-out accuracy")
    _add_config_args(p)
    p.add_argument("--force", action="store_true", help="retrain even if a cached checkpoint exists")
    p.add_argument("--output", metavar="DIR", help="also save the checkpoint here")
    p.set_defaults(func=cmd_sft)

    p = sub.add_parser("curate", help="sample G completions per prompt, verify, write pass-rate columns and `mixed`")
    _add_config_args(p)
    p.add_argument("--dataset", help="JSONL/Parquet/datasets dir with prompt and reference columns "
                                     "(default: the embedded procedural tasks)")
    p.add_argument("--split", choices=["train", "test"], default="train", help="for the embedded tasks")
    p.add_argument("--limit", type=int, default=0, help="only the first N prompts (0 = all)")
    p.add_argument("-n", "--n", type=int, default=8, help="samples per prompt (G)")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--max-tokens", type=int, default=8)
    p.add_argument("--verifier", default="math", help="outcome verifier")
    p.add_argument("--reference-col", default="answer")
    p.add_argument("--ledger", help="also record the groups in this SQLite curriculum ledger")
    p.add_argument("--output", "-o", required=True, help="output directory (datasets dir + data.jsonl)")
    p.set_defaults(func=cmd_curate)

    p = sub.add_parser("train", help="train a policy")
    tsub = p.add_subparsers(dest="algorithm", metavar="ALGORITHM", required=True)
    q = tsub.add_parser("grpo", help="GRPO under the math verifier on the configured tasks")
    _add_config_args(q)
    q.add_argument("--resume", action="store_true", help="continue from output_dir/checkpoint (same trajectory)")
    q.set_defaults(func=cmd_train_grpo)
    q = tsub.add_parser("ppo", help="PPO (critic + GAE) under the math verifier on the configured tasks")
    _add_config_args(q)
    q.add_argument("--resume", action="store_true", help="continue from output_dir/checkpoint (same trajectory)")
    q.set_defaults(func=cmd_train_ppo)
    q = tsub.add_parser("prm", help="the tiny process reward model on generated step-by-step solutions")
    _add_config_args(q)
    q.set_defaults(func=cmd_train_prm)
    q = tsub.add_parser("dpo", help="DPO on verified pairs (ours, or --backend trl)")
    _add_config_args(q)
    q.add_argument("--pairs", help="pairs file/dir (prompt, chosen, rejected); default: sample fresh pairs")
    q.add_argument("--backend", choices=["ours", "trl"], help="overrides dpo.backend")
    q.set_defaults(func=cmd_train_dpo)

    p = sub.add_parser("pairs", help="sample and verify groups, write a preference dataset (chosen pass, rejected fail)")
    _add_config_args(p)
    p.add_argument("--archive", help="a training run's archive.jsonl (verified groups); no sampling then")
    p.add_argument("--verifier", help="outcome verifier whose pass/fail makes chosen/rejected "
                                      "(default: code for tasks.kind=code, else math)")
    p.add_argument("--dataset", help="prompt/answer rows (default: the embedded train split)")
    p.add_argument("--limit", type=int, default=0, help="only the first N prompts (0 = all)")
    p.add_argument("-n", "--n", type=int, default=8, help="samples per prompt")
    p.add_argument("--strategy", default="all", choices=["all", "best_worst", "random_k"])
    p.add_argument("--k", type=int, default=4, help="pairs per prompt for random_k")
    p.add_argument("--length-tolerance", type=int, default=None, help="max |len(chosen) - len(rejected)|")
    p.add_argument("--min-margin", type=float, default=0.0)
    p.add_argument("--max-per-prompt", type=int, default=0)
    p.add_argument("--no-dedup", action="store_true")
    p.add_argument("--output", "-o", required=True)
    p.set_defaults(func=cmd_pairs)

    p = sub.add_parser("eval", help="pass@1, pass@k (unbiased) and maj@k on held-out prompts")
    _add_config_args(p)
    p.add_argument("--dataset", help="prompt/answer rows (default: the embedded held-out split)")
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("-n", "--n", type=int, default=8, help="samples per prompt (k ranges over powers of two <= n)")
    p.add_argument("--temperature", type=float, default=1.0)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("demo", help="the main job: SFT warm start (cached), then GRPO; held-out accuracy and a plot")
    _add_config_args(p)
    p.set_defaults(func=cmd_demo)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
