"""`reasoning-rl`: the command line (the parser's root, and the commands that inspect, report and demo; the
training commands are in cli/train.py, the data commands in cli/data.py).

Each subcommand is a small function taking parsed args; heavy imports (torch,
transformers) happen inside the commands that need them, so `reasoning-rl --help` and
`reasoning-rl verifiers list` start fast. A bad config or bad input exits with status 2
and one line naming the key and the value.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys

from .args import (NONNEG_FLOAT, NONNEG_INT, POS_FLOAT, POS_INT, Parser, add_config_args, add_run_dir_args,
                   add_split_arg, add_task_args, check_model, claim_output_dir, cmd, load_config, version)
from .data import cmd_curate, cmd_eval, cmd_pairs, cmd_reverify, cmd_task_check, cmd_traces
from .recipe import add_recipe_command
from .train import add_sft_command, add_train_commands
from ..errors import UserError


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
    from .. import config
    from ..config.sections import Config

    if args.describe:
        for key, default, help_ in config.describe(Config):
            print(f"{key:<36} {default:<24} {help_}")
        return 0
    print(json.dumps(config.to_dict(load_config(args)), indent=1))
    return 0


def cmd_demo(args) -> int:
    from .demo import REAL_DEMOS, run_demo, run_real_demo
    from .tool_demo import TOOL_DEMOS, run_tool_demo

    demos, what = (TOOL_DEMOS, "tool demo") if args.tools else (REAL_DEMOS, "demo")
    if args.traces is not None and not args.tools:
        raise UserError(f"demo --traces: value {args.traces} needs --tools (the traces are the tool demo's cold start)")
    if args.tools and not args.model:
        raise UserError(f"demo --tools: give --model (choose from {sorted(TOOL_DEMOS)}); the embedded model's tool "
                        "demo is bench/tool_demo.py")
    if args.model:
        if args.model not in demos:
            raise UserError(f"demo --model: value {args.model!r} has no {what} (choose from {sorted(demos)}); "
                            "train your own model with `reasoning-rl train grpo --set model.name_or_path=...`")
        args.overrides = [*demos[args.model], *args.overrides]
    cfg = load_config(args)
    for knob in ("eval_at_start", "eval_at_end"):  # the demo is held-out accuracy before and after
        if not getattr(cfg.grpo, knob):
            raise UserError(f"demo: grpo.{knob}: value false leaves the demo nothing to report (it measures held-out "
                            "accuracy before and after); use `reasoning-rl train grpo` for a run without it")
    check_model(cfg)
    cfg = claim_output_dir(cfg, args, "demo")
    if args.tools:
        run_tool_demo(cfg, args.traces or 400)
    else:
        (run_real_demo if args.model else run_demo)(cfg)
    return 0


# ---------------------------------------------------------------- parser
def _add_data_commands(sub) -> None:
    """`curate`, `pairs` and `eval`: sampled, verified data from a model."""
    p = cmd(sub, "curate", "sample G completions per prompt, verify, write pass-rate columns and `mixed`",
             "reasoning-rl curate --dataset data.jsonl -n 8 -o out/curated")
    add_config_args(p)
    add_task_args(p, verifier=True)
    add_split_arg(p, "all")  # a dataset written back whole, with its pass-rate columns
    p.add_argument("--limit", type=NONNEG_INT, default=0, help="only the first N prompts (0 = all)")
    p.add_argument("-n", "--n", type=POS_INT, default=8, help="samples per prompt (G)")
    p.add_argument("--temperature", type=NONNEG_FLOAT, default=None,
                   help="sampling temperature (0 = greedy; default: the config's generation.temperature)")
    p.add_argument("--max-tokens", type=POS_INT, default=None,
                   help="new tokens per completion (default: the config's generation.max_tokens)")
    p.add_argument("--ledger", help="also record the groups in this SQLite curriculum ledger")
    p.add_argument("--model", metavar="MODEL", help="the model that samples (a teacher's verified samples, or the "
                                                    "student's own); overrides model.name_or_path")
    p.add_argument("--output", "-o", required=True, help="output directory (datasets dir + data.jsonl)")
    p.set_defaults(func=cmd_curate)

    p = cmd(sub, "traces", "generated problems written as Python-tool episodes with the sandbox's real output, for "
                           "a cold start (then: sft --samples OUT/samples.jsonl)",
             "reasoning-rl traces -n 400 --model smollm2-135m-instruct -o out/traces")
    add_config_args(p)
    p.add_argument("-n", "--n", type=POS_INT, default=400, help="problems (the families in turn)")
    p.add_argument("--families", default="products,sums,units,remainders,choose",
                   help="comma-separated families of task/embedded/tool_problems.py (easy: one-digit sums)")
    p.add_argument("--direct", default="", help="comma-separated families among --families answered without a "
                                                "call, in one turn (easy: a cold start that shows when not to call)")
    p.add_argument("--model", metavar="MODEL", help="whose chat template and end-of-turn token the traces use; "
                                                    "overrides model.name_or_path")
    p.add_argument("--tool-format", choices=("text", "chat"), default="text",
                   help="the call as a ```python block (grpo.tool_format=text) or as the chat template's structured "
                        "call, the schema shown in the prompt (grpo.tool_format=chat)")
    p.add_argument("--instruction", default="", help="the line after each problem (default: the traces' own for "
                                                     "the format, asking for the call)")
    p.add_argument("--output", "-o", required=True, help="output directory (samples.jsonl, task.json)")
    p.set_defaults(func=cmd_traces)

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

    p = cmd(sub, "eval", "avg@n, pass@k (unbiased), maj@k and greedy accuracy with standard errors on held-out "
                         "prompts; every sample and its verdict written to OUTPUT_DIR/archive.jsonl",
             "reasoning-rl eval --set model.name_or_path=runs/g1/final -n 8")
    add_config_args(p)
    add_task_args(p, verifier=True)
    add_split_arg(p, "test")
    add_run_dir_args(p, resume=False)
    p.add_argument("--resume", action="store_true", help="continue the stopped evaluation in output_dir from its "
                                                         "last finished batch (run the same command with it)")
    p.add_argument("--limit", type=NONNEG_INT, default=0, help="only the first N prompts (0 = all)")
    p.add_argument("-n", "--n", type=POS_INT, default=8, help="samples per prompt (k ranges over powers of two <= n; "
                                                              "1 at temperature 0)")
    p.add_argument("--temperature", type=NONNEG_FLOAT, default=1.0, help="sampling temperature (0 = greedy: one "
                                                                         "generation per prompt)")
    p.add_argument("--no-greedy", action="store_true", help="skip the extra greedy completion per prompt that a "
                                                            "temperature above 0 otherwise adds")
    p.set_defaults(func=cmd_eval)


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog="reasoning-rl", description="Verifier-centric RL for reasoning models.",
                epilog="example:\n  reasoning-rl demo")
    ap.add_argument("--version", action="version", version=f"reasoning-rl {version()}")
    ap.add_argument("--debug", action="store_true", help="show the traceback of a user error instead of one line")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=Parser)
    _add_inspect_commands(sub)
    add_sft_command(sub)
    _add_run_commands(sub)
    _add_data_commands(sub)
    add_train_commands(sub)
    add_recipe_command(sub)
    _add_demo_command(sub)
    return ap


def _add_inspect_commands(sub) -> None:
    """verifiers (list, verify, calibrate, probe), config, task check."""
    p = cmd(sub, "verifiers", "inspect installed verifiers", "reasoning-rl verifiers list")
    vsub = p.add_subparsers(dest="verifiers_command", metavar="ACTION", required=True, parser_class=Parser)
    q = cmd(vsub, "list", "name, version, source distribution and spec of every verifier",
            "reasoning-rl verifiers list --json")
    q.add_argument("--json", action="store_true", help="print JSON instead of a table")
    q.set_defaults(func=cmd_verifiers_list)
    from .verify import add_parsers

    add_parsers(sub, vsub, cmd, POS_INT, POS_FLOAT)

    p = cmd(sub, "config", "print the resolved config, or every knob with its help",
            "reasoning-rl config --config examples/code_rl/config.yaml --set grpo.steps=10")
    add_config_args(p)
    p.add_argument("--describe", action="store_true", help="list every knob, its default and help text")
    p.set_defaults(func=cmd_config)

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


def _add_run_commands(sub) -> None:
    """Commands on a finished (or running) run's directory: reverify, report."""
    p = cmd(sub, "reverify", "re-score a run's archived samples with the current (or another) verifier and report "
                             "the verdicts that flip", "reasoning-rl reverify runs/grpo-<time> --verifier math")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a training run's directory (archive.jsonl, task.json)")
    p.add_argument("--verifier", help="re-score the outcome with this verifier instead of the run's own terms")
    p.add_argument("--options", help="JSON options for --verifier, e.g. '{\"timeout\": 10}'")
    p.add_argument("--workers", type=POS_INT, default=2, help="verifier worker processes")
    p.add_argument("--output", "-o", help="report directory (default: RUN_DIR/reverify)")
    p.set_defaults(func=cmd_reverify)

    p = cmd(sub, "report", "one self-contained HTML page of a run: curves, every sample beside its verdict (the "
                           "part the verifier read highlighted), groups side by side, prompts, re-verification",
            "reasoning-rl report runs/grpo-<time>    (then open runs/grpo-<time>/report.html)")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run's directory (train, demo, eval, or one with reverify/)")
    p.add_argument("--output", "-o", help="the HTML file (default: RUN_DIR/report.html)")
    p.add_argument("--serve", action="store_true", help="serve it on localhost instead, rebuilt at each load and "
                                                        "reloading itself every 15 s (a run in progress)")
    p.add_argument("--port", type=NONNEG_INT, default=8765, help="with --serve (0 = any free port)")
    p.set_defaults(func=cmd_report)


