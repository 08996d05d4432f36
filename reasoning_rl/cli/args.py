"""The command line's arguments and the checks that run before any model loads.

Argument types that carry the same ranges as the config knobs (`POS_INT`, `NONNEG_FLOAT`, ...), a parser
whose errors are one line and whose help shows every default and an example, and the input checks each
command runs first: the config, the run directory (never another run's by accident), the dataset's rows
and columns, verifier names, the model path and the configured tasks. Every failure is a `UserError`.
Not here: the commands themselves (cli/commands.py, cli/train.py, cli/data.py).
"""
from __future__ import annotations

import argparse
import dataclasses

from ..errors import UserError


def set_threads(cfg) -> None:
    """torch's intra-op threads and the C allocator as the config says (num_threads: 0 = device.resolve_threads;
    cpu_allocator)."""
    from ..models.device import configure_process

    configure_process(cfg)


def add_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", help="YAML or TOML config file")
    p.add_argument("--set", dest="overrides", metavar="KEY=VALUE", action="append", default=[],
                   help="override one knob, e.g. --set sft.steps=200 (repeatable; `reasoning-rl config --describe` "
                        "lists them)")


def add_run_dir_args(p: argparse.ArgumentParser, resume: bool = True) -> None:
    if resume:
        p.add_argument("--resume", action="store_true",
                       help="continue the run in output_dir from its checkpoint (the same trajectory); a changed "
                            "config key that breaks the trajectory is refused")
        p.add_argument("--resume-changed", action="store_true",
                       help="with --resume: continue even though keys changed that make the trajectory depart "
                            "(sampling, data, reward, model, optimiser)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the run already in output_dir (its run files only); without it such a run is refused")


def claim_output_dir(cfg, args, command: str, resume_file: str = ""):
    """cfg with the output_dir this run may write to: a new dated one when unset, never another run's by accident.
    `resume_file`: what a resumable run of this command leaves (its checkpoint by default)."""
    import os

    from ..data.run_dir import claim

    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # under `accelerate launch`: one directory for every rank
        if not cfg.output_dir:
            raise UserError("output_dir: a multi-process run needs a named run directory: --set output_dir=DIR")
        if int(os.environ.get("RANK", "0")) != 0:
            return cfg  # rank 0 checks it; the others would see rank 0's first files
    path = claim(cfg.output_dir, command, resume=getattr(args, "resume", False), overwrite=args.overwrite,
                 resume_file=resume_file)
    return dataclasses.replace(cfg, output_dir=path)


def add_task_args(p: argparse.ArgumentParser, verifier: bool = False) -> None:
    """The task options every data-reading command takes, each the same as a `tasks.*` knob."""
    p.add_argument("--dataset", help="same as --set tasks.source=...: a JSONL/JSON/Parquet/CSV file, a datasets "
                                     "folder or a Hub name (default: the embedded procedural tasks)")
    p.add_argument("--preset", help="same as --set tasks.preset=... (gsm8k, math, humaneval, mbpp, apps, ...)")
    p.add_argument("--reference-col", help="same as --set tasks.reference_col=...")
    if verifier:
        p.add_argument("--verifier", help="same as --set tasks.outcome=...: the outcome verifier (default: the "
                                          "preset's or kind's: code for tasks.kind=code, else math)")


def add_split_arg(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument("--split", choices=["train", "test", "all"], default=default,
                   help="the task's train split, its held-out split (tasks.test_split, or tasks.heldout_percent of a "
                        "source without one, by hash), or all rows")


def load_config(args, log=None):
    """The config file <- --set <- the task options (--dataset, --preset, --reference-col, --verifier); then, for a
    model folder that carries its training's prompt format (config/prompt_format.py), that format for every format
    knob the command did not set, said in one line on stderr (or to `log`)."""
    import sys

    from .. import config
    from ..config import prompt_format
    from ..config.sections import Config

    cfg = config.load(Config, args.config, args.overrides)
    cfg, note = prompt_format.adopt(cfg, config.given_keys(args.config, args.overrides))
    if note:
        (log or (lambda s: print(s, file=sys.stderr)))(note)
    task = {k: v for k, v in (("source", getattr(args, "dataset", None)), ("preset", getattr(args, "preset", None)),
                              ("reference_col", getattr(args, "reference_col", None)),
                              ("outcome", getattr(args, "verifier", None))) if v}
    if task:
        tasks = config.from_dict(type(cfg.tasks), {**config.to_dict(cfg.tasks), **task}, prefix="tasks")
        cfg = dataclasses.replace(cfg, tasks=tasks)
    from ..rollout.environments import check_environment

    for rl in (cfg.grpo, cfg.ppo):
        check_environment(rl)
    command = getattr(args, "algorithm", None)  # `train ALGORITHM`: its sampling checked before anything loads
    if command in ("grpo", "ppo", "distill"):
        from ..rollout.engines import check_sampling

        check_sampling(cfg, getattr(cfg, command), command)
    return cfg


def load_task(cfg, split: str | None = None, limit: int = 0, log=None):
    """The configured task, rows read, checked and rendered with the policy's tokenizer, before any model loads;
    with `split`, also that split's rows (the first `limit`). Dropped rows are counted on stderr."""
    from ..models.load import check_model_source, load_tokenizer, resolve_device
    from ..task.task import Task

    check_model_source(cfg.model.name_or_path, cfg.model.gguf_file)
    resolve_device(cfg.model.device)
    from ..rollout.environments import prompt_tools

    task = Task.from_config(cfg.tasks)
    task.render(load_tokenizer(cfg), tools=prompt_tools(cfg.grpo))  # `reasoning-rl eval` runs grpo's environment
    names = {"train": ("train", cfg.tasks.train_split), "test": ("held-out", "test", cfg.tasks.test_split)}
    task.note_dropped(*([log] if log else []), splits=None if split in (None, "all") else names[split])
    task.note_format(cfg.model.name_or_path, cfg.generation.stop, *([log] if log else []))
    if split is None:
        return task
    rows = task.rows(split)
    return task, (rows[:limit] if limit else rows)


def check_model(cfg) -> None:
    """Before anything loads: the model path exists, and the configured task can be read and rendered (a missing
    column, an empty split, an unknown verifier or family is one line now, not after minutes of SFT)."""
    load_task(cfg, log=lambda *_: None)


def ranged(kind, low: float, name: str, strict: bool = False):
    """An argparse type: `kind` (int or float) >= low (> low when strict); its error names the value."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {name}, got {text!r}") from None
        if value != value or value < low or (strict and value == low):  # NaN, or out of range
            raise argparse.ArgumentTypeError(f"expected {name}, got {text!r}")
        return value
    return parse


POS_INT = ranged(int, 1, "a whole number >= 1")
NONNEG_INT = ranged(int, 0, "a whole number >= 0")
POS_FLOAT = ranged(float, 0.0, "a number > 0", strict=True)
NONNEG_FLOAT = ranged(float, 0.0, "a number >= 0")


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit 2) and defaults shown in every help line."""

    def __init__(self, *a, **kw):
        kw.setdefault("formatter_class", HelpFormatter)
        super().__init__(*a, **kw)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    def _get_help_string(self, action):
        h = action.help or ""
        if action.default in (None, False, [], argparse.SUPPRESS) or "%(default)" in h:
            return h
        return h + " (default: %(default)s)"


def cmd(sub, name: str, help: str, example: str, **kw) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=help, description=help, epilog=f"example:\n  {example}", **kw)


def version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("reasoning-rl")
    except PackageNotFoundError:
        return "unknown (not installed)"
