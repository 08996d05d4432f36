"""Problems where exact computation is the hard part for a small model, each with the short program that solves it:
the cold start's data for the Python tool (data/tool_traces.py turns them into traces).

    problem(family, rng, scale) -> ToolProblem(prompt, answer, plan, code)

Families (pure functions of a `random.Random` and a `scale`: 1 gives the traces' numbers, 2 the held-out problems'
bigger ones, in ranges of their own):
  products     "A warehouse ships 347 boxes of 28 jars each. How many jars ..."     multi-digit a * b
  sums         "Four shops sold 1,284, 907, 2,316 and 458 tickets ..."              a + b + c + d
  units        "A trip takes 3 hours 47 minutes. How many seconds is that?"        (h * 60 + m) * 60
  remainders   "1,234 eggs go into cartons of 12. How many eggs are left over?"     a % b
  choose       "A coach picks 4 of 15 players for a team. In how many ways ..."     C(n, k), with sympy
  easy         "Maya has 3 apples and gets 4 more ..."                             one-digit a + b (mixed in: a
               model that learned when calling pays should call less here)
The answer is an integer; the prompt never holds it; the program prints it (and nothing else). Problems are about
made-up things; none is taken from a data set.

Not here: running the programs (the sandbox does that, when a trace is made), prompts' rendering (task/task.py).
"""
from __future__ import annotations

import random
from dataclasses import dataclass

FAMILIES = ("products", "sums", "units", "remainders", "choose")
EASY = "easy"


@dataclass(frozen=True)
class ToolProblem:
    family: str
    prompt: str
    answer: int
    plan: str  # one line the trace opens with
    code: str  # prints the answer


def _big(rng: random.Random, digits: int) -> int:
    return rng.randint(10 ** (digits - 1), 10 ** digits - 1)


def products(rng: random.Random, scale: int) -> ToolProblem:
    a, b = _big(rng, 2 + scale), _big(rng, 1 + scale)
    what, unit = rng.choice((("boxes", "jars"), ("crates", "bottles"), ("rows", "seats"), ("trucks", "bags")))
    return ToolProblem("products", f"A warehouse ships {a:,} {what} with {b:,} {unit} in each. How many {unit} does "
                                   f"it ship in all?", a * b, f"I need {a:,} times {b:,}.", f"print({a} * {b})")


def sums(rng: random.Random, scale: int) -> ToolProblem:
    xs = [_big(rng, rng.choice((1 + 2 * scale, 2 + 2 * scale))) for _ in range(4)]  # 3-4 digits, held out 5-6
    shown = ", ".join(f"{x:,}" for x in xs[:-1]) + f" and {xs[-1]:,}"
    return ToolProblem("sums", f"Four shops sold {shown} tickets. How many tickets did they sell together?", sum(xs),
                       "I need the sum of the four numbers.", f"print(sum([{', '.join(map(str, xs))}]))")


def units(rng: random.Random, scale: int) -> ToolProblem:
    h, m = (rng.randint(2, 9) if scale == 1 else rng.randint(10, 40)), rng.randint(11, 59)
    return ToolProblem("units", f"A train trip takes {h} hours and {m} minutes. How many seconds does the trip take?",
                       (h * 60 + m) * 60, "Hours to minutes, add the minutes, then minutes to seconds.",
                       f"print(({h} * 60 + {m}) * 60)")


def remainders(rng: random.Random, scale: int) -> ToolProblem:
    b = rng.randint(7, 24) if scale == 1 else rng.randint(25, 60)
    a = _big(rng, 3 + scale)
    if a % b == 0:
        a += rng.randint(1, b - 1)
    return ToolProblem("remainders", f"{a:,} eggs are packed into cartons of {b}, filling as many cartons as "
                                     f"possible. How many eggs are left over?", a % b,
                       f"The eggs left over are {a:,} modulo {b}.", f"print({a} % {b})")


def choose(rng: random.Random, scale: int) -> ToolProblem:
    n = rng.randint(9, 20) if scale == 1 else rng.randint(21, 40)
    k = rng.randint(3, min(7, n - 2))
    who, pool, what = rng.choice((("A coach", "players", "team"), ("A club", "members", "committee"),
                                  ("A chef", "dishes", "menu"), ("A teacher", "pupils", "group")))
    from math import comb

    return ToolProblem("choose", f"{who} picks {k} of {n} {pool} for a {what}. In how many ways can the {what} be "
                                 f"chosen?", comb(n, k), f"This is {n} choose {k}.",
                       f"from sympy import binomial\nprint(binomial({n}, {k}))")


def easy(rng: random.Random, scale: int) -> ToolProblem:
    a, b = rng.randint(2, 9), rng.randint(2, 9)
    who, what = rng.choice(("Maya", "Leo", "Ana", "Sam", "Ivo", "Noor", "Kai", "Zoe")), \
        rng.choice(("apples", "pens", "shells", "stickers", "marbles", "cards"))  # 3,072 distinct problems
    return ToolProblem("easy", f"{who} has {a} {what} and gets {b} more. How many {what} does {who} have now?", a + b,
                       f"{a} plus {b}.", f"print({a} + {b})")


GENERATORS = {"products": products, "sums": sums, "units": units, "remainders": remainders, "choose": choose,
              "easy": easy}


def problem(family: str, rng: random.Random, scale: int = 1) -> ToolProblem:
    if family not in GENERATORS:
        raise ValueError(f"tool problems: unknown family {family!r}; valid: {sorted(GENERATORS)}")
    return GENERATORS[family](rng, scale)


def problems(n: int, seed: int, scale: int = 1, families=FAMILIES, tries: int = 1000) -> list[ToolProblem]:
    """`n` problems, the families in turn, each prompt distinct. A family that draws `tries` repeats in a row has run
    out of distinct problems: one line says which and how many it gave (never an endless loop)."""
    rng, out, seen, repeats = random.Random(seed), [], set(), 0
    while len(out) < n:
        family = families[len(out) % len(families)]
        p = problem(family, rng, scale)
        if p.prompt in seen:
            repeats += 1
            if repeats >= tries:
                given = sum(q.family == family for q in out)
                raise ValueError(f"tool problems: family {family!r} at scale {scale} gave {given} distinct problems "
                                 f"and then only repeats ({tries} in a row); ask for fewer than {n} problems")
            continue
        repeats = 0
        seen.add(p.prompt)
        out.append(p)
    return out