def _add_demo_command(sub) -> None:
    p = cmd(sub, "demo", "the main job: SFT warm start (cached), then GRPO; held-out accuracy and a plot. With "
                         "--model, GRPO of a real chat model on word problems, sized for a 2-core CPU",
            "reasoning-rl demo --model smollm2-135m-instruct [--tools]")
    add_config_args(p)
    p.add_argument("--model", metavar="NAME", help="a real model's demo (smollm2-135m-instruct; its time on 2 cores "
                                                   "is in docs/results.md); its knobs apply over --config, under --set")
    p.add_argument("--tools", action="store_true", help="with --model: the tool demo, a cold start on generated "
                                                        "Python-tool traces then GRPO with the sandboxed tool "
                                                        "(about 25 minutes on 2 cores; cli/tool_demo.py)")
    p.add_argument("--traces", type=POS_INT, help="with --tools: generated tool traces for the cold start, and "
                                                  "training prompts for GRPO (default 400)")
    add_run_dir_args(p, resume=False)
    p.set_defaults(func=cmd_demo)


def cmd_report(args) -> int:
    from .report import serve, write_report

    if args.serve:
        serve(args.run_dir, args.port)
        return 0
    rep = write_report(args.run_dir, args.output)
    for line in rep.skipped:
        print(f"report: {line}", file=sys.stderr)
    print(f"written: {rep.run['written']} ({len(rep.samples)} samples, {len(rep.metrics)} metric lines); open it in "
          "any browser, no network needed")
    return 0


