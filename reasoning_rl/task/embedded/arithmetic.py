"""Procedural reasoning tasks with exact answers: the embedded default's data.

Families (each a pure function of a `random.Random`):
  add    a+b          operands up to `max_digits` digits
  sub    a-b          may go negative
  chain  a+b+c(+d)    small operands, several steps
  mul    a*b          one operand a single digit
  mul2   a*b          both operands up to `max_digits` digits (for the calculator tool: `tool_solution`)

Each row is {"prompt_id", "task", "prompt", "answer"}; the prompt is "<expr>=" and the
gold completion is the integer answer. `worked_solution` gives a second gold completion
that shows its work, schoolbook style, one column or one partial sum per step:

    47+85=  ->  "\n7+5=12;4+8+1=13\n132"        (direct: "132")
    3+5+7=  ->  "\n3+5=8;8+7=15\n15"

It opens with a newline (the "I will show my work" token) and ends with the answer alone
on its last line, which is where the `math` verifier and `last_int` look. The SFT warm
start mixes the two kinds (`sft.worked_fraction`); which one pays is for RL to find out. The split is decided by a stable hash of the
prompt text, so a prompt is in the train split or the held-out split, never both, for
any seed and any sizes. Same seed, same rows.

Word problems (word_add, word_sub, word_mul, word_two) are in task/embedded/word_problems.py; they are for a real
model, not the tiny one. Not here: reasoning-gym (its generators need
downloads of their own for some families; these four are all the demo needs).
"""
from __future__ import annotations

import random
import re
from typing import Callable

from ...config.knobs import ConfigError
from ...config.sections import TaskConfig
from .programs import make_code_rows
from .split import split_rows
from .word_problems import FAMILIES as WORD_FAMILIES
from ...registry import Registry

FAMILIES: Registry[Callable[[random.Random, int], tuple[str, int]]] = Registry("task family")
for _name, _fn in WORD_FAMILIES.items():  # word problems of one or two steps (task/embedded/word_problems.py)
    FAMILIES.add(_name, _fn)


def _operand(rng: random.Random, max_digits: int) -> int:
    digits = rng.randint(1, max_digits)
    return rng.randint(10 ** (digits - 1) if digits > 1 else 0, 10**digits - 1)


@FAMILIES.register("add")
def _add(rng: random.Random, max_digits: int) -> tuple[str, int]:
    a, b = _operand(rng, max_digits), _operand(rng, max_digits)
    return f"{a}+{b}=", a + b


@FAMILIES.register("sub")
def _sub(rng: random.Random, max_digits: int) -> tuple[str, int]:
    a, b = _operand(rng, max_digits), _operand(rng, max_digits)
    return f"{a}-{b}=", a - b


@FAMILIES.register("chain")
def _chain(rng: random.Random, max_digits: int) -> tuple[str, int]:
    xs = [_operand(rng, max(1, max_digits - 1)) for _ in range(rng.randint(3, 4))]
    return "+".join(map(str, xs)) + "=", sum(xs)


@FAMILIES.register("mul")
def _mul(rng: random.Random, max_digits: int) -> tuple[str, int]:
    a, b = rng.randint(2, 9), _operand(rng, max(1, max_digits - 1))
    return f"{a}*{b}=", a * b


@FAMILIES.register("mul2")
def _mul2(rng: random.Random, max_digits: int) -> tuple[str, int]:
    """Two operands of up to max_digits digits each: beyond what the tiny model computes in its head, within what
    it copies from a calculator (bench/tool_demo.py)."""
    a, b = _operand(rng, max_digits), _operand(rng, max_digits)
    return f"{a}*{b}=", a * b


def tool_solution(row: dict) -> str | None:
    """A calculator trace of an arithmetic row: the call, the tool's answer (what environments.Calculator
    answers), then the answer the model states: "<<37*48>>=1776\n1776". None for rows that are not arithmetic."""
    if "tests" in row or not row.get("prompt", "").endswith("="):
        return None
    return f"<<{row['prompt'][:-1]}>>={row['answer']}\n{row['answer']}"


def _digits(n: int) -> list[int]:
    return [int(ch) for ch in reversed(str(n))]  # units first


def _column_add(a: int, b: int) -> list[str]:
    xs, ys = _digits(a), _digits(b)
    steps, carry = [], 0
    for i in range(max(len(xs), len(ys))):
        x, y = (xs[i] if i < len(xs) else 0), (ys[i] if i < len(ys) else 0)
        s = x + y + carry
        steps.append(f"{x}+{y}" + (f"+{carry}" if carry else "") + f"={s}")
        carry = s // 10
    return steps


def _column_sub(a: int, b: int) -> list[str]:
    """a - b for a >= b, borrowing: a column that goes below zero is written with its ten, "12-7=5"."""
    xs, ys = _digits(a), _digits(b)
    steps, borrow = [], 0
    for i in range(len(xs)):
        x, y = xs[i], (ys[i] if i < len(ys) else 0)
        lend = x - y - borrow < 0
        steps.append(f"{x + 10 * lend}-{y}" + ("-1" if borrow else "") + f"={x + 10 * lend - y - borrow}")
        borrow = int(lend)
    return steps


_WORKED: dict[str, Callable[[list[int]], list[str]]] = {
    "add": lambda v: _column_add(v[0], v[1]),
    "sub": lambda v: _column_sub(v[0], v[1]) if v[0] >= v[1] else [f"-({v[1]}-{v[0]})"] + _column_sub(v[1], v[0]),
    "chain": lambda v: [f"{sum(v[:i])}+{v[i]}={sum(v[:i + 1])}" for i in range(1, len(v))],
    "mul": lambda v: [f"{v[0]}*{d}={v[0] * d}" for d in _digits(v[1])],
}


def worked_solution(row: dict) -> str | None:
    """The step-by-step gold completion of an arithmetic row (see the module docstring), or None for a
    family without one. Always ends with "\n<answer>"."""
    fn = _WORKED.get(row.get("task", ""))
    if fn is None or "tests" in row:
        return None
    operands = [int(x) for x in re.findall(r"\d+", row["prompt"])]
    steps = fn(operands)
    if row["task"].startswith("mul") and len(steps) > 1:
        steps.append("+".join(f"{v}{'0' * i}" for i, v in enumerate(operands[0] * d for d in _digits(operands[1]))))
    return "\n" + ";".join(steps) + "\n" + str(row["answer"])


def make_rows(cfg: TaskConfig) -> tuple[list[dict], list[dict]]:
    """(train_rows, test_rows), deterministic in `cfg`."""
    if cfg.kind == "code":
        return make_code_rows(cfg)
    if not cfg.families:
        raise ConfigError("tasks.families is empty")
    unknown = [name for name in cfg.families if name not in FAMILIES]
    if unknown:
        raise ConfigError(f"tasks.families: unknown family {unknown[0]!r}; valid: {sorted(FAMILIES.names())}")
    fams = [(name, FAMILIES.get(name)) for name in cfg.families]

    def draw(rng: random.Random) -> tuple[str, str, dict]:
        name, fn = fams[rng.randrange(len(fams))]
        prompt, ans = fn(rng, cfg.max_digits)
        return name, prompt, {"answer": str(ans)}

    return split_rows(draw, cfg, f"families={list(cfg.families)} max_digits={cfg.max_digits}")


def make_dataset(cfg: TaskConfig):
    """A `datasets.DatasetDict` with "train" and "test" splits."""
    from datasets import Dataset, DatasetDict

    train, test = make_rows(cfg)
    return DatasetDict({"train": Dataset.from_list(train), "test": Dataset.from_list(test)})
