"""The command line's arguments and the checks that run before any model loads.

Argument types that carry the same ranges as the config knobs (`POS_INT`, `NONNEG_FLOAT`, ...), a parser
whose errors are one line and whose help shows every default and an example, and the input checks each
command runs first: the config, the run directory (never another run's by accident), the dataset's rows
and columns, verifier names, the model path and the configured tasks. Every failure is a `UserError`.
Not here: the commands themselves (cli.py).
"""
from __future__ import annotations

import argparse
import dataclasses
import sys

from .errors import UserError


def add_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", help="YAML or TOML config file")
    p.add_argument("--set", dest="overrides", metavar="KEY=VALUE", action="append", default=[],
                   help="override one knob, e.g. --set sft.steps=200 (repeatable; `reasoning-rl config --describe` "
                        "lists them)")


def add_run_dir_args(p: argparse.ArgumentParser, resume: bool = True) -> None:
    if resume:
        p.add_argument("--resume", action="store_true",
                       help="continue the run in output_dir from its checkpoint (the same trajectory)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the run already in output_dir (its run files only); without it such a run is refused")


def load_config(args):
    from . import config
    from .configs import Config

    return config.load(Config, args.config, args.overrides)


def claim_output_dir(cfg, args, command: str):
    """cfg with the output_dir this run may write to: a new dated one when unset, never another run's by accident."""
    import os

    from .run_dir import claim

    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # under `accelerate launch`: one directory for every rank
        if not cfg.output_dir:
            raise UserError("output_dir: a multi-process run needs a named run directory: --set output_dir=DIR")
        if int(os.environ.get("RANK", "0")) != 0:
            return cfg  # rank 0 checks it; the others would see rank 0's first files
    path = claim(cfg.output_dir, command, resume=getattr(args, "resume", False), overwrite=args.overwrite)
    return dataclasses.replace(cfg, output_dir=path)


def prompt_rows(args, cfg, split: str, reference_col: str = "answer") -> list[dict]:
    """Rows from --dataset, else the embedded tasks' `split` ("train" or "test"); the first --limit of them.

    Checked before any model loads: every row has `prompt` and `reference_col`; rows whose reference is
    null or empty are dropped (counted on stderr); no usable row at all is a UserError."""
    from .cli_verifiers import read_rows
    from .tiny.tasks import make_rows

    source = args.dataset or f"the embedded {split} split"
    rows = read_rows(args.dataset) if args.dataset else make_rows(cfg.tasks)[0 if split == "train" else 1]
    rows = rows[: args.limit] if args.limit else rows
    if not rows:
        raise UserError(f"--dataset {source!r} has no rows")
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise UserError(f"--dataset {source!r}: row {i} is not an object: {str(r)[:60]!r}")
        for col in ("prompt", reference_col):
            if col not in r:
                raise UserError(f"--dataset {source!r}: row {i} has no {col!r} column (columns: {sorted(r)})")
    usable = [r for r in rows if r[reference_col] not in (None, "", [], {})]
    if not usable:
        raise UserError(f"--dataset {source!r}: no usable rows: all {len(rows)} have an empty {reference_col!r}")
    if len(usable) < len(rows):
        print(f"note: dropped {len(rows) - len(usable)} of {len(rows)} rows with an empty {reference_col!r}",
              file=sys.stderr)
    return usable


def check_verifier(name: str) -> str:
    import verifiers

    verifiers.get(name)  # an unknown name is a UserError listing the valid ones
    return name


def check_model(cfg) -> None:
    """Before anything loads: the model path exists, and the configured tasks can be built (an unknown
    family or too few distinct prompts is a one-line ConfigError now, not after minutes of SFT)."""
    from .models import check_model_source
    from .tiny.tasks import make_rows

    check_model_source(cfg.model.name_or_path)
    make_rows(cfg.tasks)


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