def _exiting(argv) -> None:
    """Run as the program (argv from the command line) and stopping already: a further Ctrl-C must not cut the exit
    short. (Called from Python with an argv, the caller's handlers stay.)"""
    if argv is None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def main(argv: list[str] | None = None) -> int:
    """Run one command. Exit status: its own (0 when it succeeded), 2 for a user error (one line naming the field
    and the value), 130 when interrupted (one line: where a training run stopped and how to continue it)."""
    from ..interrupts import Interrupted

    args = build_parser().parse_args(argv)
    command = " ".join(x for x in (args.command, getattr(args, "algorithm", None),
                                   getattr(args, "verifiers_command", None), getattr(args, "task_command", None)) if x)
    try:
        return args.func(args)
    except UserError as e:
        if args.debug:
            raise
        print(f"reasoning-rl {command}: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    except Interrupted as e:  # a trainer stopped after a round, with a checkpoint
        if args.debug:
            raise
        _exiting(argv)
        if os.environ.get("RANK", "0") == "0":  # under a launcher every rank stops; rank 0 says where
            print(f"reasoning-rl {command}: {e}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:  # stopped at once: whatever was being written is not used (checkpoints are atomic)
        if args.debug:
            raise
        _exiting(argv)
        kept = ("the last complete checkpoint, if any, is kept" if args.command in ("train", "sft", "demo") else
                "its finished batches are kept; continue with the same command and --resume" if args.command == "eval"
                else "its results are written whole or not at all: nothing was written")
        print(f"reasoning-rl {command}: interrupted; stopped at once ({kept})", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
