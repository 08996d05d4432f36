"""Procedural coding tasks with exact hidden tests: the embedded default for code RL.

Each family is a short Python function specified in words (with its constants), e.g.

    # multiply x by 7 and add 12
    def f(x):
                                  -> gold body "    return x*7+12\\n"

and hidden `call` tests (five argument sets, expected values computed here); one family is a
`stdio` program ("# read n, print n*7" -> "print(int(input())*7)\\n"). A row is
{"prompt_id", "task", "prompt", "answer" (the gold completion, for SFT), "tests" (for the `code`
verifier)}. Train and held-out split by a stable hash of the prompt (never overlapping), seeded
like the arithmetic tasks; `tasks.kind=code` selects them.

Not here: natural-language docstrings beyond one line, or multi-function programs.
"""
from __future__ import annotations

import random
from typing import Callable

from ...registry import Registry
from .split import split_rows

CODE_FAMILIES: Registry[Callable[[random.Random], tuple[str, str, dict]]] = Registry("code task family")


def _ints(rng: random.Random, n: int = 5, lo: int = -20, hi: int = 50) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(n)]


def _lists(rng: random.Random, n: int = 5) -> list[list[int]]:
    return [[rng.randint(0, 20) for _ in range(rng.randint(0, 5))] for _ in range(n)]


def _call(fn, args_list) -> dict:
    return {"kind": "call", "entry_point": "f", "cases": [{"args": [a], "expected": fn(a)} for a in args_list]}


@CODE_FAMILIES.register("affine")
def _affine(rng):
    a, b = rng.randint(2, 19), rng.randint(0, 99)
    return (f"# multiply x by {a} and add {b}\ndef f(x):\n", f"    return x*{a}+{b}\n",
            _call(lambda x: x * a + b, _ints(rng)))


@CODE_FAMILIES.register("scale_list")
def _scale_list(rng):
    k = rng.randint(2, 999)
    return (f"# multiply each item of xs by {k}\ndef f(xs):\n", f"    return [v*{k} for v in xs]\n",
            _call(lambda xs: [v * k for v in xs], _lists(rng)))


@CODE_FAMILIES.register("digit_sum")
def _digit_sum(rng):
    k = rng.randint(0, 999)
    return (f"# sum of the digits of n, plus {k}\ndef f(n):\n", f"    return sum(int(c) for c in str(n))+{k}\n",
            _call(lambda n: sum(int(c) for c in str(n)) + k, _ints(rng, lo=0, hi=9999)))


@CODE_FAMILIES.register("reverse_add")
def _reverse_add(rng):
    k = rng.randint(1, 999)
    return (f"# reverse xs, then add {k} to each\ndef f(xs):\n", f"    return [v+{k} for v in xs[::-1]]\n",
            _call(lambda xs: [v + k for v in xs[::-1]], _lists(rng)))


@CODE_FAMILIES.register("collatz")
def _collatz(rng):
    a = rng.randint(2, 99)
    return (f"# {a}*x+1 if x is odd, else x//2\ndef f(x):\n", f"    return {a}*x+1 if x%2 else x//2\n",
            _call(lambda x: a * x + 1 if x % 2 else x // 2, _ints(rng, lo=0, hi=99)))


@CODE_FAMILIES.register("stdio_scale")
def _stdio_scale(rng):
    k = rng.randint(2, 999)
    xs = _ints(rng)
    return (f"# read n, print n*{k}\n", f"print(int(input())*{k})\n",
            {"kind": "stdio", "cases": [{"stdin": f"{x}\n", "expected_stdout": f"{x * k}\n"} for x in xs]})


def make_code_rows(cfg) -> tuple[list[dict], list[dict]]:
    """(train_rows, test_rows) for `cfg` (a TaskConfig with kind="code"), deterministic in it."""
    names = [n for n in cfg.families if n in CODE_FAMILIES] or list(CODE_FAMILIES)

    def draw(rng: random.Random) -> tuple[str, str, dict]:
        name = names[rng.randrange(len(names))]
        prompt, body, tests = CODE_FAMILIES.get(name)(rng)
        return name, prompt, {"answer": body, "tests": tests}

    return split_rows(draw, cfg, f"code families {names}")
